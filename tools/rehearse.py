"""A dress rehearsal: a profile's model-calling notebooks, estimated and then run end to end against
the strict loopback emulator (tests/strictserver.py) playing an endpoint, with every role pointed at
it by the README's variables alone.

    .venv/bin/python tools/rehearse.py --profile quick --model gpt-5-mini            # OpenAI reasoning model
    .venv/bin/python tools/rehearse.py --profile quick --model Qwen/Qwen2.5-7B-Instruct --window 32768

Prints, per notebook and role, the estimate's calls and prompt tokens against what
results/usage recorded, and each notebook's wall time and peak memory (GNU time, the notebook's
whole process tree); everything runs in scratch projects under .cache/, with a cache of its own.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "lib"))

from memlife import estimate  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default="quick")
    ap.add_argument("--model", default="gpt-5-mini")
    ap.add_argument("--window", type=int, default=400_000)
    ap.add_argument("--audit-model", default="gpt-4.1-mini", help="the judge_audit role's (another model)")
    ap.add_argument("--notebook", action="append")
    a = ap.parse_args()
    notebooks = a.notebook or list(estimate.CALLING)
    cache = ROOT / ".cache" / "rehearsal-cache"
    shutil.rmtree(cache, ignore_errors=True)
    server = subprocess.Popen([sys.executable, str(ROOT / "tests" / "strictserver.py"), "--window", str(a.window)],
                              stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT / "lib")})
    url = server.stdout.readline().strip()
    env = {"MEMLIFE_BASE_URL": url, "MEMLIFE_MODEL": a.model, "OPENAI_API_KEY": "sk-rehearsal-not-a-key",
           "MEMLIFE_JUDGE_AUDIT_MODEL": a.audit_model, "MEMLIFE_CACHE_DIR": str(cache),
           "MEMLIFE_SPEND_CAP_USD": "1000", "MEMLIFE_SPEND_RUN": f"rehearsal-{int(time.time())}"}
    from memlife import llm

    if llm.price_usd(a.model, 1, 1) is None:
        env["MEMLIFE_PRICE_PER_MTOK"] = "0,0"  # a self-hosted model
    os.environ.update(env)
    try:
        t0 = time.perf_counter()
        est = estimate.run(a.profile, notebooks, root=ROOT, dest=cache / "estimate.json")
        est_s = time.perf_counter() - t0
        scratch = estimate.prepare(a.profile, ROOT, kind="rehearsal")
        ran = []
        for nb in notebooks:
            timing = scratch / f"{nb}.time"
            proc = subprocess.run(["/usr/bin/time", "-f", "%e %M", "-o", str(timing), sys.executable, "-m",
                                   "memlife.runner", nb, "--profile", a.profile],
                                  cwd=ROOT, env={**os.environ, "MEMLIFE_ROOT": str(scratch)})
            wall, peak_kb = timing.read_text().split()[-2:]
            usage = json.loads((scratch / "results" / "usage" / f"{nb}.json").read_text()) if proc.returncode == 0 else {}
            ran.append({"notebook": nb, "rc": proc.returncode, "wall_s": float(wall), "peak_mb": int(peak_kb) // 1024,
                        **usage})
    finally:
        server.send_signal(signal.SIGINT)
        tail = server.communicate(timeout=30)[0]
    emulator = json.loads(tail.strip().splitlines()[-1])
    print(f"== rehearsal: profile {a.profile}, every role -> emulator as {a.model} (window {a.window}); "
          f"estimate in {est_s:.0f} s; emulator accepted {emulator['accepted']} requests, rejected "
          f"{len(emulator['rejected'])}: {emulator['rejected'][:3]}")
    print(f"{'notebook':<18} {'role':<11} {'est. calls':>10} {'sent':>6} {'est. prompt':>12} {'sent prompt':>12} "
          f"{'wall s':>7} {'peak MB':>8}")
    by_nb = {e["notebook"]: e for e in est["notebooks"]}
    for r in ran:
        e = by_nb.get(r["notebook"], {})
        roles = sorted(set(e.get("by_role", {})) | set(r.get("by_role", {}))) or ["-"]
        for i, role in enumerate(roles):
            er, rr = e.get("by_role", {}).get(role, {}), r.get("by_role", {}).get(role, {})
            tail = f"{r['wall_s']:>7.0f} {r['peak_mb']:>8,}" if i == 0 else ""
            print(f"{r['notebook'][:18]:<18} {role:<11} {er.get('live_calls', 0):>10,} {rr.get('live_calls', 0):>6,} "
                  f"{er.get('prompt_tokens', 0):>12,} {rr.get('prompt_tokens', 0):>12,} {tail}"
                  + ("" if r["rc"] == 0 else f"  FAILED rc {r['rc']}"))
    return 0 if all(r["rc"] == 0 for r in ran) and not emulator["rejected"] else 1


if __name__ == "__main__":
    sys.exit(main())
