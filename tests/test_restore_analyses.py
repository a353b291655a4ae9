"""R1-R4, the judge audit and the ablations, on small records computed by hand."""
import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.multitest import multipletests

from memlife.restore.eviction import evict
from memlife.restore.judging import grading
from memlife.restore.analyses import paper_analyses, paper_tables
from memlife.restore.analyses import decompose as d

from restore_simulate import simulate_records


def _base(qid, arm, correct, judge="j", reader="r", **cell):
    return dict(question_id=qid, question_type=cell.pop("qtype", "multi-session"),
                policy=cell.get("policy"), budget=cell.get("budget"), regime=cell.get("regime"),
                seed=cell.get("seed"), reader=reader, judge=judge, arm=arm, correct=correct,
                n_gold=2, n_gold_evicted=cell.get("evicted", 0), context_tokens=10,
                hypothesis="h", judge_raw="")


def observed(qid, policy, budget, regime, policy_ok, restore_ok=None, evicted=0, seed=0, **extra):
    """Policy row (+ restore row, + any ablation arm given as arm=correct)."""
    cell = dict(policy=policy, budget=budget, regime=regime, seed=seed, evicted=evicted)
    rows = [_base(qid, "policy", policy_ok, **cell)]
    if restore_ok is not None:
        rows.append(_base(qid, "restore", restore_ok, **cell))
    rows += [_base(qid, arm, ok, **cell) for arm, ok in extra.items()]
    return rows


def clean(*qids, wrong=()):
    return [_base(q, "clean_gold", q not in wrong) for q in qids]


def obs_of(rows):
    return d.observations(pd.DataFrame(rows))


def test_regime_gap_by_hand():
    # top-k: q1 irreversible, q2 and q3 recoverable -> recoverable share 2/3
    # forced-gold: q1 and q2 irreversible, q3 residual -> recoverable share 0
    rows = clean("q1", "q2", "q3", "q4")
    f = ("fifo", 8000)
    rows += observed("q1", *f, "topk", False, True, evicted=1)
    rows += observed("q2", *f, "topk", False, True, evicted=0)
    rows += observed("q3", *f, "topk", False, True, evicted=0)
    rows += observed("q4", *f, "topk", True)
    rows += observed("q1", *f, "forced_gold", False, True, evicted=1)
    rows += observed("q2", *f, "forced_gold", False, True, evicted=1)
    rows += observed("q3", *f, "forced_gold", False, False, evicted=0)
    rows += observed("q4", *f, "forced_gold", True)
    boot = paper_analyses.cell_bootstrap(obs_of(rows), n_boot=2000, seed=0)
    r2 = paper_analyses.regime_gap(boot, min_clusters=1)
    assert len(r2) == 1
    row = r2.iloc[0]
    assert row.recoverable_share_topk == pytest.approx(2 / 3)
    assert row.recoverable_share_forced_gold == 0
    assert row.gap == pytest.approx(2 / 3)
    assert row.gap_low <= row.gap <= row.gap_high
    assert row.family_size == 1
    # top-k's share rests on q1-q3, forced-gold's on q1 and q2: 2 questions, marked at the default
    assert row.n_questions == 2 and not row.few_questions
    marked = paper_analyses.regime_gap(boot).iloc[0]
    assert marked.few_questions and np.isnan(marked.gap_low) and np.isnan(marked.gap_high)
    assert marked.gap == row.gap and marked.p_value == row.p_value


def test_regime_gap_holm_is_statsmodels_holm_within_each_reader_and_judge():
    rec = simulate_records(40, seeds=(0, 1), readers=("SYN-a", "SYN-b"), rng_seed=3)
    boot = paper_analyses.cell_bootstrap(d.observations(rec), n_boot=1000, seed=0)
    r2 = paper_analyses.regime_gap(boot, alpha=0.05)
    assert len(r2) == 2 * 4 * 3  # two readers x four evicting policies x three budgets
    for _, g in r2.groupby(["reader", "judge"]):
        reject, adj, _, _ = multipletests(g["p_value"], alpha=0.05, method="holm")
        np.testing.assert_allclose(g["p_holm"], adj)
        assert g["holm_reject"].tolist() == reject.tolist()
        assert (g["family_size"] == 12).all()


