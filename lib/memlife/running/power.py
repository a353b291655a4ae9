"""What a run of what size can tell: the power of each of the papers' claims at a grid of sizes.

    python -m memlife.running.power --profile paper --out results/paper/power.json

For every claim the notebooks test (`memlife.memops.analyses.power.claims`, `memlife.restore.analyses.power.claims`)
it simulates `reps` runs at each size of the track's grid (topics for MemOps; questions for the
restore audit, at `--grid-seeds` seeds), and at the profile's own size and seeds, analyses each
with the notebooks' code, and writes one JSON object:

    {"claims": [{"track", "claim", "effect", "unit", "n_needed", "power_at_profile_n", ...}, ...], ...}

`n_needed` is the smallest size of the grid with 80% power (null: the grid's largest does not
reach it). `lite_sizes` turns the table into the least costly sizes that keep every claim the
profile can test at 80% (configs/paper-lite.yaml is made from it). Runs are spread over
`--workers` processes; each run's generator depends on (seed, size, replicate) only, so the table
is the same for any number of them.
"""
from __future__ import annotations

import argparse
import functools
import json
import math
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from memlife import paper_reference, power
from memlife.base import config, parallel

# Topics (MemOps has 100) and questions (LongMemEval holds 470 evidence-labelled questions without
# the abstention ones: no restore run can be larger).
GRIDS = {"memops": (5, 10, 15, 20, 30, 40, 50, 75, 100, 150),
         "restore": (25, 50, 75, 100, 150, 200, 300, 400, 470)}
# The table at the paper profile, 200 runs a size, committed: configs/paper-lite.yaml is made from it
# (`python -m memlife.running.power --profile paper --out results/power/paper.json`).
PAPER_TABLE = Path("results") / "power" / "paper.json"
# Conversations a topic keeps at the paper's retention (403 over 100 topics, Table 2).
CONVERSATIONS_PER_TOPIC = (paper_reference.MEMOPS_TABLE2["Evidence conversations"]
                           / paper_reference.MEMOPS_TABLE2["Unique topics"])


@dataclass(frozen=True)
class Sizes:
    """A profile's sizes as the claims count them."""

    topics: int
    questions: int
    seeds: int


def profile_sizes(profile: str) -> Sizes:
    build = config.notebook_params(profile, "10_memops_build")
    data = config.notebook_params(profile, "20_longmem_data")
    evict = config.notebook_params(profile, "21_eviction")
    return Sizes(int(build["n_topics"]), int(data["n_questions"]), len(evict["seeds"]))


# The largest Holm family a run tests (R2's 12 evicting cells): a bootstrap p-value is never below
# 2 / (n_boot + 1), so fewer resamples than this could never reject its first hypothesis at alpha.
LARGEST_FAMILY = int(paper_reference.figure("r2_family_size"))


def min_n_boot(alpha: float = 0.05, family: int = LARGEST_FAMILY) -> int:
    """The fewest resamples whose smallest p-value, 2 / (n_boot + 1), is below Holm's first
    threshold alpha / family."""
    return math.floor(2 * family / alpha)


@dataclass(frozen=True)
class Assumptions:
    """What the papers do not print, as parameters (memops.analyses.power.Model, restore.analyses.power.Model)."""

    two_bin_30k: float = 1.0
    topic_correlation: float = 0.05
    probe_correlation: float = 0.30
    reader_correlation: float = 0.30


@functools.lru_cache(maxsize=None)
def _models(seeds: int, a: Assumptions):
    import gc

    from memlife.memops.analyses import power as mp
    from memlife.restore.analyses import power as rp

    m = mp.paper_model(topic_correlation=a.topic_correlation, probe_correlation=a.probe_correlation)
    r = rp.paper_model(two_bin_30k=a.two_bin_30k, seeds=seeds, reader_correlation=a.reader_correlation)
    models = {"memops": (mp, m, mp.claims(m)), "restore": (rp, r, rp.claims(r))}
    # statsmodels' multipletests (Holm) calls gc.collect(), which scans every live object: frozen,
    # the library and the models are not rescanned thousands of times (a third of a run's time).
    gc.freeze()
    return models


