"""Memory units: one per turn of a question's history, in chronological order.

A unit's id is ``session_id:turn_index`` (the turn's index inside its session). Units are
ordered by session date (haystack position breaks ties between sessions of the same minute),
then by turn index; ``order`` is that position and is what "oldest" means to every policy.

Gold rule: a question's gold units are the turns flagged ``has_answer`` inside its answer
sessions (``answer_session_ids``). ``has_answer`` turns outside answer sessions are not gold.
When the answer sessions carry no ``has_answer`` turn at all, every turn of the answer
sessions is gold (the evidence is then the whole session, as LongMemEval's session-level
labels say); :func:`gold_rule_used` reports which rule applied. A question with no answer
session has no gold and cannot enter the restore audit (the loader already rejects it).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from memlife.longmem import Question, parse_date
from memlife.models import tokens


@dataclass(frozen=True)
class Unit:
    unit_id: str
    session_id: str
    turn_index: int
    date: str
    role: str
    text: str
    tokens: int
    order: int  # chronological position in the history, 0 = oldest
    is_gold: bool


def _gold_keys(q: Question) -> tuple[set[tuple[str, int]], str]:
    answer = set(q.answer_session_ids)
    flagged = {(s.session_id, i) for s in q.sessions if s.session_id in answer
               for i, t in enumerate(s.turns) if t.has_answer}
    if flagged:
        return flagged, "has_answer"
    whole = {(s.session_id, i) for s in q.sessions if s.session_id in answer for i in range(len(s.turns))}
    return whole, "answer_sessions"


def gold_rule_used(q: Question) -> str:
    """'has_answer' (the normal rule) or 'answer_sessions' (the fallback)."""
    return _gold_keys(q)[1]


@lru_cache(maxsize=None)
def _tokens(text: str) -> int:
    # Filler sessions recur across histories (the reconstruction shares ~940 sessions among 470
    # questions): each distinct turn is counted once per process.
    return tokens.count(text)


def units_of(q: Question) -> list[Unit]:
    """The question's history as units, oldest first."""
    gold, _ = _gold_keys(q)
    ordered = sorted(enumerate(q.sessions), key=lambda p: (parse_date(p[1].date), p[0]))
    out: list[Unit] = []
    for _, s in ordered:
        for i, t in enumerate(s.turns):
            out.append(Unit(
                unit_id=f"{s.session_id}:{i}",
                session_id=s.session_id,
                turn_index=i,
                date=s.date,
                role=t.role,
                text=t.content,
                tokens=_tokens(t.content),
                order=len(out),
                is_gold=(s.session_id, i) in gold,
            ))
    return out


def gold_ids(units: list[Unit]) -> frozenset[str]:
    return frozenset(u.unit_id for u in units if u.is_gold)