def test_shares_point_estimates_are_the_decomposition():
    obs = d.observations(simulate_records(25, rng_seed=1))
    boot = paper_analyses.cell_bootstrap(obs, n_boot=300, seed=0)
    r1 = paper_analyses.shares(boot, min_clusters=1)
    dec = d.decompose(obs)
    pd.testing.assert_series_equal(r1["two_bin_share"], dec["two_bin_share"], check_names=False)
    pd.testing.assert_series_equal(r1["accuracy"], dec["accuracy"], check_names=False)
    # The per-question sums add up to the cell counts.
    np.testing.assert_array_equal(boot.sums.sum(axis=0)[:, 0], dec["n_observations"])
    # Same seed, same intervals; another seed, other intervals.
    again = paper_analyses.shares(paper_analyses.cell_bootstrap(obs, n_boot=300, seed=0), min_clusters=1)
    pd.testing.assert_frame_equal(r1, again)
    other = paper_analyses.shares(paper_analyses.cell_bootstrap(obs, n_boot=300, seed=1), min_clusters=1)
    assert not np.allclose(r1["two_bin_share_low"].fillna(0), other["two_bin_share_low"].fillna(0))


def test_matched_accuracy_by_hand():
    # Budget 8000, top-k, four oracle-answerable questions:
    #   fifo:        q1 irreversible, q2 irreversible, q3 q4 right    -> accuracy 0.5, rate 2/4
    #   random:      identical outcomes to fifo                       -> accuracy 0.5, rate 2/4
    #   redundancy:  q1 q2 q3 residual, q4 right                       -> accuracy 0.25, rate 0
    #   control:     q1..q4 irreversible                               -> accuracy 0, rate 1
    rows = clean("q1", "q2", "q3", "q4")
    b = 8000
    for p in ("fifo", "random"):
        rows += observed("q1", p, b, "topk", False, True, evicted=1)
        rows += observed("q2", p, b, "topk", False, True, evicted=2)
        rows += observed("q3", p, b, "topk", True)
        rows += observed("q4", p, b, "topk", True)
    for q in ("q1", "q2", "q3"):
        rows += observed(q, "redundancy", b, "topk", False, False, evicted=0)
    rows += observed("q4", "redundancy", b, "topk", True)
    for q in ("q1", "q2", "q3", "q4"):
        rows += observed(q, evict.CONTROL, b, "topk", False, True, evicted=2)
    boot = paper_analyses.cell_bootstrap(obs_of(rows), n_boot=1000, seed=0)
    r3 = paper_analyses.matched_accuracy(boot, tolerance=0.1, min_clusters=1)
    matched = r3[r3["comparison"] == "matched_pair"]
    assert matched[["policy_a", "policy_b"]].values.tolist() == [["fifo", "random"]]
    m = matched.iloc[0]
    assert (m.difference, m.low, m.high, m.dissociates) == (0.0, 0.0, 0.0, False)
    assert m.irreversible_rate_a == pytest.approx(0.5)
    control = r3[r3["comparison"] == "control"].set_index("policy_b")
    assert control.index.tolist() == ["fifo", "random", "redundancy"]
    assert control.loc["fifo", "difference"] == pytest.approx(0.5)
    assert control.loc["redundancy", "difference"] == pytest.approx(1.0)
    # Control minus redundancy is 1 on every question: no resample can reach 0.
    assert control.loc["redundancy", "dissociates"]
    # Four questions: at the default floor no interval is printed and nothing dissociates
    marked = paper_analyses.matched_accuracy(boot, tolerance=0.1)
    assert (marked["n_questions"] == 4).all() and marked["few_questions"].all()
    assert marked[["low", "high", "half_width"]].isna().all().all() and not marked["dissociates"].any()
    # A wider tolerance admits the redundancy pairs too.
    wide = paper_analyses.matched_accuracy(boot, tolerance=0.25)
    assert (wide["comparison"] == "matched_pair").sum() == 3


def test_matched_accuracy_uses_only_shared_questions():
    rows = clean("q1", "q2", "q3")
    rows += observed("q1", "fifo", 8000, "topk", False, True, evicted=1)
    rows += observed("q2", "fifo", 8000, "topk", True)
    rows += observed("q3", "fifo", 8000, "topk", False, True, evicted=1)  # random never saw q3
    rows += observed("q1", "random", 8000, "topk", True)
    rows += observed("q2", "random", 8000, "topk", False, True, evicted=1)
    r3 = paper_analyses.matched_accuracy(paper_analyses.cell_bootstrap(obs_of(rows), 500, 0), tolerance=1.0, control=None)
    row = r3.iloc[0]
    assert row.n_shared_questions == 2
    assert (row.irreversible_rate_a, row.irreversible_rate_b) == (0.5, 0.5)


