"""The transcribed Tables 3-5 must match the paper text cell by cell (a pinned excerpt)."""
import csv

import pytest

from memlife import paths
from paper_text import excerpt, lines_missing_from_full_text

PAPER = "000_0a943ab90c8855d8.txt"
# tests/data/papers/000_0a943ab90c8855d8.excerpt.txt: MemOps' Tables 3-5, as the paper prints them.
EXCERPT_SHA256 = "68f6f7e39c491fd7ecdcf225b0a6957926ee48a24cf869c071c6edc6efa8076a"
REF = paths.repo_root() / "results" / "paper_reference"
TABLES = {"memops_table3.csv": "Table 3:", "memops_table4.csv": "Table 4:", "memops_table5.csv": "Table 5:"}


def _paper_block(lines: list[str], title: str) -> tuple[dict[str, list[str]], range]:
    """A table's cells by method (its header row under "Method"), and the lines it spans."""
    start = next(k for k, line in enumerate(lines) if line.startswith(title))
    i = start
    while not lines[i].startswith("Method\t"):
        i += 1
    block = {"Method": lines[i].split("\t")[1:]}
    i += 1
    while i < len(lines) and lines[i].strip():
        method, *values = lines[i].split("\t")
        block[method] = values
        i += 1
    return block, range(start, i)


def _excerpt() -> list[str]:
    return excerpt(PAPER, EXCERPT_SHA256)


@pytest.mark.parametrize("name", sorted(TABLES))
def test_transcription_matches_paper(name):
    block, _ = _paper_block(_excerpt(), TABLES[name])
    with open(REF / name, newline="") as fh:
        rows = list(csv.reader(fh))
    header, body = rows[0], rows[1:]
    assert header[1:] == block["Method"], f"{name}: header differs from the paper"
    assert len(body) == len(block) - 1, f"{name}: {len(body)} rows, paper has {len(block) - 1}"
    for row in body:
        method, values = row[0], row[1:]
        assert method in block, f"{name}: method {method!r} not in the paper's table"
        assert [float(v) for v in values] == [float(v) for v in block[method]], f"{name}: {method}"


def test_the_excerpt_is_the_papers_text_and_only_its_tables():
    lines = _excerpt()
    spanned = set()
    for title in TABLES.values():
        spanned.update(_paper_block(lines, title)[1])
    # every non-empty line belongs to one of the three tables: the excerpt copies nothing else
    assert [k for k, line in enumerate(lines) if line.strip() and k not in spanned] == []
    # and is the paper's text, line for line, wherever the full text sits beside the repository
    assert lines_missing_from_full_text(PAPER, lines) in (None, [])
