"""Deterministic scorer on hand-made responses whose labels are known by construction."""
import hashlib
import json
import math
from pathlib import Path

import pytest

from memlife.memops.scoring import judging, metrics, stance
from memlife.memops.analyses import aggregate
from memlife.memops.data.response import parse_response
from memlife.memops.data.schema import Instance

INSTANCE = Instance.model_validate(json.loads((Path(__file__).parent / "data" / "memops_instance.json").read_text()))
PROBES = {p.probe_id: p for p in INSTANCE.probes}


def _resp(answer, ops=(), prov=()):
    return parse_response(json.dumps({"answer": answer, "operations": list(ops), "provenance": list(prov)}))


def _score(pid, answer, ops=(), prov=()):
    return metrics.score(_resp(answer, ops, prov), INSTANCE, PROBES[pid])


# ---------------------------------------------------------------- negation-aware assertion

@pytest.mark.parametrize("text,value,expected", [
    ("Your ZIP code is 94114, not 94110 anymore.", "94110", False),
    ("Your ZIP code is 94114, not 94110 anymore.", "94114", True),
    ("It is not 94110 anymore", "94110", False),
    ("Your ZIP isn't 94110 anymore; it's 94114.", "94110", False),
    ("It changed from 94110 to 94114.", "94110", False),  # stated, but as the previous value
    ("It changed from 94110 to 94114.", "94114", True),
    ("94110 was replaced by 94114", "94114", True),
    ("94110 was replaced by 94114", "94110", False),
    ("94110 is no longer valid", "94110", False),
    ("Your ZIP code is 94110.", "94110", True),
    ("Your old ZIP 94110 is gone, the current one is 94110.", "94110", True),  # second mention asserts
    ("ZIP 941100", "94110", False),  # whole tokens only
])
def test_asserts_is_negation_aware(text, value, expected):
    assert stance.asserts(text, value) is expected


# Each occurrence gets the stances its clause gives it; "from" marks the value a change started
# from, which is stated (a trajectory's history needs it), not negated.
@pytest.mark.parametrize("text,value,stances", [
    ("Your ZIP code is 94114, not 94110 anymore.", "94110", {"previous"}),
    ("It changed from 94110 to 94114.", "94110", {"previous"}),
    ("It changed from 94110 to 94114.", "94114", set()),
    ("94114 (corrected from 94110).", "94114", set()),
    ("94114 (corrected from 94110).", "94110", {"previous"}),
    ("Your ZIP code is not 94110.", "94110", {"negated"}),
    ("94110 is wrong.", "94110", {"negated"}),
    ("94110 was replaced by 94114", "94110", {"previous"}),
    ("94114 replaced 94110", "94114", set()),  # active voice: the participle is about 94110
    ("I deleted gate code 4471 as asked.", "4471", {"removed"}),
    ("4471 was deleted at your request.", "4471", {"removed"}),
    ("I did not delete 4471.", "4471", set()),  # a negated deletion leaves the value current
    ("4471 was not deleted.", "4471", set()),
    ("The later mention of 94103 was only a possibility.", "94103", {"tentative"}),
    ("Maybe 94103.", "94103", {"tentative"}),
    ("94107 belongs to your sister.", "94107", {"others"}),
    ("94107 is your sister's ZIP code.", "94107", {"others"}),
    ("Your sister's ZIP code is 94107.", "94107", {"others"}),
    ("It's 94114.", "94114", set()),  # the 's of a contraction hands nothing to anyone
    ("You would rather work in quiet rooms.", "quiet", set()),  # a preference, not "rather than"
    ("Quiet rooms rather than noisy ones.", "noisy", {"negated"}),
])
def test_stances_of_an_occurrence(text, value, stances):
    assert stance.stances(text, value) == [frozenset(stances)]


