"""The LongMemEval-S reconstruction from the genuine oracle file (memlife.reconstruct)."""
import json
from collections import Counter

import pytest

from memlife import longmem, reconstruct, sharegpt
from memlife.restore.data import dataset, units

PAPER_TYPES = {"temporal-reasoning": 127, "multi-session": 121, "knowledge-update": 72,
               "single-session-user": 64, "single-session-assistant": 56, "single-session-preference": 30}


@pytest.fixture(scope="module")
def oracle():
    return reconstruct.read_oracle()


@pytest.fixture(scope="module")
def full(oracle):
    """All 470 questions at LongMemEval-S's length, as notebook 25 and the paper profile build them
    (S's filler mix: task chat beside other users' sessions)."""
    return reconstruct.reconstruct(oracle, n_questions=None, history_tokens=102_000, seed=0)


@pytest.fixture(scope="module")
def split_by_id():
    return dict(sharegpt.task_chat())


def _own_sessions(rec):
    return dict(zip(rec["haystack_session_ids"], zip(rec["haystack_dates"], rec["haystack_sessions"])))


def test_the_oracle_file_is_found_without_importing_its_package_and_pinned():
    import sys

    path = longmem.oracle_path()
    assert path.stat().st_size == longmem.ORACLE_BYTES
    assert longmem.file_sha256(path) == longmem.ORACLE_SHA256
    assert longmem.ORACLE_PACKAGE not in sys.modules


def test_a_changed_oracle_file_is_refused(tmp_path):
    bad = tmp_path / "oracle.json"
    bad.write_text("[]")
    with pytest.raises(longmem.LongMemEvalError, match="differs from the pinned"):
        reconstruct.read_oracle(bad)


def test_the_470_questions_and_their_evidence_are_the_oracle_files(oracle, full):
    by_id = {r["question_id"]: r for r in oracle}
    expected = [r["question_id"] for r in oracle if not r["question_id"].endswith("_abs")]
    assert [r["question_id"] for r in full] == expected and len(full) == 470
    for r in full:
        o = by_id[r["question_id"]]
        for f in ("question_type", "question", "answer", "question_date", "answer_session_ids"):
            assert r[f] == o[f], (r["question_id"], f)
        ours = _own_sessions(r)
        for sid, date, sess in zip(o["haystack_session_ids"], o["haystack_dates"], o["haystack_sessions"]):
            assert ours[sid] == (date, sess), (r["question_id"], sid)  # turns, has_answer and real date
    assert Counter(r["question_type"] for r in full) == PAPER_TYPES


def test_the_histories_look_like_longmemeval_s(full):
    s = dataset.stats(full)
    assert 92_000 <= s["history_tokens"]["median"] <= 112_000
    assert s["history_tokens"]["max"] <= 102_000  # whole sessions, never over the target
    # gold sits anywhere in a history, as LongMemEval's uniform placement puts it
    assert s["gold_position_quantile"]["ks_statistic"] <= 0.1
    assert 0.4 <= s["gold_position_quantile"]["median"] <= 0.6
    assert s["questions_per_type"] == PAPER_TYPES
    # S's shape: ~50 sessions a history (S: 44-56), task chat about as common as in S (55%), ~1.5k tokens each
    assert 44 <= s["sessions_per_history"]["median"] <= 56
    shape = reconstruct.S_SHAPE["session_share"]
    assert abs(s["session_share"]["task_chat"] - shape["task_chat"]) <= 0.05
    assert abs(s["session_share"]["other_users"] - shape["other_users"]) <= 0.05
    assert 1_200 <= s["task_chat_tokens_per_session"] <= 1_800
    # FIFO at an 8k-of-102k budget must be able to lose gold: some sits in the oldest fifth
    positions = [p for r in full for p in dataset.gold_positions(units.units_of(longmem.to_question(r)))]
    assert sum(p < 0.2 for p in positions) > 0.1 * len(positions)


