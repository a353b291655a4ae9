"""Dataset statistics measured on instances, checked on cases worked out by hand."""
from __future__ import annotations

import pytest

from memlife.memops.data import describe, plan, realize
from memlife.memops.analyses import figures
from memlife.memops.data.schema import Turn


@pytest.fixture(scope="module")
def smoke():
    return [realize.template_instance(cp) for cp in plan.plan(plan.PlanParams(n_topics=2, seed=0))]


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


def test_describe_prints_table2_of_a_built_file_as_one_json_object(tmp_path, capsys):
    """The CLI's numbers are Table 2's, recomputed here by hand from the file it reads."""
    import json

    from memlife.memops import build as B
    from memlife.memops.__main__ import main
    from memlife.models import tokens

    params = B.BuildParams(profile="smoke", seed=0, n_topics=1, max_conversations=3, longctx_tokens=6000,
                           realizer="template", verifier="off")
    B.build(params, tmp_path, progress=False)
    path = tmp_path / "instances.jsonl"
    assert main(["describe", str(path)]) == 0
    got = json.loads(capsys.readouterr().out)  # exactly one JSON object on stdout

    rows = [json.loads(line) for line in path.read_text().splitlines()]
    adj = [sum(tokens.count(t["text"]) for seg in r["segments"] for t in seg) for r in rows]
    longs = [sum(tokens.count(t["text"]) for c in r["long_context"]["conversations"] for t in c["turns"])
             for r in rows]
    assert got["conversations"] == len(rows) == 3
    assert got["probes"] == sum(len(r["probes"]) for r in rows)
    assert got["tokens_adjacent_mean"] == round(sum(adj) / 3)
    assert got["tokens_long_context_mean"] == round(sum(longs) / 3)
    assert got["tokens_long_context_max"] == max(longs) <= 6000
    assert got["retained"] == 3 and got["retention_rate_pct"] == 100.0  # from gate_log.json beside it
    # one computation: the CLI's values are describe.table2's "ours" column
    from memlife.memops.data.schema import load_instances

    ours = describe.table2_stats(load_instances(path), json.loads((tmp_path / "gate_log.json").read_text()))
    assert {describe.STAT_KEYS[s]: v for s, v in ours.items()} == {k: v for k, v in got.items() if k != "sha256"}
    assert list(describe.STAT_KEYS) == [k for keys in describe.SECTIONS.values() for k in keys]  # every row

    (tmp_path / "gate_log.json").unlink()  # without the gate log, quality control is unknown
    assert main(["describe", str(path)]) == 0
    assert json.loads(capsys.readouterr().out)["retained"] is None
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"instance_id": "x"}\n')
    assert main(["describe", str(bad)]) == 1
    assert "bad.jsonl:1" in capsys.readouterr().err