def test_residuals_by_type_and_reader():
    rows = clean("q1", "q2", "q3")
    rows += [dict(r, question_type="temporal") for r in
             observed("q1", "no_evict", 100, "forced_gold", False, False)]
    rows += observed("q2", "no_evict", 100, "forced_gold", False, False)
    rows += observed("q3", "no_evict", 100, "forced_gold", False, True)
    rows += observed("q1", "no_evict", 50, "forced_gold", False, False)
    obs = obs_of(rows)
    by_type = paper_analyses.residual_by_type(obs, min_clusters=1).set_index(["budget", "question_type"])
    assert by_type.loc[(100, "temporal"), "residual"] == 1
    assert by_type.loc[(100, "multi-session"), "residual"] == 1
    assert by_type.loc[(100, "multi-session"), "residual_share"] == 0.5
    assert by_type.loc[(100, "multi-session"), "n_questions"] == 2
    # two questions: at the default floor the share is not printed
    assert np.isnan(paper_analyses.residual_by_type(obs).set_index(["budget", "question_type"]).loc[(100, "multi-session"), "residual_share"])
    res = paper_analyses.reader_residuals(obs)  # largest budget by default
    assert res[["budget", "n_errors", "residual"]].values.tolist() == [[100, 3, 2]]


def test_judge_agreement_by_hand():
    items = [("q1", True, True), ("q2", True, False), ("q3", False, False), ("q4", False, False),
             ("q5", True, None)]
    rows = []
    for q, la, lb in items:
        base = observed(q, "fifo", 8000, "topk", la)[0]
        rows.append(base)
        rows.append(dict(base, judge="k", correct=lb))
    rec = d.normalize_records(pd.DataFrame(rows))
    ag = paper_analyses.judge_agreement(rec)
    assert len(ag) == 1
    row = ag.iloc[0]
    assert (row.judge_a, row.judge_b, row.n_items, row.n_excluded) == ("j", "k", 4, 1)
    assert row.percent_agreement == pytest.approx(0.75)
    # p_o = 3/4; a says True 2/4, b 1/4 -> p_e = 0.5*0.25 + 0.5*0.75 = 0.5; kappa = 0.25/0.5
    assert row.cohen_kappa == pytest.approx(0.5)


def test_undecided_share_and_the_llm_filled_items_left_out_of_agreement():
    """The deterministic judge's UNDECIDED items per reader x type; where the LLM judge filled one
    in, the agreement leaves it out (it would be the LLM judge agreeing with itself)."""
    det, llm = grading.DETERMINISTIC_JUDGE, "llm"
    rows = []
    for q, qtype, raw, ok in [("q1", "multi-session", "CORRECT", True),
                              ("q2", "multi-session", "UNDECIDED", None),
                              ("q3", "single-session-preference", "UNDECIDED -> llm: CORRECT", True),
                              ("q4", "single-session-preference", "INCORRECT", False)]:
        base = _base(q, "policy", ok, policy="fifo", budget=8000, regime="topk", seed=0, qtype=qtype)
        rows.append(dict(base, judge=det, judge_raw=raw))
        rows.append(dict(base, judge=llm, judge_raw="CORRECT" if ok is not False else "INCORRECT",
                         correct=True if ok is None else ok))
        rows.append(dict(_base(q, "clean_gold", True, judge=det, qtype=qtype), judge_raw="CORRECT"))
    rows.append(dict(_base("q1", "placebo", None, judge=det, policy="fifo", budget=8000, regime="topk", seed=0),
                     judge_raw="UNDECIDED"))  # an ablation arm: not counted
    rec = d.normalize_records(pd.DataFrame(rows))
    share = paper_analyses.undecided_share(rec)
    assert share[["question_type", "n_items", "n_undecided", "n_filled_by_llm"]].values.tolist() == [
        ["multi-session", 4, 1, 0], ["single-session-preference", 4, 1, 1], ["all", 8, 2, 1]]
    assert share["undecided_share"].tolist() == pytest.approx([0.25, 0.25, 0.25])
    ag = paper_analyses.judge_agreement(rec[rec["arm"] == "policy"])
    row = ag.iloc[0]
    assert (row.n_items, row.n_excluded, row.percent_agreement) == (2, 2, 1.0)


