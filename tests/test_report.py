"""memlife.base.artifacts: tables and figures written byte for byte the same on every run."""
import pandas as pd
import pytest

from memlife.base import artifacts
from memlife.running import publish


def test_count_columns_stay_integers_beside_empty_rows(tmp_path):
    df = pd.DataFrame({"source": ["paper", "ours"], "Accuracy": [0.85, 0.2], "n": [float("nan"), 5.0],
                       "n_questions": [3.0, 4.0], "rate": [1.0, 2.0]})
    csv = artifacts.save_table(df, "t", tmp_path)
    text = csv.read_text()
    assert text.splitlines()[1:] == ["paper,0.85,,3,1.0", "ours,0.2,5,4,2.0"]
    md = (tmp_path / "t.md").read_text()
    assert md.splitlines()[2:] == ["| paper    |      0.850 |     |             3 |  1.000 |",
                                   "| ours     |      0.200 |   5 |             4 |  2.000 |"]
    assert df["n"].dtype == float  # the caller's frame is not modified


def test_a_fractional_count_column_is_left_alone(tmp_path):
    df = pd.DataFrame({"n": [1.5, 2.0]})
    artifacts.save_table(df, "t", tmp_path)
    assert (tmp_path / "t.csv").read_text().splitlines()[1:] == ["1.5", "2.0"]


def test_save_table_is_byte_identical_across_runs(tmp_path):
    df = pd.DataFrame({"a": [0.1234567, 2.0], "n": [float("nan"), 3.0]})
    artifacts.save_table(df, "t", tmp_path / "x")
    artifacts.save_table(df, "t", tmp_path / "y")
    for ext in ("csv", "md"):
        assert (tmp_path / "x" / f"t.{ext}").read_bytes() == (tmp_path / "y" / f"t.{ext}").read_bytes()


def test_publish_copies_a_complete_runs_tables_and_figures_and_drops_what_it_no_longer_writes(tmp_path):
    import pandas as pd

    from memlife.base import paths

    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "quick.yaml").write_text("common: {}\nnotebooks: {}\n")
    (tmp_path / "notebooks").mkdir()
    for nb in ("10_a", "20_b"):
        (tmp_path / "notebooks" / f"{nb}.ipynb").write_text("{}")
    lay = paths.layout("quick", tmp_path)
    artifacts.save_table(pd.DataFrame({"a": [1]}), "t1", lay.tables)
    tables, figures = paths.published(tmp_path)
    tables.mkdir(parents=True)
    (tables / "gone.csv").write_text("old\n")
    (tables / "README.txt").write_text("kept: not an output\n")
    lay.notebooks.mkdir(parents=True)
    (lay.notebooks / "10_a.ipynb").write_text("{}")
    with pytest.raises(SystemExit, match=r"incomplete, \['20_b'\] did not execute"):
        publish.publish("quick", tmp_path)
    assert not (tables / "t1.csv").exists()  # nothing copied from a partial run

    (lay.notebooks / "20_b.ipynb").write_text("{}")
    changed = publish.publish("quick", tmp_path)
    assert changed == {"results/tables": ["t1.csv", "t1.md", "gone.csv (removed)"], "figures": []}
    assert (tables / "t1.csv").read_bytes() == (lay.tables / "t1.csv").read_bytes()
    assert sorted(p.name for p in tables.iterdir()) == ["README.txt", "t1.csv", "t1.md"]
    assert publish.publish("quick", tmp_path) == {"results/tables": [], "figures": []}
