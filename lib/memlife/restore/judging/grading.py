"""The readers' answers judged, and the per-question records (notebook 22).

Judging: the deterministic judge (:func:`memlife.restore.judging.answer_judge.grade`) always; the
paper's LLM judge in addition when :func:`memlife.models.endpoints.judge_available` is true. The deterministic
judge reads LongMemEval's real answers (alternatives, numbers in words or digits, rubric
sentences) and says CORRECT, INCORRECT or UNDECIDED; its row's ``judge_raw`` is that label and
``correct`` is True / False, or missing when UNDECIDED. Where the LLM judge graded the same item,
an undecided deterministic row takes the LLM judge's label, and ``judge_raw`` reads
``"UNDECIDED -> <judge model>: <raw reply>"``: the configured LLM judge grades exactly the items
the deterministic judge cannot (:func:`memlife.restore.analyses.paper_analyses.undecided_share` counts them).
Without an LLM judge an undecided item stays unlabelled, and the decomposition excludes and
counts it (``attrs["n_excluded_unlabelled"]``). Records hold one row per question × cell ×
regime × arm × judge, ``judge`` naming the judge (:data:`DETERMINISTIC_JUDGE` or the judge
model). The judge audit (:func:`judge_audit`) adds rows for a seeded sample of items, re-graded by
the ``judge_audit`` role, with ``judge`` = ``"audit:" + model``.

Files: one per reader under a run's :func:`records_dir` (:func:`reader_records_path`,
:func:`write_records`); `memlife.restore.analyses.decompose.load_records` reads them.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from memlife.longmem import Question
from memlife.restore.judging import answer_judge
from memlife.restore.reading import prompts
from memlife.restore.reading.arms import ARMS, Read

RECORD_COLUMNS = ("question_id", "question_type", "policy", "budget", "regime", "seed", "reader",
                  "judge", "arm", "correct", "n_gold", "n_gold_evicted", "context_tokens",
                  "hypothesis", "judge_raw")

# The `judge` of the rows the deterministic scorer grades; every record set carries them.
DETERMINISTIC_JUDGE = "deterministic"
# Judge-audit rows (Appendix C) carry `judge` = this prefix + the audit model: they re-grade a
# sample of items, so they are an agreement check (analyses.judge_agreement), never a cell.
AUDIT_JUDGE_PREFIX = "audit:"


def records_dir(run_dir: str | Path) -> Path:
    """Where a run's restore records live: one file per reader, ``<reader>.parquet``
    (:func:`reader_records_path`). 22_read_restore writes its reader's file
    (:func:`write_records`), so a second reader's run adds its records beside the first's instead
    of replacing them; 23_decomposition and 24_robustness read the directory whole
    (`decompose.load_records`, `paper_analyses.load_run`)."""
    return Path(run_dir) / "restore" / "records"


def legacy_records_path(run_dir: str | Path) -> Path:
    """The single records file of runs before per-reader files (refused, with what to do)."""
    return Path(run_dir) / "restore" / "records.parquet"


def reader_slug(reader: str) -> str:
    """A file name for a reader's records: its name with anything but letters, digits, '.', '-'
    and '_' replaced by '_' ("gold (reference)" -> "gold_reference")."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", str(reader)).strip("_.")
    if not slug:
        raise ValueError(f"reader {reader!r} gives no usable file name")
    return slug


def reader_records_path(directory: str | Path, reader: str) -> Path:
    return Path(directory) / f"{reader_slug(reader)}.parquet"


# ---------------------------------------------------------------------------------------------
# Judging
# ---------------------------------------------------------------------------------------------
def judge_all(pairs: Sequence[tuple[str, str, str]], client, *, desc: str = "judging") -> dict[tuple, str]:
    """Raw LLM-judge replies per distinct (question, reference, hypothesis)."""
    distinct = sorted(set(pairs))
    reqs = [dict(messages=prompts.judge_messages(q, a, h), max_tokens=prompts.JUDGE_MAX_TOKENS,
                 temperature=0.0) for q, a, h in distinct]
    replies = client.complete_many(reqs, desc=desc) if reqs else []
    return {p: c.text for p, c in zip(distinct, replies)}


# ---------------------------------------------------------------------------------------------
# The judge audit (Appendix C: a second judge re-grades a sample)
# ---------------------------------------------------------------------------------------------
ITEM_COLUMNS = ("question_id", "policy", "budget", "regime", "seed", "reader", "arm")


def audit_judge_name(model: str) -> str:
    """The `judge` value of audit rows. The prefix keeps the audit's sample out of the
    decomposition (:func:`memlife.restore.analyses.decompose.observations`), and keeps it apart from the
    primary judge even when both are the same model name."""
    return AUDIT_JUDGE_PREFIX + model


def audit_sample(records: pd.DataFrame, n_items: int, seed: int) -> pd.DataFrame:
    """``n_items`` graded items drawn without replacement, seeded, from the deterministic
    scorer's rows (every record set has exactly one per item: question × cell × seed × reader ×
    arm). The draw depends only on the items and ``seed``, never on any judge's labels or on
    row order, so the primary judge and any audit judge see the same sample."""
    items = records[records["judge"] == DETERMINISTIC_JUDGE]
    items = items.sort_values(list(ITEM_COLUMNS), na_position="first", kind="mergesort")
    n = min(max(int(n_items), 0), len(items))
    pick = np.sort(np.random.default_rng(seed).choice(len(items), size=n, replace=False))
    return items.iloc[pick].reset_index(drop=True)


