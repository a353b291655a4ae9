"""The power of the restore audit's claims: simulated runs at the paper's effect sizes, analysed
with notebooks 23-24's code.

A simulated run is the observations `decompose.observations` makes from a run's records (one per
question x cell x seed; `paper_analyses.cell_bootstrap` reads them), for `questions` questions and
`seeds` seeds (the seeded policies, random and the control, run at every seed; the others once,
as `evict` runs them). An observation is drawn in two steps:

1. *Gold lost.* Which observations lose a gold unit is taken from this project's own eviction of
   the paper-scale data: notebook 25 evicts the 470 reconstructed ~102k-token histories at the
   paper's budgets and seeds and writes, per question, which of its cells lost gold
   (`gold_loss_patterns`, committed as results/tables/restore_gold_loss_patterns.csv). A simulated
   run draws its questions' patterns with replacement from those 470, so every dependence the
   construction has is kept as it is: a question losing gold at 80k loses it at 30k, the control
   loses it wherever random does, FIFO and random agree on some questions and not others.
   LLM-importance, which that grid does not run (it needs a model), takes redundancy-aware's
   pattern; no-evict loses nothing.
2. *The reader.* Oracle-answerable per question (the paper's N = 336 of 470); a residual error
   (wrong with every gold unit restored) at the reader's residual rate (the paper's 59 of 336 at
   no-evict 80k, forced-gold; 28 for its stronger reader); otherwise wrong when gold was lost with
   probability `error_if_lost` (restored, it is right: irreversible) and, under top-k, wrong with
   gold kept at the rate that makes the top-k two-bin share the paper's (recoverable). Forced-gold
   injects every surviving gold unit, so it has no recoverable errors, as by construction. A
   question's reads share `reader_correlation` of their latent draws.

The paper prints the top-k two-bin shares at 80k (0.71/0.73/0.67/0.60) and 8k (1.00); its 30k
shares are not printed, and "4 of 12 cells reject, the gap concentrates at 80k" is read as 30k's
gap being nil (`two_bin` at 30k = 1.0, a parameter). How much more the control destroys than the
baselines, and whether two baselines lose the same gold, are the construction's.

Each run is analysed as the notebooks do: R1 `paper_analyses.shares` (the 80k two-bin share's interval
excludes one half: destruction is the majority), R2 `paper_analyses.regime_gap` (Holm over the 12
evicting cells), R3 `paper_analyses.matched_accuracy` (the matched pairs' coarsest interval half-width,
which `paper_analyses.resolution` reports, against the paper's 6 pp; the control detected in every
contrast), R4 the
two readers' residual rates in the paper's cell, paired by question (`stats.paired_ratio_difference`:
notebook 24 sets the counts side by side; this is the test that comparison needs).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from memlife import paper_reference, power, stats
from memlife.restore.analyses import paper_analyses
from memlife.restore.analyses.decompose import COUNT_COLUMNS
from memlife.restore.judging.grading import DETERMINISTIC_JUDGE
from memlife.restore.eviction.evict import BASELINE_POLICIES, CONTROL, FIFO, IMPORTANCE, NO_EVICT, RANDOM, REDUNDANCY, SEEDED_POLICIES

TRACK = "restore"
UNIT = "questions"
POLICIES = (FIFO, RANDOM, REDUNDANCY, IMPORTANCE, NO_EVICT, CONTROL)
REGIMES = ("topk", "forced_gold")
BUDGETS = paper_reference.PAPER_BUDGETS
PRIMARY, SECOND = "primary (simulated)", "stronger (simulated)"
# The paper's oracle-answerable questions of its 470, and its R4 residual counts over them.
PAPER_N = int(paper_reference.figure("oracle_answerable_n"))
PAPER_QUESTIONS = int(paper_reference.figure("data_questions"))
PAPER_RESIDUAL = {PRIMARY: paper_reference.figure("r4_residual_primary_reader"),
                  SECOND: paper_reference.figure("r4_residual_stronger_reader")}
MAJORITY = 0.5
# The paper's matched pairs resolve 1.2-6 pp; a size "resolves" R3 when every matched pair's
# interval half-width is at most the coarser end.
R3_RESOLUTION = paper_analyses.PAPER_R3_RESOLUTION[1]


@dataclass(frozen=True)
class Model:
    patterns: dict = field(default_factory=dict)  # (policy, budget) -> questions x seeds, 1 where gold was lost
    two_bin: dict = field(default_factory=dict)  # (policy, budget) -> planted top-k two-bin share
    oracle_answerable: float = PAPER_N / PAPER_QUESTIONS
    error_if_lost: float = 0.9
    residual: dict = field(default_factory=lambda: {r: n / PAPER_N for r, n in PAPER_RESIDUAL.items()})
    reader_correlation: float = 0.3
    seeds: int = 3
    match_tolerance: float = 0.02

    def assumptions(self) -> str:
        return (f"gold loss as the project's eviction of the paper-scale data has it (LLM-importance as "
                f"redundancy-aware); a question's reads' latent correlation {self.reader_correlation}; wrong without "
                f"its gold {self.error_if_lost}; 30k top-k two-bin share {self.two_bin.get((FIFO, 30000))} "
                "(not printed in the paper)")

    def lost_rate(self, policy: str, budget: int) -> float:
        """The share of observations (question x seed) that lose a gold unit."""
        return float(self.patterns[(policy, budget)][:, : _seeds_of(policy, self.seeds)].mean())

    def kept_error(self, policy: str, budget: int) -> float:
        """The top-k error rate with every gold unit kept that gives `two_bin[(policy, budget)]`:
        irreversible / (irreversible + recoverable) = g e / (g e + (1 - g) k)."""
        if policy not in BASELINE_POLICIES:  # no-evict and the control: the baselines' retrieval misses
            return float(np.mean([self.kept_error(p, budget) for p in (FIFO, RANDOM, REDUNDANCY)]))
        g, t = self.lost_rate(policy, budget), self.two_bin[(policy, budget)]
        if t >= 1 or g <= 0:
            return 0.0
        if g >= 1:
            raise ValueError(f"{policy}@{budget}: every observation loses gold, so no two-bin share below 1 ({t})")
        k = g * self.error_if_lost * (1 - t) / ((1 - g) * t)
        if k > 1:
            raise ValueError(f"{policy}@{budget}: a two-bin share of {t} needs a kept-gold error rate of {k:.2f} > 1")
        return k


PATTERNS_TABLE = Path("results") / "tables" / "restore_gold_loss_patterns.csv"
_CELL_COLUMN = "{policy} {budget} {seed}"


def gold_loss_patterns(evictions) -> pd.DataFrame:
    """Per question (rows, sorted by id), one 0/1 column per evicted cell, "<policy> <budget> <seed>":
    1 where that cell's eviction took at least one gold unit. What a simulated run draws its
    questions' gold loss from (notebook 25 writes it from its paper-scale grid)."""
    rows = [(e.question_id, _CELL_COLUMN.format(policy=e.policy, budget=e.budget, seed=e.seed), int(e.n_gold_evicted > 0))
            for e in evictions if e.budget is not None]
    if not rows:
        raise ValueError("no evicted cell: gold-loss patterns need an eviction grid with budgets")
    df = pd.DataFrame(rows, columns=["question_id", "cell", "lost"])
    wide = df.pivot(index="question_id", columns="cell", values="lost").sort_index()
    return wide[sorted(wide.columns)].reset_index()


