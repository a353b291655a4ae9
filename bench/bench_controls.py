"""Stage by stage, the model-free computations of notebooks 14 and 25 at a profile's parameters.

Runs each notebook's library calls in the notebook's order, with the profile's parameters
(configs/<profile>.yaml), and prints the wall time of each stage and the total. Nothing is
written under results/: notebook 14's data is built (or loaded) in a temporary directory unless
--data-dir names one, and Mem0's stores go to a temporary directory (so the mem0 stage includes
ingesting its histories, as a fresh `make reproduce` does).

    PYTHONPATH=lib python bench/bench_controls.py 14 [--profile quick] [--data-dir DIR] [--systems bm25_turn ...]
    PYTHONPATH=lib python bench/bench_controls.py 25 [--profile quick]
    PYTHONPATH=lib python bench/bench_controls.py          # both (what `make bench` runs)

The grid stage of notebook 25 is broken down further by bench/bench_restore_grid.py.
"""
from __future__ import annotations

import argparse
import contextlib
import tempfile
import time
from pathlib import Path

import numpy as np

from memlife import subjects as ref
from memlife.base import config

_TIMES: list[tuple[str, float]] = []


@contextlib.contextmanager
def stage(name: str):
    t = time.perf_counter()
    yield
    dt = time.perf_counter() - t
    _TIMES.append((name, dt))
    print(f"  {name:<40} {dt:8.2f} s", flush=True)


def notebook_14(p: dict, data_dir: Path | None) -> None:
    from dataclasses import replace

    from memlife.memops.analyses import controls
    from memlife.memops.build import BuildParams, load_or_build

    noise = ref.Noise(miss_base=p["miss_base"], miss_slope_per_1k=p["miss_slope_per_1k"], miss_cap=p["miss_cap"],
                      confusion=p["confusion"])
    cfg = controls.ControlsConfig(
        seed=p["seed"], systems=p["systems"], settings=p["settings"], reader_windows=p["reader_windows"],
        max_instances=p["max_instances"], top_k_turns=p["top_k_turns"], top_k_sessions=p["top_k_sessions"],
        retrieval_tokens=p["retrieval_tokens"], top_k_memories=p["top_k_memories"], sweep_k=p["sweep_k"],
        sweep_tokens=p["sweep_tokens"], mem0_settings=p["mem0_settings"], mem0_max_instances=p["mem0_max_instances"],
        noise=noise)
    params = BuildParams(profile=p["profile"], seed=p["seed"], n_topics=p["n_topics"],
                         max_conversations=p["max_conversations"], longctx_tokens=p["longctx_tokens"],
                         realizer="template", verifier="off")
    with tempfile.TemporaryDirectory() as tmp:
        with stage("data (build or load)"):
            instances = load_or_build(params, data_dir or Path(tmp) / "data", progress=False)
        records, swept = [], []
        import pandas as pd

        # run_and_sweep one system at a time: the same work as the notebook's single call
        for name in cfg.systems:
            with stage(f"run_and_sweep {name}"):
                r, s = controls.run_and_sweep(instances, replace(cfg, systems=[name]), Path(tmp) / "stores",
                                              progress=False)
            records.append(r)
            swept.append(s)
        records = pd.concat(records, ignore_index=True)
        swept = pd.concat([s for s in swept if len(s)], ignore_index=True)
        for col in ("k", "retrieval_tokens"):
            swept[col] = swept[col].astype("Int64")
        with stage("sweep_mismatches"):
            assert controls.sweep_mismatches(records, swept).empty
        with stage("subject_scores"):
            controls.subject_scores(records, ["system", "setting", "reader_window"])
        with stage("availability_table x4"):
            for by in ([], ["op_type"], ["probe_type"], ["op_type", "probe_type"]):
                controls.availability_table(records, swept, by, n_boot=p["n_boot"], seed=p["seed"])
        with stage("coverage"):
            controls.coverage(records, noise, reps=p["coverage_reps"], n_boot=p["coverage_boot"], seed=p["seed"],
                              min_clusters=p["min_clusters"])


