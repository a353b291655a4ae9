"""The deterministic scorer on the issue's defects, the gold response on a whole smoke build,
and `python -m memlife.memops score`.

Hand-written replies are scored against the move-house topic's five conversations, planned at a
seed that gives the values the replies name (moving date March 21, later April 4; the flatmate's
March 28; April 11 floated as a possibility; the storage unit gate code 3307 deleted; the new
landlord Ms. Lindqvist kept).
"""
from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from memlife.memops.scoring.metrics import gold_failures
from memlife.memops.data.response import (
    applicable_labels, gold_operations, gold_response, leakage_applies, stale_applies)
from memlife.memops.data import backgrounds, gates, longctx, plan, realize
from memlife.memops.scoring import metrics, stance
from memlife.memops.analyses import aggregate
from memlife.memops.data import kits as K
from memlife.memops.build import build, params_for
from memlife.memops.data.response import parse_response
from memlife.memops.data.schema import OP_TYPES, Instance, dumps

HERE = Path(__file__).parent
MOVE_SEED = 9714  # the first seed at which the move kit draws the values above


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    out = tmp_path_factory.mktemp("smoke")
    params = replace(params_for("smoke"), realizer="template", verifier="off")
    res = build(params, out, progress=False)
    return out / "instances.jsonl", res.instances


@pytest.fixture(scope="module")
def move_build(tmp_path_factory):
    """The move-house topic's five conversations, realized, embedded and written as a file."""
    kit = next(k for k in K.load_kits() if k.key == "move")
    topic = backgrounds._background(0, kit, MOVE_SEED)
    assert (topic.main_values, topic.temp_value, topic.control_value, topic.owner) == (
        ("March 21", "April 4", "April 11", "March 28"), "3307#", "Ms. Lindqvist", "my flatmate"), "move kit changed"
    instances = [longctx.embed(realize.template_instance(plan.plan_conversation(topic, op, MOVE_SEED)), 3000, MOVE_SEED)
                 for op in OP_TYPES]
    assert all(gates.check(i, gold_failures) == [] for i in instances)
    path = tmp_path_factory.mktemp("move") / "instances.jsonl"
    path.write_text("".join(dumps(i) + "\n" for i in instances))
    return path, instances


@pytest.fixture(scope="module")
def move(move_build):
    """probe_id -> (instance, probe) for the move-house conversations."""
    _, instances = move_build
    return {p.probe_id: (i, p) for i in instances for p in i.probes}


def _reply(answer, ops=(), prov=()):
    return json.dumps({"answer": answer, "operations": list(ops), "provenance": list(prov)})


def label(move, pid, answer, ops=(), prov=()):
    inst, probe = move[pid]
    return metrics.score(parse_response(_reply(answer, ops, prov)), inst, probe)


# ---------------------------------------------------------------- the gold response scores perfect


def _check_perfect(inst: Instance, probe) -> metrics.Labels:
    lab = metrics.score(gold_response(inst, probe), inst, probe)
    assert lab.accuracy is True and lab.op_f1 == 1.0 and lab.provenance is True, (probe.probe_id, lab)
    assert lab.leakage is (False if leakage_applies(inst, probe) else None), probe.probe_id
    assert lab.stale is (False if stale_applies(inst, probe) else None), probe.probe_id
    is_reflect = any(o.type == "reflect" for o in gold_operations(inst, probe))
    assert lab.reflect is (True if is_reflect else None), probe.probe_id
    assert lab.malformed is False and lab.perfect and metrics.gold_failures(inst, probe) == []
    return lab


def test_gold_response_scores_perfect_on_every_smoke_probe(smoke):
    _, instances = smoke
    labels = [_check_perfect(i, p) for i in instances for p in i.probes]
    assert len(labels) == 50
    # every label that can apply was exercised
    assert any(x.leakage is False for x in labels) and any(x.stale is False for x in labels)
    assert any(x.reflect is True for x in labels)


def test_gold_response_scores_perfect_on_the_shipped_instance():
    inst = Instance.model_validate(json.loads((HERE / "data" / "memops_instance.json").read_text()))
    for p in inst.probes:
        _check_perfect(inst, p)


def test_gold_response_carries_the_probes_operations_and_quotes(move):
    inst, probe = move["T000-forget-p2"]
    r = gold_response(inst, probe).response
    assert r.answer == probe.expected_answer
    assert [(o.type, o.target) for o in r.operations] == [("remember", "new landlord's name"),
                                                          ("forget", "storage unit gate code")]
    assert r.provenance == [s.quote for s in probe.provenance]


