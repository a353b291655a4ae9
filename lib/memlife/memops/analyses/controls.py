"""The reference subjects through the model-free memory systems, at scale (notebook 14).

Each probe's history goes once into each system; for each probe and each reader window the system
hands a `SubjectReader` its context, and every reference subject replies from that same handover
(the context does not depend on who reads it). Each reply is scored by the deterministic scorer.
From the records:

* `availability` — evidence availability: the share of probes for which a system hands its
  reader every evidence turn (the ceiling on any reader), with conversation-clustered intervals;
* `sweep` — the same availability for BM25 over turns and over sessions at every k (the top-k
  units) and every token budget of a sweep, from one BM25 ranking per probe: where each
  granularity holds the evidence, and at what cost in tokens (`availability_table` joins it to the
  run's handovers; the run's own BM25 selection is one of its points, and `sweep_mismatches`
  checks that the sweep hands over exactly what the system did);
* `coverage` — how often the clustered 95% intervals of the noisy oracle's miss and confusion
  rates cover the planted rates, over repeated simulations with fresh seeds.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from memlife import subjects as ref
from memlife.memops.systems import baselines, reading, registry
from memlife.memops.scoring import metrics
from memlife.memops.analyses import aggregate
from memlife.memops.systems.answering import select_instances
from memlife.memops.data.schema import Instance
from memlife.memops.systems.subjects import (
    MODEL_FREE_SYSTEMS,
    SubjectReader,
    any_evidence,
    confusable,
    evidence_available,
    reply,
)
from memlife.memops.systems.baselines import RETRIEVAL_TOKENS

SWEEP_K = (1, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 50, 100, 200)
SWEEP_TOKENS = (250, 500, 1000, 1500, 2000, 3000, 4000, 5000, 6000, 8000, 12000, 16000, 24000, 32000, 64000)


@dataclass
class ControlsConfig:
    seed: int = 0
    systems: list[str] = field(default_factory=lambda: list(MODEL_FREE_SYSTEMS))
    settings: list[str] = field(default_factory=lambda: list(reading.SETTINGS))
    reader_windows: list[int] = field(default_factory=lambda: [8192])
    max_instances: int | None = None       # a balanced cut of the dataset (evaluate.select_instances)
    # BM25: the token budget both granularities share, and an optional cap on their units
    # (baselines.RETRIEVAL_TOKENS; None: no cap / no budget)
    top_k_turns: int | None = None
    top_k_sessions: int | None = None
    retrieval_tokens: int | None = RETRIEVAL_TOKENS  # (`systems` is a field name here)
    top_k_memories: int = 10
    # the sweep: top-k at each k, and the budget rule at each budget, for both granularities
    sweep_k: list[int] = field(default_factory=lambda: list(SWEEP_K))
    sweep_tokens: list[int] = field(default_factory=lambda: list(SWEEP_TOKENS))
    mem0_settings: list[str] = field(default_factory=lambda: ["adjacent"])
    mem0_max_instances: int | None = None  # Mem0 embeds every message: its own, smaller cut
    noise: ref.Noise = field(default_factory=ref.Noise)


RECORD_COLUMNS = (
    "subject", "system", "variant", "setting", "reader_window", "instance_id", "topic_id", "op_type", "probe_id",
    "probe_type", "multi_hop", "confusable", "available", "any_evidence", "outcome", "context_tokens",
    "truncated_tokens", "n_retrieved", "k", "retrieval_tokens", "handed_tokens", "accuracy", "op_f1", "provenance",
    "leakage", "stale", "reflect", "malformed", "operation", "undecided", "perfect",
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
    return registry.make_system(name, reader=reader, store_root=store_root, top_k_turns=cfg.top_k_turns,
                               top_k_sessions=cfg.top_k_sessions, retrieval_tokens=cfg.retrieval_tokens,
                               top_k_memories=cfg.top_k_memories, seed=cfg.seed, mem0_infer=False)


def selection(system) -> tuple[int | None, int | None]:
    """(k, token budget) of what a system hands over: its top-k cap and its budget (None: none)."""
    return getattr(system, "top_k", None), getattr(system, "budget_tokens", None)


def run(instances: list[Instance], cfg: ControlsConfig, store_root: Path, *, progress: bool = True) -> pd.DataFrame:
    """One record per subject x system x setting x reader window x probe."""
    return _run(instances, cfg, store_root, progress=progress, swept=None)


def run_and_sweep(instances: list[Instance], cfg: ControlsConfig, store_root: Path, *,
                  progress: bool = True) -> tuple[pd.DataFrame, pd.DataFrame]:
    """`run`'s records and `sweep`'s rows in one pass: each BM25 history is ingested, and each of
    its probes ranked, once for both."""
    out: dict[str, list] = {c: [] for c in SWEEP_COLUMNS}
    records = _run(instances, cfg, store_root, progress=progress, swept=out)
    return records, _sweep_frame(out)


def _run(instances: list[Instance], cfg: ControlsConfig, store_root: Path, *, progress: bool,
         swept: dict[str, list] | None) -> pd.DataFrame:
    from memlife.base.progress import bar as progress_bar

    labels_cache: dict[tuple[str, str], metrics.Labels] = {}
    rows = []
    for name, setting, chosen in plan(instances, cfg):
        reader = SubjectReader(client=None, seed=cfg.seed, noise=cfg.noise)
        system = _make(name, reader, Path(store_root), cfg)
        bar = progress_bar(total=sum(len(i.probes) for i in chosen), desc=f"{name} / {setting}", disable=not progress)
        sweeping = swept is not None and name in BM25_SYSTEMS
        points = sweep_points(cfg, name) if sweeping else []
        try:
            for inst in chosen:
                history = reading.history_for(inst, setting)
                system.ingest(history)
                lines = _Lines.of(*system.units(history)) if sweeping else None
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
                            "n_retrieved": len(h.retrieved), "k": selection(system)[0],
                            "retrieval_tokens": selection(system)[1], "handed_tokens": h.handed_tokens,
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
                    if sweeping:  # the same ranking, every point of the sweep
                        _sweep_probe(swept, lines, system, history, inst, probe, points, reader, cfg.reader_windows,
                                     setting)
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
    for col in ("k", "retrieval_tokens"):
        df[col] = df[col].astype("Int64")
    return df


# ----------------------------------------------------------------------------- the retrieval sweep

BM25_SYSTEMS = ("bm25_turn", "bm25_session")

SWEEP_COLUMNS = (
    "system", "setting", "reader_window", "configured", "k", "retrieval_tokens", "instance_id", "topic_id",
    "op_type", "probe_id", "probe_type", "multi_hop", "available", "any_evidence", "reachable", "evidence_units",
    "evidence_tokens", "n_retrieved", "handed_tokens", "truncated_tokens",
)


def sweep_points(cfg: ControlsConfig, name: str) -> list[tuple[int | None, int | None, bool]]:
    """(k, token budget, configured) of every point the sweep measures for BM25 system `name`:
    top-k at each of `sweep_k`, the budget rule at each of `sweep_tokens`, and the run's own
    selection (added when it is neither), which is flagged `configured`."""
    conf = (cfg.top_k_turns if name == "bm25_turn" else cfg.top_k_sessions, cfg.retrieval_tokens)
    points = [(int(k), None) for k in cfg.sweep_k] + [(None, int(b)) for b in cfg.sweep_tokens]
    if conf not in points:
        points.append(conf)
    return [(k, b, (k, b) == conf) for k, b in dict.fromkeys(points)]


@dataclass
class _Lines:
    """One ingested history as a BM25 system holds it: its context lines (history order), the unit
    of each, each line's and unit's tokens (as `Reader.fit` counts them), and where evidence sits."""

    text: str               # every line, newline-joined
    starts: np.ndarray      # each line's offset in `text`
    ends: np.ndarray
    tokens: np.ndarray      # each line's tokens
    unit: np.ndarray        # each line's unit
    unit_start: np.ndarray  # each unit's first line
    unit_lines: np.ndarray  # each unit's number of lines
    unit_tokens: np.ndarray
    _holders: dict = field(default_factory=dict)

    @classmethod
    def of(cls, units: list[list[str]], unit_tokens: list[int], line_tokens: list[int]) -> "_Lines":
        lines = [line for u in units for line in u]
        lengths = np.array([len(line) for line in lines], dtype=np.int64)
        starts = np.concatenate([[0], np.cumsum(lengths + 1)[:-1]]).astype(np.int64)
        n = np.array([len(u) for u in units], dtype=np.int64)
        return cls("\n".join(lines), starts, starts + lengths, np.asarray(line_tokens, dtype=np.int64),
                   np.repeat(np.arange(len(units)), n), (np.cumsum(n) - n).astype(np.int64), n,
                   np.asarray(unit_tokens, dtype=np.int64))

    def holders(self, text: str) -> np.ndarray:
        """The lines that hold `text` verbatim. The reader's context (kept lines, newline-joined)
        holds it exactly when it keeps one of them; a text across two lines is not counted."""
        if text not in self._holders:
            found, at = [], self.text.find(text)
            while at >= 0:
                line = int(np.searchsorted(self.starts, at, side="right")) - 1
                if at + len(text) <= self.ends[line]:
                    found.append(line)
                at = self.text.find(text, at + 1)
            self._holders[text] = np.unique(np.array(found, dtype=np.int64))
        return self._holders[text]

    def cut(self, units: np.ndarray, room: int) -> tuple[int, int]:
        """What `Reader.fit` keeps of these units' lines (history order) in `room` tokens: the
        longest run of their lines that ends with the newest — as (the first line kept; a chosen
        line is kept exactly when it is at or after it), and the tokens kept."""
        units = np.sort(units)
        back = np.cumsum(self.unit_tokens[units][::-1])
        whole = int(np.searchsorted(back, room, side="right"))  # units kept whole, from the newest
        kept = int(back[whole - 1]) if whole else 0
        if whole == len(units):
            return (int(self.unit_start[units[0]]) if len(units) else 0), kept
        u = units[len(units) - 1 - whole]  # the unit the cut falls in: its newest lines that fit
        s, c = int(self.unit_start[u]), int(self.unit_lines[u])
        tail = np.cumsum(self.tokens[s:s + c][::-1])
        m = int(np.searchsorted(tail, room - kept, side="right"))
        return s + c - m, kept + (int(tail[m - 1]) if m else 0)


def _sweep_probe(out: dict[str, list], lines: _Lines, system, history: reading.History, inst: Instance, probe,
                 points, reader: SubjectReader, windows: list[int], setting: str) -> None:
    """Append the sweep's rows for one probe: one BM25 ranking, every point, every window."""
    from memlife.memops.systems.subjects import evidence_turns

    n = len(lines.unit_tokens)
    order = np.asarray(system.ranking(history, probe.question), dtype=np.int64)
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    in_rank = lines.unit_tokens[order]
    ahead = np.concatenate([[0], np.cumsum(in_rank)])
    held = [lines.holders(t) for t in evidence_turns(inst, probe)]
    held_units = [np.unique(lines.unit[h]) for h in held]
    best = [int(rank[u].min()) if len(u) else n for u in held_units]  # each evidence turn's best-ranked holder
    homes = {int(u[np.argmin(lines.unit_tokens[u])]) for u in held_units if len(u)}
    homeless = any(not len(u) for u in held_units)
    need = int(lines.unit_tokens[sorted(homes)].sum()) if homes else 0
    rooms = []
    for window in windows:
        reader.context_window = int(window)
        rooms.append((int(window), reader.room(probe.question)))
    fixed = {"system": system.name, "setting": setting, "instance_id": inst.instance_id, "topic_id": inst.topic_id,
             "op_type": inst.op_type, "probe_id": probe.probe_id, "probe_type": probe.probe_type,
             "multi_hop": bool(probe.multi_hop), "evidence_units": len(homes), "evidence_tokens": need}
    for k, budget, configured in points:
        if budget is None:  # top-k: a prefix of the ranking
            m = min(int(k), n)
            chosen = order[:m]
            handed = int(ahead[m])
            all_in, any_in = all(b < m for b in best), any(b < m for b in best)
        else:
            picked = np.asarray(baselines.select_units(in_rank, top_k=k, budget=budget), dtype=np.int64)
            m, chosen = len(picked), order[picked]
            handed = int(in_rank[picked].sum())
            mask = np.zeros(n, dtype=bool)
            mask[picked] = True
            hit = [bool(mask[rank[u]].any()) for u in held_units]
            all_in, any_in = all(hit), any(hit)
        reachable = not homeless and (k is None or len(homes) <= k) and (budget is None or need <= budget)
        for window, room in rooms:
            available, anyev, dropped = all_in, any_in, 0
            if handed > room:  # the window fit drops the oldest lines
                first, kept = lines.cut(chosen, room)
                dropped = handed - kept
                picked_unit = np.zeros(n, dtype=bool)
                picked_unit[chosen] = True
                hit = [bool((picked_unit[lines.unit[h]] & (h >= first)).any()) for h in held]
                available, anyev = all(hit), any(hit)
            row = {**fixed, "reader_window": window, "configured": configured, "k": k, "retrieval_tokens": budget,
                   "available": available, "any_evidence": anyev, "reachable": reachable, "n_retrieved": m,
                   "handed_tokens": handed, "truncated_tokens": dropped}
            for c in SWEEP_COLUMNS:
                out[c].append(row[c])


