"""The transcribed Tables 3-5 must match the paper text cell by cell."""
import csv

import pytest

from memlife import paths

PAPER = paths.repo_root().parent / "shared" / "papers" / "000_0a943ab90c8855d8.txt"
REF = paths.repo_root() / "results" / "paper_reference"
TABLES = {"memops_table3.csv": "Table 3:", "memops_table4.csv": "Table 4:", "memops_table5.csv": "Table 5:"}


def _paper_block(title: str) -> dict[str, list[str]]:
    lines = PAPER.read_text(encoding="utf-8").splitlines()
    i = next(k for k, line in enumerate(lines) if line.startswith(title))
    while not lines[i].startswith("Method\t"):
        i += 1
    block = {"Method": lines[i].split("\t")[1:]}
    i += 1
    while lines[i].strip():
        method, *values = lines[i].split("\t")
        block[method] = values
        i += 1
    return block


@pytest.mark.parametrize("name", sorted(TABLES))
def test_transcription_matches_paper(name):
    if not PAPER.is_file():
        pytest.skip(f"paper text not found at {PAPER} (shared/papers/ sits beside the repo)")
    block = _paper_block(TABLES[name])
    with open(REF / name, newline="") as fh:
        rows = list(csv.reader(fh))
    header, body = rows[0], rows[1:]
    assert header[1:] == block["Method"], f"{name}: header differs from the paper"
    assert len(body) == len(block) - 1, f"{name}: {len(body)} rows, paper has {len(block) - 1}"
    for row in body:
        method, values = row[0], row[1:]
        assert method in block, f"{name}: method {method!r} not in the paper's table"
        assert [float(v) for v in values] == [float(v) for v in block[method]], f"{name}: {method}"
