"""`python -m memlife.restore run --profile P --reader NAME --out DIR`: notebooks 20-22 from the
command line, on the smoke profile's parameters, with every model role pointed at the fault
server (or a model-free test reader plugged in by name)."""
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from memlife.models import endpoints
from memlife.restore import __main__ as cli
from memlife.restore import pipeline
from memlife.restore.judging import grading
from memlife.restore.reading import arms
from memlife.restore.analyses import decompose

ROOT = Path(__file__).resolve().parents[1]


def _root_with_profile(tmp_path, **extra22) -> Path:
    """A scratch root (the isolated_llm fixture points MEMLIFE_ROOT there) holding the smoke
    profile, with extra 22_read_restore parameters."""
    cfg = yaml.safe_load((ROOT / "configs" / "smoke.yaml").read_text())
    cfg["notebooks"]["22_read_restore"].update(extra22)
    (tmp_path / "configs").mkdir(exist_ok=True)
    (tmp_path / "configs" / "smoke.yaml").write_text(yaml.safe_dump(cfg))
    return tmp_path


def _all_roles_at(monkeypatch, server, model="fake-model"):
    monkeypatch.setenv("MEMLIFE_BASE_URL", server.base_url)
    monkeypatch.setenv("MEMLIFE_MODEL", model)