def test_restore_tightness_ablation_by_hand():
    rows = clean("q1", "q2", "q3")
    rows += observed("q1", "fifo", 8000, "topk", False, True, evicted=1,
                     restore_surviving=True, placebo=False)
    rows += observed("q2", "fifo", 8000, "topk", False, True, evicted=2,
                     restore_surviving=False, placebo=True)
    rows += observed("q3", "fifo", 8000, "topk", False, False, evicted=0, placebo=False)
    obs = obs_of(rows)
    sg = paper_analyses.surviving_gold_ablation(obs, min_clusters=1).iloc[0]
    assert (sg.n_irreversible_tested, sg.n_become_recoverable, sg.share, sg.n_questions) == (2, 1, 0.5, 2)
    pl = paper_analyses.placement_placebo(obs, min_clusters=1).iloc[0]
    assert (pl.n_errors_tested, pl.n_placebo_flips, pl.n_restore_flips, pl.n_questions) == (3, 1, 2, 3)
    assert pl.placebo_flip_share == pytest.approx(1 / 3)
    # three questions: at the default floor the counts stay, the shares do not
    assert np.isnan(paper_analyses.surviving_gold_ablation(obs).iloc[0].share)
    assert paper_analyses.placement_placebo(obs).iloc[0][["placebo_flip_share", "restore_flip_share"]].isna().all()
    # Records without the ablation arms give empty tables, not zeros.
    plain = obs_of(clean("q1") + observed("q1", "fifo", 8000, "topk", False, True, evicted=1))
    assert paper_analyses.surviving_gold_ablation(plain).empty and paper_analyses.placement_placebo(plain).empty


def test_pick_headline_reader():
    obs = d.observations(simulate_records(5, readers=("SYN-b", "SYN-a")))
    assert paper_analyses.pick(obs, "reader") == "SYN-a"  # equal counts: first by name
    assert paper_analyses.pick(obs, "reader", "SYN-b") == "SYN-b"
    with pytest.raises(ValueError, match="not in the records"):
        paper_analyses.pick(obs, "reader", "gpt-4o-mini")


def test_table1_puts_paper_values_on_matching_budget_ranks():
    obs = d.observations(simulate_records(20, budgets=(500, 1000, 2000)))
    r1 = paper_analyses.shares(paper_analyses.cell_bootstrap(obs, 200, 0))
    t = paper_tables.table1(r1, "SYNTHETIC-reader", "SYNTHETIC-judge").set_index(["policy", "budget"])
    assert t.loc[("fifo", 2000), "paper_budget"] == 80000
    assert t.loc[("fifo", 2000), "paper_two_bin_share"] == 0.71
    assert t.loc[("importance", 500), "paper_two_bin_share"] == 1.0
    assert np.isnan(t.loc[("fifo", 1000), "paper_two_bin_share"])  # the paper prints no 30k value
    assert np.isnan(t.loc[("no_evict", 2000), "paper_two_bin_share"])


def test_pick_prefers_an_llm_judge_to_the_deterministic_scorer():
    obs = d.observations(simulate_records(5, judges=("deterministic", "zz-llm-judge")))
    assert paper_analyses.pick(obs, "judge") == "zz-llm-judge"
    only = d.observations(simulate_records(5, judges=("deterministic",)))
    assert paper_analyses.pick(only, "judge") == "deterministic"


def test_matched_accuracy_refuses_records_without_the_control():
    """Records without the control would give "0 of 0 control contrasts"; they are an error."""
    rows = clean("q1", "q2")
    for p in ("fifo", "random"):
        rows += observed("q1", p, 8000, "topk", False, True, evicted=1)
        rows += observed("q2", p, 8000, "topk", True)
    boot = paper_analyses.cell_bootstrap(obs_of(rows), 100, 0)
    with pytest.raises(ValueError, match=r"control policy 'control' is missing.*r/j@8000"):
        paper_analyses.matched_accuracy(boot, tolerance=1.0)
    # a control under any other name ("destructive") is missing just the same
    renamed = clean("q1") + observed("q1", "fifo", 8000, "topk", True) + \
        observed("q1", "destructive", 8000, "topk", False, True, evicted=1)
    with pytest.raises(ValueError, match="missing"):
        paper_analyses.matched_accuracy(paper_analyses.cell_bootstrap(obs_of(renamed), 100, 0), tolerance=1.0)
    assert (paper_analyses.matched_accuracy(boot, tolerance=1.0, control=None)["comparison"] == "matched_pair").all()


