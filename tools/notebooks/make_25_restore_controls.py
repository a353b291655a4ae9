"""Writes notebooks/25_restore_controls.ipynb (run from the repository root: python tools/notebooks/make_25_restore_controls.py)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from nbwrite import write  # noqa: E402

cells = [
("md", """# 25 · Restore audit reference subjects: checking the instrument at the paper's scale

The restore audit (notebooks 20–24) is an instrument: it sorts a reader's errors into *irreversible* (gold evicted,
fixed by restoring it), *recoverable* (gold kept but not retrieved, fixed by restoring it) and *residual* (still wrong
with all the gold in front of the reader). An instrument should be checked against something whose reading is known.
This notebook runs three **reference subjects** — model-free readers whose right answer is known (DESIGN.md,
"Reference subjects"; `memlife.subjects`, `memlife.restore.subjects`) — through the whole audit, offline, at the
paper's scale: 470 questions with LongMemEval-S-length (~102k-token) histories:

| subject | answers |
| --- | --- |
| `gold (reference)` | the question's gold answer, always |
| `evidence-oracle (reference)` | the gold answer exactly when every gold unit of the question is in the context the arm hands over; else "I don't know" |
| `noisy-oracle (reference)` | the evidence-oracle with two planted, seeded errors where the evidence is there: a *miss* ("I don't know") with probability `min(miss_cap, miss_base + miss_slope_per_1k × context k-tokens)`, otherwise a *wrong answer* with probability `confusion` |

A subject stands exactly where the model reader stands: the pipeline builds every prompt (Appendix D's reader prompt
around the injected snippets, `pipeline.plan_grid`), the subject reads the question and the snippets back out of the
prompt, and its answers are scored by the same deterministic scorer. The noisy draws are keyed by (seed, question,
context): two arms that hand over the very same context answer alike, as any temperature-0 reader does.

What this checks, as plain `assert`s (a broken identity fails nbval and `make test`):

1. `gold` makes no error in any cell or arm;
2. the `evidence-oracle` has no residual error anywhere, no recoverable error under forced-gold, and in every cell
   its irreversible count is the number of observations (question × seed) that lost a gold unit — every one of
   which it answers wrong, since the gold is then missing from every policy context; its recoverable count is the
   number whose gold all survived but was not all retrieved;
3. the `noisy-oracle`'s question-clustered 95% intervals cover its planted bin shares at the nominal rate over
   repeated simulations;
4. the destructive control differs from every policy in every R3 contrast.

And what it measures, as a **finding**: the evidence-oracle's decomposition by policy × budget × regime — what
eviction and retrieval alone cost, before any reader fails to use what it was handed."""),
("params", """profile = "smoke"
seed = 0
n_questions = 24
history_tokens = 1500
budgets = [118, 441, 1176]
seeds = [0, 1]
k = 12
restore_cap = 300
policies = ["fifo", "random", "redundancy", "no_evict", "control"]
ablation_arms = True
miss_base = 0.05
miss_slope_per_1k = 0.05
miss_cap = 0.5
confusion = 0.1
n_boot = 500
match_tolerance = 0.02
coverage_reps = 200
coverage_boot = 300
coverage_band = [0.8, 0.99]
min_clusters = 5"""),
("md", """**What runs, at what scale.**

