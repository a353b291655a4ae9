"""The three reader arms of the restore counterfactual, judging, and the per-question records.

Per question and cell (policy × budget × seed, then regime), with the cell's BM25 ranking of
the retained units and one injection cap (``restore_cap``, the paper's 2,000 tokens):

- **policy** — the reader on the regime's context over what the policy retained: top-k, or
  forced-gold = :func:`memlife.restore.read_context.inject` of the surviving gold within the cap.
- **restore** — :func:`memlife.restore.read_context.inject` of the full gold set (evicted gold included)
  with the same ranking and cap; one context per cell, shared by both regimes. When no gold was
  evicted it is the forced-gold context itself, so the reader answers both the same way.
- **clean_gold** — gold units only, once per question and reader.

The restore-tightness ablation (Appendix C; ``build_reads(..., ablations=True)``) adds two arms
with the policy arm's keys, one context per cell shared by both regimes like the restore's:

- **restore_surviving** — the restore with only the *surviving* gold reinstated:
  :func:`memlife.restore.read_context.inject` of the gold that eviction kept, same ranking and cap. That is
  the forced-gold policy context by construction (forced-gold = inject(surviving gold)), so the
  arm costs no read: it is asserted identical to the forced-gold policy read and read once
  with it. Under forced-gold it is therefore the policy arm itself and can flip nothing; under
  top-k it asks whether an "irreversible" error was fixed by the surviving gold alone (then
  the evicted gold was not needed and the error was really a retrieval miss). When no gold was
  evicted it also equals the restore context (asserted).
- **placebo** — the restore's context with every gold unit replaced by non-gold stand-ins from
  the gold's chronological place and of about its size (:func:`memlife.restore.read_context.placebo`): the
  restore's presentation without the gold, one new read per cell.

Every read is built first; identical prompts (same question, same context) are read once, in
sorted order so that prompts sharing a prefix run back to back. Resuming after an interruption
comes from the llm cache: rebuilding the records replays cached calls.

Judging: the deterministic judge (:func:`memlife.restore.answer_judge.grade`) always; the
paper's LLM judge in addition when :func:`memlife.models.endpoints.judge_available` is true. The deterministic
judge reads LongMemEval's real answers (alternatives, numbers in words or digits, rubric
sentences) and says CORRECT, INCORRECT or UNDECIDED; its row's ``judge_raw`` is that label and
``correct`` is True / False, or missing when UNDECIDED. Where the LLM judge graded the same item,
an undecided deterministic row takes the LLM judge's label, and ``judge_raw`` reads
``"UNDECIDED -> <judge model>: <raw reply>"``: the configured LLM judge grades exactly the items
the deterministic judge cannot (:func:`memlife.restore.analyses.undecided_share` counts them).
Without an LLM judge an undecided item stays unlabelled, and the decomposition excludes and
counts it (``attrs["n_excluded_unlabelled"]``). Records hold one row per question × cell ×
regime × arm × judge, ``judge`` naming the judge (:data:`DETERMINISTIC_JUDGE` or the judge
model). The judge audit (:func:`judge_audit`) adds rows for a seeded sample of items, re-graded by
the ``judge_audit`` role, with ``judge`` = ``"audit:" + model``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from memlife import retrieve
from memlife.longmem import Question
from memlife.models import tokens
from memlife.paper_reference import PAPER_BUDGETS
from memlife.restore import answer_judge, prompts, read_context
from memlife.restore.decompose import ARMS, AUDIT_JUDGE_PREFIX, DETERMINISTIC_JUDGE, reader_records_path
from memlife.restore.evict import Eviction
from memlife.restore.units import Unit

RECORD_COLUMNS = ("question_id", "question_type", "policy", "budget", "regime", "seed", "reader",
                  "judge", "arm", "correct", "n_gold", "n_gold_evicted", "context_tokens",
                  "hypothesis", "judge_raw")
PAPER_HISTORY_TOKENS = 102_000


def scaled_budgets(history_tokens: int) -> list[int]:
    """The paper's budgets as the same fractions of a shorter (or longer) history."""
    return [round(b * history_tokens / PAPER_HISTORY_TOKENS) for b in PAPER_BUDGETS]