def _sweep_frame(out: dict[str, list]) -> pd.DataFrame:
    df = pd.DataFrame(out, columns=list(SWEEP_COLUMNS))
    for col in ("k", "retrieval_tokens"):
        df[col] = df[col].astype("Int64")
    return df


def sweep(instances: list[Instance], cfg: ControlsConfig, *, progress: bool = True) -> pd.DataFrame:
    """Evidence availability of a perfect reader through BM25 over turns and over sessions, at every
    point of the sweep (`sweep_points`), in every setting and reader window: one row per system x
    setting x reader window x point x probe (columns `SWEEP_COLUMNS`). `run_and_sweep` makes the
    same rows in the run's own pass.

    Model-free and exact: each probe is ranked once (the system's own `ranking`), every point
    selects from that ranking by the system's own rule (`baselines.select_units`), and each reader
    window keeps what `Reader.fit` keeps; availability is `memops.systems.subjects.evidence_available`'s
    verbatim check, made on the lines that hold each evidence turn. `reachable`: the evidence's
    own units (for each evidence turn, the smallest unit holding it) fit the point's k and
    budget — what a perfect ranker could hand over; `evidence_units` and `evidence_tokens` are
    those units and their tokens."""
    from memlife.base.progress import bar as progress_bar

    chosen = select_instances(instances, cfg.max_instances)
    out: dict[str, list] = {c: [] for c in SWEEP_COLUMNS}
    reader = SubjectReader(client=None, seed=cfg.seed, noise=cfg.noise)
    for name in (n for n in cfg.systems if n in BM25_SYSTEMS):
        system = _make(name, reader, Path("."), cfg)
        points = sweep_points(cfg, name)
        for setting in cfg.settings:
            bar = progress_bar(total=sum(len(i.probes) for i in chosen), desc=f"sweep {name} / {setting}",
                               disable=not progress)
            with bar:
                for inst in chosen:
                    history = reading.history_for(inst, setting)
                    system.ingest(history)
                    lines = _Lines.of(*system.units(history))
                    for probe in inst.probes:
                        _sweep_probe(out, lines, system, history, inst, probe, points, reader, cfg.reader_windows,
                                     setting)
                        bar.update(1)
                    system.release(history)
        system.close()
    return _sweep_frame(out)