def notebook_25(p: dict) -> None:
    import pandas as pd

    from memlife.restore.judging import grading

    from memlife.restore.reading import arms
    from memlife.restore.analyses import controls, decompose, paper_analyses
    from memlife.restore.eviction.evict import CONTROL

    budgets = arms.resolve_budgets(p["budgets"], p["history_tokens"])
    cfg = controls.GridConfig(n_questions=p["n_questions"], history_tokens=p["history_tokens"], budgets=budgets,
                              seeds=p["seeds"], k=p["k"], restore_cap=p["restore_cap"], seed=p["seed"],
                              policies=p["policies"], ablation_arms=p["ablation_arms"], source=p["source"])
    noise = ref.Noise(miss_base=p["miss_base"], miss_slope_per_1k=p["miss_slope_per_1k"], miss_cap=p["miss_cap"],
                      confusion=p["confusion"])
    with stage("build_grid"):
        grid = controls.build_grid(cfg)
    records, readers = {}, {}
    for name in ref.SUBJECTS:
        with stage(f"read {name}"):
            records[name], readers[name] = controls.read(grid, name, seed=p["seed"], noise=noise)
    with stage("combine + observations + decompose"):
        grading.combine(*records.values())
        obs = {name: decompose.observations(r) for name, r in records.items()}
        {name: decompose.decompose(o) for name, o in obs.items()}
    with stage("evidence_oracle_expected"):
        controls.evidence_oracle_expected(grid)
    with stage("reference_decomposition"):
        controls.reference_decomposition(obs["evidence-oracle"], n_boot=p["n_boot"], seed=p["seed"],
                                         min_clusters=p["min_clusters"])
    with stage("matched_accuracy x2"):
        for name in ("evidence-oracle", "noisy-oracle"):
            paper_analyses.matched_accuracy(paper_analyses.cell_bootstrap(obs[name], p["n_boot"], p["seed"]),
                                      tolerance=p["match_tolerance"], control=CONTROL,
                                      min_clusters=p["min_clusters"])
    with stage("design + read_index + correct_at"):
        design = controls.design(grid)
        at = controls.read_index(design, [r.question_id for r in grid.reads], [r.prompt for r in grid.reads])
        right = controls.correct_at(design, noise, p["seed"])
        said = np.array([readers["noisy-oracle"].answers[r.prompt].outcome == ref.ANSWER for r in grid.reads])
        assert (right[at] == said).all()
    with stage("coverage"):
        controls.coverage(design, noise, reps=p["coverage_reps"], n_boot=p["coverage_boot"], seed=p["seed"],
                          min_clusters=p["min_clusters"])
    del pd


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("notebook", nargs="*", help="14 and/or 25 (default: both, as `make bench` runs it)")
    ap.add_argument("--profile", default="quick")
    ap.add_argument("--data-dir", type=Path, default=None, help="notebook 14's dataset (built there if absent)")
    ap.add_argument("--systems", nargs="+", default=None, help="notebook 14: only these memory systems")
    args = ap.parse_args()
    if set(args.notebook) - {"14", "25"}:
        ap.error(f"notebooks: 14 and/or 25, not {args.notebook}")
    for nb in args.notebook or ["14", "25"]:
        name = {"14": "14_memops_controls", "25": "25_restore_controls"}[nb]
        p = {"profile": args.profile, **config.notebook_params(args.profile, name)}
        if args.systems and nb == "14":
            p["systems"] = args.systems
        print(f"notebook {name} at profile {args.profile}:")
        t = time.perf_counter()
        if nb == "14":
            notebook_14(p, args.data_dir)
        else:
            notebook_25(p)
        print(f"  {'total':<40} {time.perf_counter() - t:8.2f} s")


if __name__ == "__main__":
    main()
