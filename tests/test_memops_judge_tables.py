"""The LLM judge in Tables 3-5: it labels what the scorer left undecided, and its agreement with
the scorer on the rest it saw; on hand-made records whose numbers are worked out by hand, then end
to end through answering.run and labels.run with a stand-in judge."""
import json
import math
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from memlife.memops.systems import answering
from memlife.memops.scoring import labels
from memlife.memops.scoring import judging
from memlife.memops.analyses import aggregate
from memlife.memops.data.schema import Instance

from test_memops_systems import _C, _EchoClient  # the reader's and the judge's reply objects

HERE = Path(__file__).parent
INSTANCE = Instance.model_validate(json.loads((HERE / "data" / "memops_instance.json").read_text()))
OPS = {"remember": "Remember", "forget": "Forget"}
SCORER = ("accuracy", "operation", "provenance", "leakage", "stale", "reflect")


def _rec(op_type, malformed, scorer, judge, valid=True, undecided=()):
    """One record: the scorer's six labels (those in `undecided` left undecided: None, named in
    the `undecided` column) and, unless `judge` is None, the judge's six."""
    labels = dict(zip(SCORER, scorer))
    labels.update({k: None for k in undecided})
    rec = {"Method": "ours: m (Adjacent)", "system": "m", "setting": "adjacent", "op_type": op_type,
           "probe_type": "OperationTrace", "malformed": malformed, **labels,
           "op_f1": 1.0 if labels["operation"] else 0.4, "undecided": ",".join(undecided)}
    if judge is not None:
        rec.update(judge_valid=valid, judge_raw="...", **{f"judge_{k}": v for k, v in zip(judging.JUDGE_LABELS, judge)})
    return rec


# scorer and judge: accuracy, operation, provenance, leakage, stale, reflect
RECORDS = [
    _rec("remember", False, (True, True, True, None, False, None), (True, True, True, None, False, None)),
    _rec("remember", False, (True, True, False, False, None, None), (False, True, False, False, None, None)),
    # the judge calls leakage NA where the scorer applies it: one_na, not a pair
    _rec("forget", False, (False, False, False, True, None, None), (False, False, True, None, None, None)),
    # a malformed reply: the judge's leak and stale labels on it do not apply (the scorer's convention)
    _rec("forget", True, (False, False, False, None, None, None), (False, False, False, True, False, None)),
    # a judge reply that did not parse: counted as invalid, in no pair and no mean
    _rec("forget", False, (True, True, True, None, None, None), (None,) * 6, valid=False),
]


def _by_label(table):
    return table.set_index("label")


def test_agreement_by_hand_counts_invalid_replies_apart():
    agr = _by_label(aggregate.judge_agreement(RECORDS))
    assert list(agr.index) == list(judging.JUDGE_LABELS)
    assert (agr["judged"] == 5).all() and (agr["invalid"] == 1).all()
    # accuracy: scorer T T F F, judge T F F F -> 3 of 4 agree; po .75, pe .5*.25 + .5*.75 = .5
    acc = agr.loc["accuracy"]
    assert acc["n"] == 4 and acc["agreement"] == pytest.approx(0.75)
    assert acc["kappa"] == pytest.approx((0.75 - 0.5) / (1 - 0.5))
    assert acc["scorer_rate"] == pytest.approx(0.5) and acc["judge_rate"] == pytest.approx(0.25)
    # operation: the scorer's binary label (T T F F) against the judge's T T F F: all agree
    assert agr.loc["operation", "agreement"] == 1.0 and agr.loc["operation", "kappa"] == pytest.approx(1.0)
    # provenance: scorer T F F F, judge T F T F -> .75, pe .25*.5 + .75*.5 = .5
    assert agr.loc["provenance", "agreement"] == pytest.approx(0.75)
    assert agr.loc["provenance", "kappa"] == pytest.approx(0.5)


def test_agreement_not_applicable_and_malformed_follow_the_scorer():
    agr = _by_label(aggregate.judge_agreement(RECORDS))
    # leakage pairs only record 2 (F, F); record 3 is one-sided NA; record 4 (malformed) is NA on both sides
    assert agr.loc["leakage", "n"] == 1 and agr.loc["leakage", "agreement"] == 1.0
    assert agr.loc["leakage", "one_na"] == 1
    assert math.isnan(agr.loc["leakage", "kappa"])  # one class only
    assert agr.loc["stale", "n"] == 1 and agr.loc["stale", "one_na"] == 0
    assert agr.loc["reflect", "n"] == 0 and math.isnan(agr.loc["reflect", "agreement"])


def test_agreement_by_group():
    recs = RECORDS + [{**r, "system": "other", "Method": "ours: other (Adjacent)"} for r in RECORDS[:2]]
    agr = aggregate.judge_agreement(recs, ["system", "setting"])
    assert list(agr.columns[:3]) == ["system", "setting", "label"]
    m = agr[(agr.system == "m") & (agr.label == "accuracy")].iloc[0]
    o = agr[(agr.system == "other") & (agr.label == "accuracy")].iloc[0]
    assert (m["judged"], m["invalid"], m["n"], m["agreement"]) == (5, 1, 4, 0.75)
    assert (o["judged"], o["invalid"], o["n"], o["agreement"]) == (2, 0, 2, 0.5)


