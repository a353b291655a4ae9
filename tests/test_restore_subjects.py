"""The restore audit's reference subjects through the real pipeline (builder -> units -> every
model-free policy -> ranking and injection -> reads -> records -> decomposition), and the noisy
oracle's planted decomposition: exact, reproduced by the subject, covered by the intervals."""
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from memlife import subjects as ref
from memlife.restore import pipeline
from memlife.restore.eviction import evict
from memlife.restore.reading import arms, prompts
from memlife.restore.judging import answer_judge, grading
from memlife.restore.analyses import controls, decompose, paper_analyses
from memlife.restore.reading import subjects as rsub

HISTORY_TOKENS = 12000  # whole real sessions: at 1,500 the evidence alone fills every history
NOISE = ref.Noise(miss_base=0.05, miss_slope_per_1k=0.05, miss_cap=0.5, confusion=0.1)


@pytest.fixture(scope="module")
def grid():
    cfg = controls.GridConfig(n_questions=12, history_tokens=HISTORY_TOKENS,
                              budgets=arms.scaled_budgets(HISTORY_TOKENS), seeds=[0, 1], k=12, restore_cap=1000)
    return controls.build_grid(cfg)


@pytest.fixture(scope="module")
def design(grid):
    return controls.design(grid)


def _dec(records):
    return decompose.decompose(decompose.observations(records))


# ----------------------------------------------------------------------------- the prompt seam


def test_the_subject_reads_question_and_snippets_back_out_of_the_prompt(grid):
    r = next(r for r in grid.reads if r.arm == "restore")
    q = next(q for q in grid.questions if q.question_id == r.question_id)
    today, snippets, question = rsub.split_prompt(r.prompt)
    assert (today, question) == (q.question_date, q.question)
    assert prompts.READER_USER.format(today=today, snippets=snippets, question=question) == r.prompt
    for bad in ("Question: x\nAnswer:", r.prompt + " ", r.prompt.replace("Today's date", "Date")):
        with pytest.raises(ValueError, match="not a reader prompt"):
            rsub.split_prompt(bad)
    reader = rsub.SubjectReader("gold", grid.questions, grid.histories)
    with pytest.raises(ValueError, match="no question"):
        reader.question_of(prompts.READER_USER.format(today="2020/01/01 (Wed) 10:00", snippets="", question="?"))


def test_abstention_and_the_planted_wrong_answer_are_scored_wrong_for_every_question(grid):
    from memlife import reconstruct

    real = [r for r in reconstruct.read_oracle() if not r["question_id"].endswith("_abs")]
    for q in [*grid.questions, *(SimpleNamespace(**r) for r in real)]:
        grade = lambda hyp: answer_judge.grade(q.question, q.question_type, q.answer, hyp)  # noqa: E731
        assert grade(q.answer) == answer_judge.CORRECT
        assert grade(rsub.ABSTENTION) == answer_judge.INCORRECT
        assert grade(rsub.WRONG_ANSWER) == answer_judge.INCORRECT  # preference rubrics included


def test_the_reference_subjects_are_always_decided(grid):
    """Gold answers the gold text and the evidence-oracle gold or "I don't know": the deterministic
    judge decides every one of their items (notebook 22 shows none UNDECIDED)."""
    for subject in ("gold", "evidence-oracle"):
        rec, _ = controls.read(grid, subject)
        share = paper_analyses.undecided_share(rec)
        assert share["n_items"].sum() > 0 and (share["n_undecided"] == 0).all(), share
        det = rec[rec["judge"] == grading.DETERMINISTIC_JUDGE]
        assert det["correct"].notna().all() and det["judge_raw"].isin(["CORRECT", "INCORRECT"]).all()


def test_subjects_are_registered_readers_and_labelled_as_references(grid):
    for name in ref.SUBJECTS:
        reader = pipeline.reader_factory(name)(grid.questions, grid.histories, 0)
        assert reader.model == f"{name} (reference)" and ref.is_reference(reader.model)


# ----------------------------------------------------------------------------- gold and the evidence-oracle


def test_gold_makes_no_error_in_any_cell_or_arm(grid):
    rec, _ = controls.read(grid, "gold")
    assert set(rec["reader"]) == {"gold (reference)"} and set(rec["arm"]) == set(arms.ARMS)
    assert rec["correct"].all()
    dec = _dec(rec)
    assert (dec["n_errors"] == 0).all() and (dec["n_oracle_answerable"] == dec["n_observations"]).all()
    assert set(dec["policy"]) == set(evict.MODEL_FREE_POLICIES)


