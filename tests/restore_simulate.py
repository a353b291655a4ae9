"""SYNTHETIC restore records, for the tests and bench/bench_bootstrap.py only.

Nothing here touches a model: every label is a coin flip from a made-up generative model. These
records exist to exercise the decomposition and statistics code at realistic shapes and sizes.
They never feed a reported table or figure: this module lives beside the tests, outside the
`memlife` package, the notebooks read the records that 22_read_restore produces, and every
synthetic row says "SYNTHETIC" in its hypothesis and reader.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from memlife.restore.analyses.decompose import CONTRACT_COLUMNS
from memlife.restore.eviction.evict import CONTROL, FIFO, IMPORTANCE, NO_EVICT, POLICIES, RANDOM, REDUNDANCY
from memlife.restore.reading.read_context import REGIMES

SYNTHETIC_TAG = "SYNTHETIC"
QUESTION_TYPES = (
    "single-session-user", "single-session-assistant", "single-session-preference",
    "multi-session", "temporal-reasoning", "knowledge-update",
)
# Gold-unit eviction probability relative to the budget's base rate (the control ~3x baseline).
_POLICY_EVICTION = {FIFO: 1.0, RANDOM: 1.0, REDUNDANCY: 0.9, IMPORTANCE: 0.75, NO_EVICT: 0.0, CONTROL: 3.0}


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _flips(rng, n: int, p: float) -> np.ndarray:
    return rng.random(n) < p if p > 0 else np.zeros(n, dtype=bool)


def simulate_records(
    n_questions: int = 40,
    *,
    seeds: Sequence[int] = (0, 1, 2),
    policies: Sequence[str] = POLICIES,
    budgets: Sequence[int] = (8000, 30000, 80000),
    regimes: Sequence[str] = REGIMES,
    readers: Sequence[str] = (f"{SYNTHETIC_TAG}-reader",),
    judges: Sequence[str] = (f"{SYNTHETIC_TAG}-judge",),
    ablation_arms: bool = False,
    judge_flip: float = 0.05,
    rng_seed: int = 0,
) -> pd.DataFrame:
    """Synthetic records in the restore record contract (docs/design.md) (plus the ablation arms when asked).

    Later readers are stronger (fewer residual errors); later judges disagree with the first on a
    `judge_flip` share of labels. A forced-gold question whose gold all survived gets the same
    restore answer as its policy answer: one injection builds both contexts, so they are the same
    read (the paper's construction, which empties the recoverable bin).
    """
    rng = np.random.default_rng(rng_seed)
    qids = np.array([f"synthetic_q{i:04d}" for i in range(n_questions)])
    qtype = rng.choice(QUESTION_TYPES, size=n_questions)
    n_gold = rng.integers(1, 5, size=n_questions)
    difficulty = rng.normal(0, 1, size=n_questions)
    context = rng.integers(500, 4000, size=n_questions)
    base_evict = dict(zip(sorted(budgets), np.linspace(0.85, 0.2, len(budgets))))

    frames = []
    for r_i, reader in enumerate(readers):
        skill = 1.0 * r_i
        clean_correct = rng.random(n_questions) < _sigmoid(1.5 + skill - difficulty)
        grid = pd.MultiIndex.from_product(
            [range(n_questions), list(policies), list(budgets), list(seeds)],
            names=["q", "policy", "budget", "seed"],
        ).to_frame(index=False)
        q = grid["q"].to_numpy()
        rate = np.array([min(0.95, base_evict[b] * _POLICY_EVICTION.get(p, 1.0))
                         for p, b in zip(grid["policy"], grid["budget"])])
        evicted = rng.binomial(n_gold[q], rate)
        usable = clean_correct[q]
        read_ok = rng.random(len(grid)) < _sigmoid(2.0 + skill - difficulty[q])
        restore_ok = usable & (rng.random(len(grid)) < _sigmoid(1.0 + 1.5 * skill - difficulty[q]))
        lucky = rng.random(len(grid)) < 0.1
        for regime in regimes:
            missed = (rng.random(len(grid)) < 0.35) if regime == "topk" else np.zeros(len(grid), bool)
            policy_ok = np.where(evicted > 0, lucky, np.where(missed, lucky, read_ok & usable))
            restore = restore_ok.copy()
            if regime == "forced_gold":
                restore = np.where(evicted == 0, policy_ok, restore)
            arms = {"policy": policy_ok, "restore": restore}
            if ablation_arms:
                arms["restore_surviving"] = np.where(
                    evicted > 0, rng.random(len(grid)) < 0.03, restore)
                if regime == "forced_gold":  # inject(surviving gold) is the policy context
                    arms["restore_surviving"] = policy_ok
                arms["placebo"] = np.where(policy_ok, policy_ok, rng.random(len(grid)) < 0.08)
            for j_i, judge in enumerate(judges):
                flips = {arm: _flips(rng, len(grid), judge_flip if j_i else 0.0) for arm in arms}
                if regime == "forced_gold":
                    # Same context, same hypothesis, same label: the judge cannot tell them apart.
                    flips["restore"] = np.where(evicted == 0, flips["policy"], flips["restore"])
                    if "restore_surviving" in flips:
                        flips["restore_surviving"] = flips["policy"]
                for arm, ok in arms.items():
                    frames.append(pd.DataFrame({
                        "question_id": qids[q], "question_type": qtype[q],
                        "policy": grid["policy"], "budget": grid["budget"], "regime": regime,
                        "seed": grid["seed"], "reader": reader, "judge": judge, "arm": arm,
                        "correct": ok ^ flips[arm], "n_gold": n_gold[q],
                        "n_gold_evicted": evicted, "context_tokens": context[q],
                    }))
        for j_i, judge in enumerate(judges):
            frames.append(pd.DataFrame({
                "question_id": qids, "question_type": qtype, "policy": None, "budget": None,
                "regime": None, "seed": None, "reader": reader, "judge": judge,
                "arm": "clean_gold",
                "correct": clean_correct ^ _flips(rng, n_questions, judge_flip if j_i else 0.0),
                "n_gold": n_gold, "n_gold_evicted": 0, "context_tokens": context,
            }))
    out = pd.concat(frames, ignore_index=True)
    out["budget"] = out["budget"].astype("Int64")
    out["seed"] = out["seed"].astype("Int64")
    out["correct"] = out["correct"].astype(bool)
    out["hypothesis"] = f"{SYNTHETIC_TAG} answer"
    out["judge_raw"] = np.where(out["correct"], "CORRECT", "INCORRECT")
    return out[list(CONTRACT_COLUMNS)]
