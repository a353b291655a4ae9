"""The restore paper's analyses (Section 5, Appendix C) over per-question observations.

Every function takes the observations that `decompose.observations` builds from the records (every reader's file)
(the same code path as `python -m memlife.restore decompose`), so every number in a table is
recomputed from the records.

- R1 `shares`: decomposition shares per cell with question-clustered bootstrap intervals.
- R2 `regime_gap`: recoverable-share gap, top-k minus forced-gold, per evicting cell; bootstrap
  p-values, Holm across the evicting cells of one reader and judge.
- R3 `matched_accuracy`: policy pairs within a budget whose accuracies match within a tolerance;
  paired clustered-bootstrap interval of the difference in irreversible rate; and the
  destructive control against each policy, which shows whether the test has power.
- R3 `resolution`: per contrast the interval half-width and the minimal detectable difference,
  beside the paper's 1.2-6 pp.
- R4 `residual_by_type`, `reader_residuals`, `compare_reader_residuals`: residual errors by
  question type and by reader, each reader named (which has more is read off the data).
- `judge_agreement`, `audit_agreement`: percent agreement and Cohen's kappa between every pair of
  judges, and the audit pair picked by what its judges are (headline judge vs the audit judge,
  else vs the scorer).
- `undecided_share`: per reader and question type, how many items the deterministic judge left
  UNDECIDED (and how many of those an LLM judge labelled).
- `surviving_gold_ablation`, `placement_placebo`: the restore-tightness ablation.
- `load_run`: a profile's records, their observations and the headline reader and judge, as
  notebooks 23 and 24 both start.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd

from memlife import stats
from memlife.restore.judging.answer_judge import UNDECIDED
from memlife.restore.analyses.decompose import CELL, COUNT_COLUMNS, decompose, is_audit_judge, load_records, observations, sort_cells
from memlife.restore.judging.grading import DETERMINISTIC_JUDGE, legacy_records_path, records_dir
from memlife.restore.reading.arms import CORE_ARMS
from memlife.restore.eviction.evict import BASELINE_POLICIES, CONTROL, FIFO, NO_EVICT, RANDOM, REDUNDANCY

# name -> (numerator, denominator columns summed); all are ratios of per-observation counts.
SHARES = {
    "two_bin_share": ("irreversible", ("irreversible", "recoverable")),
    "irreversible_share": ("irreversible", ("n_errors",)),
    "recoverable_share": ("recoverable", ("n_errors",)),
    "residual_share": ("residual", ("n_errors",)),
    "irreversible_rate": ("irreversible", ("n_oracle_answerable",)),
    "accuracy": ("n_correct", ("n_observations",)),
}
_S = {c: i for i, c in enumerate(COUNT_COLUMNS)}
# Below this many questions (the clusters every interval resamples) a percentile interval says
# little about its own coverage: the interval is left empty and the row says how many there were
# (notebook 25 checks coverage at the same floor).
MIN_CLUSTERS = 20
# R3's family is the paper's: its three baseline policies (FIFO, random, redundancy-aware) at three
# budgets, "0 of 9 accuracy-matched baseline pairs" and the control "in all 9 contrasts" (5.3).
# LLM-importance came in a later grid (Appendix A: N=332 beside the baseline's 336) and is in R2's
# 12 evicting cells, not in R3; pass `policies=BASELINE_POLICIES` to contrast it too.
R3_POLICIES = (FIFO, RANDOM, REDUNDANCY)
# A paper-vs-ours share (or agreement) from fewer errors (or items) than this is reported as
# "anecdotal", not as a number to set beside the paper's.
MIN_ERRORS = 20


@dataclass(frozen=True)
class CellBootstrap:
    """Per-question counts of every cell, and one shared question-resample count matrix.

    sums: Q x C x S (questions x cells x COUNT_COLUMNS); counts: B x Q. Sharing `counts` across
    cells makes every between-cell contrast paired over questions.
    """

    cells: pd.DataFrame
    question_ids: np.ndarray
    sums: np.ndarray
    counts: np.ndarray

    def ratio(self, name: str, cell_idx: np.ndarray | list[int] | None = None,
              mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(estimate per cell, B x cells replicates) of SHARES[name]; `mask` (Q) keeps questions."""
        num_col, den_cols = SHARES[name]
        idx = np.arange(len(self.cells)) if cell_idx is None else np.asarray(cell_idx)
        sums = self.sums[:, idx, :]
        if mask is not None:
            sums = sums * np.asarray(mask, dtype=np.float64)[:, None, None]
        num = sums[:, :, _S[num_col]]
        den = sum(sums[:, :, _S[c]] for c in den_cols)
        return stats.safe_ratio(num.sum(0), den.sum(0)), stats.ratio_replicates(self.counts, num, den)

    def clusters(self, name: str, cell_idx: np.ndarray | list[int] | None = None,
                 mask: np.ndarray | None = None) -> np.ndarray:
        """Per cell, how many questions add to SHARES[name]'s denominator: the clusters its
        interval rests on."""
        _, den_cols = SHARES[name]
        idx = np.arange(len(self.cells)) if cell_idx is None else np.asarray(cell_idx)
        den = sum(self.sums[:, idx, _S[c]] for c in den_cols)
        if mask is not None:
            den = den * np.asarray(mask, dtype=np.float64)[:, None]
        return (den > 0).sum(0)


