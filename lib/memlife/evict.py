"""The token-budgeted memory store and its eviction policies.

A history's units are ingested oldest first; whenever the retained tokens exceed the budget,
the policy picks one retained unit (the new one included) to evict, until the store fits.
A unit larger than the whole budget is therefore evicted on arrival. Policies:

- ``fifo`` — the oldest retained unit.
- ``random`` — a uniformly random retained unit; the generator is seeded by (seed, question).
- ``redundancy`` — the retained unit most redundant with what else is retained: the highest
  cosine similarity between its TF-IDF vector and any other retained unit's (ties: the oldest,
  so of two duplicates the newer copy survives). TF-IDF (scikit-learn, English stop words,
  sublinear tf) is fitted once on the question's whole history: the weights describe the
  history's vocabulary and never see the question.
- ``importance`` — the unit with the lowest LLM importance score (paper's prompt, 1–10, see
  :mod:`memlife.restore.prompts`), ties: the oldest. Scores depend on the unit text only.
- ``no_evict`` — keeps everything (the budget is ignored; its row reports the whole history).
- ``control`` — the deliberately destructive control. It starts from the ``random`` policy's
  outcome (same seed and budget), whose expected per-unit eviction probability is
  p = evicted units / units. It then evicts further gold units the random run kept until the
  question has lost round(min(1, 3p) × n_gold) gold units (the fractional part rounded by the
  seeded generator), and refills the freed room with the most recently evicted non-gold units
  that fit. Its expected gold-eviction rate is therefore 3× the random baseline's, capped at 1:
  when the baseline evicts a third of the history or more, the control evicts every gold unit.
  It uses the gold labels, which is what makes it a control and not a policy.
"""
from __future__ import annotations

import hashlib
import heapq
import random
from collections import deque
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import numpy as np

from memlife.units import Unit

POLICIES = ("fifo", "random", "redundancy", "importance", "no_evict", "control")
BASELINE_POLICIES = ("fifo", "random", "redundancy", "importance")
# Policies whose outcome does not depend on the seed (the paper runs them at seed 0 only).
DETERMINISTIC_POLICIES = ("fifo", "redundancy", "importance", "no_evict")
CONTROL_MULTIPLIER = 3.0


@dataclass(frozen=True)
class Eviction:
    question_id: str
    policy: str
    budget: int | None
    seed: int
    retained: tuple[str, ...]  # unit ids, oldest first
    evicted: tuple[str, ...]  # unit ids, in eviction order
    retained_tokens: int
    n_gold: int
    n_gold_evicted: int


def policy_rng(seed: int, question_id: str, policy: str) -> random.Random:
    """A generator that depends only on (seed, question, policy), never on call order."""
    digest = hashlib.sha256(f"{policy}:{seed}:{question_id}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def _stream(units: Sequence[Unit], budget: int, add: Callable[[int], None],
            victim: Callable[[], int]) -> list[int]:
    """Ingest units in order; evict per `victim` while over budget. Returns evicted indices."""
    total = 0
    evicted: list[int] = []
    for i, u in enumerate(units):
        add(i)
        total += u.tokens
        while total > budget:
            v = victim()
            total -= units[v].tokens
            evicted.append(v)
    return evicted


def _fifo(units: Sequence[Unit], budget: int) -> list[int]:
    q: deque[int] = deque()
    return _stream(units, budget, q.append, q.popleft)


def _random(units: Sequence[Unit], budget: int, rng: random.Random) -> list[int]:
    pool: list[int] = []

    def victim() -> int:
        j = rng.randrange(len(pool))
        pool[j], pool[-1] = pool[-1], pool[j]  # swap-remove keeps the draw O(1)
        return pool.pop()

    return _stream(units, budget, pool.append, victim)


