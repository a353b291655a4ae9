import hashlib
from types import SimpleNamespace

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memlife import longmem
from memlife.models import endpoints, tokens
from memlife.restore.data import units
from memlife.restore.eviction import evict
from memlife.restore.judging import grading
from memlife.restore.reading import arms, prompts, read_context
from memlife.restore.judging import answer_judge
from memlife.restore.analyses import decompose

import longmem_templates

PINNED = {
    "reader_system": "b8cd79e82e9b9eb0f1c6583e30ea7b894e094b47da271dc7cfd33ad649dcc542",
    "reader_user": "12be3b0aa025160fb570299ed5117b6ffc43774a401e90d80b33704b9a5ed2e3",
    "judge_system": "6cd00f9c850e53ae8dff59271f66619e8f0f0a490e6ef7a205fa42e74a0b6d4d",
    "judge_user": "bc982b19f881302bdf5ee6ac1e1ba62393e8f6665e4fcf48017634ea972358cc",
    "importance_system": "1c4a191f6f26eedbb7cf001f51b71b3216631090ecc7a08339aa1e43c12c344f",
    "importance_user": "500ecfe83d00a310c391d19b4f53eb61df1d0f81a1342d1c451bc46e5f95fb09",
}


def test_prompts_are_pinned():
    from memlife.restore.eviction import importance

    got = {k: hashlib.sha256(v.encode()).hexdigest() for k, v in {**prompts.PROMPTS, **importance.PROMPTS}.items()}
    assert got == PINNED
    assert (prompts.READER_MAX_TOKENS, prompts.JUDGE_MAX_TOKENS, importance.IMPORTANCE_MAX_TOKENS) == (600, 16, 4)


@pytest.fixture(scope="module")
def dataset():
    recs = longmem_templates.build(n_questions=6, history_tokens=1500, seed=5)
    qs = [longmem.to_question(r) for r in recs]
    return qs, {q.question_id: units.units_of(q) for q in qs}


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 6), st.integers(0, 5), st.integers(0, 2500), st.integers(0, 3))
def test_restore_context_has_all_gold_within_cap_chronological(dataset, qi, policy_i, cap, seed):
    qs, hist = dataset
    q = qs[qi % len(qs)]
    us = hist[q.question_id]
    ev = evict.evict(us, evict.POLICIES[policy_i], 120, seed, question_id=q.question_id,
                     importance={u.text: 1.0 for u in us})
    ranking = read_context.rank(us, ev.retained, q.question)
    gold = [u.unit_id for u in us if u.is_gold]
    ids = read_context.inject(us, gold, ranking, cap)
    by_id = {u.unit_id: u for u in us}
    gold_tokens = sum(by_id[i].tokens for i in gold)
    assert set(gold) <= set(ids)  # evicted gold included
    assert len(ids) == len(set(ids))
    if gold_tokens <= cap:
        assert sum(by_id[i].tokens for i in ids) <= cap  # gold counts against the cap
    else:
        assert set(ids) == set(gold)  # gold alone is over the cap: gold only, all of it
    assert [by_id[i].order for i in ids] == sorted(by_id[i].order for i in ids)
    assert all(by_id[i].is_gold or i in set(ev.retained) for i in ids)  # fillers were retained


def test_build_reads_covers_every_arm_and_dedups(dataset):
    qs, hist = dataset
    q = qs[3]  # multi-session: three gold units
    us = hist[q.question_id]
    budgets = arms.scaled_budgets(1500)
    evs = evict.evict_grid({q.question_id: us}, ["fifo", "no_evict", "random"], budgets, [0, 1])
    reads = arms.build_reads(q, us, evs, k=10, restore_cap=200)
    assert len(reads) == 1 + len(evs) * 2 * 2
    clean = [r for r in reads if r.arm == "clean_gold"]
    assert len(clean) == 1 and clean[0].policy is None and clean[0].budget is None and clean[0].seed is None
    gold = {u.unit_id for u in us if u.is_gold}
    assert set(clean[0].unit_ids) == gold
    for ev in evs:
        cell = [r for r in reads if (r.policy, r.budget, r.seed) == (ev.policy, ev.budget, ev.seed)]
        restore = [r for r in cell if r.arm == "restore"]
        assert len(restore) == 2 and restore[0].prompt == restore[1].prompt  # shared by regimes
        fg = next(r for r in cell if r.arm == "policy" and r.regime == "forced_gold")
        assert gold & set(ev.retained) <= set(fg.unit_ids)
        topk = next(r for r in cell if r.arm == "policy" and r.regime == "topk")
        assert len(topk.unit_ids) <= 10
        by_id = {u.unit_id: u for u in us}
        for r in (fg, restore[0]):  # one cap, gold included, for both injected contexts
            assert sum(by_id[i].tokens for i in r.unit_ids) <= 200
        # nothing evicted: forced-gold reads exactly the restore context
        assert (fg.prompt == restore[0].prompt) == (ev.n_gold_evicted == 0)
    plan = arms.plan_reads(reads)
    assert plan.naive_calls == len(reads)
    # no-evict is budget-independent: its reads are identical across the three budgets
    assert plan.distinct_calls <= plan.naive_calls - 2 * 2
    assert plan.distinct_prompts == sorted(plan.distinct_prompts)
    r0 = reads[1]
    assert r0.context_tokens == tokens.count(read_context.render([{u.unit_id: u for u in us}[i] for i in r0.unit_ids]))
    assert f"Today's date: {q.question_date}" in r0.prompt and r0.prompt.endswith(f"Question: {q.question}\nAnswer:")
    assert "answer_" not in r0.prompt and "chitchat_" not in r0.prompt