def cell_bootstrap(obs: pd.DataFrame, n_boot: int, seed: int) -> CellBootstrap:
    cells = decompose(obs)
    key = list(CELL)
    cell_no = obs[key].merge(cells[key].reset_index(), on=key, how="left")["index"].to_numpy()
    qids, q_no = np.unique(obs["question_id"].to_numpy(dtype=str), return_inverse=True)
    sums = np.zeros((len(qids), len(cells), len(COUNT_COLUMNS)))
    np.add.at(sums, (q_no, cell_no), obs[list(COUNT_COLUMNS)].to_numpy(dtype=np.float64))
    return CellBootstrap(cells, qids, sums, stats.cluster_counts(len(qids), n_boot, seed))


def shares(boot: CellBootstrap, level: float = 0.95, min_clusters: int = MIN_CLUSTERS) -> pd.DataFrame:
    """R1: the decomposition table plus every share with its percentile interval, the questions
    in the cell (`n_questions`) and, per share, the questions its interval rests on
    (`<share>_questions`: those adding to its denominator). An interval from fewer than
    `min_clusters` questions is left empty."""
    out = boot.cells.copy()  # n_questions: decompose's
    for name in SHARES:
        est, rep = boot.ratio(name)
        lo, hi = stats.percentile_interval(rep, level)
        nq = boot.clusters(name)
        few = nq < min_clusters
        lo, hi = np.where(few, np.nan, lo), np.where(few, np.nan, hi)
        out[name], out[f"{name}_low"], out[f"{name}_high"] = est, lo, hi
        out[f"{name}_questions"] = nq
    out.attrs["min_clusters"] = min_clusters
    return out


