"""The MemOps paper's values in memlife.paper_reference, and the transcribed Tables 3-5 it reads,
must match the paper text cell by cell (a pinned excerpt of it, so the tests run on every clone)."""
import csv
import re

import pytest

from memlife import paper_reference as pr
from memlife.memops.analyses import paper_analyses
from memlife.memops.data.schema import CATEGORIES

from paper_text import excerpt, lines_missing_from_full_text

# tests/data/papers/000_0a943ab90c8855d8.excerpt.txt: the category split and Tables 2-5, as printed.
EXCERPT_SHA256 = "2f5057621faa0b18863511c26f7cb9f25c91286f5794b4e980e331cef83b8efb"
CATEGORY_LINE = "Topic Coverage."


def _excerpt() -> list[str]:
    return excerpt(pr.MEMOPS_PAPER, EXCERPT_SHA256)


def _paper_block(title: str, lines: list[str] | None = None) -> tuple[list[list[str]], range]:
    """The tab-separated table under `title`, header row first, and the lines it spans (title included)."""
    lines = _excerpt() if lines is None else lines
    start = next(k for k, line in enumerate(lines) if line.startswith(title))
    i = start
    while not lines[i].startswith(("Method\t", "Statistic\t")):
        i += 1
    block = []
    while i < len(lines) and lines[i].strip():
        block.append(lines[i].split("\t"))
        i += 1
    return block, range(start, i)


@pytest.mark.parametrize("number", [3, 4, 5])
def test_tables_3_to_5_match_the_paper_cell_by_cell(number):
    title = pr.MEMOPS_TABLE_TITLES[number]
    assert any(line.startswith(title) for line in _excerpt())
    with open(pr.memops_table_path(number), newline="") as fh:
        cells = list(csv.reader(fh))
    assert cells == _paper_block(title.split(":")[0] + ":")[0]  # as printed: names, order, three decimals


def test_table_frames_have_float_columns_and_the_names_our_tables_use():
    t4, t5 = pr.memops_table(4), pr.memops_table(5)
    assert list(t4.columns) == ["Method", *paper_analyses.OPERATION_NAMES.values()]
    assert list(t5.columns) == ["Method", *paper_analyses.PROBE_NAMES.values()]
    assert pr.memops_table(3).loc[0, "Accuracy"] == 0.85 and len(t4) == len(t5) == 19
    with pytest.raises(KeyError):
        pr.memops_table(6)


def test_table2_matches_the_paper():
    printed = {}
    for row in _paper_block("Table 2:")[0][1:]:  # two statistic | value column pairs; a lone name is a section
        row = row + [""] * (5 - len(row))
        for name, value in (row[0:2], row[3:5]):
            if value:
                printed[name] = value
    generated, retained = re.fullmatch(r"\$(\d+)\\rightarrow (\d+)\$",
                                       printed.pop("Generated $\\rightarrow$ retained")).groups()
    printed["Generated attempts"], printed["Retained"] = generated, retained
    assert set(printed) == set(pr.MEMOPS_TABLE2)
    for name, value in pr.MEMOPS_TABLE2.items():
        assert float(printed[name].replace(",", "")) == value, name


def test_category_counts_match_the_paper():
    (text,) = [line for line in _excerpt() if line.startswith(CATEGORY_LINE)]
    assert list(pr.MEMOPS_CATEGORY_COUNTS) == list(CATEGORIES)
    for category, n in pr.MEMOPS_CATEGORY_COUNTS.items():
        assert f"{category} ({n}%)" in text, category
    assert sum(pr.MEMOPS_CATEGORY_COUNTS.values()) == pr.MEMOPS_TABLE2["Unique topics"]


def test_the_excerpt_is_the_papers_text_and_only_what_the_tests_read():
    lines = _excerpt()
    spanned = {k for k, line in enumerate(lines) if line.startswith(CATEGORY_LINE)}
    for title in ("Table 2:", *(pr.MEMOPS_TABLE_TITLES[n].split(":")[0] + ":" for n in (3, 4, 5))):
        spanned.update(_paper_block(title, lines)[1])
    assert [k for k, line in enumerate(lines) if line.strip() and k not in spanned] == []
    # and is the paper's text, line for line, wherever the full text sits beside the repository
    assert lines_missing_from_full_text(pr.MEMOPS_PAPER, lines) in (None, [])