def sweep_mismatches(records: pd.DataFrame, swept: pd.DataFrame) -> pd.DataFrame:
    """The run's BM25 handovers that the sweep's configured point does not reproduce exactly
    (availability, units, tokens handed and dropped), one row per probe and window, either side
    missing included; empty when the sweep hands over what the system did."""
    keys = ["system", "setting", "reader_window", "instance_id", "probe_id"]
    same = ["available", "any_evidence", "n_retrieved", "handed_tokens", "truncated_tokens"]
    ran = handovers(records)
    ran = ran[ran["system"].isin(swept["system"].unique())][keys + same]
    conf = swept[swept["configured"]][keys + same]
    both = ran.merge(conf, on=keys, how="outer", suffixes=("_run", "_sweep"), indicator=True)
    differ = both["_merge"] != "both"
    for c in same:
        differ |= both[f"{c}_run"].astype(float).ne(both[f"{c}_sweep"].astype(float))
    return both[differ].reset_index(drop=True)


# ----------------------------------------------------------------------------- evidence availability


def handovers(records: pd.DataFrame) -> pd.DataFrame:
    """One row per handover (system x setting x window x probe): availability does not depend on
    the subject, so the gold subject's rows stand for all. Records without subjects (the sweep's)
    are handovers already."""
    if "subject" not in records.columns:
        return records
    return records[records["subject"] == ref.label(ref.GOLD)]


