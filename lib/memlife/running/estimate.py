"""What a run would send and cost, before it sends anything: `make estimate PROFILE=P`.

    python -m memlife.running.estimate --profile paper                      # every notebook that calls a model
    python -m memlife.running.estimate --profile paper --notebook 22_read_restore

The notebooks run as they would, in a scratch copy of the project's results
(.cache/estimate/<profile>/), with the llm mode "estimate": a request found in the recording or
the cache is answered from it and costs nothing; any other is not sent — it is counted with its
prompt (o200k tokens) and its whole completion budget (reasoning allowance included, the worst
case the spending ledger reserves), priced for the configured model, and answered with a stand-in
reply (`memlife.models.standin`) so that the notebook takes the paths a run takes; asked again later in
the estimate, it counts as cached, as a run's cache would answer it. Nothing enters the cache,
and the project's own results are not touched.

The calls counted are exact where the run's structure fixes them (one reader call per probe,
system and setting; one importance score per distinct unit; one judge call per answer) and an
estimate where real replies steer the run: an LLM generator whose conversations fail the gates
is asked again (up to max_attempts), Mem0 asks more when it finds memories to update, and the
LLM-importance policy evicts by the scores it gets. Completion tokens are the budgets, so the
dollars are an upper bound for the calls counted.

Temp-LoRA trains before it answers, which no call count shows: where notebook 12 runs it, the
estimate also says what its training costs on this machine — every history's chunks x epochs
gradient steps (`memops.systems.temp_lora_schedule`), times the seconds one step of the longest
kind takes here, measured (`measure_temp_lora_step`) and scaled by each step's tokens — for
every setting of the profile, those its `temp_lora_settings` leave out included.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from memlife.base import config, paths

# The notebooks that call a model (config.NOTEBOOK_ROLES) and those whose outputs they read (20
# makes the data 21 reads), in an order that respects the DAG: an upstream notebook's number is
# lower. 00_backend's handful of calls check the backend and its cache, which an estimate never fills.
CALLING = tuple(sorted({nb for calling in config.NOTEBOOK_ROLES if calling != "00_backend"
                        for nb in (calling, *config.upstream(calling))}))
# What a notebook reads from the project itself rather than from an earlier notebook.
# MemOS's own environment is found under the project root (memops.systems.memos_python): without
# it the scratch run would skip MemOS and count none of its calls.
_SHARED = ("notebooks", "configs", "results/replies", "results/paper_reference", "data/raw",
           "tests/data", ".venv-memos")


def scratch_root(profile: str, root: Path | None = None, kind: str = "estimate") -> Path:
    return paths.layout(profile, root).cache / kind / profile


def prepare(profile: str, root: Path | None = None, kind: str = "estimate") -> Path:
    """A fresh scratch project under the cache: the shared inputs linked, every output of its own
    (an estimate's, or a dress rehearsal's, never in the project's results)."""
    import shutil

    root = Path(root) if root else paths.repo_root()
    scratch = scratch_root(profile, root, kind)
    if scratch.exists():
        shutil.rmtree(scratch)
    scratch.mkdir(parents=True)
    for rel in _SHARED:
        src = root / rel
        if src.exists():
            dst = scratch / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.symlink_to(src.resolve(), target_is_directory=src.is_dir())
    return scratch


def run(profile: str, notebooks: list[str] | None = None, *, root: Path | None = None, quiet: bool = True,
        dest: Path | None = None) -> dict:
    """Run `notebooks` (default: every one that calls a model) in estimate mode; the estimate, as
    written to `dest` (default results/<profile>/usage/estimate-<profile>.json)."""
    from memlife.running import runner

    root = Path(root) if root else paths.repo_root()
    chosen = list(notebooks or CALLING)
    unknown = [n for n in chosen if not (root / "notebooks" / f"{n}.ipynb").is_file()]
    if unknown:
        raise SystemExit(f"no such notebook: {unknown}")
    scratch = prepare(profile, root)
    cache = os.environ.get("MEMLIFE_CACHE_DIR") or str(paths.layout(profile, root).cache)
    rows, failed = [], {}
    from memlife.models import accounting, reply_cache

    with runner.environ(MEMLIFE_ROOT=str(scratch), MEMLIFE_CACHE_DIR=cache, MEMLIFE_LLM_MODE="estimate",
                        **{reply_cache.ESTIMATE_SEEN_ENV: str(scratch / "estimated")}):
        for name in chosen:
            try:
                rows.append(runner.run_notebook(name, profile, root=scratch, quiet=quiet))
            except Exception as exc:  # counted up to where it stopped; later notebooks may need it
                failed[name] = f"{type(exc).__name__}: {str(exc).strip()[-300:]}"
                usage = paths.layout(profile, scratch).usage / f"{name}.calls.jsonl"
                if usage.exists():
                    rows.append({"notebook": name, "profile": profile, **accounting.summarize_calls(usage), "failed": True})
    out = {"profile": profile, "notebooks": rows, "failed": failed, "scratch": str(scratch)}
    if "12_memops_eval" in chosen:
        try:
            out["temp_lora"] = temp_lora_cost(profile, [scratch, root], root=root)
        except FileNotFoundError as exc:  # no dataset built: nothing to count
            out["temp_lora"] = {"skipped": str(exc)}
    dest = Path(dest) if dest else paths.layout(profile, root).usage / f"estimate-{profile}.json"
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    out["written"] = str(dest)
    return out


# Seconds one Temp-LoRA step takes at its longest, given instead of measured (tests; a machine
# whose measurement is known).
STEP_SECONDS_ENV = "MEMLIFE_TEMP_LORA_STEP_S"


def temp_lora_cost(profile: str, roots: list[Path], *, root: Path | None = None,
                   step_seconds: float | None = None) -> dict | None:
    """What Temp-LoRA's training would take at `profile` on this machine, per setting: histories,
    their tokens (the embedded model's), gradient steps (chunks x epochs) and estimated hours, and
    whether the profile runs it there (`temp_lora_settings`). None when notebook 12 does not run
    Temp-LoRA. The dataset is read from the first of `roots` that has it."""
    from memlife.memops import evaluate, reading, temp_lora
    from memlife.memops.schema import load_instances
    from memlife.models import tokens

    params = config.notebook_params(profile, "12_memops_eval", root)
    if "temp_lora" not in params.get("systems", []):
        return None
    lay = paths.layout(profile, root)
    found = [Path(r) / lay.data.relative_to(lay.root) / "memops" / "instances.jsonl" for r in roots]
    data = next((f for f in found if f.is_file()), None)
    if data is None:
        raise FileNotFoundError(f"no MemOps dataset for profile {profile} (looked for {', '.join(map(str, found))})")
    chosen = evaluate.select_instances(load_instances(data), params.get("max_instances"))
    cfg = temp_lora.TempLoRAConfig(epochs=params["temp_lora_epochs"])
    longest = cfg.chunk_tokens + cfg.context_tokens
    if step_seconds is None:
        given = os.environ.get(STEP_SECONDS_ENV)
        step_seconds = float(given) if given else temp_lora.measure_temp_lora_step(cfg)
    settings = []
    for setting in params.get("settings", []):
        lengths = [len(tokens.embedded_ids(temp_lora.TempLoRASystem.history_text(reading.history_for(i, setting))))
                   for i in chosen]
        steps = [temp_lora.temp_lora_schedule(n, cfg) for n in lengths]
        step_tokens = sum(s.tokens for sched in steps for s in sched)
        settings.append({"setting": setting, "runs": setting in params.get("temp_lora_settings", []),
                         "histories": len(lengths), "tokens": sum(lengths), "max_tokens": max(lengths, default=0),
                         "steps": sum(len(s) for s in steps),
                         "hours": step_tokens / longest * step_seconds / 3600})
    return {"base_model": temp_lora.TempLoRASystem.base_model(), "chunk_tokens": cfg.chunk_tokens,
            "context_tokens": cfg.context_tokens, "epochs": cfg.epochs, "lr": cfg.lr, "rank": cfg.rank,
            "step_tokens": longest, "step_seconds": step_seconds, "settings": settings}


def render_temp_lora(t: dict | None) -> list[str]:
    if not t:
        return []
    if "skipped" in t:
        return [f"Temp-LoRA training: not estimated ({t['skipped']})"]
    lines = [f"Temp-LoRA training, an estimate (no call counts it): {t['base_model']}, chunks of {t['chunk_tokens']} "
             f"tokens with up to {t['context_tokens']} before each, {t['epochs']} epochs per chunk, lr {t['lr']:g}, "
             f"rank {t['rank']}; one {t['step_tokens']:,}-token step took {t['step_seconds']:.1f} s on this machine, "
             f"shorter steps scaled by their tokens"]
    for s in t["settings"]:
        lines.append(f"  {s['setting']:<13} {s['histories']:>5,} histories, {s['tokens']:>12,} tokens (longest "
                     f"{s['max_tokens']:,}), {s['steps']:>8,} steps, ~{s['hours']:,.1f} h"
                     + ("" if s["runs"] else "  (not run at this profile: temp_lora_settings)"))
    return lines


def render(est: dict) -> str:
    """The estimate as a table: per notebook and role, calls, those answered already, those to send
    with their tokens and dollars."""
    head = (f"{'notebook':<18} {'role':<11} {'model':<26} {'calls':>7} {'answered':>8} {'to send':>8} "
            f"{'prompt tok':>11} {'compl. tok':>11} {'USD (max)':>10}")
    lines = [f"== [{est['profile']}] estimate: what a run would send (nothing was sent)", head]
    total = {"calls": 0, "cached_calls": 0, "live_calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "usd": 0.0}
    unpriced: set[str] = set()
    for nb in est["notebooks"]:
        unpriced |= set(nb.get("unpriced_models") or [])
        for role, r in sorted((nb.get("by_role") or {}).items()):
            lines.append(f"{nb['notebook'][:18]:<18} {role:<11} {', '.join(r['models'])[:26]:<26} {r['calls']:>7,} "
                         f"{r['cached_calls']:>8,} {r['live_calls']:>8,} {r['prompt_tokens']:>11,} "
                         f"{r['completion_tokens']:>11,} {r['usd']:>10.2f}")
            for k in total:
                total[k] += r[k if k != "usd" else "usd"]
    lines.append(f"{'total':<57} {total['calls']:>7,} {total['cached_calls']:>8,} {total['live_calls']:>8,} "
                 f"{total['prompt_tokens']:>11,} {total['completion_tokens']:>11,} {total['usd']:>10.2f}")
    if unpriced:
        lines.append(f"unpriced (not in the dollars; give MEMLIFE_<ROLE>_PRICE_PER_MTOK): {sorted(unpriced)}")
    lines += render_temp_lora(est.get("temp_lora"))
    for name, why in sorted(est["failed"].items()):
        lines.append(f"{name} stopped in estimate mode ({why}); its calls are counted up to there")
    lines.append(f"per notebook and role: {est.get('written', '')}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m memlife.running.estimate", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default="quick", help="any configs/<name>.yaml")
    ap.add_argument("--notebook", action="append", help="only this notebook (repeatable); default: all that call a model")
    args = ap.parse_args(argv)
    est = run(args.profile, args.notebook)
    print(render(est))
    return 1 if est["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
