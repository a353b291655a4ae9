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
  :mod:`memlife.restore.eviction.importance`), ties: the oldest. Scores depend on the unit text only.
- ``no_evict`` — keeps everything (the budget is ignored; its row reports the whole history).
- ``control`` — the deliberately destructive control. It starts from the ``random`` policy's
  run (same seed and budget). Along that run each unit's probability r of being evicted by
  random follows from the store sizes at each eviction after it arrived
  (:func:`random_eviction_probability`; older units face more draws, so r is very uneven).
  Each gold unit that random kept is then evicted with one probability λ, chosen so that the
  expected number of gold evictions is three times random's: Σr + λΣ(1 - r) = 3Σr, the sums
  running over every gold unit of the dataset at that budget and seed
  (:func:`control_mixing`; λ is capped at 1, so where random already loses a third of the
  gold or more, the control loses all of it). A per-unit min(1, 3r) would fall short of 3×
  because of the cap on the few old, likely-evicted gold units. The room freed is refilled
  with the most recently evicted non-gold units that fit. It uses the gold labels, which is
  what makes it a control and not a policy.

Each is a :class:`PolicySpec` in a registry (:func:`registered_policies`) that declares what the
policy needs (a seed, the LLM importance scores, the TF-IDF similarity) and its role (evicting,
reference, control); the grid, the controls and notebook 23's family of tests follow from the
declarations. A policy of one's own is a spec (or a plain function) in one's own module, named
"module:function" in a profile's ``policies`` (:func:`resolve_policies`; docs/extending.md).
"""
from __future__ import annotations

import hashlib
import heapq
import random
from collections import deque
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Mapping, Sequence

import numpy as np

from memlife.restore.data.units import Unit

# The policy vocabulary, defined here once: records carry these names (``Eviction.policy``) and
# the restore analyses, figures, controls and tests import them rather than spell them again,
# so the destructive control cannot go missing from an analysis under a second name.
FIFO = "fifo"
RANDOM = "random"
REDUNDANCY = "redundancy"
IMPORTANCE = "importance"
NO_EVICT = "no_evict"
CONTROL = "control"  # the paper's "deliberately destructive control"
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


def _random(units: Sequence[Unit], budget: int, rng: random.Random,
            events: list[tuple[int, int]] | None = None) -> list[int]:
    """Uniform eviction; ``events`` (if given) receives (arrival index, store size) per eviction."""
    pool: list[int] = []
    arrived = [-1]

    def add(j: int) -> None:
        arrived[0] = j
        pool.append(j)

    def victim() -> int:
        if events is not None:
            events.append((arrived[0], len(pool)))
        j = rng.randrange(len(pool))
        pool[j], pool[-1] = pool[-1], pool[j]  # swap-remove keeps the draw O(1)
        return pool.pop()

    return _stream(units, budget, add, victim)


def random_eviction_probability(n_units: int, events: Sequence[tuple[int, int]]) -> list[float]:
    """Each unit's probability of being evicted by the random policy along a realized run: one
    minus the product, over the evictions after the unit arrived, of (1 - 1 / store size).
    Older units face more draws, so this is far from uniform in the unit's position."""
    surv_after = [1.0] * (n_units + 1)  # survival over events whose arrival index >= i
    by_arrival: dict[int, float] = {}
    for a, size in events:
        by_arrival[a] = by_arrival.get(a, 1.0) * (1.0 - 1.0 / size)
    for i in range(n_units - 1, -1, -1):
        surv_after[i] = surv_after[i + 1] * by_arrival.get(i, 1.0)
    return [1.0 - surv_after[i] for i in range(n_units)]


_TFIDF_STOP_WORDS = "english"


@lru_cache(maxsize=1)
def _tfidf_analyzer():
    from sklearn.feature_extraction.text import TfidfVectorizer

    return TfidfVectorizer(stop_words=_TFIDF_STOP_WORDS).build_analyzer()


@lru_cache(maxsize=1 << 17)
def _tfidf_terms(text: str) -> tuple[str, ...]:
    # The reconstructed histories share their filler sessions: each distinct turn is lower-cased,
    # split and stripped of stop words once per process, by the vectorizer's own analyzer.
    return tuple(_tfidf_analyzer()(text))


