"""The two papers' published values, each checked against the paper text; the one place they live.

MemOps paper (`MEMOPS_PAPER`): Table 2's dataset statistics (`MEMOPS_TABLE2`), the topic
categories of Section 3.4 (`MEMOPS_CATEGORY_COUNTS`), and Tables 3-5 (`memops_table`), as the
paper prints them. The planner's category split, Table 2's paper column, Figure 4's paper means,
and the paper rows and deltas of Tables 3-5 all read them from here.

Restore paper (`RESTORE_PAPER`): the figures of Section 5 and the appendices, each with the
sentence it comes from (`RESTORE_FIGURES`, `figure`, `figures`), and its budgets (`PAPER_BUDGETS`).

Direction: the code reads the data files, never the other way round. Tables 3-5 stay as the
paper prints them in `results/paper_reference/memops_table{3,4,5}.csv`, which only
`memops_table` reads; every other value is a constant here. Nothing else restates any of them.
tests/test_memops_paper_reference.py and tests/test_paper_reference.py check every value against
the papers' text — excerpts in tests/data/papers/, pinned by SHA-256 and checked line by line
against the full texts wherever a copy sits beside the repository (tests/paper_text.py) — so a typo
cannot silently become "the paper's value".

The MemOps paper reads with GPT-4.1-mini and frontier models judged by GPT-4o; the restore paper
is GPT-4o-mini (reader and judge) on LongMemEval-S at 8k/30k/80k budgets. Ours differ in reader,
judge and data unless a capable endpoint and the real data are configured.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

# ----------------------------------------------------------------------------- the MemOps paper

MEMOPS_PAPER = "000_0a943ab90c8855d8.txt"

# Table 2 (Section 3.4), by the row names of our Table 2: the paper's "Generated -> retained:
# 727 -> 403" is two rows here, as our Table 2 reports both.
MEMOPS_TABLE2 = {
    "Unique topics": 100,
    "Evidence conversations": 403,
    "Evidence-conversation segments": 1209,
    "Dialogue turns": 9672,
    "Unique QA pairs": 2006,
    "Evaluation instances (adj. + long)": 4012,
    "Operation types": 5,
    "Probe types": 6,
    "Avg. operations per trajectory": 4.0,
    "Avg. approx. tokens (adjacent)": 2557,
    "Avg. approx. tokens (long-context)": 60821,
    "Max. approx. tokens (long-context)": 68309,
    "Avg. evidence spans per probe": 3.47,
    "Multi-hop probes (%)": 20.1,
    "Avg. context-level distractors": 5.7,
    "Generated attempts": 727,
    "Retained": 403,
    "Retention rate (%)": 55.4,
}

# Section 3.4 ("Topic Coverage"): topics per category, 22/21/20/16/11/10 of the paper's 100; our
# planner splits any number of topics in these proportions.
MEMOPS_CATEGORY_COUNTS = {
    "Plans & Events": 22,
    "Personal Profile": 21,
    "Social Contacts": 20,
    "Preferences & Devices": 16,
    "Temporary Status": 11,
    "Corrections & Errors": 10,
}

# Tables 3-5 (Section 4) are data files, transcribed cell by cell as printed (three decimals
# kept): results/paper_reference/memops_table{3,4,5}.csv, read by `memops_table`.
MEMOPS_TABLE_TITLES = {
    3: "Table 3: Overall performance on the MemOps.",
    4: "Table 4: Answer accuracy by operation types.",
    5: "Table 5: Answer accuracy by probe types.",
}


def memops_table_path(number: int) -> Path:
    """The file that holds Table `number` (3, 4 or 5) of the MemOps paper."""
    if number not in MEMOPS_TABLE_TITLES:
        raise KeyError(f"the MemOps paper's tables transcribed are {sorted(MEMOPS_TABLE_TITLES)}, not {number}")
    from memlife.base import paths

    return paths.repo_root() / "results" / "paper_reference" / f"memops_table{number}.csv"


def memops_table(number: int) -> pd.DataFrame:
    """Table `number` of the MemOps paper: `Method`, then one float column per metric (Table 3),
    operation type (Table 4) or probe type (Table 5), to put the paper's rows beside ours."""
    import pandas as pd

    return pd.read_csv(memops_table_path(number))


# ----------------------------------------------------------------------------- the restore paper

RESTORE_PAPER = "001_27ccb21e463f18b5.txt"
PAPER_BUDGETS = (8000, 30000, 80000)


@dataclass(frozen=True)
class PaperFigure:
    key: str
    value: float
    section: str
    quote: str  # verbatim from the paper text; contains the value as printed
    printed: str  # the value as the paper prints it
    policy: str = ""
    budget: int | None = None
    regime: str = ""


_R1 = "0.71, 0.73, and 0.67 are the 80k irreversible shares for FIFO, random, and redundancy-aware eviction, respectively."
_R1_IMP = "whereas LLM-importance is 0.60 with a confidence interval spanning 0.5"
_R1_8K = "1.00 is the irreversible share at 8k for all four eviction policies"
_R1_FG = "1.00 is the forced-gold two-bin share across all 12 evicting/control cells"

_DATA = ("LongMemEval-S contains approximately 102k-token multi-session histories, 470 evidence-labeled "
         "questions, and excludes abstention questions.")

