"""The LLM judge's labels in Tables 3-5 beside the scorer's, and judge-scorer agreement, on
hand-made records whose numbers are worked out by hand, then end to end through evaluate.run
with a stand-in judge."""
import json
import math
from pathlib import Path

import pandas as pd
import pytest

from memlife.memops import evaluate, metrics
from memlife.memops.schema import Instance
from test_memops_systems import _C, _EchoClient  # the reader's and the judge's reply objects

HERE = Path(__file__).parent
INSTANCE = Instance.model_validate(json.loads((HERE / "data" / "memops_instance.json").read_text()))
OPS = {"remember": "Remember", "forget": "Forget"}
SCORER = ("accuracy", "op_f1", "provenance", "leakage", "stale", "reflect")


def _rec(op_type, malformed, scorer, judge, valid=True):
    """One record: the scorer's six labels and, unless `judge` is None, the judge's six."""
    rec = {"Method": "ours: m (Adjacent)", "system": "m", "setting": "adjacent", "op_type": op_type,
           "probe_type": "OperationTrace", "malformed": malformed, **dict(zip(SCORER, scorer))}
    if judge is not None:
        rec.update(judge_valid=valid, judge_raw="...", **{f"judge_{k}": v for k, v in zip(metrics.JUDGE_LABELS, judge)})
    return rec


# scorer: accuracy, op_f1, provenance, leakage, stale, reflect
# judge:  accuracy, operation, provenance, leakage, stale, reflect
RECORDS = [
    _rec("remember", False, (True, 1.0, True, None, False, None), (True, True, True, None, False, None)),
    _rec("remember", False, (True, 0.5, False, False, None, None), (False, True, False, False, None, None)),
    # the judge calls leakage NA where the scorer applies it: one_na, not a pair
    _rec("forget", False, (False, 0.4, False, True, None, None), (False, False, True, None, None, None)),
    # a malformed reply: the judge's leak and stale labels on it do not apply (the scorer's convention)
    _rec("forget", True, (False, 0.0, False, None, None, None), (False, False, False, True, False, None)),
    # a judge reply that did not parse: counted as invalid, in no pair and no mean
    _rec("forget", False, (True, 1.0, True, None, None, None), (None,) * 6, valid=False),
]


def _by_label(table):
    return table.set_index("label")


def test_agreement_by_hand_counts_invalid_replies_apart():
    agr = _by_label(metrics.judge_agreement(RECORDS))
    assert list(agr.index) == list(metrics.JUDGE_LABELS)
    assert (agr["judged"] == 5).all() and (agr["invalid"] == 1).all()
    # accuracy: scorer T T F F, judge T F F F -> 3 of 4 agree; po .75, pe .5*.25 + .5*.75 = .5
    acc = agr.loc["accuracy"]
    assert acc["n"] == 4 and acc["agreement"] == pytest.approx(0.75)
    assert acc["kappa"] == pytest.approx((0.75 - 0.5) / (1 - 0.5))
    assert acc["scorer_rate"] == pytest.approx(0.5) and acc["judge_rate"] == pytest.approx(0.25)
    # operation: the scorer's F1 >= 0.5 (1.0, 0.5 | 0.4, 0.0) against the judge's T T F F: all agree
    assert agr.loc["operation", "agreement"] == 1.0 and agr.loc["operation", "kappa"] == pytest.approx(1.0)
    # provenance: scorer T F F F, judge T F T F -> .75, pe .25*.5 + .75*.5 = .5
    assert agr.loc["provenance", "agreement"] == pytest.approx(0.75)
    assert agr.loc["provenance", "kappa"] == pytest.approx(0.5)


