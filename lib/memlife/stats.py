"""Question-clustered bootstrap, Holm correction, paired contrasts, exact intervals and tests for
few clusters, and rater agreement.

The unit of resampling is the question (more generally, the cluster): when a question is drawn,
every row that belongs to it — all its seed replicates, in every cell — moves with it. Seed
replicates of one question share the question's difficulty, so resampling rows as if they were
independent would understate the uncertainty.

Vectorization: a bootstrap resample of Q clusters is a vector of counts (how often each cluster
was drawn). Every statistic used here is a ratio of sums over rows, so the resampled sums for all
cells and all resamples at once are one matrix product, ``counts (B x Q) @ per-cluster sums
(Q x M)``. Using the same count matrix for every cell also makes contrasts between cells paired.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.multitest import multipletests


def cluster_counts(n_clusters: int, n_boot: int, seed: int) -> np.ndarray:
    """B x Q matrix: row b counts how often each of Q clusters is drawn in resample b.

    Each row is Q draws with replacement from Q clusters (so it sums to Q). Deterministic in
    `seed`.
    """
    if n_clusters < 1:
        raise ValueError("cluster bootstrap needs at least one cluster")
    if n_boot < 1:
        raise ValueError("n_boot must be at least 1")
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, n_clusters, size=(n_boot, n_clusters))
    flat = draws + n_clusters * np.arange(n_boot)[:, None]
    counts = np.bincount(flat.ravel(), minlength=n_boot * n_clusters)
    return counts.reshape(n_boot, n_clusters).astype(np.float64)


def cluster_sums(
    df: pd.DataFrame, cluster: str, columns: Sequence[str], clusters: Sequence | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Per-cluster sums of `columns`: (cluster ids, Q x len(columns) array).

    `clusters` fixes the cluster order (and includes clusters with no rows, as zeros), so that
    several tables can share one count matrix.
    """
    sums = df.groupby(cluster, sort=True)[list(columns)].sum()
    if clusters is not None:
        unknown = set(sums.index) - set(clusters)
        if unknown:
            raise ValueError(f"clusters not in the given order: {sorted(unknown)[:5]}")
        sums = sums.reindex(list(clusters), fill_value=0)
    return sums.index.to_numpy(), sums.to_numpy(dtype=np.float64)


def safe_ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """num / den elementwise, NaN where den is 0 (a share of nothing is undefined, not 0)."""
    num = np.asarray(num, dtype=np.float64)
    den = np.asarray(den, dtype=np.float64)
    out = np.full(np.broadcast(num, den).shape, np.nan)
    np.divide(num, den, out=out, where=den != 0)
    return out


def resample_totals(counts: np.ndarray, sums: np.ndarray) -> np.ndarray:
    """Totals of every column in every resample: (B x Q) @ (Q x ...) -> (B x ...)."""
    q = sums.shape[0]
    if counts.shape[1] != q:
        raise ValueError(f"count matrix has {counts.shape[1]} clusters, sums have {q}")
    flat = sums.reshape(q, -1)
    return (counts @ flat).reshape((counts.shape[0],) + sums.shape[1:])