def test_a_previous_value_is_stated_only_where_the_history_allows_it():
    text = "It changed from 94110 to 94114."
    assert not stance.states(text, "94110")
    assert stance.states(text, "94110", frozenset({stance.PREVIOUS}))
    assert not stance.states("Your ZIP code is not 94110.", "94110", frozenset({stance.PREVIOUS}))


def test_an_apostrophe_s_inside_a_target_name_is_not_an_owner():
    text = "Your new landlord's name is Ms. Lindqvist."
    assert stance.stances(text, "Ms. Lindqvist") == [frozenset({"others"})]  # no names: read as an owner
    assert stance.asserts(text, "Ms. Lindqvist", names=" new landlord s name ")


# ---------------------------------------------------------------- stale value

def test_stale_value_label():
    assert _score("p1", "Your ZIP code is 94110.").stale is True
    good = _score("p1", "Your ZIP code is 94114, not 94110 anymore.")
    assert good.stale is False and good.accuracy is True
    # the sister's ZIP is a neighbouring value: forbidden, so inaccurate, but not stale
    neighbour = _score("p1", "Your ZIP code is 94107 or 94114.")
    assert neighbour.accuracy is False and neighbour.stale is False


def test_stale_not_applicable_without_forbidden_old_value():
    # p5 asks for the trajectory: the old value is allowed there
    lab = _score("p5", "First 94110, then 94114 which is current.")
    assert lab.stale is None and lab.accuracy is True


# ---------------------------------------------------------------- leakage

def test_leakage_counts_any_mention_of_forgotten_value():
    leak = _score("p2", "ZIP 94114; I deleted gate code 4471 as asked.")
    assert leak.leakage is True and leak.accuracy is True  # negated, so not asserted, yet leaked
    clean = _score("p2", "ZIP 94114; no gate code is stored.")
    assert clean.leakage is False and clean.accuracy is True
    assert _score("p1", "94114").leakage is None  # p1 is not about a forgotten value


# ---------------------------------------------------------------- operation identification

def test_operation_label_is_against_the_gold_trace():
    ops = [
        {"type": "update", "target": "ZIP code", "old_value": "94110", "new_value": "94114"},  # alias match
        {"type": "forget", "target": "gate code", "old_value": "", "new_value": ""},           # in the trace, not p1's
        {"type": "remember", "target": "home ZIP code", "old_value": "", "new_value": "94114"},  # no such event
    ]
    # precision against the whole trace 2/3 (the remember is invented), recall of p1's op2 1/1
    lab = _score("p1", "94114", ops)
    assert lab.operation is False and lab.op_f1 == pytest.approx(2 * (2 / 3) / (2 / 3 + 1))
    assert _score("p1", "94114", ops[:1]).operation is True  # naming exactly what matters
    assert _score("p1", "94114", ops[:2]).operation is True  # another event of the trace is no error
    assert _score("p1", "94114", ops[:1] + ops[:1]).operation is True  # a repeat invents nothing
    all_ops = [{"type": o.type, "target": o.target, "old_value": "", "new_value": ""} for o in INSTANCE.operations]
    # the conversation's whole gold trace identifies every event p1 is about, and invents none
    whole = _score("p1", "94114", all_ops)
    assert whole.operation is True and whole.op_f1 == 1.0
    # p2 is about op2 and op3: naming one of them misses an event (recall 1/2)
    miss = _score("p2", "94114", ops[:1])
    assert miss.operation is False and miss.op_f1 == pytest.approx(2 / 3)
    assert _score("p2", "94114", ops[:2]).operation is True
    none = _score("p1", "94114")
    assert none.operation is False and none.op_f1 == 0.0


# ---------------------------------------------------------------- provenance

def test_provenance_overlap():
    gold = "my ZIP code is actually 94114, not 94110"
    assert _score("p1", "94114", prov=["Sorry, I had it wrong: my ZIP code is actually 94114, not 94110."]).provenance
    assert _score("p1", "94114", prov=[gold.upper()]).provenance
    assert not _score("p1", "94114", prov=["My dentist is Dr. Patel at Mission Dental."]).provenance
    assert not _score("p1", "94114", prov=["the"]).provenance
    assert not _score("p1", "94114").provenance


