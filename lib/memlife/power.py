"""Power by simulation: how large a run must be before a claim's test comes out, using the project's
own statistics.

The two tracks simulate runs in their records' shape at the papers' effect sizes
(`memlife.memops.analyses.power`, `memlife.restore.analyses.power`) and analyse each with the code their notebooks
use; this module holds what they share, and the closed forms the simulation is checked against:

- `latent_uniforms`: correlated uniforms from a latent Gaussian model: an outcome is ``u < p``, so
  its rate is exactly ``p`` whatever the correlation, and items of one cluster (probes of a topic,
  observations of a question) share a part of their latent draw.
- `binary_icc`: what a latent correlation is on the 0/1 scale (the ICC a design effect uses).
- `two_proportion_power`, `design_effect`, `clustered_two_proportion_power`: the textbook
  approximations, and `simulated_two_proportion_power`, the same question answered by simulation
  with the clustered bootstrap of `memlife.stats`: tests/test_power.py holds the two within
  simulation error.
- `Claim`, `curve`, `n_needed`: per claim the outcome of every simulated run at every size, as
  power (the share of runs whose test comes out as the paper's, or, for a null the paper reports
  at a resolution, whose interval is that fine), and the smallest size of the grid with 80%.

Every simulated run draws from its own generator, seeded by (seed, size, replicate), so a table
is the same for any number of worker processes.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
from scipy.stats import multivariate_normal, norm

from memlife import stats

# The power a claim's size is chosen for: the convention of the field (Cohen 1988).
TARGET_POWER = 0.8


def mc_se(power: float, runs: int) -> float:
    """A power's Monte-Carlo standard error over `runs` runs (at least that of one run in `runs`,
    so a power of 0 or 1 does not claim to be exact)."""
    return float(np.sqrt(max(power * (1 - power), 1 / runs) / runs))


def run_rng(seed: int, size: int, rep: int) -> np.random.Generator:
    """The generator of one simulated run: depends on (seed, size, replicate) only."""
    return np.random.default_rng(np.random.SeedSequence([int(seed), int(size), int(rep)]))


def latent_uniforms(rng: np.random.Generator, shape: tuple[int, ...],
                    shared: Sequence[tuple[float, np.ndarray]] = ()) -> np.ndarray:
    """Uniform(0, 1) draws of `shape` whose latent normals share parts: each ``(weight, z)`` in
    `shared` adds ``sqrt(weight) * z`` (z standard normal, broadcast to `shape`: a cluster's draw
    repeated over its items), the rest is independent noise. Latent correlation between two items
    = the summed weights of the parts they share; every marginal stays Uniform(0, 1)."""
    total = sum(w for w, _ in shared)
    if not 0 <= total <= 1:
        raise ValueError(f"the shared weights sum to {total}, outside [0, 1]")
    z = np.sqrt(1 - total) * rng.standard_normal(shape)
    for w, part in shared:
        z = z + np.sqrt(w) * np.broadcast_to(part, shape)
    return norm.cdf(z)


def binary_icc(p: float, latent_correlation: float) -> float:
    """The 0/1-scale correlation of two outcomes ``u < p`` whose latent normals correlate at
    `latent_correlation`: (P(both) - p^2) / (p (1 - p)), P(both) from the bivariate normal."""
    if latent_correlation == 0 or p in (0.0, 1.0):
        return 0.0
    t = norm.ppf(p)
    both = multivariate_normal(mean=[0, 0], cov=[[1, latent_correlation], [latent_correlation, 1]]).cdf([t, t])
    return float((both - p * p) / (p * (1 - p)))


def two_proportion_power(p1: float, p2: float, n1: float, n2: float, alpha: float = 0.05) -> float:
    """Power of the two-sided Wald test of p1 = p2 with n1 and n2 independent observations (the
    normal approximation; unpooled standard error, which is what a bootstrap of the difference
    estimates)."""
    se = np.sqrt(p1 * (1 - p1) / n1 + p2 * (1 - p2) / n2)
    z = norm.ppf(1 - alpha / 2)
    d = abs(p1 - p2) / se
    return float(norm.cdf(d - z) + norm.cdf(-d - z))


def design_effect(cluster_size: float, icc: float) -> float:
    """How much clustering inflates a mean's variance: 1 + (m - 1) ICC (Kish 1965)."""
    return 1 + (cluster_size - 1) * icc


def clustered_two_proportion_power(p1: float, p2: float, clusters: int, cluster_size: int, icc: float,
                                   alpha: float = 0.05) -> float:
    """`two_proportion_power` with each arm's clusters x cluster_size observations shrunk to their
    effective number, n / design_effect."""
    n_eff = clusters * cluster_size / design_effect(cluster_size, icc)
    return two_proportion_power(p1, p2, n_eff, n_eff, alpha)


