"""Notebooks 20–22 as library calls: LongMemEval-format data → units → eviction grid → reads →
records; what ``python -m memlife.restore run --profile P --reader NAME --out DIR`` runs.

The parameters are the profile's sections of 20_longmem_data, 21_eviction and 22_read_restore
(:func:`params`, through :mod:`memlife.base.config`), so the command and ``make`` run the same
experiment. Two parameters of 22_read_restore are optional, default off:
``ablation_arms`` (the restore-tightness arms, :func:`memlife.restore.reading.arms.build_reads`) and
``judge_audit_items`` (how many graded items the ``judge_audit`` role re-grades).

Readers are picked by name (:data:`READERS`): ``llm`` is the profile's ``reader`` role (the
embedded model unless an endpoint is configured). A reader is any object with a ``model``
attribute (the name the records' ``reader`` column carries) and
``complete_many(requests, desc=...)`` returning objects with ``.text`` in request order, each
request holding the reader prompt's ``messages``. The reference subjects of docs/design.md (``gold``,
``evidence-oracle``, ``noisy-oracle``; :mod:`memlife.restore.reading.subjects`) are further entries of
:data:`READERS`: no model reads, and the records' ``reader`` is the subject's label
("gold (reference)"). The importance policy still asks the ``scorer`` role for its scores.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Sequence

import pandas as pd

from memlife import longmem
from memlife import subjects as ref
from memlife.base import config
from memlife.longmem import Question
from memlife.models import endpoints, llm, tokens
from memlife.restore.data import dataset, units
from memlife.restore.eviction import evict
from memlife.restore.judging import grading
from memlife.restore.reading import arms, prompts, subjects
from memlife.restore.data.units import Unit

NOTEBOOKS = ("20_longmem_data", "21_eviction", "22_read_restore")


def _llm_reader(questions: Sequence[Question], histories: Mapping[str, Sequence[Unit]], seed: int):
    return llm.get_client("reader")


# name -> factory(questions, histories, seed) -> reader (see the module docstring).
READERS: dict[str, Callable] = {"llm": _llm_reader, **{name: subjects.factory(name) for name in ref.SUBJECTS}}


class UnknownReader(ValueError):
    pass


def reader_factory(name: str) -> Callable:
    if name in READERS:
        return READERS[name]
    raise UnknownReader(f"unknown reader {name!r}; accepted: {', '.join(READERS)}")


def make_reader(name: str, questions: Sequence[Question], histories: Mapping[str, Sequence[Unit]], seed: int,
                profile: str):
    """The named reader (notebook 22 and the command). The noisy oracle plants the rates of the
    profile's 25_restore_controls section, so that it errs as notebook 25's does."""
    factory = reader_factory(name)
    if name == ref.NOISY_ORACLE:
        return factory(questions, histories, seed, noise=subjects.profile_noise(profile))
    return factory(questions, histories, seed)


@dataclass(frozen=True)
class Params:
    profile: str
    seed: int
    source: str
    n_questions: int
    history_tokens: int
    budgets: tuple[int, ...]
    seeds: tuple[int, ...]
    k: int
    restore_cap: int
    reader_max_tokens: int
    ablation_arms: bool = False
    judge_audit_items: int = 0
    task_chat_share: float | None = None  # notebook 20's; None: S's (memlife.reconstruct.S_TASK_CHAT_SHARE)
    policies: tuple[str, ...] = evict.POLICIES  # notebook 21's: names or "module:attr"


def params(profile: str, root: Path | None = None) -> Params:
    """The profile's parameters of notebooks 20–22 (``common`` merged into each section)."""
    p20, p21, p22 = (config.notebook_params(profile, nb, root) for nb in NOTEBOOKS)
    if not p20["source"] == p21["source"] == p22["source"]:
        raise ValueError(f"profile {profile!r}: notebooks 20-22 disagree on source "
                         f"({p20['source']}, {p21['source']}, {p22['source']})")
    return Params(profile=profile, seed=int(p22["seed"]), source=p20["source"],
                  n_questions=int(p20["n_questions"]), history_tokens=int(p20["history_tokens"]),
                  budgets=tuple(arms.resolve_budgets(p21["budgets"], int(p21["history_tokens"]))),
                  seeds=tuple(int(s) for s in p21["seeds"]),
                  k=int(p22["k"]), restore_cap=int(p22["restore_cap"]),
                  reader_max_tokens=int(p22["reader_max_tokens"]),
                  ablation_arms=bool(p22.get("ablation_arms", False)),
                  judge_audit_items=int(p22.get("judge_audit_items", 0)),
                  policies=tuple(p21.get("policies", evict.POLICIES)),
                  task_chat_share=p20.get("task_chat_share"))


