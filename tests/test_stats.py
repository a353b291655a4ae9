"""memlife.stats: clustered bootstrap, intervals, p-values, Holm, agreement — against hand cases."""
import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.multitest import multipletests

from memlife import stats


def test_cluster_counts_are_resamples_of_all_clusters_and_deterministic():
    c = stats.cluster_counts(7, 50, seed=3)
    assert c.shape == (50, 7)
    assert np.all(c.sum(axis=1) == 7)  # each resample draws Q clusters
    assert np.array_equal(c, stats.cluster_counts(7, 50, seed=3))
    assert not np.array_equal(c, stats.cluster_counts(7, 50, seed=4))


def test_ratio_replicates_by_hand():
    # Three questions; per-question (numerator, denominator) sums.
    num = np.array([1.0, 0.0, 2.0])
    den = np.array([2.0, 1.0, 3.0])
    counts = np.array([[2, 0, 1], [0, 3, 0], [1, 1, 1]], dtype=float)
    rep = stats.ratio_replicates(counts, num, den)
    # resample 1: q1 twice + q3 once -> (2+2)/(4+3); resample 2: q2 three times -> 0/3.
    np.testing.assert_allclose(rep, [4 / 7, 0.0, 3 / 6])


def test_ratio_of_nothing_is_undefined_not_zero():
    rep = stats.ratio_replicates(np.array([[1.0, 0.0]]), np.array([1.0, 0.0]), np.array([0.0, 2.0]))
    assert np.isnan(rep[0])


def test_percentile_interval_ignores_undefined_replicates():
    rep = np.array([[np.nan, np.nan], [1.0, np.nan], [2.0, np.nan], [3.0, np.nan], [4.0, np.nan]])
    lo, hi = stats.percentile_interval(rep, level=0.5)
    assert lo[0] == pytest.approx(1.75) and hi[0] == pytest.approx(3.25)
    assert np.isnan(lo[1]) and np.isnan(hi[1])


def test_bootstrap_pvalue_by_hand():
    rep = np.array([[-1.0], [0.5], [1.0], [2.0]])
    # 1 replicate <= 0, 4 >= 0 -> p = 2 * min(2, 4) / 5
    assert stats.bootstrap_pvalue(rep)[0] == pytest.approx(0.8)
    # all replicates on the null: no evidence against it
    assert stats.bootstrap_pvalue(np.zeros((10, 1)))[0] == 1.0
    # all replicates far from the null: the smallest p the resample count allows
    assert stats.bootstrap_pvalue(np.ones((99, 1)))[0] == pytest.approx(2 / 100)
    assert stats.bootstrap_pvalue(np.full((5, 1), np.nan))[0] == 1.0


def test_holm_matches_hand_computation_and_statsmodels():
    p = [0.01, 0.04, 0.03, 0.005]
    reject, adj = stats.holm(p, alpha=0.05)
    # sorted 0.005*4=0.02, 0.01*3=0.03, 0.03*2=0.06, 0.04*1 -> max(0.06, 0.04)=0.06
    np.testing.assert_allclose(adj, [0.03, 0.06, 0.06, 0.02])
    assert reject.tolist() == [True, False, False, True]
    rng = np.random.default_rng(0)
    for _ in range(20):
        p = rng.random(12) ** 3
        r_sm, adj_sm, _, _ = multipletests(p, alpha=0.05, method="holm")
        r, a = stats.holm(p)
        np.testing.assert_allclose(a, adj_sm)
        assert r.tolist() == r_sm.tolist()
    with pytest.raises(ValueError, match="NaN"):
        stats.holm([0.1, np.nan])


def _seed_replicated_data(n_questions=40, n_seeds=3, seed=0):
    """Per-row data where every seed replicate of a question has the same outcome."""
    rng = np.random.default_rng(seed)
    y_q = (rng.random(n_questions) < 0.5).astype(float)
    return np.repeat(y_q, n_seeds), np.repeat(np.arange(n_questions), n_seeds)


def test_resampling_questions_not_rows_widens_the_interval():
    y, question = _seed_replicated_data()
    ones = np.ones_like(y)
    # Question clusters: per-question sums, one count per question.
    num_q = np.bincount(question, weights=y)
    den_q = np.bincount(question, weights=ones)
    cl = stats.ratio_replicates(stats.cluster_counts(len(num_q), 4000, 1), num_q, den_q)
    # Rows as if independent: every row its own cluster.
    rw = stats.ratio_replicates(stats.cluster_counts(len(y), 4000, 1), y, ones)
    cl_lo, cl_hi = stats.percentile_interval(cl[:, None])
    rw_lo, rw_hi = stats.percentile_interval(rw[:, None])
    width_cluster, width_rows = cl_hi[0] - cl_lo[0], rw_hi[0] - rw_lo[0]
    # Perfectly correlated triplicates: the honest interval is ~sqrt(3) times wider.
    assert width_cluster > 1.45 * width_rows
    assert width_cluster < 2.0 * width_rows