def test_build_gate_refuses_a_probe_whose_gold_answer_only_mentions_a_required_value(move):
    inst, probe = move["T000-remember-p3"]
    # "the later mention of April 11 was only a possibility": contains April 11, does not state it
    bad = probe.model_copy(update={"answer_key": probe.answer_key.model_copy(
        update={"required": ["march 21", "april 11"], "forbidden": ["march 28"]})})
    broken = inst.model_copy(update={"probes": [bad if p.probe_id == bad.probe_id else p for p in inst.probes]})
    assert gates.check(inst, gold_failures) == []
    got = gates.check(broken, gold_failures)
    assert [f.gate for f in got] == ["gold_response"]
    assert "T000-remember-p3" in got[0].reason and "required value 'april 11' not stated" in got[0].reason


# ---------------------------------------------------------------- the defects, one by one


def test_forget_trace_names_the_removed_target_without_leaking(move):
    lab = label(move, "T000-forget-p1", "You asked me to delete the storage unit gate code; I removed it.")
    assert lab.accuracy is True and lab.leakage is False
    lab = label(move, "T000-forget-p1", "You asked me to delete the gate code 3307.")
    assert lab.leakage is True and lab.accuracy is True  # named as deleted, yet reproduced: a leak
    assert label(move, "T000-forget-p1", "The storage unit gate code is 3307.").accuracy is False


def test_a_removed_value_is_not_a_kept_one(move):
    # Only the forgotten target may be stated as removed; the kept control must be current.
    assert label(move, "T000-forget-p3", "Your new landlord's name is still Ms. Lindqvist.").accuracy is True
    assert label(move, "T000-forget-p3", "I deleted Ms. Lindqvist, as you asked.").accuracy is False
    assert label(move, "T000-forget-p3", "I did not delete Ms. Lindqvist; the gate code is gone.").accuracy is True


def test_a_tentative_value_is_not_asserted(move):
    pid = "T000-remember-p3"
    assert label(move, pid, "Your moving date is March 21; the later mention of April 11 was only a possibility.").accuracy
    assert label(move, pid, "March 21. You were only considering April 11 at one point.").accuracy
    assert label(move, pid, "March 21, maybe April 11.").accuracy
    assert not label(move, pid, "Your moving date is April 11.").accuracy
    assert not label(move, pid, "Your moving date is March 21 or April 11.").accuracy


def test_someone_elses_value_is_not_asserted_as_the_users(move):
    pid = "T000-remember-p4"
    assert label(move, pid, "March 21. March 28 belongs to your flatmate and April 11 was only a tentative idea.").accuracy
    assert label(move, pid, "March 28 is your flatmate's moving date; yours is March 21.").accuracy
    assert label(move, pid, "Your flatmate's moving date is March 28, yours is March 21.").accuracy
    assert not label(move, pid, "Your moving date is March 28.").accuracy
    # ownership works both ways: the user's own value handed to the flatmate is not stated
    assert not label(move, pid, "Your flatmate's moving date is March 21.").accuracy


def test_a_rejected_candidate_named_with_its_owner(move):
    pid = "T000-remember-p4"
    assert label(move, pid, "Your moving date is March 21, not March 28, that was your flatmate's.").accuracy
    assert label(move, pid, "It is March 21 (March 28 — that was your flatmate's).").accuracy
    assert not label(move, pid, "It is March 21, and also March 28.").accuracy


def test_changed_from_x_to_y_states_x_as_the_previous_value(move):
    # A trajectory that asks for the history needs the value the change started from.
    traj = "T000-trajectory-p2"
    assert move[traj][1].answer_key.required == ["march 21", "april 4"]
    assert label(move, traj, "You changed your moving date from March 21 to April 4.").accuracy is True
    assert label(move, traj, "It is April 4 now, not March 21.").accuracy is False  # history denied
    # Where only the current value is asked, the old one is stated as previous: not stale.
    lab = label(move, "T000-update-p3", "It changed from March 21 to April 4.")
    assert lab.accuracy is True and lab.stale is False
    lab = label(move, "T000-update-p3", "It changed from April 4 to March 21.")  # the wrong way round
    assert lab.accuracy is False and lab.stale is True