def test_table3_with_a_judge_shows_its_agreement_on_the_sample():
    t = aggregate.table3_rows(RECORDS, ["Method"])
    assert list(t[aggregate.LABELS_COLUMN]) == ["scorer + judge"]
    row = t.iloc[0]
    # nothing was undecided: every mean is the scorer's
    assert row["Accuracy"] == pytest.approx(3 / 5) and row["Operation F1"] == pytest.approx(3 / 5)
    assert row["Op-F1 (continuous)"] == pytest.approx((1 + 1 + 0.4 + 0.4 + 1) / 5)
    assert row["Leakage"] == pytest.approx(0.5) and row["n_leakage"] == 2  # malformed: left out
    assert row[aggregate.MALFORMED_COUNT] == 1 and row[aggregate.TRUNCATED_COUNT] == 0 and row["Undecided"] == 0.0 and row["n"] == 5
    # pooled over the six labels of the four valid judge replies: 14 pairs, 12 agree; 5 of 14 are 1
    # for each rater, so chance agreement (25 + 81) / 196 and kappa (168 - 106) / (196 - 106)
    assert row["n_judge_pairs"] == 14 and row["Judge agreement"] == pytest.approx(12 / 14)
    assert row["Judge kappa"] == pytest.approx(62 / 90)
    assert row[aggregate.JUDGE_INVALID] == 1


def test_the_judge_labels_what_the_scorer_left_undecided():
    recs = [
        # the scorer could not decide accuracy; the judge says 1
        _rec("remember", False, (None, True, True, None, None, None), (True, True, True, None, None, None),
             undecided=("accuracy",)),
        # undecided, and the judge's reply did not parse: stays unresolved, out of the mean
        _rec("remember", False, (None, True, True, None, None, None), (None,) * 6, valid=False,
             undecided=("accuracy",)),
        _rec("forget", False, (False, True, True, None, None, None), None),
    ]
    res = aggregate.resolved(recs)
    assert res["accuracy"].tolist() == [True, None, False]
    row = aggregate.table3_rows(recs, ["Method"]).iloc[0]
    assert row["Accuracy"] == pytest.approx(1 / 2) and row["n_accuracy"] == 2
    assert row["Undecided"] == pytest.approx(2 / 3)  # the scorer's share, before the judge
    # the judge's label on an undecided item is no agreement pair: the scorer said nothing
    assert aggregate.judge_agreement(recs).set_index("label").loc["accuracy", "n"] == 0
    t4 = aggregate.accuracy_table(recs, "op_type", OPS)
    assert t4[["Remember", "Forget", "n_Remember", "n_Forget"]].iloc[0].tolist() == [1.0, 0.0, 1, 1]
    assert t4["Undecided"].iloc[0] == pytest.approx(2 / 3)
    # without a judge the undecided labels are simply out of the means
    plain = [{k: v for k, v in r.items() if not k.startswith("judge_")} for r in recs]
    row = aggregate.table3_rows(plain, ["Method"]).iloc[0]
    assert row["Accuracy"] == 0.0 and row["n_accuracy"] == 1 and row["Undecided"] == pytest.approx(2 / 3)


def test_tables_4_and_5_say_n_per_cell():
    t4 = aggregate.accuracy_table(RECORDS, "op_type", OPS)
    assert list(t4.columns) == ["Method", "labels", "Remember", "Forget", "n_Remember", "n_Forget", "Undecided"]
    row = t4.iloc[0]
    assert (row["Remember"], row["Forget"]) == (1.0, pytest.approx(1 / 3))
    assert (row["n_Remember"], row["n_Forget"]) == (2, 3)
    t5 = aggregate.accuracy_table(RECORDS, "probe_type", {"OperationTrace": "Operation Trace", "TargetBinding": "Target Binding"})
    assert math.isnan(t5["Target Binding"].iloc[0]) and t5["n_Target Binding"].iloc[0] == 0
    assert t5["Operation Trace"].iloc[0] == pytest.approx(3 / 5)


def test_without_a_judge_the_tables_are_the_scorers_alone():
    plain = [{k: v for k, v in r.items() if not k.startswith("judge_")} for r in RECORDS]
    frame = pd.DataFrame(plain)
    assert not aggregate.judged(plain)
    expected = aggregate.summarize(plain, ["Method"]).rename(columns=aggregate.TABLE3_COLUMNS).drop(columns="Malformed")
    expected[aggregate.TRUNCATED_COUNT], expected[aggregate.MALFORMED_COUNT] = 0, 1
    pd.testing.assert_frame_equal(aggregate.table3_rows(plain, ["Method"]), expected)
    before = frame.pivot_table(index="Method", columns="op_type", values="accuracy", aggfunc="mean").rename(columns=OPS)
    t4 = aggregate.accuracy_table(plain, "op_type", OPS)
    assert aggregate.LABELS_COLUMN not in t4
    pd.testing.assert_frame_equal(t4[["Method", *OPS.values()]], before.reindex(columns=list(OPS.values())).reset_index(),
                                  check_names=False)
    agr = aggregate.judge_agreement(plain)
    assert agr.empty and list(agr.columns) == list(aggregate.AGREEMENT_COLUMNS)
    # judge columns present but no reply in them (a run without a judge, concatenated): still no judge
    frame = frame.assign(judge_valid=None, judge_accuracy=None)
    assert not aggregate.judged(frame) and aggregate.LABELS_COLUMN not in aggregate.table3_rows(frame, ["Method"])