def regime_gap(boot: CellBootstrap, policies=BASELINE_POLICIES, alpha: float = 0.05,
               level: float = 0.95, min_clusters: int = MIN_CLUSTERS) -> pd.DataFrame:
    """R2: recoverable share (recoverable / restore-corrected errors, i.e. 1 - two-bin share)
    under top-k minus under forced-gold, per evicting policy x budget, for each reader and judge.

    Holm runs across the evicting cells of one reader and judge (12 at paper scale). A gap whose
    shares are undefined (no restore-corrected errors) gets p = 1 and stays in the family, so the
    family size does not depend on the data.

    `n_questions` is the fewer of the two regimes' questions with a restore-corrected error (the
    clusters each share rests on); below `min_clusters` the gap's interval is left empty and
    `few_questions` is set (the p-value and Holm decision stay, marked).
    """
    c = boot.cells
    rows = []
    for (reader, judge), grp in c.groupby(["reader", "judge"], sort=True):
        pairs = []
        for (policy, budget), g in grp[grp["policy"].isin(policies)].groupby(["policy", "budget"], sort=False):
            regimes = dict(zip(g["regime"], g.index))
            if "topk" in regimes and "forced_gold" in regimes:
                pairs.append((policy, budget, regimes["topk"], regimes["forced_gold"]))
        if not pairs:
            continue
        idx_t = [p[2] for p in pairs]
        idx_f = [p[3] for p in pairs]
        est_t, rep_t = boot.ratio("two_bin_share", idx_t)
        est_f, rep_f = boot.ratio("two_bin_share", idx_f)
        # recoverable share = 1 - two-bin share, so the gap is (1 - t) - (1 - f) = f - t.
        gap, rep = est_f - est_t, rep_f - rep_t
        lo, hi = stats.percentile_interval(rep, level)
        nq = np.minimum(boot.clusters("two_bin_share", idx_t), boot.clusters("two_bin_share", idx_f))
        few = nq < min_clusters
        lo, hi = np.where(few, np.nan, lo), np.where(few, np.nan, hi)
        p = stats.bootstrap_pvalue(rep)
        reject, p_adj = stats.holm(p, alpha)
        for i, (policy, budget, _, _) in enumerate(pairs):
            rows.append(dict(
                policy=policy, budget=budget, reader=reader, judge=judge,
                recoverable_share_topk=1 - est_t[i], recoverable_share_forced_gold=1 - est_f[i],
                gap=gap[i], gap_low=lo[i], gap_high=hi[i], p_value=p[i], p_holm=p_adj[i],
                holm_reject=bool(reject[i]), family_size=len(pairs), n_questions=int(nq[i]),
                few_questions=bool(few[i]),
            ))
    cols = ["policy", "budget", "reader", "judge", "recoverable_share_topk",
            "recoverable_share_forced_gold", "gap", "gap_low", "gap_high", "p_value", "p_holm",
            "holm_reject", "family_size", "n_questions", "few_questions"]
    out = pd.DataFrame(rows, columns=cols)
    return sort_cells(out).reset_index(drop=True) if len(out) else out


