"""Writes notebooks/14_memops_controls.ipynb (run from the repository root: python tools/notebooks/make_14_memops_controls.py)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from nbwrite import write  # noqa: E402

cells = [
("md", """# 14 · MemOps reference subjects: checking the instrument, and evidence availability

A benchmark is an instrument, and an instrument should be checked against something whose reading is known. This
notebook runs three **reference subjects** — model-free readers whose right answer is known (DESIGN.md, "Reference
subjects"; `memlife.subjects`, `memlife.memops.subjects`) — through every memory system that needs no model, on
MemOps at the paper's full scale (the paper profile's 100 topics / 403 conversations / ~2,000 probes, built offline by
the template realizer), in both settings:

| subject | replies with |
| --- | --- |
| `gold (reference)` | the probe's gold response: expected answer, gold operations, provenance quotes |
| `evidence-oracle (reference)` | the gold response exactly when every user turn the probe's provenance and reasoning chain cite is in the context its memory system handed the reader; else an abstention that asserts nothing |
| `noisy-oracle (reference)` | the evidence-oracle with planted, seeded errors: a *miss* (abstention) with probability `min(miss_cap, miss_base + miss_slope_per_1k × context k-tokens)`, and on a probe with a listed distractor a *confusion* (answering a forbidden value) with probability `confusion` |

A subject stands exactly where a model reader stands: the memory system builds its context and calls the reader,
whose window fit (`Reader.context`) decides what survives; `SubjectReader` then replies from that text instead of
calling a model. So what the evidence-oracle sees is what a model with the same window would see.

What this checks, as plain `assert`s (a broken identity fails nbval and `make test`):

1. `gold` scores 1.0 on every metric, through every system, in every setting — the scorer and the pipeline agree with
   the gold data;
2. the evidence-oracle is perfect exactly where its evidence was available and abstains everywhere else;
3. the noisy oracle's conversation-clustered 95% intervals cover the planted rates at the nominal rate over
   repeated simulations.

And what it measures, as a finding: **evidence availability** — the share of probes for which a memory system hands
its reader *all* the evidence — by system × operation type × probe type × setting × reader window. It is the ceiling
on any reader's accuracy through that system, measured here at the paper's scale in minutes and without a model."""),
("params", """profile = "smoke"
seed = 0
n_topics = 2
max_conversations = None
longctx_tokens = 12000
max_instances = None
systems = ["long_context", "bm25_turn", "bm25_session", "mem0"]
settings = ["adjacent", "long_context"]
reader_windows = [8192, 128000]
top_k_turns = 10
top_k_sessions = 2
top_k_memories = 10
mem0_settings = ["adjacent"]
mem0_max_instances = 2
miss_base = 0.05
miss_slope_per_1k = 0.005
miss_cap = 0.5
confusion = 0.1
n_boot = 500
coverage_reps = 100
coverage_boot = 500
coverage_band = [0.8, 0.99]
min_clusters = 8"""),
("md", """**What runs, and what does not.**

* *Data.* The dataset is built here with notebook 10's pipeline — template realizer, deterministic gates, long-context
  embedding — from this notebook's own `n_topics`, `max_conversations` and `longctx_tokens` (quick and paper: the paper
  profile's 100 / 403 / 60,000), under `data/<profile>/memops_controls/`, and reused while its parameters and hash
  match. The smoke profile cuts it to two topics (10 conversations) with 12k-token histories, so that the 8k window
  still has something to cut.
