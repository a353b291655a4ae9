"""A dress rehearsal: a profile's notebooks, estimated and then run end to end against the strict
loopback emulator (tests/strictserver.py) playing an endpoint, with every role pointed at it by the
README's variables alone.

    .venv/bin/python tools/rehearse.py --profile quick --model gpt-5-mini            # OpenAI reasoning model
    .venv/bin/python tools/rehearse.py --profile quick --model Qwen/Qwen2.5-7B-Instruct --window 32768
    .venv/bin/python tools/rehearse.py --profile paper --fraction 0.01               # the paper profile, 1/100

`--fraction F` runs the profile on F of its questions and conversations (rounded up;
`memlife.running.scale`, which `make pilot` uses too) and leaves every per-item size as it is:
history lengths, budgets, k, the restore cap, seeds, models, token budgets. The restore questions
are a sample stratified by type, as any profile's smaller selection is
(`memlife.reconstruct.select`), from the real S file where it is on disk and the reconstruction
otherwise (`source: auto`). The model-free controls (14, 25) check coverage over at least
`min_clusters` clusters, which a small fraction does not have, so a scaled rehearsal leaves them
out; they make no model call.

Prints, per notebook and role, the estimate's calls and prompt tokens against what
results/usage recorded, and each notebook's wall time and peak resident memory (GNU time: the
largest process of the notebook's tree, its kernel). Everything runs in scratch projects under
.cache/, with a model-call cache of its own; the figures are also written as JSON (--out).
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

from memlife.base import paths  # noqa: E402
from memlife.running import estimate, scale  # noqa: E402


def rehearsal_root(profile: str, fraction: float, without: tuple[str, ...] = ()) -> tuple[Path, list[str]]:
    """A project root whose configs/<profile>.yaml is the scaled profile; every other input linked."""
    return scale.scaled_root(profile, fraction, ROOT / ".cache" / "rehearsal-root" / profile, root=ROOT,
                             without=without, purpose="a dress rehearsal (tools/rehearse.py)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default="quick")
    ap.add_argument("--model", default="gpt-5-mini")
    ap.add_argument("--window", type=int, default=400_000)
    ap.add_argument("--audit-model", default="gpt-4.1-mini", help="the judge_audit role's (another model)")
    ap.add_argument("--fraction", type=float, default=1.0, help="of the profile's questions and conversations")
    ap.add_argument("--notebook", action="append", help="only these (default: every notebook, in order)")
    ap.add_argument("--without", action="append", default=[], metavar="SYSTEM",
                    help="a MemOps system to leave out, e.g. temp_lora (it answers with the local model and "
                         "sends nothing to the endpoint; its training dominates the wall time on a CPU)")
    ap.add_argument("--out", type=Path, help="the figures as JSON (default .cache/rehearsal/<profile>/rehearsal.json)")
    a = ap.parse_args()
    base, changes = rehearsal_root(a.profile, a.fraction, tuple(a.without))
    every = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    notebooks = a.notebook or [n for n in every if a.fraction == 1 or n not in scale.CONTROLS]
    calling = [n for n in notebooks if n in estimate.CALLING]
    cache = ROOT / ".cache" / "rehearsal-cache"
    shutil.rmtree(cache, ignore_errors=True)
    server = subprocess.Popen([sys.executable, str(ROOT / "tests" / "strictserver.py"), "--window", str(a.window)],
                              stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT / "lib")})
    url = server.stdout.readline().strip()
    env = {"MEMLIFE_BASE_URL": url, "MEMLIFE_MODEL": a.model, "OPENAI_API_KEY": "sk-rehearsal-not-a-key",
           "MEMLIFE_JUDGE_AUDIT_MODEL": a.audit_model, "MEMLIFE_CACHE_DIR": str(cache),
           "MEMLIFE_SPEND_CAP_USD": "1000", "MEMLIFE_SPEND_RUN": f"rehearsal-{int(time.time())}"}
    from memlife.models import accounting

    if accounting.price_usd(a.model, 1, 1) is None:
        env["MEMLIFE_PRICE_PER_MTOK"] = "0,0"  # a self-hosted model
    os.environ.update(env)
    print(f"== rehearsal: profile {a.profile} at fraction {a.fraction}, every role -> emulator as {a.model} "
          f"(window {a.window})", *(f"   {c}" for c in changes), sep="\n", flush=True)
    ran = []
    try:
        t0 = time.perf_counter()
        est = estimate.run(a.profile, calling, root=base, dest=cache / "estimate.json")
        est_s = time.perf_counter() - t0
        print(f"   estimate of {calling} in {est_s:.0f} s; failed: {est['failed'] or 'none'}", flush=True)
        scratch = estimate.prepare(a.profile, base, kind="rehearsal")
        for nb in notebooks:
            timing = scratch / f"{nb}.time"
            proc = subprocess.run(["/usr/bin/time", "-f", "%e %M", "-o", str(timing), sys.executable, "-m",
                                   "memlife.running.runner", nb, "--profile", a.profile],
                                  cwd=ROOT, env={**os.environ, "MEMLIFE_ROOT": str(scratch)})
            wall, peak_kb = timing.read_text().split()[-2:]
            usage = json.loads((paths.layout(a.profile, scratch).usage / f"{nb}.json").read_text()) if proc.returncode == 0 else {}
            # GNU time's wall (the whole process) over the runner's own (papermill's run alone)
            ran.append({**usage, "notebook": nb, "rc": proc.returncode, "wall_s": float(wall),
                        "peak_mb": int(peak_kb) // 1024})
            print(f"   {nb}: rc {proc.returncode}, {float(wall):.0f} s, {int(peak_kb) // 1024:,} MB", flush=True)
            if proc.returncode:
                break
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            tail = server.communicate(timeout=120)[0]
        except subprocess.TimeoutExpired:
            server.kill()
            tail = server.communicate()[0] + '\n{"accepted": null, "rejected": ["the emulator did not stop"]}'

    emulator = json.loads(tail.strip().splitlines()[-1])
    report = {"profile": a.profile, "fraction": a.fraction, "model": a.model, "window": a.window,
              "audit_model": a.audit_model, "changes": changes, "estimate_s": round(est_s, 1),
              "estimate": est, "ran": ran, "accepted": emulator["accepted"], "rejected": emulator["rejected"]}
    out = a.out or ROOT / ".cache" / "rehearsal" / a.profile / "rehearsal.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1, sort_keys=True, default=str) + "\n")
    print(f"== emulator accepted {emulator['accepted']} requests, rejected {len(emulator['rejected'])}: "
          f"{emulator['rejected'][:3]}")
    print(f"{'notebook':<20} {'role':<11} {'est. calls':>10} {'sent':>6} {'est. prompt':>12} {'sent prompt':>12} "
          f"{'wall s':>7} {'peak MB':>8}")
    by_nb = {e["notebook"]: e for e in est["notebooks"]}
    off = []
    for r in ran:
        e = by_nb.get(r["notebook"], {})
        roles = sorted(set(e.get("by_role", {})) | set(r.get("by_role", {}))) or ["-"]
        for i, role in enumerate(roles):
            er, rr = e.get("by_role", {}).get(role, {}), r.get("by_role", {}).get(role, {})
            for what in ("live_calls", "prompt_tokens"):
                if r["notebook"] in calling and abs(er.get(what, 0) - rr.get(what, 0)) > 0.1 * max(rr.get(what, 0), 1):
                    off.append(f"{r['notebook']} {role} {what}: estimated {er.get(what, 0):,}, sent {rr.get(what, 0):,}")
            tail = f"{r['wall_s']:>7.0f} {r['peak_mb']:>8,}" if i == 0 else ""
            print(f"{r['notebook'][:20]:<20} {role:<11} {er.get('live_calls', 0):>10,} {rr.get('live_calls', 0):>6,} "
                  f"{er.get('prompt_tokens', 0):>12,} {rr.get('prompt_tokens', 0):>12,} {tail}"
                  + ("" if r["rc"] == 0 else f"  FAILED rc {r['rc']}"))
    print("estimate within 10% of what was sent" if not off else "estimate more than 10% off:", *off, sep="\n  ")
    print(f"figures: {out}")
    return 0 if all(r["rc"] == 0 for r in ran) and not emulator["rejected"] and not off else 1


if __name__ == "__main__":
    sys.exit(main())
