"""LongMemEval-S data: the real (cleaned) file, pinned by hash, and an offline builder.

The real file is ``longmemeval_s_cleaned.json`` from the HuggingFace dataset
``xiaowu0162/longmemeval-cleaned`` (a JSON list of question records, 277,383,467 bytes). When
it is absent (no internet), :func:`build` writes a file in exactly the same format: dated
multi-session histories whose filler sessions are real human-written dialogues
(:func:`memlife.corpus.load_dialogues`), and whose evidence sessions state templated facts
with ``has_answer`` turns, for the six LongMemEval question types.

``python -m memlife.longmem validate FILE`` exits 0 when FILE is usable and 1 otherwise,
printing each problem with its ``question_id``.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import random
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memlife import corpus, tokens
from memlife.paths import file_sha256

LONGMEMEVAL_S_URL = (
    "https://huggingface.co/datasets/xiaowu0162/longmemeval-cleaned/resolve/main/"
    "longmemeval_s_cleaned.json"
)
# SHA-256 of that file (its git-LFS oid; 277,383,467 bytes).
LONGMEMEVAL_S_SHA256 = "d6f21ea9d60a0d56f34a05b609c79c88a451d2ae03597821ea3d5a9678c3a442"
# Where the loader and `make data` expect the real file, relative to the repository root.
# Downloads live under data/raw/: shared by every profile, never rebuilt, kept by `make clean`.
LONGMEMEVAL_S_RELPATH = Path("data") / "raw" / "longmemeval" / "longmemeval_s_cleaned.json"

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
    for sid in rec["answer_session_ids"]:
        if sid not in seen:
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
    try:
        with open(path) as fh:
            return json.load(fh)
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
        got = file_sha256(path)
        if got != expected_sha256:
            raise LongMemEvalError(f"{path}: SHA-256 {got} differs from the pinned {expected_sha256}")
    records = read_json(path)
    errors = [p for p in validate(records) if p.severity == "error"]
    if errors:
        shown = "\n".join(f"  {p}" for p in errors[:50])
        more = f"\n  ... and {len(errors) - 50} more" if len(errors) > 50 else ""
        raise LongMemEvalError(f"{path}: {len(errors)} problem(s):\n{shown}{more}")
    qs = [to_question(r) for r in records]
    return [q for q in qs if keep_abstention or not q.is_abstention]


SOURCES = ("built", "real")
BUILT_FILENAME = "longmemeval_s_built.json"


def dataset_path(profile: str, source: str) -> Path:
    """Where a profile's LongMemEval-format file lives: the real file (shared by all profiles)
    or the builder's output under the profile's data directory."""
    from memlife import paths

    lay = paths.layout(profile)
    if source == "real":
        return lay.root / LONGMEMEVAL_S_RELPATH
    if source == "built":
        return lay.data / "longmemeval" / BUILT_FILENAME
    raise ValueError(f"unknown source {source!r}; expected one of {SOURCES}")


def load_dataset(profile: str, source: str) -> list[Question]:
    """The profile's questions (abstention left out); the real file is hash-checked."""
    path = dataset_path(profile, source)
    if not path.is_file():
        how = (f"download it from {LONGMEMEVAL_S_URL}" if source == "real"
               else "run notebooks/20_longmem_data.ipynb (make data) first")
        raise FileNotFoundError(f"{path} is missing; {how}")
    return load(path, expected_sha256=LONGMEMEVAL_S_SHA256 if source == "real" else None)


# ---------------------------------------------------------------------------------------------
# Offline builder
# ---------------------------------------------------------------------------------------------
# Evidence templates. Each yields the evidence sessions (list of turns with has_answer flags and
# a session offset in days before the question date), the question, and its short gold answer.
# Preference answers are short key phrases (LongMemEval's are rubric sentences) so that the
# deterministic scorer can check them.
_NAMES = ["Luna", "Biscuit", "Mochi", "Pepper", "Ziggy", "Olive", "Nacho", "Juniper", "Waffles", "Clover"]
_PETS = ["cat", "dog", "rabbit", "parrot", "hamster", "turtle"]
_CITIES = ["Lisbon", "Kyoto", "Denver", "Tallinn", "Oaxaca", "Porto", "Hanoi", "Valencia", "Quebec City"]
_BOOKS = ["The Left Hand of Darkness", "Piranesi", "Station Eleven", "The Overstory", "Circe",
          "Project Hail Mary", "A Gentleman in Moscow", "The Remains of the Day"]