def resolve_budgets(budgets: str | Sequence[int], history_tokens: int) -> list[int]:
    """A profile's `budgets` parameter in tokens: "paper" is the paper's 8k/30k/80k of its ~102k-token
    histories as the same fractions of `history_tokens` (so they follow the history length a profile
    sets); a list is taken as token budgets."""
    if budgets == "paper":
        return scaled_budgets(history_tokens)
    if isinstance(budgets, str) or not all(isinstance(b, int) and b > 0 for b in budgets):
        raise ValueError(f"budgets = {budgets!r}: 'paper' or a list of positive token counts")
    return list(budgets)


# ---------------------------------------------------------------------------------------------
# Contexts
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Read:
    """One row-to-be: which question, cell and arm, and the context the reader sees."""

    question_id: str
    question_type: str
    policy: str | None
    budget: int | None
    regime: str | None
    seed: int | None
    arm: str
    n_gold: int
    n_gold_evicted: int | None
    unit_ids: tuple[str, ...]  # chronological
    prompt: str  # the user message (the system prompt is fixed)
    context_tokens: int


def _context(q: Question, units_by_id: Mapping[str, Unit], ids: Iterable[str]) -> tuple[tuple[str, ...], str, int]:
    """(chronological unit ids, reader prompt, context tokens) of a context."""
    chrono = read_context.chronological(units_by_id, ids)
    snippets = read_context.render(chrono)
    return (tuple(u.unit_id for u in chrono),
            prompts.READER_USER.format(today=q.question_date, snippets=snippets, question=q.question),
            tokens.count_lines(snippets.split("\n")))  # = count(snippets), from recurring parts


def _read(q: Question, units_by_id: Mapping[str, Unit], ids: Iterable[str], arm: str,
          ev: Eviction | None, regime: str | None, n_gold: int,
          contexts: dict[frozenset, tuple] | None = None) -> Read:
    """One read; ``contexts`` (if given) memoizes the rendering of a context seen before."""
    if contexts is None:
        unit_ids, prompt, n_tokens = _context(q, units_by_id, ids)
    else:
        key = frozenset(ids)
        if key not in contexts:
            contexts[key] = _context(q, units_by_id, key)
        unit_ids, prompt, n_tokens = contexts[key]
    return Read(
        question_id=q.question_id, question_type=q.question_type,
        policy=ev.policy if ev else None, budget=ev.budget if ev else None,
        regime=regime, seed=ev.seed if ev else None, arm=arm, n_gold=n_gold,
        n_gold_evicted=ev.n_gold_evicted if ev else None,
        unit_ids=unit_ids, prompt=prompt, context_tokens=n_tokens,
    )


class IdentityError(AssertionError):
    """Two arms that are the same context by construction were built differently."""


