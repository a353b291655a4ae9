"""The restore audit's reference subjects over a whole grid, offline (notebook 25).

`build_grid` runs notebooks 20–22's code path up to the reads — builder, units, every model-free
eviction policy, ranking, injection, both regimes, restore and ablation arms — and `read` reads
it with a reference subject (`memlife.restore.reading.subjects`) into records in the restore record contract (docs/design.md).
From there:

* `evidence_oracle_expected` — what the evidence-oracle's decomposition must be, counted from the
  evictions and the contexts alone (never from the records);
* `Design` / `planted` — the noisy oracle's planted decomposition, exact: every distinct context
  has a known probability of a right answer, and an observation's bins follow from its clean,
  policy and restore contexts (identical contexts answer alike);
* `coverage` — how often the question-clustered 95% intervals of the bin shares cover the planted
  shares over repeated simulations.

Why the simulation redraws the questions as well as the noise: eviction makes the questions very
unequal (whether gold was lost is a property of the question, cell and seed, not a coin flip), and
a question-clustered interval is an interval for the population the questions are drawn from. Held
fixed, those questions would leave only the reader's noise to vary, and every interval would be
conservative by the between-question spread — the coverage check could not tell a right interval
from a too-wide one. So each repetition draws the questions with replacement from the grid's
questions (the population; the planted shares are its ratios of expected counts) and draws fresh
noise for every drawn copy, with the subject's own draw (`memlife.subjects.planted_masks`).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Sequence

import numpy as np
import pandas as pd

from memlife import longmem
from memlife import subjects as ref
from memlife.longmem import Question
from memlife.restore.data import dataset, units
from memlife.restore.eviction import evict
from memlife.restore.judging import grading
from memlife.restore.reading import arms
from memlife.restore.eviction.evict import Eviction
from memlife.restore.reading.subjects import SubjectReader, key_hashes
from memlife.restore.data.units import Unit

CELL = ("policy", "budget", "regime")
BINS = ("n_errors", "irreversible", "recoverable", "residual")
SHARES = {"irreversible_share": "irreversible", "recoverable_share": "recoverable", "residual_share": "residual"}


@dataclass
class GridConfig:
    n_questions: int | None  # None: every question of the source
    history_tokens: int
    budgets: list[int]
    seeds: list[int]
    k: int
    restore_cap: int
    seed: int = 0
    # Every policy that needs no model: LLM-importance asks the scorer for a score per distinct
    # unit text (~11,000 over the 470 reconstructed histories), a model call each, which a reference run has not.
    policies: list[str] = field(default_factory=lambda: list(evict.MODEL_FREE_POLICIES))
    ablation_arms: bool = True
    workers: int | None = None  # processes sharing the questions (None: every core); same grid for any number
    source: str = "reconstructed"  # memlife.restore.data.dataset.SOURCES
    task_chat_share: float | None = None  # the reconstruction's filler; None: S's mix (dataset.build_records)


@dataclass
class Grid:
    questions: list[Question]
    histories: dict[str, list[Unit]]
    evictions: list[Eviction]
    reads: list[arms.Read]
    plan: arms.ReadPlan


def _question_units(job: tuple) -> tuple[list[Unit], list[list[float]]]:
    """A question's units and its share of the control's calibration (`evict.gold_random_probabilities`)."""
    q, budgets, seeds, with_control = job
    us = units.units_of(q)
    return us, (evict.gold_random_probabilities(us, q.question_id, budgets, seeds) if with_control else [])


def _question_grid(job: tuple) -> tuple[list[Eviction], list[arms.Read]]:
    """A question's cells (`evict.evict_question`) and reads (`arms.plan_question`), checked
    (`arms.check_reads`)."""
    q, us, cfg, mixing = job
    evs = evict.evict_question(us, q.question_id, list(cfg.policies), list(cfg.budgets), list(cfg.seeds),
                               mixing=mixing)
    reads = arms.plan_question(q, evs, k=cfg.k, restore_cap=cfg.restore_cap, ablation_arms=cfg.ablation_arms,
                                   history=us)
    arms.check_reads(reads, [q], cfg.restore_cap, {q.question_id: us})
    return evs, reads


def build_grid(cfg: GridConfig) -> Grid:
    """The profile's LongMemEval questions (`dataset.build_records`), the eviction grid and every read, with notebook 22's
    construction checks (`arms.check_reads`): `evict.evict_grid`, then `arms.plan_grid`,
    question by question over `cfg.workers` processes (`memlife.base.parallel`). Two passes, because
    the control's λ is calibrated over the whole dataset: units and calibration, then each
    question's evictions and reads. The result is the same for any number of workers."""
    from memlife.base import parallel

    specs = evict.resolve_policies(cfg.policies, "notebooks.25_restore_controls.policies")
    bad = [s.name for s in specs if s.needs_model]
    if bad:
        raise ValueError(f"{bad} need a model; model-free policies: "
                         f"{[n for n, s in evict.registered_policies().items() if not s.needs_model]}")
    # The workers get the specs, not the names: a policy from a module of one's own is registered
    # in this process only.
    cfg = replace(cfg, policies=specs)
    questions = [longmem.to_question(r) for r in dataset.build_records(
        cfg.source, n_questions=cfg.n_questions, history_tokens=cfg.history_tokens, seed=cfg.seed,
        task_chat_share=cfg.task_chat_share)]
    budgets, seeds = list(cfg.budgets), list(cfg.seeds)
    with_control = any(s.name == evict.CONTROL for s in specs)
    with parallel.pool(min(parallel.n_workers(cfg.workers), len(questions))) as pmap:
        first = pmap(_question_units, [(q, budgets, seeds, with_control) for q in questions])
        histories = {q.question_id: us for q, (us, _) in zip(questions, first)}
        r_gold = {q.question_id: r for q, (_, r) in zip(questions, first)}
        mixing = evict.mixings_of([r_gold[qid] for qid in sorted(r_gold)], budgets, seeds) if with_control else {}
        by_q = dict(zip(histories, pmap(_question_grid, [(q, histories[q.question_id], cfg, mixing)
                                                         for q in questions], desc="questions evicted and read")))
    # evict_grid's order (questions sorted by id), plan_grid's (questions in order)
    evictions = [e for qid in sorted(by_q) for e in by_q[qid][0]]
    reads = [r for q in questions for r in by_q[q.question_id][1]]
    return Grid(questions, histories, evictions, reads, arms.plan_reads(reads))


