import copy
import json
from pathlib import Path

import pytest

from memlife import longmem
from memlife.restore.data import dataset, units

import longmem_templates

TINY = Path(__file__).parent / "data" / "longmemeval_s_tiny.json"


@pytest.fixture(scope="module")
def built():
    """The tests' tiny synthetic builder (tests/longmem_templates.py), not the project's data."""
    return longmem_templates.build(n_questions=7, history_tokens=1200, seed=3)


def _errors(records):
    return [p for p in longmem.validate(records) if p.severity == "error"]


def test_builder_output_is_valid_and_loads(built, tmp_path):
    assert _errors(built) == []
    path = dataset.write(built, tmp_path / "b.json")
    assert dataset.main(["validate", str(path)]) == 0
    qs = longmem.load(path)
    assert [q.question_type for q in qs[:6]] == list(longmem.QUESTION_TYPES)
    for q in qs:
        # histories reach the requested length, are chronological, and have gold
        us = units.units_of(q)
        assert sum(u.tokens for u in us) >= 1200
        dates = [longmem.parse_date(s.date) for s in q.sessions]
        assert dates == sorted(dates)
        assert all(longmem.parse_date(s.date) < longmem.parse_date(q.question_date) for s in q.sessions)
        assert units.gold_rule_used(q) == "has_answer"
        assert any(u.is_gold for u in us)
        # filler sessions are real corpus dialogues, each used once per history
        filler = [s.session_id for s in q.sessions if s.session_id.startswith("chitchat_")]
        assert len(filler) == len(set(filler)) > 0


def test_builder_is_deterministic_per_seed(built, tmp_path):
    again = longmem_templates.build(n_questions=7, history_tokens=1200, seed=3)
    a = dataset.write(built, tmp_path / "a.json").read_bytes()
    b = dataset.write(again, tmp_path / "b.json").read_bytes()
    assert a == b
    other = longmem_templates.build(n_questions=7, history_tokens=1200, seed=4)
    assert other != built


def test_builder_answers_follow_the_evidence(built):
    by_type = {r["question_type"]: r for r in built}
    ku = by_type["knowledge-update"]
    gold_turns = [t["content"] for s in ku["haystack_sessions"] for t in s if t.get("has_answer")]
    assert len(gold_turns) == 2 and ku["answer"] in gold_turns[-1]
    ms = by_type["multi-session"]
    prices = [int(t["content"].split("$")[1].rstrip(".")) for s in ms["haystack_sessions"] for t in s
              if t.get("has_answer")]
    assert ms["answer"] == f"${sum(prices)}" and len(ms["answer_session_ids"]) == 3
    tr = by_type["temporal-reasoning"]
    sid = tr["answer_session_ids"][0]
    d = tr["haystack_dates"][tr["haystack_session_ids"].index(sid)]
    days = (longmem.parse_date(tr["question_date"]).date() - longmem.parse_date(d).date()).days
    assert tr["answer"] == f"{days} days"


def test_hand_written_public_format_file_is_accepted(capsys):
    assert dataset.main(["validate", str(TINY)]) == 0
    assert "3 questions (1 abstention" in capsys.readouterr().out
    qs = longmem.load(TINY)
    assert [q.question_id for q in qs] == ["e47becba", "gpt4_2f8be40d"]  # _abs left out
    assert qs[1].answer == "3"  # numeric answers are kept as text
    us = units.units_of(qs[1])
    assert [u.unit_id for u in us if u.is_gold] == ["answer_a1:0", "answer_a2:0"]
    assert [u.order for u in us] == list(range(len(us)))
    assert len(longmem.load(TINY, keep_abstention=True)) == 3


def _mutated(fn):
    recs = json.loads(TINY.read_text())
    fn(recs[0])
    return recs


