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
same context and forced-gold recoverable errors are zero by construction. The restore-tightness
ablation's placebo (:func:`placebo`) is the restore's context with its gold swapped for non-gold
snippets from the gold's chronological place.

Contexts are rendered oldest first, one line per unit, ``[date] role: text``; session ids
are never shown.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable, Sequence

import bm25s
import numpy as np
from scipy import sparse

from memlife.units import Unit

REGIMES = ("topk", "forced_gold")
PLACEBO_NEIGHBOURS = 6  # how far a placebo stand-in may sit from its gold unit outside its session
STOPWORDS = "en"


def tokenize(texts: Sequence[str]) -> list[list[str]]:
    return bm25s.tokenize(list(texts), stopwords=STOPWORDS, return_ids=False, show_progress=False)


@lru_cache(maxsize=1 << 18)
def _part_tokens(text: str) -> tuple[str, ...]:
    return tuple(tokenize([text])[0])


def tokenize_lines(groups: Sequence[Sequence[str]]) -> list[list[str]]:
    """`tokenize(["\\n".join(g) for g in groups])`, from parts that recur across histories. A token
    (two or more word characters) never spans whitespace, and lower-casing reads no context
    across it (Greek final sigma included), so a line's tokens are those of its head up to the
    first ": " followed by those of the rest, and a group's the concatenation of its lines':
    each distinct part is tokenized once per process (tests/test_retrieve.py checks it)."""
    out = []
    for group in groups:
        toks: list[str] = []
        for line in group:
            cut = line.find(": ")
            if cut >= 0:
                toks += _part_tokens(line[:cut + 1])
                toks += _part_tokens(line[cut + 1:])
            else:
                toks += _part_tokens(line)
        out.append(toks)
    return out


def bm25_scores(docs: Sequence[list[str]], query: list[str], index: "bm25s.BM25 | None" = None) -> np.ndarray:
    """BM25 score of each of `docs` (token lists) for the `query` tokens; zeros when they share no
    term. `index` may pass :func:`bm25_index` of the same docs, built once."""
    scores = np.zeros(len(docs), dtype=np.float64)
    if index is None and any(docs) and query:
        index = bm25_index(docs)
    if index is not None:
        query = [t for t in query if t in index.vocab_dict]
        if query:
            scores = np.asarray(index.get_scores(query), dtype=np.float64)
    return scores


def bm25_index(docs: Sequence[list[str]]) -> "bm25s.BM25 | None":
    if not any(docs):
        return None
    bm = bm25s.BM25()
    bm.index(list(docs), show_progress=False)
    return bm


@dataclass(frozen=True)
class HistoryIndex:
    """A history's term counts, built once (:func:`history_index`), from which :func:`subset_scores`
    scores any subset of its units as an index of that subset alone would."""

    counts: sparse.csc_matrix  # units x vocabulary: how often each term occurs in each unit
    lengths: np.ndarray  # tokens per unit
    vocab: dict[str, int]


def history_index(unit_tokens: Sequence[list[str]]) -> HistoryIndex:
    # Columns in the order terms first occur; built with dict and numpy passes rather than a
    # Python step per token (a ~102k-token history holds ~40,000 tokens).
    flat = [t for toks in unit_tokens for t in toks]
    vocab = {t: i for i, t in enumerate(dict.fromkeys(flat))}
    cols = np.fromiter(map(vocab.__getitem__, flat), dtype=np.int64, count=len(flat))
    lengths = np.array([len(t) for t in unit_tokens], dtype=np.int64)
    rows = np.repeat(np.arange(len(unit_tokens), dtype=np.int64), lengths)
    counts = sparse.csc_matrix((np.ones(len(flat)), (rows, cols)), shape=(len(unit_tokens), max(len(vocab), 1)))
    counts.sum_duplicates()
    return HistoryIndex(counts, lengths.astype(np.float64), vocab)


def subset_scores(index: HistoryIndex, rows: Sequence[int], query: list[str],
                  k1: float = 1.5, b: float = 0.75) -> np.ndarray:
    """BM25 (the Lucene variant bm25s computes, its defaults k1=1.5, b=0.75) of the units at ``rows``
    for the ``query`` tokens, with IDF and the mean length taken over those units only — the
    scores an index of the subset would give (tests/test_retrieve.py checks them against bm25s's).

    The restore grid ranks each question's retained units once per policy × budget × seed cell;
    indexing each cell's subset anew cost two-thirds of notebook 25's retrieval time, where this
    reads the few query columns of one matrix built per history. Scores are float64 (bm25s's are
    float32), so units that tie in bm25s by rounding may be ordered by their exact scores here."""
    rows = np.asarray(rows, dtype=np.int64)
    scores = np.zeros(len(rows), dtype=np.float64)
    terms = [index.vocab[t] for t in query if t in index.vocab]
    if not len(rows) or not terms:
        return scores
    tf = index.counts[:, terms].toarray()[rows]  # subset x query terms, a query term once per occurrence
    lengths = index.lengths[rows]
    avg = lengths.mean()
    if avg == 0:
        return scores
    df = (tf > 0).sum(axis=0)
    idf = np.log(1 + (len(rows) - df + 0.5) / (df + 0.5))
    norm = k1 * (1 - b + b * lengths / avg)
    return (idf * tf / (tf + norm[:, None])).sum(axis=1)


