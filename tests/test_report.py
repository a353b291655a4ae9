"""memlife.report: tables and figures written byte for byte the same on every run."""
import pandas as pd

from memlife import report


def test_count_columns_stay_integers_beside_empty_rows(tmp_path):
    df = pd.DataFrame({"source": ["paper", "ours"], "Accuracy": [0.85, 0.2], "n": [float("nan"), 5.0],
                       "n_questions": [3.0, 4.0], "rate": [1.0, 2.0]})
    csv = report.save_table(df, "t", tmp_path)
    text = csv.read_text()
    assert text.splitlines()[1:] == ["paper,0.85,,3,1.0", "ours,0.2,5,4,2.0"]
    md = (tmp_path / "t.md").read_text()
    assert md.splitlines()[2:] == ["| paper    |      0.850 |     |             3 |  1.000 |",
                                   "| ours     |      0.200 |   5 |             4 |  2.000 |"]
    assert df["n"].dtype == float  # the caller's frame is not modified


def test_a_fractional_count_column_is_left_alone(tmp_path):
    df = pd.DataFrame({"n": [1.5, 2.0]})
    report.save_table(df, "t", tmp_path)
    assert (tmp_path / "t.csv").read_text().splitlines()[1:] == ["1.5", "2.0"]


def test_save_table_is_byte_identical_across_runs(tmp_path):
    df = pd.DataFrame({"a": [0.1234567, 2.0], "n": [float("nan"), 3.0]})
    report.save_table(df, "t", tmp_path / "x")
    report.save_table(df, "t", tmp_path / "y")
    for ext in ("csv", "md"):
        assert (tmp_path / "x" / f"t.{ext}").read_bytes() == (tmp_path / "y" / f"t.{ext}").read_bytes()