def test_unknown_reader_exits_2_naming_the_accepted_ones(isolated_llm, capsys, tmp_path):
    assert cli.main(["run", "--profile", "smoke", "--reader", "oracle", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "unknown reader 'oracle'; accepted: llm, gold, evidence-oracle, noisy-oracle" in err
    assert not (tmp_path / "o").exists()


def test_unknown_profile_exits_2(isolated_llm, capsys, tmp_path):
    assert cli.main(["run", "--profile", "huge", "--reader", "llm", "--out", str(tmp_path / "o")]) == 2
    assert "unknown profile 'huge'" in capsys.readouterr().err
    # a known profile whose file lacks a notebook section is bad input too
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "smoke.yaml").write_text("common: {profile: smoke, seed: 0}\nnotebooks: {}\n")
    assert cli.main(["run", "--profile", "smoke", "--out", str(tmp_path / "o")]) == 2
    assert "notebooks.20_longmem_data" in capsys.readouterr().err


def test_the_module_entry_point_exits_2_on_bad_input(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT / "lib"), "MEMLIFE_ROOT": str(ROOT)}
    p = subprocess.run([sys.executable, "-m", "memlife.restore", "run", "--profile", "smoke",
                        "--reader", "noisy_oracle", "--out", str(tmp_path)],
                       capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 2 and "unknown reader 'noisy_oracle'" in p.stderr


def test_run_with_the_llm_reader_writes_records(isolated_llm, fault_server, monkeypatch, tmp_path, capsys):
    _root_with_profile(tmp_path, ablation_arms=True, judge_audit_items=8)
    _all_roles_at(monkeypatch, fault_server)
    monkeypatch.setenv("MEMLIFE_JUDGE_AUDIT_MODEL", "fake-audit")
    out = tmp_path / "out"
    assert cli.main(["run", "--profile", "smoke", "--reader", "llm", "--out", str(out)]) == 0
    assert "records" in capsys.readouterr().out
    rec = decompose.load_records(out / "records")
    assert set(rec["arm"]) == set(arms.ARMS)
    assert set(rec["reader"]) == {"fake-model"}
    assert set(rec["judge"]) == {"deterministic", "fake-model", "audit:fake-audit"}
    audit = rec[rec["judge"] == "audit:fake-audit"]
    # the fault server echoes the prompt: strict parsing gives no label, never a guess
    assert len(audit) == 8 and audit["correct"].isna().all() and audit["judge_raw"].str.startswith("echo:").all()
    p = pipeline.params("smoke")
    ev = pd.read_parquet(out / "evictions.parquet")
    assert sorted(ev["budget"].dropna().unique()) == sorted(p.budgets)
    primary = rec[rec["judge"] != "audit:fake-audit"]
    assert (primary["arm"] == "clean_gold").sum() == 2 * p.n_questions  # the scorer and the judge
    # every read was a call to the endpoint: the embedded model was never needed
    assert len(fault_server.received) > 0


def test_a_reference_subject_runs_by_name_without_changing_the_command(isolated_llm, fault_server, monkeypatch, tmp_path):
    _root_with_profile(tmp_path, ablation_arms=True)
    monkeypatch.setenv("MEMLIFE_SCORER_BASE_URL", fault_server.base_url)  # importance scores only
    monkeypatch.setenv("MEMLIFE_SCORER_MODEL", "fake-scorer")
    out = tmp_path / "out"
    assert cli.main(["run", "--profile", "smoke", "--reader", "evidence-oracle", "--out", str(out)]) == 0
    rec = decompose.load_records(out / "records")
    assert set(rec["reader"]) == {"evidence-oracle (reference)"} and set(rec["judge"]) == {"deterministic"}
    obs = decompose.observations(rec)
    assert (decompose.decompose(obs)["residual"] == 0).all()
    assert not obs.loc[obs["irreversible"] == 1, "restore_surviving_correct"].any()
    assert not obs["placebo_correct"].any()


def test_a_failed_model_call_exits_1(isolated_llm, fault_server, monkeypatch, tmp_path, capsys):
    _root_with_profile(tmp_path)
    _all_roles_at(monkeypatch, fault_server)
    monkeypatch.setenv("MEMLIFE_MAX_RETRIES", "0")
    monkeypatch.setattr(pipeline.arms, "read_all", lambda *a, **k: (_ for _ in ()).throw(
        endpoints.LLMCallError("request abc: HTTP 400")))
    assert cli.main(["run", "--profile", "smoke", "--out", str(tmp_path / "out")]) == 1
    assert "a model call failed" in capsys.readouterr().err


def test_a_second_readers_run_adds_its_records_beside_the_first(isolated_llm, fault_server, monkeypatch, tmp_path):
    """Two readers at smoke into one directory (the paper profile's robustness reader is such a
    second run): both readers' records load together, and R2 and R4 have second-reader rows."""
    from memlife.restore.analyses import paper_analyses

    _root_with_profile(tmp_path)
    monkeypatch.setenv("MEMLIFE_SCORER_BASE_URL", fault_server.base_url)  # importance scores only
    monkeypatch.setenv("MEMLIFE_SCORER_MODEL", "fake-scorer")
    out = tmp_path / "out"
    for reader in ("evidence-oracle", "noisy-oracle"):
        assert cli.main(["run", "--profile", "smoke", "--reader", reader, "--out", str(out)]) == 0
    assert sorted(p.name for p in (out / "records").iterdir()) == [
        "evidence-oracle_reference.parquet", "noisy-oracle_reference.parquet"]
    rec = decompose.load_records(out / "records")
    readers = {"evidence-oracle (reference)", "noisy-oracle (reference)"}
    assert set(rec["reader"]) == readers
    obs = decompose.observations(rec)
    boot = paper_analyses.cell_bootstrap(obs, n_boot=50, seed=0)
    r2 = paper_analyses.regime_gap(boot)
    assert set(r2["reader"]) == readers
    assert (r2.groupby("reader").size() == r2.groupby("reader")["family_size"].first()).all()
    residuals = paper_analyses.reader_residuals(obs)
    assert set(residuals["reader"]) == readers
    cmp = paper_analyses.compare_reader_residuals(residuals, "noisy-oracle (reference)")
    assert cmp.second == "evidence-oracle (reference)" and cmp.second_residual == 0
    # rerunning the first reader replaces its own file only
    assert cli.main(["run", "--profile", "smoke", "--reader", "evidence-oracle", "--out", str(out)]) == 0
    assert set(decompose.load_records(out / "records")["reader"]) == readers


def test_a_stale_readers_file_from_another_grid_is_refused(tmp_path):
    from restore_simulate import simulate_records

    grading.write_records(simulate_records(6, seeds=(0,), readers=("A",)), tmp_path)
    grading.write_records(simulate_records(6, seeds=(0, 1), readers=("B",)), tmp_path)
    with pytest.raises(decompose.RecordsError, match=r"B\.parquet: reader 'B' read a different grid than .*A\.parquet"):
        decompose.load_records(tmp_path)