def test_paired_difference_uses_one_resample_for_both_sides():
    y, question = _seed_replicated_data(60)
    num = np.bincount(question, weights=y)
    den = np.bincount(question, weights=np.ones_like(y))
    counts = stats.cluster_counts(len(num), 2000, 0)
    same = stats.paired_ratio_difference(counts, num, den, num, den)
    # Identical sides: every paired replicate is exactly 0.
    assert (same.estimate, same.low, same.high, same.p_value) == (0.0, 0.0, 0.0, 1.0)
    # b = a minus one success on a question: a paired difference stays tight and positive.
    num_b = num.copy()
    num_b[np.flatnonzero(num > 0)[:10]] -= 1
    c = stats.paired_ratio_difference(counts, num, den, num_b, den)
    assert c.estimate == pytest.approx(10 / den.sum())
    assert c.low > 0 and c.excludes_zero


def test_clustered_interval_covers_truth_at_nominal_rate():
    """400 simulated data sets from a known distribution; the 95% interval should cover the truth
    in 93-97% of them (binomial sd of the coverage is 1.1 points)."""
    rng = np.random.default_rng(1)
    n_q, n_seeds, truth, covered = 120, 3, 0.4, 0
    for rep in range(400):
        p_q = rng.beta(2, 3, size=n_q)  # question difficulty; E[p] = 0.4 = the truth
        in_den = rng.random((n_q, n_seeds)) < 0.6  # a ratio: which replicates count at all
        hit = (rng.random((n_q, n_seeds)) < p_q[:, None]) & in_den
        boot = stats.ratio_replicates(
            stats.cluster_counts(n_q, 1000, 100000 + rep), hit.sum(1).astype(float),
            in_den.sum(1).astype(float))
        lo, hi = stats.percentile_interval(boot[:, None])
        covered += lo[0] <= truth <= hi[0]
    assert 0.93 <= covered / 400 <= 0.97


def test_agreement_and_kappa_by_hand():
    # the fifth item is unlabelled by a (None: the label does not apply), so 5 items are paired
    a = [True, True, False, False, None, True]
    b = [True, False, False, False, True, True]
    ag = stats.agreement(a, b)
    assert ag.n == 5 and ag.percent_agreement == pytest.approx(0.8)
    # a: 3 True / 2 False; b: 2 True / 3 False; p_o = 4/5 = 0.8;
    # p_e = 3/5*2/5 + 2/5*3/5 = 0.48; kappa = (0.8 - 0.48) / (1 - 0.48) = 0.32 / 0.52
    assert ag.cohen_kappa == pytest.approx(0.32 / 0.52)
    # the same items as numpy arrays with NaN for the missing label (the restore judges' records)
    same = stats.agreement(np.array([1.0, 1, 0, 0, np.nan, 1]), pd.Series([True, False, False, False, True, True]))
    assert (same.n, same.percent_agreement) == (5, ag.percent_agreement)
    assert same.cohen_kappa == pytest.approx(ag.cohen_kappa)


def test_agreement_edge_cases():
    # one label for every item from both raters: chance agreement is 1, kappa 0/0
    one = stats.agreement([True, True], [True, True])
    assert (one.n, one.percent_agreement) == (2, 1.0) and np.isnan(one.cohen_kappa)
    # constant raters that disagree on every item: p_o = p_e = 0, kappa 0
    assert stats.agreement([True, True], [False, False]) == stats.Agreement(2, 0.0, 0.0)
    # nothing both labelled: nothing to agree on, not disagreement
    none = stats.agreement([None, True], [False, None])
    assert none.n == 0 and np.isnan(none.percent_agreement) and np.isnan(none.cohen_kappa)
    assert stats.agreement([], []).n == 0
    with pytest.raises(ValueError):
        stats.agreement([True], [True, False])