def test_negation_states_the_new_value_and_not_the_old_one(move):
    lab = label(move, "T000-update-p3", "It is April 4, not March 21 anymore.")
    assert lab.accuracy is True and lab.stale is False
    lab = label(move, "T000-update-p3", "March 21 is no longer valid; it is April 4.")
    assert lab.accuracy is True and lab.stale is False
    lab = label(move, "T000-update-p3", "It is still March 21, not April 4.")
    assert lab.accuracy is False and lab.stale is True
    lab = label(move, "T000-update-p4", "April 4. March 21 was replaced and March 28 is your flatmate's.")
    assert lab.accuracy is True and lab.stale is False


def test_a_perfect_reply_identifies_the_operations(move):
    inst, probe = move["T000-trajectory-p3"]  # "What is my moving date at this point?"
    own = [{"type": o.type, "target": o.target, "old_value": o.old_value or "", "new_value": o.new_value or ""}
           for o in gold_operations(inst, probe)]
    every = [{"type": o.type, "target": o.target, "old_value": o.old_value or "", "new_value": o.new_value or ""}
             for o in inst.operations]
    assert len(own) == 2 and len(every) == 5
    assert label(move, "T000-trajectory-p3", "April 4.", own).operation is True
    # the conversation's other operations (the gate code, the reflection) are events of the gold trace
    # too: naming them as well still identifies every event the question is about and invents none
    # (before: Operation F1 against the probe's own operations, 2 * 2 / (2 + 5))
    whole = label(move, "T000-trajectory-p3", "April 4.", every)
    assert whole.operation is True and whole.op_f1 == 1.0
    assert label(move, "T000-trajectory-p3", "April 4.", own[:1]).operation is False  # one event missed


def test_quoting_the_question_back_is_not_provenance(smoke):
    _, instances = smoke
    for inst in instances:
        for p in inst.probes:
            echo = metrics.score(parse_response(_reply(p.expected_answer, prov=[p.question])), inst, p)
            assert echo.provenance is False, p.probe_id
    # a real quote, even without its small talk, still counts
    # (the first quote with small talk set off by a comma, wherever the realizer's draws put one)
    inst, probe = next((i, p) for i in instances for p in i.probes if "," in p.provenance[-1].quote)
    quote = probe.provenance[-1].quote
    part = max(quote.split(","), key=len).strip()
    assert part != quote and stance.quotes_overlap(part, quote, question=probe.question)
    assert not stance.quotes_overlap("the of and is my", quote)


def test_malformed_reply_is_its_own_label_not_a_leak(move):
    inst, probe = move["T000-forget-p1"]
    lab = metrics.score(parse_response('{"answer": "3307", "operations": ['), inst, probe)
    assert lab.malformed is True and lab.leakage is None and lab.accuracy is False and lab.op_f1 == 0.0
    inst, probe = move["T000-update-p3"]
    assert metrics.score(parse_response(""), inst, probe).stale is None


# ---------------------------------------------------------------- scoring a file, and the CLI


def _write(path: Path, rows) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "memlife.memops", "score", *map(str, args)],
                          capture_output=True, text=True)


def test_score_file_and_cli_on_good_input(move_build, tmp_path):
    path, instances = move_build
    probes = {p.probe_id: (i, p) for i in instances for p in i.probes}
    rows = [{"id": "gold", "probe_id": "T000-update-p3",
             "response": gold_response(*probes["T000-update-p3"]).raw},
            {"id": 7, "probe_id": "T000-update-p3", "response": _reply("It is still March 21.")},
            {"id": "bad", "probe_id": "T000-forget-p1", "response": "I think the code was 3307"},
            {"id": "fenced", "probe_id": "T000-reflect-p3",
             "response": "```json\n" + gold_response(*probes["T000-reflect-p3"]).raw + "\n```"}]
    responses = _write(tmp_path / "responses.jsonl", rows)
    got = metrics.score_file(path, responses)
    assert [r["id"] for r in got] == ["gold", 7, "bad", "fenced"]
    assert got[0] == {"id": "gold", "probe_id": "T000-update-p3", "accuracy": True, "op_f1": 1.0,
                      "provenance": True, "leakage": None, "stale": False, "reflect": None, "malformed": False,
                      "operation": True}
    assert got[1]["accuracy"] is False and got[1]["stale"] is True
    assert got[2] == {"id": "bad", "probe_id": "T000-forget-p1", "accuracy": False, "op_f1": 0.0,
                      "provenance": False, "leakage": None, "stale": None, "reflect": None, "malformed": True,
                      "operation": False}
    assert got[3]["reflect"] is True and got[3]["malformed"] is False

    out = tmp_path / "labels.jsonl"
    run = _cli(path, responses, "--out", out)
    assert run.returncode == 0, run.stderr
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert lines == got
    assert set(lines[0]) == {"id", "probe_id", "accuracy", "op_f1", "provenance", "leakage", "stale", "reflect",
                             "malformed", "operation"}
    assert '"leakage": null' in out.read_text().splitlines()[0]