def _residual_rows(weak_residuals: int, strong_residuals: int):
    """No-evict @ 100, forced-gold: reader 'a-reader' and 'b-reader' with the given residuals."""
    rows = []
    for reader, n in (("a-reader", weak_residuals), ("b-reader", strong_residuals)):
        for i in range(4):
            q = f"q{i}"
            rows.append(_base(q, "clean_gold", True, reader=reader))
            rows += [dict(r, reader=reader) for r in
                     observed(q, evict.NO_EVICT, 100, "forced_gold", False, i >= n)]
    return rows


@pytest.mark.parametrize("primary_residuals, second_residuals", [(3, 1), (1, 3), (2, 2)])
def test_r4_names_each_reader_and_reads_the_direction_off_the_data(primary_residuals, second_residuals):
    # The primary reader is "b-reader": alphabetically second, so sorting cannot stand in for it.
    obs = obs_of(_residual_rows(second_residuals, primary_residuals))
    res = paper_analyses.reader_residuals(obs)
    cmp = paper_analyses.compare_reader_residuals(res, "b-reader")
    assert (cmp.primary, cmp.primary_residual) == ("b-reader", primary_residuals)
    assert (cmp.second, cmp.second_residual) == ("a-reader", second_residuals)
    expected_more = (None if primary_residuals == second_residuals else
                     "b-reader" if primary_residuals > second_residuals else "a-reader")
    assert cmp.more == expected_more
    table = paper_tables.paper_vs_ours_robustness(pd.DataFrame(columns=["comparison", "dissociates", "difference"]),
                                       res, pd.DataFrame(), pd.DataFrame(), pd.DataFrame(),
                                       reader="b-reader").set_index("quantity")
    assert table.loc["R4 residual, primary reader", "ours"] == primary_residuals
    assert table.loc["R4 residual, primary reader", "our_cell"].startswith("b-reader:")
    second = table.loc["R4 residual, second reader (paper: the stronger)"]
    assert second.ours == second_residuals
    assert ("equal residuals" if expected_more is None else f"{expected_more} has more") in second.our_cell
    with pytest.raises(ValueError, match="name the primary reader"):
        paper_analyses.compare_reader_residuals(res)


def test_audit_agreement_is_the_headline_judge_against_the_scorer():
    # Three judges; alphabetical order would put "aa-judge" vs "bb-judge" first.
    ag = pd.DataFrame([
        dict(judge_a="aa-judge", judge_b="bb-judge", reader="r", percent_agreement=0.5, cohen_kappa=0.0),
        dict(judge_a="aa-judge", judge_b="deterministic", reader="r", percent_agreement=0.6, cohen_kappa=0.1),
        dict(judge_a="bb-judge", judge_b="deterministic", reader="r", percent_agreement=0.9, cohen_kappa=0.8),
    ])
    assert paper_analyses.audit_agreement(ag, "bb-judge").percent_agreement == 0.9
    assert paper_analyses.audit_agreement(ag, "aa-judge").percent_agreement == 0.6
    with pytest.raises(ValueError, match="ambiguous"):
        paper_analyses.audit_agreement(ag, "deterministic")
    with pytest.raises(ValueError, match="name the headline judge"):
        paper_analyses.audit_agreement(ag)
    assert paper_analyses.audit_agreement(ag.iloc[2:], "deterministic").judge_a == "bb-judge"
    assert paper_analyses.audit_agreement(ag.iloc[:0], "bb-judge") is None


def test_load_run_reads_a_profiles_records_and_picks_the_headline_reader_and_judge(tmp_path, monkeypatch):
    from memlife.base import paths

    monkeypatch.setenv("MEMLIFE_ROOT", str(tmp_path))
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "smoke.yaml").write_text("common: {}\nnotebooks: {}\n")
    with pytest.raises(FileNotFoundError, match="run notebooks/22_read_restore.ipynb first"):
        paper_analyses.load_run("smoke")
    rec = simulate_records(5, judges=("deterministic", "zz-llm-judge"))
    legacy = grading.legacy_records_path(paths.layout("smoke").run)
    legacy.parent.mkdir(parents=True)
    rec.to_parquet(legacy, index=False)
    with pytest.raises(FileNotFoundError, match="single records file from before per-reader records"):
        paper_analyses.load_run("smoke")
    legacy.unlink()
    path = grading.records_dir(paths.layout("smoke").run)
    grading.write_records(rec, path)
    run = paper_analyses.load_run("smoke")
    assert run.path == path and len(run.records) == len(rec)
    assert (run.reader, run.judge) == (rec["reader"].iloc[0], "zz-llm-judge")  # an LLM judge over the scorer
    pd.testing.assert_frame_equal(run.obs, d.observations(d.load_records(path), source=str(path)))
    assert paper_analyses.load_run("smoke", judge="deterministic").judge == "deterministic"
    assert f"{len(rec):,} records" in run.describe() and "headline reader" in run.describe()