def matched_accuracy(boot: CellBootstrap, tolerance: float, regime: str = "topk",
                     policies=R3_POLICIES, control: str | None = CONTROL,
                     level: float = 0.95, min_clusters: int = MIN_CLUSTERS) -> pd.DataFrame:
    """R3: per reader, judge and budget — every policy pair whose cell accuracies differ by at most
    `tolerance` ("matched_pair"), and the control against every policy ("control").

    The statistic is the difference in irreversible rate (irreversible errors per oracle-answerable
    observation) over the questions both cells observed, with a paired question-clustered interval.
    A pair dissociates when its interval excludes 0. `n_questions` counts the shared questions
    that are oracle-answerable in either cell (the clusters the interval rests on); below
    `min_clusters` the interval is left empty, `few_questions` is set and the pair does not
    count as dissociating.

    The control is the positive control that shows the test has power, so a requested control
    that the records lack in every reader × judge × budget is an error, not "0 of 0 contrasts";
    pass ``control=None`` to compare the policies alone. A group whose control cell is gone because
    every one of its observations was left unlabelled (an UNDECIDED answer, an errored judge call:
    `decompose.observations` excludes and counts them) has no control contrast, with a warning.
    """
    c = boot.cells
    c = c[c["regime"] == regime]
    if control is not None:
        missing = [f"{r}/{j}@{b}" for (r, j, b), g in c.groupby(["reader", "judge", "budget"], sort=True)
                   if control not in set(g["policy"])]
        if missing and control in set(c["policy"]):
            warnings.warn(f"R3: no labelled observation in the {regime} control cell of {', '.join(missing)}: "
                          "no control contrast there", stacklevel=2)
        elif missing:
            raise ValueError(
                f"R3: the control policy {control!r} is missing from the {regime} cells of "
                f"{len(missing)} reader/judge@budget group(s), e.g. {missing[0]}; policies present: "
                f"{sorted(set(c['policy']))}. Evict with memlife.restore.eviction.evict.POLICIES (which include "
                f"{CONTROL!r}), or pass control=None to skip the positive control.")
    nobs = boot.sums[:, :, _S["n_observations"]]
    rows = []
    for (reader, judge, budget), g in c.groupby(["reader", "judge", "budget"], sort=True):
        at = dict(zip(g["policy"], g.index))
        acc = dict(zip(g["policy"], g["accuracy"]))
        present = [p for p in policies if p in at]
        comparisons = [("matched_pair", a, b) for a, b in combinations(present, 2)
                       if abs(acc[a] - acc[b]) <= tolerance + 1e-12]
        if control is not None and control in at:
            comparisons += [("control", control, p) for p in present]
        for kind, a, b in comparisons:
            shared = (nobs[:, at[a]] > 0) & (nobs[:, at[b]] > 0)
            ia, ib = at[a], at[b]
            s = boot.sums * shared[:, None, None]
            res = stats.paired_ratio_difference(
                boot.counts,
                s[:, ia, _S["irreversible"]], s[:, ia, _S["n_oracle_answerable"]],
                s[:, ib, _S["irreversible"]], s[:, ib, _S["n_oracle_answerable"]], level)
            ra = stats.safe_ratio(s[:, ia, _S["irreversible"]].sum(), s[:, ia, _S["n_oracle_answerable"]].sum())
            rb = stats.safe_ratio(s[:, ib, _S["irreversible"]].sum(), s[:, ib, _S["n_oracle_answerable"]].sum())
            nq = int(((s[:, ia, _S["n_oracle_answerable"]] + s[:, ib, _S["n_oracle_answerable"]]) > 0).sum())
            few = nq < min_clusters
            low, high = (np.nan, np.nan) if few else (res.low, res.high)
            rows.append(dict(
                reader=reader, judge=judge, budget=budget, regime=regime, comparison=kind,
                policy_a=a, policy_b=b, accuracy_a=acc[a], accuracy_b=acc[b],
                accuracy_gap=acc[a] - acc[b], n_shared_questions=int(shared.sum()),
                irreversible_rate_a=float(ra), irreversible_rate_b=float(rb),
                difference=res.estimate, low=low, high=high,
                half_width=(high - low) / 2, p_value=res.p_value,
                dissociates=bool(res.excludes_zero and not few), n_questions=nq, few_questions=few,
            ))
    cols = ["reader", "judge", "budget", "regime", "comparison", "policy_a", "policy_b",
            "accuracy_a", "accuracy_b", "accuracy_gap", "n_shared_questions", "n_questions", "few_questions",
            "irreversible_rate_a", "irreversible_rate_b", "difference", "low", "high",
            "half_width", "p_value", "dissociates"]
    return pd.DataFrame(rows, columns=cols)


# Abstract and Section 6: "no difference in irreversible rate is detected among tested policy pairs
# at a resolution of 1.2-6 percentage points" (read as the range of the matched pairs' resolution).
PAPER_R3_RESOLUTION = (0.012, 0.06)


def resolution(r3: pd.DataFrame, level: float = 0.95, power: float = 0.8) -> pd.DataFrame:
    """R3's resolution, measured: per contrast of :func:`matched_accuracy` (computed at `level`),
    the interval's half-width and the minimal detectable difference (`mdd`): the true difference
    in irreversible rate that a two-sided test at 1 - `level` detects with probability `power`,
    (z_(1+level)/2 + z_power) x SE, with SE = half-width / z_(1+level)/2 (the normal reading of
    the clustered percentile interval). Beside them the paper's 1.2-6 pp (:data:`PAPER_R3_RESOLUTION`).
    A contrast marked `few_questions` has no interval, hence no resolution."""
    from scipy.stats import norm

    z = float(norm.ppf((1 + level) / 2))
    out = r3[["reader", "judge", "budget", "comparison", "policy_a", "policy_b", "n_questions",
              "difference", "half_width", "dissociates"]].copy()
    out["mdd"] = out["half_width"] * (z + float(norm.ppf(power))) / z
    out["paper_resolution_low"], out["paper_resolution_high"] = PAPER_R3_RESOLUTION
    out.attrs.update(level=level, power=power)
    return out.reset_index(drop=True)