def test_filler_is_other_questions_sessions_or_sharegpt_and_never_states_the_answer(oracle, full, split_by_id):
    pool = reconstruct.session_pool(oracle)
    task = reconstruct.TaskChat(split_by_id.items())
    for r in full[::7]:
        own = set(r["answer_session_ids"])
        own_turns = {pool[s].turns for s in own}
        phrases = reconstruct.answer_phrases(r["answer"])
        for sid, sess in zip(r["haystack_session_ids"], r["haystack_sessions"]):
            if sid in own:
                continue
            session = task[sid] if reconstruct.filler_kind(sid) == "task_chat" else pool[sid]
            assert session.turns not in own_turns
            assert [(t["role"], t["content"]) for t in sess] == list(session.turns)
            assert not any("has_answer" in t for t in sess)
            assert not reconstruct.states_answer(session, phrases), (r["question_id"], sid)
        assert len(set(r["haystack_session_ids"])) == len(r["haystack_session_ids"])


def test_every_sharegpt_session_is_the_splits_conversation_of_its_id(full, split_by_id):
    """Every task-chat session of the whole build, turn by turn, is the split's conversation named
    by its id (``sharegpt_`` + the split's id; human -> user, gpt -> assistant), as S's are."""
    n = 0
    for r in full:
        for sid, sess in zip(r["haystack_session_ids"], r["haystack_sessions"]):
            if sid.startswith(sharegpt.ID_PREFIX):
                assert [(t["role"], t["content"]) for t in sess] == list(split_by_id[sid]), (r["question_id"], sid)
                n += 1
    assert n > 10_000


def test_task_chat_share_sets_the_mix_and_zero_is_other_users_alone(oracle):
    def kinds(recs):
        return Counter(reconstruct.filler_kind(s) for r in recs for s in r["haystack_session_ids"]
                       if s not in r["answer_session_ids"])

    alone = reconstruct.reconstruct(oracle, n_questions=12, history_tokens=30_000, seed=0, task_chat_share=0.0)
    assert kinds(alone)["task_chat"] == 0
    only = reconstruct.reconstruct(oracle, n_questions=12, history_tokens=30_000, seed=0, task_chat_share=1.0)
    assert kinds(only)["other_users"] == 0
    half = kinds(reconstruct.reconstruct(oracle, n_questions=12, history_tokens=30_000, seed=0, task_chat_share=0.5))
    assert abs(half["task_chat"] - half["other_users"]) <= 12  # at most one session apart a history
    # the evidence is the same whatever the filler: only the filler differs
    for a, b in zip(alone, only):
        assert a["answer_session_ids"] == b["answer_session_ids"] and a["question"] == b["question"]
    with pytest.raises(ValueError, match="between 0 and 1"):
        reconstruct.reconstruct(oracle, n_questions=1, history_tokens=30_000, seed=0, task_chat_share=1.5)


def test_histories_are_chronological_and_keep_the_evidence_order(full):
    for r in full[::5]:
        q = longmem.to_question(r)
        dates = [longmem.parse_date(d) for d in r["haystack_dates"]]
        assert dates == sorted(dates), r["question_id"]
        # units (ordered by date, then haystack position) follow the haystack's order
        us = units.units_of(q)
        assert [u.session_id for u in us] == [s for s, sess in zip(r["haystack_session_ids"], r["haystack_sessions"])
                                              for _ in sess]


def test_a_history_depends_only_on_its_question_length_and_seed(oracle, full):
    sample = reconstruct.reconstruct(oracle, n_questions=12, history_tokens=102_000, seed=0)
    by_id = {r["question_id"]: r for r in full}
    assert all(r == by_id[r["question_id"]] for r in sample)
    again = reconstruct.reconstruct(oracle, n_questions=12, history_tokens=102_000, seed=0)
    assert json.dumps(again) == json.dumps(sample)  # byte-identical
    other = reconstruct.reconstruct(oracle, n_questions=12, history_tokens=102_000, seed=1)
    assert [r["haystack_session_ids"] for r in other] != [r["haystack_session_ids"] for r in sample]