# The paper's policies by the names memlife.restore.eviction.evict gives them (a test holds them equal): the
# paper's values are written down here without importing the track that measures them.
PAPER_EVICTING_POLICIES = ("fifo", "random", "redundancy", "importance")
NO_EVICT = "no_evict"

RESTORE_FIGURES: tuple[PaperFigure, ...] = (
    PaperFigure("data_questions", 470, "4 (Data)", _DATA, "470"),
    PaperFigure("data_history_tokens", 102_000, "4 (Data)", _DATA, "102k"),
    PaperFigure("two_bin_share", 0.71, "5.1 (R1)", _R1, "0.71", "fifo", 80000, "topk"),
    PaperFigure("two_bin_share", 0.73, "5.1 (R1)", _R1, "0.73", "random", 80000, "topk"),
    PaperFigure("two_bin_share", 0.67, "5.1 (R1)", _R1, "0.67", "redundancy", 80000, "topk"),
    PaperFigure("two_bin_share", 0.60, "5.1 (R1)", _R1_IMP, "0.60", "importance", 80000, "topk"),
    *(PaperFigure("two_bin_share", 1.00, "5.1 (R1)", _R1_8K, "1.00", p, 8000, "topk")
      for p in PAPER_EVICTING_POLICIES),
    *(PaperFigure("two_bin_share", 1.00, "5.1 (R1)", _R1_FG, "1.00", p, b, "forced_gold")
      for p in PAPER_EVICTING_POLICIES for b in PAPER_BUDGETS),
    PaperFigure("r2_holm_rejections", 4, "5.2 (R2)",
                "4 of 12 evicting cells reject the recoverable-share gap between top-k and "
                "forced-gold retrieval after Holm correction.", "4"),
    PaperFigure("r2_family_size", 12, "5.2 (R2)", "4 of 12 evicting cells", "12"),
    PaperFigure("r3_matched_pairs", 9, "5.3 (R3)",
                "0 of 9 accuracy-matched baseline pairs dissociate in irreversible rate", "9"),
    PaperFigure("r3_dissociating_pairs", 0, "5.3 (R3)",
                "0 of 9 accuracy-matched baseline pairs dissociate in irreversible rate", "0"),
    PaperFigure("r3_max_abs_difference", 0.036, "5.3 (R3)",
                "|∆rate| ≤0.036 and every confidence interval spanning 0", "0.036"),
    PaperFigure("r3_control_detected", 9, "5.3 (R3)",
                "The deliberately destructive control differs significantly in all 9 contrasts",
                "9"),
    PaperFigure("r4_residual_primary_reader", 59, "5.4 (R4)",
                "59→28 residual cases occur for no-evict at 80k under forced-gold injection with "
                "the stronger reader", "59", NO_EVICT, 80000, "forced_gold"),
    PaperFigure("r4_residual_stronger_reader", 28, "5.4 (R4)",
                "59→28 residual cases occur for no-evict at 80k under forced-gold injection with "
                "the stronger reader", "28", NO_EVICT, 80000, "forced_gold"),
    PaperFigure("judge_percent_agreement", 0.957, "Appendix C",
                "agrees with GPT-4o-mini judging at 95.7% with Cohen’s κ=0.90", "95.7%"),
    PaperFigure("judge_cohen_kappa", 0.90, "Appendix C",
                "agrees with GPT-4o-mini judging at 95.7% with Cohen’s κ=0.90", "0.90"),
    PaperFigure("judge_audit_items", 393, "Appendix C",
                "The independent audit included 393 completed grades after excluding 3 errored calls",
                "393"),
    PaperFigure("oracle_answerable_n", 336, "Appendix A",
                "The baseline oracle-answerable denominator is N=336", "336"),
    PaperFigure("surviving_gold_recoverable_share", 0.003, "Appendix C",
                "7 cases, or 0.3%, become recoverable when only surviving gold is restored",
                "0.3%"),
    PaperFigure("placebo_flip_share", 0.083, "Appendix C",
                "restoring old chronological placement flips 8.3% wrong answers to correct",
                "8.3%"),
)


def figures(key: str | None = None) -> pd.DataFrame:
    """The paper's figures as a table (optionally one key), for putting beside ours."""
    import pandas as pd

    df = pd.DataFrame([asdict(f) for f in RESTORE_FIGURES])
    df["budget"] = df["budget"].astype("Int64")
    return df if key is None else df[df["key"] == key].reset_index(drop=True)


def figure(key: str, **where) -> float:
    """One figure by key (and policy/budget/regime); KeyError if absent or ambiguous."""
    hits = [f for f in RESTORE_FIGURES
            if f.key == key and all(getattr(f, k) == v for k, v in where.items())]
    if len(hits) != 1:
        raise KeyError(f"{len(hits)} paper figures match {key} {where}")
    return hits[0].value


def paper_budget(budget: int, budgets: list[int]) -> int | None:
    """Which paper budget one of ours stands in for: by rank when there are three budgets (ours
    are scaled to our shorter histories), otherwise only the smallest and the largest."""
    ours = sorted(set(int(b) for b in budgets))
    if budget not in ours:
        raise ValueError(f"budget {budget} not in {ours}")
    if len(ours) == len(PAPER_BUDGETS):
        return PAPER_BUDGETS[ours.index(budget)]
    if budget == ours[0]:
        return PAPER_BUDGETS[0]
    if budget == ours[-1]:
        return PAPER_BUDGETS[-1]
    return None