@pytest.mark.parametrize("question, answer, hyp, ok", [
    ("What is the name of the rabbit I adopted?", "Luna", "Your rabbit is called Luna.", True),
    ("What is the name of the rabbit I adopted?", "Luna", "I don't know.", False),
    ("How many days ago did I attend the first session?", "12 days", "That was twelve days ago.", True),
    ("How much did I spend in total?", "$383", "You spent $383 in total.", True),
    ("How much did I spend in total?", "$383", "You spent $3830.", False),
    ("How much did I spend in total?", "$1,250", "about $1250", True),
    ("What degree did I graduate with?", "Business Administration", "a degree in business administration", True),
    ("How many weddings did I attend?", "3", "You attended 13 weddings", False),
    ("Which gym am I a member of now?", "FitHub", "You are a member of Iron Temple.", False),
])
def test_the_deterministic_judge_on_short_answers(question, answer, hyp, ok):
    assert answer_judge.grade(question, "multi-session", answer, hyp) == (
        answer_judge.CORRECT if ok else answer_judge.INCORRECT)


class FakeClient:
    model = "fake-reader"

    def __init__(self, reply):
        self.reply, self.sent = reply, []

    def complete_many(self, reqs, desc=None):
        self.sent.extend(reqs)
        return [SimpleNamespace(text=self.reply(r)) for r in reqs]


def test_records_follow_the_contract(dataset, tmp_path):
    qs, hist = dataset
    q = qs[0]
    us = hist[q.question_id]
    evs = evict.evict_grid({q.question_id: us}, ["fifo", "random"], [200, 900], [0])
    reads = arms.build_reads(q, us, evs, k=8, restore_cap=150)
    plan = arms.plan_reads(reads)
    gold_text = next(u.text for u in us if u.is_gold)
    # a reader that answers right exactly when the gold turn is in its context
    reader = FakeClient(lambda r: q.answer if gold_text in r["messages"][1]["content"] else "I don't know")
    answers = arms.read_all(plan, reader)
    assert len(reader.sent) == plan.distinct_calls
    assert all(r["max_tokens"] == 600 and r["temperature"] == 0.0 for r in reader.sent)
    assert all(r["messages"][0]["content"] == prompts.READER_SYSTEM for r in reader.sent)
    capped = FakeClient(lambda r: "I don't know")
    arms.read_all(plan, capped, max_tokens=128)  # a profile's lower cap reaches every request
    assert len(capped.sent) == plan.distinct_calls and {r["max_tokens"] for r in capped.sent} == {128}
    judge = FakeClient(lambda r: "CORRECT" if q.answer in r["messages"][1]["content"].split("Model answer:")[1] else "INCORRECT")
    pairs = [(q.question, q.answer, answers[r.prompt]) for r in reads]
    jr = grading.judge_all(pairs, judge)
    from memlife.models import llm
    df = grading.records(reads, answers, {q.question_id: q}, reader.model, jr, "fake-judge", llm.parse_label)
    assert tuple(df.columns) == grading.RECORD_COLUMNS
    assert len(df) == 2 * len(reads)
    det = df[df.judge == "deterministic"]
    assert det.loc[det.arm == "clean_gold", "correct"].all()
    assert det.loc[det.arm == "restore", "correct"].all()  # restore always reinstates gold
    fg = det[(det.arm == "policy") & (det.regime == "forced_gold")]
    assert (fg["correct"] == (fg["n_gold_evicted"] == 0)).all()
    clean = df[df.arm == "clean_gold"]
    assert clean[["policy", "budget", "regime", "seed", "n_gold_evicted"]].isna().all().all()
    llm_rows = df[df.judge == "fake-judge"]
    assert (llm_rows["correct"].to_numpy() == det["correct"].to_numpy()).all()
    assert llm_rows["judge_raw"].isin(["CORRECT", "INCORRECT"]).all()
    # gold and "I don't know" are always decided: the deterministic label is its own
    assert det["judge_raw"].isin([answer_judge.CORRECT, answer_judge.INCORRECT]).all()
    assert (det["correct"] == (det["judge_raw"] == answer_judge.CORRECT)).all()
    [path] = grading.write_records(df, tmp_path)
    assert path == tmp_path / "fake-reader.parquet"
    back = pd.read_parquet(path)
    pd.testing.assert_frame_equal(back, df)


