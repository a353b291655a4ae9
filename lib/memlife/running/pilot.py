"""A pilot: a fraction of a profile run for real, and the whole run forecast from it (`make pilot`).

    python -m memlife.running.pilot --profile paper --fraction 0.02 --out pilot.json
    python -m memlife.running.pilot --profile quick --fraction 0.1 --notebook 22_read_restore

1. **The calls.** The estimate (`memlife.running.estimate`) counts every call the whole profile
   would send and its prompt tokens, exactly where the run's structure fixes them (filler recurs
   across histories, so calls do not grow in step with items). Its JSON
   (results/<profile>/usage/estimate-<profile>.json, or --estimate FILE) is reused while its
   fingerprint (`estimate.fingerprint`: the resolved profile, every role's endpoint, the
   recording) is today's and it ran every notebook the pilot needs; otherwise it is made again,
   said before it starts with how long the last one took.
2. **The pilot.** The profile at `fraction` of its items (`memlife.running.scale`) runs for real
   (MEMLIFE_LLM_MODE=live) against the configured endpoints, in a scratch project
   (.cache/pilot/<profile>/), under the spending cap (the runner's; the paper profile refuses to
   start without one), with the project's own model-call cache (MEMLIFE_CACHE_DIR, else the
   profile's): every reply the pilot pays for is one the whole run then finds in the cache.
   `--notebook NB` runs NB and the notebooks it reads (`config.upstream`).
3. **The forecast**, per notebook and role (a unit), summed per role and in total. Calls, prompt
   tokens and the tokens a rate limit counts (prompt plus budget) are the estimate's, of the calls
   it counted as to be sent (those the cache or a recording answered then cost nothing). From the
   pilot's calls of the unit: completion tokens per call (reasoning included) from every reply it
   got, each request once (a reply from the cache or a recording is the same model's reply to the
   same request); the share of prompt tokens the provider's cache served and the latency per call
   from its live calls only (a reply from the cache or a recording has neither). Dollars from the
   role's price in the notebook's track (`llm.Client.price`): list price, with the cache's share,
   and the Batch API's price. Wall time: the largest of calls x latency / concurrency, calls /
   requests-per-minute and tokens / tokens-per-minute (`Endpoint`), summed over units, which run
   one after another; it is the time spent waiting on the endpoints, not the notebooks' own
   computing. A unit the pilot did not exercise (no reply) is forecast from the estimate's ceiling
   (completion budgets, the modelled prompt cache) and marked "ceiling"; one answered only from
   the cache or a recording ("pilot, no live call") has no latency and takes the modelled cache.
4. **Intervals**: a seeded percentile bootstrap (`n_boot` resamples, 95%) of the pilot's calls,
   per unit: the completions resampled for the mean completion, the live calls resampled
   together for the cache's share and the mean latency; a role's and the total's interval are
   the percentiles of the resamples' sums over units. They say how far the pilot's own spread
   leaves the figures, not how far the estimate's counts may be off where real replies steer the
   run (see `memlife.running.estimate`).

Writes --out: ``{"roles": {ROLE: {...}}, "total": {...}}``, a role's figures summed over its
notebooks (each under ``notebooks``, with its per-call figures and basis), the total's over the
roles; and results/<profile>/usage/pilot-<profile>.json, the same with what the pilot ran (its
notebooks' wall times, which the next pilot reports before it starts), the estimate it used and
the interval's method. Prints a table beside the estimate's ceiling.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from memlife.base import config, paths, progress
from memlife.models import accounting
from memlife.running import estimate, scale

N_BOOT = 2000
LEVEL = 0.95
# The sources of a call that carry a model's reply (a stand-in's tokens are a budget, not a reply).
_REPLIES = ("live", "cache", "recorded", None)
# Figures summed over units, with an interval each.
_SUMMED = ("completion_tokens", "cached_prompt_tokens", "usd", "usd_batch", "usd_no_prompt_cache", "wall_s")


@dataclass
class Unit:
    """One notebook's calls of one role: what the estimate counted, the endpoint, the pilot's calls."""
    notebook: str
    role: str
    models: list[str]
    calls: int  # the estimate's calls to send
    prompt_tokens: int
    completion_ceiling: int  # the estimate's: every call's whole budget
    cached_modelled: int  # the estimate's modelled prompt-cache tokens
    price: accounting.Price | None
    concurrency: int = 1
    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None
    completions: list[int] = field(default_factory=list)  # the pilot's replies, each request once
    live: list[tuple[int, int, float]] = field(default_factory=list)  # (prompt, cached, latency) of live calls
    pilot: dict = field(default_factory=dict)  # the pilot's counts: calls, live, from the cache, recorded


def _figures(u: Unit, completion_mean, share, latency):
    """The unit's forecast figures for a mean completion, a cache share and a mean latency (each a
    number or an array of resamples; latency None: unknown)."""
    import numpy as np

    completion = u.calls * completion_mean
    cached = u.prompt_tokens * share
    p = u.price or accounting.Price(0.0, 0.0, 0.0, 1.0)
    no_cache = (u.prompt_tokens * p.input + completion * p.output) / 1e6
    usd = ((u.prompt_tokens - cached) * p.input + cached * p.cached_input + completion * p.output) / 1e6
    waits = [np.zeros_like(np.asarray(completion, dtype=float))]
    if latency is not None:
        waits.append(u.calls * np.asarray(latency, dtype=float) / max(1, u.concurrency))
    if u.requests_per_minute:
        waits.append(np.full_like(waits[0], u.calls / u.requests_per_minute * 60.0))
    if u.tokens_per_minute:
        waits.append(np.full_like(waits[0], (u.prompt_tokens + u.completion_ceiling) / u.tokens_per_minute * 60.0))
    return {"completion_tokens": completion, "cached_prompt_tokens": cached, "usd": usd,
            "usd_batch": usd * p.batch_factor, "usd_no_prompt_cache": no_cache,
            "wall_s": np.maximum.reduce([np.broadcast_to(w, waits[0].shape) for w in waits])}


def _resampled_sums(rng, data, n_boot: int):
    """Column sums of `n_boot` resamples (with replacement) of the rows of `data` (n x k), drawn a
    block at a time so that a pilot of many calls does not hold n_boot x n draws at once."""
    import numpy as np

    n = len(data)
    out = np.empty((n_boot, data.shape[1]))
    block = max(1, 2_000_000 // n)
    for start in range(0, n_boot, block):
        size = min(block, n_boot - start)
        out[start:start + size] = data[rng.integers(0, n, size=(size, n))].sum(axis=1)
    return out


def unit_forecast(u: Unit, *, seed: int = 0, n_boot: int = N_BOOT) -> tuple[dict, dict]:
    """(the unit's forecast, its figures' resamples: n_boot values each)."""
    import numpy as np

    rng = np.random.default_rng([seed, zlib.crc32(f"{u.notebook}\0{u.role}".encode())])
    comp = np.asarray(u.completions, dtype=float)
    live = np.asarray(u.live, dtype=float).reshape(-1, 3)
    if len(comp):
        basis = "pilot" if len(live) else "pilot, no live call"
        c_mean = float(comp.mean())
        c_boot = _resampled_sums(rng, comp.reshape(-1, 1), n_boot)[:, 0] / len(comp)
    else:
        basis = "ceiling"
        c_mean = u.completion_ceiling / u.calls if u.calls else 0.0
        c_boot = np.full(n_boot, c_mean)
    modelled = u.cached_modelled / u.prompt_tokens if u.prompt_tokens else 0.0
    if len(live):
        share = float(live[:, 1].sum() / live[:, 0].sum()) if live[:, 0].sum() else 0.0
        latency = float(live[:, 2].mean())
        sums = _resampled_sums(rng, live, n_boot)
        s_boot = np.divide(sums[:, 1], sums[:, 0], out=np.zeros(n_boot), where=sums[:, 0] > 0)
        l_boot = sums[:, 2] / len(live)
    else:
        share, latency, s_boot, l_boot = modelled, None, np.full(n_boot, modelled), None
    point = {k: float(v) for k, v in _figures(u, c_mean, share, latency).items()}
    boot = _figures(u, c_boot, s_boot, l_boot)
    ceiling = u.price.usd(u.prompt_tokens, u.completion_ceiling, cached_tokens=u.cached_modelled) if u.price else None
    out = {"models": u.models, "basis": basis, "calls": u.calls, "prompt_tokens": u.prompt_tokens,
           "completion_tokens_ceiling": u.completion_ceiling, "usd_ceiling": ceiling,
           "priced": u.price is not None, "latency_known": latency is not None,
           "per_call": {"completion_tokens": c_mean, "cached_share": share, "latency_s": latency},
           "endpoint": {"concurrency": u.concurrency, "requests_per_minute": u.requests_per_minute,
                        "tokens_per_minute": u.tokens_per_minute},
           "pilot": dict(u.pilot), **point}
    return out, boot


def _interval(values, level: float) -> tuple[float, float]:
    import numpy as np

    lo, hi = np.percentile(values, [50 * (1 - level), 50 * (1 + level)])
    return float(lo), float(hi)


def _rounded(d: dict) -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, float) and (k.startswith("usd")):
            out[k] = round(v, 6)
        elif isinstance(v, float) and (k.startswith(("completion_tokens", "cached_prompt_tokens"))):
            out[k] = int(round(v))
        elif isinstance(v, float) and k.startswith("wall_s"):
            out[k] = round(v, 1)
        else:
            out[k] = v
    return out


def forecast(units: list[Unit], *, seed: int = 0, n_boot: int = N_BOOT, level: float = LEVEL) -> dict:
    """The whole run's forecast from `units`: {"roles": {ROLE: {...}}, "total": {...}}. Each summed
    figure has `_low` and `_high`, the bootstrap's `level` interval (see the module's docstring)."""
    import numpy as np

    roles: dict[str, dict] = {}
    boots: dict[str, dict] = {}
    for u in sorted(units, key=lambda x: (x.role, x.notebook)):
        one, boot = unit_forecast(u, seed=seed, n_boot=n_boot)
        r = roles.setdefault(u.role, {"models": [], "calls": 0, "prompt_tokens": 0, "completion_tokens_ceiling": 0,
                                      "usd_ceiling": 0.0, **{k: 0.0 for k in _SUMMED}, "notebooks": {},
                                      "pilot_calls": 0, "pilot_live_calls": 0, "pilot_cached_calls": 0,
                                      "pilot_recorded_calls": 0, "unpriced_models": []})
        b = boots.setdefault(u.role, {k: np.zeros(n_boot) for k in _SUMMED})
        for k in _SUMMED:
            r[k] += one[k]
            b[k] = b[k] + boot[k]
        for k in ("calls", "prompt_tokens", "completion_tokens_ceiling"):
            r[k] += one[k]
        r["usd_ceiling"] += one["usd_ceiling"] or 0.0
        r["models"] += [m for m in u.models if m not in r["models"]]
        if u.price is None:
            r["unpriced_models"] += [m for m in u.models if m not in r["unpriced_models"]]
        for k in ("calls", "live_calls", "cached_calls", "recorded_calls"):
            r[f"pilot_{k}"] += int(u.pilot.get(k, 0))
        r["notebooks"][u.notebook] = _rounded(one)
    total = {"calls": 0, "prompt_tokens": 0, "completion_tokens_ceiling": 0, "usd_ceiling": 0.0,
             **{k: 0.0 for k in _SUMMED}}
    total_boot = {k: np.zeros(n_boot) for k in _SUMMED}
    for role, r in roles.items():
        bases = {n["basis"] for n in r["notebooks"].values()}
        r["basis"] = bases.pop() if len(bases) == 1 else "mixed"
        r["latency_known"] = all(n["latency_known"] for n in r["notebooks"].values())
        for k in _SUMMED:
            r[f"{k}_low"], r[f"{k}_high"] = _interval(boots[role][k], level)
            total_boot[k] = total_boot[k] + boots[role][k]
            total[k] += r[k]
        for k in ("calls", "prompt_tokens", "completion_tokens_ceiling", "usd_ceiling"):
            total[k] += r[k]
        roles[role] = _rounded(r)
    for k in _SUMMED:
        total[f"{k}_low"], total[f"{k}_high"] = _interval(total_boot[k], level)
    interval = {"level": level, "n_boot": n_boot, "seed": seed, "method": "percentile bootstrap over the pilot's calls"}
    return {"roles": roles, "total": _rounded(total), "interval": interval}


# --------------------------------------------------------------------------- from the runs to units


def pilot_calls(usage_dir: Path, notebooks: list[str]) -> dict[tuple[str, str], list[dict]]:
    """The pilot's calls log lines per (notebook, role)."""
    out: dict[tuple[str, str], list[dict]] = {}
    for nb in notebooks:
        log = Path(usage_dir) / f"{nb}.calls.jsonl"
        if log.exists():
            for line in log.read_text().splitlines():
                if line.strip():
                    r = json.loads(line)
                    out.setdefault((nb, r["role"]), []).append(r)
    return out