_PREFS = [("vegan", "snack for my movie night", "I went fully vegan last month, so no dairy or meat for me anymore."),
          ("gluten-free", "dessert to bring to a party", "I found out I'm gluten intolerant, so I avoid anything with wheat now."),
          ("spicy", "dinner recipe for tonight", "I absolutely love spicy food, the hotter the better."),
          ("hiking", "weekend activity", "My favourite way to relax is hiking on mountain trails."),
          ("jazz", "playlist for a road trip", "Jazz is my favourite music, especially old bebop records."),
          ("mystery", "novel to read on holiday", "I can't get enough of mystery novels, I love a good whodunit.")]
_GYMS = ["Iron Temple", "FitHub", "Peak Performance", "CoreZone", "Urban Strength", "Pulse Studio"]
_ITEMS = [("a new lamp", "home"), ("hiking boots", "outdoors"), ("a blender", "kitchen"),
          ("a bike helmet", "cycling"), ("a yoga mat", "fitness"), ("a coffee grinder", "kitchen"),
          ("a desk chair", "home"), ("a rain jacket", "outdoors")]
_HOBBIES = ["pottery class", "salsa lessons", "guitar lessons", "rock climbing course",
            "sourdough baking class", "Spanish course", "chess club", "watercolor workshop"]


def _ack(rng: random.Random) -> str:
    return rng.choice(["That's great to hear!", "Thanks for sharing that with me.",
                       "Nice, I'll keep that in mind.", "Sounds lovely, tell me more anytime."])


def _evidence(qtype: str, rng: random.Random) -> tuple[list[tuple[int, list[dict]]], str, str]:
    """([(days_before_question, turns)], question, answer) for one question of ``qtype``."""
    U = lambda text, gold=False: {"role": "user", "content": text, "has_answer": gold}  # noqa: E731
    A = lambda text, gold=False: {"role": "assistant", "content": text, "has_answer": gold}  # noqa: E731
    if qtype == "single-session-user":
        name, pet = rng.choice(_NAMES), rng.choice(_PETS)
        turns = [U(f"Guess what, I just adopted a {pet} and named it {name}!", True), A(_ack(rng)),
                 U("It's been a fun first week together."), A("I'm glad it's going well.")]
        return [(rng.randint(5, 60), turns)], f"What is the name of the {pet} I adopted?", name
    if qtype == "single-session-assistant":
        book, city = rng.choice(_BOOKS), rng.choice(_CITIES)
        turns = [U(f"I'm flying to {city} next month. Can you recommend one novel for the flight?"),
                 A(f"For a long flight I'd recommend '{book}'; it is absorbing and easy to pick up again.", True),
                 U("Thanks, I'll get it."), A("Enjoy the trip!")]
        q = f"Which novel did you recommend for my flight to {city}?"
        return [(rng.randint(5, 60), turns)], q, book
    if qtype == "single-session-preference":
        key, ask, statement = rng.choice(_PREFS)
        turns = [U(statement, True), A(_ack(rng)), U("Anyway, just wanted you to know."), A("Noted!")]
        return [(rng.randint(5, 60), turns)], f"Can you suggest a {ask}?", key
    if qtype == "multi-session":
        picks = rng.sample(_ITEMS, 3)
        prices = [rng.randint(12, 180) for _ in picks]
        sessions = []
        for (item, _), price, days in zip(picks, prices, sorted(rng.sample(range(3, 90), 3), reverse=True)):
            sessions.append((days, [U(f"I bought {item} today for ${price}.", True), A(_ack(rng)),
                                    U("I've been meaning to get one for a while."), A("Makes sense.")]))
        q = f"How much did I spend in total on {picks[0][0]}, {picks[1][0]} and {picks[2][0]}?"
        return sessions, q, f"${sum(prices)}"
    if qtype == "knowledge-update":
        old, new = rng.sample(_GYMS, 2)
        d1, d2 = sorted(rng.sample(range(3, 90), 2), reverse=True)
        s1 = [U(f"I signed up at a gym called {old} near my office.", True), A(_ack(rng)),
              U("Hoping to go three times a week."), A("Good plan.")]
        s2 = [U(f"I cancelled {old} and joined {new} instead, it's closer to home.", True), A(_ack(rng)),
              U("The classes there are better too."), A("Great choice.")]
        return [(d1, s1), (d2, s2)], "Which gym am I a member of now?", new
    if qtype == "temporal-reasoning":
        hobby, days = rng.choice(_HOBBIES), rng.randint(4, 80)
        turns = [U(f"Today I went to the first session of my {hobby}!", True), A(_ack(rng)),
                 U("I was nervous but it was fun."), A("That's how it starts.")]
        q = f"How many days ago did I attend the first session of my {hobby}?"
        return [(days, turns)], q, f"{days} days"
    raise ValueError(f"unknown question type {qtype!r}")


