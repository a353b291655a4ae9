"""The three reader arms of the restore counterfactual: the reads planned, checked and read.

Per question and cell (policy × budget × seed, then regime), with the cell's BM25 ranking of
the retained units and one injection cap (``restore_cap``, the paper's 2,000 tokens):

- **policy** — the reader on the regime's context over what the policy retained: top-k, or
  forced-gold = :func:`memlife.restore.reading.read_context.inject` of the surviving gold within the cap.
- **restore** — :func:`memlife.restore.reading.read_context.inject` of the full gold set (evicted gold included)
  with the same ranking and cap; one context per cell, shared by both regimes. When no gold was
  evicted it is the forced-gold context itself, so the reader answers both the same way.
- **clean_gold** — gold units only, once per question and reader.

The restore-tightness ablation (Appendix C; ``build_reads(..., ablations=True)``) adds two arms
with the policy arm's keys, one context per cell shared by both regimes like the restore's:

- **restore_surviving** — the restore with only the *surviving* gold reinstated:
  :func:`memlife.restore.reading.read_context.inject` of the gold that eviction kept, same ranking and cap. That is
  the forced-gold policy context by construction (forced-gold = inject(surviving gold)), so the
  arm costs no read: it is asserted identical to the forced-gold policy read and read once
  with it. Under forced-gold it is therefore the policy arm itself and can flip nothing; under
  top-k it asks whether an "irreversible" error was fixed by the surviving gold alone (then
  the evicted gold was not needed and the error was really a retrieval miss). When no gold was
  evicted it also equals the restore context (asserted).
- **placebo** — the restore's context with every gold unit replaced by non-gold stand-ins from
  the gold's chronological place and of about its size (:func:`memlife.restore.reading.read_context.placebo`): the
  restore's presentation without the gold, one new read per cell.

Every read is built first; identical prompts (same question, same context) are read once, in
sorted order so that prompts sharing a prefix run back to back. Resuming after an interruption
comes from the llm cache: rebuilding the records replays cached calls.

The reads' answers go on to judging (`memlife.restore.judging.grading`), which grades them and
makes the per-question records.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence


from memlife import retrieve
from memlife.longmem import Question
from memlife.models import tokens
from memlife.paper_reference import PAPER_BUDGETS
from memlife.restore.reading import prompts, read_context
from memlife.restore.eviction.evict import Eviction
from memlife.restore.data.units import Unit, units_of

PAPER_HISTORY_TOKENS = 102_000

CORE_ARMS = ("policy", "restore", "clean_gold")
# Restore-tightness ablation arms (Appendix C), beyond the record contract's three arms: the
# same question x cell x seed keys as the policy arm, read with only the surviving gold restored
# ("restore_surviving") or with non-gold snippets placed where the gold used to sit ("placebo").
ABLATION_ARMS = ("restore_surviving", "placebo")
ARMS = CORE_ARMS + ABLATION_ARMS


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
# The grid's reads, planned and checked (notebook 22's first cells)
# ---------------------------------------------------------------------------------------------
def plan_question(q: Question, evictions: Sequence[Eviction], *, k: int, restore_cap: int,
                  ablation_arms: bool = False, history: Sequence[Unit] | None = None) -> list[Read]:
    """Every read of one question (``history``: its units, if already at hand)."""
    return build_reads(q, units_of(q) if history is None else history, evictions, k=k,
                            restore_cap=restore_cap, ablations=ablation_arms)


def _plan_question_job(job: tuple) -> list[Read]:
    q, evictions, k, restore_cap, ablation_arms = job
    return plan_question(q, evictions, k=k, restore_cap=restore_cap, ablation_arms=ablation_arms)


def plan_grid(questions: Sequence[Question], evictions: Sequence[Eviction], *, k: int, restore_cap: int,
              ablation_arms: bool = False, workers: int | None = 1) -> tuple[list[Read], ReadPlan]:
    """Every read of the grid (notebook 22's first code cell) and its deduplicated plan. ``workers``
    processes share the questions (None: every core; :mod:`memlife.base.parallel`), each sent its own
    question and evictions; the reads are the same, in the same order, for any number."""
    from memlife.base import parallel

    by_q: dict[str, list[Eviction]] = {}
    for e in evictions:
        by_q.setdefault(e.question_id, []).append(e)
    jobs = [(q, by_q.get(q.question_id, []), k, restore_cap, ablation_arms) for q in questions]
    reads = [r for rs in parallel.map_ordered(_plan_question_job, jobs, workers=workers, desc="questions retrieved") for r in rs]
    return reads, plan_reads(reads)


def check_reads(reads: Sequence[Read], questions: Sequence[Question], restore_cap: int,
                histories: Mapping[str, Sequence[Unit]] | None = None) -> None:
    """The construction's identities, on the reads themselves (notebook 22's checks):
    restore holds every gold unit; injected contexts fit the cap, gold counted (or are the gold
    alone where it exceeds the cap); forced-gold reads restore's very context exactly when no
    gold was evicted; restore_surviving reads the forced-gold context; the placebo holds no gold
    and as many snippets as the restore. ``histories``: the questions' units, if already at hand."""
    unit_index = {q.question_id: {u.unit_id: u for u in (units_of(q) if histories is None
                                                         else histories[q.question_id])} for q in questions}
    gold_index = {qid: {i for i, u in us.items() if u.is_gold} for qid, us in unit_index.items()}
    by_cell: dict[tuple, dict[tuple, Read]] = {}
    for r in reads:
        us = unit_index[r.question_id]
        gold_ids = gold_index[r.question_id]
        if r.arm in ("restore", "restore_surviving") or (r.regime == "forced_gold" and r.arm == "policy"):
            gold_tokens = sum(us[i].tokens for i in r.unit_ids if us[i].is_gold)
            total = sum(us[i].tokens for i in r.unit_ids)
            assert total <= restore_cap or (gold_tokens > restore_cap and set(r.unit_ids) <= gold_ids), (
                f"{r.question_id} {r.policy}@{r.budget} {r.arm}: {total} tokens over the cap {restore_cap}")
        if r.arm == "restore":
            assert gold_ids <= set(r.unit_ids), f"{r.question_id} {r.policy}@{r.budget}: restore lacks gold"
        if r.arm == "placebo":
            assert not gold_ids & set(r.unit_ids), f"{r.question_id} {r.policy}@{r.budget}: placebo holds gold"
        if r.arm != "clean_gold":
            by_cell.setdefault((r.question_id, r.policy, r.budget, r.seed), {})[(r.arm, r.regime)] = r
    for cell, rs in by_cell.items():
        restore, fg = rs.get(("restore", "forced_gold")), rs.get(("policy", "forced_gold"))
        if restore and fg:
            assert (fg.prompt == restore.prompt) == (fg.n_gold_evicted == 0), f"{cell}: forced-gold vs restore"
        for regime in ("topk", "forced_gold"):
            surv = rs.get(("restore_surviving", regime))
            if surv and fg:
                assert surv.prompt == fg.prompt, f"{cell}: restore_surviving is not the forced-gold context"
            pl, rst = rs.get(("placebo", regime)), rs.get(("restore", regime))
            if pl and rst:
                assert len(pl.unit_ids) == len(rst.unit_ids), f"{cell}: placebo and restore differ in snippets"
