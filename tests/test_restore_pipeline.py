"""The restore audit end to end at smoke size, on the real code path, with model-free test readers:
offline LongMemEval-format builder -> units -> eviction (every policy, the control included) ->
ranking and injection -> reads -> records -> decomposition -> R3.

The evidence-oracle is the reference subject of docs/design.md (memlife.restore.reading.subjects); the fickle
reader is a test reader built on it. Each answers from the prompt the pipeline built, so the
identities below hold only if the contexts are the paper's.
"""
import hashlib
from types import SimpleNamespace

import pytest

from memlife import longmem
from memlife import subjects as ref
from memlife.restore.data import units
from memlife.restore.eviction import evict
from memlife.restore.judging import grading
from memlife.restore.reading import arms
from memlife.restore.analyses import decompose, paper_analyses
from memlife.restore.reading.subjects import SubjectReader

import longmem_templates

N_QUESTIONS, HISTORY_TOKENS, SEEDS = 6, 1500, [0, 1]
K, CAP = 12, 300  # the quick profile's k and injection cap


def evidence_oracle(questions, histories) -> SubjectReader:
    """The evidence-oracle reference subject (memlife.restore.reading.subjects): the gold answer exactly
    when every gold unit's rendered line is in the prompt, else "I don't know"."""
    return SubjectReader(ref.EVIDENCE_ORACLE, questions, histories)


class FickleTestReader(SubjectReader):
    """A test reader whose answer depends on the whole context, not only on the evidence: right
    only with the evidence *and* an even prompt hash. Any deterministic reader answers two
    identical contexts alike, so its forced-gold recoverable bin must be empty too."""

    model = "TEST-fickle"

    def __init__(self, questions, histories):
        super().__init__(ref.EVIDENCE_ORACLE, questions, histories)

    def complete_many(self, reqs, desc=None):
        replies = super().complete_many(reqs, desc)
        even = [hashlib.sha256(r["messages"][1]["content"].encode()).digest()[0] % 2 == 0 for r in reqs]
        return [a if e else SimpleNamespace(text="I don't know") for a, e in zip(replies, even)]


def smoke_grid():
    """Questions, their units and every policy's evictions at smoke size: what both this file and
    test_restore_ablations read from."""
    qs = [longmem.to_question(r) for r in longmem_templates.build(N_QUESTIONS, HISTORY_TOKENS, seed=5)]
    hist = {q.question_id: units.units_of(q) for q in qs}
    # Model-free importance scores: a fixed hash of the text (the policy never sees gold labels).
    importance = {u.text: float(hashlib.sha256(u.text.encode()).digest()[0] % 10 + 1)
                  for us in hist.values() for u in us}
    budgets = arms.scaled_budgets(HISTORY_TOKENS)
    return qs, hist, evict.evict_grid(hist, evict.POLICIES, budgets, SEEDS, importance), budgets


@pytest.fixture(scope="module")
def pipeline():
    qs, hist, evs, budgets = smoke_grid()
    reads = []
    for q in qs:
        reads += arms.build_reads(q, hist[q.question_id], [e for e in evs if e.question_id == q.question_id],
                                  k=K, restore_cap=CAP)
    return SimpleNamespace(questions=qs, by_id={q.question_id: q for q in qs}, hist=hist, evs=evs,
                           reads=reads, plan=arms.plan_reads(reads), budgets=budgets)


def _records(p, reader):
    answers = arms.read_all(p.plan, reader)
    return grading.records(p.reads, answers, p.by_id, reader.model)


def _cell(r):
    return (r.question_id, r.policy, r.budget, r.seed)


def test_every_policy_and_both_kinds_of_cell_are_exercised(pipeline):
    assert {e.policy for e in pipeline.evs} == set(evict.POLICIES)
    fg = [r for r in pipeline.reads if r.arm == "policy" and r.regime == "forced_gold"]
    assert any(r.n_gold_evicted == 0 for r in fg) and any(r.n_gold_evicted > 0 for r in fg)


def test_forced_gold_reads_the_restore_context_when_no_gold_was_evicted(pipeline):
    restore = {_cell(r): r for r in pipeline.reads if r.arm == "restore" and r.regime == "forced_gold"}
    n_same = 0
    for r in pipeline.reads:
        if r.arm == "policy" and r.regime == "forced_gold":
            same = r.unit_ids == restore[_cell(r)].unit_ids
            assert same == (r.n_gold_evicted == 0), _cell(r)
            assert (r.prompt == restore[_cell(r)].prompt) == same
            n_same += same
    assert n_same > 0


def test_every_injected_context_respects_the_cap_gold_included(pipeline):
    fillers = 0
    for r in pipeline.reads:
        if r.arm == "clean_gold" or r.regime == "topk" and r.arm == "policy":
            continue
        us = {u.unit_id: u for u in pipeline.hist[r.question_id]}
        gold = [i for i in r.unit_ids if us[i].is_gold]
        total = sum(us[i].tokens for i in r.unit_ids)
        if sum(us[i].tokens for i in gold) > CAP:
            assert len(gold) == len(r.unit_ids)  # gold alone over the cap: gold only (documented)
        else:
            assert total <= CAP, (_cell(r), r.arm, r.regime, total)
        fillers += len(r.unit_ids) - len(gold)
    assert fillers > 0  # the cap leaves room for ranked snippets: the fill is really exercised