@pytest.mark.parametrize("mutate, field, words", [
    (lambda r: r.pop("answer"), "answer", "missing field"),
    (lambda r: r.update(answer_session_ids=["answer_nowhere"]), "answer_session_ids", "absent from haystack"),
    (lambda r: r["haystack_dates"].pop(), "haystack_dates", "has 2 entries but haystack_sessions has 3"),
    (lambda r: r["haystack_session_ids"].__setitem__(2, "sharegpt_yywfgrp_0"), "haystack_session_ids",
     "duplicated session id 'sharegpt_yywfgrp_0'"),
])
def test_validator_rejects_naming_record_and_field(mutate, field, words, tmp_path, capsys):
    recs = _mutated(mutate)
    errs = _errors(recs)
    assert any(p.question_id == "e47becba" and p.field == field and words in p.message for p in errs), errs
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(recs))
    assert dataset.main(["validate", str(path)]) == 1
    out = capsys.readouterr().out
    assert "e47becba" in out and field in out and words in out
    with pytest.raises(longmem.LongMemEvalError, match="e47becba"):
        longmem.load(path)


def test_validator_reports_malformed_turns_and_not_json(tmp_path):
    recs = _mutated(lambda r: r["haystack_sessions"][1][0].update(role="system"))
    assert any(p.field == "haystack_sessions[1][0].role" for p in _errors(recs))
    bad = tmp_path / "x.json"
    bad.write_text("{not json")
    assert dataset.main(["validate", str(bad)]) == 1


def test_duplicated_filler_is_reported_not_rejected():
    def dup(r):
        r["haystack_session_ids"].append("ultrachat_copy")
        r["haystack_dates"].append("2023/05/26 (Fri) 10:00")
        r["haystack_sessions"].append(copy.deepcopy(r["haystack_sessions"][0]))
    probs = longmem.validate(_mutated(dup))
    warn = [p for p in probs if p.severity == "warning"]
    assert len(warn) == 1 and "'ultrachat_copy' duplicates the content of 'sharegpt_yywfgrp_0'" in warn[0].message
    assert not [p for p in probs if p.severity == "error"]


def test_sha_pin_is_enforced(tmp_path):
    path = tmp_path / "t.json"
    path.write_bytes(TINY.read_bytes())
    assert longmem.load(path, expected_sha256=longmem.file_sha256(path))
    with pytest.raises(longmem.LongMemEvalError, match="differs from the pinned"):
        longmem.load(path, expected_sha256=longmem.LONGMEMEVAL_S_SHA256)


def test_gold_rule_falls_back_to_whole_answer_sessions():
    recs = json.loads(TINY.read_text())
    for s in recs[0]["haystack_sessions"]:
        for t in s:
            t.pop("has_answer", None)
    q = longmem.to_question(recs[0])
    assert units.gold_rule_used(q) == "answer_sessions"
    assert [u.unit_id for u in units.units_of(q) if u.is_gold] == ["answer_280352e9:0", "answer_280352e9:1"]


def test_stats_count_sessions_and_their_kinds_by_hand():
    """TINY's two questions (the abstention one left out): 3 sessions each; by id, `sharegpt_*` and
    `ultrachat_*` are task chat, `answer_*` listed in answer_session_ids evidence, the rest other users'."""
    recs = json.loads(TINY.read_text())
    s = dataset.stats(recs)
    assert s["sessions_per_history"] == {"median": 3, "min": 3, "max": 3}
    assert s["session_share"] == {"other_users": 0.0, "task_chat": 0.5, "evidence": 0.5}
    recs[1]["haystack_session_ids"][1] = "85a1be56_1"  # another simulated user's session, as S names them
    s = dataset.stats(recs)
    assert s["session_share"] == pytest.approx({"other_users": 1 / 6, "task_chat": 2 / 6, "evidence": 3 / 6})
    # task chat's tokens a session: the mean over the task-chat sessions of each history's units
    qs = [longmem.to_question(r) for r in recs if not r["question_id"].endswith("_abs")]
    sizes = [sum(u.tokens for u in units.units_of(q) if u.session_id.startswith(("sharegpt_", "ultrachat_")))
             for q in qs]
    assert s["task_chat_tokens_per_session"] == pytest.approx(sum(sizes) / 2)