def load_patterns(path: Path | None = None, seeds: int = 3) -> dict:
    """(policy, budget) -> questions x seeds 0/1 array for the six paper policies at the paper's
    budgets, read from `gold_loss_patterns`' table: LLM-importance takes redundancy-aware's
    pattern, no-evict loses nothing, a deterministic policy's one seed is repeated."""
    from memlife.base import paths

    path = path or paths.repo_root() / PATTERNS_TABLE
    if not path.is_file():
        raise FileNotFoundError(f"{path}: notebook 25's gold-loss patterns (make publish commits them) are needed "
                                "to simulate the restore audit's runs")
    t = pd.read_csv(path).set_index("question_id")
    out = {}
    for policy in POLICIES:
        source = REDUNDANCY if policy == IMPORTANCE else policy
        for budget in BUDGETS:
            if policy == NO_EVICT:
                out[(policy, budget)] = np.zeros((len(t), seeds), dtype=bool)
                continue
            n = seeds if source in SEEDED_POLICIES else 1
            cols = [_CELL_COLUMN.format(policy=source, budget=budget, seed=sd) for sd in range(n)]
            missing = [c for c in cols if c not in t.columns]
            if missing:
                raise ValueError(f"{path}: no column {missing[0]!r} (the paper's budgets {list(BUDGETS)} and "
                                 f"{seeds} seed(s) of {source} are needed)")
            m = t[cols].to_numpy(dtype=bool)
            out[(policy, budget)] = m if n == seeds else np.repeat(m, seeds, axis=1)
    return out