def read(grid: Grid, subject: str, *, seed: int = 0, noise: ref.Noise | None = None) -> tuple[pd.DataFrame, SubjectReader]:
    """Records of one subject over the grid (deterministic scorer), and the reader (its `answers`)."""
    reader = SubjectReader(subject, grid.questions, grid.histories, seed=seed, noise=noise)
    answers = arms.read_all(grid.plan, reader, desc=reader.model)
    return grading.records(grid.reads, answers, {q.question_id: q for q in grid.questions}, reader.model), reader


# ----------------------------------------------------------------------------- evidence-oracle


def _gold(grid: Grid) -> dict[str, frozenset[str]]:
    return {qid: units.gold_ids(us) for qid, us in grid.histories.items()}


def evidence_oracle_expected(grid: Grid) -> pd.DataFrame:
    """Per policy x budget x regime, the evidence-oracle's bins from the evictions and contexts:
    an observation (question x seed) is an error exactly when some gold unit is missing from its
    policy context; irreversible exactly when a gold unit was evicted (then it is missing from
    every policy context: `lost_gold` = irreversible); recoverable when all gold survived but
    retrieval left some out; residual never (the restore injects all gold)."""
    gold = _gold(grid)
    lost = {(e.question_id, e.policy, e.budget, e.seed): bool(gold[e.question_id] & set(e.evicted))
            for e in grid.evictions}
    rows = []
    for r in grid.reads:
        if r.arm != "policy":
            continue
        gone = lost[(r.question_id, r.policy, r.budget, r.seed)]
        missing = not gold[r.question_id] <= set(r.unit_ids)
        rows.append({"policy": r.policy, "budget": r.budget, "regime": r.regime, "n_observations": 1,
                     "lost_gold": int(gone), "n_errors": int(missing), "irreversible": int(missing and gone),
                     "recoverable": int(missing and not gone), "residual": 0})
    return pd.DataFrame(rows).groupby(list(CELL), sort=True).sum().reset_index()


