import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memlife import retrieve
from memlife.restore.data import units
from memlife.restore.reading import read_context
from memlife.restore.data.units import Unit


def U(i, text, gold=False, date="2023/01/01 (Sun) 10:00", session="s"):
    return Unit(f"{session}:{i}", session, i, date, "user" if i % 2 == 0 else "assistant", text, 5, i, gold)


HIST = [U(0, "I adopted a cat named Luna"), U(1, "What a lovely name"), U(2, "The weather is nice"),
        U(3, "Luna sleeps all day, my cat is lazy"), U(4, "Do you like jazz?"), U(5, "Yes, jazz is great")]


def test_tokenization_is_the_documented_bm25_lite():
    assert retrieve.tokenize(["The CAT, a dog & I!"]) == [["cat", "dog"]]  # lower, stop words, 1-char dropped


def test_rank_orders_by_bm25_then_recency():
    ids = [u.unit_id for u in HIST]
    r = read_context.rank(HIST, ids, "Tell me about my cat Luna")
    assert set(r[:2]) == {"s:0", "s:3"}
    # units sharing no query term score 0 and come newest first
    assert r[2:] == ["s:5", "s:4", "s:2", "s:1"]
    # the index holds only retained units
    assert read_context.rank(HIST, ["s:1", "s:2"], "cat") == ["s:2", "s:1"]
    assert read_context.rank(HIST, [], "cat") == []


def test_rank_ties_break_towards_the_newer_unit():
    dup = [U(0, "jazz records"), U(1, "jazz records"), U(2, "nothing")]
    assert read_context.rank(dup, ["s:0", "s:1", "s:2"], "jazz") == ["s:1", "s:0", "s:2"]


def V(i, tokens, gold=False):
    """A unit of `tokens` tokens at chronological position i."""
    return Unit(f"s:{i}", "s", i, "d", "user", f"t{i}", tokens, i, gold)


def test_select_topk_and_forced_gold():
    ranking = ["s:5", "s:4", "s:3", "s:2", "s:1", "s:0"]
    assert read_context.select(HIST, ranking, "topk", k=2, cap=0) == ["s:5", "s:4"]
    # forced-gold: the surviving gold, then ranked units in what remains of the cap (5 tokens each)
    assert read_context.select(HIST, ranking, "forced_gold", k=2, cap=15, retained_gold=["s:0"]) == ["s:0", "s:4", "s:5"]
    assert read_context.select(HIST, ranking, "forced_gold", k=2, cap=15, retained_gold=[]) == ["s:3", "s:4", "s:5"]
    with pytest.raises(ValueError, match="unknown regime"):
        read_context.select(HIST, ranking, "dense", k=2, cap=15)


def test_inject_counts_forced_units_against_the_cap_and_skips_what_does_not_fit():
    us = [V(0, 5, True), V(1, 10), V(2, 4), V(3, 3), V(4, 8)]
    ranking = ["s:4", "s:1", "s:0", "s:3", "s:2"]
    # cap 15 - gold 5 = 10: s:4 (8) fits, s:1 (10) does not and is skipped, s:0 is a duplicate,
    # s:3 (3) and s:2 (4) no longer fit in the 2 left.
    assert read_context.inject(us, ["s:0"], ranking, 15) == ["s:0", "s:4"]
    assert read_context.inject(us, ["s:0"], ranking, 16) == ["s:0", "s:3", "s:4"]
    # duplicated forced ids count once
    assert read_context.inject(us, ["s:0", "s:0"], ranking, 16) == ["s:0", "s:3", "s:4"]
    # the forced units alone exceed the cap: all of them, and nothing else
    assert read_context.inject(us, ["s:4", "s:1"], ranking, 12) == ["s:1", "s:4"]
    assert read_context.inject(us, ["s:0"], ranking, 5) == ["s:0"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 30), min_size=1, max_size=12), st.randoms(use_true_random=False),
       st.integers(0, 120), st.data())