def paper_model(patterns: dict | None = None, two_bin_30k: float = 1.0, **overrides) -> Model:
    """The paper's effect sizes: its top-k two-bin shares (80k and 8k printed, 30k `two_bin_30k`)."""
    two_bin = {}
    for p in BASELINE_POLICIES:
        two_bin[(p, BUDGETS[0])] = paper_reference.figure("two_bin_share", policy=p, budget=BUDGETS[0], regime="topk")
        two_bin[(p, BUDGETS[1])] = two_bin_30k
        two_bin[(p, BUDGETS[2])] = paper_reference.figure("two_bin_share", policy=p, budget=BUDGETS[2], regime="topk")
    seeds = int(overrides.get("seeds", Model.seeds))
    return Model(patterns=patterns if patterns is not None else load_patterns(seeds=seeds), two_bin=two_bin,
                 **overrides)


def _seeds_of(policy: str, seeds: int) -> int:
    return seeds if policy in SEEDED_POLICIES else 1


def simulate_observations(model: Model, questions: int, rng: np.random.Generator) -> pd.DataFrame:
    """One simulated run's observations (the primary reader's every cell, and the second reader's
    in the R4 cell), in `decompose.observations`' columns."""
    answerable = (rng.random(questions) < model.oracle_answerable).astype(np.float64)
    read_q = rng.standard_normal(questions)
    qids = np.array([f"q{i:04d}" for i in range(questions)])
    pool = len(next(iter(model.patterns.values())))
    drawn = rng.integers(0, pool, size=questions)  # the questions' gold-loss patterns, with replacement
    parts = []
    for policy in POLICIES:
        n_seeds = _seeds_of(policy, model.seeds)
        for budget in BUDGETS:
            lost = model.patterns[(policy, budget)][drawn, :n_seeds]
            for regime in REGIMES:
                kept_err = model.kept_error(policy, budget) if regime == "topk" else 0.0
                for reader in ((PRIMARY, SECOND) if (policy, budget, regime) == (NO_EVICT, BUDGETS[-1], "forced_gold")
                               else (PRIMARY,)):
                    res = model.residual[reader]
                    u = power.latent_uniforms(rng, (questions, n_seeds), [(model.reader_correlation, read_q[:, None])])
                    residual = u < res
                    wrong_lost = lost & (u < res + (1 - res) * model.error_if_lost)
                    wrong_kept = ~lost & (u < res + (1 - res) * kept_err)
                    irreversible = ~residual & wrong_lost
                    recoverable = ~residual & wrong_kept
                    error = residual | irreversible | recoverable
                    a = answerable[:, None]
                    parts.append(pd.DataFrame({
                        "policy": policy, "budget": budget, "regime": regime, "reader": reader,
                        "judge": DETERMINISTIC_JUDGE,
                        "question_id": np.repeat(qids, n_seeds),
                        "question_type": "simulated",
                        "seed": np.tile(np.arange(n_seeds), questions),
                        "n_observations": 1.0,
                        "n_oracle_answerable": np.repeat(answerable, n_seeds),
                        "n_errors": (a * error).ravel(),
                        "irreversible": (a * irreversible).ravel(),
                        "recoverable": (a * recoverable).ravel(),
                        "residual": (a * residual).ravel(),
                        "n_correct": (a * ~error).ravel(),
                    }))
    obs = pd.concat(parts, ignore_index=True)
    return obs[["policy", "budget", "regime", "reader", "judge", "question_id", "question_type", "seed",
                *COUNT_COLUMNS]]