def test_cluster_sums_orders_and_fills_clusters():
    import pandas as pd

    df = pd.DataFrame({"q": ["b", "a", "b"], "x": [1.0, 2.0, 3.0]})
    ids, sums = stats.cluster_sums(df, "q", ["x"])
    assert ids.tolist() == ["a", "b"] and sums[:, 0].tolist() == [2.0, 4.0]
    ids, sums = stats.cluster_sums(df, "q", ["x"], clusters=["c", "b", "a"])
    assert sums[:, 0].tolist() == [0.0, 4.0, 2.0]
    with pytest.raises(ValueError, match="not in the given order"):
        stats.cluster_sums(df, "q", ["x"], clusters=["a"])


def test_clustered_ratio_is_the_cluster_bootstrap_of_a_mean():
    import pandas as pd

    y, question = _seed_replicated_data(50, seed=4)
    df = pd.DataFrame({"question": question, "correct": y})
    iv = stats.clustered_ratio(df, "question", "correct", n_boot=3000, seed=2)
    assert iv.estimate == pytest.approx(y.mean())
    num = np.bincount(question, weights=y)
    rep = stats.ratio_replicates(stats.cluster_counts(50, 3000, 2), num, np.full(50, 3.0))
    lo, hi = stats.percentile_interval(rep[:, None])
    assert (iv.low, iv.high) == (pytest.approx(lo[0]), pytest.approx(hi[0]))


# ---------------------------------------------------------------- few clusters: exact intervals and tests

def test_clopper_pearson_known_values():
    low, high = stats.clopper_pearson(0, 6)
    assert low == 0.0 and high == pytest.approx(1 - 0.025 ** (1 / 6))  # 0.459
    low, high = stats.clopper_pearson(6, 6)
    assert high == 1.0 and low == pytest.approx(0.025 ** (1 / 6))
    low, high = stats.clopper_pearson(3, 10)
    assert (low, high) == (pytest.approx(0.0667, abs=1e-4), pytest.approx(0.6525, abs=1e-4))
    assert all(np.isnan(stats.clopper_pearson(0, 0)))
    with pytest.raises(ValueError):
        stats.clopper_pearson(7, 6)


def test_proportion_interval_switches_to_exact_below_the_cluster_floor():
    df = pd.DataFrame({"c": [f"t{i % 5}" for i in range(20)], "v": [i % 3 == 0 for i in range(20)]})
    iv = stats.proportion_interval(df, "c", "v", n_boot=200, seed=0)
    assert iv.method == "clopper-pearson" and iv.n == 20 and iv.clusters == 5
    assert (iv.low, iv.high) == stats.clopper_pearson(7, 20)
    many = pd.DataFrame({"c": [f"t{i}" for i in range(40)], "v": [i % 2 == 0 for i in range(40)]})
    iv = stats.proportion_interval(many, "c", "v", n_boot=200, seed=0)
    assert iv.method == "bootstrap" and iv.clusters == 40 and iv.low < 0.5 < iv.high
    # missing values (not applicable, undecided) are not items
    gaps = df.assign(v=[None if i < 4 else v for i, v in enumerate(df["v"])])
    assert stats.proportion_interval(gaps, "c", "v", n_boot=50, seed=0).n == 16


def test_sign_flip_pvalue_is_exact_and_bounded_by_the_clusters():
    assert stats.sign_flip_pvalue([0.5, 0.3]) == 0.5  # two clusters: never below 2 / 2^2
    assert stats.sign_flip_pvalue([1.0] * 5) == pytest.approx(2 / 32)
    assert stats.sign_flip_pvalue([1.0, -1.0]) == 1.0
    assert stats.sign_flip_pvalue([np.nan, 1.0, 1.0]) == 0.5  # a cluster lacking a cell is out
    assert stats.sign_flip_pvalue([]) == 1.0
    big = stats.sign_flip_pvalue([0.2] * 30, seed=1)  # Monte Carlo above max_exact
    assert 0 < big < 0.001


def test_ratio_combination_generalizes_the_paired_difference():
    counts = stats.cluster_counts(6, 300, 0)
    a_num, a_den = np.array([1., 2, 0, 3, 1, 2]), np.array([2., 3, 1, 3, 2, 2])
    b_num, b_den = np.array([0., 1, 0, 1, 1, 1]), np.array([2., 3, 1, 3, 2, 2])
    pair = stats.paired_ratio_difference(counts, a_num, a_den, b_num, b_den)
    comb = stats.ratio_combination(counts, [(1.0, a_num, a_den), (-1.0, b_num, b_den)])
    assert comb == pair
    per = stats.cluster_ratio_combination([(1.0, a_num, a_den), (-1.0, b_num, b_den)])
    assert per.tolist() == pytest.approx((a_num / a_den - b_num / b_den).tolist())
