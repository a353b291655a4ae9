"""Stage 4: dispersal into real unrelated conversations, insertion records, context distractors."""
from __future__ import annotations

import pytest

from memlife.memops.scoring.metrics import gold_failures
from memlife.memops.data import gates as G
from memlife.memops.data import longctx as L
from memlife.memops.data import plan, realize
from memlife.memops.data.schema import long_context_history, normalize_value
from memlife.models import tokens


@pytest.fixture(scope="module")
def instances():
    return [realize.template_instance(cp) for cp in plan.plan(plan.PlanParams(n_topics=2, seed=0))]


@pytest.mark.parametrize("target", [5000, 12000, 61000])
def test_length_follows_the_target(instances, target):
    e = L.embed(instances[0], target, seed=0)
    total = sum(tokens.count(t.text) for conv in long_context_history(e) for t in conv)
    assert total == e.long_context.approx_tokens
    assert 0.95 * target <= total <= target  # never over: the embedded model has an 8k window


def test_segments_dispersed_in_order_into_different_conversations(instances):
    for inst in instances:
        e = L.embed(inst, 6000, seed=0)
        lc = e.long_context
        assert [i.segment for i in lc.insertions] == [0, 1, 2]
        convs = [i.conversation for i in lc.insertions]
        assert len(set(convs)) == 3 and convs == sorted(convs)  # time order preserved
        for ins in lc.insertions:
            assert ins.position % 2 == 0 and ins.messages == 8
            got = lc.conversations[ins.conversation].turns[ins.position: ins.position + 8]
            assert got == inst.segments[ins.segment]
        assert G.check(e, gold_failures) == []