def residual_by_type(obs: pd.DataFrame, min_clusters: int = MIN_CLUSTERS) -> pd.DataFrame:
    """R4: oracle-answerable errors and residual errors per cell and question type, with the
    questions they come from; the residual share is left empty below `min_clusters` questions."""
    by = obs.groupby([*CELL, "question_type"], sort=False)
    g = by[["n_oracle_answerable", "n_errors", "residual"]].sum()
    g.insert(0, "n_questions", by["question_id"].nunique())
    g = g.reset_index()
    g["residual_share"] = stats.safe_ratio(g["residual"], g["n_errors"])
    g["residual_share"] = g["residual_share"].where(g["n_questions"] >= min_clusters)
    return sort_cells(g, extra=["question_type"]).reset_index(drop=True)


def reader_residuals(obs: pd.DataFrame, policy: str = NO_EVICT, budget: int | None = None,
                     regime: str = "forced_gold") -> pd.DataFrame:
    """Residual count of one cell for every reader and judge (the paper's 59 -> 28 comparison is
    no-evict at the largest budget under forced-gold). `budget` None = the largest present."""
    sel = obs[(obs["policy"] == policy) & (obs["regime"] == regime)]
    if sel.empty:
        return pd.DataFrame(columns=["reader", "judge", "policy", "budget", "regime", "n_questions",
                                     "n_oracle_answerable", "n_errors", "residual"])
    budget = int(sel["budget"].max()) if budget is None else budget
    sel = sel[sel["budget"] == budget]
    by = sel.groupby(["reader", "judge"], sort=True)
    g = by[["n_oracle_answerable", "n_errors", "residual"]].sum()
    g.insert(0, "n_questions", by["question_id"].nunique())
    g = g.reset_index()
    g.insert(2, "policy", policy)
    g.insert(3, "budget", budget)
    g.insert(4, "regime", regime)
    return g


@dataclass(frozen=True)
class ReaderResiduals:
    """One residual cell (see :func:`reader_residuals`) read by two readers, named. `more` is the
    reader with more residual errors, or None when the counts are equal: which reader turns out
    weaker is a finding of the data, never assumed."""

    primary: str
    primary_residual: int
    second: str | None
    second_residual: int | None
    more: str | None
    cell: str

    def describe(self) -> str:
        if self.second is None:
            return f"{self.primary}: {self.primary_residual} residual; needs a second reader"
        verdict = ("equal residuals" if self.more is None else
                   f"{self.more} has more residuals")
        return (f"{self.primary}: {self.primary_residual}, {self.second}: {self.second_residual} "
                f"residual ({self.cell}); {verdict}")


def compare_reader_residuals(residuals: pd.DataFrame, primary: str | None = None,
                             second: str | None = None) -> ReaderResiduals | None:
    """R4 by reader: the residual count of `primary` (the headline reader) beside `second`'s.

    `residuals` is :func:`reader_residuals` for one judge. `primary` may be omitted only when the
    table holds one reader; `second` when it holds at most one other. None for an empty table.
    """
    if residuals.empty:
        return None
    if residuals["judge"].nunique() > 1:
        raise ValueError(f"reader residuals of several judges {sorted(residuals['judge'].unique())}: "
                         "select one judge first")
    readers = list(residuals["reader"])
    if primary is None:
        if len(readers) > 1:
            raise ValueError(f"several readers {sorted(readers)}: name the primary reader (reader=)")
        primary = readers[0]
    if primary not in readers:
        raise ValueError(f"reader {primary!r} not in the residuals; present: {sorted(readers)}")
    others = [r for r in readers if r != primary]
    if second is None and len(others) > 1:
        raise ValueError(f"several second readers {sorted(others)}: name one (second=)")
    second = second if second is not None else (others[0] if others else None)
    if second is not None and second not in others:
        raise ValueError(f"second reader {second!r} not in the residuals; present: {sorted(others)}")
    by = residuals.set_index("reader")
    first = by.loc[primary]
    cell = f"{first['policy']}@{int(first['budget'])} {first['regime']}"
    n1 = int(first["residual"])
    if second is None:
        return ReaderResiduals(primary, n1, None, None, None, cell)
    n2 = int(by.loc[second, "residual"])
    more = None if n1 == n2 else (primary if n1 > n2 else second)
    return ReaderResiduals(primary, n1, second, n2, more, cell)