def _job(job: tuple) -> tuple[str, str, int, int, dict[str, float]]:
    where, track, size, rep, seeds, assumptions, seed, n_boot = job
    module, model, claims = _models(seeds, assumptions)[track]
    return where, track, size, rep, module.run(model, claims, size, rep, seed=seed, n_boot=n_boot)


@dataclass
class Simulated:
    """Every claim's power curve over its track's grid (the restore audit's at `grid_seeds`), and
    its power at the profile's own size and seeds (`at_profile`: claim -> (power, its standard
    error))."""

    curves: list[power.Curve]
    at_profile: dict[str, tuple[float, float]]
    sizes: Sizes
    grid_seeds: int


def simulate(sizes: Sizes, *, reps: int, n_boot: int, seed: int = 0, workers: int | None = 1,
             grids: dict[str, tuple[int, ...]] | None = None, assumptions: Assumptions = Assumptions(),
             grid_seeds: int | None = None, progress: bool = False) -> Simulated:
    """Simulate `reps` runs at every size of each track's grid and at the profile's own size. The
    restore curves are at `grid_seeds` seeds (None: the profile's): the papers' three, whatever the
    profile, answer "how many questions at the paper's design"; the profile's own point is at its
    own seeds."""
    if n_boot < min_n_boot():
        raise ValueError(f"n_boot={n_boot}: a bootstrap p-value cannot fall below 2 / (n_boot + 1), so Holm over "
                         f"{LARGEST_FAMILY} could never reject; use at least {min_n_boot()}")
    if reps < 1:
        raise ValueError(f"reps must be at least 1, got {reps}")
    grids = dict(GRIDS if grids is None else grids)
    grid_seeds = sizes.seeds if grid_seeds is None else int(grid_seeds)
    own = {"memops": sizes.topics, "restore": sizes.questions}
    jobs = []
    for track, grid in grids.items():
        # MemOps has no seeds: its profile point is a point of the grid's curve.
        same = track == "memops" or sizes.seeds == grid_seeds
        for size in sorted(set(grid) | ({own[track]} if same else set())):
            jobs += [("grid", track, size, rep, grid_seeds, assumptions, seed, n_boot) for rep in range(reps)]
        if not same:
            jobs += [("profile", track, own[track], rep, sizes.seeds, assumptions, seed, n_boot) for rep in range(reps)]
    results = parallel.map_ordered(_job, jobs, workers=workers, desc="simulated runs" if progress else None)
    outcomes: dict[tuple[str, str], dict[str, dict[int, list[float]]]] = {}
    for where, track, size, _, out in results:
        for key, v in out.items():
            outcomes.setdefault((where, track), {}).setdefault(key, {}).setdefault(size, []).append(v)
    curves, at_profile = [], {}
    for track in grids:
        for claim in _models(grid_seeds, assumptions)[track][2]:
            c = power.curve(claim, outcomes[("grid", track)][claim.key])
            curves.append(c)
            mine = outcomes.get(("profile", track))
            p = c if mine is None else power.curve(claim, mine[claim.key])
            i = p.sizes.index(own[track])
            at_profile[claim.key] = (p.value[i], p.se[i])
    return Simulated(curves, at_profile, sizes, grid_seeds)