def availability(records: pd.DataFrame, by: list[str], *, n_boot: int, seed: int, level: float = 0.95) -> pd.DataFrame:
    """Share of probes whose every evidence turn reached the reader, per `by` group (missing keys,
    such as a k that does not apply, form groups of their own), with a percentile interval from
    resampling evidence conversations: `stats.clustered_ratio`'s interval, computed at once for
    all groups of the same number of conversations; `any_evidence`: the share with at least one
    evidence turn. Where the records have them: `reachable` (the sweep's share of probes whose
    evidence units fit the selection), `units` (mean units handed over), `tokens` and
    `tokens_max` (tokens handed over, as the window fit counts them, before it) and `truncated`
    (mean tokens the window fit dropped)."""
    from memlife import stats

    h = handovers(records)
    gid = h.groupby(by, sort=True, dropna=False).ngroup().to_numpy()
    h = h.assign(_g=gid, _all=h["available"].astype(float), _any=h["any_evidence"].astype(float))
    agg = {"probes": ("_all", "size"), "available": ("_all", "mean"), "any_evidence": ("_any", "mean")}
    optional = {"reachable": ("reachable", "mean"), "units": ("n_retrieved", "mean"),
                "tokens": ("handed_tokens", "mean"), "tokens_max": ("handed_tokens", "max"),
                "truncated": ("truncated_tokens", "mean")}
    if "reachable" in h.columns:
        h["reachable"] = h["reachable"].astype("Float64").astype(float)
    agg.update({k: v for k, v in optional.items() if v[0] in h.columns})
    out = h.groupby("_g", sort=True).agg(**agg)
    keys = h.drop_duplicates("_g").set_index("_g").loc[out.index, by]
    # per group and conversation (sorted by conversation, as stats.cluster_sums): sums of `available`
    cl = h.groupby(["_g", "instance_id"], sort=True)["_all"].agg(["sum", "size"]).reset_index()
    q = cl.groupby("_g", sort=True).size()
    out["conversations"] = q
    out["low"] = out["high"] = np.nan
    num, den = cl["sum"].to_numpy(), cl["size"].to_numpy(dtype=float)
    first = np.concatenate([[0], np.cumsum(q.to_numpy())[:-1]])
    for n_conv in sorted(q.unique()):  # one resampling matrix per number of conversations
        groups = q.index[q.to_numpy() == n_conv]
        counts = stats.cluster_counts(int(n_conv), n_boot, seed)
        at = first[q.index.get_indexer(groups)]
        for block in range(0, len(groups), 256):  # bounded memory: n_boot x 256 replicates at a time
            rows = at[block:block + 256][:, None] + np.arange(n_conv)[None, :]
            lo, hi = stats.percentile_interval(stats.ratio_replicates(counts, num[rows].T, den[rows].T), level)
            out.loc[groups[block:block + 256], "low"] = lo
            out.loc[groups[block:block + 256], "high"] = hi
    cols = ["probes", "conversations", "available", "low", "high", "any_evidence",
            *[k for k in optional if k in out.columns]]
    out = pd.concat([keys.reset_index(drop=True), out[cols].reset_index(drop=True)], axis=1)
    for col in ("k", "retrieval_tokens"):
        if col in out.columns:
            out[col] = out[col].astype("Int64")
    return out


