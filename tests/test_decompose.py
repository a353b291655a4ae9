"""The restore decomposition and its command, on a records table computed by hand."""
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from memlife.restore.analyses import decompose as d
from memlife.restore.__main__ import main

from restore_simulate import simulate_records

ROOT = Path(__file__).resolve().parents[1]


def _row(qid, arm, correct, policy=None, budget=None, regime=None, seed=None, evicted=0,
         qtype="multi-session"):
    return dict(question_id=qid, question_type=qtype, policy=policy, budget=budget, regime=regime,
                seed=seed, reader="r", judge="j", arm=arm, correct=correct, n_gold=2,
                n_gold_evicted=evicted, context_tokens=100, hypothesis=f"answer {qid}",
                judge_raw="CORRECT" if correct else "INCORRECT")


def hand_records() -> pd.DataFrame:
    """Four questions; q3 is not oracle-answerable (wrong even with clean full gold).

    fifo@8000 top-k, seeds 0 and 1 (pooled):
      q1 s0 policy wrong, restore right, 2 gold evicted -> irreversible
      q1 s1 policy wrong, restore right, 0 evicted      -> recoverable
      q2 s0 policy wrong, restore wrong                 -> residual
      q2 s1 policy right (no restore row needed)
      q3 s0 policy wrong, restore right, 1 evicted      -> excluded: not oracle-answerable
      q3 s1 policy right
      q4 s0 policy wrong, restore right, 1 evicted      -> irreversible
      q4 s1 policy right
    => 8 observations, 6 oracle-answerable, 4 errors: 2 irreversible, 1 recoverable, 1 residual;
       two-bin share 2/3; accuracy 3/8.
    no_evict@8000 top-k seed 0: q1, q2, q4 right, q3 wrong -> no errors, two-bin share undefined.
    """
    fifo = dict(policy="fifo", budget=8000, regime="topk")
    ne = dict(policy="no_evict", budget=8000, regime="topk", seed=0)
    rows = [
        _row("q1", "clean_gold", True), _row("q2", "clean_gold", True),
        _row("q3", "clean_gold", False), _row("q4", "clean_gold", True),
        _row("q1", "policy", False, seed=0, evicted=2, **fifo),
        _row("q1", "restore", True, seed=0, evicted=2, **fifo),
        _row("q1", "policy", False, seed=1, evicted=0, **fifo),
        _row("q1", "restore", True, seed=1, evicted=0, **fifo),
        _row("q2", "policy", False, seed=0, evicted=0, **fifo),
        _row("q2", "restore", False, seed=0, evicted=0, **fifo),
        _row("q2", "policy", True, seed=1, evicted=1, **fifo),
        _row("q3", "policy", False, seed=0, evicted=1, **fifo),
        _row("q3", "restore", True, seed=0, evicted=1, **fifo),
        _row("q3", "policy", True, seed=1, evicted=0, **fifo),
        _row("q4", "policy", False, seed=0, evicted=1, **fifo),
        _row("q4", "restore", True, seed=0, evicted=1, **fifo),
        _row("q4", "policy", True, seed=1, evicted=0, **fifo),
        _row("q1", "policy", True, **ne), _row("q2", "policy", True, **ne),
        _row("q3", "policy", False, **ne), _row("q4", "policy", True, **ne),
    ]
    return pd.DataFrame(rows)


def test_hand_computed_decomposition():
    table = d.decompose(d.observations(hand_records()))
    assert list(table.columns) == list(d.DECOMPOSITION_COLUMNS)
    assert table["policy"].tolist() == ["fifo", "no_evict"]
    fifo, ne = table.iloc[0], table.iloc[1]
    assert (fifo.n_observations, fifo.n_oracle_answerable, fifo.n_errors) == (8, 6, 4)
    assert (fifo.irreversible, fifo.recoverable, fifo.residual) == (2, 1, 1)
    assert fifo.two_bin_share == pytest.approx(2 / 3)
    assert fifo.accuracy == pytest.approx(3 / 8)
    assert (ne.n_observations, ne.n_oracle_answerable, ne.n_errors) == (4, 3, 0)
    assert (ne.irreversible, ne.recoverable, ne.residual) == (0, 0, 0)
    assert np.isnan(ne.two_bin_share)
    assert ne.accuracy == pytest.approx(0.75)


def test_command_writes_the_same_table_from_parquet_and_csv(tmp_path):
    rec = hand_records()
    rec["budget"] = rec["budget"].astype("Int64")
    rec["seed"] = rec["seed"].astype("Int64")
    rec.to_parquet(tmp_path / "records.parquet", index=False)
    rec.to_csv(tmp_path / "records.csv", index=False)
    assert main([ "decompose", str(tmp_path / "records.parquet"), "--out", str(tmp_path / "a.csv")]) == 0
    assert main(["decompose", str(tmp_path / "records.csv"), "--out", str(tmp_path / "b.csv")]) == 0
    a = (tmp_path / "a.csv").read_text()
    assert a == (tmp_path / "b.csv").read_text()
    lines = a.splitlines()
    assert lines[0] == ",".join(d.DECOMPOSITION_COLUMNS)
    # 4 questions, 2 seeds each: 8 observations
    assert lines[1].startswith("fifo,8000,topk,r,j,4,8,6,4,2,1,1,0.666")
    # The undefined two-bin share is an empty field, not 0.
    assert lines[2] == "no_evict,8000,topk,r,j,4,4,3,0,0,0,0,,0.75"