* *Data.* LongMemEval-format questions built offline by `longmem.build` (the six question types in turn, evidence
  sessions among real human chit-chat dialogues), in memory: 470 questions at quick and paper, each history as long
  as LongMemEval-S's in tokens — `history_tokens` = 102,000, what this project measures the real file at with its
  tokenizer (the paper says ~115k; `arms.PAPER_HISTORY_TOKENS`, notebook 20's paper setting). The budgets
  (8k/30k/80k tokens), the 2,000-token injection cap (`restore_cap`) and k = 60 units are the paper's.
* *Where it differs.* A LongMemEval-S history is ~50 sessions and ~500 turns, long because its assistant turns are
  long (~200 tokens); the builder's filler is real chit-chat at ~20 tokens a turn, so the same 102k tokens are
  ~5,200 turns here. A budget therefore keeps the paper's share of the history's tokens but ten times as many,
  shorter units, and the top-k context (60 units) holds ~1.2k tokens of turn text (~2.3k as rendered, dates and roles
  included), not ~12k; the forced-gold and restore contexts fill the same 2,000-token cap (of turn text) as the
  paper's, with more, shorter snippets.
* *Time.* The eviction grid and the reads are computed question by question, spread over every core
  (`GridConfig.workers`, `memlife.parallel`): the control's mixing rate is calibrated over the whole dataset first,
  so the grid is the same for any number of processes (a test checks it against the serial one).
* *Policies.* Every policy that needs no model: FIFO, random, redundancy-aware, no-evict and the destructive control
  (random's run with gold evicted at 3× random's rate), at 3 budgets and, for random and the control, 3 seeds.
  **LLM-importance is left out**: it asks the scorer model for an importance score per distinct unit text —
  about 235,000 at this scale, a model call each — and a reference run has no model. The R3 contrasts below are
  therefore the control against FIFO, random and redundancy at each budget.
* *Arms.* Both regimes (top-k, forced-gold), the restore and the clean full-gold arms, and the restore-tightness
  ablation arms (`restore_surviving`, `placebo`), exactly as notebook 22 builds them, with its construction checks
  (`pipeline.check_reads`)."""),
("code", """import time

import numpy as np
import pandas as pd

from memlife import paths, report
from memlife import subjects as ref
from memlife.evict import BASELINE_POLICIES, CONTROL
from memlife.restore import analyses, arms, controls, decompose

lay = paths.layout(profile)
t0 = time.perf_counter()
cfg = controls.GridConfig(n_questions=n_questions, history_tokens=history_tokens, budgets=budgets, seeds=seeds,
                          k=k, restore_cap=restore_cap, seed=seed, policies=policies, ablation_arms=ablation_arms)
grid = controls.build_grid(cfg)
turns = np.array([len(us) for us in grid.histories.values()])
toks = np.array([sum(u.tokens for u in us) for us in grid.histories.values()])
print(f"{len(grid.questions)} questions, {turns.mean():.0f} turns and {toks.mean():,.0f} tokens per history; "
      f"{len(grid.evictions):,} evictions; {grid.plan.naive_calls:,} reads, {grid.plan.distinct_calls:,} distinct "
      f"prompts ({time.perf_counter() - t0:.0f} s)")
ctx_tokens = pd.DataFrame([(r.regime, r.context_tokens) for r in grid.reads if r.arm == "policy"],
                          columns=["regime", "tokens"]).groupby("regime")["tokens"].mean()
print("mean context of a policy read, as rendered:", ", ".join(f"{g} {t:,.0f} tokens" for g, t in ctx_tokens.items()))
pd.DataFrame([{"policy": e.policy, "budget": e.budget, "seed": e.seed, "gold_lost": e.n_gold_evicted > 0}
              for e in grid.evictions]).groupby(["policy", "budget"], sort=False).agg(
    observations=("gold_lost", "size"), gold_lost=("gold_lost", "mean")).round(3)"""),
("md", """## The run

Each subject reads every distinct prompt once (identical contexts are read once, as for a model), and the records
are built by `arms.records` in the DESIGN.md contract — the records notebooks 23–24 read, with the subject's label
in the `reader` column."""),
("code", """noise = ref.Noise(miss_base=miss_base, miss_slope_per_1k=miss_slope_per_1k, miss_cap=miss_cap, confusion=confusion)
t1 = time.perf_counter()
records, readers = {}, {}
for name in ref.SUBJECTS:
    records[name], readers[name] = controls.read(grid, name, seed=seed, noise=noise)
out_dir = lay.run / "restore_controls"
out_dir.mkdir(parents=True, exist_ok=True)
all_records = arms.combine(*records.values())
all_records.to_parquet(out_dir / "records.parquet", index=False)
obs = {name: decompose.observations(r) for name, r in records.items()}
dec = {name: decompose.decompose(o) for name, o in obs.items()}
print(f"{len(all_records):,} records ({time.perf_counter() - t1:.0f} s) ->", out_dir / "records.parquet")
assert set(all_records["reader"]) == {ref.label(s) for s in ref.SUBJECTS}"""),
("md", """## The identities

`evidence_oracle_expected` counts, from the evictions and the contexts alone (never from the records), what the
evidence-oracle's decomposition must be: an observation is an error exactly when a gold unit is missing from its
policy context; irreversible exactly when a gold unit was evicted (then it is missing from every policy context, so
*irreversible = observations that lost gold*); recoverable when all the gold survived but the regime's context left
some out (top-k only: forced-gold injects every surviving gold unit); residual never, because the restore injects
all the gold."""),
("code", """gold, oracle = dec["gold"], dec["evidence-oracle"]
# 1. gold: no error in any cell or arm
assert records["gold"]["correct"].all()
assert (gold["n_errors"] == 0).all() and (gold["n_oracle_answerable"] == gold["n_observations"]).all()
# 2. the evidence-oracle: no residual anywhere, no recoverable under forced-gold ...
assert (oracle["residual"] == 0).all()
assert (oracle.loc[oracle["regime"] == "forced_gold", "recoverable"] == 0).all()
# ... and irreversible = observations that lost a gold unit, recoverable = gold kept but not in the context
expected = controls.evidence_oracle_expected(grid)
both = oracle.merge(expected, on=list(controls.CELL), suffixes=("", "_expected"), validate="one_to_one")
assert len(both) == len(oracle) == len(expected)
assert (both["irreversible"] == both["lost_gold"]).all()
for col in ("n_errors", "irreversible", "recoverable", "residual"):
    assert (both[col] == both[f"{col}_expected"]).all(), col
assert (oracle["n_errors"] == oracle["irreversible"] + oracle["recoverable"]).all()
# the ablation arms: restoring only the surviving gold fixes no irreversible error; the placebo holds no gold
o = obs["evidence-oracle"]
assert not o.loc[o["irreversible"] == 1, "restore_surviving_correct"].any()
assert not o["placebo_correct"].any()
both[["policy", "budget", "regime", "n_observations", "lost_gold", "n_errors", "irreversible", "recoverable",
      "residual"]]"""),
("md", """## Finding: what eviction and retrieval alone cost

The evidence-oracle reads perfectly whatever it is handed, so its errors are exactly the evidence the memory lost
(irreversible: eviction destroyed a gold unit) or the retriever missed (recoverable: every gold unit survived, not all
reached the context). Per policy × budget × regime, with question-clustered 95% intervals (`memlife.stats`, all seed
replicates of a question resampled together): accuracy (= evidence availability, the ceiling on any reader through
that memory), the irreversible and recoverable rates per observation, and the two-bin share (irreversible /
(irreversible + recoverable)). `paper_budget` is the paper budget each of ours stands for."""),
("code", """finding = controls.reference_decomposition(obs["evidence-oracle"], n_boot=n_boot, seed=seed)
report.save_table(finding, "restore_reference_decomposition", lay.tables)
fig = controls.cost_figure(finding)
report.save_figure(fig, "restore_reference_decomposition", lay.figures)
assert (finding["irreversible_rate_low"] <= finding["irreversible_rate"] + 1e-12).all()
assert (finding["recoverable_rate"] + finding["irreversible_rate"] - (1 - finding["accuracy"])).abs().max() < 1e-9
finding[["policy", "budget", "paper_budget", "regime", "accuracy", "irreversible_rate", "irreversible_rate_low",
         "irreversible_rate_high", "recoverable_rate", "two_bin_share", "two_bin_share_low",
         "two_bin_share_high"]].round(3)"""),
("md", """## R3: the destructive control is detected

The matched-accuracy analysis (`analyses.matched_accuracy`, top-k) with the evidence-oracle: the control's
irreversible rate against each policy's at each budget, paired over questions. The control evicts gold at three
times random's rate, so the statistic must register it in every contrast — the power check the paper reports as
9 of 9 (here 3 policies × 3 budgets). Accuracy-matched policy pairs, if any, are listed too; under a perfect reader
their irreversible rates differ only by how much gold each policy destroys."""),
("code", """r3 = analyses.matched_accuracy(analyses.cell_bootstrap(obs["evidence-oracle"], n_boot, seed),
                              tolerance=match_tolerance, control=CONTROL)
report.save_table(r3, "restore_reference_r3", lay.tables)
control = r3[r3["comparison"] == "control"]
assert len(control) == len(set(policies) & set(BASELINE_POLICIES)) * len(budgets)
assert control["dissociates"].all() and (control["difference"] > 0).all(), control
r3[["budget", "comparison", "policy_a", "policy_b", "accuracy_gap", "difference", "low", "high",
    "dissociates"]].round(3)"""),
("md", """## Planted shares inside the intervals

The noisy oracle's bins are known exactly. Every distinct context has a known probability of a right answer —
`available × (1 − miss rate at its length) × (1 − confusion)` — and an observation's bins follow from its clean,
policy and restore contexts (independent draws, except that one context answers alike wherever it appears:
`controls.expected_bins` sums the joint law over the eight outcomes). The planted share of a bin in a cell is its
expected count over the expected errors across the questions.

Each repetition then draws the questions with replacement and fresh noise for every drawn copy, with the subject's own
draw (`memlife.subjects.planted_masks`), and computes the question-clustered 95% percentile interval of each bin's
share (`memlife.subjects.interval_coverage`). Why redraw the questions: whether gold was lost is a property of the
question, not a coin flip, and a clustered interval is an interval for the population the questions come from; with
the questions held fixed only the noise would vary, every interval would be conservative, and a too-wide interval
would pass. Shares that are identities (planted exactly 0 or 1, e.g. forced-gold recoverable) are asserted above,
not here, and cells that repeat another (no-evict at every budget) count once. The pooled coverage must fall in
`coverage_band` (quick: 93–97%; smoke, with 24 questions, where percentile intervals run narrow: a wider band,
still far from what a misplanted share or an unclustered interval gives)."""),
("code", """t2 = time.perf_counter()
design = controls.design(grid)
# the realised run is the design's draw at the run's seed, context by context
at = controls.read_index(design, [r.question_id for r in grid.reads], [r.prompt for r in grid.reads])
right = controls.correct_at(design, noise, seed)
said = np.array([readers["noisy-oracle"].answers[r.prompt].outcome == ref.ANSWER for r in grid.reads])
assert (right[at] == said).all() and int(records["noisy-oracle"]["correct"].sum()) == int(right[at].sum())
planted = controls.planted(design, noise, min_clusters)
coverage = controls.coverage(design, noise, reps=coverage_reps, n_boot=coverage_boot, seed=seed,
                             min_clusters=min_clusters)
report.save_table(coverage, "restore_noisy_oracle_coverage", lay.tables)
pooled = controls.pooled_coverage(coverage)
n_checked = int((coverage["distinct"] & coverage["coverage"].notna()).sum())
print(f"pooled coverage over {n_checked} distinct cell x share checks: {pooled:.3f} (band {coverage_band}; "
      f"{time.perf_counter() - t2:.0f} s)")
assert n_checked >= 10
assert coverage_band[0] <= pooled <= coverage_band[1], pooled
coverage[coverage["coverage"].notna()].round(3)"""),
("code", """print(f"notebook 25 at profile {profile}: {time.perf_counter() - t0:.0f} s")"""),
]

write("notebooks/25_restore_controls.ipynb", cells)