def availability_table(records: pd.DataFrame, swept: pd.DataFrame | None, by: list[str], *, n_boot: int, seed: int,
                       level: float = 0.95) -> pd.DataFrame:
    """Evidence availability per system x setting x reader window x selection (`k`, the top-k
    units; `retrieval_tokens`, the token budget) [x `by`]: the run's handovers for the systems the
    sweep does not cover, the sweep's for BM25, every point of it. `configured` marks the run's
    own selection (the comparison notebook 12 runs). Rows: each system in `SYSTEM_ORDER`, then
    setting and window; within them the configured selection first, then the k sweep, then the
    budget sweep."""
    ran = handovers(records).drop(columns=["subject"])  # handovers from here on, the sweep's too
    if swept is not None and len(swept):
        ran = ran[~ran["system"].isin(swept["system"].unique())]
        h = pd.concat([ran.assign(configured=True), swept], ignore_index=True)
    else:
        h = ran.assign(configured=True)
    h["reachable"] = h["reachable"].astype("boolean") if "reachable" in h.columns else pd.NA
    for col in ("k", "retrieval_tokens"):
        h[col] = h[col].astype("Int64")
    cells = ["system", "setting", "reader_window", "configured", "k", "retrieval_tokens", *by]
    out = availability(h, cells, n_boot=n_boot, seed=seed, level=level)
    order = {s: i for i, s in enumerate(SYSTEM_ORDER)}
    key = pd.DataFrame({"s": out["system"].map(lambda s: order.get(s, len(order))), "c": ~out["configured"],
                        "r": out["retrieval_tokens"].notna(), "k": out["k"].astype("Float64").fillna(-1),
                        "b": out["retrieval_tokens"].astype("Float64").fillna(-1)})
    sort = ["s", "setting", "reader_window", "c", "r", "k", "b", *by]
    return out.loc[pd.concat([key, out[["setting", "reader_window", *by]]], axis=1)
                   .sort_values(sort, kind="stable").index].reset_index(drop=True)


