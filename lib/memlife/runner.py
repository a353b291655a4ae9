"""Execute one notebook for one profile: papermill with the profile's parameters, then usage.

    python -m memlife.runner 20_longmem_data --profile quick

writes results/notebooks/20_longmem_data.ipynb (the executed copy) and
results/usage/20_longmem_data.json (calls, cached_calls, recorded_calls, live_calls, tokens,
usd_estimate): calls = cached + live, and recorded counts the cached ones answered from the
profile's recording of replies (memlife.replies).

The executed copy appears only when every cell ran: papermill writes its output as it goes, so it
writes to a temporary name first. A failed run leaves results/notebooks/NAME.FAILED.ipynb (with the
error, for debugging) and no NAME.ipynb, so make runs it again next time.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

from . import config, llm, paths, replies


def check_paper_profile(profile: str) -> None:
    """The paper profile spends real money: it needs a configured endpoint and a spending cap —
    unless the run is replayed from recorded replies (MEMLIFE_LLM_MODE=replay), which sends
    nothing and fails on the first request the recording lacks."""
    if profile != "paper" or llm.mode() == "replay":
        return
    llm.configure(profile)
    embedded = [r for r in ("reader", "judge") if not llm.role_configured(r)]
    if embedded:
        raise SystemExit(f"profile 'paper' needs an API endpoint for {embedded}: set MEMLIFE_BASE_URL/"
                         f"OPENAI_API_KEY or configs/paper.yaml models (README, 'Backends')")
    if llm._settings.get("spend_cap_usd") is None and not os.environ.get("MEMLIFE_SPEND_CAP_USD"):
        raise SystemExit("profile 'paper' needs a spending cap: set MEMLIFE_SPEND_CAP_USD (US dollars); "
                         "each notebook prints its token estimate, and the run stops before passing the cap")


def run_notebook(name: str, profile: str, *, root: Path | None = None, kernel: str = "python3") -> dict:
    import papermill as pm

    check_paper_profile(profile)

    root = Path(root) if root else paths.repo_root()
    lay = paths.layout(profile, root)
    src = root / "notebooks" / f"{name}.ipynb"
    if not src.is_file():
        raise FileNotFoundError(f"{src}: no such notebook")
    params = config.notebook_params(profile, name, root)
    out = root / "results" / "notebooks" / f"{name}.ipynb"
    running = out.with_name(f"{name}.running.ipynb")
    failed = out.with_name(f"{name}.FAILED.ipynb")
    out.parent.mkdir(parents=True, exist_ok=True)
    lay.usage.mkdir(parents=True, exist_ok=True)
    calls_log = lay.usage / f"{name}.calls.jsonl"
    calls_log.unlink(missing_ok=True)  # the summary describes this run only
    env_before = os.environ.get("MEMLIFE_RUN")
    os.environ["MEMLIFE_RUN"] = name  # the kernel inherits it: its calls log under this run
    t0 = time.perf_counter()
    try:
        pm.execute_notebook(str(src), str(running), parameters=params, kernel_name=kernel,
                            cwd=str(root), progress_bar=False, log_output=False)
    except BaseException:
        # A stale copy from an earlier success would describe outputs this run may have replaced.
        out.unlink(missing_ok=True)
        if running.exists():
            running.replace(failed)
        raise
    else:
        running.replace(out)
        failed.unlink(missing_ok=True)
    finally:
        if env_before is None:
            os.environ.pop("MEMLIFE_RUN", None)
        else:
            os.environ["MEMLIFE_RUN"] = env_before
    summary = {"notebook": name, "profile": profile, **llm.summarize_calls(calls_log),
               "wall_s": round(time.perf_counter() - t0, 1)}
    (lay.usage / f"{name}.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    return summary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m memlife.runner", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("notebook", help="notebook stem, e.g. 00_backend")
    ap.add_argument("--profile", default="quick", choices=paths.PROFILES)
    args = ap.parse_args(argv)
    # make (or a user) stopping the run with SIGTERM: unwind through run_notebook, so the partial
    # copy is kept as NAME.FAILED.ipynb like any other failed run.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    s = run_notebook(args.notebook, args.profile)
    print(f"{args.notebook} [{args.profile}] {s['wall_s']:.0f} s: {s['calls']} calls "
          f"({s['recorded_calls']} recorded, {s['cached_calls'] - s['recorded_calls']} cached, "
          f"{s['live_calls']} live), {s['prompt_tokens']}+{s['completion_tokens']} tokens, "
          f"${s['usd_estimate']:.4f}")
    llm.configure(args.profile)
    recording = replies.active_path()
    if recording is not None and s["live_calls"]:
        print(f"  {s['live_calls']} requests were not in the recorded replies ({recording}) and were "
              f"answered by the model here: numbers resting on them may differ from the recording's")
    return 0


if __name__ == "__main__":
    sys.exit(main())
