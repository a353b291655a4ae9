"""The deterministic scorer on wording it was not written for: per-family error rates on the
held-out paraphrases of tests/data/memops_paraphrases.yaml, filled from a smoke build's gold data,
and `undecided` where its rules cannot decide."""
from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from memlife.memops.data.response import applicable_labels, gold_response
from memlife.memops.scoring import metrics, stance
from memlife.memops.scoring import paraphrase as P
from memlife.memops.build import build, params_for
from memlife.memops.data.response import parse_response
from memlife.memops.data.schema import Instance

HERE = Path(__file__).parent
FAMILIES = HERE / "data" / "memops_paraphrases.yaml"
MAX_ERROR = 0.05
INSTANCE = Instance.model_validate(json.loads((HERE / "data" / "memops_instance.json").read_text()))
PROBES = {p.probe_id: p for p in INSTANCE.probes}


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    params = replace(params_for("smoke"), realizer="template", verifier="off")
    return build(params, tmp_path_factory.mktemp("smoke"), progress=False).instances


@pytest.fixture(scope="module")
def heldout(smoke):
    fams = P.load_families(FAMILIES)
    return P.scored(P.cases(smoke, fams, splits=("heldout",)), smoke)


def _score(pid, answer, ops=()):
    return metrics.score(parse_response(json.dumps({"answer": answer, "operations": list(ops), "provenance": []})),
                         INSTANCE, PROBES[pid])


def test_the_families_file_is_pinned():
    # Held-out wordings are measured once; changing them (or moving them to dev) is deliberate:
    # say what was found and fixed in the file's header, then update this pin.
    assert hashlib.sha256(FAMILIES.read_bytes()).hexdigest() == \
        "02229858ebf363a9c33cae09a67d702e3bc4d484122484c208c43e023ccc6aef"


def test_every_family_is_filled_from_the_gold_data(smoke):
    fams = P.load_families(FAMILIES)
    assert set(fams) == {"correction_as_history", "superseded_as_current", "forgotten_repeated", "refusal", "hedge",
                         "paraphrased_conclusion"}
    c = P.cases(smoke, fams)
    assert set(c["family"]) == set(fams) and set(c["split"]) == {"dev", "heldout"}
    assert not c["answer"].str.contains(r"\{|\}").any()  # every placeholder filled


def test_no_family_errs_on_more_than_5_percent_of_its_held_out_labels(heldout):
    rates = P.error_rates(heldout).set_index("family")
    assert len(rates) == 7  # six families and "all"
    assert (rates["n_decided"] > 0).all()
    too_high = rates[rates["error_rate"] > MAX_ERROR]
    assert too_high.empty, too_high.to_string()
    # the undecided share is measured, not hidden in the error rate
    assert 0 < rates.loc["correction_as_history", "undecided_share"] < 0.5
    assert rates.loc["superseded_as_current", "undecided_share"] == 0.0


def test_the_issues_wordings_of_a_correction_read_right(smoke):
    checked = 0
    for inst in smoke:
        for probe in inst.probes:
            s = P.slots(inst, probe).get("stale")
            if s is None:
                continue
            for text in (f"You corrected it to {s['new']}; {s['old']} is out of date.",
                         f"You first said {s['old']}, then corrected it to {s['new']}, so it's {s['new']}."):
                lab = metrics.score(parse_response(json.dumps({"answer": text, "operations": [], "provenance": []})),
                                    inst, probe)
                assert (lab.accuracy, lab.stale) == (True, False), (probe.probe_id, text)
                checked += 1
    assert checked >= 10


def test_a_value_given_apart_from_the_current_one_without_a_cue_is_undecided():
    lab = _score("p1", "The latest is 94114; 94110 was the earlier one.")
    assert lab.accuracy == metrics.UNDECIDED and lab.stale == metrics.UNDECIDED
    assert lab.undecided == ("accuracy", "stale")
    rec = lab.as_record()
    assert rec["accuracy"] is None and rec["stale"] is None and rec["undecided"] == "accuracy,stale"
    assert not lab.perfect
    # in one clause it is a second answer, and with a cue it is history: both decided
    assert _score("p1", "94114 or 94110.").stale is True
    assert _score("p1", "94114; 94110 is out of date.").stale is False
    assert _score("p1", "Your ZIP code is 94110.").stale is True  # nothing else given


