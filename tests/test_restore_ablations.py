"""The restore-tightness ablation arms and the judge audit on real pipeline records at smoke size:
offline builder -> units -> every policy -> injection (and the ablation contexts) -> reads ->
records -> decomposition and analyses, with the model-free TEST readers of test_restore_pipeline
and, where an endpoint is needed, the fault server.
"""
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from test_restore_pipeline import CAP, FickleTestReader, K, evidence_oracle, smoke_grid

from memlife.models import endpoints
from memlife.restore import pipeline
from memlife.restore.judging import grading
from memlife.restore.reading import arms
from memlife.restore.judging import answer_judge
from memlife.restore.analyses import decompose, paper_analyses, paper_tables


@pytest.fixture(scope="module")
def grid():
    qs, hist, evs, _ = smoke_grid()
    reads, plan = arms.plan_grid(qs, evs, k=K, restore_cap=CAP, ablation_arms=True)
    base_reads, base_plan = arms.plan_grid(qs, evs, k=K, restore_cap=CAP)
    return SimpleNamespace(questions=qs, by_id={q.question_id: q for q in qs}, hist=hist, evs=evs,
                           reads=reads, plan=plan, base_reads=base_reads, base_plan=base_plan)


def _cells(reads):
    out = {}
    for r in reads:
        if r.arm != "clean_gold":
            out.setdefault((r.question_id, r.policy, r.budget, r.seed), {})[(r.arm, r.regime)] = r
    return out


def _records(g, reader):
    return grading.records(g.reads, arms.read_all(g.plan, reader), g.by_id, reader.model)


# ----------------------------------------------------------------------------- the contexts


def test_the_grid_passes_the_construction_checks(grid):
    arms.check_reads(grid.reads, grid.questions, CAP)
    # Without the ablation the reads are exactly the core arms, unchanged.
    assert grid.base_reads == [r for r in grid.reads if r.arm in arms.CORE_ARMS]


def test_restore_surviving_is_the_forced_gold_context_and_costs_no_read(grid):
    n_evicted = n_kept = 0
    for cell, rs in _cells(grid.reads).items():
        fg, restore = rs[("policy", "forced_gold")], rs[("restore", "topk")]
        for regime in ("topk", "forced_gold"):
            surv = rs[("restore_surviving", regime)]
            assert surv.prompt == fg.prompt and surv.unit_ids == fg.unit_ids, cell
            # equal to the restore exactly when nothing was evicted
            assert (surv.unit_ids == restore.unit_ids) == (surv.n_gold_evicted == 0), cell
            n_evicted += surv.n_gold_evicted > 0
            n_kept += surv.n_gold_evicted == 0
        lost = {u.unit_id for u in grid.hist[cell[0]] if u.is_gold} - set(
            next(e for e in grid.evs if (e.question_id, e.policy, e.budget, e.seed) == cell).retained)
        assert not lost & set(rs[("restore_surviving", "topk")].unit_ids)  # restores nothing lost
    assert n_evicted and n_kept
    # The read plan: restore_surviving adds no prompt; the placebo adds at most one per cell.
    placebo_prompts = {r.prompt for r in grid.reads if r.arm == "placebo"}
    assert grid.plan.distinct_calls - grid.base_plan.distinct_calls == len(placebo_prompts - set(grid.base_plan.distinct_prompts))
    assert {r.prompt for r in grid.reads if r.arm == "restore_surviving"} <= set(grid.base_plan.distinct_prompts)


