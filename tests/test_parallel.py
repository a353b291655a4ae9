"""The restore grid over a process pool (memlife.base.parallel) is the serial grid, exactly: the same
evictions, the same reads in the same order, the same plan; and the speedups that came with it
(redundancy's victim search, the float32 similarity, memoized rankings and contexts) compute what
the plain versions below compute."""
import hashlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memlife import longmem
from memlife.base import parallel
from memlife.restore.data import units
from memlife.restore.eviction import evict
from memlife.restore.reading import arms
from memlife.restore.analyses import controls
from memlife.restore.data.units import Unit

import longmem_templates

HISTORY_TOKENS = 1500


def _square(x):
    return x * x


def test_map_ordered_keeps_the_items_order_for_any_number_of_workers():
    items = list(range(23))
    assert parallel.map_ordered(_square, items, workers=1) == [x * x for x in items]
    assert parallel.map_ordered(_square, items, workers=2) == [x * x for x in items]
    assert parallel.map_ordered(_square, [], workers=2) == []
    assert parallel.n_workers(None) >= 1 and parallel.n_workers(3) == 3
    with pytest.raises(ValueError):
        parallel.n_workers(-1)


@pytest.fixture(scope="module")
def small():
    cfg = controls.GridConfig(n_questions=8, history_tokens=HISTORY_TOKENS,
                              budgets=arms.scaled_budgets(HISTORY_TOKENS), seeds=[0, 1], k=12, restore_cap=300,
                              workers=1)
    return cfg, controls.build_grid(cfg)


def test_the_parallel_grid_is_the_serial_grid(small):
    cfg, serial = small
    cfg2 = controls.GridConfig(**{**cfg.__dict__, "workers": 2})
    par = controls.build_grid(cfg2)
    assert par.evictions == serial.evictions
    assert par.reads == serial.reads
    assert par.plan.distinct_prompts == serial.plan.distinct_prompts
    assert par.histories == serial.histories and list(par.histories) == list(serial.histories)


def test_the_grid_is_evict_grid_then_plan_grid(small):
    """build_grid's per-question pool is notebooks 21-22's two calls, serial or not."""
    cfg, grid = small
    for workers in (1, 2):
        evs = evict.evict_grid(grid.histories, cfg.policies, cfg.budgets, cfg.seeds, workers=workers)
        assert evs == grid.evictions
        reads, plan = arms.plan_grid(grid.questions, evs, k=cfg.k, restore_cap=cfg.restore_cap,
                                         ablation_arms=cfg.ablation_arms, workers=workers)
        assert reads == grid.reads and plan.distinct_prompts == grid.plan.distinct_prompts


def test_evict_grid_with_importance_scores_is_the_same_over_workers():
    qs = [longmem.to_question(r) for r in longmem_templates.build(4, 800, seed=3)]
    hist = {q.question_id: units.units_of(q) for q in qs}
    imp = {u.text: float(hashlib.sha256(u.text.encode()).digest()[0] % 10 + 1) for us in hist.values() for u in us}
    serial = evict.evict_grid(hist, evict.POLICIES, [100, 400], [0, 1], imp)
    assert evict.evict_grid(hist, evict.POLICIES, [100, 400], [0, 1], imp, workers=2) == serial


# ----------------------------------------------------------------------------- reference versions


def _tfidf_reference(us):
    from sklearn.feature_extraction.text import TfidfVectorizer

    try:
        X = TfidfVectorizer(stop_words="english", sublinear_tf=True).fit_transform([u.text for u in us])
    except ValueError:  # nothing but stop words
        S = np.zeros((len(us), len(us)), dtype=np.float32)
    else:
        S = (X @ X.T).toarray().astype(np.float32)
    np.fill_diagonal(S, -np.inf)
    return S


def _redundancy_reference(units_, budget, S):
    """The redundancy policy as first written: every victim search a full scan, every orphaned
    unit's partner searched again one by one."""
    n = len(units_)
    retained = np.zeros(n, dtype=bool)
    best = np.full(n, -np.inf, dtype=np.float32)
    partner = np.full(n, -1, dtype=np.int64)

    def add(j):
        idx = np.flatnonzero(retained)
        if idx.size:
            col = S[j, idx]
            better = col > best[idx]
            best[idx[better]] = col[better]
            partner[idx[better]] = j
            k = int(np.argmax(col))
            best[j], partner[j] = col[k], idx[k]
        retained[j] = True

    def victim():
        score = np.where(retained, np.where(np.isfinite(best), best, -1.0), -np.inf)
        v = int(np.argmax(score))
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

    return evict._stream(units_, budget, add, victim)


WORDS = ["cat", "dog", "gym", "book", "paris", "rain", "coffee", "jazz", "the", "and"]


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.lists(st.sampled_from(WORDS), max_size=4), st.integers(1, 30)), min_size=1,
                max_size=40), st.integers(0, 400))
def test_redundancy_is_the_reference_policy(turns, budget):
    """Duplicates, stop-word-only turns (no similarity at all) and a store down to one unit."""
    us = [Unit(f"s:{i}", "s", i, "d", "user", " ".join(w), t, i, False) for i, (w, t) in enumerate(turns)]
    S = evict.tfidf_similarity(us)
    assert np.array_equal(S, _tfidf_reference(us))
    assert evict._redundancy(us, budget, S) == _redundancy_reference(us, budget, S)


def test_redundancy_is_the_reference_policy_on_a_built_history():
    q = longmem.to_question(longmem_templates.build(1, 6000, seed=2)[0])
    us = units.units_of(q)
    S = evict.tfidf_similarity(us)
    assert np.array_equal(S, _tfidf_reference(us))
    for budget in arms.scaled_budgets(6000):
        assert evict._redundancy(us, budget, S) == _redundancy_reference(us, budget, S)


def test_memoized_contexts_are_the_contexts(small):
    """build_reads renders a context once per distinct set of units: every read is what rendering
    its own units afresh gives."""
    _, grid = small
    for q in grid.questions[:3]:
        by_id = {u.unit_id: u for u in grid.histories[q.question_id]}
        for r in (r for r in grid.reads if r.question_id == q.question_id):
            assert (r.unit_ids, r.prompt, r.context_tokens) == arms._context(q, by_id, r.unit_ids)
