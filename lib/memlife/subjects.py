"""Reference subjects: model-free readers whose right answer is known (docs/design.md, "Reference subjects").

What both tracks share lives here: the names and how they are labelled, the seeded per-item draw,
the planted-noise parameters, and the coverage check of planted rates. What a subject replies is
track-specific (`memlife.memops.systems.subjects` for MemOps,
`memlife.restore.reading.subjects` for the restore audit).

* `gold` — always the item's gold response;
* `evidence-oracle` — the gold response exactly when all the evidence the item needs is in the
  context its memory system handed over, else an abstention;
* `noisy-oracle` — the evidence-oracle with planted, seeded errors: a miss (abstention) with a
  probability that grows with the context length, and a confusion toward a listed distractor.

A subject is never a model: every table and figure names it with `label`, "gold (reference)".
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

import numpy as np

GOLD = "gold"
EVIDENCE_ORACLE = "evidence-oracle"
NOISY_ORACLE = "noisy-oracle"
SUBJECTS = (GOLD, EVIDENCE_ORACLE, NOISY_ORACLE)
_SUFFIX = " (reference)"


def canonical(name: str) -> str:
    """The subject's name, from its name or its label; ValueError for anything else."""
    base = name[: -len(_SUFFIX)] if isinstance(name, str) and name.endswith(_SUFFIX) else name
    if base not in SUBJECTS:
        raise ValueError(f"unknown reference subject {name!r}; expected one of {SUBJECTS}")
    return base


def is_reference(name) -> bool:
    """True for a reference subject's name or label; False for a model (or anything else)."""
    try:
        canonical(name)
    except ValueError:
        return False
    return True


def label(name: str) -> str:
    """How tables and figures name a reader: "gold (reference)" for a subject, a model as it is."""
    return canonical(name) + _SUFFIX if is_reference(name) else name


def row_name(what: str, reader: str) -> str:
    """A results row's name: "ours: <what>" for a model's answers, "<label>: <what>" for a
    subject's, so that no table puts a reference subject's row among the models'."""
    return f"{label(reader)}: {what}" if is_reference(reader) else f"ours: {what}"


# ----------------------------------------------------------------------------- seeded draws
#
# An item's draw must not depend on what else is in the run, on the order it is asked in, on
# PYTHONHASHSEED or on the platform: a SHA-256 of the item's key, mixed with the seed by
# splitmix64. The mixing is vectorised, so a coverage simulation redraws thousands of items for
# hundreds of seeds with the very function the subject uses.

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def key_hash(*key) -> int:
    """A 64-bit hash of an item's key (strings, numbers), stable across runs and machines."""
    blob = json.dumps([str(k) for k in key], ensure_ascii=False, separators=(",", ":"))
    return int.from_bytes(hashlib.sha256(blob.encode("utf-8")).digest()[:8], "big")


def _splitmix(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):  # wrap-around multiplication is the algorithm
        z = x + _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
        return z ^ (z >> np.uint64(31))


def uniforms(seeds, hashes) -> np.ndarray:
    """Uniform [0, 1) draws for every (seed, item): shape broadcast(seeds, hashes)."""
    s = np.asarray(seeds, dtype=np.uint64)
    h = np.asarray(hashes, dtype=np.uint64)
    z = _splitmix(h ^ _splitmix(s))
    return (z >> np.uint64(11)).astype(np.float64) * 2.0 ** -53


def draw(seed: int, *key) -> float:
    """The uniform [0, 1) draw of one item under one seed."""
    return float(uniforms(np.array([seed]), np.array([key_hash(*key)], dtype=np.uint64))[0])


# ----------------------------------------------------------------------------- planted noise