def units_from(est: dict, calls: dict[tuple[str, str], list[dict]], endpoint_of) -> list[Unit]:
    """A unit per notebook and role the estimate counts calls to send for; `endpoint_of(notebook,
    role)` gives (its Price or None, its Endpoint)."""
    units = []
    for row in est["notebooks"]:
        for role, r in sorted((row.get("by_role") or {}).items()):
            if not r["live_calls"] or role not in config.ROLES:
                continue  # nothing to send; or a local model's generations (Temp-LoRA), which go to no endpoint
            price, ep = endpoint_of(row["notebook"], role)
            lines = calls.get((row["notebook"], role), [])
            seen, completions, live = set(), [], []
            for c in lines:
                if c.get("source") not in _REPLIES or c["request_id"] in seen:
                    continue
                seen.add(c["request_id"])
                completions.append(int(c["completion_tokens"]))
                if not c["cached"]:
                    live.append((int(c["prompt_tokens"]), int(c.get("cached_prompt_tokens") or 0),
                                 float(c["latency_s"])))
            units.append(Unit(
                notebook=row["notebook"], role=role, models=list(r["models"]), calls=r["live_calls"],
                prompt_tokens=r["prompt_tokens"], completion_ceiling=r["completion_tokens"],
                cached_modelled=r.get("cached_prompt_tokens", 0), price=price, concurrency=ep.concurrency,
                requests_per_minute=ep.requests_per_minute, tokens_per_minute=ep.tokens_per_minute,
                completions=completions, live=live,
                pilot={"calls": len(lines), "live_calls": sum(not c["cached"] for c in lines),
                       "cached_calls": sum(c.get("source") == "cache" for c in lines),
                       "recorded_calls": sum(c.get("source") == "recorded" for c in lines),
                       "usd": round(sum(c["usd"] or 0.0 for c in lines), 6)}))
    return units