def judge_agreement(records: pd.DataFrame) -> pd.DataFrame:
    """Percent agreement and Cohen's kappa for every pair of judges over the items both graded.

    An item is a reader answer: question x cell x seed x reader x arm. Items either judge left
    without a label (an errored call) are excluded and counted. So are the deterministic judge's
    UNDECIDED items: where an LLM judge filled them in (`judge_raw` "UNDECIDED -> ..."), the label
    is that judge's, and counting it would be the LLM judge agreeing with itself.
    """
    item = ["question_id", "policy", "budget", "regime", "seed", "reader", "arm"]
    rec = records[item + ["judge", "correct"]].copy()
    if "judge_raw" in records.columns:
        undecided = ((records["judge"] == DETERMINISTIC_JUDGE)
                     & records["judge_raw"].astype("string").fillna("").str.startswith(UNDECIDED))
        rec["correct"] = rec["correct"].astype("boolean").mask(undecided.to_numpy())
    # Clean-gold items have empty cell fields; a sentinel lets them join like any other item.
    for col in ("policy", "regime"):
        rec[col] = rec[col].astype("string").fillna("")
    for col in ("budget", "seed"):
        rec[col] = rec[col].astype("Int64").fillna(-1)
    judges = sorted(rec["judge"].unique())
    rows = []
    for a, b in combinations(judges, 2):
        m = rec[rec["judge"] == a].merge(rec[rec["judge"] == b], on=item, suffixes=("_a", "_b"))
        for reader, g in m.groupby("reader", sort=True):
            ok = g["correct_a"].notna() & g["correct_b"].notna()
            la = g.loc[ok, "correct_a"].astype(bool).to_numpy()
            lb = g.loc[ok, "correct_b"].astype(bool).to_numpy()
            ag = stats.agreement(la, lb)  # nothing both judged: n 0, both numbers NaN
            rows.append(dict(
                judge_a=a, judge_b=b, reader=reader, n_items=ag.n,
                n_excluded=int((~ok).sum()),
                percent_agreement=ag.percent_agreement,
                cohen_kappa=ag.cohen_kappa,
                correct_rate_a=float(la.mean()) if ok.any() else np.nan,
                correct_rate_b=float(lb.mean()) if ok.any() else np.nan,
            ))
    return pd.DataFrame(rows, columns=["judge_a", "judge_b", "reader", "n_items", "n_excluded",
                                       "percent_agreement", "cohen_kappa", "correct_rate_a",
                                       "correct_rate_b"])


def undecided_share(records: pd.DataFrame) -> pd.DataFrame:
    """Per reader x question type (and "all" per reader): the items the deterministic judge
    graded in the arms clean_gold, policy and restore (`n_items`), how many it left UNDECIDED
    (`n_undecided`, `undecided_share`), and how many of those an LLM judge labelled
    (`n_filled_by_llm`; `judge_raw` "UNDECIDED -> <model>: ..."). The rest have no label and the
    decomposition excludes them (`observations(...).attrs["n_excluded_unlabelled"]`)."""
    rec = records[(records["judge"] == DETERMINISTIC_JUDGE) & records["arm"].isin(CORE_ARMS)]
    undecided = rec["judge_raw"].astype("string").fillna("").str.startswith(UNDECIDED).to_numpy()
    df = pd.DataFrame({"reader": rec["reader"].astype(str).to_numpy(),
                       "question_type": rec["question_type"].astype(str).to_numpy(),
                       "n_items": 1, "n_undecided": undecided.astype(int),
                       "n_filled_by_llm": (undecided & rec["correct"].notna().to_numpy()).astype(int)})
    cols = ["n_items", "n_undecided", "n_filled_by_llm"]
    by_type = df.groupby(["reader", "question_type"], sort=True)[cols].sum().reset_index()
    overall = df.groupby("reader", sort=True)[cols].sum().reset_index().assign(question_type="all")
    out = pd.concat([by_type, overall], ignore_index=True).sort_values(
        ["reader", "question_type"], key=lambda s: s.map(lambda v: (v == "all", v)), kind="stable")
    out["undecided_share"] = out["n_undecided"] / out["n_items"]
    return out[["reader", "question_type", "n_items", "n_undecided", "undecided_share",
                "n_filled_by_llm"]].reset_index(drop=True)