def test_evidence_oracle_identities(grid):
    rec, reader = controls.read(grid, "evidence-oracle")
    dec = _dec(rec)
    assert (dec["residual"] == 0).all()
    assert (dec.loc[dec["regime"] == "forced_gold", "recoverable"] == 0).all()
    # irreversible = observations (question x seed) that lost a gold unit, counted here from the
    # evictions alone: under this subject losing gold always makes the policy arm wrong
    lost = {}
    for e in grid.evictions:
        gold = {u.unit_id for u in grid.histories[e.question_id] if u.is_gold}
        lost[(e.policy, e.budget)] = lost.get((e.policy, e.budget), 0) + bool(gold & set(e.evicted))
    for row in dec.itertuples():
        assert row.irreversible == lost[(row.policy, row.budget)], row
        assert row.n_errors == row.irreversible + row.recoverable
    assert dec["irreversible"].sum() > 0 and dec.loc[dec["regime"] == "topk", "recoverable"].sum() > 0
    exp = controls.evidence_oracle_expected(grid)
    m = dec.merge(exp, on=list(controls.CELL), suffixes=("", "_expected"))
    assert len(m) == len(dec)
    for col in ("n_errors", "irreversible", "recoverable", "residual"):
        assert (m[col] == m[f"{col}_expected"]).all(), col
    # the subject abstains exactly where a gold unit is missing from the context
    gold_lines = {q.question_id: [u for u in grid.histories[q.question_id] if u.is_gold] for q in grid.questions}
    for r in grid.reads[:400]:
        a = reader.answers[r.prompt]
        assert a.available == ({u.unit_id for u in gold_lines[r.question_id]} <= set(r.unit_ids))
    # the ablation: evicted gold is what the surviving-gold restore lacks, and the placebo holds no gold
    obs = decompose.observations(rec)
    assert not obs.loc[obs["irreversible"] == 1, "restore_surviving_correct"].any()
    assert not obs["placebo_correct"].any()


def test_the_destructive_control_differs_in_every_r3_contrast(grid):
    rec, _ = controls.read(grid, "evidence-oracle")
    boot = paper_analyses.cell_bootstrap(decompose.observations(rec), n_boot=1000, seed=0)
    # 12 questions: below the default floor of 20 no contrast has an interval or counts as detected
    assert paper_analyses.matched_accuracy(boot, tolerance=0.02)["few_questions"].all()
    r3 = paper_analyses.matched_accuracy(boot, tolerance=0.02, min_clusters=5)
    ctl = r3[r3["comparison"] == "control"]
    # fifo, random and redundancy at each budget (importance needs a model)
    assert len(ctl) == 3 * len(arms.scaled_budgets(HISTORY_TOKENS))
    assert (ctl["difference"] >= 0).all()
    # at 8k of ~102k nearly every policy loses nearly every question's gold: with 12 questions the
    # control is detectable where gold survives, at the largest budget (notebook 25: all 9 at 470)
    top = ctl[ctl["budget"] == max(arms.scaled_budgets(HISTORY_TOKENS))]
    assert (top["difference"] > 0).all() and top["dissociates"].all()


# ----------------------------------------------------------------------------- the noisy oracle


def test_noisy_oracle_is_deterministic_and_its_run_is_the_design_at_its_seed(grid, design):
    rec, reader = controls.read(grid, "noisy-oracle", seed=3, noise=NOISE)
    rec2, _ = controls.read(grid, "noisy-oracle", seed=3, noise=NOISE)
    other, _ = controls.read(grid, "noisy-oracle", seed=4, noise=NOISE)
    assert rec.equals(rec2) and not rec["correct"].equals(other["correct"])
    # every distinct context (found by its draw's hash): the subject answers it right exactly
    # where the design's draw at the run's seed says so
    right = dict(zip(design.miss_hash.tolist(), controls.correct_at(design, NOISE, 3)))
    contexts = {(r.question_id, r.prompt) for r in grid.reads}
    assert len(contexts) == len(right)
    qids, prompts_ = zip(*sorted(contexts))
    miss_h, _ = rsub.key_hashes(qids, prompts_)
    for h, p in zip(miss_h.tolist(), prompts_):
        assert right[h] == (reader.answers[p].outcome == ref.ANSWER)
    # the noise acts only where the evidence is: an unavailable context is never right
    assert not controls.correct_at(design, NOISE, 3)[~design.available].any()
    outcomes = pd.Series([a.outcome for a in reader.answers.values()]).value_counts()
    assert outcomes.get(ref.MISS, 0) > 0 and outcomes.get(ref.CONFUSE, 0) > 0