def test_agreement_not_applicable_and_malformed_follow_the_scorer():
    agr = _by_label(metrics.judge_agreement(RECORDS))
    # leakage pairs only record 2 (F, F); record 3 is one-sided NA; record 4 (malformed) is NA on both sides
    assert agr.loc["leakage", "n"] == 1 and agr.loc["leakage", "agreement"] == 1.0
    assert agr.loc["leakage", "one_na"] == 1
    assert math.isnan(agr.loc["leakage", "kappa"])  # one class only
    assert agr.loc["stale", "n"] == 1 and agr.loc["stale", "one_na"] == 0
    assert agr.loc["reflect", "n"] == 0 and math.isnan(agr.loc["reflect", "agreement"])


def test_agreement_by_group():
    recs = RECORDS + [{**r, "system": "other", "Method": "ours: other (Adjacent)"} for r in RECORDS[:2]]
    agr = metrics.judge_agreement(recs, ["system", "setting"])
    assert list(agr.columns[:3]) == ["system", "setting", "label"]
    m = agr[(agr.system == "m") & (agr.label == "accuracy")].iloc[0]
    o = agr[(agr.system == "other") & (agr.label == "accuracy")].iloc[0]
    assert (m["judged"], m["invalid"], m["n"], m["agreement"]) == (5, 1, 4, 0.75)
    assert (o["judged"], o["invalid"], o["n"], o["agreement"]) == (2, 0, 2, 0.5)


def test_table3_judge_rows_beside_the_scorer_rows():
    t = metrics.table3_rows(RECORDS, ["Method"])
    assert list(t[metrics.LABELS_COLUMN]) == ["scorer", "judge"]
    assert list(t.columns) == ["Method", "labels", "Accuracy", "Operation F1", metrics.OPERATION_BINARY, "Provenance",
                               "Leakage", "Stale Value", "Reflect Precision", "n", metrics.TRUNCATED_COUNT,
                               metrics.MALFORMED_COUNT, metrics.JUDGE_INVALID]
    scorer, judge = t.iloc[0], t.iloc[1]
    assert scorer["Accuracy"] == pytest.approx(3 / 5) and judge["Accuracy"] == pytest.approx(1 / 4)
    # the judge's operation label is binary: never in the Operation F1 column
    assert math.isnan(judge["Operation F1"]) and judge[metrics.OPERATION_BINARY] == pytest.approx(2 / 4)
    assert scorer["Operation F1"] == pytest.approx((1 + 0.5 + 0.4 + 0 + 1) / 5)
    assert scorer[metrics.OPERATION_BINARY] == pytest.approx(3 / 5)  # F1 >= 0.5
    assert judge["Provenance"] == pytest.approx(2 / 4)
    # leakage over the well-formed replies it applies to: scorer F, T; judge F (NA and malformed left out)
    assert scorer["Leakage"] == pytest.approx(0.5) and judge["Leakage"] == 0.0
    assert judge["Stale Value"] == 0.0 and math.isnan(judge["Reflect Precision"])
    # the one malformed reply (no finish_reason recorded: not counted as cut off), on both rows
    assert scorer[metrics.MALFORMED_COUNT] == judge[metrics.MALFORMED_COUNT] == 1
    assert scorer[metrics.TRUNCATED_COUNT] == judge[metrics.TRUNCATED_COUNT] == 0
    assert scorer["n"] == judge["n"] == 5
    assert judge[metrics.JUDGE_INVALID] == 1 and pd.isna(scorer[metrics.JUDGE_INVALID])


def test_tables_4_and_5_shape_judge_accuracy_rows():
    t4 = metrics.accuracy_table(RECORDS, "op_type", OPS)
    assert list(t4.columns) == ["Method", "labels", "Remember", "Forget"]
    scorer, judge = t4.set_index("labels").loc["scorer"], t4.set_index("labels").loc["judge"]
    assert (scorer["Remember"], scorer["Forget"]) == (1.0, pytest.approx(1 / 3))
    assert (judge["Remember"], judge["Forget"]) == (0.5, 0.0)  # the invalid reply is in neither
    t5 = metrics.accuracy_table(RECORDS, "probe_type", {"OperationTrace": "Operation Trace", "TargetBinding": "Target Binding"})
    assert list(t5["labels"]) == ["scorer", "judge"] and math.isnan(t5["Target Binding"].iloc[1])
    assert t5["Operation Trace"].tolist() == [pytest.approx(3 / 5), pytest.approx(1 / 4)]