def surviving_gold_ablation(obs: pd.DataFrame, min_clusters: int = MIN_CLUSTERS) -> pd.DataFrame:
    """Restore-tightness, surviving gold: of the irreversible errors, how many the reader already
    gets right when only the *surviving* gold is restored (arm 'restore_surviving'). Those would
    be recoverable, not irreversible; few of them means the full-gold restore is a tight bound.

    Per reader, judge and regime. Under forced-gold the arm is the policy context itself
    (forced-gold = inject(surviving gold), :mod:`memlife.restore.reading.arms`), so that row flips
    nothing by construction; the top-k row is the test. `n_questions`: the questions of the tested
    errors; the share is left empty below `min_clusters` of them."""
    irr = obs[(obs["irreversible"] == 1) & obs["restore_surviving_correct"].notna()]
    by = ["reader", "judge", "regime"]
    g = irr.assign(flipped=irr["restore_surviving_correct"].astype(bool).astype(int)).groupby(
        by, sort=True).agg(
        n_irreversible_tested=("flipped", "size"), n_become_recoverable=("flipped", "sum"),
        n_questions=("question_id", "nunique")).reset_index()
    g["share"] = stats.safe_ratio(g["n_become_recoverable"], g["n_irreversible_tested"])
    g["share"] = g["share"].where(g["n_questions"] >= min_clusters)
    g["n_irreversible_without_arm"] = [
        int(((obs["irreversible"] == 1) & obs["restore_surviving_correct"].isna()
             & (obs["reader"] == r) & (obs["judge"] == j) & (obs["regime"] == rg)).sum())
        for r, j, rg in zip(g["reader"], g["judge"], g["regime"])]
    return g


def placement_placebo(obs: pd.DataFrame, min_clusters: int = MIN_CLUSTERS) -> pd.DataFrame:
    """Restore-tightness, placement placebo: of the oracle-answerable errors, the share flipped to
    correct by placing non-gold snippets where the gold used to sit (arm 'placebo'), beside the
    share the real restore flips. The placebo share bounds what presentation (plus unannotated
    evidence near the gold) does. Per reader, judge and regime: one placebo context serves both
    regimes, but their errors differ. `n_questions`: the questions of the tested errors; the
    shares are left empty below `min_clusters` of them."""
    err = obs[(obs["n_errors"] == 1) & obs["placebo_correct"].notna()]
    g = err.assign(
        placebo_flip=err["placebo_correct"].astype(bool).astype(int),
        restore_flip=err["restore_correct"].astype(bool).astype(int),
    ).groupby(["reader", "judge", "regime"], sort=True).agg(
        n_errors_tested=("placebo_flip", "size"), n_placebo_flips=("placebo_flip", "sum"),
        n_restore_flips=("restore_flip", "sum"), n_questions=("question_id", "nunique")).reset_index()
    g["placebo_flip_share"] = stats.safe_ratio(g["n_placebo_flips"], g["n_errors_tested"])
    g["restore_flip_share"] = stats.safe_ratio(g["n_restore_flips"], g["n_errors_tested"])
    few = g["n_questions"] < min_clusters
    g.loc[few, ["placebo_flip_share", "restore_flip_share"]] = np.nan
    return g


def pick(records_or_obs: pd.DataFrame, column: str, wanted: str = "") -> str:
    """The reader or judge to headline: `wanted` if given (must be present), else the only one,
    else the one with the most policy observations (ties: first by name). For judges, an LLM
    judge is preferred to the deterministic scorer when both graded: the paper's primary judge
    is an LLM (GPT-4o-mini), the scorer is the offline stand-in."""
    values = records_or_obs[column].dropna()
    if wanted:
        if wanted not in set(values):
            raise ValueError(f"{column} {wanted!r} not in the records; present: {sorted(set(values))}")
        return wanted
    if column == "judge" and set(values) - {DETERMINISTIC_JUDGE}:
        values = values[values != DETERMINISTIC_JUDGE]
    counts = values.value_counts()
    top = counts[counts == counts.max()].index
    return sorted(top)[0]