def test_planted_rates_are_reproduced_by_the_subjects_own_draws(design):
    # the draw behind each context: over many seeds, the share of right answers among available
    # contexts is the mean planted success probability, and misses grow with the context length
    seeds = np.arange(2000)
    missed, confused = ref.planted_masks(NOISE, seeds[:, None], design.miss_hash, design.confuse_hash,
                                         design.context_tokens, np.ones(len(design.available), dtype=bool))
    av = design.available
    planted_miss = NOISE.miss_rate(design.context_tokens[av])
    assert abs(missed[:, av].mean() - planted_miss.mean()) < 0.005
    assert abs(confused[:, av].sum() / (~missed[:, av]).sum() - NOISE.confusion) < 0.005
    long_ = design.context_tokens[av] > np.median(design.context_tokens[av])
    assert missed[:, av][:, long_].mean() > missed[:, av][:, ~long_].mean() + 0.005


def test_expected_bins_are_exact(design):
    # Monte Carlo over the questions as they are (no resampling) converges on the exact expectation
    sims = controls.simulate(design, NOISE, range(1, 1201), resample=False).astype(float)
    mc = sims.sum(axis=3).mean(axis=0)  # bins x cells
    plant = controls.planted(design, NOISE)
    for b, name in enumerate(controls.BINS):
        exact = plant[f"expected_{name}"].to_numpy()
        sd = np.sqrt(sims.sum(axis=3)[:, b, :].var(axis=0) / sims.shape[0])
        assert (np.abs(mc[b] - exact) <= 4.5 * sd + 1e-9).all(), name
    # identities in the planted values themselves: no forced-gold recoverable, no no-evict irreversible
    fg = plant["regime"] == "forced_gold"
    assert (plant.loc[fg, "expected_recoverable"] == 0).all()
    assert (plant.loc[plant["policy"] == evict.NO_EVICT, "expected_irreversible"] == 0).all()


def test_shared_contexts_answer_alike_in_the_expectation():
    # one question, one cell: the policy context IS the restore context (forced-gold, nothing
    # evicted), so the two answers are one draw: never recoverable, errors all residual
    d = SimpleNamespace(available=np.array([True, True]), context_tokens=np.array([100.0, 100.0]),
                        read_ptr=np.array([0, 2]), obs_q=np.array([0]), obs_local=np.array([[0, 1, 1]]),
                        obs_evicted=np.array([False]))
    e = controls.expected_bins(d, NOISE).iloc[0]
    s = (1 - NOISE.miss_rate(100.0)) * (1 - NOISE.confusion)
    assert e["recoverable"] == 0 and e["residual"] == pytest.approx(s * (1 - s))
    d.obs_local = np.array([[0, 1, 0]])  # restore = the clean context: restore is right whenever clean is
    e = controls.expected_bins(d, NOISE).iloc[0]
    assert e["residual"] == 0 and e["recoverable"] == pytest.approx(s * (1 - s))


def test_clustered_intervals_cover_the_planted_shares_and_a_wrong_share_is_caught(design):
    cov = controls.coverage(design, NOISE, reps=150, n_boot=300, seed=0, min_clusters=4)
    pooled = controls.pooled_coverage(cov)
    assert 0.75 <= pooled <= 0.99, pooled
    checked = cov[cov["coverage"].notna()]
    assert len(checked) >= 20 and (abs(checked["empirical"] - checked["planted"]) < 0.05).all()
    # a planted share half the true one is not covered: the check can fail
    plant = controls.planted(design, NOISE, 4)
    ok = plant["irreversible_share_checkable"]
    c = int(plant.loc[ok, "expected_n_errors"].idxmax())  # the cell with the most errors: the narrowest interval
    sims = controls.simulate(design, NOISE, range(1, 151)).astype(float)
    num, den = sims[:, controls.BINS.index("irreversible"), c, :], sims[:, 0, c, :]
    idx = np.arange(den.shape[1])
    right = ref.interval_coverage(num, den, idx, plant.loc[c, "irreversible_share"], n_boot=300, seed=0).mean()
    wrong = ref.interval_coverage(num, den, idx, plant.loc[c, "irreversible_share"] / 2, n_boot=300, seed=0).mean()
    assert right > 0.8 and wrong < 0.2


def test_the_command_runs_a_reference_subject(isolated_llm, fault_server, monkeypatch, tmp_path):
    from pathlib import Path

    from memlife.restore import __main__ as cli

    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "smoke.yaml").write_text(
        (Path(__file__).resolve().parents[1] / "configs" / "smoke.yaml").read_text())
    monkeypatch.setenv("MEMLIFE_SCORER_BASE_URL", fault_server.base_url)  # importance scores only
    monkeypatch.setenv("MEMLIFE_SCORER_MODEL", "fake-scorer")
    out = tmp_path / "out"
    assert cli.main(["run", "--profile", "smoke", "--reader", "gold", "--out", str(out)]) == 0
    rec = decompose.load_records(out / "records")
    assert set(rec["reader"]) == {"gold (reference)"} and rec["correct"].all()
    assert set(rec["policy"].dropna()) == set(evict.POLICIES)
    # no reader prompt reached the endpoint: only the importance scorer's
    assert fault_server.received and not any("Memory snippets" in p for p in fault_server.received)