def test_a_control_cell_emptied_by_unlabelled_observations_has_no_contrast_and_a_warning():
    """The control is in the records, but at one budget every observation was left unlabelled
    (excluded by decompose.observations): that budget has no control contrast; the others do."""
    rows = clean("q1", "q2")
    for b in (8000, 30000):
        for p in ("fifo", "control"):
            if (p, b) == ("control", 8000):
                continue
            rows += observed("q1", p, b, "topk", False, True, evicted=1)
            rows += observed("q2", p, b, "topk", True)
    boot = paper_analyses.cell_bootstrap(obs_of(rows), 100, 0)
    with pytest.warns(UserWarning, match=r"no labelled observation .* r/j@8000"):
        r3 = paper_analyses.matched_accuracy(boot, tolerance=1.0)
    ctl = r3[r3["comparison"] == "control"]
    assert list(ctl["budget"]) == [30000]


def test_a_share_interval_from_fewer_questions_than_the_floor_is_left_empty_and_counted():
    """fifo@8000 top-k: 3 questions with a restore-corrected error (q1 irreversible, q2 and q3
    recoverable) of 25 in the cell; with a floor of 20 its two-bin interval is empty while the
    accuracy interval (25 questions) stays."""
    qs = [f"q{i:02d}" for i in range(25)]
    rows = clean(*qs)
    rows += observed("q00", "fifo", 8000, "topk", False, True, evicted=1)
    rows += observed("q01", "fifo", 8000, "topk", False, True, evicted=0)
    rows += observed("q02", "fifo", 8000, "topk", False, True, evicted=0)
    for q in qs[3:]:
        rows += observed(q, "fifo", 8000, "topk", True)
    r1 = paper_analyses.shares(paper_analyses.cell_bootstrap(obs_of(rows), n_boot=300, seed=0))
    row = r1.iloc[0]
    assert row.n_questions == 25 and row.two_bin_share_questions == 3 and row.accuracy_questions == 25
    assert row.two_bin_share == pytest.approx(1 / 3)
    assert np.isnan(row.two_bin_share_low) and np.isnan(row.two_bin_share_high)
    assert row.accuracy_low <= row.accuracy <= row.accuracy_high
    assert r1.attrs["min_clusters"] == paper_analyses.MIN_CLUSTERS == 20


def test_a_paper_vs_ours_share_from_few_errors_says_anecdotal_instead_of_a_number():
    """fifo top-k at the smallest budget has 3 restore-corrected errors: "anecdotal", no share; the
    placebo row rests on 25 tested errors and keeps its share, with its n."""
    rows = clean(*[f"q{i:02d}" for i in range(4)])
    rows += observed("q00", "fifo", 8000, "topk", False, True, evicted=1)
    rows += observed("q01", "fifo", 8000, "topk", False, True, evicted=0)
    rows += observed("q02", "fifo", 8000, "topk", False, True, evicted=2)
    rows += observed("q03", "fifo", 8000, "topk", True)
    rows += observed("q00", "fifo", 8000, "forced_gold", False, True, evicted=1)
    obs = obs_of(rows)
    boot = paper_analyses.cell_bootstrap(obs, n_boot=200, seed=0)
    r1, r2 = paper_analyses.shares(boot), paper_analyses.regime_gap(boot)
    reader, judge = obs["reader"].iloc[0], obs["judge"].iloc[0]
    t = paper_tables.paper_vs_ours_decomposition(r1, r2, obs, reader, judge).set_index("quantity")
    fifo = t.loc["two-bin share, top-k, fifo @ paper 8k"]
    assert fifo.ours_n == 3 and np.isnan(fifo.ours) and np.isnan(fifo.ours_low)
    assert fifo.evidence == f"anecdotal (3 < {paper_analyses.MIN_ERRORS})"
    assert t.loc["R2 Holm rejections", "evidence"].startswith("anecdotal")
    assert t.loc["oracle-answerable questions N", "ours"] == 4 and t.loc["oracle-answerable questions N", "evidence"] == ""
    placebo = pd.DataFrame([dict(reader=reader, judge=judge, regime="topk", n_errors_tested=25,
                                 n_placebo_flips=5, n_restore_flips=20)])
    rob = paper_tables.paper_vs_ours_robustness(pd.DataFrame(columns=["comparison", "dissociates", "difference"]),
                                     paper_analyses.reader_residuals(obs), pd.DataFrame(), pd.DataFrame(), placebo,
                                     reader=reader).set_index("quantity")
    row = rob.loc["placement placebo: errors flipped to correct"]
    assert row.ours == pytest.approx(0.2) and row.ours_n == 25 and row.evidence == ""
    # the same 25 errors from 2 questions are two observations, not 25
    rob = paper_tables.paper_vs_ours_robustness(pd.DataFrame(columns=["comparison", "dissociates", "difference"]),
                                     paper_analyses.reader_residuals(obs), pd.DataFrame(), pd.DataFrame(),
                                     placebo.assign(n_questions=2), reader=reader).set_index("quantity")
    row = rob.loc["placement placebo: errors flipped to correct"]
    assert np.isnan(row.ours) and row.evidence == "anecdotal (25 from 2 questions < 20)"