def _endpoints(profile: str, root: Path):
    """endpoint_of(notebook, role) -> (Price or None, Endpoint), as the notebook's track has them."""
    from memlife.models import endpoints, llm
    from memlife.running import runner

    memo: dict = {}

    def endpoint_of(notebook: str, role: str):
        track = config.track_of(notebook)
        if (track, role) not in memo:
            with runner.environ(MEMLIFE_ROOT=str(root)):
                endpoints.configure(profile, track=track)
                client = llm.get_client(role)
                memo[(track, role)] = (client.price(), client.endpoint)
        return memo[(track, role)]
    return endpoint_of


# --------------------------------------------------------------------------- the whole pilot


def pilot_path(profile: str, root: Path | None = None) -> Path:
    return paths.layout(profile, root).usage / f"pilot-{profile}.json"


def needed(notebooks: list[str] | None) -> list[str]:
    """The notebooks to run: those asked (default: every one that calls a model) and those they read."""
    chosen = set(notebooks or estimate.CALLING)
    for nb in list(chosen):
        chosen |= set(config.upstream(nb))
    return sorted(chosen)


def usable_estimate(path: Path, profile: str, notebooks: list[str], root: Path) -> tuple[dict | None, str]:
    """The estimate at `path` when it counts `notebooks` of `profile` as it stands today; else None
    and why not."""
    est = estimate.read(path)
    if est is None:
        return None, f"there is no estimate at {path}"
    if est.get("profile") != profile:
        return None, f"{path} estimates profile {est.get('profile')!r}"
    if est.get("fingerprint") is None:
        return None, f"{path} does not say what it was made from (made before estimates kept a fingerprint)"
    if est["fingerprint"] != estimate.fingerprint(profile, root):
        return None, f"{path} was made from other profile parameters or models"
    ran = {r["notebook"] for r in est.get("notebooks") or [] if not r.get("failed")}
    missing = [n for n in notebooks if n not in ran or n in (est.get("failed") or {})]
    if missing:
        return None, f"{path} did not estimate {', '.join(missing)} (whole)"
    return est, f"reusing the estimate {path} (made {est.get('made', '?')}): its profile and models are today's"