def test_the_reference_decomposition_table_and_figure(grid):
    rec, _ = controls.read(grid, "evidence-oracle")
    obs = decompose.observations(rec)
    t = controls.reference_decomposition(obs, n_boot=300, seed=0, min_clusters=5)
    dec = decompose.decompose(obs)
    assert len(t) == len(dec) and set(t["reader"]) == {"evidence-oracle (reference)"}
    assert list(t["paper_budget"].unique()) == [8000, 30000, 80000]
    # errors are irreversible or recoverable, nothing else, and each rate sits inside its interval
    assert np.allclose(t["irreversible_rate"] + t["recoverable_rate"], 1 - t["accuracy"])
    assert np.allclose(t["recoverable_rate"], t["recoverable"] / t["n_oracle_answerable"])
    for col in ("accuracy", "irreversible_rate", "recoverable_rate"):
        assert ((t[f"{col}_low"] <= t[col] + 1e-12) & (t[col] <= t[f"{col}_high"] + 1e-12)).all()
    fig = controls.cost_figure(t)
    assert len(fig.axes) == 4 and [a.get_title() for a in fig.axes[:2]] == ["top-k retrieval", "forced-gold retrieval"]


def test_policies_that_need_a_model_are_refused():
    with pytest.raises(ValueError, match="need a model"):
        controls.build_grid(controls.GridConfig(n_questions=1, history_tokens=300, budgets=[100], seeds=[0], k=5,
                                                restore_cap=100, policies=["fifo", "importance"]))


def test_the_noisy_oracle_plants_its_profiles_rates_wherever_it_is_made(grid):
    p = pipeline.config.notebook_params("smoke", "25_restore_controls")
    want = ref.Noise(miss_base=p["miss_base"], miss_slope_per_1k=p["miss_slope_per_1k"], miss_cap=p["miss_cap"],
                     confusion=p["confusion"])
    assert rsub.profile_noise("smoke") == want != ref.Noise()
    reader = pipeline.make_reader("noisy-oracle", grid.questions, grid.histories, 7, "smoke")
    assert reader.noise == want and reader.seed == 7
    assert pipeline.make_reader("gold", grid.questions, grid.histories, 0, "smoke").model == "gold (reference)"


def test_the_filler_comparison_pairs_two_builds_cell_by_cell(grid):
    """The same questions on other users' sessions alone: each side's rates are the reference
    decomposition's of its own build, the difference is a - b, and a build against itself differs
    by nothing, with an interval of width 0."""
    from dataclasses import replace

    cfg = controls.GridConfig(n_questions=12, history_tokens=HISTORY_TOKENS,
                              budgets=arms.scaled_budgets(HISTORY_TOKENS), seeds=[0, 1], k=12, restore_cap=1000)
    other = controls.build_grid(replace(cfg, task_chat_share=0.0))
    assert [q.question_id for q in other.questions] == [q.question_id for q in grid.questions]
    assert [h.session_id for h in other.histories[other.questions[0].question_id]] != \
        [h.session_id for h in grid.histories[grid.questions[0].question_id]]
    obs_a = decompose.observations(controls.read(grid, "evidence-oracle")[0])
    obs_b = decompose.observations(controls.read(other, "evidence-oracle")[0])
    t = controls.filler_comparison(obs_a, obs_b, ("s mix", "other users"), n_boot=300, seed=0)
    assert len(t) == len(decompose.decompose(obs_a)) * len(controls.FILLER_RATES)
    for side, obs in (("s mix", obs_a), ("other users", obs_b)):
        ref_t = controls.reference_decomposition(obs, n_boot=50, seed=0, min_clusters=5)
        for rate in ("accuracy", "irreversible_rate", "recoverable_rate"):
            got = t[t["rate"] == rate].merge(ref_t, on=list(controls.CELL))
            assert np.allclose(got[side], got[rate]), (side, rate)
    assert np.allclose(t["difference"], t["s mix"] - t["other users"], equal_nan=True)
    forced = t[(t["regime"] == "forced_gold") & (t["rate"] == "recoverable_rate")]
    assert (forced["s mix"] == 0).all() and (forced["other users"] == 0).all()  # by construction
    same = controls.filler_comparison(obs_a, obs_a, ("a", "b"), n_boot=200, seed=0)
    assert (same["difference"].dropna() == 0).all() and (same["difference_low"].dropna() == 0).all()
    with pytest.raises(ValueError, match="same questions and cells"):
        controls.filler_comparison(obs_a, obs_b[obs_b["question_id"] != obs_b["question_id"].iloc[0]],
                                   ("a", "b"), n_boot=50, seed=0)