# ------------------------------------------------- end to end: answering.run -> labels.run -> tables

class _Judge:
    """Grades every reply correct (the echo reader answers "ok": wrong for the scorer), and replies
    with something unparseable every third call."""

    model = "stand-in-judge"

    def __init__(self):
        self.calls = 0

    def complete(self, messages, *, max_tokens, **kw):
        self.calls += 1
        assert "You are grading a memory system on the MemOps benchmark." in messages[0]["content"]
        if self.calls % 3 == 0:
            return _C("CORRECT")
        return _C(json.dumps({"accuracy": 1, "operation": 0, "provenance": 0, "leakage": "NA", "stale": 0,
                              "reflect": "NA"}))


def test_judge_labels_flow_from_evaluate_run_into_the_tables(tmp_path):
    judge = _Judge()
    cfg = answering.EvalConfig(systems=["long_context", "bm25_turn"], settings=["adjacent", "long_context"],
                              max_probes=3, judge=True, judge_sample=1.0)  # every reply in the sample
    replies = answering.run([INSTANCE], cfg, tmp_path, reader_client=_EchoClient(), progress=False)
    labels.run(replies, [INSTANCE], cfg, tmp_path, judge_client=judge, progress=False)
    records = pd.read_parquet(tmp_path / "records.parquet")  # what notebook 13 reads
    assert len(records) == judge.calls == 12
    invalid = judge.calls // 3
    assert aggregate.judged(records) and int((~records["judge_valid"].astype(bool)).sum()) == invalid

    agr = _by_label(aggregate.judge_agreement(records))
    assert (agr["judged"] == 12).all() and (agr["invalid"] == invalid).all()
    # the reader's "ok" is wrong for the scorer, right for this judge: no valid pair agrees
    assert agr.loc["accuracy", "n"] == 12 - invalid and agr.loc["accuracy", "agreement"] == 0.0
    assert agr.loc["accuracy", "judge_rate"] == 1.0 and agr.loc["accuracy", "scorer_rate"] == 0.0
    assert agr.loc["leakage", "n"] == 0  # the judge called it NA throughout

    t3 = aggregate.table3_rows(records.assign(Method=records["system"] + " " + records["setting"]), ["Method"])
    assert len(t3) == 4 and (t3[aggregate.LABELS_COLUMN] == "scorer + judge").all()
    # the scorer decided every label of "ok", so the means are its own; the judge only disagrees
    assert (t3["Accuracy"] == 0.0).all() and (t3["Undecided"] == 0.0).all()
    assert t3[aggregate.JUDGE_INVALID].sum() == invalid and (t3["n_judge_pairs"] > 0).all()

    # with no sample and nothing undecided, the judge is asked nothing
    quiet = _Judge()
    quiet_cfg = replace(cfg, judge_sample=0.0)
    replies = answering.run([INSTANCE], quiet_cfg, tmp_path / "quiet", reader_client=_EchoClient(), progress=False)
    labels.run(replies, [INSTANCE], quiet_cfg, tmp_path / "quiet", judge_client=quiet, progress=False)
    assert quiet.calls == 0
    # labelled again (a rerun, a run killed halfway): the judge's journal answers, nothing is asked again
    again = _Judge()
    replies = answering.run([INSTANCE], cfg, tmp_path, reader_client=_EchoClient(), progress=False)
    relabelled = labels.run(replies, [INSTANCE], cfg, tmp_path, judge_client=again, progress=False)
    assert again.calls == 0 and len(relabelled) == 12
    assert pd.read_parquet(tmp_path / "records.parquet").equals(records)

    # The judge's columns are what carries its labels: without them there is no judge.
    plain = records[[c for c in records.columns if not c.startswith("judge_")]]
    assert not aggregate.judged(plain) and aggregate.judge_agreement(plain).empty


def test_the_judge_sample_is_a_fixed_share():
    recs = [{"system": "s", "setting": "adjacent", "instance_id": f"i{k}", "probe_id": "p1"} for k in range(2000)]
    picked = [labels.judge_sampled(r, 0.2) for r in recs]
    assert 0.17 < sum(picked) / len(picked) < 0.23 and picked == [labels.judge_sampled(r, 0.2) for r in recs]
    assert labels.wants_judge({**recs[0], "undecided": "accuracy"}, 0.0)
    assert not any(labels.judge_sampled(r, 0.0) for r in recs)
