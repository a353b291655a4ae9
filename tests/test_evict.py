from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memlife import longmem
from memlife.restore.data import units
from memlife.restore.eviction import evict
from memlife.restore.reading import arms
from memlife.restore.data.units import Unit

import longmem_templates

WORDS = ["cat", "dog", "gym", "book", "paris", "rain", "coffee", "jazz"]


@st.composite
def histories(draw):
    n = draw(st.integers(1, 40))
    out = []
    for i in range(n):
        words = draw(st.lists(st.sampled_from(WORDS), min_size=0, max_size=4))
        out.append(Unit(unit_id=f"s{i // 5}:{i % 5}", session_id=f"s{i // 5}", turn_index=i % 5,
                        date="2023/01/01 (Sun) 10:00", role="user", text=" ".join(words),
                        tokens=draw(st.integers(1, 30)), order=i, is_gold=draw(st.booleans())))
    budget = draw(st.integers(0, sum(u.tokens for u in out) + 5))
    return out, budget


def _scores(us):
    return {u.text: float(len(u.text) % 10 + 1) for u in us}


def test_the_papers_policies_are_registered_under_their_names():
    # The names records carry: renaming one would orphan every committed record and replay. Other
    # policies may be registered beside them (docs/extending.md); the paper's set stays this.
    assert evict.POLICIES == ("fifo", "random", "redundancy", "importance", "no_evict", "control")
    registered = evict.registered_policies()
    assert list(registered)[:6] == list(evict.POLICIES)
    assert all(registered[p].builtin and registered[p].name == p for p in evict.POLICIES)
    # the named parts of the paper's set are what the declarations say
    assert evict.BASELINE_POLICIES == evict.POLICIES[:4]
    assert set(evict.DETERMINISTIC_POLICIES) == set(evict.POLICIES) - set(evict.SEEDED_POLICIES)
    assert evict.DETERMINISTIC_POLICIES == ("fifo", "redundancy", "importance", "no_evict")  # paper order
    assert evict.MODEL_FREE_POLICIES == ("fifo", "random", "redundancy", "no_evict", "control")
    assert registered["no_evict"].role == evict.REFERENCE and registered["control"].role == evict.CONTROL_ROLE
    with pytest.raises(ValueError, match=r"unknown policy 'lifo' \(did you mean fifo\?\)"):
        evict.evict([], "lifo", 10)


@settings(max_examples=60, deadline=None)
@given(histories(), st.integers(0, 5))
def test_every_policy_respects_the_budget_and_partitions_units(hist, seed):
    us, budget = hist
    for policy in evict.POLICIES:
        e = evict.evict(us, policy, budget, seed, question_id="q", importance=_scores(us))
        ids = [u.unit_id for u in us]
        assert sorted(e.retained + e.evicted) == sorted(ids)
        assert not set(e.retained) & set(e.evicted)
        assert list(e.retained) == [i for i in ids if i in set(e.retained)]  # oldest first
        assert e.retained_tokens == sum(u.tokens for u in us if u.unit_id in set(e.retained))
        assert e.n_gold_evicted == sum(u.is_gold for u in us if u.unit_id in set(e.evicted))
        if policy == "no_evict":
            assert e.evicted == () and len(e.retained) == len(us)
        else:
            assert e.retained_tokens <= budget


@settings(max_examples=60, deadline=None)
@given(histories())
def test_fifo_evicts_strictly_oldest_first(hist):
    us, budget = hist
    e = evict.evict(us, "fifo", budget)
    orders = [int(next(u.order for u in us if u.unit_id == i)) for i in e.evicted]
    assert orders == list(range(len(orders)))  # exactly the oldest, in order
    # and nothing more than needed: re-admitting the newest evicted unit would break the budget
    if e.evicted:
        assert e.retained_tokens + us[len(orders) - 1].tokens > budget


@settings(max_examples=40, deadline=None)
@given(histories(), st.integers(0, 1000))
def test_random_and_control_are_reproducible_per_seed(hist, seed):
    us, budget = hist
    for policy in ("random", "control"):
        a = evict.evict(us, policy, budget, seed, question_id="q1")
        b = evict.evict(us, policy, budget, seed, question_id="q1")
        assert a == b


def test_random_differs_across_seeds():
    us = [Unit(f"s:{i}", "s", i, "d", "user", "x", 10, i, False) for i in range(50)]
    outcomes = {evict.evict(us, "random", 200, s, question_id="q").evicted for s in range(5)}
    assert len(outcomes) == 5


def test_redundancy_evicts_the_older_of_two_duplicates():
    texts = ["my cat is called luna", "coffee every morning", "i love jazz records",
             "my cat is called luna", "paris in the rain"]
    us = [Unit(f"s:{i}", "s", i, "d", "user", t, 10, i, False) for i, t in enumerate(texts)]
    e = evict.evict(us, "redundancy", 40)
    assert e.evicted == ("s:0",)


def test_importance_evicts_lowest_score_then_oldest():
    texts = ["a", "b", "c", "d"]
    us = [Unit(f"s:{i}", "s", i, "d", "user", t, 10, i, False) for i, t in enumerate(texts)]
    scores = {"a": 5.0, "b": 2.0, "c": 2.0, "d": 9.0}
    assert evict.evict(us, "importance", 20, importance=scores).evicted == ("s:1", "s:2")
    with pytest.raises(KeyError, match="importance scores missing"):
        evict.evict(us, "importance", 20, importance={"a": 1.0})