def _irreversible_rate(model: Model, policy: str, budget: int) -> float:
    return model.lost_rate(policy, budget) * (1 - model.residual[PRIMARY]) * model.error_if_lost


def claims(model: Model) -> list[power.Claim]:
    """The restore paper's claims the notebooks test, with the model's effect sizes."""
    a = model.assumptions()
    top = BUDGETS[-1]
    out = []
    for p in BASELINE_POLICIES:
        # The paper: LLM-importance "is 0.60 with a confidence interval spanning 0.5" -- unresolved.
        claimed = p != IMPORTANCE
        out.append(power.Claim(TRACK, f"R1 two-bin share > 0.5: {p}@{top // 1000}k",
                               "destruction is the majority of restore-corrected errors (5.1): the top-k "
                               "two-bin share's interval lies above 0.5"
                               + ("" if claimed else "; the paper's own interval spans 0.5 (not claimed)"),
                               model.two_bin[(p, top)], UNIT, assumed=a, source="5.1 (R1)", claimed=claimed))
    for p in BASELINE_POLICIES:
        out.append(power.Claim(TRACK, f"R2 regime gap: {p}@{top // 1000}k",
                               "the recoverable-share gap between top-k and forced-gold rejects after Holm "
                               "over the 12 evicting cells (5.2)",
                               1 - model.two_bin[(p, top)], UNIT, assumed=a, source="5.2 (R2)"))
    out.append(power.Claim(TRACK, "R2 4 of 12 reject",
                           "all four 80k cells reject after Holm, as the paper's 4 of 12 (5.2)",
                           min(1 - model.two_bin[(p, top)] for p in BASELINE_POLICIES), UNIT, assumed=a,
                           source="5.2 (R2)"))
    out.append(power.Claim(TRACK, "R3 matched-pair resolution",
                           "no matched baseline pair dissociates, at a resolution of 1.2-6 pp (5.3): "
                           "the coarsest matched pair's interval half-width",
                           R3_RESOLUTION, UNIT, kind="resolution", target=R3_RESOLUTION, assumed=a,
                           source="5.3 (R3)"))
    for b in BUDGETS:
        diff = min(_irreversible_rate(model, CONTROL, b) - _irreversible_rate(model, p, b) for p in paper_analyses.R3_POLICIES)
        out.append(power.Claim(TRACK, f"R3 control detected: {b // 1000}k",
                               "the destructive control differs in irreversible rate from each baseline at "
                               "this budget (3 of the paper's 9 contrasts, 5.3)",
                               diff, UNIT, assumed=a + "; the control's effect is the construction's", source="5.3 (R3)"))
    out.append(power.Claim(TRACK, "R3 control detected in all 9",
                           "the destructive control differs in irreversible rate in all 9 contrasts (5.3)",
                           min(c.effect for c in out if c.key.startswith("R3 control detected: ")), UNIT,
                           assumed=a + "; the control's effect is the construction's", source="5.3 (R3)"))
    out.append(power.Claim(TRACK, "R4 residual depends on the reader",
                           "residual errors at no-evict 80k forced-gold differ between the readers, 59 vs 28 "
                           "(5.4), paired by question",
                           model.residual[PRIMARY] - model.residual[SECOND], UNIT, assumed=a, source="5.4 (R4)"))
    return out