def test_without_a_judge_the_tables_are_the_scorers_alone_and_unchanged():
    plain = [{k: v for k, v in r.items() if not k.startswith("judge_")} for r in RECORDS]
    frame = pd.DataFrame(plain)
    assert not metrics.judged(plain)
    expected = metrics.summarize(plain, ["Method"]).rename(columns=metrics.TABLE3_COLUMNS).drop(columns="Malformed")
    expected[metrics.TRUNCATED_COUNT], expected[metrics.MALFORMED_COUNT] = 0, 1
    pd.testing.assert_frame_equal(metrics.table3_rows(plain, ["Method"]), expected)
    before = frame.pivot_table(index="Method", columns="op_type", values="accuracy", aggfunc="mean").rename(columns=OPS)
    pd.testing.assert_frame_equal(metrics.accuracy_table(plain, "op_type", OPS),
                                  before.reindex(columns=list(OPS.values())).reset_index())
    agr = metrics.judge_agreement(plain)
    assert agr.empty and list(agr.columns) == list(metrics.AGREEMENT_COLUMNS)
    # judge columns present but no reply in them (a run without a judge, concatenated): still no judge
    frame = frame.assign(judge_valid=None, judge_accuracy=None)
    assert not metrics.judged(frame) and metrics.LABELS_COLUMN not in metrics.table3_rows(frame, ["Method"])


# ---------------------------------------------------------------- end to end: evaluate.run -> tables

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
    cfg = evaluate.EvalConfig(systems=["long_context", "bm25_turn"], settings=["adjacent", "long_context"],
                              max_probes=3, judge=True)
    evaluate.run([INSTANCE], cfg, tmp_path, reader_client=_EchoClient(), judge_client=judge, progress=False)
    records = pd.read_parquet(tmp_path / "records.parquet")  # what notebook 13 reads
    assert len(records) == judge.calls == 12
    invalid = judge.calls // 3
    assert metrics.judged(records) and int((~records["judge_valid"].astype(bool)).sum()) == invalid

    agr = _by_label(metrics.judge_agreement(records))
    assert (agr["judged"] == 12).all() and (agr["invalid"] == invalid).all()
    # the reader's "ok" is wrong for the scorer, right for this judge: no valid pair agrees
    assert agr.loc["accuracy", "n"] == 12 - invalid and agr.loc["accuracy", "agreement"] == 0.0
    assert agr.loc["accuracy", "judge_rate"] == 1.0 and agr.loc["accuracy", "scorer_rate"] == 0.0
    assert agr.loc["leakage", "n"] == 0  # the judge called it NA throughout

    t3 = metrics.table3_rows(records.assign(Method=records["system"] + " " + records["setting"]), ["Method"])
    judge_rows = t3[t3[metrics.LABELS_COLUMN] == "judge"]
    assert len(judge_rows) == 4 and (t3[metrics.LABELS_COLUMN] == "scorer").sum() == 4
    assert (judge_rows["Accuracy"] == 1.0).all() and (judge_rows[metrics.OPERATION_BINARY] == 0.0).all()
    assert judge_rows[metrics.JUDGE_INVALID].sum() == invalid
    assert (t3.loc[t3[metrics.LABELS_COLUMN] == "scorer", "Accuracy"] == 0.0).all()

    t4 = metrics.accuracy_table(records.assign(Method=records["system"]), "op_type", {INSTANCE.op_type: "Op"})
    assert t4.loc[t4["labels"] == "judge", "Op"].tolist() == [1.0, 1.0]

    # The judge's columns are what carries its labels: without them there are no judge rows.
    plain = records[[c for c in records.columns if not c.startswith("judge_")]]
    assert not metrics.judged(plain) and metrics.judge_agreement(plain).empty
