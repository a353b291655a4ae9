"""The reference subjects through the model-free memory systems, at scale (notebook 14).

Each probe's history goes once into each system; for each probe and each reader window the system
hands a `SubjectReader` its context, and every reference subject replies from that same handover
(the context does not depend on who reads it). Each reply is scored by the deterministic scorer.
From the records:

* `availability` — evidence availability: the share of probes for which a system hands its
  reader every evidence turn (the ceiling on any reader), with conversation-clustered intervals;
* `coverage` — how often the clustered 95% intervals of the noisy oracle's miss and confusion
  rates cover the planted rates, over repeated simulations with fresh seeds.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from memlife import subjects as ref

from . import metrics, systems
from .evaluate import select_instances
from .schema import Instance
from .subjects import (MODEL_FREE_SYSTEMS, SubjectReader, any_evidence, confusable, evidence_available,
                       item_key, reply)


@dataclass
class ControlsConfig:
    seed: int = 0
    systems: list[str] = field(default_factory=lambda: list(MODEL_FREE_SYSTEMS))
    settings: list[str] = field(default_factory=lambda: list(systems.SETTINGS))
    reader_windows: list[int] = field(default_factory=lambda: [8192])
    max_instances: int | None = None       # a balanced cut of the dataset (evaluate.select_instances)
    top_k_turns: int = 10
    top_k_sessions: int = 2
    top_k_memories: int = 10
    mem0_settings: list[str] = field(default_factory=lambda: ["adjacent"])
    mem0_max_instances: int | None = None  # Mem0 embeds every message: its own, smaller cut
    noise: ref.Noise = field(default_factory=ref.Noise)


RECORD_COLUMNS = (
    "subject", "system", "variant", "setting", "reader_window", "instance_id", "topic_id", "op_type", "probe_id",
    "probe_type", "multi_hop", "confusable", "available", "any_evidence", "outcome", "context_tokens",
    "truncated_tokens", "n_retrieved", "accuracy", "op_f1", "provenance", "leakage", "stale", "reflect",
    "malformed", "operation", "undecided", "perfect",
)


def plan(instances: list[Instance], cfg: ControlsConfig) -> list[tuple[str, str, list[Instance]]]:
    """(system, setting, instances) for every cell that runs, in run order."""
    chosen = select_instances(instances, cfg.max_instances)
    out = []
    for name in cfg.systems:
        if name not in MODEL_FREE_SYSTEMS:
            raise ValueError(f"{name!r} needs a model besides its reader; model-free systems: {MODEL_FREE_SYSTEMS}")
        for setting in cfg.settings:
            if name == "mem0":
                if setting not in cfg.mem0_settings:
                    continue
                out.append((name, setting, select_instances(chosen, cfg.mem0_max_instances)))
            else:
                out.append((name, setting, chosen))
    return out


def _make(name: str, reader: SubjectReader, store_root: Path, cfg: ControlsConfig):
    return systems.make_system(name, reader=reader, store_root=store_root, top_k_turns=cfg.top_k_turns,
                               top_k_sessions=cfg.top_k_sessions, top_k_memories=cfg.top_k_memories,
                               seed=cfg.seed, mem0_infer=False)


def run(instances: list[Instance], cfg: ControlsConfig, store_root: Path, *, progress: bool = True) -> pd.DataFrame:
    """One record per subject x system x setting x reader window x probe."""
    from memlife.progress import bar as progress_bar

    labels_cache: dict[tuple[str, str], metrics.Labels] = {}
    rows = []
    for name, setting, chosen in plan(instances, cfg):
        reader = SubjectReader(client=None, seed=cfg.seed, noise=cfg.noise)
        system = _make(name, reader, Path(store_root), cfg)
        bar = progress_bar(total=sum(len(i.probes) for i in chosen), desc=f"{name} / {setting}", disable=not progress)
        try:
            for inst in chosen:
                history = systems.history_for(inst, setting)
                system.ingest(history)
                for probe in inst.probes:
                    for window in cfg.reader_windows:
                        reader.context_window = int(window)
                        reader.bind(inst, probe, name, setting)
                        system.answer(history, probe.question)
                        h = reader.last
                        available = evidence_available(inst, probe, h.context)
                        base = {
                            "system": name, "variant": getattr(system, "variant", ""), "setting": setting,
                            "reader_window": int(window), "instance_id": inst.instance_id, "topic_id": inst.topic_id,
                            "op_type": inst.op_type, "probe_id": probe.probe_id, "probe_type": probe.probe_type,
                            "multi_hop": bool(probe.multi_hop), "confusable": confusable(probe),
                            "available": available, "any_evidence": any_evidence(inst, probe, h.context),
                            "context_tokens": h.context_tokens, "truncated_tokens": h.truncated_tokens,
                            "n_retrieved": len(h.retrieved),
                        }
                        for subject in ref.SUBJECTS:
                            r = reply(subject, inst, probe, h.context, h.context_tokens, system=name,
                                      setting=setting, seed=cfg.seed, noise=cfg.noise, available=available)
                            key = (probe.probe_id, r.parsed.raw)
                            if key not in labels_cache:  # replies repeat across systems: score each once
                                labels_cache[key] = metrics.score(r.parsed, inst, probe)
                            lab = labels_cache[key]
                            rows.append({"subject": ref.label(subject), **base, "outcome": r.outcome,
                                         **lab.as_record(), "perfect": lab.perfect})
                    bar.update(1)
                release = getattr(system, "release", None)
                if release is not None:
                    release(history)
        finally:
            bar.close()
            system.close()
    df = pd.DataFrame(rows, columns=list(RECORD_COLUMNS))
    for col in ("accuracy", "operation", "provenance", "leakage", "stale", "reflect"):
        df[col] = df[col].astype("boolean")
    return df


# ----------------------------------------------------------------------------- evidence availability


def handovers(records: pd.DataFrame) -> pd.DataFrame:
    """One row per handover (system x setting x window x probe): availability does not depend on
    the subject, so the gold subject's rows stand for all."""
    return records[records["subject"] == ref.label(ref.GOLD)]