def simulated_two_proportion_power(p1: float, p2: float, clusters: int, cluster_size: int,
                                   latent_correlation: float, *, reps: int, n_boot: int, seed: int,
                                   alpha: float = 0.05) -> tuple[float, float]:
    """(power, its Monte-Carlo standard error): two independent arms of `clusters` clusters each,
    outcomes correlated within a cluster at `latent_correlation`, tested with the project's
    clustered bootstrap (`stats.paired_ratio_difference` over every cluster of both arms, as
    the restore and MemOps contrasts are)."""
    q = 2 * clusters
    arm = np.repeat([0, 1], clusters)
    p = np.where(arm == 0, p1, p2)[:, None]
    a, b = arm == 0, arm == 1
    size = np.full(q, float(cluster_size))
    rejected = 0
    for rep in range(reps):
        rng = run_rng(seed, clusters, rep)
        u = latent_uniforms(rng, (q, cluster_size),
                            [(latent_correlation, rng.standard_normal((q, 1)))] if latent_correlation else [])
        hits = (u < p).sum(axis=1).astype(np.float64)
        counts = stats.cluster_counts(q, n_boot, seed=int(rng.integers(2**31)))
        c = stats.paired_ratio_difference(counts, hits * a, size * a, hits * b, size * b)
        rejected += c.p_value < alpha
    return rejected / reps, mc_se(rejected / reps, reps)


@dataclass(frozen=True)
class Claim:
    """One of a paper's claims as a run tests it.

    kind "power": a run's outcome is whether its test comes out as the paper's (1/0).
    kind "resolution": the claim is a null the paper reports "at a resolution of" `target`; a
    run's outcome is the smallest difference it resolves (an interval half-width), and it counts
    as a success when that is at most `target`.
    Either way a curve's value is the share of runs that succeed, and a size suffices when that
    share reaches TARGET_POWER. `assumed` says which of the effect's inputs the paper does not
    print (empty: all printed).
    """

    track: str
    key: str
    claim: str
    effect: float
    unit: str
    kind: str = "power"
    target: float | None = None
    assumed: str = ""
    source: str = ""
    claimed: bool = True

    def __post_init__(self):
        if self.kind not in ("power", "resolution"):
            raise ValueError(f"claim {self.key}: kind must be 'power' or 'resolution', not {self.kind!r}")
        if self.kind == "resolution" and self.target is None:
            raise ValueError(f"claim {self.key}: a resolution claim needs its target resolution")

    def success(self, outcome: float) -> float:
        """A run's outcome as 1.0 (the run shows the claim) or 0.0; NaN (the run could not test
        it, e.g. no accuracy-matched pair) is a failure."""
        if np.isnan(outcome):
            return 0.0
        return float(outcome <= self.target) if self.kind == "resolution" else float(outcome > 0)


@dataclass
class Curve:
    """A claim's power at each size: the share of runs that show it (`value`), its Monte-Carlo
    standard error, the runs behind it, and for a resolution claim the median run's resolution."""

    claim: Claim
    sizes: list[int] = field(default_factory=list)
    value: list[float] = field(default_factory=list)
    se: list[float] = field(default_factory=list)
    runs: list[int] = field(default_factory=list)
    median: list[float] = field(default_factory=list)


def curve(claim: Claim, outcomes: dict[int, list[float]]) -> Curve:
    """The claim's curve from its per-run outcomes at each size."""
    c = Curve(claim)
    for size in sorted(outcomes):
        x = np.asarray(outcomes[size], dtype=np.float64)
        hit = np.array([claim.success(v) for v in x])
        v = float(hit.mean())
        c.sizes.append(int(size))
        c.value.append(v)
        c.se.append(mc_se(v, len(x)))
        c.runs.append(len(x))
        defined = x[~np.isnan(x)]
        c.median.append(float(np.median(defined)) if claim.kind == "resolution" and len(defined) else float("nan"))
    return c


def n_needed(c: Curve, target: float = TARGET_POWER) -> int | None:
    """The smallest size of the grid from which on every larger size reaches `target` power (a
    curve that dips back below it after a first crossing is read at its last crossing); None when
    the largest size does not reach it."""
    ok = [v >= target for v in c.value]
    if not ok or not ok[-1]:
        return None
    i = len(ok) - 1
    while i > 0 and ok[i - 1]:
        i -= 1
    return c.sizes[i]
