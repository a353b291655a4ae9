"""The power of MemOps' claims: simulated runs at the paper's rates, tested as notebook 13 tests them.

A simulated run is notebook 12's records in miniature: `topics` topics, each holding a conversation
for each of the five operation types with the paper's retention (403 of 500 topic-operation pairs,
Table 2), five probes a conversation (2,006 probes / 403 conversations), every probe answered by
each system in each setting the claims need. A probe's labels are drawn at the paper's rates for
its system, setting and operation type (`paper_model`: Table 4 by operation type for accuracy,
Table 3 for the operation label), correlated as the data are: probes of a topic share a part of
their latent draw (`topic_correlation`), and one probe asked of several systems and settings shares
another (`probe_correlation`). Neither correlation is printed in the paper: both are parameters,
and every table says so.

Each run is analysed with notebook 13's code, `paper_analyses.headline_tests` (the Holm family: a
claim holds in a run when its hypothesis is rejected with the paper's sign) and
`paper_analyses.setting_comparison` (the long-context minus adjacent contrast of Table 3, descriptive,
at `alpha`). Below `stats.MIN_BOOTSTRAP_CLUSTERS` topics those tests are the sign-flip tests the
notebooks use there, so small sizes are judged as a small run would be.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from memlife import paper_reference, power
from memlife.memops.analyses import paper_analyses
from memlife.memops.data.schema import OP_TYPES

TRACK = "memops"
UNIT = "topics"
# Table 2: 403 of the 500 topic-operation pairs kept, 2,006 probes over 403 conversations (4.98: five).
_T2 = paper_reference.MEMOPS_TABLE2
PAPER_RETENTION = _T2["Evidence conversations"] / (_T2["Unique topics"] * _T2["Operation types"])
PROBES_PER_CONVERSATION = round(_T2["Unique QA pairs"] / _T2["Evidence conversations"])
# The systems and settings the claims compare (notebook 12's names).
CELLS = (("long_context", "adjacent"), ("long_context", "long_context"),
         ("bm25_turn", "long_context"), ("bm25_session", "long_context"))
# Which paper row stands for each of our cells: the long-context reader is GPT-4.1-mini (the
# paper's retrieval reader, one of its long-context models and the paper profile's reader).
PAPER_ROWS = {("long_context", "adjacent"): "GPT-4.1-mini (Adjacent)",
              ("long_context", "long_context"): "GPT-4.1-mini (Long Context)",
              ("bm25_turn", "long_context"): "RAG (GPT-4.1-mini) (Turn-level)",
              ("bm25_session", "long_context"): "RAG (GPT-4.1-mini) (Session-level)"}
SIMULATED_LABELS = ("accuracy", "operation")


@dataclass(frozen=True)
class Model:
    """What a simulated run draws from. `rates[(system, setting, op_type)]` holds each label's rate."""

    rates: dict = field(default_factory=dict)
    retention: float = PAPER_RETENTION
    probes_per_conversation: int = PROBES_PER_CONVERSATION
    topic_correlation: float = 0.05
    probe_correlation: float = 0.30

    def assumptions(self) -> str:
        return (f"latent correlation of a topic's probes {self.topic_correlation}, of one probe across "
                f"systems and settings {self.probe_correlation} (not printed in the paper); "
                "the operation label's rate is Table 3's for every operation type")


def _row(table: pd.DataFrame, method: str) -> pd.Series:
    hit = table[table["Method"].str.lower() == method.lower()]
    if len(hit) != 1:
        raise KeyError(f"the paper's table has {len(hit)} rows named {method!r}")
    return hit.iloc[0]


def paper_model(**overrides) -> Model:
    """The paper's rates: accuracy by operation type from Table 4, the operation label (Operation
    F1 as a mean of binary labels) from Table 3, for each cell's paper row (`PAPER_ROWS`)."""
    t3, t4 = paper_reference.memops_table(3), paper_reference.memops_table(4)
    rates = {}
    for cell, method in PAPER_ROWS.items():
        r3, r4 = _row(t3, method.replace("-level", "-Level")), _row(t4, method)
        for op in OP_TYPES:
            rates[(*cell, op)] = {"accuracy": float(r4[paper_analyses.OPERATION_NAMES[op]]),
                                  "operation": float(r3["Operation F1"])}
    return Model(rates=rates, **overrides)