def subject_scores(records: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Every label's mean per subject and `by` group, with the share of perfect replies and of
    abstentions (no evidence, or a planted miss)."""
    keys = ["subject", *by]
    out = aggregate.summarize(records, keys)
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
            "miss": (missed, np.ones_like(missed),
                     float(np.mean(noise.miss_rate(g["context_tokens"].to_numpy(float))))),
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


def selection_label(name: str, k, budget) -> str:
    """A system's name with what it hands over: "bm25_turn (≤5,000 tokens)", "mem0 (top-10)"."""
    parts = ([f"top-{int(k)}"] if pd.notna(k) else []) + ([f"≤{int(budget):,} tokens"] if pd.notna(budget) else [])
    return f"{name} ({', '.join(parts)})" if parts else name


def availability_figure(table: pd.DataFrame, x: str, order: list[str]):
    """Bars of evidence availability with their clustered intervals: one panel per reader window
    (rows) and setting (columns), `x` on the axis, one bar per system — at its configured
    selection, named in the legend (the table's `configured` rows, when it has the column)."""
    import matplotlib.pyplot as plt

    if "configured" in table.columns:
        table = table[table["configured"].astype(bool)]
    windows = sorted(table["reader_window"].unique())
    settings = [s for s in reading.SETTINGS if s in set(table["setting"])]
    present = [s for s in SYSTEM_ORDER if s in set(table["system"])]
    labels = {}
    for name in present:
        first = table[table["system"] == name].iloc[0]
        labels[name] = selection_label(name, first.get("k", pd.NA), first.get("retrieval_tokens", pd.NA))
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
                ax.bar(pos, d["available"], width, color=colors(k), label=labels[name],
                       yerr=np.nan_to_num(err), capsize=2, error_kw={"lw": 0.8})
            ax.set_xticks(np.arange(len(order)), order, rotation=30, ha="right", fontsize=8)
            ax.set_ylim(0, 1.05)
            ax.set_title(f"{setting.replace('_', '-')} setting, {window:,}-token reader window", fontsize=9)
            if c == 0:
                ax.set_ylabel("probes with all evidence\nhanded to the reader")
    axes[0][-1].legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    return fig


def sweep_figure(table: pd.DataFrame):
    """The retrieval sweep (an `availability_table` without `by`): evidence availability against
    the tokens handed over, one panel per reader window (rows) and setting (columns). Per BM25
    granularity: the budget rule (line, with its clustered interval as a band), the share of
    probes whose evidence units fit the budget (dashed: a perfect ranker's ceiling), and top-k
    (markers, k written beside a few); the configured budget is the vertical line."""
    import matplotlib.pyplot as plt

    t = table[table["system"].isin(BM25_SYSTEMS)]
    windows = sorted(t["reader_window"].unique())
    settings = [s for s in reading.SETTINGS if s in set(t["setting"])]
    fig, axes = plt.subplots(len(windows), len(settings), figsize=(6 * len(settings), 3.6 * len(windows)),
                             sharey=True, squeeze=False)
    colors = {"bm25_turn": "tab:orange", "bm25_session": "tab:green"}
    configured = t.loc[t["configured"].astype(bool), "retrieval_tokens"].dropna().unique()
    for r, window in enumerate(windows):
        for c, setting in enumerate(settings):
            ax = axes[r][c]
            cell = t[(t["reader_window"] == window) & (t["setting"] == setting)]
            for name in BM25_SYSTEMS:
                d = cell[cell["system"] == name]
                b = d[d["retrieval_tokens"].notna() & d["k"].isna()].sort_values("retrieval_tokens")
                x = b["retrieval_tokens"].astype(float)
                ax.plot(x, b["available"], "-o", ms=3, color=colors[name], label=f"{name}, token budget")
                ax.fill_between(x, b["low"], b["high"], color=colors[name], alpha=0.15, lw=0)
                ax.plot(x, b["reachable"].astype(float), "--", lw=0.9, color=colors[name],
                        label=f"{name}, its evidence fits the budget")
                kk = d[d["k"].notna() & d["retrieval_tokens"].isna()].sort_values("k")
                ax.plot(kk["tokens"].clip(lower=1), kk["available"], ":x", ms=4, lw=0.8, color=colors[name],
                        label=f"{name}, top-k (at its mean tokens)")
                for _, row in kk[kk["k"].isin([1, 3, 10, 30, 100])].iterrows():
                    ax.annotate(f"k={int(row['k'])}", (max(row["tokens"], 1), row["available"]), fontsize=6,
                                color=colors[name], xytext=(2, -8), textcoords="offset points")
            for b in configured:
                ax.axvline(float(b), color="0.4", lw=0.8, ls="-.")
            ax.set_xscale("log")
            ax.set_ylim(0, 1.05)
            ax.set_xlabel("token budget (top-k: the mean tokens its k units hold)", fontsize=8)
            ax.set_title(f"{setting.replace('_', '-')} setting, {window:,}-token reader window", fontsize=9)
            if c == 0:
                ax.set_ylabel("probes with all evidence\nhanded to the reader")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=7, frameon=False)
    fig.tight_layout(rect=(0, 0.07 if len(windows) > 1 else 0.12, 1, 1))
    return fig