def test_the_placebo_swaps_the_gold_for_stand_ins_of_its_size_and_place(grid):
    n_swapped = n_same_session = 0
    for cell, rs in _cells(grid.reads).items():
        placebo, restore = rs[("placebo", "topk")], rs[("restore", "topk")]
        assert rs[("placebo", "forced_gold")].prompt == placebo.prompt  # one context per cell
        us = {u.unit_id: u for u in grid.hist[cell[0]]}
        gold = [us[i] for i in restore.unit_ids if us[i].is_gold]
        assert gold and not any(us[i].is_gold for i in placebo.unit_ids), cell  # no gold, evicted or not
        kept = [i for i in restore.unit_ids if not us[i].is_gold]
        assert set(kept) <= set(placebo.unit_ids)  # the restore's other snippets, untouched
        stand_ins = [us[i] for i in placebo.unit_ids if i not in set(kept)]
        assert len(stand_ins) == len(gold)  # one for one
        size = lambda ids: sum(us[i].tokens for i in ids)  # noqa: E731
        assert abs(size(placebo.unit_ids) - size(restore.unit_ids)) <= 0.2 * size(restore.unit_ids), cell
        assert abs(placebo.context_tokens - restore.context_tokens) <= 0.15 * restore.context_tokens, cell
        assert abs(size(u.unit_id for u in stand_ins) - size(u.unit_id for u in gold)) <= sum(
            u.tokens for u in gold), cell
        # "Where the gold sat": a stand-in comes from outside the gold's sessions only when some
        # gold session has no non-gold turn left to give (all in the context already).
        gold_sessions = {u.session_id for u in gold}
        exhausted = [s for s in gold_sessions
                     if all(u.unit_id in placebo.unit_ids for u in us.values() if u.session_id == s and not u.is_gold)]
        outside = [u for u in stand_ins if u.session_id not in gold_sessions]
        assert not outside or exhausted, cell
        n_swapped += len(stand_ins)
        n_same_session += len(stand_ins) - len(outside)
    assert n_same_session >= 0.4 * n_swapped


# ----------------------------------------------------------------------------- the records


def test_under_the_evidence_oracle_the_ablation_arms_have_their_known_answers(grid):
    reader = evidence_oracle(grid.questions, grid.hist)
    rec = _records(grid, reader)
    assert set(rec["arm"]) == set(arms.ARMS)
    obs = decompose.observations(rec)
    assert obs["restore_surviving_correct"].notna().all() and obs["placebo_correct"].notna().all()
    irr = obs[obs["irreversible"] == 1]
    assert len(irr) > 0
    # It restores nothing that was lost, so it never recovers an irreversible error ...
    assert not irr["restore_surviving_correct"].any()
    sg = paper_analyses.surviving_gold_ablation(obs)
    assert sg["n_become_recoverable"].sum() == 0 and sg["n_irreversible_tested"].sum() == len(irr)
    # ... and recovers exactly the errors that lost no gold (the oracle needs all of it).
    err = obs[obs["n_errors"] == 1]
    assert (err["restore_surviving_correct"] == (err["n_gold_evicted"] == 0)).all()
    # The placebo holds no gold: it never flips an error, while the real restore flips them all.
    pl = paper_analyses.placement_placebo(obs)
    assert pl["n_placebo_flips"].sum() == 0 and pl["n_restore_flips"].sum() == pl["n_errors_tested"].sum() > 0
    table = paper_tables.paper_vs_ours_robustness(
        pd.DataFrame(columns=["comparison", "dissociates", "difference"]),
        paper_analyses.reader_residuals(obs), pd.DataFrame(), sg, pl, reader=reader.model).set_index("quantity")
    # a handful of questions: the rows state what they rest on and call it anecdotal, no share
    for quantity, t, tested in (("surviving-gold restore: irreversible that become recoverable", sg[sg["regime"] == "topk"],
                                 "n_irreversible_tested"),
                                ("placement placebo: errors flipped to correct", pl, "n_errors_tested")):
        row = table.loc[quantity]
        assert t["n_questions"].max() < paper_analyses.MIN_CLUSTERS and np.isnan(row.ours)
        assert row.ours_n == t[tested].sum() and row.evidence.startswith("anecdotal")


def test_forced_gold_restore_surviving_answers_as_the_policy_arm_for_any_reader(grid):
    obs = decompose.observations(_records(grid, FickleTestReader(grid.questions, grid.hist)))
    fg = obs[obs["regime"] == "forced_gold"]
    assert (fg["restore_surviving_correct"] == fg["policy_correct"]).all()
    sg = paper_analyses.surviving_gold_ablation(obs).set_index("regime")
    assert sg.loc["forced_gold", "n_become_recoverable"] == 0


# ----------------------------------------------------------------------------- the judge audit


def _oracle_records(grid):
    return _records(grid, evidence_oracle(grid.questions, grid.hist))