def announce(profile: str, fraction: float, notebooks: list[str], root: Path) -> str:
    """How long the last pilot of the profile took here, or that it cannot be told and how big the run is."""
    last = estimate.read(pilot_path(profile, root))
    line = estimate.took(last, notebooks, f"pilot of {profile} (fraction {(last or {}).get('fraction')})")
    head = f"== [{profile}] pilot at fraction {fraction}: {', '.join(notebooks)} run for real"
    if line:
        return f"{head}; {line}" + ("" if last.get("fraction") == fraction else
                                    f"; this one runs fraction {fraction}: its time grows about with the items")
    scaled, _ = scale.scale_profile(config.load_profile(profile, root), fraction)
    return (f"{head}; how long it takes cannot be told: no earlier pilot of {profile} here. It runs "
            f"{'; '.join(scale.items(scaled, notebooks)) or 'no items'}, each call answered by the endpoint")


def run(profile: str, fraction: float, notebooks: list[str] | None = None, *, root: Path | None = None,
        estimate_path: Path | None = None, out: Path | None = None, seed: int = 0, n_boot: int = N_BOOT,
        without: tuple[str, ...] = (), quiet: bool = True, say=print) -> dict:
    """Estimate (or reuse the estimate), run the pilot, forecast: the whole report, as written to
    results/<profile>/usage/pilot-<profile>.json (`out` gets its roles and total). `say` prints
    what is about to happen, and how long it took last time, before it starts. `without`: MemOps
    systems the pilot leaves out of notebook 12 (Temp-LoRA answers with a local model and sends the
    endpoint nothing, while its training dominates a pilot's time on a CPU)."""
    from memlife.models import llm, spending
    from memlife.running import runner

    root = Path(root) if root else paths.repo_root()
    chosen = needed(notebooks)
    scale.scale_profile(config.load_profile(profile, root), fraction)  # a fraction out of range: said now
    cache = os.environ.get("MEMLIFE_CACHE_DIR") or str(paths.layout(profile, root).cache)
    live = {"MEMLIFE_ROOT": str(root), "MEMLIFE_CACHE_DIR": cache, "MEMLIFE_LLM_MODE": "live"}
    with runner.environ(**live):
        for nb in chosen:  # the paper profile's endpoints, cap and prices, before anything runs
            llm.check_paper_profile(profile, nb)
    # 1. the calls
    given = Path(estimate_path) if estimate_path else estimate.default_path(profile, root)
    est, why = usable_estimate(given, profile, chosen, root)
    say(f"== [{profile}] {why}" if est else f"== [{profile}] the estimate is made again: {why}")
    estimate_s = None
    if est is None:
        say(estimate.announce(profile, chosen, root=root))
        t0 = time.perf_counter()
        est = estimate.run(profile, chosen, root=root, quiet=quiet)
        estimate_s = round(time.perf_counter() - t0, 1)
        if est["failed"]:
            raise SystemExit(f"the estimate stopped in {sorted(est['failed'])}: {est['failed']}; no forecast")
    # 2. the pilot
    say(announce(profile, fraction, chosen, root))
    base, changes = scale.scaled_root(profile, fraction, Path(cache) / "pilot-root" / profile, root=root,
                                      without=tuple(without), purpose="a pilot (memlife.running.pilot)")
    for c in changes:
        say(f"   {c}")
    started, t0 = time.time(), time.perf_counter()
    rows, failed = [], {}
    run_name = os.environ.get(spending.RUN_ENV) or f"pilot-{profile}-{int(started)}"
    with runner.environ(**{**live, "MEMLIFE_ROOT": str(base), spending.RUN_ENV: run_name}):
        scratch = estimate.prepare(profile, base, kind="pilot")
        with runner.environ(MEMLIFE_ROOT=str(scratch)):
            for name in chosen:
                t1 = time.perf_counter()
                try:
                    rows.append(runner.run_notebook(name, profile, root=scratch, quiet=quiet))
                except Exception as exc:  # the notebooks after it read its outputs: the pilot stops here
                    failed[name] = f"{type(exc).__name__}: {str(exc).strip()[-300:]}"
                    log = paths.layout(profile, scratch).usage / f"{name}.calls.jsonl"
                    rows.append({"notebook": name, **accounting.summarize_calls(log), "failed": True,
                                 "wall_s": round(time.perf_counter() - t1, 1)})
                    say(f"   {name} stopped ({failed[name]}); the forecast uses the calls made up to there")
                    break
    pilot_s = round(time.perf_counter() - t0, 1)
    # 3. the forecast
    calls = pilot_calls(paths.layout(profile, scratch).usage, chosen)
    est_rows = {**est, "notebooks": [r for r in est["notebooks"] if r["notebook"] in chosen]}
    report = forecast(units_from(est_rows, calls, _endpoints(profile, root)), seed=seed, n_boot=n_boot)
    spent = sum(r.get("usd_estimate") or 0.0 for r in rows)
    report["total"]["pilot_usd"] = round(spent, 6)
    report.update({
        "profile": profile, "fraction": fraction, "changes": changes, "failed": failed, "scratch": str(scratch),
        "made": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started)), "host": platform.node(),
        "wall_s": pilot_s, "notebooks": [{k: r.get(k) for k in ("notebook", "wall_s", "calls", "cached_calls",
                                                                "live_calls", "usd_estimate", "failed")}
                                         for r in rows],
        "pilot": {"calls": sum(r.get("calls", 0) for r in rows), "usd": round(spent, 6), "wall_s": pilot_s,
                  "live_calls": sum(r.get("live_calls", 0) for r in rows), "spend_run": run_name},
        "estimate": {"path": est.get("written") or str(given), "made": est.get("made"), "reused": estimate_s is None,
                     "wall_s": est.get("wall_s") if estimate_s is None else estimate_s}})
    whole = pilot_path(profile, root)
    whole.parent.mkdir(parents=True, exist_ok=True)
    whole.write_text(json.dumps(report, indent=1, sort_keys=True) + "\n")
    report["written"] = [str(whole)]
    if out and Path(out).resolve() != whole.resolve():
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(json.dumps({k: report[k] for k in ("roles", "total")}, indent=1, sort_keys=True) + "\n")
        report["written"].insert(0, str(out))
    return report