def best_first(scores: Sequence[float], recency: Sequence[int]) -> list[int]:
    """Positions of `scores`, best first; ties: the higher `recency` (the newer) first.

    The tie-break is explicit because a library's top-k (bm25s's, numpy's argpartition) leaves
    the order of equal scores to the CPU's sort kernels: the same query would retrieve other
    units on a machine with other SIMD instructions."""
    return sorted(range(len(scores)), key=lambda j: (-scores[j], -recency[j]))


def rank(units: Sequence[Unit], retained: Iterable[str], question: str,
         index: HistoryIndex | None = None) -> list[str]:
    """Retained unit ids, best BM25 match first (IDF over the retained units), ties: newer first.

    ``index`` may pass ``history_index(tokenize([u.text for u in units]))`` built once per history
    (`tokenize_lines` gives the same tokens, each distinct text tokenized once).
    """
    keep = set(retained)
    idx = [i for i, u in enumerate(units) if u.unit_id in keep]
    if not idx:
        return []
    index = index if index is not None else history_index(tokenize_lines([[u.text] for u in units]))
    scores = subset_scores(index, idx, tokenize_lines([[question]])[0])
    order = best_first(scores, [units[i].order for i in idx])
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


def placebo(units: Sequence[Unit], context: Iterable[str]) -> list[str]:
    """The placement placebo of an injected ``context`` (the restore's): every gold unit in it is
    replaced, one for one, by a non-gold stand-in from where that gold unit sat; the context's
    non-gold units stay as they are. Returns ids in chronological order.

    The stand-in for a gold unit g is a non-gold unit of the whole history (evicted or not: like
    the restore, the placebo reinstates from the full history) that is neither in the context
    nor standing in for another gold unit: of g's own session's such turns, the one closest to
    g in tokens (ties: nearest to g, then the older); only when g's session has none left (a
    session that is all gold), the unit nearest to g in chronological order (ties: the older).

    So the placebo has the restore's non-gold snippets, as many snippets as the restore, each
    stand-in from its gold unit's place (its session where possible, so rendered with the same
    date: the paper's "old chronological placement"), about the gold's tokens, and no gold at all. Stand-ins are non-annotated, not
    guaranteed irrelevant: another turn of an evidence session may still bear on the question,
    which is why the paper reads the placebo's flips as a bound on presentation plus
    unannotated evidence, not as presentation alone.
    """
    by_id = {u.unit_id: u for u in units}
    ctx = list(dict.fromkeys(context))
    taken = set(ctx)
    out = [i for i in ctx if not by_id[i].is_gold]
    pool = [u for u in units if not u.is_gold]
    for g in chronological(by_id, [i for i in ctx if by_id[i].is_gold]):
        free = [u for u in pool if u.unit_id not in taken]
        same = [u for u in free if u.session_id == g.session_id]
        near = same or _neighbourhood(free, g)
        if not near:
            continue  # a history with no non-gold unit left: nothing can stand in
        u = min(near, key=lambda u: (abs(u.tokens - g.tokens), abs(u.order - g.order), u.order))
        out.append(u.unit_id)
        taken.add(u.unit_id)
    return [u.unit_id for u in chronological(by_id, out)]


def _neighbourhood(free: list[Unit], g: Unit) -> list[Unit]:
    """The ``PLACEBO_NEIGHBOURS`` free units nearest to g, widened (doubling) until it holds one
    within half of g's tokens: a stand-in a few turns further away distorts presentation less
    than one several times the gold's size (chit-chat turns next to evidence can be long)."""
    by_distance = sorted(free, key=lambda u: (abs(u.order - g.order), u.order))
    w = PLACEBO_NEIGHBOURS
    while w < len(by_distance) and not any(
            abs(u.tokens - g.tokens) <= max(0.5 * g.tokens, 3) for u in by_distance[:w]):
        w *= 2
    return by_distance[:w]


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
