"""Each deterministic gate rejects a hand-written bad instance and names the reason."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from memlife.memops.scoring.metrics import gold_failures
from memlife.memops.data import gates as G
from memlife.memops.build import validate_file
from memlife.memops.data.schema import Instance, normalize_value

BG = {
    "topic_id": "T900", "category": "Personal Profile", "subtopic": "addresses",
    "title": "Maya: changing a delivery address", "user_name": "Maya", "setting": "sorting out my orders",
    "attributes": [{"target": "delivery address", "value": "14 Rua Augusta", "aliases": ["shipping address"]}],
    "superseding": [{"target": "delivery address", "old_value": "14 Rua Augusta", "new_value": "22 Elm Street", "aliases": []}],
    "temporary": [{"target": "building door code", "value": "4417#", "aliases": ["door code"]}],
    "retained_controls": [{"target": "ZIP code", "value": "94110", "aliases": []}],
    "reflection": {"target": "delivery timing", "clues": ["a", "b"], "conclusion": "evenings", "unsupported": ["never home"], "aliases": ["evening"]},
    "neighbours": [{"kind": "other_person", "target": "delivery address", "value": "7 Harbour Road", "owner": "my mother"}],
}

U = [
    "Hi! I'm sorting out my orders. The building door code is 4417#, the courier will need it.",
    "My ZIP code is 94110, by the way. Can you add that to the order form?",
    "Thanks. What should I write in the delivery note?",
    "Great, that's all for now.",
]
A = [
    "Got it, I'll pass the door code to the courier.",
    "Added your ZIP code to the form.",
    "Something like: 'Ring the top bell, leave it with the concierge if nobody answers.'",
    "Happy to help!",
]
U2 = [
    "Hi again. Please delete the building door code from your notes, it was only for this week.",
    "The ZIP code stays as it is, though: 94110.",
    "Can you draft the delivery note again without the code?",
    "Perfect, thanks.",
]


def _segment(users, assistants):
    out = []
    for u, a in zip(users, assistants):
        out += [{"role": "user", "text": u}, {"role": "assistant", "text": a}]
    return out


def good_forget() -> dict:
    seg = [_segment(U, A), _segment(U, A), _segment(U2, A)]
    span = lambda s, t, q: {"segment": s, "turn": t, "quote": q}  # noqa: E731
    return {
        "instance_id": "T900-forget", "topic_id": "T900", "category": "Personal Profile",
        "subtopic": "addresses", "op_type": "forget", "background": BG, "segments": seg,
        "operations": [
            {"op_id": "op1", "type": "remember", "target": "building door code", "target_aliases": ["door code"],
             "old_value": None, "new_value": "4417#", "trigger": span(0, 0, "The building door code is 4417#"),
             "evidence": [], "unsupported": []},
            {"op_id": "op2", "type": "remember", "target": "ZIP code", "target_aliases": ["postcode"],
             "old_value": None, "new_value": "94110", "trigger": span(0, 2, "My ZIP code is 94110"),
             "evidence": [span(2, 2, "The ZIP code stays as it is, though: 94110.")], "unsupported": []},
            {"op_id": "op3", "type": "forget", "target": "building door code", "target_aliases": ["door code"],
             "old_value": "4417#", "new_value": None,
             "trigger": span(2, 0, "Please delete the building door code from your notes"),
             "evidence": [span(0, 0, "The building door code is 4417#")], "unsupported": []},
        ],
        "probes": [
            {"probe_id": "T900-forget-p1", "probe_type": "StateTransition",
             "question": "What do you still have about the door code and my ZIP code?",
             "expected_answer": "Nothing about the door code; your ZIP code is 94110.",
             "provenance": [span(2, 0, "Please delete the building door code from your notes"),
                            span(2, 2, "The ZIP code stays as it is, though: 94110.")],
             "reasoning_chain": None,
             "distractors": [{"tag": "retained_control", "value": "94110", "note": ""}],
             "multi_hop": False,
             "answer_key": {"required": [normalize_value("94110")], "forbidden": [normalize_value("4417#")]},
             "op_ids": ["op3", "op2"]},
        ],
        "long_context": None, "realizer": "template",
    }


def reasons(obj: dict) -> list[G.GateFailure]:
    _, failures = G.check_raw(obj, gold_failures)
    return failures


def test_good_instance_passes():
    assert reasons(good_forget()) == []


def test_quote_not_verbatim_is_rejected():
    obj = good_forget()
    obj["operations"][1]["trigger"]["quote"] = "My zip code is 94110"  # case differs from the turn
    got = reasons(obj)
    assert [f.gate for f in got] == ["quote_verbatim"]
    assert "operation op2 trigger" in got[0].reason and "not verbatim" in got[0].reason


def test_quote_citing_an_assistant_turn_is_rejected():
    obj = good_forget()
    obj["operations"][1]["trigger"] = {"segment": 0, "turn": 3, "quote": "Added your ZIP code to the form."}
    got = reasons(obj)
    assert [f.gate for f in got] == ["quote_role"]
    assert "assistant turn, not a user turn" in got[0].reason


def test_broken_alternation_is_rejected():
    obj = good_forget()
    obj["segments"][1][4], obj["segments"][1][5] = obj["segments"][1][5], obj["segments"][1][4]
    got = reasons(obj)
    assert {f.gate for f in got} == {"alternation"}
    assert any("segment 1 turn 4: expected user, found assistant" in f.reason for f in got)


def test_missing_segment_is_rejected():
    obj = good_forget()
    obj["segments"] = obj["segments"][:2]
    # Spans that pointed into the dropped segment are reported too; the segment gate names the cause.
    got = reasons(obj)
    assert any(f.gate == "segments" and "expected 3 segments, found 2" in f.reason for f in got)


def test_state_trajectory_on_a_non_trajectory_conversation_is_rejected():
    obj = good_forget()
    obj["probes"][0]["probe_type"] = "StateTrajectory"
    got = reasons(obj)
    assert [f.gate for f in got] == ["probe_structure"]
    assert "StateTrajectory on a forget conversation" in got[0].reason


def test_forget_without_retained_control_is_rejected():
    obj = good_forget()
    obj["operations"] = [o for o in obj["operations"] if o["op_id"] != "op2"]
    obj["probes"][0]["op_ids"] = ["op3"]
    obj["probes"][0]["distractors"] = []
    got = reasons(obj)
    assert {f.gate for f in got} == {"retained_control"}
    assert any("without a retained control" in f.reason for f in got)


def test_leaked_label_is_rejected():
    obj = good_forget()
    obj["segments"][0][3]["text"] = "Added your ZIP code to the form (gold trace: remember op)."
    got = reasons(obj)
    assert [f.gate for f in got] == ["leaked_label"]
    assert "segment 0 turn 3" in got[0].reason and "gold" in got[0].reason


@pytest.mark.parametrize("text", [
    "This is an OperationTrace probe.", "UPDATE: new address", "state transition here",
    # identifiers from the schema, snake or camel
    "Logged it under op_id op3.", "op_type=forget", "probe_type: StateTrajectory", "the opType field",
    "tagged same_target", "see T012-update-p2", "a CandidateDisambiguation case", "the answer_key",
    # operation names written as labels
    "Done. [forget]", "Operation: update", "type: reflect", "op = remember", "<trajectory>",
    "FORGET the code.", "UPDATE: NEW ADDRESS", "That was the remember op.", "a reflect operation",
    # benchmark vocabulary
    "the gold trace", "Gold answer: 94110", "a memory operation", "operation type", "the probe type",
    "target binding", "State-Trajectory", "MemOps",
])
def test_label_forms_are_caught(text):
    assert G.leaked_labels(text)


@pytest.mark.parametrize("text", [
    "Please forget the door code.", "I'll update you tomorrow.", "Remember to bring the charger.",
    # the words the old gate rejected, as a capable model writes them in dialogue
    "I'm getting her a gold necklace.", "There's no trace of it anywhere.", "No traces of peanut, I checked.",
    "On reflection, I'd rather keep it simple.", "Let me reflect on that for a day.",
    "It really changed my career trajectory.", "The gold standard for coffee grinders is burr.",
    "Update: I got the job!", "Is the meat probe reading right?", "PLEASE DON'T FORGET IT.",
    "The police probe took months.", "My OP-1 synth needs a firmware update.", "What's your username?",
])
def test_ordinary_speech_is_not_a_label(text):
    assert G.leaked_labels(text) == []


def test_ordinary_words_pass_the_gate_in_an_instance():
    obj = good_forget()
    obj["segments"][0][2]["text"] = U[1] + " On reflection, there's no trace of the old one, it was gold."
    obj["segments"][0][3]["text"] = "Added it. That should help your career trajectory, too."
    assert reasons(obj) == []


def test_schema_gate_names_the_field():
    obj = good_forget()
    obj["operations"][0]["type"] = "delete"
    got = reasons(obj)
    assert [f.gate for f in got] == ["schema"]
    assert "operations.0.type" in got[0].reason


def test_expected_answer_repeating_a_deleted_value_is_rejected():
    obj = good_forget()
    obj["probes"][0]["expected_answer"] = "Your ZIP code is 94110; the door code was 4417#, now deleted."
    got = reasons(obj)
    assert [f.gate for f in got] == ["probe_structure", "gold_response", "gold_response"]
    assert "repeats the deleted value '4417'" in got[0].reason
    # scored, that gold answer asserts the forgotten value and leaks it
    assert "accuracy: '4417' asserted as current" in got[1].reason
    assert "leakage: mentions '4417#'" in got[2].reason


def test_expected_answer_must_state_its_required_values():
    obj = good_forget()
    obj["probes"][0]["expected_answer"] = "Nothing about the door code; your ZIP code is unchanged."
    got = reasons(obj)
    assert [f.gate for f in got] == ["gold_response"]
    assert "T900-forget-p1: gold response is not perfect: accuracy: required value '94110' not stated" in got[0].reason


def test_containing_a_required_value_is_not_stating_it():
    # Plain containment passed this probe; its gold response states 94110 only as withdrawn.
    obj = good_forget()
    obj["probes"][0]["expected_answer"] = "Nothing about the door code; your ZIP code 94110 was deleted too."
    got = reasons(obj)
    assert [f.gate for f in got] == ["gold_response"]
    assert "required value '94110' not stated" in got[0].reason


def test_gold_provenance_must_carry_evidence():
    obj = good_forget()
    obj["probes"][0]["provenance"] = [{"segment": 0, "turn": 4, "quote": "Thanks."}]  # verbatim, but no content
    got = reasons(obj)
    assert [f.gate for f in got] == ["gold_response"]
    assert "provenance" in got[0].reason


def test_validate_cli_exit_codes_and_reasons(tmp_path):
    good, bad = good_forget(), good_forget()
    bad["instance_id"] = "T900-bad"
    bad["probes"][0]["probe_type"] = "StateTrajectory"
    f = tmp_path / "instances.jsonl"
    f.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    assert validate_file(f) == [("T900-bad", ["[probe_structure] probe T900-forget-p1: StateTrajectory on a forget conversation (trajectory only)"])]
    run = subprocess.run([sys.executable, "-m", "memlife.memops", "validate", str(f)], capture_output=True, text=True)
    assert run.returncode == 1
    assert "T900-bad: [probe_structure]" in run.stdout
    f.write_text(json.dumps(good) + "\n")
    run = subprocess.run([sys.executable, "-m", "memlife.memops", "validate", str(f)], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr


def test_regeneration_stores_failures_and_retries():
    log = G.GateLog()
    good = Instance.model_validate(good_forget())
    bad = good.model_copy(deep=True)
    bad.segments[0][1].text = "the gold label"
    outputs = iter([bad, good])
    feedbacks = []

    def realize(attempt, feedback):
        feedbacks.append(feedback)
        return next(outputs)

    got = G.generate_with_gates(realize, "T900-forget", log, max_attempts=3, gold_failures=gold_failures)
    assert got is good
    assert log.generated == 2 and log.retained == ["T900-forget"]
    assert feedbacks[0] == "" and "leaked_label" in feedbacks[1]
    assert log.failure_counts() == {"leaked_label": 1}
    assert log.retention_rate == 0.5

    log2 = G.GateLog()
    assert G.generate_with_gates(lambda a, f: bad, "T900-x", log2, max_attempts=2, gold_failures=gold_failures) is None
    assert log2.dropped == ["T900-x"] and log2.generated == 2


def test_template_realizer_output_passes_every_gate():
    from memlife.memops.data import plan, realize

    for cp in plan.plan(plan.PlanParams(n_topics=12, seed=3)):
        inst = realize.template_instance(cp)
        assert G.check(inst, gold_failures) == [], cp.instance_id


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(min_value=0, max_value=10_000), n_topics=st.integers(min_value=1, max_value=6),
       attempt=st.integers(min_value=0, max_value=3))
def test_every_seed_gives_instances_that_pass_every_gate(seed, n_topics, attempt):
    from memlife.memops.data import plan, realize

    for cp in plan.plan(plan.PlanParams(n_topics=n_topics, seed=seed)):
        inst = realize.template_instance(cp, attempt)
        assert G.check(inst, gold_failures) == [], cp.instance_id
        for op in inst.operations:
            for span in (op.trigger, *op.evidence):
                assert inst.segments[span.segment][span.turn].role == "user"
                assert span.quote in inst.segments[span.segment][span.turn].text


@given(st.text(max_size=40))
def test_normalize_value_is_idempotent(text):
    assert normalize_value(normalize_value(text)) == normalize_value(text)


def test_a_distractor_the_dialogue_never_says_is_refused():
    from memlife.memops.data import plan, realize

    cps = plan.plan(plan.PlanParams(n_topics=1, seed=0))
    insts = [realize.template_instance(cp) for cp in cps]
    assert all(G.gate_distractors_spoken(i) == [] for i in insts)  # every planned candidate is said
    inst = next(i for i in insts if i.op_type == "update").model_copy(deep=True)
    probe = next(p for p in inst.probes if any(d.tag == "third_party" for d in p.distractors))
    claim = next(d for d in probe.distractors if d.tag == "third_party")
    claim.value = "a value nobody mentioned"
    [failure] = G.gate_distractors_spoken(inst)
    assert failure.gate == "distractor_unspoken"
    assert f"probe {probe.probe_id}: third_party candidate 'a value nobody mentioned'" in failure.reason


def test_a_one_word_tag_is_an_ordinary_word_but_a_compound_tag_is_a_label():
    assert G.leaked_labels("Nothing is fixed yet, it's all tentative.") == []
    assert G.leaked_labels("That was an assistant_echo, ignore it.") == ["assistant_echo"]
