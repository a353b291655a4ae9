"""R4's residual causes on hand-built records: one residual per cause, and the order in which
causes are checked."""
import pandas as pd
import pytest

from memlife.longmem import Question
from memlife.restore.analyses import decompose as d
from memlife.restore.judging import grading
from memlife.restore.analyses import residuals

Q = {
    # multi-session sum (the paper's cited $185 the weaker reader answers as $65)
    "sum": ("multi-session", "How much did I spend on gifts for my family in total?", "$185"),
    # temporal arithmetic over dates
    "days": ("temporal-reasoning", "How many days passed between the concert and the trip?", "12 days"),
    "cat": ("single-session-user", "What is the name of my cat?", "Luna"),
    "count": ("multi-session", "How many model kits have I worked on or bought?", "five"),
}


def _q(qid):
    qtype, question, answer = Q[qid]
    return Question(question_id=qid, question_type=qtype, question=question, answer=answer,
                    question_date="2023/05/30 (Tue) 10:00", sessions=(), answer_session_ids=())


def _rows(qid, restore_reply, judge="llm-judge"):
    """An oracle-answerable question, wrong under the policy and still wrong after the restore."""
    qtype = Q[qid][0]
    base = dict(question_id=qid, question_type=qtype, reader="reader-a", judge=judge, n_gold=2,
                context_tokens=10, judge_raw="")
    cell = dict(policy="no_evict", budget=8000, regime="forced_gold", seed=0, n_gold_evicted=0)
    return [
        dict(base, arm="clean_gold", correct=True, hypothesis=Q[qid][2], policy=None, budget=None,
             regime=None, seed=None, n_gold_evicted=None),
        dict(base, arm="policy", correct=False, hypothesis="I don't know", **cell),
        dict(base, arm="restore", correct=False, hypothesis=restore_reply, **cell),
    ]


CASES = [
    # an LLM judge called it wrong, but the reply holds the answer's value: judge strictness
    ("cat", "Your cat is called Luna.", "llm-judge", "judge_strictness"),
    # the reader says the gold lacks the answer
    ("cat", "I don't know; the snippets do not mention a cat.", "llm-judge", "gold_insufficient"),
    # a wrong sum over several sessions
    ("sum", "You spent $65 on gifts.", "llm-judge", "cross_session_aggregation"),
    ("count", "You have worked on or bought three model kits.", "llm-judge", "cross_session_aggregation"),
    # a wrong number of days (temporal, not multi-session)
    ("days", "10 days passed.", "llm-judge", "arithmetic"),
    # a wrong name
    ("cat", "Your cat is called Milo.", "llm-judge", "other"),
    # the deterministic scorer never counts as strict against itself: its own "wrong" stays a reader error
    ("sum", "You spent $185... no, $65 on gifts.", grading.DETERMINISTIC_JUDGE, "cross_session_aggregation"),
]


@pytest.mark.parametrize("qid,reply,judge,cause", CASES)
def test_each_residual_gets_its_cause(qid, reply, judge, cause):
    qtype, question, answer = Q[qid]
    assert residuals.classify(question, qtype, answer, reply, judge) == cause


def test_classify_residuals_reads_the_restore_reply_of_each_residual_observation_and_tables_them():
    rows = []
    for i, (qid, reply, judge, _) in enumerate(CASES[:6]):
        for r in _rows(qid, reply):
            rows.append(dict(r, question_id=f"{qid}-{i}"))
    # a question answered right after the restore is not residual and gets no cause
    ok = _rows("sum", "$185")
    ok[2]["correct"] = True
    rows += [dict(r, question_id="sum-ok") for r in ok]
    rec = d.normalize_records(pd.DataFrame(rows))
    obs = d.observations(rec)
    questions = {f"{qid}-{i}": _q(qid) for i, (qid, *_) in enumerate(CASES[:6])}
    questions["sum-ok"] = _q("sum")
    got = residuals.classify_residuals(rec, obs, questions)
    assert len(got) == 6 and "sum-ok" not in set(got["question_id"])
    assert got.set_index("question_id")["cause"].to_dict() == {
        f"{qid}-{i}": cause for i, (qid, _, _, cause) in enumerate(CASES[:6])}
    table = residuals.cause_table(got, min_clusters=1)
    assert list(table["cause"]) == list(residuals.CAUSES)
    assert table.set_index("cause")["n"].to_dict() == {
        "judge_strictness": 1, "gold_insufficient": 1, "cross_session_aggregation": 2, "arithmetic": 1, "other": 1}
    assert (table["n_residual"] == 6).all() and table["share"].sum() == pytest.approx(1.0)
    # six questions: at the default floor of 20 the counts stay, the shares do not
    assert residuals.cause_table(got)["share"].isna().all()
    with pytest.raises(KeyError, match="question_id='cat-0'"):
        residuals.classify_residuals(rec, obs, {k: v for k, v in questions.items() if k != "cat-0"})
