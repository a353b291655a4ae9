"""What the restore audit's reader is shown: retrieval over the retained units, and the contexts.

Units are ranked by BM25 (`memlife.retrieve`) against the question over what eviction retained,
ties broken by recency (newer first). Regimes (the paper's Appendix A):

- ``topk`` — the k best-ranked retained units.
- ``forced_gold`` — :func:`inject` of the surviving gold: the gold that eviction kept, then
  ranked retained units within what remains of the injection cap.

The restore arm (:mod:`memlife.restore.reading.arms`) is :func:`inject` of the *full* gold with the same
ranking and cap, so when eviction kept every gold unit, forced-gold and restore build the very
same context and forced-gold recoverable errors are zero by construction. The restore-tightness
ablation's placebo (:func:`placebo`) is the restore's context with its gold swapped for non-gold
snippets from the gold's chronological place.

Contexts are rendered oldest first, one line per unit, ``[date] role: text``; session ids
are never shown.
"""
from __future__ import annotations

from typing import Iterable, Sequence

from memlife import retrieve
from memlife.restore.data.units import Unit

REGIMES = ("topk", "forced_gold")
PLACEBO_NEIGHBOURS = 6  # how far a placebo stand-in may sit from its gold unit outside its session


def rank(units: Sequence[Unit], retained: Iterable[str], question: str,
         index: retrieve.HistoryIndex | None = None) -> list[str]:
    """Retained unit ids, best BM25 match first (IDF over the retained units), ties: newer first.

    ``index`` may pass ``history_index(tokenize([u.text for u in units]))`` built once per history
    (`tokenize_lines` gives the same tokens, each distinct text tokenized once).
    """
    keep = set(retained)
    idx = [i for i, u in enumerate(units) if u.unit_id in keep]
    if not idx:
        return []
    index = index if index is not None else retrieve.history_index(retrieve.tokenize_lines([[u.text] for u in units]))
    scores = retrieve.subset_scores(index, idx, retrieve.tokenize_lines([[question]])[0])
    order = retrieve.best_first(scores, [units[i].order for i in idx])
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
