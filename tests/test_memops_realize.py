"""Both realizers: the template realizer's surface variety, and the LLM realizer through a real
OpenAI-compatible loopback server, checked by the same gates."""
from __future__ import annotations

import json

from memlife.memops.scoring.metrics import gold_failures
from memlife.memops.data import gates as G
from memlife.memops.data import plan, realize

from conftest import point_at


def _cp(op_type="update"):
    return next(c for c in plan.plan(plan.PlanParams(n_topics=2, seed=0)) if c.op_type == op_type)


def test_template_conversations_do_not_read_alike():
    cps = plan.plan(plan.PlanParams(n_topics=12, seed=0))
    user_turns = [t.text for cp in cps for seg in realize.realize_template(cp) for t in seg if t.role == "user"]
    assert len(set(user_turns)) / len(user_turns) > 0.85  # short stock requests recur across conversations
    for cp in cps:  # within one conversation no turn is repeated verbatim
        turns = [t.text for seg in realize.realize_template(cp) for t in seg]
        assert len(set(turns)) == len(turns), cp.instance_id


def test_regeneration_attempt_changes_the_wording_not_the_plan():
    cp = _cp()
    a, b = realize.template_instance(cp, 0), realize.template_instance(cp, 1)
    assert a.segments != b.segments
    assert [(o.type, o.target, o.old_value, o.new_value) for o in a.operations] == \
        [(o.type, o.target, o.old_value, o.new_value) for o in b.operations]
    assert G.check(a, gold_failures) == [] and G.check(b, gold_failures) == []


def _script_llm(server, cp, paraphrase=False):
    fixed = realize.fixed_sentences(cp)
    for seg in range(3):
        turns = []
        for slot in range(4):
            ev = [e for e in cp.events if e.segment == seg and e.slot == slot]
            sentence = fixed[ev[0].event_id] if ev else ""
            if paraphrase and sentence:
                sentence = sentence.lower()
            turns.append(f"Morning! {sentence} Could you help me plan the week around it?".replace("  ", " "))
            turns.append("Of course. Here's a plan: errands on Monday, calls on Wednesday, and Friday kept free.")
        server.scripts[realize._llm_prompt(cp, seg, "")].append(("text", json.dumps({"turns": turns})))


def test_llm_realizer_output_passes_the_same_gates(isolated_llm, fault_server):
    point_at(isolated_llm, fault_server, role="generator", model="fake-generator")
    cp = _cp()
    _script_llm(fault_server, cp)
    inst = realize.llm_instance(cp)
    assert inst.realizer == "llm"
    assert G.check(inst, gold_failures) == []
    assert all(s.quote in inst.segments[s.segment][s.turn].text for o in inst.operations for s in [o.trigger, *o.evidence])


def test_llm_realizer_paraphrase_is_caught_by_the_verbatim_gate(isolated_llm, fault_server):
    point_at(isolated_llm, fault_server, role="generator", model="fake-generator")
    cp = _cp()
    _script_llm(fault_server, cp, paraphrase=True)
    inst = realize.llm_instance(cp)
    assert {f.gate for f in G.check(inst, gold_failures)} >= {"quote_verbatim"}


def test_an_llm_build_on_parallel_calls_is_the_build_made_one_at_a_time(isolated_llm, fault_server):
    """Conversations written at once (generator concurrency 4) give the dataset and gate log, in
    plan order, that the same replies give one conversation at a time."""
    from memlife.memops import build as B

    cps = plan.plan(plan.PlanParams(n_topics=2, seed=0))
    for i, cp in enumerate(cps):
        _script_llm(fault_server, cp, paraphrase=(i % 3 == 0))  # some fail the gates and are retried
    params = B.BuildParams(profile="smoke", seed=0, n_topics=2, max_conversations=None, longctx_tokens=1500,
                           max_attempts=2, realizer="llm", verifier="off")
    point_at(isolated_llm, fault_server, role="generator", model="fake-generator", concurrency=4)
    parallel = B.build(params, progress=False)
    sent = sum(fault_server.received.values())
    point_at(isolated_llm, fault_server, role="generator", model="fake-generator", concurrency=1)
    serial = B.build(params, progress=False)
    assert sum(fault_server.received.values()) == sent  # the second build came from the cache
    assert parallel.manifest == serial.manifest
    assert parallel.log.to_json() == serial.log.to_json()
    assert 0 < len(parallel.log.retained) < len(cps) and parallel.log.dropped