def test_whole_sessions_up_to_the_target_or_the_evidence_alone(oracle, split_by_id):
    recs = reconstruct.reconstruct(oracle, n_questions=30, history_tokens=8_000, seed=0)
    pool = reconstruct.session_pool(oracle)
    task = reconstruct.TaskChat(split_by_id.items())
    for r in recs:
        total = sum((task[s] if reconstruct.filler_kind(s) == "task_chat" else pool[s]).tokens
                    for s in r["haystack_session_ids"])
        evidence = sum(pool[s].tokens for s in r["answer_session_ids"])
        assert total <= max(8_000, evidence)
        if evidence >= 8_000:
            assert r["haystack_session_ids"] == sorted(r["haystack_session_ids"], key=r["haystack_session_ids"].index)
            assert set(r["haystack_session_ids"]) == set(r["answer_session_ids"])


def test_a_sample_is_stratified_by_type(oracle):
    six = reconstruct.select(oracle, 6, seed=0)
    assert sorted(r["question_type"] for r in six) == sorted(longmem.QUESTION_TYPES)
    fifty = Counter(r["question_type"] for r in reconstruct.select(oracle, 47, seed=0))
    # a tenth of each type, by largest remainder: 12.7, 12.1, 7.2, 6.4, 5.6, 3.0
    assert fifty == {"temporal-reasoning": 13, "multi-session": 12, "knowledge-update": 7,
                     "single-session-user": 6, "single-session-assistant": 6, "single-session-preference": 3}
    assert reconstruct.select(oracle, 6, seed=0) == six
    assert reconstruct.select(oracle, 6, seed=1) != six


@pytest.mark.parametrize("answer, phrases", [
    ("GPS system not functioning correctly", [" gps system not functioning correctly "]),
    ("3", []),  # a count occurs in any chat: it excludes nothing
    ("four", []),
    ("bike", [" bike "]),
    ("car", []),  # a word under four characters is not distinctive
    (400000, [" 400000 "]),
    ("$400,000", [" $400,000 "]),
    ("25 minutes and 50 seconds (or 25:50)",
     [" 25 50 ", " 25 minutes and 50 seconds ", " 25 minutes and 50 seconds or 25 50 "]),
    ("The user would prefer responses that suggest resources specifically tailored to Adobe Premiere Pro, "
     "especially those that delve into its advanced settings.", []),
])
def test_answer_phrases(answer, phrases):
    assert reconstruct.answer_phrases(answer) == phrases


def test_the_build_and_stats_commands(tmp_path, capsys, monkeypatch):
    out = tmp_path / "smoke.json"
    assert dataset.main(["build", "--profile", "smoke", "--out", str(out)]) == 0
    assert dataset.main(["validate", str(out)]) == 0
    capsys.readouterr()
    assert dataset.main(["stats", str(out)]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["questions"] == 1 and set(s["gold_position_quantile"]) == {"median", "ks_statistic", "ks_pvalue"}


def test_gold_position_by_hand():
    # tokens 10, 20 (gold), 70: the gold unit's middle sits at (10 + 20 / 2) / 100 = 0.2
    us = [units.Unit(f"s:{i}", "s", i, "2023/01/01 (Sun) 10:00", "user", "x", n, i, i == 1)
          for i, n in enumerate((10, 20, 70))]
    assert dataset.gold_positions(us) == [0.2]


def test_filler_is_dated_before_the_question_unless_the_evidence_is_not(full):
    for r in full:
        q = longmem.parse_date(r["question_date"])
        last = max(longmem.parse_date(d) for s, d in zip(r["haystack_session_ids"], r["haystack_dates"])
                   if s in r["answer_session_ids"])
        for s, d in zip(r["haystack_session_ids"], r["haystack_dates"]):
            if s not in r["answer_session_ids"] and longmem.parse_date(d) > q:
                assert last > q, (r["question_id"], s, d)  # only after evidence that is itself later