def availability(records: pd.DataFrame, by: list[str], *, n_boot: int, seed: int, level: float = 0.95) -> pd.DataFrame:
    """Share of probes whose every evidence turn reached the reader, per `by` group, with a
    percentile interval from resampling evidence conversations; `any_evidence`: the share with at
    least one evidence turn."""
    from memlife import stats

    h = handovers(records).assign(_all=lambda d: d["available"].astype(float),
                                  _any=lambda d: d["any_evidence"].astype(float))
    rows = []
    for keys, g in h.groupby(by, sort=True):
        iv = stats.clustered_ratio(g, "instance_id", "_all", n_boot=n_boot, seed=seed, level=level)
        rows.append({**dict(zip(by, keys if isinstance(keys, tuple) else (keys,))),
                     "probes": len(g), "conversations": g["instance_id"].nunique(),
                     "available": iv.estimate, "low": iv.low, "high": iv.high, "any_evidence": g["_any"].mean()})
    return pd.DataFrame(rows)


def subject_scores(records: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Every label's mean per subject and `by` group, with the share of perfect replies and of
    abstentions (no evidence, or a planted miss)."""
    keys = ["subject", *by]
    out = metrics.summarize(records, keys)
    g = records.groupby(keys, sort=True)
    out["perfect"] = g["perfect"].mean().values
    out["abstained"] = g["outcome"].apply(lambda s: s.isin(["abstain", ref.MISS]).mean()).values
    return out


# ----------------------------------------------------------------------------- planted rates


def _items(records: pd.DataFrame) -> pd.DataFrame:
    """The noisy oracle's rows whose evidence was available: the items its noise acts on."""
    n = records[(records["subject"] == ref.label(ref.NOISY_ORACLE)) & records["available"]].copy()
    keys = list(zip(n["instance_id"], n["probe_id"], n["system"], n["setting"]))
    n["miss_hash"] = np.array([ref.key_hash("miss", *k) for k in keys], dtype=np.uint64)
    n["confuse_hash"] = np.array([ref.key_hash("confuse", *k) for k in keys], dtype=np.uint64)
    return n


def simulated_outcomes(records: pd.DataFrame, noise: ref.Noise, seeds) -> tuple[pd.DataFrame, np.ndarray]:
    """The noisy oracle's items and what it does with each under each seed (len(seeds) x items),
    drawn with the subject's own function (`memlife.subjects.outcomes`)."""
    items = _items(records)
    out = ref.outcomes(noise, list(seeds), items["miss_hash"].to_numpy(), items["confuse_hash"].to_numpy(),
                       items["context_tokens"].to_numpy(dtype=np.float64), items["confusable"].to_numpy(dtype=bool))
    return items, out


def coverage(records: pd.DataFrame, noise: ref.Noise, *, reps: int, n_boot: int, seed: int, level: float = 0.95,
             min_clusters: int = 10) -> pd.DataFrame:
    """Per system x setting x reader window and planted rate (miss, confusion): over `reps` fresh
    seeds, the share of repetitions whose clustered interval covers the planted rate. Cells with
    fewer than `min_clusters` conversations holding an item get no coverage (a percentile
    bootstrap over a handful of clusters is not a 95% interval). `distinct` is False for a cell
    that repeats an earlier one — same items, same context lengths, under another window — so
    that a pooled coverage counts each experiment once."""
    seeds = seed + 1 + np.arange(reps)  # fresh draws: never the run's own seed
    items, out = simulated_outcomes(records, noise, seeds)
    rows = []
    cells = ["system", "setting", "reader_window"]
    seen: set = set()
    for i, (keys, idx) in enumerate(items.groupby(cells, sort=True).indices.items()):
        g, o = items.iloc[idx], out[:, idx]
        signature = (keys[0], keys[1], tuple(sorted(zip(g["probe_id"], g["context_tokens"]))))
        distinct = signature not in seen
        seen.add(signature)
        missed, confused = o == ref.MISS, o == ref.CONFUSE
        eligible_conf = ~missed & g["confusable"].to_numpy(dtype=bool)[None, :]
        checks = {
            "miss": (missed, np.ones_like(missed), float(np.mean(noise.miss_rate(g["context_tokens"].to_numpy(float))))),
            "confusion": (confused, eligible_conf, noise.confusion),
        }
        for rate, (hits, eligible, planted) in checks.items():
            clusters = g["instance_id"].to_numpy()[eligible.any(axis=0)]
            n_clusters = len(set(clusters))
            row = {**dict(zip(cells, keys)), "rate": rate, "planted": planted, "items": len(g),
                   "clusters": n_clusters, "reps": reps, "distinct": distinct,
                   "empirical": float(hits.sum() / max(1, eligible.sum())), "coverage": np.nan}
            if n_clusters >= min_clusters:
                covered = ref.interval_coverage(hits, eligible, g["instance_id"].to_numpy(), planted, n_boot=n_boot,
                                                seed=seed + 7919 * i + (rate == "confusion"), level=level)
                row["coverage"] = float(covered.mean())
            rows.append(row)
    return pd.DataFrame(rows)


def pooled_coverage(cov: pd.DataFrame) -> float:
    """Mean coverage over the distinct cells that have one."""
    c = cov[cov["distinct"] & cov["coverage"].notna()]
    return float(c["coverage"].mean()) if len(c) else float("nan")


SYSTEM_ORDER = ("long_context", "bm25_turn", "bm25_session", "mem0")


def availability_figure(table: pd.DataFrame, x: str, order: list[str]):
    """Bars of evidence availability with their clustered intervals: one panel per reader window
    (rows) and setting (columns), `x` on the axis, one bar per system."""
    import matplotlib.pyplot as plt

    windows = sorted(table["reader_window"].unique())
    settings = [s for s in systems.SETTINGS if s in set(table["setting"])]
    present = [s for s in SYSTEM_ORDER if s in set(table["system"])]
    fig, axes = plt.subplots(len(windows), len(settings), figsize=(5.5 * len(settings), 3.2 * len(windows)),
                             sharey=True, squeeze=False)
    width = 0.8 / max(1, len(present))
    colors = plt.get_cmap("tab10")
    for r, window in enumerate(windows):
        for c, setting in enumerate(settings):
            ax = axes[r][c]
            cell = table[(table["reader_window"] == window) & (table["setting"] == setting)]
            for k, name in enumerate(present):
                d = cell[cell["system"] == name].set_index(x).reindex(order)
                pos = np.arange(len(order)) + (k - (len(present) - 1) / 2) * width
                err = np.vstack([d["available"] - d["low"], d["high"] - d["available"]])
                ax.bar(pos, d["available"], width, color=colors(k), label=name,
                       yerr=np.nan_to_num(err), capsize=2, error_kw={"lw": 0.8})
            ax.set_xticks(np.arange(len(order)), order, rotation=30, ha="right", fontsize=8)
            ax.set_ylim(0, 1.05)
            ax.set_title(f"{setting.replace('_', '-')} setting, {window:,}-token reader window", fontsize=9)
            if c == 0:
                ax.set_ylabel("probes with all evidence\nhanded to the reader")
    axes[0][-1].legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    return fig