def build_reads(q: Question, units: Sequence[Unit], evictions: Sequence[Eviction], *, k: int,
                restore_cap: int, regimes: Sequence[str] = read_context.REGIMES,
                ablations: bool = False) -> list[Read]:
    """Every read of one question: clean gold once, then policy and restore per cell × regime,
    and with ``ablations`` the restore_surviving and placebo arms per cell × regime.

    ``restore_cap`` is the injection cap of the forced-gold regime, the restore arm and
    restore_surviving (gold included); ``k`` only sizes the top-k regime.
    """
    by_id = {u.unit_id: u for u in units}
    gold = [u.unit_id for u in units if u.is_gold]
    # the reconstructed histories share their filler sessions: each distinct turn tokenized once
    index = retrieve.history_index(retrieve.tokenize_lines([[u.text] for u in units]))
    # Cells that retained the same units (no-evict at every budget) share their ranking, and arms
    # that hand over the same units share their rendered context: computed once each.
    rankings: dict[tuple[str, ...], list[str]] = {}
    ctx: dict[frozenset, tuple] = {}
    out = [_read(q, by_id, gold, "clean_gold", None, None, len(gold), ctx)]
    for ev in evictions:
        if ev.question_id != q.question_id:
            raise ValueError(f"eviction of question {ev.question_id!r} passed with question {q.question_id!r}")
        if ev.retained not in rankings:
            rankings[ev.retained] = read_context.rank(units, ev.retained, q.question, index)
        ranking = rankings[ev.retained]
        kept = set(ev.retained)
        surviving_gold = [g for g in gold if g in kept]
        restore = read_context.inject(units, gold, ranking, restore_cap)
        contexts = {}
        for regime in regimes:
            ids = read_context.select(units, ranking, regime, k=k, cap=restore_cap,
                                  retained_gold=surviving_gold)
            contexts[regime] = ids
            out.append(_read(q, by_id, ids, "policy", ev, regime, len(gold), ctx))
            out.append(_read(q, by_id, restore, "restore", ev, regime, len(gold), ctx))
        if not ablations:
            continue
        surviving = read_context.inject(units, surviving_gold, ranking, restore_cap)
        # Checked here, not left to the reader: were they to differ, the arm would silently
        # measure something other than Appendix C's surviving-gold restore.
        if "forced_gold" in contexts and surviving != contexts["forced_gold"]:
            raise IdentityError(f"{_cell_name(ev)}: restore_surviving differs from the forced-gold context")
        if ev.n_gold_evicted == 0 and surviving != restore:
            raise IdentityError(f"{_cell_name(ev)}: nothing evicted, yet restore_surviving differs from restore")
        placebo = read_context.placebo(units, restore)
        if any(by_id[i].is_gold for i in placebo):
            raise IdentityError(f"{_cell_name(ev)}: the placebo holds gold")
        for regime in regimes:
            out.append(_read(q, by_id, surviving, "restore_surviving", ev, regime, len(gold), ctx))
            out.append(_read(q, by_id, placebo, "placebo", ev, regime, len(gold), ctx))
    return out


def _cell_name(ev: Eviction) -> str:
    return f"{ev.question_id} {ev.policy}@{ev.budget} seed {ev.seed}"


# ---------------------------------------------------------------------------------------------
# Reading (deduplicated)
# ---------------------------------------------------------------------------------------------
@dataclass
class ReadPlan:
    reads: list[Read]
    distinct_prompts: list[str] = field(default_factory=list)  # sorted: shared prefixes adjacent

    @property
    def naive_calls(self) -> int:
        return len(self.reads)

    @property
    def distinct_calls(self) -> int:
        return len(self.distinct_prompts)


def plan_reads(reads: Sequence[Read]) -> ReadPlan:
    return ReadPlan(reads=list(reads), distinct_prompts=sorted({r.prompt for r in reads}))


def read_all(plan: ReadPlan, client, *, desc: str = "reading",
             max_tokens: int = prompts.READER_MAX_TOKENS) -> dict[str, str]:
    """Answers per distinct prompt, through the reader client (cached, prefix-ordered).

    `max_tokens` is the paper's 600 unless a profile lowers it: the embedded reader runs on to
    the cap on about one read in seven, which alone took half of the quick profile's reading time.
    """
    reqs = [dict(messages=[{"role": "system", "content": prompts.READER_SYSTEM},
                           {"role": "user", "content": p}],
                 max_tokens=max_tokens, temperature=0.0)
            for p in plan.distinct_prompts]
    replies = client.complete_many(reqs, desc=desc) if reqs else []
    return {p: c.text for p, c in zip(plan.distinct_prompts, replies)}


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
    decomposition (:func:`memlife.restore.decompose.observations`), and keeps it apart from the
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
    """Each reader's rows to its own file in ``directory`` (:func:`decompose.reader_records_path`;
    notebook 22 passes :func:`decompose.records_dir` of the run), replacing only that reader's
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