# ----------------------------------------------------------------------------- the noisy oracle's design


@dataclass
class Design:
    """The grid as the noisy oracle meets it. Reads: the distinct (question, prompt) contexts.
    Observations: question x cell x seed, pointing at their clean, policy and restore reads by
    position within their question's reads (so a redrawn copy of a question finds its own)."""

    cells: pd.DataFrame          # C rows: policy, budget, regime; `distinct` False for a repeat
    question_ids: np.ndarray     # Q
    read_q: np.ndarray           # N: question index of each read, reads sorted by question
    read_ptr: np.ndarray         # Q + 1: reads of question q are read_ptr[q]:read_ptr[q + 1]
    available: np.ndarray        # N
    context_tokens: np.ndarray   # N
    miss_hash: np.ndarray        # N
    confuse_hash: np.ndarray     # N
    obs_q: np.ndarray            # O, observations sorted by question
    obs_ptr: np.ndarray          # Q + 1
    obs_cell: np.ndarray         # O
    obs_local: np.ndarray        # O x 3: clean, policy, restore read, local to the question's reads
    obs_evicted: np.ndarray      # O: a gold unit was evicted
    obs_key: pd.DataFrame        # O rows: question_id, policy, budget, regime, seed


def design(grid: Grid) -> Design:
    gold = _gold(grid)
    qids = np.array(sorted(grid.histories))
    qindex = {q: i for i, q in enumerate(qids)}
    distinct: dict[tuple[str, str], int] = {}
    read_rows = []
    for r in grid.reads:
        key = (r.question_id, r.prompt)
        if key not in distinct:
            distinct[key] = len(read_rows)
            read_rows.append((qindex[r.question_id], gold[r.question_id] <= set(r.unit_ids), r.context_tokens,
                              r.question_id, r.prompt))
    order = sorted(range(len(read_rows)), key=lambda i: (read_rows[i][0], i))
    new_pos = np.empty(len(order), dtype=np.int64)
    new_pos[order] = np.arange(len(order))
    rq = np.array([read_rows[i][0] for i in order], dtype=np.int64)
    ptr = np.searchsorted(rq, np.arange(len(qids) + 1))
    miss_h, conf_h = key_hashes([read_rows[i][3] for i in order], [read_rows[i][4] for i in order])

    def local(r: arms.Read) -> int:
        return int(new_pos[distinct[(r.question_id, r.prompt)]] - ptr[qindex[r.question_id]])

    clean = {r.question_id: r for r in grid.reads if r.arm == "clean_gold"}
    restore = {(r.question_id, r.policy, r.budget, r.seed, r.regime): r for r in grid.reads if r.arm == "restore"}
    cell_index: dict[tuple, int] = {}
    obs = []
    for r in grid.reads:
        if r.arm != "policy":
            continue
        cell = (r.policy, r.budget, r.regime)
        c = cell_index.setdefault(cell, len(cell_index))
        rs = restore[(r.question_id, r.policy, r.budget, r.seed, r.regime)]
        obs.append((qindex[r.question_id], c, local(clean[r.question_id]), local(r), local(rs),
                    (r.n_gold_evicted or 0) > 0, r.question_id, r.policy, r.budget, r.regime, r.seed))
    obs.sort(key=lambda o: (o[0], o[1], o[10]))
    oq = np.array([o[0] for o in obs], dtype=np.int64)
    cells = pd.DataFrame(list(cell_index), columns=list(CELL))
    d = Design(
        cells=cells, question_ids=qids, read_q=rq, read_ptr=ptr,
        available=np.array([read_rows[i][1] for i in order], dtype=bool),
        context_tokens=np.array([read_rows[i][2] for i in order], dtype=np.float64),
        miss_hash=miss_h, confuse_hash=conf_h, obs_q=oq, obs_ptr=np.searchsorted(oq, np.arange(len(qids) + 1)),
        obs_cell=np.array([o[1] for o in obs], dtype=np.int64),
        obs_local=np.array([o[2:5] for o in obs], dtype=np.int64).reshape(-1, 3),
        obs_evicted=np.array([o[5] for o in obs], dtype=bool),
        obs_key=pd.DataFrame([o[6:] for o in obs], columns=["question_id", "policy", "budget", "regime", "seed"]),
    )
    # A cell that repeats another (no_evict keeps everything at every budget) is one experiment.
    seen: set = set()
    flags = []
    for c in range(len(cells)):
        m = d.obs_cell == c
        sig = (d.obs_q[m].tobytes(), d.obs_local[m].tobytes(), d.obs_evicted[m].tobytes(), cells.loc[c, "regime"])
        flags.append(sig not in seen)
        seen.add(sig)
    d.cells["distinct"] = flags
    return d