def test_gold_alone_over_the_cap_keeps_all_gold_and_nothing_else(pipeline):
    q = max(pipeline.questions, key=lambda q: sum(u.is_gold for u in pipeline.hist[q.question_id]))
    us = pipeline.hist[q.question_id]
    gold = {u.unit_id for u in us if u.is_gold}
    tiny = min(u.tokens for u in us if u.is_gold)  # below the gold's total
    evs = [e for e in pipeline.evs if e.question_id == q.question_id]
    tok = {u.unit_id: u.tokens for u in us}
    n_over = 0
    for r in arms.build_reads(q, us, evs, k=K, restore_cap=tiny):
        if r.arm == "restore":
            assert set(r.unit_ids) == gold
            n_over += 1
        elif r.regime == "forced_gold":
            ev = next(e for e in evs if (e.policy, e.budget, e.seed) == (r.policy, r.budget, r.seed))
            surviving = gold & set(ev.retained)
            if sum(tok[i] for i in surviving) > tiny:
                assert set(r.unit_ids) == surviving
                n_over += 1
            else:  # what survived fits: the usual rule, gold counted against the cap
                assert surviving <= set(r.unit_ids) and sum(tok[i] for i in r.unit_ids) <= tiny
    assert n_over > 0


def test_under_the_evidence_oracle_the_bins_are_the_known_answers(pipeline):
    reader = evidence_oracle(pipeline.questions, pipeline.hist)
    rec = _records(pipeline, reader)
    assert rec.loc[rec.arm == "clean_gold", "correct"].all()  # every question is oracle-answerable
    dec = decompose.decompose(decompose.observations(rec))
    assert (dec["residual"] == 0).all()  # the restore always hands over all the evidence
    assert (dec.loc[dec.regime == "forced_gold", "recoverable"] == 0).all()
    assert set(dec["policy"]) == set(evict.POLICIES)

    # Irreversible = oracle-answerable questions that lost a gold unit and were answered wrong,
    # counted here from the evictions and contexts themselves, not from the records.
    lost = {(e.question_id, e.policy, e.budget, e.seed):
            bool(set(e.evicted) & {u.unit_id for u in pipeline.hist[e.question_id] if u.is_gold})
            for e in pipeline.evs}
    expected = {}
    for r in pipeline.reads:
        if r.arm != "policy":
            continue
        gold = {u.unit_id for u in pipeline.hist[r.question_id] if u.is_gold}
        wrong = not gold <= set(r.unit_ids)
        key = (r.policy, r.budget, r.regime)
        irr, rec_ = expected.get(key, (0, 0))
        expected[key] = (irr + (wrong and lost[_cell(r)]), rec_ + (wrong and not lost[_cell(r)]))
    got = {(p, b, g): (i, c) for p, b, g, i, c in
           dec[["policy", "budget", "regime", "irreversible", "recoverable"]].itertuples(index=False)}
    assert got == expected
    assert sum(i for i, _ in expected.values()) > 0  # gold really was lost and it shows


def test_forced_gold_has_no_recoverable_errors_for_any_deterministic_reader(pipeline):
    reader = FickleTestReader(pipeline.questions, pipeline.hist)
    obs = decompose.observations(_records(pipeline, reader))
    fg = obs[obs.regime == "forced_gold"]
    assert fg["recoverable"].sum() == 0
    # There were oracle-answerable forced-gold errors with every gold unit kept: with a restore
    # context different from the policy context, some of them could have flipped.
    assert ((fg["n_errors"] == 1) & (fg["n_gold_evicted"] == 0)).sum() > 0


def test_r3_runs_the_control_on_real_records(pipeline):
    reader = evidence_oracle(pipeline.questions, pipeline.hist)
    obs = decompose.observations(_records(pipeline, reader))
    r3 = paper_analyses.matched_accuracy(paper_analyses.cell_bootstrap(obs, n_boot=200, seed=0), tolerance=0.02)
    control = r3[r3["comparison"] == "control"]
    assert len(control) == len(paper_analyses.R3_POLICIES) * len(pipeline.budgets)  # the paper's 9 at 3 budgets
    assert set(control["policy_a"]) == {evict.CONTROL}
    # The control loses at least as much gold as random, so under the oracle its irreversible
    # rate is never below random's on the same questions.
    vs_random = control[control["policy_b"] == "random"]
    assert (vs_random["difference"] >= 0).all()


def test_a_read_longer_than_the_embedded_window_is_refused_before_any_call():
    from types import SimpleNamespace

    from memlife.restore import pipeline

    embedded = SimpleNamespace(is_embedded=True, model="embedded")
    short = arms.ReadPlan(reads=[], distinct_prompts=["Question: what?\nAnswer:"])
    n = pipeline.embedded_prompt_tokens(short, embedded, reader_max_tokens=128)
    assert 0 < n < 200
    long = arms.ReadPlan(reads=[], distinct_prompts=["word " * 9000])
    with pytest.raises(pipeline.ContextTooLong, match="lower k, restore_cap or reader_max_tokens"):
        pipeline.embedded_prompt_tokens(long, embedded, reader_max_tokens=128)
    # an endpoint refuses over-long requests itself; a reference subject has no window
    assert pipeline.embedded_prompt_tokens(long, SimpleNamespace(is_embedded=False), 128) is None
    assert pipeline.embedded_prompt_tokens(long, object(), 128) is None


def test_rereading_a_run_needs_a_reference_subject_and_the_runs_outputs(tmp_path, monkeypatch):
    """`pipeline.reread_run` (the exercises of notebooks 23 and 24) reads with a subject whose
    answers are known, never the model, and says None, not an error, before notebooks 20 and 21 ran."""
    import shutil

    from memlife.base import paths
    from memlife.restore import pipeline as restore_pipeline

    shutil.copytree(paths.repo_root() / "configs", tmp_path / "configs")
    monkeypatch.setenv("MEMLIFE_ROOT", str(tmp_path))
    with pytest.raises(ValueError, match="reference subject"):
        restore_pipeline.reread_run("smoke", "llm")
    assert restore_pipeline.reread_run("smoke", ref.EVIDENCE_ORACLE) is None