* *Systems.* `long_context`, `bm25_turn`, `bm25_session` in both settings, on every conversation. `mem0` stores raw
  messages with its local MiniLM embedder and Qdrant (`infer=False`, as notebook 12 runs it on the embedded model):
  only in `mem0_settings`, on a balanced cut of `mem0_max_instances` conversations (quick: 40, about two
  minutes of the notebook's time; paper: all 403). Mem0 embeds and
  writes each message on its own; an adjacent history (24 messages) ingests in about 0.35 s on two cores, but ingesting
  260 messages of a long-context history took 34 s, so one 60k-token history (~3,200 messages) would take about seven
  minutes and the 403 of them days: Mem0 in the long-context setting is not run.
* *Not run:* MemOS (its extraction is an LLM), Mem0 with LLM extraction, and Temp-LoRA (it answers from trained
  weights and hands no context over) — each needs a model besides the reader, and a reference subject has none.
* *Reader windows.* The same systems are read through two windows: 8,192 tokens (the embedded SmolLM2 that every
  offline run uses) and 128,000 (the paper's API readers, `Reader.window()` for a non-embedded client). Retrieval
  does not depend on the window; the window decides only what of the retrieved text the reader keeps.
* *Noise draws* are keyed by (seed, conversation, probe, system, setting): the same item draws the same whatever else
  is in the run, and under both windows (common random numbers)."""),
("code", """import json
import logging
import time

import pandas as pd
import transformers

# Mem0 opens one store per history: its notices about optional extras and the embedder's loading
# bar would repeat once per history
logging.getLogger("mem0").setLevel(logging.ERROR)
transformers.utils.logging.disable_progress_bar()

from memlife import paths, report
from memlife import subjects as ref
from memlife.memops import controls
from memlife.memops.build import BuildParams, load_or_build

lay = paths.layout(profile)
t0 = time.perf_counter()
params = BuildParams(profile=profile, seed=seed, n_topics=n_topics, max_conversations=max_conversations,
                     longctx_tokens=longctx_tokens, realizer="template", verifier="off")
data_dir = lay.data / "memops_controls"
instances = load_or_build(params, data_dir, progress=False)
# Mem0 stores are reused across runs: keyed by the dataset's hash, a rebuilt dataset gets fresh ones
dataset_sha = json.loads((data_dir / "manifest.json").read_text())["sha256"]
out_dir = lay.run / "memops_controls"
out_dir.mkdir(parents=True, exist_ok=True)
print(f"{len(instances)} conversations, {sum(len(i.probes) for i in instances)} probes, "
      f"{len({i.topic_id for i in instances})} topics ({time.perf_counter() - t0:.0f} s)")
noise = ref.Noise(miss_base=miss_base, miss_slope_per_1k=miss_slope_per_1k, miss_cap=miss_cap, confusion=confusion)
cfg = controls.ControlsConfig(seed=seed, systems=systems, settings=settings, reader_windows=reader_windows,
                              max_instances=max_instances, top_k_turns=top_k_turns, top_k_sessions=top_k_sessions,
                              top_k_memories=top_k_memories, mem0_settings=mem0_settings,
                              mem0_max_instances=mem0_max_instances, noise=noise)
pd.DataFrame([{"system": s, "setting": st, "conversations": len(c), "probes": sum(len(i.probes) for i in c)}
              for s, st, c in controls.plan(instances, cfg)])"""),
("md", """## The run

Each history goes into each system once; for each probe and each reader window the system hands the subject reader
its context, and all three subjects reply from that one handover. Every reply is the JSON a model would send, parsed
by `parse_response` and scored by the deterministic scorer (a reply repeated across systems is scored once)."""),
("code", """t1 = time.perf_counter()
records = controls.run(instances, cfg, out_dir / "stores" / dataset_sha[:12])
records.to_parquet(out_dir / "records.parquet", index=False)
print(f"{len(records)} records in {time.perf_counter() - t1:.0f} s ->", out_dir / "records.parquet")"""),
("md", """## The identities

Means of every label per subject, system, setting and window (leakage and stale value are failure rates; `perfect` is
the share of replies with every applicable label at its best; `abstained` the share of abstentions, for want of
evidence or by a planted miss)."""),
("code", """scores = controls.subject_scores(records, ["system", "setting", "reader_window"])
report.save_table(scores, "memops_reference_subjects", lay.tables)

gold = records[records["subject"] == ref.label("gold")]
oracle = records[records["subject"] == ref.label("evidence-oracle")]
noisy = records[records["subject"] == ref.label("noisy-oracle")]
# 1. gold is perfect on every metric, everywhere
assert len(gold) and gold["perfect"].all() and not gold["malformed"].any()
assert (scores.loc[scores["subject"] == ref.label("gold"), ["accuracy", "op_f1", "provenance"]] == 1.0).all().all()
# 2. the evidence-oracle is perfect exactly where its evidence was handed over, and abstains elsewhere
assert (oracle["perfect"] == oracle["available"]).all()
assert (oracle.loc[~oracle["available"], "outcome"] == "abstain").all()
assert not oracle.loc[~oracle["available"], "accuracy"].any() and not oracle["malformed"].any()
assert oracle.loc[~oracle["available"], "leakage"].ne(True).all() and oracle.loc[~oracle["available"], "stale"].ne(True).all()
# the noisy oracle: right when it answers, wrong when it misses or confuses
assert noisy.loc[noisy["outcome"] == ref.ANSWER, "perfect"].all()
assert not noisy.loc[noisy["outcome"].isin([ref.MISS, ref.CONFUSE]), "accuracy"].any()
scores[scores["subject"] != ref.label("gold")].round(3)"""),
("md", """## Finding: evidence availability

The share of probes for which each memory system hands its reader **every** evidence turn — the ceiling on any
reader's accuracy through that system (the evidence-oracle's accuracy) — with a 95% interval from resampling evidence
conversations (`memlife.stats`); `any_evidence` is the looser share with at least one evidence turn. Mechanisms to
read the numbers by:

* the long-context system hands over everything the window holds: all of it when the history fits, and in the
  long-context setting with an 8k window only the last few thousand tokens, where a probe's earlier segments never are;
* BM25 over sessions returns the top-2 sessions, and most probes cite turns in all three segments, which sit in three
  different sessions in both settings: "all the evidence" is out of its reach by construction;
* BM25 over turns returns ten turns; a probe citing more evidence turns than the query words reach loses some."""),
("code", """cells = ["system", "setting", "reader_window"]
overall = controls.availability(records, cells, n_boot=n_boot, seed=seed)
by_op = controls.availability(records, cells + ["op_type"], n_boot=n_boot, seed=seed)
by_probe = controls.availability(records, cells + ["probe_type"], n_boot=n_boot, seed=seed)
full = controls.availability(records, cells + ["op_type", "probe_type"], n_boot=n_boot, seed=seed)
report.save_table(overall, "memops_evidence_availability_overall", lay.tables)
report.save_table(full, "memops_evidence_availability", lay.tables)
assert (overall["low"] <= overall["available"] + 1e-12).all() and (overall["available"] <= overall["high"] + 1e-12).all()
assert (full["available"] <= full["any_evidence"]).all()
# the evidence-oracle's accuracy is the availability, cell by cell
acc = oracle.groupby(cells, sort=True)["accuracy"].mean().reset_index()
assert (acc["accuracy"].to_numpy() == overall["available"].to_numpy()).all()
overall.round(3)"""),
("code", """from memlife.memops.evaluate import OP_ORDER
from memlife.memops.schema import PROBE_TYPES

fig = controls.availability_figure(by_op, "op_type", list(OP_ORDER))
report.save_figure(fig, "memops_evidence_availability_ops", lay.figures)
fig2 = controls.availability_figure(by_probe, "probe_type", list(PROBE_TYPES))
report.save_figure(fig2, "memops_evidence_availability_probes", lay.figures)"""),
("code", """# the full cross: system x setting x window x operation type x probe type
full.round(3)"""),
("md", """## Planted rates inside the intervals

The noisy oracle's two mechanisms act on the probes whose evidence was available. For each system × setting × window
cell with at least `min_clusters` conversations, the run is simulated again `coverage_reps` times with fresh seeds —
with the subject's own draw (`memlife.subjects.outcomes`) — and each time the miss rate and the confusion rate get a
conversation-clustered 95% percentile interval. The planted miss rate of a cell is the mean of
`min(miss_cap, miss_base + miss_slope_per_1k × k-tokens)` over its items (each at its own context length); the
planted confusion rate is `confusion`. Intervals that are right cover the planted rates in about 95% of repetitions;
the assertion below requires the pooled coverage over the distinct cells to fall in `coverage_band` (quick: 93–97%
over 1,000 repetitions; smoke, with ten conversations, where percentile intervals run narrow: a wider band, still far
from the few percent a broken interval or a misplanted rate gives)."""),
("code", """coverage = controls.coverage(records, noise, reps=coverage_reps, n_boot=coverage_boot, seed=seed,
                             min_clusters=min_clusters)
report.save_table(coverage, "memops_noisy_oracle_coverage", lay.tables)
pooled = controls.pooled_coverage(coverage)
print(f"pooled coverage over {int((coverage['distinct'] & coverage['coverage'].notna()).sum())} distinct cells x rates: "
      f"{pooled:.3f} (band {coverage_band})")
# the realised run is the simulation at the run's seed
items, sim = controls.simulated_outcomes(records, noise, [seed])
assert list(items["outcome"]) == list(sim[0])
assert coverage_band[0] <= pooled <= coverage_band[1], pooled
coverage.round(3)"""),
("code", """print(f"notebook 14 at profile {profile}: {time.perf_counter() - t0:.0f} s")"""),
]

write("notebooks/14_memops_controls.ipynb", cells)