def table(sim: Simulated) -> list[dict]:
    """One row per claim: the JSON's `claims`."""
    own = {"memops": sim.sizes.topics, "restore": sim.sizes.questions}
    rows = []
    for c in sim.curves:
        cl = c.claim
        at, at_se = sim.at_profile[cl.key]
        rows.append({
            "track": cl.track, "claim": cl.key, "description": cl.claim, "effect": round(cl.effect, 4),
            "unit": cl.unit, "kind": cl.kind, "resolution_target": cl.target,
            "n_needed": power.n_needed(c), "power_at_profile_n": at, "power_at_profile_n_se": round(at_se, 4),
            "profile_n": own[cl.track], "profile_seeds": sim.sizes.seeds if cl.track == "restore" else None,
            "testable_at_profile_n": at >= power.TARGET_POWER,
            "grid_seeds": sim.grid_seeds if cl.track == "restore" else None,
            "curve": {str(s): v for s, v in zip(c.sizes, c.value)},
            "curve_se": {str(s): round(e, 4) for s, e in zip(c.sizes, c.se)},
            "runs": {str(s): n for s, n in zip(c.sizes, c.runs)},
            **({"median_resolution": {str(s): m for s, m in zip(c.sizes, c.median)}} if cl.kind == "resolution" else {}),
            "assumed": cl.assumed, "source": cl.source, "claimed": cl.claimed,
        })
    return rows


def lite_sizes(rows: list[dict], sizes: Sizes) -> tuple[dict[str, int], list[str]]:
    """The least costly sizes that keep every claim testable at the profile's size at 80% power:
    per track the largest `n_needed` among those claims (never more than the profile's size).
    Returns the sizes and the claims they do not keep: those the profile's size cannot test at
    80% either, and those the paper reports as unresolved in its own sample (`claimed` False)."""
    own = {"memops": sizes.topics, "restore": sizes.questions}
    need, given_up = {}, []
    for r in rows:
        if not r.get("claimed", True) or r["n_needed"] is None or r["n_needed"] > own[r["track"]]:
            given_up.append(f"{r['track']}: {r['claim']}")
            continue
        need[r["track"]] = max(need.get(r["track"], 0), r["n_needed"])
    return {t: min(n, own[t]) for t, n in need.items()}, given_up


def lite_profile(lite: dict[str, int], base_sizes: Sizes, base: str = "paper") -> dict:
    """A profile extending `base` at the lite sizes: only the notebooks whose size changes."""
    out: dict = {"extends": base, "notebooks": {}}
    if lite.get("memops", base_sizes.topics) != base_sizes.topics:
        t = lite["memops"]
        for nb in ("10_memops_build", "14_memops_controls"):
            out["notebooks"][nb] = {"n_topics": t, "max_conversations": math.ceil(t * CONVERSATIONS_PER_TOPIC)}
    if lite.get("restore", base_sizes.questions) != base_sizes.questions:
        out["notebooks"]["20_longmem_data"] = {"n_questions": lite["restore"]}
    return out


def claims_frame(rows: list[dict], paper: Sizes):
    """The table a reader reads: per claim its effect, the size it needs, and its power at the
    paper's size and at the profile's."""
    import pandas as pd

    at_paper = {"memops": paper.topics, "restore": paper.questions}
    df = pd.DataFrame([{
        "track": r["track"], "claim": r["claim"], "effect": r["effect"], "unit": r["unit"],
        "n_needed": r["n_needed"],
        "power_at_paper_n": r["curve"].get(str(at_paper[r["track"]]), float("nan")),
        "paper_n": at_paper[r["track"]],
        "power_at_profile_n": r["power_at_profile_n"], "profile_n": r["profile_n"],
        "profile_seeds": r["profile_seeds"], "runs": int(min(r["runs"].values())), "source": r["source"],
    } for r in rows])
    df["n_needed"] = df["n_needed"].astype("Int64")
    df["profile_seeds"] = df["profile_seeds"].astype("Int64")
    return df


# The figure's panels: MemOps, and the restore audit's R1-R2 apart from R3-R4 (fifteen curves in
# one panel cannot be told apart).
PANELS = (("memops", "MemOps: the Holm family and Table 3", ("",)),
          ("restore", "restore audit: R1 and R2", ("R1", "R2")),
          ("restore", "restore audit: R3 and R4", ("R3", "R4")))