def test_an_undecided_item_is_unlabelled_or_graded_by_the_llm_judge(dataset):
    """The deterministic row of an item the judge cannot decide has no label, and judge_raw
    UNDECIDED; with an LLM judge's reply for the item, it takes that label and names its source."""
    from memlife.models import llm

    qs, hist = dataset
    q = next(q for q in qs if q.question_type == "single-session-user")
    rubric = longmem.Question(q.question_id, "single-session-preference", "Any snack ideas for my movie night?",
                              "The user would prefer vegan snacks.", q.question_date, q.sessions, q.answer_session_ids)
    reads = [r for r in arms.build_reads(rubric, hist[q.question_id], [], k=8, restore_cap=150)]
    assert [r.arm for r in reads] == ["clean_gold"]
    answers = {reads[0].prompt: "Try roasted chickpeas."}
    df = grading.records(reads, answers, {q.question_id: rubric}, "r")
    assert len(df) == 1 and df["correct"].isna().all() and df["judge_raw"].tolist() == [answer_judge.UNDECIDED]
    replies = {(rubric.question, rubric.answer, "Try roasted chickpeas."): "CORRECT"}
    df = grading.records(reads, answers, {q.question_id: rubric}, "r", replies, "fake-judge", llm.parse_label)
    det = df[df.judge == grading.DETERMINISTIC_JUDGE].iloc[0]
    assert det["correct"] and det["judge_raw"] == "UNDECIDED -> fake-judge: CORRECT"
    assert df.loc[df.judge == "fake-judge", "judge_raw"].tolist() == ["CORRECT"]
    # a decided item keeps its own label whatever the LLM judge says
    answers = {reads[0].prompt: "I don't know."}
    replies = {(rubric.question, rubric.answer, "I don't know."): "CORRECT"}
    df = grading.records(reads, answers, {q.question_id: rubric}, "r", replies, "fake-judge", llm.parse_label)
    det = df[df.judge == grading.DETERMINISTIC_JUDGE].iloc[0]
    assert det["correct"] == False and det["judge_raw"] == answer_judge.INCORRECT  # noqa: E712
    # the decomposition excludes the unlabelled observations and counts them
    evs = evict.evict_grid({q.question_id: hist[q.question_id]}, ["fifo"], [200], [0, 1])
    reads = arms.build_reads(rubric, hist[q.question_id], evs, k=8, restore_cap=150)
    df = grading.records(reads, {r.prompt: "Try roasted chickpeas." for r in reads}, {q.question_id: rubric}, "r")
    assert df["correct"].isna().all()
    with pytest.warns(UserWarning, match="excluded for an empty correct label"):
        obs = decompose.observations(df)
    assert obs.empty and obs.attrs["n_excluded_unlabelled"] == (df["arm"] == "policy").sum() > 0


def test_reading_resumes_after_a_failure_without_repeating_a_call(dataset, isolated_llm, fault_server):
    from conftest import point_at

    qs, hist = dataset
    q = qs[1]
    us = hist[q.question_id]
    evs = evict.evict_grid({q.question_id: us}, ["fifo", "random", "no_evict"], [150, 600], [0])
    plan = arms.plan_reads(arms.build_reads(q, us, evs, k=8, restore_cap=150))
    client = point_at(isolated_llm, fault_server, role="reader", concurrency=1, max_retries=0)
    fail_at = plan.distinct_prompts[len(plan.distinct_prompts) // 2]
    fault_server.script(fail_at, "400")
    with pytest.raises(endpoints.LLMError):
        arms.read_all(plan, client)  # interrupted half-way through the grid
    answers = arms.read_all(plan, client)  # the rerun replays the cache for the first half
    assert fault_server.received[fail_at] == 2
    assert all(fault_server.received[p] == 1 for p in plan.distinct_prompts if p != fail_at)
    assert answers == {p: "echo: " + p for p in plan.distinct_prompts}


def test_budgets_named_paper_follow_the_history_length_and_lists_stay_token_counts():
    assert arms.resolve_budgets("paper", 102_000) == [8_000, 30_000, 80_000]  # the paper's, exactly
    assert arms.resolve_budgets("paper", 1_500) == [118, 441, 1_176]  # 8000 * 1500 / 102000 = 117.6 ...
    assert arms.resolve_budgets("paper", 600) == [47, 176, 471]
    assert arms.resolve_budgets([100, 200], 600) == [100, 200]
    for bad in ("papers", [100, 0], [1.5]):
        with pytest.raises(ValueError, match="'paper' or a list of positive token counts"):
            arms.resolve_budgets(bad, 600)
