"""Notebooks 23 and 24 end to end on SYNTHETIC records in a scratch root.

The real inputs come from 22_read_restore; here synthetic records (tests/restore_simulate.py) stand
in so the notebooks' code paths — one reader and judge, and two of each with the ablation arms —
run without a model. Nothing produced here is a reported result.
"""
import os
import shutil
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from memlife.restore.judging import grading


from restore_simulate import simulate_records

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ("23_decomposition", "24_robustness")


def _scratch_root(tmp_path: Path, records=None) -> Path:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "lib" / "memlife").mkdir(parents=True)
    (tmp_path / "configs").mkdir()
    shutil.copy(ROOT / "configs" / "smoke.yaml", tmp_path / "configs")  # the notebooks' profile
    if records is not None:
        grading.write_records(records, tmp_path / "results" / "smoke" / "restore" / "records")
    return tmp_path


def _run(name: str, root: Path, monkeypatch) -> None:
    monkeypatch.setenv("MEMLIFE_ROOT", str(root))
    monkeypatch.setenv("PYTHONPATH", str(ROOT / "lib") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    nb = nbformat.read(ROOT / "notebooks" / f"{name}.ipynb", as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(root)}}).execute()


@pytest.mark.slow
@pytest.mark.parametrize("full", [False, True], ids=["one-reader-one-judge", "two-readers-two-judges-ablations"])
def test_notebooks_run_on_synthetic_records(tmp_path, monkeypatch, full):
    kw = dict(n_questions=40, seeds=(0, 1, 2), readers=("SYN-weak", "SYN-strong"),
              judges=("SYN-scorer", "SYN-llm"), ablation_arms=True) if full else \
        dict(n_questions=12, seeds=(0,))
    root = _scratch_root(tmp_path, simulate_records(budgets=(500, 1000, 2000), **kw))
    for name in NOTEBOOKS:
        _run(name, root, monkeypatch)
    tables = root / "results" / "smoke" / "tables"
    for t in ("restore_decomposition", "restore_table1_topk", "restore_r1_shares",
              "restore_r2_regime_gap", "restore_r3_matched_accuracy",
              "restore_paper_vs_ours_r1_r2", "restore_paper_vs_ours_robustness"):
        assert (tables / f"{t}.csv").is_file() and (tables / f"{t}.md").is_file(), t
    figures = root / "results" / "smoke" / "figures"
    for f in ("restore_decomposition_bars", "restore_r2_regime_gap", "restore_r3_forest"):
        assert (figures / f"{f}.png").is_file() and (figures / f"{f}.pdf").is_file(), f
    assert (tables / "restore_reader_robustness.csv").is_file() == full
    # judge agreement is a table only where two judges graded: never an empty one
    assert (tables / "restore_judge_agreement.csv").is_file() == full


@pytest.mark.slow
def test_notebook_without_records_says_to_run_22_first(tmp_path, monkeypatch):
    root = _scratch_root(tmp_path)
    with pytest.raises(CellExecutionError, match="run notebooks/22_read_restore.ipynb first"):
        _run("23_decomposition", root, monkeypatch)