def test_provenance_covers_every_required_span():
    both = [s.quote for s in PROBES["p2"].provenance]
    assert len(both) == 2 and _score("p2", "94114", prov=both).provenance
    # one of the two required pieces of evidence is not the evidence the answer rests on
    assert not _score("p2", "94114", prov=both[:1]).provenance
    assert not _score("p2", "94114", prov=both[1:]).provenance
    # an extra quote does not count against it
    assert _score("p2", "94114", prov=[*both, "My dentist is Dr. Patel"]).provenance


# ---------------------------------------------------------------- leakage in the answer or the operations

def test_leakage_counts_the_predicted_operations():
    clean = [{"type": "forget", "target": "gate code", "old_value": "", "new_value": ""}]
    leaky = [{"type": "forget", "target": "gate code", "old_value": "4471", "new_value": ""}]
    assert _score("p2", "ZIP 94114; no gate code is stored.", clean).leakage is False
    lab = _score("p2", "ZIP 94114; no gate code is stored.", leaky)
    assert lab.leakage is True and lab.accuracy is True  # the answer is right; the operation leaks
    assert _score("p2", "ZIP 94114.", [{"type": "remember", "target": "gate 4471", "old_value": "",
                                        "new_value": ""}]).leakage is True


# ---------------------------------------------------------------- reflect precision

def test_reflect_precision():
    assert _score("p4", "You prefer quiet spaces for focused work.").reflect is True
    assert _score("p4", "You prefer quiet places, you are an introvert.").reflect is False
    assert _score("p4", "You like quiet rooms; that does not mean you are an introvert.").reflect is True
    assert _score("p4", "You like music.").reflect is False
    assert _score("p1", "94114").reflect is None


def test_reflect_precision_is_scoped_and_reads_the_operations():
    def op(target, new):
        return {"type": "reflect", "target": target, "old_value": "", "new_value": new}

    answer = "You prefer quiet spaces for focused work."
    assert _score("p4", answer, [op("work environment", "prefers quiet spaces")]).reflect is True
    # filed under the user at large, not the work environment: out of scope
    out = _score("p4", answer, [op("personality", "prefers quiet spaces")])
    assert out.reflect is False and out.accuracy is True  # accuracy reads the answer only
    # the answer is fine, the inferred memory over-generalizes
    over = _score("p4", answer, [op("work environment", "the user is an introvert")])
    assert over.reflect is False and over.accuracy is True
    # the conclusion held as a memory counts as inferred, whatever the answer says
    held = _score("p4", "I noted it.", [op("noise preference", "likes quiet rooms for work")])
    assert held.reflect is True and held.accuracy is False


# ---------------------------------------------------------------- malformed

def test_malformed_is_its_own_label_not_a_leak_or_a_stale_value():
    bad = parse_response('{"answer": "94114", "operations": [')
    assert bad.malformed and "not JSON" in bad.error
    lab = metrics.score(bad, INSTANCE, PROBES["p2"])  # leakage and stale both apply to p2
    assert lab == metrics.Labels(accuracy=False, op_f1=0.0, provenance=False, leakage=None, stale=None,
                                 reflect=None, malformed=True, operation=False)
    assert metrics.score(bad, INSTANCE, PROBES["p4"]).reflect is False  # reflect applies: it fails
    off_schema = parse_response('{"answer": "x", "operations": [{"type": "memorize", "target": "t", "old_value": "", "new_value": ""}], "provenance": []}')
    assert off_schema.malformed and off_schema.error.startswith("schema: operations.0.type")
    assert not _resp("94114").malformed and _score("p2", "94114").malformed is False


def test_a_fenced_reply_parses_as_the_reader_parses_it():
    body = json.dumps({"answer": "94114", "operations": [], "provenance": []})
    assert not parse_response(f"```json\n{body}\n```").malformed
    assert parse_response(f"Here you go: {body}").malformed  # anything else around it is not repaired