def success_probability(d: Design, noise: ref.Noise) -> np.ndarray:
    """Per read: the probability that the noisy oracle answers it right, available x (1 - miss) x
    (1 - confusion) — `planted_masks`' two draws, every question confusable."""
    return d.available * (1.0 - noise.miss_rate(d.context_tokens)) * (1.0 - noise.confusion)


def _global(d: Design) -> np.ndarray:
    return d.read_ptr[d.obs_q][:, None] + d.obs_local  # O x 3 read indices


def expected_bins(d: Design, noise: ref.Noise) -> pd.DataFrame:
    """Per observation, the exact expectation of every bin (oracle-answerable, errors,
    irreversible, recoverable, residual, policy correct). The clean, policy and restore answers
    are independent draws unless two of them are the same context, which then answers alike: the
    joint law is summed over the eight (clean, policy, restore) outcomes, each consistent one the
    product over its distinct contexts."""
    s = success_probability(d, noise)
    ids = _global(d)
    out = {k: np.zeros(len(ids)) for k in ("n_oracle_answerable", *BINS, "n_correct")}
    for c in (0, 1):
        for p in (0, 1):
            for r in (0, 1):
                vals = (c, p, r)
                prob = np.ones(len(ids))
                for i in range(3):
                    dup = np.zeros(len(ids), dtype=bool)
                    for j in range(i):
                        same = ids[:, i] == ids[:, j]
                        prob = np.where(same & (vals[i] != vals[j]), 0.0, prob)
                        dup |= same
                    si = s[ids[:, i]]
                    prob = prob * np.where(dup, 1.0, si if vals[i] else 1.0 - si)
                out["n_oracle_answerable"] += prob * c
                out["n_correct"] += prob * p
                if c and not p:
                    out["n_errors"] += prob
                    if r:
                        out["irreversible"] += prob * d.obs_evicted
                        out["recoverable"] += prob * ~d.obs_evicted
                    else:
                        out["residual"] += prob
    return pd.DataFrame(out)