def test_the_audit_sample_is_seeded_and_deterministic(grid):
    rec = _oracle_records(grid)
    items = list(grading.ITEM_COLUMNS)
    a = grading.audit_sample(rec, 40, seed=0)
    assert len(a) == 40 and not a.duplicated(items).any()
    assert (a["judge"] == grading.DETERMINISTIC_JUDGE).all()
    shuffled = rec.sample(frac=1, random_state=1)
    pd.testing.assert_frame_equal(grading.audit_sample(shuffled, 40, seed=0), a)
    assert not grading.audit_sample(rec, 40, seed=1)[items].equals(a[items])
    n_items = (rec["judge"] == grading.DETERMINISTIC_JUDGE).sum()
    assert len(grading.audit_sample(rec, 10**6, seed=0)) == n_items
    assert grading.audit_sample(rec, 0, seed=0).empty


def test_the_audit_is_skipped_without_a_capable_endpoint(grid, isolated_llm, fault_server, monkeypatch):
    reader = evidence_oracle(grid.questions, grid.hist)
    got = pipeline.read_and_judge(grid.reads, grid.plan, grid.questions, reader, reader_max_tokens=600,
                                  judge_audit_items=20)
    assert got.audit_note.startswith("judge audit skipped: no endpoint is configured for the judge_audit role")
    assert set(got.records["judge"]) == {grading.DETERMINISTIC_JUDGE}
    assert sum(fault_server.received.values()) == 0
    # The audit model must differ from the primary judge's: the same name replays its grades.
    for role in ("judge", "judge_audit"):
        monkeypatch.setenv(f"MEMLIFE_{role.upper()}_BASE_URL", fault_server.base_url)
        monkeypatch.setenv(f"MEMLIFE_{role.upper()}_MODEL", "same-model")
    assert "primary judge's model (same-model)" in endpoints.judge_audit_unavailable()
    got = pipeline.read_and_judge(grid.reads, grid.plan, grid.questions, reader, reader_max_tokens=600,
                                  judge_audit_items=20)
    assert got.audit_note.startswith("judge audit skipped") and not any(
        decompose.is_audit_judge(j) for j in got.records["judge"])
    off = pipeline.read_and_judge(grid.reads, grid.plan, grid.questions, reader, reader_max_tokens=600)
    assert off.audit_note == "judge audit off (judge_audit_items = 0)"


def _script_audit(grid, fault_server, rec, n, seed, primary: bool):
    """Script the fault server's grade of every sampled item: the audit judge agrees with the
    deterministic scorer except on every third distinct triple, and one call fails for good.
    With `primary`, the primary judge grades first (its replies are consumed first)."""
    sample = grading.audit_sample(rec, n, seed)
    triples = sorted({(grid.by_id[q].question, grid.by_id[q].answer, h)
                      for q, h in zip(sample["question_id"], sample["hypothesis"])})
    types = {q.question: q.question_type for q in grid.questions}
    det = {t: answer_judge.grade(t[0], types[t[0]], t[1], t[2]) == answer_judge.CORRECT for t in triples}
    audit_label, failed = {}, triples[0]
    for i, t in enumerate(triples):
        prompt = arms.prompts.judge_messages(*t)[-1]["content"]
        primary_label = "CORRECT" if det[t] else "INCORRECT"
        audit_ok = det[t] if i % 3 else not det[t]
        audit_label[t] = None if t == failed else audit_ok
        steps = [("text", primary_label)] if primary else []
        steps += ["400"] if t == failed else [("text", "CORRECT" if audit_ok else "INCORRECT.")]
        fault_server.script(prompt, *steps)
    key = [(grid.by_id[q].question, grid.by_id[q].answer, h) for q, h in zip(sample["question_id"], sample["hypothesis"])]
    return sample, det, audit_label, key


def _expected_agreement(a, b):
    a, b = np.asarray(a, bool), np.asarray(b, bool)
    po = (a == b).mean()
    pe = a.mean() * b.mean() + (1 - a.mean()) * (1 - b.mean())
    return po, (po - pe) / (1 - pe)


