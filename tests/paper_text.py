"""The papers' text that the paper-reference tests check against: vendored excerpts, pinned.

The full texts are not part of the repository; where a copy sits in a `shared/papers/` directory
inside or beside the checkout, the tests also check the excerpts against it.
tests/data/papers/<paper>.excerpt.txt holds, copied verbatim, only the lines of a paper that the
tests read, under a header of lines starting with "# " that says where they come from.
A test pins its excerpt's bytes by SHA-256, so neither the excerpt nor a transcription checked
against it can change unnoticed, and the tests run the same on a fresh clone.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXCERPTS = Path(__file__).parent / "data" / "papers"
HEADER = "# "
# Where the full texts are found: in shared/ inside a checkout that has one, or beside the checkout.
FULL_TEXT_DIRS = (ROOT / "shared" / "papers", ROOT.parent / "shared" / "papers")


def excerpt_path(paper: str) -> Path:
    return EXCERPTS / f"{Path(paper).stem}.excerpt.txt"


def excerpt(paper: str, sha256: str) -> list[str]:
    """The excerpt's lines of `paper` (its file name in shared/papers/), header left out, after
    checking its bytes against `sha256`."""
    path = excerpt_path(paper)
    data = path.read_bytes()
    got = hashlib.sha256(data).hexdigest()
    assert got == sha256, (f"{path} has SHA-256 {got}, not the pinned {sha256}: an excerpt changes only "
                           "with the paper text it copies (and then its pin with it)")
    return [line for line in data.decode("utf-8").splitlines() if not line.startswith(HEADER)]


def full_text(paper: str) -> Path | None:
    """The paper's full text where it sits beside the repository, else None."""
    return next((d / paper for d in FULL_TEXT_DIRS if (d / paper).is_file()), None)


def lines_missing_from_full_text(paper: str, lines: list[str]) -> list[str] | None:
    """The excerpt's non-empty lines that are not, verbatim, lines of the full text; None when
    the full text is not beside the repository (the SHA-256 pin alone then holds the excerpt)."""
    path = full_text(paper)
    if path is None:
        return None
    full = set(path.read_text(encoding="utf-8").splitlines())
    return [line for line in lines if line.strip() and line not in full]