# ---------------------------------------------------------------- judge prompt + parsing

def test_judge_prompt_is_pinned():
    # Changing the judge prompt changes every judged number: do it on purpose, update this pin.
    pinned = "33d874ccc72cf070308aae737068eb78808ec556cfa9fb5c93a4ce47754af506"
    assert hashlib.sha256(judging.JUDGE_PROMPT.encode()).hexdigest() == pinned
    assert judging.JUDGE_PROMPT_SHA256 == pinned


def test_judge_messages_carry_gold_and_response():
    msg = judging.judge_messages(INSTANCE, PROBES["p1"], _resp("94114"))[0]["content"]
    assert "my ZIP code is actually 94114, not 94110" in msg and '"answer":"94114"' in msg
    assert "[segment 1 turn 2] user: Please forget the gate code 4471" in msg


def test_parse_judge_is_strict():
    ok = judging.parse_judge('{"accuracy": 1, "operation": 0, "provenance": 1, "leakage": "NA", "stale": 0, "reflect": "NA"}')
    assert ok == {"accuracy": True, "operation": False, "provenance": True, "leakage": None, "stale": False, "reflect": None}
    for bad in ("CORRECT", '{"accuracy": 1}', '{"accuracy": "yes", "operation": 0, "provenance": 1, "leakage": 0, "stale": 0, "reflect": 0}',
                '{"accuracy": "NA", "operation": 0, "provenance": 1, "leakage": 0, "stale": 0, "reflect": 0}',
                'Sure! {"accuracy": 1, "operation": 0, "provenance": 1, "leakage": 0, "stale": 0, "reflect": 0}'):
        with pytest.raises(judging.JudgeParseError):
            judging.parse_judge(bad)


def test_summarize_means_over_applicable_probes():
    recs = [
        {"system": "s", "accuracy": True, "op_f1": 1.0, "provenance": True, "leakage": None, "stale": True, "reflect": None},
        {"system": "s", "accuracy": False, "op_f1": 0.5, "provenance": False, "leakage": True, "stale": False, "reflect": None},
    ]
    out = aggregate.summarize(recs, ["system"]).iloc[0]
    assert out["accuracy"] == 0.5 and out["op_f1"] == 0.75 and out["leakage"] == 1.0 and out["stale"] == 0.5
    assert math.isnan(out["reflect"]) and out["n"] == 2


def test_summarize_rates_leaks_over_well_formed_replies_and_reports_malformed():
    well = metrics.score(_resp("ZIP 94114; gate code 4471."), INSTANCE, PROBES["p2"])
    bad = metrics.score(parse_response("{not json"), INSTANCE, PROBES["p2"])
    recs = [{"system": "s", **well.as_dict()}, {"system": "s", **bad.as_dict()}, {"system": "s", **bad.as_dict()}]
    out = aggregate.summarize(recs, ["system"]).iloc[0]
    # one leak among the one well-formed reply, not three of three
    assert out["leakage"] == 1.0 and out["malformed"] == pytest.approx(2 / 3) and out["n"] == 3
    assert out["accuracy"] == 0.0
    assert "Malformed" in aggregate.summarize(recs, ["system"]).rename(columns=aggregate.TABLE3_COLUMNS)


def test_a_word_hyphenated_to_a_value_is_no_cue_about_it():
    """"metrics-first reporting" states metrics (a kit's reflection conclusion, which the gold
    response quotes); "metrics first, then ..." and "you first said metrics" place it in the past."""
    from memlife.memops.scoring.stance import stances

    assert stances("Your manager values data-backed, metrics-first reporting.", "metrics") == [frozenset()]
    assert stances("metrics first, then words", "metrics") == [frozenset({"previous"})]
    assert stances("You first said metrics, then words", "metrics") == [frozenset({"previous"})]