def test_inject_properties(sizes, rnd, cap, data):
    us = [V(i, t) for i, t in enumerate(sizes)]
    ids = [u.unit_id for u in us]
    ranking = data.draw(st.permutations(ids))
    forced = data.draw(st.lists(st.sampled_from(ids), max_size=4))
    got = read_context.inject(us, forced, ranking, cap)
    tok = {u.unit_id: u.tokens for u in us}
    forced_tokens = sum(tok[i] for i in set(forced))
    assert set(forced) <= set(got) and len(got) == len(set(got))
    assert got == sorted(got, key=lambda i: int(i.split(":")[1]))  # chronological
    total = sum(tok[i] for i in got)
    if forced_tokens > cap:
        assert set(got) == set(forced)
    else:
        assert total <= cap
    # greedy in rank order: every ranked unit left out would not have fitted when its turn came
    room = cap - forced_tokens
    for i in ranking:
        if i in set(forced):
            continue
        if tok[i] <= room:
            assert i in got
            room -= tok[i]
        else:
            assert i not in got


def test_render_is_chronological_without_session_ids():
    a = U(0, "later turn", date="2023/02/01 (Wed) 10:00", session="answer_x")
    a = Unit(a.unit_id, a.session_id, 0, a.date, "user", a.text, 2, 7, True)
    b = Unit("chitchat_y:3", "chitchat_y", 3, "2023/01/01 (Sun) 10:00", "assistant", "earlier", 1, 2, False)
    text = read_context.render([a, b])
    assert text == "[2023/01/01 (Sun) 10:00] assistant: earlier\n[2023/02/01 (Wed) 10:00] user: later turn"
    assert "answer_x" not in text and "chitchat_y" not in text


def test_subset_scores_are_bm25s_scores_of_an_index_of_the_subset():
    """The per-history index scores a subset as bm25s's index of that subset alone would (IDF and
    mean length over the subset), here on real LongMemEval turns, for many random subsets."""
    import random

    from memlife import longmem
    from memlife.restore.data import dataset

    rec = dataset.build_records("reconstructed", n_questions=2, history_tokens=20_000, seed=0)[1]
    q = longmem.to_question(rec)
    us = units.units_of(q)
    toks = retrieve.tokenize([u.text for u in us])
    index = retrieve.history_index(toks)
    query = retrieve.tokenize([q.question])[0]
    rng = random.Random(7)
    for _ in range(30):
        rows = sorted(rng.sample(range(len(us)), rng.randint(1, len(us))))
        ours = retrieve.subset_scores(index, rows, query)
        theirs = retrieve.bm25_scores([toks[i] for i in rows], query)
        assert np.allclose(ours, theirs, rtol=1e-5, atol=1e-6)
        assert (ours > 0).any() == (theirs > 0).any()
    assert retrieve.subset_scores(index, [], query).size == 0
    assert not retrieve.subset_scores(index, [0, 1], ["zzzunseen"]).any()


def test_subset_scores_by_hand():
    # two docs: "cat cat dog" and "dog"; query "cat": df=1, N=2, idf = ln(1 + 1.5/1.5) = ln 2;
    # doc 0: tf=2, dl=3, avgdl=2 -> 2 / (2 + 1.5 * (0.25 + 0.75 * 1.5)) = 2 / 4.0625
    index = retrieve.history_index([["cat", "cat", "dog"], ["dog"]])
    s = retrieve.subset_scores(index, [0, 1], ["cat"])
    assert s[0] == pytest.approx(np.log(2) * 2 / 4.0625) and s[1] == 0


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.lists(st.sampled_from(
    list("ab Z9:;.'\n\tΣσ字-") + [": ", "the ", "The ", "ΟΔΟΣ", "it's"]), max_size=20).map("".join),
    max_size=5), max_size=4))
def test_tokenize_lines_is_tokenize_of_the_joined_lines(groups):
    assert retrieve.tokenize_lines(groups) == retrieve.tokenize(["\n".join(g) for g in groups])


def test_tokenize_lines_of_turns():
    groups = [["[session 1] user: I adopted a cat named Luna", "[session 1] assistant: What a lovely name"],
              ["[session 12] user: ΟΔΟΣ: the road"]]
    assert retrieve.tokenize_lines(groups) == retrieve.tokenize(["\n".join(g) for g in groups])
    assert retrieve.tokenize_lines(groups)[1] == ["session", "12", "user", "οδος", "road"]
