"""The MemOps paper's values in memlife.paper_reference, and the transcribed Tables 3-5 it reads,
must match the paper text cell by cell."""
import csv
import re
from pathlib import Path

import pytest

from memlife import paper_reference as pr
from memlife import paths
from memlife.memops import analyses
from memlife.memops.schema import CATEGORIES

ROOT = paths.repo_root()
# The papers sit in shared/ inside a checkout that has one, or next to the checkout.
CANDIDATES = [ROOT / "shared" / "papers" / pr.MEMOPS_PAPER, ROOT.parent / "shared" / "papers" / pr.MEMOPS_PAPER,
              Path("/work/shared/papers") / pr.MEMOPS_PAPER]


def _paper_lines() -> list[str]:
    for p in CANDIDATES:
        if p.is_file():
            return p.read_text(encoding="utf-8").splitlines()
    pytest.skip("the MemOps paper text is not next to this checkout")


def _paper_block(title: str) -> list[list[str]]:
    """The tab-separated table under `title` in the paper text, header row first."""
    lines = _paper_lines()
    i = next(k for k, line in enumerate(lines) if line.startswith(title))
    while not lines[i].startswith(("Method\t", "Statistic\t")):
        i += 1
    block = []
    while lines[i].strip():
        block.append(lines[i].split("\t"))
        i += 1
    return block


@pytest.mark.parametrize("number", [3, 4, 5])
def test_tables_3_to_5_match_the_paper_cell_by_cell(number):
    title = pr.MEMOPS_TABLE_TITLES[number]
    assert any(line.startswith(title) for line in _paper_lines())
    with open(pr.memops_table_path(number), newline="") as fh:
        cells = list(csv.reader(fh))
    assert cells == _paper_block(title.split(":")[0] + ":")  # as printed: names, order, three decimals


def test_table_frames_have_float_columns_and_the_names_our_tables_use():
    t4, t5 = pr.memops_table(4), pr.memops_table(5)
    assert list(t4.columns) == ["Method", *analyses.OPERATION_NAMES.values()]
    assert list(t5.columns) == ["Method", *analyses.PROBE_NAMES.values()]
    assert pr.memops_table(3).loc[0, "Accuracy"] == 0.85 and len(t4) == len(t5) == 19
    with pytest.raises(KeyError):
        pr.memops_table(6)


def test_table2_matches_the_paper():
    printed = {}
    for row in _paper_block("Table 2:")[1:]:  # two statistic | value column pairs; a lone name is a section
        row = row + [""] * (5 - len(row))
        for name, value in (row[0:2], row[3:5]):
            if value:
                printed[name] = value
    generated, retained = re.fullmatch(r"\$(\d+)\\rightarrow (\d+)\$", printed.pop("Generated $\\rightarrow$ retained")).groups()
    printed["Generated attempts"], printed["Retained"] = generated, retained
    assert set(printed) == set(pr.MEMOPS_TABLE2)
    for name, value in pr.MEMOPS_TABLE2.items():
        assert float(printed[name].replace(",", "")) == value, name


def test_category_counts_match_the_paper():
    text = " ".join(_paper_lines())
    assert list(pr.MEMOPS_CATEGORY_COUNTS) == list(CATEGORIES)
    for category, n in pr.MEMOPS_CATEGORY_COUNTS.items():
        assert f"{category} ({n}%)" in text, category
    assert sum(pr.MEMOPS_CATEGORY_COUNTS.values()) == pr.MEMOPS_TABLE2["Unique topics"]
