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
dollars are an upper bound for the calls counted. The dollars come four ways per role: at list
price without the provider's prompt cache, at list price with the prompt tokens it would serve
(modelled: `memlife.models.prompt_cache`), and the same two at the Batch API's price.

The estimate's JSON (results/<profile>/usage/estimate-<profile>.json) also holds, per notebook,
its wall time, and the fingerprint of what it counted (`fingerprint`: the resolved profile, every
role's endpoint per track, the recording), so that `make pilot` reuses it only while they hold.
Before it starts, an estimate says how long the last one of the profile took here (`announce`).

Temp-LoRA trains before it answers, which no call count shows: where notebook 12 runs it, the
estimate also says what its training costs on this machine — every history's chunks x epochs
gradient steps (`memops.systems.temp_lora.temp_lora_schedule`), times the seconds one step of the longest
kind takes here, measured (`measure_temp_lora_step`) and scaled by each step's tokens — for
every setting of the profile, those its `temp_lora_settings` leave out included.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

from memlife.base import config, paths, progress
from memlife.running import scale

# The notebooks that call a model (config.NOTEBOOK_ROLES) and those whose outputs they read (20
# makes the data 21 reads), in an order that respects the DAG: an upstream notebook's number is
# lower. 00_backend's handful of calls check the backend and its cache, which an estimate never fills.
CALLING = tuple(sorted({nb for calling in config.NOTEBOOK_ROLES if calling != "00_backend"
                        for nb in (calling, *config.upstream(calling))}))
# What a notebook reads from the project itself rather than from an earlier notebook.
# MemOS's own environment is found under the project root (memops.systems.managed.memos_python): without
# it the scratch run would skip MemOS and count none of its calls.
_SHARED = ("configs", *scale.INPUTS)


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


def default_path(profile: str, root: Path | None = None) -> Path:
    return paths.layout(profile, root).usage / f"estimate-{profile}.json"


def fingerprint(profile: str, root: Path | None = None) -> dict:
    """What an estimate of `profile` counts from, besides the code and the cache: the profile
    resolved (config.load_profile), every role's endpoint in each track (runner.endpoint_fingerprint)
    and the SHA-256 of the recording it replays (None: none); as its JSON reads back."""
    from memlife.models import endpoints, replies
    from memlife.running import runner

    root = Path(root) if root else paths.repo_root()
    out: dict = {"profile": config.load_profile(profile, root), "endpoints": {}}
    with runner.environ(MEMLIFE_ROOT=str(root)):  # the profile's models as `root` has them
        for track in sorted(set(config.TRACKS.values())):
            endpoints.configure(profile, track=track)
            out["endpoints"][track] = {r: _counted(runner.endpoint_fingerprint(endpoints.endpoint_for(r)))
                                       for r in config.ROLES}
        recording = replies.active_path()
    out["recording_sha256"] = None if recording is None else runner._sha256(recording)
    return json.loads(json.dumps(out, sort_keys=True, default=str))


def _counted(ep: dict) -> dict:
    """An endpoint's fingerprint as the counts see it: the model and how it is asked, not where it
    is served (the same model behind another URL, a proxy or a stand-in, gets the same requests)."""
    return {**ep, "base_url": "embedded" if ep["base_url"] == "embedded" else "remote"}


def role_prices(profile: str, rows: list[dict]) -> None:
    """Each row's roles (a notebook's `by_role`) with the price its endpoint has in the notebook's
    track, and the dollars four ways: list price without and with the modelled prompt cache
    (`usd_list`, `usd_list_cached`, which is `usd`), and the Batch API's price without and with it
    (`usd_batch`, `usd_batch_cached`); None where the model is unpriced."""
    from memlife.models import accounting, endpoints, llm

    for row in rows:
        endpoints.configure(profile, track=config.track_of(row["notebook"]))
        for role, r in (row.get("by_role") or {}).items():
            # A local model's own generations (Temp-LoRA's: a role of its own) cost nothing and go to no endpoint.
            price = llm.get_client(role).price() if role in config.ROLES else accounting.Price(0.0, 0.0, 0.0)
            r["price_per_mtok"] = None if price is None else {
                "input": price.input, "output": price.output, "cached_input": price.cached_input,
                "batch_factor": price.batch_factor}
            for key, cached, batch in (("usd_list", False, False), ("usd_list_cached", True, False),
                                       ("usd_batch", False, True), ("usd_batch_cached", True, True)):
                r[key] = None if price is None else round(price.usd(
                    r["prompt_tokens"], r["completion_tokens"],
                    cached_tokens=r.get("cached_prompt_tokens", 0) if cached else 0, batch=batch), 6)


def repriced(est: dict, model: str) -> dict:
    """The estimate's counts priced as if every remote role were `model` (its list price): tokens,
    and dollars at list and batch price, with and without the modelled prompt cache; the
    completions are the budgets, so each figure is a ceiling, and `usd_prompt_share` says how much
    of it the prompts alone make (the part a model's shorter replies cannot lower)."""
    from memlife.models import accounting, serve

    price = accounting.list_price(model)
    if price is None:
        raise SystemExit(f"{model!r} has no list price in memlife.models.accounting; give its price instead")
    tot = {"prompt_tokens": 0, "cached_prompt_tokens": 0, "completion_tokens": 0, "calls": 0}
    for row in est["notebooks"]:
        for role, r in (row.get("by_role") or {}).items():
            if role not in config.ROLES or all(m.startswith(serve.MODEL_ALIAS) for m in r["models"]):
                continue  # a local model's (Temp-LoRA, the embedded server): nothing sent to an API
            tot["calls"] += r["live_calls"]
            for k in ("prompt_tokens", "cached_prompt_tokens", "completion_tokens"):
                tot[k] += r.get(k, 0)
    out = {"model": model, **tot}
    for key, cached, batch in (("usd_list", False, False), ("usd_list_cached", True, False),
                               ("usd_batch", False, True), ("usd_batch_cached", True, True)):
        out[key] = round(price.usd(tot["prompt_tokens"], tot["completion_tokens"],
                                   cached_tokens=tot["cached_prompt_tokens"] if cached else 0, batch=batch), 2)
    out["usd_prompt_share"] = round(price.usd(tot["prompt_tokens"], 0) / out["usd_list"], 3) if out["usd_list"] else 0.0
    return out


def render_repriced(rows: list[dict]) -> str:
    lines = [f"{'as model':<16} {'calls':>9} {'prompt tok':>13} {'cached':>13} {'compl. tok':>12} "
             f"{'list':>9} {'list+cache':>10} {'batch':>9} {'batch+cache':>11} {'prompts':>8}"]
    for r in rows:
        lines.append(f"{r['model']:<16} {r['calls']:>9,} {r['prompt_tokens']:>13,} {r['cached_prompt_tokens']:>13,} "
                     f"{r['completion_tokens']:>12,} {r['usd_list']:>9,.2f} {r['usd_list_cached']:>10,.2f} "
                     f"{r['usd_batch']:>9,.2f} {r['usd_batch_cached']:>11,.2f} {r['usd_prompt_share']:>8.0%}")
    lines.append("US dollars, ceilings: every completion at its whole budget; 'prompts' is the share of the list "
                 "price the prompts alone make")
    return "\n".join(lines)


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
    started, t0 = time.time(), time.perf_counter()
    fp = fingerprint(profile, root)
    scratch = prepare(profile, root)
    cache = os.environ.get("MEMLIFE_CACHE_DIR") or str(paths.layout(profile, root).cache)
    rows, failed = [], {}
    from memlife.models import accounting, reply_cache

    with runner.environ(MEMLIFE_ROOT=str(scratch), MEMLIFE_CACHE_DIR=cache, MEMLIFE_LLM_MODE="estimate",
                        **{reply_cache.ESTIMATE_SEEN_ENV: str(scratch / "estimated")}):
        for name in chosen:
            t1 = time.perf_counter()
            try:
                rows.append(runner.run_notebook(name, profile, root=scratch, quiet=quiet))
            except Exception as exc:  # counted up to where it stopped; later notebooks may need it
                failed[name] = f"{type(exc).__name__}: {str(exc).strip()[-300:]}"
                usage = paths.layout(profile, scratch).usage / f"{name}.calls.jsonl"
                if usage.exists():
                    rows.append({"notebook": name, "profile": profile, **accounting.summarize_calls(usage),
                                 "failed": True, "wall_s": round(time.perf_counter() - t1, 1)})
        role_prices(profile, rows)
    out = {"profile": profile, "notebooks": rows, "failed": failed, "scratch": str(scratch), "fingerprint": fp,
           "made": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started)), "host": platform.node()}
    if "12_memops_eval" in chosen:
        try:
            out["temp_lora"] = temp_lora_cost(profile, [scratch, root], root=root)
        except FileNotFoundError as exc:  # no dataset built: nothing to count
            out["temp_lora"] = {"skipped": str(exc)}
    out["wall_s"] = round(time.perf_counter() - t0, 1)
    dest = Path(dest) if dest else default_path(profile, root)
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    out["written"] = str(dest)
    return out