def planted(d: Design, noise: ref.Noise, min_clusters: int = 1) -> pd.DataFrame:
    """Per cell: expected counts and the planted bin shares (ratios of expected counts over the
    grid's questions). `checkable` per share: not an identity (planted strictly between 0 and 1)
    and at least `min_clusters` questions with an expected count both in the bin and outside it."""
    e = expected_bins(d, noise)
    e["cell"], e["q"] = d.obs_cell, d.obs_q
    per_q = e.groupby(["cell", "q"]).sum()
    tot = per_q.groupby("cell").sum()
    out = d.cells.copy()
    for col in ("n_oracle_answerable", *BINS, "n_correct"):
        out[f"expected_{col}"] = tot[col].reindex(range(len(out))).to_numpy()
    for share, num in SHARES.items():
        out[share] = out[f"expected_{num}"] / out["expected_n_errors"].where(out["expected_n_errors"] > 0)
        inside = (per_q[num] > 1e-12).groupby("cell").sum().reindex(range(len(out))).to_numpy()
        outside = ((per_q["n_errors"] - per_q[num]) > 1e-12).groupby("cell").sum().reindex(range(len(out))).to_numpy()
        p = out[share].to_numpy()
        out[f"{share}_checkable"] = (p > 1e-9) & (p < 1 - 1e-9) & (np.minimum(inside, outside) >= min_clusters)
    return out


def correct_at(d: Design, noise: ref.Noise, seed: int) -> np.ndarray:
    """Per read, whether the noisy oracle run at `seed` answers it right (the realised run)."""
    missed, confused = ref.planted_masks(noise, np.uint64(seed), d.miss_hash, d.confuse_hash, d.context_tokens,
                                         np.ones(len(d.available), dtype=bool))
    return d.available & ~missed & ~confused