def _fmt(d: dt.datetime) -> str:
    return d.strftime(DATE_FORMAT)


def _session_tokens(turns: list[dict]) -> int:
    return sum(tokens.count(t["content"]) for t in turns)


def build(n_questions: int, history_tokens: int, seed: int) -> list[dict]:
    """Question records in the LongMemEval-S format, deterministic for (n_questions, history_tokens, seed).

    Question types cycle through :data:`QUESTION_TYPES`. Each history holds the evidence sessions
    plus real chit-chat dialogues (distinct within a history) until it reaches ``history_tokens``;
    sessions are dated on distinct days before the question date and listed chronologically.
    """
    if n_questions < 1 or history_tokens < 1:
        raise ValueError("n_questions and history_tokens must be positive")
    dialogues = corpus.load_dialogues()
    dialogue_tokens: dict[int, list[int]] = {}
    records = []
    for qi in range(n_questions):
        rng = random.Random(f"longmem-build:{seed}:{qi}")
        qtype = QUESTION_TYPES[qi % len(QUESTION_TYPES)]
        qid = hashlib.sha256(f"{seed}:{qi}:{qtype}".encode()).hexdigest()[:8]
        question_date = dt.datetime(2023, 1, 1, 12, 0) + dt.timedelta(days=rng.randint(0, 300),
                                                                      minutes=rng.randint(0, 600))
        evidence, question, answer = _evidence(qtype, rng)
        sessions: list[tuple[dt.datetime, str, list[dict]]] = []
        answer_ids = []
        for ei, (days_before, turns) in enumerate(evidence):
            sid = f"answer_{qid}_{ei + 1}"
            answer_ids.append(sid)
            when = question_date - dt.timedelta(days=days_before, hours=rng.randint(1, 9))
            sessions.append((when, sid, turns))
        total = sum(_session_tokens(t) for _, _, t in sessions)
        order = rng.sample(range(len(dialogues)), len(dialogues))
        used_days = {(question_date.date() - w.date()).days for w, _, _ in sessions}
        for di in order:
            if total >= history_tokens:
                break
            if di not in dialogue_tokens:
                dialogue_tokens[di] = [tokens.count(t["content"]) for t in dialogues[di].turns]
            days = rng.randint(1, 400)
            while days in used_days:
                days = rng.randint(1, 400)
            used_days.add(days)
            when = question_date - dt.timedelta(days=days, minutes=rng.randint(0, 600))
            # The last dialogue is cut after the turn that reaches the target length (whole
            # turns, at least two), so short histories do not overshoot by a whole dialogue.
            turns = []
            for t, n_tok in zip(dialogues[di].turns, dialogue_tokens[di]):
                if total >= history_tokens and len(turns) >= 2:
                    break
                turns.append({"role": t["role"], "content": t["content"]})
                total += n_tok
            sessions.append((when, f"chitchat_{dialogues[di].dialogue_id}", turns))
        sessions.sort(key=lambda s: (s[0], s[1]))
        records.append({
            "question_id": qid,
            "question_type": qtype,
            "question": question,
            "answer": answer,
            "question_date": _fmt(question_date),
            "haystack_session_ids": [s[1] for s in sessions],
            "haystack_dates": [_fmt(s[0]) for s in sessions],
            "haystack_sessions": [s[2] for s in sessions],
            "answer_session_ids": answer_ids,
        })
    return records


def write(records: list[dict], path: Path | str) -> Path:
    """Write records as one JSON list (the real file's layout), byte-stable."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(records, ensure_ascii=False, indent=1) + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) != 2 or argv[0] != "validate":
        print("usage: python -m memlife.longmem validate FILE", file=sys.stderr)
        return 2
    path = Path(argv[1])
    try:
        records = read_json(path)
    except (OSError, LongMemEvalError) as e:
        print(f"{path}: {e}")
        return 1
    problems = validate(records)
    for p in problems:
        print(f"{path}: {p}")
    n_err = sum(p.severity == "error" for p in problems)
    if n_err:
        print(f"{path}: unusable, {n_err} error(s)")
        return 1
    n = len(records)
    n_abs = sum(str(r.get("question_id", "")).endswith("_abs") for r in records)
    sha = file_sha256(path)
    pin = " (matches the pinned LongMemEval-S cleaned file)" if sha == LONGMEMEVAL_S_SHA256 else ""
    print(f"{path}: usable, {n} questions ({n_abs} abstention, left out by the loader); sha256 {sha}{pin}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