def judge_audit(records: pd.DataFrame, questions: Mapping[str, Question], client, *, n_items: int,
                seed: int, parse_label, desc: str = "judge audit") -> pd.DataFrame:
    """Audit rows: the :func:`audit_sample` re-graded by ``client`` with the paper's judge prompt
    and ``parse_label``'s strict parsing, ``judge`` = :func:`audit_judge_name`.

    A call that still fails after its retries leaves the row's label and raw reply empty (the
    paper excluded its 3 errored audit calls; :func:`analyses.judge_agreement` counts them as
    excluded) instead of losing the whole audit; failures are not cached, so a rerun retries.
    """
    from memlife.base import progress
    from memlife.models.endpoints import LLMCallError

    sample = audit_sample(records, n_items, seed)
    triple = [(questions[qid].question, questions[qid].answer, hyp)
              for qid, hyp in zip(sample["question_id"], sample["hypothesis"])]
    raw: dict[tuple, str | None] = {}
    for t in progress.bar(sorted(set(triple)), desc=desc):
        try:
            raw[t] = client.complete(prompts.judge_messages(*t), max_tokens=prompts.JUDGE_MAX_TOKENS,
                                     temperature=0.0).text
        except LLMCallError:
            raw[t] = None
    rows = []
    for row, t in zip(sample.to_dict("records"), triple):
        label = parse_label(raw[t]) if raw[t] is not None else None
        rows.append({**row, "judge": audit_judge_name(client.model), "judge_raw": raw[t],
                     "correct": None if label is None else label == "CORRECT"})
    return to_frame(rows)


# ---------------------------------------------------------------------------------------------
# Records
# ---------------------------------------------------------------------------------------------
def records(reads: Sequence[Read], answers: Mapping[str, str], questions: Mapping[str, Question],
            reader: str, judge_replies: Mapping[tuple, str] | None = None,
            judge_model: str | None = None, parse_label=None) -> pd.DataFrame:
    """Rows in the records contract (`decompose.CONTRACT_COLUMNS`), sorted; LLM-judge rows only when replies are given. The
    deterministic row of an item the deterministic judge leaves UNDECIDED takes the LLM judge's
    label when there is one (module docstring, "Judging")."""
    rows = []
    for r in reads:
        q = questions[r.question_id]
        hyp = answers[r.prompt]
        base = dict(question_id=r.question_id, question_type=r.question_type, policy=r.policy,
                    budget=r.budget, regime=r.regime, seed=r.seed, reader=reader, arm=r.arm,
                    n_gold=r.n_gold, n_gold_evicted=r.n_gold_evicted,
                    context_tokens=r.context_tokens, hypothesis=hyp)
        det = answer_judge.grade(q.question, q.question_type, q.answer, hyp)  # memoized
        det_row = {**base, "judge": DETERMINISTIC_JUDGE, "judge_raw": det,
                   "correct": None if det == answer_judge.UNDECIDED else det == answer_judge.CORRECT}
        rows.append(det_row)
        if judge_replies is not None:
            raw = judge_replies[(q.question, q.answer, hyp)]
            label = parse_label(raw)
            correct = None if label is None else label == "CORRECT"
            rows.append({**base, "judge": judge_model, "judge_raw": raw, "correct": correct})
            if det == answer_judge.UNDECIDED:
                det_row.update(correct=correct, judge_raw=f"{answer_judge.UNDECIDED} -> {judge_model}: {raw}")
    return to_frame(rows)


def to_frame(rows: list[dict]) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=list(RECORD_COLUMNS))
    for c in ("budget", "seed", "n_gold", "n_gold_evicted", "context_tokens"):
        df[c] = df[c].astype("Int64")
    df["correct"] = df["correct"].astype("boolean")
    for c in ("question_id", "question_type", "policy", "regime", "reader", "judge", "arm",
              "hypothesis", "judge_raw"):
        df[c] = df[c].astype("string")
    arm_order = {a: i for i, a in enumerate(ARMS)}
    df = df.assign(_arm=df["arm"].map(arm_order).astype(int))
    df = df.sort_values(["question_id", "_arm", "policy", "budget", "seed", "regime", "judge"],
                        na_position="first", kind="mergesort")
    return df.drop(columns="_arm").reset_index(drop=True)


def combine(*frames: pd.DataFrame) -> pd.DataFrame:
    """Record frames (e.g. the records and the judge audit's rows) as one, in the records' order."""
    return to_frame([row for f in frames for row in f.to_dict("records")])


def write_records(df: pd.DataFrame, directory) -> list[Path]:
    """Each reader's rows to its own file in ``directory`` (:func:`reader_records_path`;
    notebook 22 passes :func:`records_dir` of the run), replacing only that reader's
    earlier records: another reader's file stays beside it and the loader reads them together.
    Two reader names that map to one file name are refused rather than one overwriting the other."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for reader, rows in df.groupby("reader", sort=True):
        path = reader_records_path(directory, reader)
        if path.is_file():
            held = set(pd.read_parquet(path, columns=["reader"])["reader"].astype(str))
            if held != {reader}:
                raise ValueError(f"{path} holds reader(s) {sorted(held)}, not {reader!r}: two reader "
                                 "names share one file name; rename one or move the file")
        rows.reset_index(drop=True).to_parquet(path, index=False)
        paths.append(path)
    return paths