def tfidf_similarity(units: Sequence[Unit]) -> np.ndarray:
    """Dense cosine-similarity matrix of the units' TF-IDF vectors (diagonal set to -inf)."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    texts = [u.text for u in units]
    try:
        # TfidfVectorizer(stop_words="english") with its analysis cached per text: the same terms
        X = TfidfVectorizer(analyzer=_tfidf_terms, sublinear_tf=True).fit_transform(texts)
    except ValueError:  # every text is empty or stop words: nothing is similar to anything
        S = np.zeros((len(units), len(units)), dtype=np.float32)
    else:
        P = X @ X.T  # rows are L2-normalised: dot = cosine
        P.sum_duplicates()
        # Cast the nonzeros, then densify: the same float32 values as casting the dense float64
        # matrix, without materialising it (twice the size, and most of this function's time).
        S = P.astype(np.float32).toarray()
    np.fill_diagonal(S, -np.inf)
    return S


def _redundancy(units: Sequence[Unit], budget: int, S: np.ndarray) -> list[int]:
    n = len(units)
    retained = np.zeros(n, dtype=bool)
    best = np.full(n, -np.inf, dtype=np.float32)  # max similarity to another retained unit
    partner = np.full(n, -1, dtype=np.int64)
    # The victim's key, kept up to date: best for a retained unit (-1 while it has no partner),
    # -inf for any other; the victim is its first maximum (the oldest among ties).
    score = np.full(n, -np.inf, dtype=np.float32)

    def add(j: int) -> None:
        idx = np.flatnonzero(retained)
        if idx.size:
            col = S[j, idx]
            better = col > best[idx]
            changed = idx[better]
            best[changed] = col[better]
            partner[changed] = j
            score[changed] = best[changed]
            k = int(np.argmax(col))
            best[j], partner[j] = col[k], idx[k]
        retained[j] = True
        score[j] = best[j] if np.isfinite(best[j]) else -1.0

    def victim() -> int:
        v = int(np.argmax(score))  # first maximum = the oldest among ties
        retained[v] = False
        best[v], partner[v], score[v] = -np.inf, -1, -np.inf
        orphans = np.flatnonzero(partner == v)  # retained only: an evicted unit's partner is -1
        if orphans.size:
            idx = np.flatnonzero(retained)
            if idx.size > 1:
                # S's diagonal is -inf and every other entry finite, so a row's maximum over all
                # retained units is its maximum over the others, at the same first position.
                rows = S[np.ix_(orphans, idx)]
                k = np.argmax(rows, axis=1)
                best[orphans] = rows[np.arange(len(orphans)), k]
                partner[orphans] = idx[k]
            else:  # the orphan is the only retained unit
                best[orphans], partner[orphans] = -np.inf, -1
            score[orphans] = np.where(np.isfinite(best[orphans]), best[orphans], -1.0)
        return v

    return _stream(units, budget, add, victim)


def _importance(units: Sequence[Unit], budget: int, scores: Mapping[str, float]) -> list[int]:
    heap: list[tuple[float, int]] = []
    missing = [u.unit_id for u in units if u.text not in scores]
    if missing:
        raise KeyError(f"importance scores missing for {len(missing)} unit(s), e.g. {missing[0]}")
    return _stream(units, budget, lambda j: heapq.heappush(heap, (scores[units[j].text], j)),
                   lambda: heapq.heappop(heap)[1])


def control_mixing(gold_probabilities: Sequence[float]) -> float:
    """The probability λ with which the control evicts each gold unit the random run kept, so
    that the expected gold evictions, Σr + λ Σ(1 - r), equal 3 Σr (λ capped at 1)."""
    r_sum = sum(gold_probabilities)
    keep_sum = sum(1.0 - r for r in gold_probabilities)
    if keep_sum <= 0.0:
        return 1.0
    return min(1.0, (CONTROL_MULTIPLIER - 1.0) * r_sum / keep_sum)


def _random_run(units: Sequence[Unit], budget: int, seed: int, question_id: str):
    """(evicted indices, each gold unit's random-eviction probability) of the random policy."""
    events: list[tuple[int, int]] = []
    base = _random(units, budget, policy_rng(seed, question_id, RANDOM), events)
    r = random_eviction_probability(len(units), events)
    return base, [r[i] for i, u in enumerate(units) if u.is_gold]


def _control(units: Sequence[Unit], budget: int, rng: random.Random, base_evicted: list[int],
             mixing: float) -> list[int]:
    evicted_set = set(base_evicted)
    extra = [i for i, u in enumerate(units)
             if u.is_gold and i not in evicted_set and rng.random() < mixing]
    evicted = list(base_evicted) + extra
    evicted_set.update(extra)
    # Refill the room the extra gold evictions freed, newest evicted non-gold first.
    room = budget - sum(units[i].tokens for i in range(len(units)) if i not in evicted_set)
    for i in reversed(base_evicted):
        if not units[i].is_gold and units[i].tokens <= room:
            evicted_set.discard(i)
            room -= units[i].tokens
    return [i for i in evicted if i in evicted_set]


# ---------------------------------------------------------------------------------------------
# The policy registry
# ---------------------------------------------------------------------------------------------
# A policy's role decides where the analyses put it: an evicting policy is one of the cells the
# restore decomposition tests (notebook 23's Holm family); the reference keeps everything and
# ignores the budget; a control may use the gold labels, which is what makes it a control.
EVICTING, REFERENCE, CONTROL_ROLE = "evicting", "reference", "control"
ROLES = (EVICTING, REFERENCE, CONTROL_ROLE)


@dataclass(frozen=True)
class PolicyContext:
    """What a policy may read besides the units and the budget."""

    seed: int
    question_id: str
    importance: Mapping[str, float] | None = None  # unit text -> LLM importance score (needs_model)
    similarity: np.ndarray | None = None  # tfidf_similarity(units), when precomputed (uses_similarity)
    control_mix: float | None = None  # the destructive control's λ
    random_evicted: Sequence[int] | None = None  # the random policy's run at this budget and seed

    def rng(self, policy: str) -> random.Random:
        """A generator for a seeded policy: depends on (seed, question, policy) only."""
        return policy_rng(self.seed, self.question_id, policy)


@dataclass(frozen=True)
class PolicySpec:
    """An eviction policy and what it needs. ``fn(units, budget, ctx)`` returns the indices of
    the units it evicts, in eviction order (:func:`stream` and :func:`by_priority` build that
    from a victim rule); ``ctx`` is a :class:`PolicyContext`.

    ``seeded``: its outcome depends on the seed, so it runs at every seed (the others at the
    first only: the paper's "deterministic policies use seed 0"). ``needs_model``: it reads
    ``ctx.importance``, the scorer's LLM importance scores (a model call per distinct unit text;
    a run without such a policy asks none, and reference subjects cannot run it).
    ``uses_similarity``: it reads ``ctx.similarity`` (computed once per question). ``role``: one
    of :data:`ROLES`."""

    name: str
    fn: Callable[[Sequence[Unit], int | None, PolicyContext], Sequence[int]]
    seeded: bool = False
    needs_model: bool = False
    uses_similarity: bool = False
    role: str = EVICTING
    builtin: bool = False  # the paper's: its results are trusted without the extra checks

    def __post_init__(self):
        if self.role not in ROLES:
            raise ValueError(f"policy {self.name!r}: role {self.role!r} is not one of {ROLES}")
        if not self.name or ":" in self.name:
            raise ValueError(f"policy name {self.name!r}: records carry it, so it is a plain non-empty name")


def stream(units: Sequence[Unit], budget: int, add: Callable[[int], None], victim: Callable[[], int]) -> list[int]:
    """Ingest units oldest first (``add(i)``); while the store is over ``budget``, evict
    ``victim()`` (an index ``add`` was given and not yet evicted). Returns the evicted indices."""
    return _stream(units, budget, add, victim)


def by_priority(units: Sequence[Unit], budget: int, key: Callable[[Unit], float]) -> list[int]:
    """The eviction that always takes the retained unit with the lowest ``key(unit)``, the oldest
    among ties (LLM-importance is this with key = the unit's score)."""
    heap: list[tuple[float, int]] = []
    return _stream(units, budget, lambda j: heapq.heappush(heap, (key(units[j]), j)), lambda: heapq.heappop(heap)[1])


def _no_evict_fn(units, budget, ctx):
    return []


def _fifo_fn(units, budget, ctx):
    return _fifo(units, budget)


def _random_fn(units, budget, ctx):
    return _random(units, budget, ctx.rng(RANDOM))


def _redundancy_fn(units, budget, ctx):
    return _redundancy(units, budget, tfidf_similarity(units) if ctx.similarity is None else ctx.similarity)


def _importance_fn(units, budget, ctx):
    if ctx.importance is None:
        raise ValueError("the importance policy needs `importance` scores (see score_importance)")
    return _importance(units, budget, ctx.importance)


def _control_fn(units, budget, ctx):
    if ctx.random_evicted is not None and ctx.control_mix is not None:  # its random run at hand
        return _control(units, budget, ctx.rng(CONTROL), list(ctx.random_evicted), ctx.control_mix)
    base, r_gold = _random_run(units, budget, ctx.seed, ctx.question_id)
    mix = control_mixing(r_gold) if ctx.control_mix is None else ctx.control_mix
    return _control(units, budget, ctx.rng(CONTROL), base, mix)


# The paper's six, in its order.
_PAPER_SPECS = (
    PolicySpec(FIFO, _fifo_fn, builtin=True),
    PolicySpec(RANDOM, _random_fn, seeded=True, builtin=True),
    PolicySpec(REDUNDANCY, _redundancy_fn, uses_similarity=True, builtin=True),
    PolicySpec(IMPORTANCE, _importance_fn, needs_model=True, builtin=True),
    PolicySpec(NO_EVICT, _no_evict_fn, role=REFERENCE, builtin=True),
    PolicySpec(CONTROL, _control_fn, seeded=True, role=CONTROL_ROLE, builtin=True),
)
_REGISTRY: dict[str, PolicySpec] = {s.name: s for s in _PAPER_SPECS}

# The paper's set and its parts, named once and derived from the declarations above.
POLICIES = tuple(s.name for s in _PAPER_SPECS)  # paper order
BASELINE_POLICIES = tuple(s.name for s in _PAPER_SPECS if s.role == EVICTING)  # the evicting policies
# Policies whose outcome depends on the seed; the others run at the first seed only (the paper:
# "deterministic policies use seed 0").
SEEDED_POLICIES = tuple(s.name for s in _PAPER_SPECS if s.seeded)
DETERMINISTIC_POLICIES = tuple(p for p in POLICIES if p not in SEEDED_POLICIES)
# LLM-importance asks the scorer for a score per distinct unit text: a model call each. Every
# other policy needs no model (notebook 25's reference runs use those).
MODEL_FREE_POLICIES = tuple(s.name for s in _PAPER_SPECS if not s.needs_model)


def register_policy(spec: PolicySpec) -> PolicySpec:
    """Make ``spec`` known by its name (to :func:`evict`, :func:`evict_grid` and the analyses). A
    built-in name cannot be taken; registering a name again replaces the earlier spec (a module
    reloaded while its policy is being written)."""
    from memlife.base import plugins

    return plugins.register(_REGISTRY, spec, "policy")


def registered_policies() -> dict[str, PolicySpec]:
    """Every policy known in this process, by name: the paper's first, then those registered."""
    return dict(_REGISTRY)


def policy_spec(policy: "str | PolicySpec") -> PolicySpec:
    """The spec of a registered name (or ``policy`` itself, if a spec)."""
    if isinstance(policy, PolicySpec):
        return policy
    try:
        return _REGISTRY[policy]
    except KeyError:
        from memlife.base import plugins

        raise plugins.unknown("policy", policy, "evict.evict", _REGISTRY) from None


def resolve_policies(names: Sequence[str], where: str = "policies") -> list[PolicySpec]:
    """The specs a profile's list names: registered names, or "module:attr" references to a
    :class:`PolicySpec` or a plain function ``fn(units, budget, ctx)`` (then an evicting,
    unseeded, model-free policy named after the function), registered on the way. ``where``
    (the profile key) is named in every error, before any work is done."""
    from memlife.base import plugins

    return plugins.resolve(names, where, "policy", _REGISTRY, PolicySpec,
                           lambda fn, ref: PolicySpec(getattr(fn, "__name__", ref.rpartition(":")[2]), fn))


def paper_order(names) -> list[str]:
    """``names`` in the paper's order, any others after it by name."""
    names = set(names)
    return [p for p in POLICIES if p in names] + sorted(names - set(POLICIES))


def holm_family(names) -> list[str]:
    """The evicting policies among ``names`` (paper order): the restore decomposition's family of
    tests. A name this process has no spec for counts as evicting: it is one a run evicted with."""
    return [p for p in paper_order(names) if p not in _REGISTRY or _REGISTRY[p].role == EVICTING]


def is_paper_family(names) -> bool:
    """Whether ``names`` are exactly the paper's evicting policies (its "4 of 12" compares)."""
    return set(names) == set(BASELINE_POLICIES)


def evict(units: Sequence[Unit], policy: "str | PolicySpec", budget: int | None, seed: int = 0, *,
          question_id: str = "", importance: Mapping[str, float] | None = None,
          similarity: np.ndarray | None = None, control_mix: float | None = None,
          random_evicted: Sequence[int] | None = None) -> Eviction:
    """Run one policy (a registered name or a :class:`PolicySpec`) over one history.
    ``importance`` maps unit text to score (importance policy); ``similarity`` may pass a
    precomputed :func:`tfidf_similarity` (redundancy); ``control_mix`` the control's λ (default:
    calibrated on this question alone; :func:`evict_grid` calibrates it over the whole dataset
    per budget and seed); ``random_evicted`` the random policy's evicted indices at this budget
    and seed, which the control starts from, when they are at hand (with ``control_mix``: the run
    is not repeated)."""
    spec = policy_spec(policy)
    if spec.role != REFERENCE and (budget is None or budget < 0):
        raise ValueError(f"policy {spec.name!r} needs a non-negative budget, got {budget!r}")
    ctx = PolicyContext(seed=seed, question_id=question_id, importance=importance, similarity=similarity,
                        control_mix=control_mix, random_evicted=random_evicted)
    ev = spec.fn(units, budget, ctx)
    if not spec.builtin:
        ev = _checked(spec, units, budget, ev)
    gone = set(ev)
    kept = [u for i, u in enumerate(units) if i not in gone]
    return Eviction(
        question_id=question_id,
        policy=spec.name,
        budget=budget,  # no_evict keeps its nominal budget so each budget has a reference cell
        seed=seed,
        retained=tuple(u.unit_id for u in kept),
        evicted=tuple(units[i].unit_id for i in ev),
        retained_tokens=sum(u.tokens for u in kept),
        n_gold=sum(u.is_gold for u in units),
        n_gold_evicted=sum(units[i].is_gold for i in ev),
    )


def _checked(spec: "PolicySpec", units: Sequence[Unit], budget: int | None, evicted) -> list[int]:
    """A policy from outside the library returned indices of distinct units, and an evicting one
    left a store that fits: what every analysis downstream takes for granted."""
    ev = [int(i) for i in evicted]
    if any(not 0 <= i < len(units) for i in ev) or len(set(ev)) != len(ev):
        raise ValueError(f"policy {spec.name!r} must return distinct unit indices in 0..{len(units) - 1}, "
                         f"got {ev[:10]}")
    if spec.role != REFERENCE:
        gone = set(ev)
        left = sum(u.tokens for i, u in enumerate(units) if i not in gone)
        if left > budget:
            raise ValueError(f"policy {spec.name!r} kept {left} tokens over a budget of {budget}")
    return ev


def gold_random_probabilities(units: Sequence[Unit], question_id: str, budgets: Sequence[int],
                              seeds: Sequence[int]) -> list[list[float]]:
    """One question's share of the control's calibration (:func:`mixings_of`): per (budget, seed), budgets outer, each
    gold unit's probability of being evicted by the random policy's run."""
    return [_random_run(units, budget, seed, question_id)[1] for budget in budgets for seed in seeds]


def _gold_random_probabilities_job(job: tuple) -> list[list[float]]:
    return gold_random_probabilities(*job)


def mixings_of(per_question: Sequence[Sequence[Sequence[float]]], budgets: Sequence[int],
               seeds: Sequence[int]) -> dict[tuple[int, int], float]:
    """λ per (budget, seed) from every question's :func:`gold_random_probabilities`, questions in
    sorted order (the sums run in that order, so λ is the same to the last bit however computed)."""
    mixing: dict[tuple[int, int], float] = {}
    for i, (budget, seed) in enumerate((b, s) for b in budgets for s in seeds):
        r_all: list[float] = []
        for r in per_question:
            r_all += r[i]
        mixing[(budget, seed)] = control_mixing(r_all)
    return mixing


def evict_question(units: Sequence[Unit], question_id: str, policies: Sequence[str], budgets: Sequence[int],
                   seeds: Sequence[int], importance: Mapping[str, float] | None = None,
                   mixing: Mapping[tuple[int, int], float] | None = None) -> list[Eviction]:
    """One question's cells of :func:`evict_grid`, policies outer, then budgets, then seeds;
    ``mixing`` the control's λ per (budget, seed) (:func:`mixings_of`)."""
    mixing = mixing or {}
    specs = [policy_spec(p) for p in policies]
    sim = tfidf_similarity(units) if any(s.uses_similarity for s in specs) else None
    at = {u.unit_id: i for i, u in enumerate(units)}
    random_runs: dict[tuple[int, int], list[int]] = {}  # the control starts from the random policy's run
    out = []
    for policy in specs:
        for budget in budgets:
            for seed in (seeds if policy.seeded else seeds[:1]):
                e = evict(units, policy, budget, seed, question_id=question_id, importance=importance,
                          similarity=sim, control_mix=mixing.get((budget, seed)),
                          random_evicted=random_runs.get((budget, seed)) if policy.name == CONTROL else None)
                if policy.name == RANDOM:
                    random_runs[(budget, seed)] = [at[i] for i in e.evicted]
                out.append(e)
    return out


def _evict_question_job(job: tuple) -> list[Eviction]:
    return evict_question(*job)


def evict_grid(histories: Mapping[str, Sequence[Unit]], policies: Sequence[str], budgets: Sequence[int],
               seeds: Sequence[int], importance: Mapping[str, float] | None = None, *,
               workers: int | None = 1) -> list[Eviction]:
    """Every (question, policy, budget, seed) cell, questions in sorted order. Seed-independent
    policies run at the first seed only (the paper: "deterministic policies use seed 0"); random
    and control at each seed. ``workers`` processes share the questions (None: every core;
    :mod:`memlife.base.parallel`): the control's λ is calibrated over the whole dataset first
    (:func:`gold_random_probabilities`, :func:`mixings_of`), then each question's cells are
    computed on their own (:func:`evict_question`), so the result is the same for any number.
    ``policies`` are registered names or :class:`PolicySpec` s; the workers are sent the specs,
    so a policy from outside the library runs in them too (its function must be importable)."""
    from memlife.base import parallel

    budgets, seeds = list(budgets), list(seeds)
    policies = [policy_spec(p) for p in policies]
    qids = sorted(histories)

    def scores(qid: str) -> Mapping[str, float] | None:
        if importance is None or not any(p.needs_model for p in policies):
            return None  # no other policy reads the scores
        if parallel.n_workers(workers) == 1:
            return importance
        # A worker is sent its question's scores only, not the whole dataset's (same lookups).
        return {u.text: importance[u.text] for u in histories[qid] if u.text in importance}

    with parallel.pool(min(parallel.n_workers(workers), max(1, len(qids)))) as pmap:
        mixing = (mixings_of(pmap(_gold_random_probabilities_job, [(histories[qid], qid, budgets, seeds)
                                                                   for qid in qids]), budgets, seeds)
                  if any(p.name == CONTROL for p in policies) else {})
        per_q = pmap(_evict_question_job, [(histories[qid], qid, policies, budgets, seeds, scores(qid), mixing)
                                           for qid in qids], desc="questions evicted")
    return [e for evs in per_q for e in evs]


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
    from memlife.restore.eviction import importance

    distinct = sorted(set(texts))
    reqs = [dict(messages=importance.importance_messages(t), max_tokens=importance.IMPORTANCE_MAX_TOKENS,
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