@pytest.mark.parametrize("rows,expected", [
    (['{"id": "a", "probe_id": "T000-update-p3", "response": "x"', ], ":1: not valid JSON"),
    ([{"id": "a", "response": "x"}], ":1: field probe_id: missing"),
    ([{"id": "a", "probe_id": "T000-update-p3"}], ":1: field response: missing"),
    ([{"probe_id": "T000-update-p3", "response": "x"}], ":1: field id: missing"),
    ([{"id": "a", "probe_id": "T000-update-p3", "response": "x"}, "",
      {"id": "b", "probe_id": "T999-nope-p1", "response": "x"}], ":3: field probe_id: unknown probe 'T999-nope-p1'"),
    ([{"id": "a", "probe_id": "T000-update-p3", "response": "x"},
      {"id": "a", "probe_id": "T000-update-p4", "response": "y"}], ":2: field id: duplicate id 'a' (first on line 1)"),
    ([{"id": "a", "probe_id": "T000-update-p3", "response": {"answer": "x"}}], ":1: field response: must be"),
    (["[1, 2]"], ":1: expected a JSON object"),
])
def test_score_cli_rejects_bad_input_naming_file_line_and_field(move_build, tmp_path, rows, expected):
    path, _ = move_build
    responses = _write(tmp_path / "responses.jsonl", rows)
    out = tmp_path / "labels.jsonl"
    with pytest.raises(metrics.ResponsesFileError, match=expected.split(":", 2)[-1].strip()[:20]):
        metrics.score_file(path, responses, out)
    run = _cli(path, responses, "--out", out)
    assert run.returncode == 1
    assert f"{responses}{expected}" in run.stderr, run.stderr
    assert not out.exists()  # nothing half-written


def test_score_cli_rejects_a_bad_instances_file(tmp_path):
    bad = _write(tmp_path / "instances.jsonl", ['{"instance_id": "x"}'])
    responses = _write(tmp_path / "responses.jsonl", [{"id": "a", "probe_id": "p1", "response": "x"}])
    run = _cli(bad, responses, "--out", tmp_path / "labels.jsonl")
    assert run.returncode == 1 and f"{bad}:1: instance x: field" in run.stderr
    run = _cli(tmp_path / "missing.jsonl", responses, "--out", tmp_path / "labels.jsonl")
    assert run.returncode == 1 and "missing.jsonl: no such file" in run.stderr


def test_labels_rescore_journalled_replies_with_the_current_scorer(move, tmp_path):
    from memlife.memops.scoring import labels
    from memlife.memops.systems import answering

    inst, probe = move["T000-forget-p1"]
    # a line journalled by the old scorer: a malformed reply counted as a leak
    old = {"system": "temp_lora", "setting": "adjacent", "instance_id": inst.instance_id,
           "probe_id": probe.probe_id, "run_key": "k", "raw": '{"answer": "3307", "operations": [',
           "malformed": True, "answer": None, "accuracy": False, "op_f1": 0.0, "provenance": False,
           "leakage": True, "stale": None, "reflect": None}
    journal = answering.Journal(tmp_path / "journal" / "temp_lora__adjacent.jsonl")
    journal.append(old)
    assert answering.collect(tmp_path)["leakage"].tolist() == [True]  # the replies: as journalled
    df = labels.run(answering.collect(tmp_path), [inst], answering.EvalConfig(judge=False), tmp_path, progress=False)
    assert df["leakage"].isna().all() and df["malformed"].tolist() == [True]
    assert aggregate.summarize(df, ["system"]).iloc[0]["malformed"] == 1.0
    assert journal.read() == [old]  # the journal itself is never rewritten


# ---------------------------------------------------------------- room for a perfect reply