def _expand(ptr: np.ndarray, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The rows of clusters `idx` (CSR `ptr`), and each row's position in `idx`."""
    lengths = ptr[idx + 1] - ptr[idx]
    pos = np.repeat(np.arange(len(idx)), lengths)
    starts = np.cumsum(lengths) - lengths
    rows = ptr[idx][pos] + np.arange(lengths.sum()) - starts[pos]
    return rows, pos


def simulate(d: Design, noise: ref.Noise, rep_seeds: Sequence[int], *, resample: bool = True,
             rng: np.random.Generator | None = None) -> np.ndarray:
    """Bin counts of repeated runs: R x len(BINS) x C x Q (uint8: at most one observation per seed).

    Each repetition draws Q questions with replacement (`resample`; else the grid's questions, in
    order) and, for the copy at position j, fresh noise with seed rep_seed x (Q + 1) + j + 1, so
    that two copies of one question are independent readers' answers."""
    Q, C = len(d.question_ids), len(d.cells)
    rng = rng or np.random.default_rng(0)
    out = np.zeros((len(rep_seeds), len(BINS), C, Q), dtype=np.uint8)
    for ri, rs in enumerate(rep_seeds):
        idx = rng.integers(0, Q, size=Q) if resample else np.arange(Q)
        rows, pos = _expand(d.read_ptr, idx)
        seeds = np.uint64(rs) * np.uint64(Q + 1) + pos.astype(np.uint64) + np.uint64(1)
        missed, confused = ref.planted_masks(noise, seeds, d.miss_hash[rows], d.confuse_hash[rows],
                                             d.context_tokens[rows], np.ones(len(rows), dtype=bool))
        right = d.available[rows] & ~missed & ~confused
        start = np.cumsum(d.read_ptr[idx + 1] - d.read_ptr[idx]) - (d.read_ptr[idx + 1] - d.read_ptr[idx])
        orows, opos = _expand(d.obs_ptr, idx)
        at = start[opos][:, None] + d.obs_local[orows]
        c, p, r = right[at[:, 0]], right[at[:, 1]], right[at[:, 2]]
        err = c & ~p
        ev = d.obs_evicted[orows]
        flat = d.obs_cell[orows] * Q + opos
        for b, hit in enumerate((err, err & r & ev, err & r & ~ev, err & ~r)):
            out[ri, b] = np.bincount(flat, weights=hit, minlength=C * Q).reshape(C, Q).astype(np.uint8)
    return out


def coverage(d: Design, noise: ref.Noise, *, reps: int, n_boot: int, seed: int, level: float = 0.95,
             min_clusters: int = 20, block: int = 250) -> pd.DataFrame:
    """Per cell and bin share: over `reps` simulated runs (fresh seeds, never the run's own; the
    questions redrawn, see the module docstring), the share whose question-clustered percentile
    interval covers the planted share. Shares that are identities (planted 0 or 1) or rest on fewer
    than `min_clusters` questions get no coverage."""
    plant = planted(d, noise, min_clusters)
    rng = np.random.default_rng([seed, 25])
    covered: dict[tuple[int, str], list[np.ndarray]] = {}
    totals = np.zeros((len(d.cells), len(BINS)))  # bin counts summed over every repetition
    for b0 in range(0, reps, block):
        rep_seeds = [seed + 1 + r for r in range(b0, min(reps, b0 + block))]
        sims = simulate(d, noise, rep_seeds, rng=rng).astype(np.float64)
        totals += sims.sum(axis=(0, 3)).T
        for c in range(len(d.cells)):
            den = sims[:, 0, c, :]
            for share, num_name in SHARES.items():
                num = sims[:, BINS.index(num_name), c, :]
                if not plant.loc[c, f"{share}_checkable"]:
                    continue
                covered.setdefault((c, share), []).append(ref.interval_coverage(
                    num, den, np.arange(den.shape[1]), plant.loc[c, share], n_boot=n_boot,
                    seed=seed + 7919 * c + 31 * b0 + list(SHARES).index(share), level=level))
    rows = []
    for c in range(len(d.cells)):
        for share in SHARES:
            cov = covered.get((c, share))
            rows.append({**d.cells.loc[c, list(CELL)].to_dict(), "share": share, "planted": plant.loc[c, share],
                         "empirical": totals[c, BINS.index(SHARES[share])] / max(1.0, totals[c, 0]), "reps": reps,
                         "distinct": bool(d.cells.loc[c, "distinct"]),
                         "coverage": float(np.concatenate(cov).mean()) if cov else np.nan})
    return pd.DataFrame(rows)


def pooled_coverage(cov: pd.DataFrame) -> float:
    """Mean coverage over the distinct cells and shares that have one."""
    c = cov[cov["distinct"] & cov["coverage"].notna()]
    return float(c["coverage"].mean()) if len(c) else float("nan")


def read_index(d: Design, question_ids: Sequence[str], prompts_: Sequence[str]) -> np.ndarray:
    """The design's read (index into its per-read arrays) of each (question, prompt)."""
    at = {h: i for i, h in enumerate(d.miss_hash.tolist())}
    miss_h, _ = key_hashes(question_ids, prompts_)
    return np.array([at[h] for h in miss_h.tolist()], dtype=np.int64)


# ----------------------------------------------------------------------------- the finding


def reference_decomposition(obs: pd.DataFrame, *, n_boot: int, seed: int, level: float = 0.95,
                            min_clusters: int | None = None) -> pd.DataFrame:
    """The decomposition per cell with question-clustered intervals (`paper_analyses.shares`), plus the
    recoverable rate (recoverable errors per oracle-answerable observation) and each budget's
    paper counterpart, with the paper's two-bin share for that cell where the paper reports one
    (GPT-4o-mini's, beside a perfect reader's here). Read with the evidence-oracle, every observation is oracle-answerable and
    no error is residual, so accuracy is the evidence availability, the irreversible rate the share
    of observations whose gold eviction destroyed, and the recoverable rate the share whose gold
    survived but retrieval left out: what eviction and retrieval alone cost. Intervals from fewer
    than `min_clusters` questions (default `paper_analyses.MIN_CLUSTERS`) are left empty."""
    from memlife import paper_reference, stats
    from memlife.restore.analyses import paper_analyses, paper_tables
    from memlife.restore.analyses.decompose import COUNT_COLUMNS

    min_clusters = paper_analyses.MIN_CLUSTERS if min_clusters is None else min_clusters
    boot = paper_analyses.cell_bootstrap(obs, n_boot, seed)
    out = paper_analyses.shares(boot, level, min_clusters)
    s = {c: i for i, c in enumerate(COUNT_COLUMNS)}
    num, den = boot.sums[:, :, s["recoverable"]], boot.sums[:, :, s["n_oracle_answerable"]]
    lo, hi = stats.percentile_interval(stats.ratio_replicates(boot.counts, num, den), level)
    few = (den > 0).sum(0) < min_clusters
    lo, hi = np.where(few, np.nan, lo), np.where(few, np.nan, hi)
    out["recoverable_rate"], out["recoverable_rate_low"], out["recoverable_rate_high"] = (
        stats.safe_ratio(num.sum(0), den.sum(0)), lo, hi)
    budgets = sorted({int(b) for b in out["budget"]})
    out.insert(2, "paper_budget", [paper_reference.paper_budget(int(b), budgets) for b in out["budget"]])
    out["paper_budget"] = out["paper_budget"].astype("Int64")
    out = out.merge(paper_tables.paper_two_bin_shares(), on=["policy", "paper_budget", "regime"], how="left")
    cols = ["policy", "budget", "paper_budget", "regime", "reader", "n_questions", "n_observations", "n_oracle_answerable",
            "n_errors", "irreversible", "recoverable", "residual",
            "accuracy", "accuracy_low", "accuracy_high",
            "irreversible_rate", "irreversible_rate_low", "irreversible_rate_high",
            "recoverable_rate", "recoverable_rate_low", "recoverable_rate_high",
            "two_bin_share", "two_bin_share_questions", "two_bin_share_low", "two_bin_share_high",
            "paper_two_bin_share"]
    return out[cols].reset_index(drop=True)


def cost_figure(table: pd.DataFrame):
    """Top row: stacked bars per policy @ budget of the irreversible rate (gold destroyed) and the
    recoverable rate (gold kept, not retrieved), each with its interval. Bottom row: the two-bin
    share with its interval, and the paper's value for the cell where it reports one. One column
    per retrieval regime."""
    import matplotlib.pyplot as plt

    from memlife.restore.analyses.figures import BIN_COLORS

    regimes = [r for r in ("topk", "forced_gold") if r in set(table["regime"])]
    fig, axes = plt.subplots(2, len(regimes), figsize=(6.2 * len(regimes), 6.6), sharey="row", squeeze=False,
                             gridspec_kw={"height_ratios": [1.4, 1]})
    for col, regime in enumerate(regimes):
        ax, ax2 = axes[0][col], axes[1][col]
        g = table[table["regime"] == regime].reset_index(drop=True)
        x = np.arange(len(g))
        irr, rec = g["irreversible_rate"].to_numpy(float), g["recoverable_rate"].to_numpy(float)
        ax.bar(x, irr, color=BIN_COLORS["irreversible"], width=0.75, label="irreversible (gold evicted)")
        ax.bar(x, rec, bottom=irr, color=BIN_COLORS["recoverable"], width=0.75,
               label="recoverable (gold kept, not retrieved)")
        ax.errorbar(x, irr, yerr=[irr - g["irreversible_rate_low"], g["irreversible_rate_high"] - irr],
                    fmt="none", ecolor="black", capsize=2, lw=0.8)
        err = 1 - g["accuracy"].to_numpy(float)
        ax.errorbar(x, err, yerr=[err - (1 - g["accuracy_high"]), (1 - g["accuracy_low"]) - err],
                    fmt="none", ecolor="dimgray", capsize=2, lw=0.8)
        ax.set_xticks(x, [])
        ax.set_ylim(0, 1.25)  # room above the control's bars for the legend
        ax.set_title(f"{'top-k' if regime == 'topk' else 'forced-gold'} retrieval", fontsize=10)
        share = g["two_bin_share"].to_numpy(float)
        ax2.errorbar(x, share, yerr=[share - g["two_bin_share_low"], g["two_bin_share_high"] - share],
                     fmt="o", ms=3, color=BIN_COLORS["irreversible"], ecolor="black", capsize=2, lw=0.8,
                     label="ours (evidence-oracle)")
        if "paper_two_bin_share" in g:
            ax2.plot(x, g["paper_two_bin_share"].to_numpy(float), "kx", ms=6, label="paper (GPT-4o-mini)")
        labels = [f"{p} @ {int(b):,}" + (f" ({int(pb) // 1000}k)" if pd.notna(pb) else "")
                  for p, b, pb in zip(g["policy"], g["budget"], g["paper_budget"])]
        ax2.set_xticks(x, labels, fontsize=7, rotation=45, ha="right")
        ax2.set_ylim(-0.05, 1.1)
    axes[0][0].set_ylabel("share of observations answered wrong")
    axes[0][0].legend(fontsize=7, loc="upper center", ncol=2)
    axes[1][0].set_ylabel("two-bin share")
    axes[1][0].legend(fontsize=7, loc="lower left")
    fig.suptitle("What eviction and retrieval alone cost: the evidence-oracle (reference), "
                 "question-clustered 95% intervals", fontsize=10)
    fig.tight_layout()
    return fig


# What the reconstruction's filler changes: the same grid built on two fillers, read by the
# evidence-oracle, cell by cell. Each rate is a ratio of count columns (decompose.COUNT_COLUMNS).
FILLER_RATES = {"accuracy": ("n_correct", ("n_oracle_answerable",)),
                "irreversible_rate": ("irreversible", ("n_oracle_answerable",)),
                "recoverable_rate": ("recoverable", ("n_oracle_answerable",)),
                "two_bin_share": ("irreversible", ("irreversible", "recoverable"))}


def filler_comparison(obs_a: pd.DataFrame, obs_b: pd.DataFrame, labels: tuple[str, str], *, n_boot: int,
                      seed: int, level: float = 0.95) -> pd.DataFrame:
    """One row per cell (policy x budget x regime) and rate of `FILLER_RATES`: the rate on filler
    a and on filler b (`labels`), a - b, and its question-clustered interval, paired (one resample
    of the questions for both builds: the questions, their evidence and the seeds are the same,
    only the filler differs). `obs_*`: `decompose.observations` of the two builds' records."""
    from memlife import stats
    from memlife.restore.analyses import paper_analyses
    from memlife.restore.analyses.decompose import COUNT_COLUMNS

    a, b = (paper_analyses.cell_bootstrap(o, n_boot, seed) for o in (obs_a, obs_b))
    if not np.array_equal(a.question_ids, b.question_ids) or not a.cells[list(CELL)].equals(b.cells[list(CELL)]):
        raise ValueError("the two builds must hold the same questions and cells; only the filler may differ")
    col = {c: i for i, c in enumerate(COUNT_COLUMNS)}
    rows = []
    for c, cell in enumerate(a.cells[list(CELL)].itertuples(index=False)):
        for rate, (num_col, den_cols) in FILLER_RATES.items():
            num_a, num_b = a.sums[:, c, col[num_col]], b.sums[:, c, col[num_col]]
            den_a = sum(a.sums[:, c, col[d]] for d in den_cols)
            den_b = sum(b.sums[:, c, col[d]] for d in den_cols)
            diff = stats.paired_ratio_difference(a.counts, num_a, den_a, num_b, den_b, level)
            rows.append({**cell._asdict(), "rate": rate, "n_questions": int(((den_a > 0) | (den_b > 0)).sum()),
                         labels[0]: float(stats.safe_ratio(num_a.sum(), den_a.sum())),
                         labels[1]: float(stats.safe_ratio(num_b.sum(), den_b.sum())),
                         "difference": diff.estimate, "difference_low": diff.low, "difference_high": diff.high})
    return pd.DataFrame(rows)