@dataclass(frozen=True)
class RunRecords:
    """A run's restore records, read once for the analyses (:func:`load_run`)."""

    path: Path
    records: pd.DataFrame  # every row, the judge audit's included (`decompose.load_records`)
    obs: pd.DataFrame  # one row per policy observation (`decompose.observations`)
    reader: str  # the headline reader and judge (:func:`pick`)
    judge: str

    def describe(self) -> str:
        obs = self.obs
        return (f"{len(self.records):,} records, {len(obs):,} policy observations, "
                f"{obs['question_id'].nunique()} questions; readers {sorted(obs['reader'].unique())}, "
                f"judges {sorted(obs['judge'].unique())}; headline reader {self.reader!r}, judge {self.judge!r}; "
                f"{obs.attrs['n_excluded_unlabelled']} observations excluded for an empty label")


def load_run(profile: str, reader: str = "", judge: str = "") -> RunRecords:
    """The records 22_read_restore wrote for `profile` (every reader's file: one run per reader adds
    its own), checked against the contract, their
    observations, and the headline reader and judge (`reader`, `judge`: empty = :func:`pick`'s
    choice). A missing file says which notebook writes it."""
    from memlife.base import paths

    run_dir = paths.layout(profile).run
    path = records_dir(run_dir)
    if not path.is_dir() or not any(path.iterdir()):
        legacy = legacy_records_path(run_dir)
        if legacy.is_file():
            raise FileNotFoundError(
                f"{legacy} is a single records file from before per-reader records: rerun "
                f"notebooks/22_read_restore.ipynb (it writes {path}/<reader>.parquet), or move the "
                f"file there under its reader's name (grading.reader_records_path)")
        raise FileNotFoundError(
            f"{path} does not exist: run notebooks/22_read_restore.ipynb first "
            f"(make PROFILE={profile} ... runs it before this notebook)."
        )
    records = load_records(path)
    obs = observations(records, source=str(path))
    return RunRecords(path, records, obs, pick(obs, "reader", reader), pick(obs, "judge", judge))


def audit_agreement(agreement: pd.DataFrame, judge: str | None = None) -> pd.Series | None:
    """The judge-audit row of :func:`judge_agreement` (one reader's rows), chosen by what the two
    judges are: `judge` (the headline judge) against the audit judge (the ``judge_audit`` role,
    judge names ``audit:<model>``; the paper's second-judge check) when the records carry one;
    otherwise against the deterministic scorer, which every record set carries; when `judge` is
    the scorer itself, against its only partner. Without `judge`, the only row. None when there
    is no row; an error when the choice is ambiguous."""
    if agreement.empty:
        return None
    if agreement["reader"].nunique() > 1:
        raise ValueError(f"agreement rows of several readers {sorted(agreement['reader'].unique())}: "
                         "select one reader first")
    if judge is None:
        if len(agreement) == 1:
            return agreement.iloc[0]
        raise ValueError(f"{len(agreement)} judge pairs: name the headline judge (judge=)")
    with_judge = agreement[(agreement["judge_a"] == judge) | (agreement["judge_b"] == judge)]
    vs_audit = with_judge[with_judge["judge_a"].map(is_audit_judge)
                          | with_judge["judge_b"].map(is_audit_judge)]
    if len(vs_audit) == 1:
        return vs_audit.iloc[0]
    if len(vs_audit) > 1:
        raise ValueError(f"judge {judge!r} is audited by {len(vs_audit)} audit judges: the audit pair "
                         "is ambiguous")
    if judge != DETERMINISTIC_JUDGE:
        vs_scorer = with_judge[(with_judge["judge_a"] == DETERMINISTIC_JUDGE)
                               | (with_judge["judge_b"] == DETERMINISTIC_JUDGE)]
        if len(vs_scorer) == 1:
            return vs_scorer.iloc[0]
    if len(with_judge) == 1:
        return with_judge.iloc[0]
    raise ValueError(f"judge {judge!r} is in {len(with_judge)} agreement pairs and none is with the "
                     f"{DETERMINISTIC_JUDGE!r} scorer: the audit pair is ambiguous")