def simulate_records(model: Model, topics: int, rng: np.random.Generator) -> pd.DataFrame:
    """One simulated run's records, in the columns notebook 13's analyses read."""
    keep = rng.random((topics, len(OP_TYPES))) < model.retention
    t_idx, o_idx = np.nonzero(keep)
    n_conv = len(t_idx)
    per = model.probes_per_conversation
    probe_topic = np.repeat(t_idx, per)
    probe_op = np.repeat(o_idx, per)
    n_probes = n_conv * per
    topic_z = rng.standard_normal(topics)[probe_topic][:, None]
    frames = []
    for label in SIMULATED_LABELS:
        probe_z = rng.standard_normal((n_probes, 1))
        u = power.latent_uniforms(rng, (n_probes, len(CELLS)),
                                  [(model.topic_correlation, topic_z), (model.probe_correlation, probe_z)])
        rate = np.array([[model.rates[(*cell, OP_TYPES[o])][label] for cell in CELLS] for o in range(len(OP_TYPES))])
        frames.append(u < rate[probe_op])
    acc, op = frames
    rows = {
        "topic_id": np.repeat([f"t{t:03d}" for t in probe_topic], len(CELLS)),
        "conversation_id": np.repeat([f"t{t:03d}-{OP_TYPES[o]}" for t, o in zip(probe_topic, probe_op)], len(CELLS)),
        "op_type": np.repeat([OP_TYPES[o] for o in probe_op], len(CELLS)),
        "system": np.tile([c[0] for c in CELLS], n_probes),
        "setting": np.tile([c[1] for c in CELLS], n_probes),
        "reader": "",
        "accuracy": acc.ravel(),
        "operation": op.ravel(),
    }
    return pd.DataFrame(rows)


def _expected(model: Model, terms, label: str) -> float:
    """A hypothesis' value under the model: each term's label mean over its operation types (a
    topic holds each type with the same probability, so an unweighted mean)."""
    total = 0.0
    for w, system, setting, ops in terms:
        ops = OP_TYPES if ops is None else ops
        total += w * float(np.mean([model.rates[(system, setting, op)][label] for op in ops]))
    return total


def claims(model: Model) -> list[power.Claim]:
    """The claims notebook 13 tests, with the model's (the paper's) effect sizes."""
    probe = simulate_records(model, 4, np.random.default_rng(0))  # only which systems/settings exist
    out = []
    for h in paper_analyses.headline_family(probe):
        out.append(power.Claim(TRACK, h["name"], h["claim"] + " [Holm family]", _expected(model, h["terms"], h["label"]),
                               UNIT, assumed=model.assumptions(), source="Tables 3-4"))
    for system, setting in CELLS:
        if (system, "adjacent") in CELLS and (system, "long_context") in CELLS and setting == "adjacent":
            effect = _expected(model, [(1.0, system, "long_context", None), (-1.0, system, "adjacent", None)],
                               "accuracy")
            out.append(power.Claim(TRACK, f"long - adjacent accuracy: {system}",
                                   "long context lowers accuracy (Table 3) [descriptive, unadjusted]",
                                   effect, UNIT, assumed=model.assumptions(), source="Table 4"))
    return out


def analyse(records: pd.DataFrame, claims_: list[power.Claim], *, n_boot: int, seed: int,
            alpha: float = 0.05) -> dict[str, float]:
    """Per claim, 1.0 when this run's test (notebook 13's) rejects with the paper's sign, else 0.0."""
    out = {}
    effects = {c.key: c.effect for c in claims_}
    tests = paper_analyses.headline_tests(records, n_boot=n_boot, seed=seed, alpha=alpha)
    for row in tests.itertuples(index=False):
        if row.hypothesis in effects:
            out[row.hypothesis] = float(bool(row.reject) and np.sign(row.estimate) == np.sign(effects[row.hypothesis]))
    _, contrasts = paper_analyses.setting_comparison(records, n_boot=n_boot, seed=seed)
    for row in contrasts.itertuples(index=False):
        key = f"long - adjacent accuracy: {row.system}"
        if key in effects:
            out[key] = float(row.p_value < alpha and np.sign(row.long_minus_adjacent) == np.sign(effects[key]))
    return {c.key: out.get(c.key, 0.0) for c in claims_}


def run(model: Model, claims_: list[power.Claim], topics: int, rep: int, *, seed: int, n_boot: int,
        alpha: float = 0.05) -> dict[str, float]:
    """One simulated run at `topics` topics, analysed: the outcome of every claim."""
    rng = power.run_rng(seed, topics, rep)
    records = simulate_records(model, topics, rng)
    return analyse(records, claims_, n_boot=n_boot, seed=int(rng.integers(2**31)), alpha=alpha)