def load_questions(p: Params) -> list[Question]:
    """Notebook 20's questions, built in memory (the reconstruction is seeded and deterministic, the
    real file hash-checked) rather than read from the profile's data directory."""
    return [longmem.to_question(r) for r in dataset.build_records(
        p.source, n_questions=p.n_questions, history_tokens=p.history_tokens, seed=p.seed,
        task_chat_share=p.task_chat_share)]


def reread_run(profile: str, subject: str, *, seed: int = 0, ablation_arms: bool = True) -> pd.DataFrame | None:
    """Notebook 22's grid of a profile's run read again by a reference subject (`ref.SUBJECTS`;
    no model call): the same questions (notebook 20's file), evictions (notebook 21's), k and
    injection cap (notebook 22's), so the subject's records line up with the run's reader's, cell
    for cell. None when notebooks 20 and 21 have not written their outputs. The teaching exercises
    of notebooks 23 and 24 use it to show what each bin measures on a reader whose answers are known."""
    from memlife.base import paths

    if subject not in ref.SUBJECTS:
        raise ValueError(f"reread_run reads with a reference subject {ref.SUBJECTS}, not {subject!r}: "
                         "a model reader is notebook 22's own run")
    p22 = config.notebook_params(profile, "22_read_restore")
    source = dataset.resolve_source(p22["source"])
    evictions_path = paths.layout(profile).run / "restore" / "evictions.parquet"
    if not (dataset.dataset_path(profile, source).is_file() and evictions_path.is_file()):
        return None
    questions = dataset.load_dataset(profile, source)
    histories = {q.question_id: units.units_of(q) for q in questions}
    reads, plan = arms.plan_grid(questions, evict.from_frame(pd.read_parquet(evictions_path)), k=int(p22["k"]),
                            restore_cap=int(p22["restore_cap"]), ablation_arms=ablation_arms)
    reader = make_reader(subject, questions, histories, seed, profile)
    return grading.records(reads, arms.read_all(plan, reader), {q.question_id: q for q in questions}, reader.model)

CHAT_TEMPLATE_TOKENS = tokens.CHAT_TEMPLATE_TOKENS


class ContextTooLong(ValueError):
    """A read would not fit the embedded reader's window: llama-server would refuse it."""


def embedded_prompt_tokens(plan: arms.ReadPlan, reader, reader_max_tokens: int) -> int | None:
    """The largest prompt of the plan in the embedded model's own tokens, checked against its window
    with room for the answer (``ContextTooLong`` otherwise, naming the parameters that size a read).
    None for any other reader: an endpoint's client refuses an over-long request itself, before
    sending it (:class:`memlife.models.endpoints.ContextWindowExceeded`), and a reference subject has no window."""
    from memlife.models import serve

    if not getattr(reader, "is_embedded", False):
        return None
    system = tokens.count_embedded(prompts.READER_SYSTEM)
    largest = max((tokens.count_embedded(p) for p in plan.distinct_prompts), default=0)
    need = system + largest + CHAT_TEMPLATE_TOKENS + reader_max_tokens
    if need > serve.CONTEXT_WINDOW:
        raise ContextTooLong(
            f"the longest read needs {need} tokens (prompt {system + largest + CHAT_TEMPLATE_TOKENS}, answer "
            f"{reader_max_tokens}) of the embedded model's {serve.CONTEXT_WINDOW}: lower k, restore_cap or "
            f"reader_max_tokens (22_read_restore), or history_tokens")
    return system + largest + CHAT_TEMPLATE_TOKENS


@dataclass
class Reading:
    answers: dict[str, str]
    records: pd.DataFrame
    judge_model: str | None
    audit_note: str  # what the judge audit did, or why it was skipped