def _usd(x: float) -> str:
    """Dollars to the cent, and to a hundredth of a cent below a dollar (a pilot's, a small profile's)."""
    return f"{x:,.2f}" if abs(x) >= 1 else f"{x:.4f}"


def _range(r: dict, key: str, fmt) -> str:
    return f"{fmt(r[key])} [{fmt(r[key + '_low'])}-{fmt(r[key + '_high'])}]"


def render(report: dict) -> str:
    """The forecast as a table, per role and in total, beside the estimate's ceiling."""
    head = (f"{'role':<11} {'model':<20} {'calls':>8} {'prompt tok':>12} {'cached tok':>11} "
            f"{'completion tok [95%]':>30} {'compl. max':>12} {'USD [95%]':>26} {'batch USD':>10} "
            f"{'USD max':>10} {'wall [95%]':>26}  basis")
    p = report["pilot"]
    lines = [f"== [{report['profile']}] the whole run forecast from a pilot at fraction {report['fraction']} "
             f"({p['calls']:,} calls, {p['live_calls']:,} sent, ${_usd(p['usd'])}, "
             f"{progress.clock(p['wall_s'])})", head]

    def row(name: str, model: str, r: dict, basis: str) -> str:
        wall = (f"{progress.clock(r['wall_s'])} [{progress.clock(r['wall_s_low'])}-"
                f"{progress.clock(r['wall_s_high'])}]")
        return (f"{name:<11} {model[:20]:<20} {r['calls']:>8,} {r['prompt_tokens']:>12,} "
                f"{r['cached_prompt_tokens']:>11,} {_range(r, 'completion_tokens', '{:,}'.format):>30} "
                f"{r['completion_tokens_ceiling']:>12,} {_range(r, 'usd', _usd):>26} {_usd(r['usd_batch']):>10} "
                f"{_usd(r['usd_ceiling']):>10} {wall:>26}  {basis}")

    for role, r in sorted(report["roles"].items()):
        lines.append(row(role, ", ".join(r["models"]), r, r["basis"] + ("" if r["latency_known"] else
                                                                           ", latency unknown")))
    lines.append(row("total", "", report["total"], ""))
    for role, r in sorted(report["roles"].items()):
        per = "; ".join(f"{nb}: {n['per_call']['completion_tokens']:.0f} completion tokens"
                        + (f", {n['per_call']['latency_s']:.2f} s" if n["per_call"]["latency_s"] is not None else "")
                        + f", {n['per_call']['cached_share']:.0%} of the prompt cached"
                        for nb, n in sorted(r["notebooks"].items()))
        lines.append(f"pilot {role}: {r['pilot_calls']:,} calls ({r['pilot_live_calls']:,} live, "
                     f"{r['pilot_cached_calls']:,} from the cache, {r['pilot_recorded_calls']:,} recorded); "
                     f"per call {per}")
        if r["unpriced_models"]:
            lines.append(f"  unpriced, counted as $0: {r['unpriced_models']}")
    t = report["total"]
    lines.append(f"completion tokens and dollars: the pilot's replies per call times the estimate's calls; "
                 f"compl. max and USD max: the estimate's ceiling (every budget spent); batch USD: at the Batch API's "
                 f"price; wall: time waiting on the endpoints at their concurrency and rate limits, not the "
                 f"notebooks' computing; "
                 f"[95%]: {report['interval']['method']} ({report['interval']['n_boot']} resamples, seed "
                 f"{report['interval']['seed']})")
    lines.append(f"the pilot paid ${_usd(t['pilot_usd'])}; its replies are in the cache, so the run does not pay "
                 f"again for the requests it shares with the pilot")
    for name, why in sorted(report["failed"].items()):
        lines.append(f"{name} stopped in the pilot ({why}): its units and those after it are forecast from the ceiling")
    lines.append(f"written: {', '.join(report.get('written', []))}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m memlife.running.pilot", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default="quick", help="any configs/<name>.yaml")
    ap.add_argument("--fraction", type=float, required=True, help="of the profile's items, in (0, 1]")
    ap.add_argument("--notebook", action="append", help="only this notebook and those it reads (repeatable)")
    ap.add_argument("--estimate", type=Path, help="the estimate's JSON to reuse (default: the profile's)")
    ap.add_argument("--out", type=Path, help="the forecast's JSON (it is also written to the profile's usage folder)")
    ap.add_argument("--seed", type=int, default=0, help="of the bootstrap")
    ap.add_argument("--without", action="append", default=[], metavar="SYSTEM",
                    help="a MemOps system the pilot leaves out, e.g. temp_lora (local: it sends the endpoint nothing)")
    args = ap.parse_args(argv)
    from memlife.models import endpoints

    try:
        report = run(args.profile, args.fraction, args.notebook, estimate_path=args.estimate, out=args.out,
                     seed=args.seed, without=tuple(args.without))
    except (ValueError, endpoints.LLMError) as exc:  # a profile, an endpoint or a fraction to fix first
        print(f"pilot [{args.profile}]: {exc}", file=sys.stderr)
        return 2
    print(render(report))
    return 1 if report["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