@dataclass(frozen=True)
class Noise:
    """The noisy oracle's planted error mechanisms.

    miss: with probability min(miss_cap, miss_base + miss_slope_per_1k * context_k_tokens) the
    subject abstains although the evidence is there — a reader that loses evidence in a long
    context. confusion: otherwise, on an item with a listed distractor, with probability
    `confusion` it answers with the distractor instead.
    """

    miss_base: float = 0.05
    miss_slope_per_1k: float = 0.005
    miss_cap: float = 0.5
    confusion: float = 0.10

    def __post_init__(self):
        for name in ("miss_base", "miss_cap", "confusion"):
            v = getattr(self, name)
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"Noise.{name} must be a probability, got {v}")
        if self.miss_slope_per_1k < 0:
            raise ValueError(f"Noise.miss_slope_per_1k must be >= 0, got {self.miss_slope_per_1k}")

    def miss_rate(self, context_tokens):
        """The planted miss probability at a context length (scalar or array of tokens)."""
        p = np.minimum(self.miss_cap, self.miss_base + self.miss_slope_per_1k * np.asarray(context_tokens) / 1000.0)
        return float(p) if np.ndim(p) == 0 else p


MISS, CONFUSE, ANSWER = "miss", "confuse", "answer"


def planted_masks(noise: Noise, seeds, miss_hashes, confuse_hashes, context_tokens,
                  confusable) -> tuple[np.ndarray, np.ndarray]:
    """(missed, confused) boolean arrays, shaped as `seeds` broadcast against the items: the two
    draws of `outcomes` without the strings, for simulations that redraw millions of items.
    `seeds` of shape (R, 1) give R x N; seeds of shape (N,) give one seed per item."""
    missed = uniforms(seeds, miss_hashes) < noise.miss_rate(np.asarray(context_tokens, dtype=np.float64))
    confused = ~missed & np.asarray(confusable, dtype=bool) & (uniforms(seeds, confuse_hashes) < noise.confusion)
    return missed, confused


def outcomes(noise: Noise, seeds, miss_hashes, confuse_hashes, context_tokens, confusable) -> np.ndarray:
    """What the noisy oracle does with each item under each seed: an R x N array of MISS,
    CONFUSE or ANSWER for R seeds and N items.

    Items are those whose evidence is available (the others are abstentions whatever the seed).
    `miss_hashes` and `confuse_hashes` are the items' `key_hash`es for the two draws.
    """
    seeds = np.asarray(seeds).reshape(-1, 1)
    missed, confused = planted_masks(noise, seeds, miss_hashes, confuse_hashes, context_tokens, confusable)
    out = np.full(missed.shape, ANSWER, dtype=object)
    out[missed] = MISS
    out[confused] = CONFUSE
    return out


def outcome(noise: Noise, seed: int, key: tuple, context_tokens: float, confusable: bool) -> str:
    """One item's outcome: the draws are keyed by ("miss", *key) and ("confuse", *key)."""
    return str(outcomes(noise, [seed], [key_hash("miss", *key)], [key_hash("confuse", *key)],
                        [context_tokens], [confusable])[0, 0])


# ----------------------------------------------------------------------------- coverage


def interval_coverage(hits: np.ndarray, eligible: np.ndarray, clusters, planted, *, n_boot: int, seed: int,
                      level: float = 0.95) -> np.ndarray:
    """For each repetition (row of `hits` / `eligible`, R x N items), whether the cluster-bootstrap
    percentile interval of sum(hits) / sum(eligible) covers `planted` (a number, or one per row).

    One B x Q count matrix serves every repetition: all R intervals come from one matrix product,
    and each is still a valid bootstrap interval of its own repetition. Repetitions with no
    eligible item count as not covered.
    """
    from memlife import stats

    hits = np.atleast_2d(np.asarray(hits, dtype=np.float64))
    eligible = np.atleast_2d(np.asarray(eligible, dtype=np.float64))
    codes, uniques = _factorize(clusters)
    onehot = np.zeros((len(codes), len(uniques)))
    onehot[np.arange(len(codes)), codes] = 1.0
    num, den = hits @ onehot, eligible @ onehot  # R x Q per-cluster sums
    counts = stats.cluster_counts(len(uniques), n_boot, seed)
    rep = stats.safe_ratio(counts @ num.T, counts @ den.T)  # B x R
    lo, hi = stats.percentile_interval(rep, level)
    planted = np.broadcast_to(np.asarray(planted, dtype=np.float64), lo.shape)
    return (lo <= planted + 1e-12) & (planted - 1e-12 <= hi)


def _factorize(values) -> tuple[np.ndarray, np.ndarray]:
    uniques, codes = np.unique(np.asarray(values, dtype=object).astype(str), return_inverse=True)
    return codes, uniques