def test_resolution_is_the_half_width_scaled_to_80_percent_power():
    r3 = pd.DataFrame([dict(reader="r", judge="j", budget=8000, comparison="control", policy_a="control",
                            policy_b="fifo", n_questions=300, difference=0.05, half_width=0.02,
                            dissociates=True),
                       dict(reader="r", judge="j", budget=8000, comparison="matched_pair", policy_a="fifo",
                            policy_b="random", n_questions=5, difference=0.0, half_width=np.nan,
                            dissociates=False)])
    res = paper_analyses.resolution(r3)
    # (1.959964 + 0.841621) / 1.959964 = 1.429408
    assert res.loc[0, "mdd"] == pytest.approx(0.02 * 1.429408, rel=1e-5)
    assert np.isnan(res.loc[1, "mdd"])
    assert res["paper_resolution_low"].eq(0.012).all() and res["paper_resolution_high"].eq(0.06).all()


def test_r3_contrasts_the_papers_three_baseline_policies_nine_control_contrasts():
    """The paper's R3: the control in all 9 contrasts (3 baselines x 3 budgets); LLM-importance,
    in the records and in R2's 12 cells, is not in R3's family unless asked for."""
    obs = d.observations(simulate_records(25, seeds=(0,), rng_seed=2))
    boot = paper_analyses.cell_bootstrap(obs, n_boot=200, seed=0)
    r3 = paper_analyses.matched_accuracy(boot, tolerance=0.02)
    control = r3[r3["comparison"] == "control"]
    assert len(control) == 9 and set(control["policy_b"]) == {"fifo", "random", "redundancy"}
    assert "importance" not in set(r3["policy_a"]) | set(r3["policy_b"])
    assert len(paper_analyses.regime_gap(boot)) == 12
    wide = paper_analyses.matched_accuracy(boot, tolerance=0.02, policies=evict.BASELINE_POLICIES)
    assert (wide["comparison"] == "control").sum() == 12


def test_figures_mark_contrasts_and_gaps_from_too_few_questions():
    from memlife.restore.analyses import figures

    r3 = pd.DataFrame([dict(budget=8000, comparison="control", policy_a="control", policy_b="fifo",
                            difference=0.3, low=0.2, high=0.4, few_questions=False),
                       dict(budget=8000, comparison="control", policy_a="control", policy_b="random",
                            difference=0.5, low=np.nan, high=np.nan, few_questions=True)])
    labels = {t.get_text() for t in figures.forest_plot(r3).axes[0].get_yticklabels()}
    assert labels == {"8,000: control − fifo", "8,000: control − random †"}
    r2 = pd.DataFrame([dict(policy="fifo", budget=8000, reader="r", judge="j", gap=0.1, gap_low=np.nan,
                            gap_high=np.nan, holm_reject=True, few_questions=True)])
    ax = figures.regime_gap_plot(r2, "r", "j").axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["fifo @ 8,000 †"]
    assert "no interval" in ax.get_xlabel()