def test_the_audit_judge_regrades_the_sample_and_agreement_is_reported(grid, isolated_llm, fault_server, monkeypatch):
    monkeypatch.setenv("MEMLIFE_JUDGE_AUDIT_BASE_URL", fault_server.base_url)
    monkeypatch.setenv("MEMLIFE_JUDGE_AUDIT_MODEL", "fake-audit")
    monkeypatch.setenv("MEMLIFE_JUDGE_AUDIT_MAX_RETRIES", "0")
    reader = evidence_oracle(grid.questions, grid.hist)
    rec = _oracle_records(grid)
    n = 30
    sample, det, audit_label, key = _script_audit(grid, fault_server, rec, n, seed=7, primary=False)
    got = pipeline.read_and_judge(grid.reads, grid.plan, grid.questions, reader, reader_max_tokens=600,
                                  judge_audit_items=n, seed=7)
    assert "fake-audit re-graded 30 sampled items" in got.audit_note
    audit = got.records[got.records["judge"] == "audit:fake-audit"]
    assert len(audit) == n
    assert sorted(map(tuple, audit[list(grading.ITEM_COLUMNS)].astype(str).values)) == sorted(
        map(tuple, sample[list(grading.ITEM_COLUMNS)].astype(str).values))
    # each distinct (question, reference, answer) is graded once; the errored call leaves an empty label
    assert all(v == 1 for v in fault_server.received.values()) and len(fault_server.received) == len(det)
    n_failed = sum(audit_label[t] is None for t in key)
    assert audit["correct"].isna().sum() == n_failed > 0
    assert audit.loc[audit["correct"].notna(), "judge_raw"].isin(["CORRECT", "INCORRECT."]).all()

    # the decomposition ignores the audit's sample; the agreement reports it
    plain = got.records[got.records["judge"] != "audit:fake-audit"]
    pd.testing.assert_frame_equal(decompose.decompose(decompose.observations(got.records)),
                                  decompose.decompose(decompose.observations(plain)))
    ag = paper_analyses.judge_agreement(got.records)
    row = paper_analyses.audit_agreement(ag[ag["reader"] == reader.model], grading.DETERMINISTIC_JUDGE)
    assert {row.judge_a, row.judge_b} == {"audit:fake-audit", grading.DETERMINISTIC_JUDGE}
    assert (row.n_items, row.n_excluded) == (n - n_failed, n_failed)
    ok = [t for t in key if audit_label[t] is not None]
    po, kappa = _expected_agreement([det[t] for t in ok], [audit_label[t] for t in ok])
    assert row.percent_agreement == pytest.approx(po) and po < 1
    assert row.cohen_kappa == pytest.approx(kappa)


def test_with_a_primary_llm_judge_the_audit_pair_is_audit_versus_primary(grid, isolated_llm, fault_server, monkeypatch):
    for role, model in (("judge", "fake-judge"), ("judge_audit", "fake-audit")):
        monkeypatch.setenv(f"MEMLIFE_{role.upper()}_BASE_URL", fault_server.base_url)
        monkeypatch.setenv(f"MEMLIFE_{role.upper()}_MODEL", model)
        monkeypatch.setenv(f"MEMLIFE_{role.upper()}_MAX_RETRIES", "0")
    reader = evidence_oracle(grid.questions, grid.hist)
    rec = _oracle_records(grid)
    n = 24
    _, det, audit_label, key = _script_audit(grid, fault_server, rec, n, seed=3, primary=True)
    got = pipeline.read_and_judge(grid.reads, grid.plan, grid.questions, reader, reader_max_tokens=600,
                                  judge_audit_items=n, seed=3)
    ag = paper_analyses.judge_agreement(got.records)
    row = paper_analyses.audit_agreement(ag[ag["reader"] == reader.model], "fake-judge")
    assert {row.judge_a, row.judge_b} == {"audit:fake-audit", "fake-judge"}
    ok = [t for t in key if audit_label[t] is not None]
    po, kappa = _expected_agreement([det[t] for t in ok], [audit_label[t] for t in ok])
    assert row.n_items == len(ok)
    assert row.percent_agreement == pytest.approx(po) and row.cohen_kappa == pytest.approx(kappa)