def curves_figure(rows: list[dict], paper: Sizes):
    """Every claim's power against the size, a panel per family, the 80% line and the paper's size."""
    import matplotlib.pyplot as plt

    at_paper = {"memops": paper.topics, "restore": paper.questions}
    panels = [(t, title, prefixes) for t, title, prefixes in PANELS if any(r["track"] == t for r in rows)]
    from matplotlib.ticker import NullFormatter

    fig, axes = plt.subplots(1, len(panels), figsize=(5.6 * len(panels), 6.4), squeeze=False)
    for ax, (track, title, prefixes) in zip(axes[0], panels):
        mine = [r for r in rows if r["track"] == track and r["claim"].startswith(prefixes)]
        colors = plt.get_cmap("tab10" if len(mine) <= 10 else "tab20")
        for i, r in enumerate(mine):
            x = [int(k) for k in r["curve"]]
            ax.plot(x, list(r["curve"].values()), marker="o", ms=3, lw=1.3, color=colors(i),
                    ls="-" if r.get("claimed", True) else ":", label=r["claim"])
        ax.axhline(power.TARGET_POWER, color="black", lw=0.8, ls="--")
        ax.axvline(at_paper[track], color="grey", lw=0.8, ls=":")
        ax.set_xscale("log")
        ticks = sorted({int(k) for r in mine for k in r["curve"]})
        ax.set_xticks(ticks, [str(t) for t in ticks], fontsize=7)
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_ylim(-0.02, 1.02)
        unit = mine[0]["unit"] if mine else ""
        seeds = f", {mine[0]['grid_seeds']} seeds" if mine and mine[0].get("grid_seeds") else ""
        ax.set_xlabel(f"{unit}{seeds} (dotted: the paper's {at_paper[track]})")
        ax.set_ylabel("power (share of simulated runs)")
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=6.5, loc="upper center", bbox_to_anchor=(0.5, -0.16), frameon=False)
    fig.tight_layout()
    return fig


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m memlife.running.power", description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", default="paper", help="whose sizes the table is read at (default paper)")
    ap.add_argument("--out", type=Path, help="write the JSON here (default: print it)")
    ap.add_argument("--reps", type=int, default=200, help="simulated runs per size (default 200)")
    ap.add_argument("--n-boot", type=int, default=1000, help="bootstrap resamples per analysis (default 1000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=0, help="processes (0: every core)")
    d = Assumptions()
    ap.add_argument("--grid-seeds", type=int, default=None,
                    help="seeds of the restore curves (default: the profile's; the paper's are 3)")
    ap.add_argument("--two-bin-30k", type=float, default=d.two_bin_30k,
                    help=f"the top-k two-bin share at 30k, which the restore paper does not print (default {d.two_bin_30k})")
    ap.add_argument("--topic-correlation", type=float, default=d.topic_correlation,
                    help=f"MemOps: latent correlation of a topic's probes (default {d.topic_correlation})")
    ap.add_argument("--probe-correlation", type=float, default=d.probe_correlation,
                    help=f"MemOps: latent correlation of one probe across systems and settings (default {d.probe_correlation})")
    ap.add_argument("--reader-correlation", type=float, default=d.reader_correlation,
                    help=f"restore: latent correlation of a question's reads (default {d.reader_correlation})")
    args = ap.parse_args(argv)
    sizes = profile_sizes(args.profile)
    t0 = time.perf_counter()
    assumptions = Assumptions(args.two_bin_30k, args.topic_correlation, args.probe_correlation,
                              args.reader_correlation)
    sim = simulate(sizes, reps=args.reps, n_boot=args.n_boot, seed=args.seed, workers=args.workers,
                   assumptions=assumptions, grid_seeds=args.grid_seeds, progress=True)
    rows = table(sim)
    lite, given_up = lite_sizes(rows, sizes)
    doc = {"profile": args.profile, "sizes": asdict(sizes), "grid_seeds": sim.grid_seeds, "reps": args.reps,
           "n_boot": args.n_boot,
           "seed": args.seed, "assumptions": asdict(assumptions), "target_power": power.TARGET_POWER, "grids": {t: list(g) for t, g in GRIDS.items()},
           "lite_sizes": lite, "given_up": given_up, "claims": rows}
    text = json.dumps(doc, indent=1, sort_keys=False)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
        print(f"{len(rows)} claims -> {args.out} ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