def test_the_readers_grammar_admits_every_gold_response(smoke):
    """The embedded reader's sampling grammar is widened to the dataset's gold responses: every
    gold response is grammatical, where the fixed floors rule some out (5 operations, 7 quotes)."""
    import jsonschema

    from memlife.memops.systems import answering
    from memlife.memops.data.response import GRAMMAR_BOUNDS, bounded_json_schema

    _, instances = smoke
    golds = [json.loads(gold_response(i, p).raw) for i in instances for p in i.probes]
    widened = jsonschema.Draft202012Validator(bounded_json_schema(answering.gold_grammar_bounds(instances)))
    assert all(widened.is_valid(g) for g in golds)
    floors = jsonschema.Draft202012Validator(bounded_json_schema(GRAMMAR_BOUNDS))
    assert sum(not floors.is_valid(g) for g in golds) > 0  # what the fixed bounds used to forbid
    bounds = answering.gold_grammar_bounds(instances)
    assert bounds["operations_items"] == max(len(g["operations"]) for g in golds) > GRAMMAR_BOUNDS["operations_items"]


def test_a_token_cap_below_a_gold_response_is_refused(smoke):
    from memlife.memops.systems import answering, reading

    class Endpoint:  # an endpoint reader: o200k counts
        is_embedded, model = False, "m"

    _, instances = smoke
    asked = [(i, list(i.probes)) for i in instances]
    longest = answering.check_reply_room(reading.Reader(Endpoint(), max_tokens=10_000), asked)
    gold = max((gold_response(i, p).raw for i, ps in asked for p in ps), key=len)
    assert longest >= len(gold) // 8 > 0
    assert answering.check_reply_room(reading.Reader(Endpoint(), max_tokens=longest), asked) == longest
    with pytest.raises(answering.ReplyRoomError, match=rf"reader_max_tokens={longest - 1} .*\({longest} tokens\)"):
        answering.check_reply_room(reading.Reader(Endpoint(), max_tokens=longest - 1), asked)


def test_the_embedded_readers_tokens_are_its_own_tokenizers():
    from memlife.memops.systems import reading
    from memlife.models import tokens

    class Embedded:
        is_embedded, model = True, "m"

    text = '{"answer": "April 4, 2024 at 10:30", "operations": [], "provenance": []}'
    n = reading.Reader(Embedded()).reply_tokens(text)
    # SmolLM2's BPE splits digits one by one: more tokens than o200k, which groups them
    assert n > tokens.count(text) and n == tokens.count_embedded(text)


def test_a_one_probe_cut_covers_every_label_and_probe_type(smoke):
    """max_probes=1 over one instance per op type (the quick cut's shape) still asks a probe to
    which leakage, stale and reflect each apply, and every probe type the instances offer."""
    from memlife.memops.systems import answering

    _, instances = smoke
    chosen = answering.select_instances(instances, 6)
    offered = {p.probe_type for i in chosen for p in i.probes}
    offered_labels = set().union(*(applicable_labels(i, p) for i in chosen for p in i.probes))
    assert {"leakage", "stale", "reflect"} <= offered_labels
    cut = answering.select_probes(chosen, 1)
    assert [len(ps) for ps in cut] == [1] * len(chosen)
    asked = [(i, p) for i, ps in zip(chosen, cut) for p in ps]
    assert set().union(*(applicable_labels(i, p) for i, p in asked)) == offered_labels
    assert {p.probe_type for _, p in asked} == offered or len(offered) > len(chosen)
    assert answering.select_probes(chosen, 1) == cut


def test_the_labels_that_apply_are_those_the_scorer_gives_the_gold_reply(smoke, move):
    """`applicable_labels` reads the answer key alone (so that choosing probes needs no scorer);
    it must name exactly the labels the scorer gives each probe's gold reply."""
    pairs = [(i, p) for i in smoke[1] for p in i.probes] + list(move.values())
    for inst, probe in pairs:
        gold = metrics.score(gold_response(inst, probe), inst, probe).as_dict()
        assert applicable_labels(inst, probe) == {k for k, v in gold.items() if k != "malformed" and v is not None}, \
            probe.probe_id


def test_applicable_labels_are_the_gold_responses_non_null_labels(move):
    inst, probe = move["T000-update-p3"]
    assert applicable_labels(inst, probe) >= {"accuracy", "op_f1", "provenance"}
    assert ("stale" in applicable_labels(inst, probe)) == bool(stale_applies(inst, probe))