def test_parse_and_score_importance_once_per_text():
    assert evict.parse_importance(" 7") == 7
    assert evict.parse_importance("Score: 10/10") == 10
    assert evict.parse_importance("eleven") is None
    assert evict.parse_importance("0 or 11") is None
    sent = []

    class FakeScorer:
        def complete_many(self, reqs, desc=None):
            sent.extend(reqs)
            return [SimpleNamespace(text="8" if "jazz" in r["messages"][1]["content"] else "n/a") for r in reqs]

    scores, invalid = evict.score_importance(["jazz", "hi", "jazz"], FakeScorer())
    assert scores == {"jazz": 8.0, "hi": evict.IMPORTANCE_NEUTRAL} and invalid == 1
    assert len(sent) == 2 and all(r["max_tokens"] == 4 and r["temperature"] == 0.0 for r in sent)
    assert "jazz" not in sent[0]["messages"][0]["content"]  # system prompt is the stable prefix


@pytest.fixture(scope="module")
def built_histories():
    recs = longmem_templates.build(n_questions=90, history_tokens=1500, seed=11)
    return {r["question_id"]: units.units_of(longmem.to_question(r)) for r in recs}


def test_control_evicts_gold_at_three_times_the_random_rate(built_histories):
    """Stated tolerance: the pooled ratio lies within 3 ± 0.6 at the budget (the paper's 80k of
    102k) where 3× the baseline rate stays below 1; at tighter budgets the control evicts all gold."""
    budget8, _, budget80 = arms.scaled_budgets(1500)
    grid = evict.evict_grid(built_histories, ["random", "control"], [budget8, budget80], list(range(8)))
    rates = {}
    for policy in ("random", "control"):
        cells = [e for e in grid if e.policy == policy and e.budget == budget80]
        rates[policy] = sum(e.n_gold_evicted for e in cells) / sum(e.n_gold for e in cells)
    assert 0.03 < rates["random"] < 0.33
    assert 2.4 <= rates["control"] / rates["random"] <= 3.6, rates
    tight = [e for e in grid if e.policy == "control" and e.budget == budget8]
    assert all(e.n_gold_evicted == e.n_gold for e in tight)


def test_control_refills_the_room_it_frees(built_histories):
    budget = arms.scaled_budgets(1500)[2]
    for qid, us in list(built_histories.items())[:20]:
        c = evict.evict(us, "control", budget, 0, question_id=qid, control_mix=1.0)
        assert c.n_gold_evicted == c.n_gold  # λ = 1: every gold unit goes
        room = budget - c.retained_tokens
        by_id = {u.unit_id: u for u in us}
        # no evicted non-gold unit would still fit: the freed room was refilled
        assert all(by_id[i].tokens > room for i in c.evicted if not by_id[i].is_gold)


def test_grid_runs_deterministic_policies_once(built_histories):
    h = dict(list(built_histories.items())[:2])
    imp = {u.text: 5.0 for us in h.values() for u in us}
    grid = evict.evict_grid(h, evict.POLICIES, [100, 400], [0, 1, 2], imp)
    per_q = {p: sum(e.policy == p for e in grid) / 2 for p in evict.POLICIES}
    assert per_q == {"fifo": 2, "random": 6, "redundancy": 2, "importance": 2, "no_evict": 2, "control": 6}
    back = evict.from_frame(evict.to_frame(grid))
    assert back == grid


def test_a_question_s_control_is_the_control_run_on_its_own(built_histories):
    # evict_question hands the control the random policy's run (same budget and seed) instead
    # of repeating it: the cells are those of each policy run alone, in either policy order.
    budgets, seeds = arms.scaled_budgets(1500), [0, 1]
    for qid, us in list(built_histories.items())[:6]:
        mixing = {(b, s): 0.4 for b in budgets for s in seeds}
        shared = evict.evict_question(us, qid, ["random", "control"], budgets, seeds, mixing=mixing)
        alone = [evict.evict(us, p, b, s, question_id=qid, control_mix=0.4)
                 for p in ("random", "control") for b in budgets for s in seeds]
        assert shared == alone
        reversed_order = evict.evict_question(us, qid, ["control", "random"], budgets, seeds, mixing=mixing)
        assert sorted(reversed_order, key=lambda e: e.policy) == sorted(alone, key=lambda e: e.policy)


def test_tfidf_similarity_is_the_vectorizer_s_own():
    from sklearn.feature_extraction.text import TfidfVectorizer

    texts = ["The cat sat on the mat", "A dog and a cat", "Jazz in Paris, jazz!", "the and of", "Coffee in the rain"]
    us = [Unit(f"s:{i}", "s", i, "d", "user", t, 5, i, False) for i, t in enumerate(texts)]
    X = TfidfVectorizer(stop_words="english", sublinear_tf=True).fit_transform(texts)
    expected = (X @ X.T).astype("float32").toarray()
    got = evict.tfidf_similarity(us)
    off = ~np.eye(len(texts), dtype=bool)
    assert (got[off] == expected[off]).all()
    assert np.isneginf(np.diag(got)).all()
