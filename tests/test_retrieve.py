import pytest
from hypothesis import given, settings, strategies as st

from memlife import retrieve
from memlife.units import Unit


def U(i, text, gold=False, date="2023/01/01 (Sun) 10:00", session="s"):
    return Unit(f"{session}:{i}", session, i, date, "user" if i % 2 == 0 else "assistant", text, 5, i, gold)


HIST = [U(0, "I adopted a cat named Luna"), U(1, "What a lovely name"), U(2, "The weather is nice"),
        U(3, "Luna sleeps all day, my cat is lazy"), U(4, "Do you like jazz?"), U(5, "Yes, jazz is great")]


def test_tokenization_is_the_documented_bm25_lite():
    assert retrieve.tokenize(["The CAT, a dog & I!"]) == [["cat", "dog"]]  # lower, stop words, 1-char dropped


def test_rank_orders_by_bm25_then_recency():
    ids = [u.unit_id for u in HIST]
    r = retrieve.rank(HIST, ids, "Tell me about my cat Luna")
    assert set(r[:2]) == {"s:0", "s:3"}
    # units sharing no query term score 0 and come newest first
    assert r[2:] == ["s:5", "s:4", "s:2", "s:1"]
    # the index holds only retained units
    assert retrieve.rank(HIST, ["s:1", "s:2"], "cat") == ["s:2", "s:1"]
    assert retrieve.rank(HIST, [], "cat") == []


def test_rank_ties_break_towards_the_newer_unit():
    dup = [U(0, "jazz records"), U(1, "jazz records"), U(2, "nothing")]
    assert retrieve.rank(dup, ["s:0", "s:1", "s:2"], "jazz") == ["s:1", "s:0", "s:2"]


def test_forced_gold_puts_every_surviving_gold_unit_in():
    ranking = ["s:5", "s:4", "s:3", "s:2", "s:1", "s:0"]
    assert retrieve.select(ranking, "topk", 2) == ["s:5", "s:4"]
    fg = retrieve.select(ranking, "forced_gold", 2, retained_gold=["s:0"])
    assert fg == ["s:0", "s:5"]
    # more surviving gold than k: all gold, nothing else
    assert sorted(retrieve.select(ranking, "forced_gold", 1, ["s:0", "s:1"])) == ["s:0", "s:1"]
    with pytest.raises(ValueError, match="unknown regime"):
        retrieve.select(ranking, "dense", 2)


@settings(max_examples=50, deadline=None)
@given(st.permutations(list(range(12))), st.integers(1, 12), st.sets(st.integers(0, 11), max_size=5))
def test_forced_gold_contains_topk_prefix_and_gold(perm, k, gold):
    ranking = [f"s:{i}" for i in perm]
    g = [f"s:{i}" for i in sorted(gold)]
    fg = retrieve.select(ranking, "forced_gold", k, g)
    assert set(g) <= set(fg) and len(fg) == len(set(fg)) == max(k, len(g))
    fillers = [u for u in fg if u not in set(g)]
    assert fillers == [u for u in ranking if u not in set(g)][: len(fillers)]


def test_render_is_chronological_without_session_ids():
    a = U(0, "later turn", date="2023/02/01 (Wed) 10:00", session="answer_x")
    a = Unit(a.unit_id, a.session_id, 0, a.date, "user", a.text, 2, 7, True)
    b = Unit("chitchat_y:3", "chitchat_y", 3, "2023/01/01 (Sun) 10:00", "assistant", "earlier", 1, 2, False)
    text = retrieve.render([a, b])
    assert text == "[2023/01/01 (Sun) 10:00] assistant: earlier\n[2023/02/01 (Wed) 10:00] user: later turn"
    assert "answer_x" not in text and "chitchat_y" not in text
