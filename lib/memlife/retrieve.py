"""Read-time retrieval over the units an eviction policy retained, and context rendering.

The ranker is a frozen BM25 ("BM25-lite" in the paper) from ``bm25s`` with its defaults
(Lucene variant, k1=1.5, b=0.75). Tokenization is ``bm25s.tokenize``: lower-cased, the regex
``(?u)\\b\\w\\w+\\b`` (words of two or more letters/digits; one-character tokens and
punctuation dropped), bm25s's English stop-word list, no stemming. The index holds only the
retained units, so IDF is computed over what survived eviction. Units are ranked by BM25 score
against the question, ties broken by recency (newer first) — units with no query term all
score 0 and are therefore ranked newest first.

Regimes (the paper's Appendix A):
- ``topk`` — the k best-ranked retained units.
- ``forced_gold`` — :func:`inject` of the surviving gold: the gold that eviction kept, then
  ranked retained units within what remains of the injection cap.

The restore arm (:mod:`memlife.restore.arms`) is :func:`inject` of the *full* gold with the same
ranking and cap, so when eviction kept every gold unit, forced-gold and restore build the very
same context and forced-gold recoverable errors are zero by construction.

Contexts are rendered oldest first, one line per unit, ``[date] role: text``; session ids
are never shown.
"""
from __future__ import annotations

from typing import Iterable, Sequence

import bm25s
import numpy as np

from memlife.units import Unit

REGIMES = ("topk", "forced_gold")
STOPWORDS = "en"


def tokenize(texts: Sequence[str]) -> list[list[str]]:
    return bm25s.tokenize(list(texts), stopwords=STOPWORDS, return_ids=False, show_progress=False)


def rank(units: Sequence[Unit], retained: Iterable[str], question: str,
         unit_tokens: Sequence[list[str]] | None = None) -> list[str]:
    """Retained unit ids, best BM25 match first, ties: newer first.

    ``unit_tokens`` may pass ``tokenize([u.text for u in units])`` computed once per history.
    """
    keep = set(retained)
    idx = [i for i, u in enumerate(units) if u.unit_id in keep]
    if not idx:
        return []
    toks = unit_tokens if unit_tokens is not None else tokenize([units[i].text for i in range(len(units))])
    docs = [toks[i] for i in idx]
    query = tokenize([question])[0]
    scores = np.zeros(len(idx), dtype=np.float64)
    if any(docs) and query:
        bm = bm25s.BM25()
        bm.index(docs, show_progress=False)
        query = [t for t in query if t in bm.vocab_dict]
        if query:
            scores = np.asarray(bm.get_scores(query), dtype=np.float64)
    order = sorted(range(len(idx)), key=lambda j: (-scores[j], -units[idx[j]].order))
    return [units[idx[j]].unit_id for j in order]


def inject(units: Sequence[Unit], forced: Iterable[str], ranking: Sequence[str], cap: int) -> list[str]:
    """The paper's injection: ``forced`` ids first (duplicates skipped), then the ids of
    ``ranking`` in rank order, each added if its tokens fit in what remains of ``cap`` — the
    forced units count against the cap, and a unit that does not fit is skipped, not a stop.
    Returns ids in chronological order.

    Tokens are the units' own text tokens (:attr:`Unit.tokens`, the measure the store budget
    uses), not the rendered ``[date] role:`` lines.

    When the forced units alone exceed ``cap``, all of them are kept and nothing else is added:
    the restore counterfactual is defined by reinstating the *whole* gold set, and dropping a
    gold unit to honour the cap would turn a destroyed-evidence question into one the restore
    cannot answer. Such a context is longer than the cap by exactly the forced units' excess.
    """
    by_id = {u.unit_id: u for u in units}
    chosen: list[str] = []
    have: set[str] = set()
    for uid in forced:
        if uid not in have:
            chosen.append(uid)
            have.add(uid)
    room = cap - sum(by_id[uid].tokens for uid in chosen)
    for uid in ranking:
        if uid in have:
            continue  # a forced unit that was also retained and ranked is not counted twice
        t = by_id[uid].tokens
        if t <= room:
            chosen.append(uid)
            have.add(uid)
            room -= t
    return [u.unit_id for u in chronological(by_id, chosen)]


def select(units: Sequence[Unit], ranking: Sequence[str], regime: str, *, k: int, cap: int,
           retained_gold: Iterable[str] = ()) -> list[str]:
    """The unit ids a regime puts in the context: the top ``k`` of the ranking (``topk``), or
    :func:`inject` of the retained gold within ``cap`` tokens (``forced_gold``)."""
    if regime == "topk":
        return list(ranking[:k])
    if regime == "forced_gold":
        return inject(units, retained_gold, ranking, cap)
    raise ValueError(f"unknown regime {regime!r}; expected one of {REGIMES}")


def chronological(units_by_id: dict[str, Unit], ids: Iterable[str]) -> list[Unit]:
    return sorted((units_by_id[i] for i in set(ids)), key=lambda u: u.order)


def render(units: Sequence[Unit]) -> str:
    """Newline-joined snippets, oldest first, session ids hidden."""
    return "\n".join(f"[{u.date}] {u.role}: {u.text}" for u in sorted(units, key=lambda u: u.order))