def ratio_replicates(counts: np.ndarray, num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """Bootstrap replicates of sum(num) / sum(den) for every column: B x ... (NaN if den sums to 0)."""
    return safe_ratio(resample_totals(counts, num), resample_totals(counts, den))


def percentile_interval(replicates: np.ndarray, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval along axis 0, ignoring undefined (NaN) replicates.

    Columns whose replicates are all undefined get NaN bounds.
    """
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    rep = np.asarray(replicates, dtype=np.float64)
    tail = 100 * (1 - level) / 2
    lo = np.full(rep.shape[1:], np.nan)
    hi = np.full(rep.shape[1:], np.nan)
    defined = np.any(~np.isnan(rep), axis=0)
    if np.any(defined):
        q = np.nanpercentile(rep[:, defined], [tail, 100 - tail], axis=0)
        lo[defined], hi[defined] = q[0], q[1]
    return lo, hi


def bootstrap_pvalue(replicates: np.ndarray, null: float = 0.0) -> np.ndarray:
    """Two-sided bootstrap p-value for H0: statistic == `null`, along axis 0.

    p = min(1, 2 * min(#(rep <= null) + 1, #(rep >= null) + 1) / (n + 1)) over the defined
    replicates: how far out in its own bootstrap distribution the null value sits. The +1 keeps
    p > 0 with finitely many resamples. A statistic whose replicates are all undefined gets p = 1
    (no evidence against the null).
    """
    rep = np.asarray(replicates, dtype=np.float64)
    valid = ~np.isnan(rep)
    n = valid.sum(axis=0)
    le = ((rep <= null) & valid).sum(axis=0)
    ge = ((rep >= null) & valid).sum(axis=0)
    p = 2 * np.minimum(le + 1, ge + 1) / (n + 1)
    return np.where(n > 0, np.minimum(1.0, p), 1.0)


def holm(pvalues: Sequence[float], alpha: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """Holm step-down correction (statsmodels): (reject, adjusted p-values)."""
    p = np.asarray(pvalues, dtype=np.float64)
    if p.size == 0:
        return np.zeros(0, dtype=bool), np.zeros(0)
    if np.any(np.isnan(p)):
        raise ValueError("Holm correction got an undefined (NaN) p-value")
    reject, p_adj, _, _ = multipletests(p, alpha=alpha, method="holm")
    return reject, p_adj


@dataclass(frozen=True)
class Contrast:
    """A paired difference a - b with its percentile interval and bootstrap p-value."""

    estimate: float
    low: float
    high: float
    p_value: float
    n_valid: int

    @property
    def excludes_zero(self) -> bool:
        return bool(self.low > 0 or self.high < 0)


def paired_ratio_difference(
    counts: np.ndarray,
    num_a: np.ndarray,
    den_a: np.ndarray,
    num_b: np.ndarray,
    den_b: np.ndarray,
    level: float = 0.95,
) -> Contrast:
    """sum(num_a)/sum(den_a) - sum(num_b)/sum(den_b), resampling clusters jointly for a and b.

    All four arrays are per-cluster sums in the same cluster order as `counts`; the same resample
    is applied to both sides, which is what makes the contrast paired.
    """
    est = float(safe_ratio(num_a.sum(), den_a.sum()) - safe_ratio(num_b.sum(), den_b.sum()))
    rep = ratio_replicates(counts, num_a, den_a) - ratio_replicates(counts, num_b, den_b)
    lo, hi = percentile_interval(rep[:, None], level)
    p = bootstrap_pvalue(rep[:, None])
    return Contrast(est, float(lo[0]), float(hi[0]), float(p[0]), int((~np.isnan(rep)).sum()))


def ratio_combination(
    counts: np.ndarray,
    terms: Sequence[tuple[float, np.ndarray, np.ndarray]],
    level: float = 0.95,
) -> Contrast:
    """sum_k w_k * sum(num_k)/sum(den_k), resampling clusters jointly for every term.

    `terms` are (weight, per-cluster numerator sums, per-cluster denominator sums), all in the
    cluster order of `counts`: (1, a) and (-1, b) is `paired_ratio_difference`; four terms make a
    difference of differences (say, how much more a setting change costs one operation type than
    the others), each ratio resampled with the same draws.
    """
    if not terms:
        raise ValueError("a ratio combination needs at least one term")
    est = float(sum(w * safe_ratio(n.sum(), d.sum()) for w, n, d in terms))
    rep = sum(w * ratio_replicates(counts, n, d) for w, n, d in terms)
    lo, hi = percentile_interval(np.asarray(rep)[:, None], level)
    p = bootstrap_pvalue(np.asarray(rep)[:, None])
    return Contrast(est, float(lo[0]), float(hi[0]), float(p[0]), int((~np.isnan(rep)).sum()))


def cluster_ratio_combination(terms: Sequence[tuple[float, np.ndarray, np.ndarray]]) -> np.ndarray:
    """Per cluster, sum_k w_k * num_k/den_k: the combination within each cluster (NaN where a
    cluster lacks one of its ratios) -- what `sign_flip_pvalue` tests."""
    return sum(w * safe_ratio(n, d) for w, n, d in terms)


def sign_flip_pvalue(per_cluster: Sequence[float], *, max_exact: int = 16, n_draws: int = 20000,
                     seed: int = 0) -> float:
    """Two-sided randomization p-value for H0: the per-cluster effects are symmetric about 0.

    The statistic is the mean of the defined per-cluster effects; its null distribution flips the
    sign of each cluster's effect independently -- all 2^Q patterns when Q <= `max_exact`, else
    `n_draws` random ones (with the observed pattern counted, so p > 0). With Q clusters the
    smallest attainable p is 2 / 2^Q: two clusters can never give p below 0.5, where a bootstrap
    over two clusters readily reports p near 0. NaN effects (a cluster lacking a cell) are left
    out; none left: p = 1.
    """
    d = np.asarray([x for x in per_cluster if not np.isnan(x)], dtype=np.float64)
    q = d.size
    if q == 0:
        return 1.0
    obs = abs(d.mean())
    tol = 1e-12 * max(1.0, obs)
    if q <= max_exact:
        signs = 1 - 2 * ((np.arange(2 ** q)[:, None] >> np.arange(q)) & 1)
        stats_ = np.abs((signs * d).mean(axis=1))
        return float(np.mean(stats_ >= obs - tol))
    rng = np.random.default_rng(seed)
    signs = rng.choice([-1.0, 1.0], size=(n_draws, q))
    stats_ = np.abs((signs * d).mean(axis=1))
    return float((1 + np.sum(stats_ >= obs - tol)) / (n_draws + 1))


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """The exact (Clopper-Pearson) interval for a binomial proportion k / n: never narrower than
    its coverage needs, so 0 of 6 gives [0, 0.459], not [0, 0]. n = 0: (NaN, NaN)."""
    from scipy.stats import beta

    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    if n < 0 or not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n, got k={k}, n={n}")
    if n == 0:
        return float("nan"), float("nan")
    a = (1 - level) / 2
    low = 0.0 if k == 0 else float(beta.ppf(a, k, n - k + 1))
    high = 1.0 if k == n else float(beta.ppf(1 - a, k + 1, n - k))
    return low, high


# Below this many clusters a cell's interval is exact (Clopper-Pearson over its items) and a
# contrast's p-value a sign-flip randomization test over clusters: a bootstrap over a handful of
# clusters understates its own uncertainty.
MIN_BOOTSTRAP_CLUSTERS = 20


@dataclass(frozen=True)
class CellInterval:
    """A proportion with its interval, the items and clusters behind it, and how it was made."""

    estimate: float
    low: float
    high: float
    n: int  # items (e.g. probes) with a defined label
    clusters: int  # clusters those items fall in
    method: str  # "bootstrap" (clusters >= min_clusters) or "clopper-pearson"


def proportion_interval(df: pd.DataFrame, cluster: str, column: str, *, n_boot: int, seed: int,
                        level: float = 0.95, min_clusters: int = MIN_BOOTSTRAP_CLUSTERS) -> CellInterval:
    """The share of True in `column` over its non-missing rows: a percentile interval from
    resampling `cluster` values when they number at least `min_clusters`, else the exact
    Clopper-Pearson interval over the rows (`clopper_pearson`; rows taken as independent, which
    is all a handful of clusters allows). Missing values (not applicable, undecided) are out."""
    vals = pd.to_numeric(df[column].astype("object"), errors="coerce")
    data = df.loc[vals.notna(), [cluster]].assign(_v=vals[vals.notna()].astype(float))
    n, q = len(data), int(data[cluster].nunique())
    if n == 0:
        return CellInterval(float("nan"), float("nan"), float("nan"), 0, 0, "none")
    est = float(data["_v"].mean())
    if q >= min_clusters:
        iv = clustered_ratio(data, cluster, "_v", n_boot=n_boot, seed=seed, level=level)
        return CellInterval(est, iv.low, iv.high, n, q, "bootstrap")
    k = int(round(data["_v"].sum()))
    low, high = clopper_pearson(k, n, level)
    return CellInterval(est, low, high, n, q, "clopper-pearson")


@dataclass(frozen=True)
class Interval:
    """A point estimate with its percentile interval."""

    estimate: float
    low: float
    high: float


def clustered_ratio(df: pd.DataFrame, cluster: str, numerator: str, denominator: str | None = None,
                    *, n_boot: int, seed: int, level: float = 0.95) -> Interval:
    """sum(numerator) / sum(denominator) over the rows of `df` (a mean when `denominator` is None),
    with a percentile interval from resampling `cluster` values — e.g. a MemOps accuracy
    clustered by evidence conversation, or a restore share clustered by question."""
    data = df.assign(_one=1.0)
    den = denominator or "_one"
    _, sums = cluster_sums(data, cluster, [numerator, den])
    rep = ratio_replicates(cluster_counts(len(sums), n_boot, seed), sums[:, 0], sums[:, 1])
    lo, hi = percentile_interval(rep[:, None], level)
    return Interval(float(safe_ratio(sums[:, 0].sum(), sums[:, 1].sum())), float(lo[0]), float(hi[0]))


@dataclass(frozen=True)
class Agreement:
    """Two raters' agreement over the items both labelled."""

    n: int  # items both raters labelled
    percent_agreement: float  # share of those items given the same label
    cohen_kappa: float  # agreement beyond chance: (p_o - p_e) / (1 - p_e)


def agreement(a: Sequence, b: Sequence) -> Agreement:
    """Percent agreement and Cohen's kappa of two raters, item by item: the one definition both
    tracks use (MemOps: the LLM judge against the scorer, per label; restore: every pair of judges).

    The edge cases, decided here once:
    - an item either rater left unlabelled (None or NaN: a label that does not apply, an errored
      call) is left out, and `n` counts the items both labelled;
    - no such item: n = 0 and both numbers NaN (nothing to agree on is not disagreement);
    - both raters gave every item one and the same label: chance agreement is 1 and kappa 0/0,
      so NaN, while percent agreement is 1;
    - sequences of different lengths are an error, never truncated.
    Kappa is scikit-learn's `cohen_kappa_score`.
    """
    a, b = list(a), list(b)
    if len(a) != len(b):
        raise ValueError(f"agreement needs two label sequences of equal length, got {len(a)} and {len(b)}")
    pairs = [(x, y) for x, y in zip(a, b) if not (pd.isna(x) or pd.isna(y))]
    if not pairs:
        return Agreement(0, float("nan"), float("nan"))
    xs = np.asarray([x for x, _ in pairs])
    ys = np.asarray([y for _, y in pairs])
    percent = float(np.mean(xs == ys))
    kappa = float("nan") if np.union1d(xs, ys).size < 2 else float(cohen_kappa_score(xs, ys))
    return Agreement(len(pairs), percent, kappa)