def read(path: Path) -> dict | None:
    """The JSON at `path` (an estimate's, a pilot's), or None when there is none or it cannot be read."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


def took(last: dict | None, notebooks: list[str], what: str) -> str | None:
    """How long the notebooks `notebooks` took in `last` (an estimate's or a pilot's JSON: per notebook
    its wall_s), said as one line; None when `last` has none of them."""
    rows = {r.get("notebook"): r for r in (last or {}).get("notebooks") or [] if r.get("wall_s") is not None}
    known = [n for n in notebooks if n in rows]
    if not known:
        return None
    where = "here" if last.get("host") in (None, platform.node()) else f"on another machine ({last['host']})"
    line = (f"the last {what} ({last.get('made') or 'undated'}, {where}) took "
            f"{progress.clock(sum(rows[n]['wall_s'] for n in known))} for {', '.join(known)}")
    missing = [n for n in notebooks if n not in rows]
    return line + (f"; it did not run {', '.join(missing)}, so add their time" if missing else "")


def announce(profile: str, notebooks: list[str], *, root: Path | None = None, path: Path | None = None) -> str:
    """What an estimate of `notebooks` is about to do and how long the last one took here; where no
    earlier estimate says, that this cannot be told, and how big the profile is."""
    last = read(path or default_path(profile, root))
    line = took(last, notebooks, f"estimate of {profile}")
    head = f"== [{profile}] estimating {', '.join(notebooks)} (nothing is sent)"
    if line:
        changed = last.get("fingerprint") not in (None, fingerprint(profile, root))
        return (f"{head}; {line}: expect about as long"
                + (", though the profile or its models have changed since" if changed else ""))
    size = "; ".join(scale.items(config.load_profile(profile, root), notebooks)) or "no items"
    return (f"{head}; how long it takes cannot be told: no earlier estimate of {profile} here. It runs "
            f"every notebook over the whole profile ({size}), a stand-in answering each model call, so its "
            f"time is the notebooks' own computing")


# Seconds one Temp-LoRA step takes at its longest, given instead of measured (tests; a machine
# whose measurement is known).
STEP_SECONDS_ENV = "MEMLIFE_TEMP_LORA_STEP_S"


def temp_lora_cost(profile: str, roots: list[Path], *, root: Path | None = None,
                   step_seconds: float | None = None) -> dict | None:
    """What Temp-LoRA's training would take at `profile` on this machine, per setting: histories,
    their tokens (the embedded model's), gradient steps (chunks x epochs) and estimated hours, and
    whether the profile runs it there (`temp_lora_settings`). None when notebook 12 does not run
    Temp-LoRA. The dataset is read from the first of `roots` that has it."""
    from memlife.memops.systems import answering, reading, temp_lora
    from memlife.memops.data.schema import load_instances
    from memlife.models import tokens

    params = config.notebook_params(profile, "12_memops_eval", root)
    if "temp_lora" not in params.get("systems", []):
        return None
    lay = paths.layout(profile, root)
    found = [Path(r) / lay.data.relative_to(lay.root) / "memops" / "instances.jsonl" for r in roots]
    data = next((f for f in found if f.is_file()), None)
    if data is None:
        raise FileNotFoundError(f"no MemOps dataset for profile {profile} (looked for {', '.join(map(str, found))})")
    chosen = answering.select_instances(load_instances(data), params.get("max_instances"))
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


_MONEY = ("usd_list", "usd_list_cached", "usd_batch", "usd_batch_cached")


def _dollars(r: dict) -> dict:
    """The four dollar figures of a role's row; an estimate made before they were kept has only
    `usd` (list price, no prompt cache then)."""
    if "usd_list" not in r:
        return {"usd_list": r["usd"], "usd_list_cached": r["usd"], "usd_batch": None, "usd_batch_cached": None}
    return {k: r[k] for k in _MONEY}


def _usd(x: float | None, width: int) -> str:
    """Dollars to the cent, and to a hundredth of a cent below a dollar; '-' where not known."""
    return f"{'-':>{width}}" if x is None else f"{x:>{width},.2f}" if abs(x) >= 1 else f"{x:>{width}.4f}"


def render(est: dict) -> str:
    """The estimate as a table: per notebook and role, calls, those answered already, those to send
    with their prompt tokens (those the provider's cache would serve, modelled), completion budgets,
    and dollars at list and batch price, each without and with the prompt cache."""
    head = (f"{'notebook':<18} {'role':<11} {'model':<20} {'calls':>7} {'answered':>8} {'to send':>8} "
            f"{'prompt tok':>11} {'cached tok':>11} {'compl. max':>11} {'list':>9} {'list+cache':>10} "
            f"{'batch':>9} {'batch+cache':>11}")
    lines = [f"== [{est['profile']}] estimate: what a run would send (nothing was sent)", head]
    total = {"calls": 0, "cached_calls": 0, "live_calls": 0, "prompt_tokens": 0, "cached_prompt_tokens": 0,
             "completion_tokens": 0, **{k: 0.0 for k in _MONEY}}
    unpriced: set[str] = set()
    for nb in est["notebooks"]:
        unpriced |= set(nb.get("unpriced_models") or [])
        for role, r in sorted((nb.get("by_role") or {}).items()):
            money = _dollars(r)
            lines.append(f"{nb['notebook'][:18]:<18} {role:<11} {', '.join(r['models'])[:20]:<20} {r['calls']:>7,} "
                         f"{r['cached_calls']:>8,} {r['live_calls']:>8,} {r['prompt_tokens']:>11,} "
                         f"{r.get('cached_prompt_tokens', 0):>11,} {r['completion_tokens']:>11,} "
                         f"{_usd(money['usd_list'], 9)} {_usd(money['usd_list_cached'], 10)} "
                         f"{_usd(money['usd_batch'], 9)} {_usd(money['usd_batch_cached'], 11)}")
            for k in ("calls", "cached_calls", "live_calls", "prompt_tokens", "completion_tokens"):
                total[k] += r[k]
            total["cached_prompt_tokens"] += r.get("cached_prompt_tokens", 0)
            for k in _MONEY:  # an unpriced model counts 0 (said below); an old estimate has no batch price
                total[k] = None if total[k] is None or (money[k] is None and "usd_list" not in r) else (
                    total[k] + (money[k] or 0.0))
    lines.append(f"{'total':<51} {total['calls']:>7,} {total['cached_calls']:>8,} {total['live_calls']:>8,} "
                 f"{total['prompt_tokens']:>11,} {total['cached_prompt_tokens']:>11,} "
                 f"{total['completion_tokens']:>11,} {_usd(total['usd_list'], 9)} {_usd(total['usd_list_cached'], 10)} "
                 f"{_usd(total['usd_batch'], 9)} {_usd(total['usd_batch_cached'], 11)}")
    lines.append("compl. max: each call's whole completion budget (reasoning included), so every dollar figure is "
                 "a ceiling; cached tok: the prompt tokens a provider's prompt cache would serve (modelled); "
                 "list / batch: USD at list price and at the Batch API's, without and with that cache "
                 "(make pilot forecasts the completions from real replies)")
    if unpriced:
        lines.append(f"unpriced (not in the dollars; give MEMLIFE_<ROLE>_PRICE_PER_MTOK): {sorted(unpriced)}")
    lines += render_temp_lora(est.get("temp_lora"))
    for name, why in sorted(est["failed"].items()):
        lines.append(f"{name} stopped in estimate mode ({why}); its calls are counted up to there")
    if est.get("wall_s") is not None:
        lines.append(f"the estimate took {progress.clock(est['wall_s'])}")
    lines.append(f"per notebook and role: {est.get('written', '')}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m memlife.running.estimate", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default="quick", help="any configs/<name>.yaml")
    ap.add_argument("--notebook", action="append", help="only this notebook (repeatable); default: all that call a model")
    ap.add_argument("--as", dest="as_models", action="append", metavar="MODEL",
                    help="no new estimate: the last one's counts priced as if every API role were MODEL (repeatable)")
    args = ap.parse_args(argv)
    if args.as_models:
        est = read(default_path(args.profile))
        if est is None:
            raise SystemExit(f"no estimate of {args.profile} at {default_path(args.profile)}: run it first")
        print(render_repriced([repriced(est, m) for m in args.as_models]))
        return 0
    print(announce(args.profile, list(args.notebook or CALLING)), flush=True)
    est = run(args.profile, args.notebook)
    print(render(est))
    return 1 if est["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