def test_history_alternates_and_hosts_are_real_sharegpt_conversations(instances):
    from memlife import sharegpt

    pool = {sid.removeprefix(sharegpt.ID_PREFIX): turns for sid, turns in sharegpt.task_chat()}
    for target, whole in ((6000, False), (61000, True)):
        e = L.embed(instances[1], target, seed=0)
        placed = {(b.conversation, b.position + k) for b in [*e.long_context.insertions,
                                                              *e.long_context.context_distractors]
                  for k in range(b.messages)}
        for c, conv in enumerate(e.long_context.conversations):
            src, sid = conv.source.split(":", 1)
            assert src == "sharegpt" and sid in pool
            assert [t.role for t in conv.turns] == ["user", "assistant"] * (len(conv.turns) // 2)
            own = [(t.role, t.text) for i, t in enumerate(conv.turns) if (c, i) not in placed]
            session = list(pool[sid])
            # the session's own turns, verbatim and in order: whole at paper length, its opening
            # exchanges where the history must fit an 8k window
            assert own == (session[: len(session) - len(session) % 2] if whole else session[: len(own)])
            assert own and len(own) % 2 == 0


def test_quick_history_fits_the_embedded_readers_window(instances):
    from memlife.memops import build as B
    from memlife.memops.systems import reading

    target = B.params_for("quick").longctx_tokens
    reader = reading.Reader(client=None)  # the embedded model's 8k window and reply budget
    for inst in instances:
        e = L.embed(inst, target, seed=0)
        lines = reading.format_turns(reading.history_for(e, "long_context").turns())
        for p in e.probes:
            assert reader.fit(lines, p.question)[1] == 0  # nothing dropped: the whole history is read


def test_filler_never_states_a_target_value(tmp_path, instances):
    import json as _json

    inst = instances[0]
    values = G.target_values(inst)
    assert values
    f = tmp_path / "ultrachat.jsonl"
    rows = [{"id": f"u{i:02d}", "data": [f"Question {i} about gardening and soil?",
                                         f"Answer {i}: " + "mulch helps. " * 20] * 3} for i in range(40)]
    for r in rows[::2]:  # half the sessions say one of the user's values in passing
        r["data"][3] = f"Answer: mulch helps, and by the way {values[0]} is what my neighbour uses."
    f.write_text("".join(_json.dumps(r) + "\n" for r in rows))
    e = L.embed(inst, 6000, seed=0, filler_path=str(f))
    used = {c.source.split(":", 1)[1] for c in e.long_context.conversations}
    assert used and all(int(u[1:]) % 2 == 1 for u in used)  # only the clean sessions are drawn
    assert G.check(e, gold_failures) == []
    # a value planted in a filler turn is caught, naming where
    c, t, turn, _ = next(G.filler_turns(e))
    e.long_context.conversations[c].turns[t].text = turn.text + f" Mine is {values[0]}."
    got = [x for x in G.check(e, gold_failures) if x.gate == "filler_value"]
    assert len(got) == 1 and f"conversation {c} turn {t}" in got[0].reason and values[0] in got[0].reason
    # the evidence itself states the values and is not filler
    assert all((c2, t2) != (ins.conversation, ins.position) for c2, t2, *_ in G.filler_turns(e)
               for ins in e.long_context.insertions)


def test_context_distractors_are_close_to_a_target_but_state_neutral(instances):
    for inst in instances:
        e = L.embed(inst, 6000, seed=0)
        cds = e.long_context.context_distractors
        assert len(cds) == L.DISTRACTORS_PER_OPERATION * len(inst.operations)
        ops = {o.op_id: o for o in inst.operations}
        for cd in cds:  # operation-aware: from the bank of what the operation does, naming its own target
            op = ops[cd.op_id]
            assert cd.target == op.target
            bank = {u.format(target=op.target) for u, _ in L.DISTRACTOR_TEMPLATES[op.type]}
            assert cd.turns[0].text in bank
        values = {normalize_value(v) for o in inst.operations for v in (o.old_value, o.new_value) if v}
        for cd in cds:
            text = " ".join(t.text for t in cd.turns)
            assert cd.target in text  # semantically close: it names the target
            norm = f" {normalize_value(text)} "
            assert not any(f" {v} " in norm for v in values)  # but states none of the user's values
        tagged = [d for p in e.probes for d in p.distractors if d.tag == "context_level"]
        assert tagged and all(d.tag == "context_level" for d in tagged)


def test_same_seed_same_history_other_seed_differs(instances):
    a = L.embed(instances[0], 6000, seed=0)
    b = L.embed(instances[0], 6000, seed=0)
    c = L.embed(instances[0], 6000, seed=1)
    assert a.model_dump() == b.model_dump()
    assert a.long_context.model_dump() != c.long_context.model_dump()


def test_gate_catches_a_moved_segment(instances):
    e = L.embed(instances[0], 6000, seed=0)
    e.long_context.insertions[1].position += 2
    assert any(f.gate == "long_context" and "not found verbatim" in f.reason for f in G.check(e, gold_failures))


def test_ultrachat_jsonl_filler(tmp_path, instances):
    import json as _json

    f = tmp_path / "ultrachat.jsonl"
    rows = [{"id": f"u{i}", "data": [f"Question {i} about gardening and soil?", f"Answer {i}: " + "mulch helps. " * 20] * 3}
            for i in range(40)]
    f.write_text("".join(_json.dumps(r) + "\n" for r in rows))
    e = L.embed(instances[0], 6000, seed=0, filler_path=str(f))
    assert all(c.source.startswith("ultrachat:u") for c in e.long_context.conversations)
    assert G.check(e, gold_failures) == []
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": 1, "data": "not a list"}\n')
    with pytest.raises(ValueError, match="bad.jsonl:1: field 'data'"):
        L.load_ultrachat_jsonl(str(bad))


def test_history_lengths_are_drawn_per_instance_within_the_spread():
    assert L.target_tokens(61_000, 0.0, 0, "t1-remember") == 61_000
    drawn = [L.target_tokens(61_000, 0.12, 0, f"t{i}-update") for i in range(400)]
    assert all(61_000 * 0.88 <= t <= 61_000 * 1.12 for t in drawn)
    assert max(drawn) > 61_000 * 1.1 and min(drawn) < 61_000 * 0.9  # the whole range is used
    assert abs(sum(drawn) / len(drawn) - 61_000) < 61_000 * 0.02
    assert drawn == [L.target_tokens(61_000, 0.12, 0, f"t{i}-update") for i in range(400)]  # seeded
    assert drawn != [L.target_tokens(61_000, 0.12, 1, f"t{i}-update") for i in range(400)]
    with pytest.raises(ValueError, match="longctx_spread"):
        L.target_tokens(61_000, 1.5, 0, "x")