def test_command_runs_as_a_module(tmp_path):
    hand_records().to_csv(tmp_path / "r.csv", index=False)
    res = subprocess.run(
        [sys.executable, "-m", "memlife.restore", "decompose", str(tmp_path / "r.csv"),
         "--out", str(tmp_path / "out.csv")],
        capture_output=True, text=True, env={"PYTHONPATH": str(ROOT / "lib")}, cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr
    assert len(pd.read_csv(tmp_path / "out.csv")) == 2


def test_missing_column_is_named(tmp_path):
    hand_records().drop(columns=["n_gold_evicted"]).to_csv(tmp_path / "r.csv", index=False)
    with pytest.raises(d.RecordsError, match=r"r\.csv: missing column\(s\) n_gold_evicted"):
        d.load_records(tmp_path / "r.csv")
    assert main(["decompose", str(tmp_path / "r.csv"), "--out", str(tmp_path / "o.csv")]) == 2
    assert not (tmp_path / "o.csv").exists()


def test_policy_row_without_clean_gold_is_named():
    rec = hand_records()
    rec = rec[~((rec["arm"] == "clean_gold") & (rec["question_id"] == "q4"))]
    with pytest.raises(d.RecordsError, match=r"no clean_gold row.*question_id='q4', reader='r', judge='j'"):
        d.observations(rec)


def test_error_without_restore_row_is_named():
    rec = hand_records()
    drop = (rec["arm"] == "restore") & (rec["question_id"] == "q2")
    with pytest.raises(d.RecordsError, match=r"no restore row.*question_id='q2'"):
        d.observations(rec[~drop])


def test_duplicate_and_unknown_values_are_rejected():
    rec = hand_records()
    with pytest.raises(d.RecordsError, match="duplicate policy rows"):
        d.observations(pd.concat([rec, rec.iloc[[4]]]))
    bad = rec.copy()
    bad.loc[4, "regime"] = "bm25"
    with pytest.raises(d.RecordsError, match="regime has unknown value"):
        d.observations(bad)
    bad = rec.copy()
    bad.loc[5, "arm"] = "restored"
    with pytest.raises(d.RecordsError, match="arm has unknown value"):
        d.observations(bad)
    bad = rec.copy()
    bad.loc[6, "seed"] = None
    with pytest.raises(d.RecordsError, match="field seed is empty"):
        d.observations(bad)


def test_bins_partition_errors_and_forced_gold_has_no_recoverable():
    obs = d.observations(simulate_records(30, ablation_arms=True, judges=("SYN-a", "SYN-b")))
    t = d.decompose(obs)
    assert (t["irreversible"] + t["recoverable"] + t["residual"] == t["n_errors"]).all()
    assert (t.loc[t["regime"] == "forced_gold", "recoverable"] == 0).all()
    assert (t.loc[t["policy"] == "no_evict", "irreversible"] == 0).all()
    # Seeds pooled: every cell has questions x seeds observations.
    assert (t["n_observations"] == 30 * 3).all()


def test_empty_labels_are_excluded_and_counted_not_guessed():
    rec = hand_records()
    rec["correct"] = rec["correct"].astype(object)
    # q1 s0's policy label is empty (an errored judge call), and so is q2 s0's restore label.
    rec.loc[(rec["question_id"] == "q1") & (rec["arm"] == "policy") & (rec["seed"] == 0)
            & (rec["policy"] == "fifo"), "correct"] = None
    rec.loc[(rec["question_id"] == "q2") & (rec["arm"] == "restore"), "correct"] = None
    with pytest.warns(UserWarning, match=r"2 observation\(s\) excluded.*'j': 2"):
        obs = d.observations(rec)
    assert obs.attrs["n_excluded_unlabelled"] == 2
    fifo = d.decompose(obs).iloc[0]
    # Of the hand table, q1 s0 (irreversible) and q2 s0 (residual) drop out.
    assert (fifo.n_observations, fifo.n_oracle_answerable, fifo.n_errors) == (6, 4, 2)
    assert (fifo.irreversible, fifo.recoverable, fifo.residual) == (1, 1, 0)


def test_extension_dtypes_and_object_dtypes_give_the_same_decomposition(tmp_path):
    """22_read_restore writes pandas string / Int64 / boolean columns; CSV and plain objects must agree."""
    rec = simulate_records(15, judges=("deterministic", "SYN-llm"), rng_seed=2)
    typed = rec.copy()
    for c in ("question_id", "question_type", "policy", "regime", "reader", "judge", "arm",
              "hypothesis", "judge_raw"):
        typed[c] = typed[c].astype("string")
    for c in ("budget", "seed", "n_gold", "n_gold_evicted", "context_tokens"):
        typed[c] = typed[c].astype("Int64")
    typed["correct"] = typed["correct"].astype("boolean")
    typed.loc[typed["arm"] == "clean_gold", "n_gold_evicted"] = pd.NA
    typed.to_parquet(tmp_path / "typed.parquet", index=False)
    a = d.decompose(d.observations(rec))
    b = d.decompose(d.observations(d.load_records(tmp_path / "typed.parquet")))
    pd.testing.assert_frame_equal(a, b, check_dtype=False)