def read_and_judge(reads: Sequence[arms.Read], plan: arms.ReadPlan, questions: Sequence[Question], reader, *,
                   reader_max_tokens: int, judge_audit_items: int = 0, seed: int = 0) -> Reading:
    """Notebook 22's reading cell: read every distinct prompt, grade with the deterministic
    scorer and, when a capable judge endpoint is configured, the paper's LLM judge; then the
    judge audit when ``judge_audit_items`` > 0 and :func:`memlife.models.endpoints.judge_audit_unavailable`
    has no objection (the embedded model never judges). Records in the restore record contract (docs/design.md)."""
    by_id = {q.question_id: q for q in questions}
    answers = arms.read_all(plan, reader, max_tokens=reader_max_tokens)
    judge_replies = judge_model = None
    if endpoints.judge_available():
        judge = llm.get_client("judge")
        judge_model = judge.model
        judge_replies = grading.judge_all([(by_id[r.question_id].question, by_id[r.question_id].answer,
                                         answers[r.prompt]) for r in reads], judge)
    records = grading.records(reads, answers, by_id, reader.model, judge_replies, judge_model, llm.parse_label)
    if judge_audit_items <= 0:
        note = "judge audit off (judge_audit_items = 0)"
    elif (why := endpoints.judge_audit_unavailable()) is not None:
        note = f"judge audit skipped: {why}"
    else:
        audit = llm.get_client("judge_audit")
        rows = grading.judge_audit(records, by_id, audit, n_items=judge_audit_items, seed=seed,
                                parse_label=llm.parse_label)
        records = grading.combine(records, rows)
        note = (f"judge audit: {audit.model} re-graded {len(rows)} sampled items "
                f"({int(rows['correct'].isna().sum())} without a label)")
    return Reading(answers, records, judge_model, note)


@dataclass
class RunResult:
    records_path: Path
    records: pd.DataFrame
    n_reads: int
    n_distinct_reads: int
    audit_note: str


def run(profile: str, reader_name: str, out: Path | str, *, log=print) -> RunResult:
    """Notebooks 20–22 for ``profile`` with the named reader, writing ``out/records/<reader>.parquet``
    (:func:`memlife.restore.judging.grading.write_records`: another reader's file in ``out/records`` stays, and
    ``decompose.load_records(out / "records")`` reads both), ``out/evictions.parquet`` and
    ``out/importance.parquet``; nothing else is written but the llm cache and usage log."""
    reader_factory(reader_name)  # before any work: a typo costs nothing
    p = params(profile)
    endpoints.configure(profile, track="restore")
    out = Path(out)
    questions = load_questions(p)
    histories = {q.question_id: units.units_of(q) for q in questions}
    log(f"{len(questions)} questions ({p.source}), {sum(map(len, histories.values()))} units")
    policies = evict.resolve_policies(p.policies, f"{profile}: notebooks.21_eviction.policies")
    out.mkdir(parents=True, exist_ok=True)
    importance = None
    if any(s.needs_model for s in policies):  # a run without LLM-importance asks the scorer nothing
        scorer = llm.get_client("scorer")
        importance, invalid = evict.score_importance([u.text for us in histories.values() for u in us], scorer)
        pd.DataFrame(sorted(importance.items()), columns=["text", "score"]).to_parquet(
            out / "importance.parquet", index=False)
        log(f"importance: scorer {scorer.model}, {invalid} replies without a score")
    evictions = evict.evict_grid(histories, policies, list(p.budgets), list(p.seeds), importance)
    evict.to_frame(evictions).to_parquet(out / "evictions.parquet", index=False)
    log(f"{len(evictions)} evictions: {', '.join(s.name for s in policies)}")
    reads, plan = arms.plan_grid(questions, evictions, k=p.k, restore_cap=p.restore_cap, ablation_arms=p.ablation_arms)
    arms.check_reads(reads, questions, p.restore_cap)
    log(f"{plan.naive_calls} reads, {plan.distinct_calls} distinct prompts"
        f"{' (ablation arms on)' if p.ablation_arms else ''}")
    reader = make_reader(reader_name, questions, histories, p.seed, profile)
    embedded_prompt_tokens(plan, reader, p.reader_max_tokens)
    reading = read_and_judge(reads, plan, questions, reader, reader_max_tokens=p.reader_max_tokens,
                             judge_audit_items=p.judge_audit_items, seed=p.seed)
    log(reading.audit_note)
    [path] = grading.write_records(reading.records, out / "records")
    return RunResult(path, reading.records, plan.naive_calls, plan.distinct_calls, reading.audit_note)