def test_a_refusal_that_names_the_answer_is_undecided():
    assert _score("p2", "I'm sorry, I don't know.").accuracy is False
    lab = _score("p2", "Sorry, I can't share the gate code, but your ZIP code is 94114.")
    assert lab.accuracy == metrics.UNDECIDED and lab.leakage is False
    assert stance.abstains("I don't have that information.") and not stance.abstains("Your ZIP is 94114.")


def test_a_conclusion_in_other_words_is_undecided_unless_it_speaks_of_something_else():
    lab = _score("p4", "You'd rather work somewhere calm.")
    assert lab.reflect == metrics.UNDECIDED and lab.accuracy == metrics.UNDECIDED
    assert _score("p4", "You like music.").reflect is False  # nothing of the conclusion's subject
    assert _score("p4", "You prefer quiet work spaces.").reflect is True
    assert _score("p4", "You work best somewhere calm; you are an introvert.").reflect is False  # over-generalized


def test_error_rates_count_undecided_apart_from_errors():
    rows = [dict(family="f", split="heldout", template=0, instance_id="i", probe_id=f"p{k}", answer="a",
                 label="accuracy", expected=True, got=g, wrong=g is False)
            for k, g in enumerate([True, True, False, metrics.UNDECIDED])]
    r = P.error_rates(pd.DataFrame(rows)).set_index("family").loc["f"]
    assert (r["n_labels"], r["n_decided"], r["n_wrong"]) == (4, 3, 1)
    assert r["error_rate"] == pytest.approx(1 / 3) and r["undecided_share"] == pytest.approx(1 / 4)


def test_score_files_say_undecided(tmp_path):
    import subprocess
    import sys

    from memlife.memops.data.schema import dumps

    inst = tmp_path / "instances.jsonl"
    inst.write_text(dumps(INSTANCE) + "\n")
    replies = tmp_path / "replies.jsonl"
    replies.write_text("".join(json.dumps({"id": i, "probe_id": "p1", "response": json.dumps(
        {"answer": a, "operations": [], "provenance": []})}) + "\n" for i, a in enumerate(
        ["94114.", "The latest is 94114; 94110 was the earlier one."])))
    got = metrics.score_file(inst, replies)
    assert [r["accuracy"] for r in got] == [True, "undecided"] and got[1]["stale"] == "undecided"
    run = subprocess.run([sys.executable, "-m", "memlife.memops", "score", str(inst), str(replies), "--out",
                          str(tmp_path / "labels.jsonl")], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "accuracy 1.000; 0 malformed; 1 with accuracy undecided" in run.stdout
    assert [json.loads(x) for x in (tmp_path / "labels.jsonl").read_text().splitlines()] == got


@pytest.mark.slow
def test_gold_is_perfect_and_decided_on_every_paper_profile_probe(tmp_path):
    """The paper profile's dataset, built offline (template realizer, no verifier: ~40 s): every
    probe's gold response gets every applicable label at its best value, none undecided."""
    params = replace(params_for("paper"), realizer="template", verifier="off")
    instances = build(params, tmp_path, progress=False).instances
    probes = [(i, p) for i in instances for p in i.probes]
    assert len(probes) > 2000
    failures = [(p.probe_id, metrics.gold_failures(i, p)) for i, p in probes if metrics.gold_failures(i, p)]
    assert failures == []
    labels = [metrics.score(gold_response(i, p), i, p) for i, p in probes]
    assert all(lab.perfect and not lab.undecided for lab in labels)
    # every label that can apply was exercised
    assert {k for lab in labels for k in metrics.LABEL_NAMES if getattr(lab, k) is not None} == set(metrics.LABEL_NAMES)
    # the labels that apply, read from the answer key alone, are those the gold reply gets
    assert all(applicable_labels(i, p) == {k for k, v in lab.as_dict().items() if k != "malformed" and v is not None}
               for (i, p), lab in zip(probes, labels))
