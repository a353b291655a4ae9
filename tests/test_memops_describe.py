"""Dataset statistics measured on instances, checked on cases worked out by hand."""
from __future__ import annotations

import pytest

from memlife.memops import describe, figures
from memlife.memops import plan as P
from memlife.memops import realize as R
from memlife.memops.schema import Turn


@pytest.fixture(scope="module")
def smoke():
    return [R.template_instance(cp) for cp in P.plan(P.PlanParams(n_topics=2, seed=0))]


def _with_dialogue(inst, first_user: str, words: str):
    new = inst.model_copy(deep=True)
    new.segments = [[Turn(role="user", text=first_user), Turn(role="assistant", text=words)]]
    return new


def test_opening_line_reads_past_a_bare_greeting(smoke):
    a = _with_dialogue(smoke[0], "Hi! The trip is close and nothing is booked. More later.", "ok")
    assert describe.opening_line(a) == "Hi! The trip is close and nothing is booked."
    b = _with_dialogue(smoke[0], "I need the hotel sorted before Friday, please. Thanks.", "ok")
    assert describe.opening_line(b) == "I need the hotel sorted before Friday, please."


def test_shared_openings_counts_every_conversation_in_a_shared_pair(smoke):
    same = "I need the hotel sorted before Friday, please."
    insts = [_with_dialogue(smoke[k], text, "ok") for k, text in
             enumerate([same, same, "Could you help me plan the week ahead today?", "Another opening line entirely here."])]
    assert describe.shared_openings(insts) == pytest.approx(2 / 4)


def test_lexical_overlap_is_trigram_jaccard(smoke):
    # "a b c d" has trigrams {abc, bcd}; "a b c e" has {abc, bce}: Jaccard 1/3.
    x = _with_dialogue(smoke[0], "a b", "c d")
    y = _with_dialogue(smoke[1], "a b", "c e")
    assert x.topic_id == y.topic_id
    df = describe.lexical_overlap([x, y])
    same = df[df["pair"] == "same topic"]
    assert list(same["jaccard"]) == [pytest.approx(1 / 3)]


def test_the_smoke_topics_read_alike_within_a_topic_more_than_across(smoke):
    df = describe.lexical_overlap(smoke)
    med = df.groupby("pair")["jaccard"].median()
    assert med["same topic"] > med["different topics"] > 0
    assert figures.lexical_overlap(df) is not None


def test_a_chain_counts_only_when_its_quotes_are_where_they_point(smoke):
    inst = next(i for i in smoke if any(p.reasoning_chain for p in i.probes))
    probe = next(p for p in inst.probes if p.reasoning_chain)
    assert describe.chained(inst, probe)
    broken = inst.model_copy(deep=True)
    p = next(p for p in broken.probes if p.probe_id == probe.probe_id)
    p.reasoning_chain.source_facts[0].quote = "words nobody said"
    assert not describe.chained(broken, p)
    assert not describe.chained(inst, next(p for p in inst.probes if p.reasoning_chain is None))