def tfidf_similarity(units: Sequence[Unit]) -> np.ndarray:
    """Dense cosine-similarity matrix of the units' TF-IDF vectors (diagonal set to -inf)."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    texts = [u.text for u in units]
    try:
        X = TfidfVectorizer(stop_words="english", sublinear_tf=True).fit_transform(texts)
    except ValueError:  # every text is empty or stop words: nothing is similar to anything
        S = np.zeros((len(units), len(units)), dtype=np.float32)
    else:
        S = (X @ X.T).toarray().astype(np.float32)  # rows are L2-normalised: dot = cosine
    np.fill_diagonal(S, -np.inf)
    return S


def _redundancy(units: Sequence[Unit], budget: int, S: np.ndarray) -> list[int]:
    n = len(units)
    retained = np.zeros(n, dtype=bool)
    best = np.full(n, -np.inf, dtype=np.float32)  # max similarity to another retained unit
    partner = np.full(n, -1, dtype=np.int64)

    def add(j: int) -> None:
        idx = np.flatnonzero(retained)
        if idx.size:
            col = S[j, idx]
            better = col > best[idx]
            best[idx[better]] = col[better]
            partner[idx[better]] = j
            k = int(np.argmax(col))
            best[j], partner[j] = col[k], idx[k]
        retained[j] = True

    def victim() -> int:
        score = np.where(retained, np.where(np.isfinite(best), best, -1.0), -np.inf)
        v = int(np.argmax(score))  # first maximum = the oldest among ties
        retained[v] = False
        best[v], partner[v] = -np.inf, -1
        for r in np.flatnonzero(retained & (partner == v)):
            idx = np.flatnonzero(retained)
            idx = idx[idx != r]
            if idx.size:
                row = S[r, idx]
                k = int(np.argmax(row))
                best[r], partner[r] = row[k], idx[k]
            else:
                best[r], partner[r] = -np.inf, -1
        return v

    return _stream(units, budget, add, victim)


def _importance(units: Sequence[Unit], budget: int, scores: Mapping[str, float]) -> list[int]:
    heap: list[tuple[float, int]] = []
    missing = [u.unit_id for u in units if u.text not in scores]
    if missing:
        raise KeyError(f"importance scores missing for {len(missing)} unit(s), e.g. {missing[0]}")
    return _stream(units, budget, lambda j: heapq.heappush(heap, (scores[units[j].text], j)),
                   lambda: heapq.heappop(heap)[1])


def _control(units: Sequence[Unit], budget: int, rng: random.Random,
             base_evicted: list[int]) -> list[int]:
    n = len(units)
    p = len(base_evicted) / n if n else 0.0
    gold = [i for i, u in enumerate(units) if u.is_gold]
    evicted_set = set(base_evicted)
    target_float = min(1.0, CONTROL_MULTIPLIER * p) * len(gold)
    target = int(target_float) + (rng.random() < target_float - int(target_float))
    already = sum(i in evicted_set for i in gold)
    kept_gold = [i for i in gold if i not in evicted_set]
    rng.shuffle(kept_gold)
    extra = kept_gold[: max(0, target - already)]
    evicted = list(base_evicted) + extra
    evicted_set.update(extra)
    # Refill the room the extra gold evictions freed, newest evicted non-gold first.
    room = budget - sum(units[i].tokens for i in range(n) if i not in evicted_set)
    for i in reversed(base_evicted):
        if not units[i].is_gold and units[i].tokens <= room:
            evicted_set.discard(i)
            room -= units[i].tokens
    return [i for i in evicted if i in evicted_set]


def evict(units: Sequence[Unit], policy: str, budget: int | None, seed: int = 0, *,
          question_id: str = "", importance: Mapping[str, float] | None = None,
          similarity: np.ndarray | None = None) -> Eviction:
    """Run one policy over one history. ``importance`` maps unit text to score (importance
    policy); ``similarity`` may pass a precomputed :func:`tfidf_similarity` (redundancy)."""
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}; expected one of {POLICIES}")
    if policy != "no_evict" and (budget is None or budget < 0):
        raise ValueError(f"policy {policy!r} needs a non-negative budget, got {budget!r}")
    if policy == "no_evict":
        ev: list[int] = []
    elif policy == "fifo":
        ev = _fifo(units, budget)
    elif policy == "random":
        ev = _random(units, budget, policy_rng(seed, question_id, "random"))
    elif policy == "redundancy":
        ev = _redundancy(units, budget, tfidf_similarity(units) if similarity is None else similarity)
    elif policy == "importance":
        if importance is None:
            raise ValueError("the importance policy needs `importance` scores (see score_importance)")
        ev = _importance(units, budget, importance)
    else:  # control
        base = _random(units, budget, policy_rng(seed, question_id, "random"))
        ev = _control(units, budget, policy_rng(seed, question_id, "control"), base)
    gone = set(ev)
    kept = [u for i, u in enumerate(units) if i not in gone]
    return Eviction(
        question_id=question_id,
        policy=policy,
        budget=budget,  # no_evict keeps its nominal budget so each budget has a reference cell
        seed=seed,
        retained=tuple(u.unit_id for u in kept),
        evicted=tuple(units[i].unit_id for i in ev),
        retained_tokens=sum(u.tokens for u in kept),
        n_gold=sum(u.is_gold for u in units),
        n_gold_evicted=sum(units[i].is_gold for i in ev),
    )


def evict_grid(histories: Mapping[str, Sequence[Unit]], policies: Sequence[str], budgets: Sequence[int],
               seeds: Sequence[int], importance: Mapping[str, float] | None = None) -> list[Eviction]:
    """Every (question, policy, budget, seed) cell. Seed-independent policies run at the first
    seed only (the paper: "deterministic policies use seed 0"); random and control at each seed."""
    out = []
    for qid in sorted(histories):
        units = histories[qid]
        sim = tfidf_similarity(units) if "redundancy" in policies else None
        for policy in policies:
            for budget in budgets:
                for seed in (seeds[:1] if policy in DETERMINISTIC_POLICIES else seeds):
                    out.append(evict(units, policy, budget, seed, question_id=qid,
                                     importance=importance, similarity=sim))
    return out


EVICTION_COLUMNS = ("question_id", "policy", "budget", "seed", "retained", "evicted",
                    "retained_tokens", "n_gold", "n_gold_evicted")


def to_frame(evictions: Sequence[Eviction]):
    """One row per eviction, unit-id lists included (what was evicted, per question)."""
    import pandas as pd

    rows = [{"question_id": e.question_id, "policy": e.policy, "budget": e.budget, "seed": e.seed,
             "retained": list(e.retained), "evicted": list(e.evicted),
             "retained_tokens": e.retained_tokens, "n_gold": e.n_gold,
             "n_gold_evicted": e.n_gold_evicted} for e in evictions]
    return pd.DataFrame(rows, columns=list(EVICTION_COLUMNS))


def from_frame(df) -> list[Eviction]:
    return [Eviction(question_id=r.question_id, policy=r.policy, budget=int(r.budget), seed=int(r.seed),
                     retained=tuple(r.retained), evicted=tuple(r.evicted),
                     retained_tokens=int(r.retained_tokens), n_gold=int(r.n_gold),
                     n_gold_evicted=int(r.n_gold_evicted)) for r in df.itertuples(index=False)]


# ---------------------------------------------------------------------------------------------
# LLM importance scores
# ---------------------------------------------------------------------------------------------
IMPORTANCE_NEUTRAL = 5.5  # the midpoint of 1..10, used when a reply holds no score (counted)


def parse_importance(text: str) -> int | None:
    """The first integer 1..10 in a reply, or None."""
    import re

    for m in re.finditer(r"\d+", text or ""):
        v = int(m.group())
        if 1 <= v <= 10:
            return v
    return None


def score_importance(texts: Sequence[str], client, *, desc: str = "importance") -> tuple[dict[str, float], int]:
    """Importance score per distinct text through the "scorer" role client, and the number of
    replies that held no score (given :data:`IMPORTANCE_NEUTRAL`). Sorted distinct texts make
    the request order, and so the llm cache keys, independent of how units were gathered."""
    from memlife.restore import prompts

    distinct = sorted(set(texts))
    reqs = [dict(messages=prompts.importance_messages(t), max_tokens=prompts.IMPORTANCE_MAX_TOKENS,
                 temperature=0.0) for t in distinct]
    replies = client.complete_many(reqs, desc=desc) if reqs else []
    out: dict[str, float] = {}
    invalid = 0
    for t, c in zip(distinct, replies):
        v = parse_importance(c.text)
        if v is None:
            invalid += 1
            out[t] = IMPORTANCE_NEUTRAL
        else:
            out[t] = float(v)
    return out, invalid