def analyse(obs: pd.DataFrame, claims_: list[power.Claim], *, n_boot: int, seed: int,
            alpha: float = 0.05, tolerance: float = 0.02) -> dict[str, float]:
    """Per claim: 1.0/0.0 whether this run's test comes out as the paper's (power claims), or the
    run's resolution (R3's coarsest matched-pair half-width; NaN when no pair is matched)."""
    primary = obs[obs["reader"] == PRIMARY]
    boot = paper_analyses.cell_bootstrap(primary, n_boot=n_boot, seed=seed)
    top = BUDGETS[-1]
    out: dict[str, float] = {}
    r1 = paper_analyses.shares(boot)
    r1 = r1[(r1["regime"] == "topk") & (r1["budget"] == top)].set_index("policy")
    for p in BASELINE_POLICIES:
        out[f"R1 two-bin share > 0.5: {p}@{top // 1000}k"] = float(r1.loc[p, "two_bin_share_low"] > MAJORITY) \
            if p in r1.index else 0.0
    r2 = paper_analyses.regime_gap(boot, alpha=alpha)
    r2 = r2[r2["budget"] == top].set_index("policy")
    for p in BASELINE_POLICIES:
        out[f"R2 regime gap: {p}@{top // 1000}k"] = float(p in r2.index and bool(r2.loc[p, "holm_reject"])
                                                          and r2.loc[p, "gap"] > 0)
    out["R2 4 of 12 reject"] = float(all(out[f"R2 regime gap: {p}@{top // 1000}k"] for p in BASELINE_POLICIES))
    r3 = paper_analyses.matched_accuracy(boot, tolerance=tolerance, level=1 - alpha)
    matched = r3[r3["comparison"] == "matched_pair"]
    out["R3 matched-pair resolution"] = float(matched["half_width"].max()) if len(matched) else float("nan")
    control = r3[r3["comparison"] == "control"]
    for b in BUDGETS:
        at = control[control["budget"] == b]
        out[f"R3 control detected: {b // 1000}k"] = float(
            len(at) == len(paper_analyses.R3_POLICIES) and bool((at["dissociates"] & (at["difference"] > 0)).all()))
    out["R3 control detected in all 9"] = float(all(out[f"R3 control detected: {b // 1000}k"] for b in BUDGETS))
    cell = obs[(obs["policy"] == NO_EVICT) & (obs["budget"] == top) & (obs["regime"] == "forced_gold")]
    qids = sorted(cell["question_id"].unique())
    sums = {r: stats.cluster_sums(cell[cell["reader"] == r], "question_id", ["residual", "n_oracle_answerable"],
                                  clusters=qids)[1] for r in (PRIMARY, SECOND)}
    c = stats.paired_ratio_difference(stats.cluster_counts(len(qids), n_boot, seed),
                                      sums[PRIMARY][:, 0], sums[PRIMARY][:, 1], sums[SECOND][:, 0], sums[SECOND][:, 1],
                                      level=1 - alpha)
    out["R4 residual depends on the reader"] = float(c.p_value < alpha and c.estimate > 0)
    return {cl.key: out[cl.key] for cl in claims_}


def run(model: Model, claims_: list[power.Claim], questions: int, rep: int, *, seed: int, n_boot: int,
        alpha: float = 0.05) -> dict[str, float]:
    """One simulated run of `questions` questions, analysed: the outcome of every claim."""
    rng = power.run_rng(seed, questions, rep)
    obs = simulate_observations(model, questions, rng)
    return analyse(obs, claims_, n_boot=n_boot, seed=int(rng.integers(2**31)), alpha=alpha,
                   tolerance=model.match_tolerance)
