"""MemOps analyses over the per-probe records of notebook 12 (Section 4 of the MemOps paper).

Every function takes `records.parquet` as notebook 12 writes it (one row per probe x system x
setting, with the scorer's labels) and returns a table, so every number notebook 13 shows is
recomputed from the records:

- `method_labels`, `beside_paper`: our rows named and set beside the paper's rows of Tables 3-5.
- `setting_deltas`, `paper_setting_deltas`, `adjacent_to_long_delta`: long-context minus adjacent
  accuracy per operation type and per probe type, ours and the paper's (recomputed from its
  published Tables 4 and 5).
- `setting_comparison`: what the paper does not report — accuracy per system and setting with
  its interval, and each system's adjacent -> long-context change as a paired contrast
  (descriptive: not a family of tests).
- `label_intervals`: every label of Tables 3-5 per row (and per cell of Tables 4 and 5) with its
  interval and the probes and topics behind it.
- `headline_tests`: the paper's headline comparisons that the configured systems allow, tested
  as one Holm family (`HEADLINE_FAMILY`).

Resampling unit: the topic. The five conversations of a topic share its kit (its entities,
values and wording: trigram Jaccard 0.227 between conversations of a topic, 0.142 across topics),
so they are not independent draws; a topic's probes move together, in every cell (`memlife.stats`,
the same code as the restore audit's). Below `stats.MIN_BOOTSTRAP_CLUSTERS` topics a cell's
interval is exact (Clopper-Pearson over its probes) and a contrast's p-value a sign-flip
randomization test over topics, whose smallest attainable value (2 / 2^topics) says how little a
handful of topics can show.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from memlife import stats
from memlife import subjects as ref
from memlife.memops.data.schema import OP_TYPES, PROBE_TYPES

# The papers' column names of Table 4 (by operation type) and Table 5 (by probe type), keyed by
# the records' op_type and probe_type values, in the paper's column order.
OPERATION_NAMES = dict(zip(OP_TYPES, ("Remember", "Forget", "Update", "Reflect", "TrajectoryOps")))
PROBE_NAMES = dict(zip(PROBE_TYPES, ("Operation Trace", "Target Binding", "State Transition",
                                     "Candidate Disambiguation", "Operation Application",
                                     "State Trajectory")))
# How the paper names the two settings in its row labels: "GPT-4o (Adjacent)".
SETTING_NAMES = {"adjacent": "Adjacent", "long_context": "Long Context"}
SETTINGS = tuple(SETTING_NAMES)
# Topics are the resampling unit: a topic's five conversations share its kit.
CLUSTER = "topic_id"
# The paper's labels (Table 3's columns, Table 4/5's accuracy), as the tables average them.
LABELS = ("accuracy", "operation", "provenance", "leakage", "stale", "reflect")


def method_labels(records: pd.DataFrame) -> list[str]:
    """Each record's row name in Tables 3-5, in the paper's style: "ours: bm25_turn (Adjacent)"
    for a model's answers; a reference subject's rows carry its label instead
    ("gold (reference): bm25_turn (Adjacent)"), so they never sit among the models' rows."""
    return [ref.row_name(f"{system} ({SETTING_NAMES[setting]})", reader)
            for system, setting, reader in zip(records["system"], records["setting"], records["reader"])]


def beside_paper(paper: pd.DataFrame, ours: pd.DataFrame) -> pd.DataFrame:
    """The paper's rows, then ours, told apart by a first column `source` ("paper"/"ours"), in
    our table's columns: a column only ours has (`labels`, `n`, the counts of replies cut off at
    the token cap and of malformed ones) is empty in the paper's rows, and a paper row keeps only
    the columns we also report."""
    ours = ours.copy()
    paper = paper.copy()
    ours.insert(0, "source", "ours")
    paper.insert(0, "source", "paper")
    return pd.concat([paper, ours], ignore_index=True)[ours.columns]


def setting_deltas(records: pd.DataFrame, by: str) -> pd.DataFrame:
    """Long-context minus adjacent accuracy per system and value of `by` (op_type, probe_type):
    columns system, `by`, delta. Only the pairs asked in both settings; no rows when no system
    ran in both."""
    scored = _labelled(records)  # the scorer's accuracy, the judge's where the scorer was undecided
    acc = scored.pivot_table(index=["system", by], columns="setting", values="accuracy", aggfunc="mean")
    acc = acc.dropna(subset=[c for c in SETTINGS if c in acc.columns])
    if not set(SETTINGS) <= set(acc.columns):
        return pd.DataFrame(columns=["system", by, "delta"])
    return (acc["long_context"] - acc["adjacent"]).rename("delta").reset_index()


def paper_setting_deltas(paper: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """The paper's long-context minus adjacent accuracy for the models it ran in both settings,
    from one of its published tables (rows "<model> (Adjacent)" and "<model> (Long Context)"):
    columns system ("paper: <model>"), category (one of `columns`), delta."""
    p = paper.set_index("Method")[columns].astype(float)
    adj_suffix, lc_suffix = f" ({SETTING_NAMES['adjacent']})", f" ({SETTING_NAMES['long_context']})"
    adj = p[p.index.str.endswith(adj_suffix)].rename(index=lambda m: m[: -len(adj_suffix)])
    lc = p[p.index.str.endswith(lc_suffix)].rename(index=lambda m: m[: -len(lc_suffix)])
    d = (lc - adj.loc[lc.index]).stack().rename("delta").reset_index()
    d.columns = ["model", "category", "delta"]
    return d.assign(system="paper: " + d["model"])[["system", "category", "delta"]]


def adjacent_to_long_delta(records: pd.DataFrame, paper4: pd.DataFrame, paper5: pd.DataFrame) -> pd.DataFrame:
    """The adjacent -> long-context change, ours beside the paper's, in one long table: columns
    axis ("operation": by operation type, Table 4; "probe": by probe type, Table 5), system,
    category (the paper's column name), delta. Per axis the paper's models come first, then our
    systems, named as in Tables 3-5 ("ours: mem0", or a reference subject's label)."""
    ours = ref.row_name("", records["reader"].iloc[0]) if len(records) else "ours: "
    parts = []
    for axis, column, names, paper in (("operation", "op_type", OPERATION_NAMES, paper4),
                                       ("probe", "probe_type", PROBE_NAMES, paper5)):
        d = setting_deltas(records, column).rename(columns={column: "category"})
        d = d.assign(category=d["category"].map(names))
        d["system"] = ours + d["system"]
        parts += [paper_setting_deltas(paper, list(names.values())).assign(axis=axis), d.assign(axis=axis)]
    return pd.concat(parts, ignore_index=True)[["axis", "system", "category", "delta"]]


def _labelled(records: pd.DataFrame) -> pd.DataFrame:
    """The records with each of LABELS as the tables average it (`aggregate.resolved`: the scorer's,
    the judge's where the scorer was undecided; None where missing) as 0/1/NaN floats."""
    from memlife.memops.analyses import aggregate

    res = aggregate.resolved(records)
    out = records.copy()
    for k in LABELS:
        out[k] = pd.to_numeric(res[k].astype("object"), errors="coerce")
    return out


def _interval_row(g: pd.DataFrame, label: str, *, n_boot: int, seed: int, level: float) -> dict:
    iv = stats.proportion_interval(g, CLUSTER, label, n_boot=n_boot, seed=seed, level=level)
    return {"estimate": iv.estimate, "low": iv.low, "high": iv.high, "n": iv.n, "topics": iv.clusters,
            "interval": iv.method}


def setting_comparison(records: pd.DataFrame, *, n_boot: int, seed: int,
                       level: float = 0.95) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Accuracy intervals and adjacent -> long-context contrasts, clustered by topic.

    intervals: one row per system x setting — accuracy with its 95% interval
      (`stats.proportion_interval`: a topic bootstrap from 20 topics, Clopper-Pearson below), the
      probes and topics behind it, and which interval it is.
    contrasts: one row per system run in both settings — long-context minus adjacent accuracy,
      a paired contrast (both settings resampled with the same topic draws, so a topic's
      difficulty cancels), with its p-value (bootstrap from 20 topics, a sign-flip test over
      topics below) and the topics behind it; no rows when no system ran in both settings.
      Descriptive: these are not the paper's headline comparisons and carry no correction; those
      are `headline_tests`.
    """
    scored = _labelled(records)
    rows = []
    for (system, setting), g in scored.groupby(["system", "setting"], sort=True):
        r = _interval_row(g, "accuracy", n_boot=n_boot, seed=seed, level=level)
        rows.append({"system": system, "reader": ref.label(g["reader"].iloc[0]), "setting": setting,
                     "accuracy": r["estimate"], "low": r["low"], "high": r["high"], "probes": r["n"],
                     "topics": r["topics"], "interval": r["interval"]})
    intervals = pd.DataFrame(rows)
    contrasts = []
    for system, g in scored.groupby("system", sort=True):
        if not set(SETTINGS) <= set(g["setting"]):
            continue
        c = _contrast(scored, [(1.0, (g["setting"] == "long_context")), (-1.0, (g["setting"] == "adjacent"))],
                      "accuracy", g.index, n_boot=n_boot, seed=seed, level=level)
        contrasts.append({"system": system, "long_minus_adjacent": c["estimate"], "low": c["low"],
                          "high": c["high"], "p_value": c["p_value"], "test": c["test"], "topics": c["topics"]})
    return intervals, pd.DataFrame(contrasts)


def _contrast(scored: pd.DataFrame, terms, label: str, within, *, n_boot: int, seed: int,
              level: float) -> dict:
    """sum_k w_k * mean(label over the rows of mask_k), paired by topic.

    `terms` are (weight, boolean mask over `scored`); `within` limits the rows. Every term's
    per-topic sums share one topic order and one count matrix. The p-value and the percentile
    interval: a topic bootstrap when the contrast rests on at least stats.MIN_BOOTSTRAP_CLUSTERS
    topics (those where every term has a probe); below, the sign-flip test over those topics' own
    contrasts and no interval (NaN).
    """
    data = scored.loc[within].copy()
    data = data[data[label].notna()]
    topics = sorted(scored[CLUSTER].unique())
    data["_one"] = 1.0
    sums = []
    for w, mask in terms:
        part = data[mask.reindex(data.index, fill_value=False)]
        _, s = stats.cluster_sums(part, CLUSTER, [label, "_one"], clusters=topics)
        sums.append((w, s[:, 0], s[:, 1]))
    counts = stats.cluster_counts(len(topics), n_boot, seed)
    c = stats.ratio_combination(counts, sums, level)
    per_topic = stats.cluster_ratio_combination(sums)
    shared = int((~np.isnan(per_topic)).sum())
    if shared >= stats.MIN_BOOTSTRAP_CLUSTERS:
        return {"estimate": c.estimate, "low": c.low, "high": c.high, "p_value": c.p_value,
                "test": "topic bootstrap", "topics": shared}
    # a percentile interval over a handful of topics is no interval: left empty
    return {"estimate": c.estimate, "low": float("nan"), "high": float("nan"),
            "p_value": stats.sign_flip_pvalue(per_topic, seed=seed), "test": "sign-flip over topics", "topics": shared}


def label_intervals(records: pd.DataFrame, by: list[str], *, n_boot: int, seed: int, level: float = 0.95,
                    labels: tuple[str, ...] = LABELS) -> pd.DataFrame:
    """Every label of `labels` per `by` group, long format: columns `by`, label, estimate, low,
    high, n (probes the label is decided on), topics, interval ("bootstrap" from
    stats.MIN_BOOTSTRAP_CLUSTERS topics, else "clopper-pearson"). Tables 3-5 say n per cell; this
    says how much each cell can tell."""
    scored = _labelled(records)
    rows = []
    for key, g in scored.groupby(by, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        for label in labels:
            rows.append({**dict(zip(by, key)), "label": label,
                         **_interval_row(g, label, n_boot=n_boot, seed=seed, level=level)})
    return pd.DataFrame(rows, columns=[*by, "label", "estimate", "low", "high", "n", "topics", "interval"])


# ----------------------------------------------------------------------------- the paper's headline comparisons

SINGLE_STEP = ("remember", "forget", "update", "reflect")
# The retrieval comparison is read where retrieval has something to find: the long history.
RETRIEVAL_SETTING = "long_context"


def headline_family(records: pd.DataFrame) -> list[dict]:
    """The paper's headline comparisons that the records' systems and settings allow, one dict
    per hypothesis: name, the paper's claim, label, and the terms (weight, system, setting,
    op types) whose weighted mean is tested against 0.

    * session vs turn retrieval (Section 4.2: session-level RAG "improving both answer accuracy
      and operation F1"): bm25_session minus bm25_turn, on accuracy and on the operation label,
      in the long-context setting (the adjacent one if retrieval ran only there);
    * TrajectoryOps vs single-step operations (Section 4.3: TrajectoryOps "consistently emerges
      as the most sensitive dimension" both from adjacent to long context and from session- to
      turn-level retrieval): the change on trajectory conversations minus the change on the
      single-step ones (remember, forget, update, reflect), for the long-context system across
      settings and for BM25 across granularities;
    * long-context vs adjacent per operation type (Table 4): the long-context system's
      long-context minus adjacent accuracy on each of the five operation types.
    """
    have = set(map(tuple, records[["system", "setting"]].drop_duplicates().values))
    ops = set(records["op_type"])
    fam = []
    rag = RETRIEVAL_SETTING if {("bm25_session", RETRIEVAL_SETTING), ("bm25_turn", RETRIEVAL_SETTING)} <= have \
        else "adjacent"
    if {("bm25_session", rag), ("bm25_turn", rag)} <= have:
        for label, what in (("accuracy", "accuracy"), ("operation", "Operation F1")):
            fam.append({"name": f"session - turn retrieval: {label}", "label": label,
                        "claim": f"session-level retrieval beats turn-level on {what} (4.2)",
                        "terms": [(1.0, "bm25_session", rag, None), (-1.0, "bm25_turn", rag, None)]})
        single = [o for o in SINGLE_STEP if o in ops]
        if "trajectory" in ops and single:
            fam.append({"name": "trajectory - single-step: session - turn", "label": "accuracy",
                        "claim": "TrajectoryOps gains most from session- over turn-level retrieval (4.3)",
                        "terms": [(1.0, "bm25_session", rag, ("trajectory",)),
                                  (-1.0, "bm25_turn", rag, ("trajectory",)),
                                  (-1.0, "bm25_session", rag, tuple(single)),
                                  (1.0, "bm25_turn", rag, tuple(single))]})
    if {("long_context", s) for s in SETTINGS} <= have:
        single = [o for o in SINGLE_STEP if o in ops]
        if "trajectory" in ops and single:
            fam.append({"name": "trajectory - single-step: long - adjacent", "label": "accuracy",
                        "claim": "TrajectoryOps loses most from adjacent to long context (4.3)",
                        "terms": [(1.0, "long_context", "long_context", ("trajectory",)),
                                  (-1.0, "long_context", "adjacent", ("trajectory",)),
                                  (-1.0, "long_context", "long_context", tuple(single)),
                                  (1.0, "long_context", "adjacent", tuple(single))]})
        for op in OP_TYPES:
            if op in ops:
                fam.append({"name": f"long - adjacent: {OPERATION_NAMES[op]}", "label": "accuracy",
                            "claim": f"long context lowers {OPERATION_NAMES[op]} accuracy (Table 4)",
                            "terms": [(1.0, "long_context", "long_context", (op,)),
                                      (-1.0, "long_context", "adjacent", (op,))]})
    return fam


HEADLINE_COLUMNS = ("hypothesis", "claim", "label", "estimate", "low", "high", "topics", "test", "p_value",
                    "p_holm", "reject", "family_size")


def headline_tests(records: pd.DataFrame, *, n_boot: int, seed: int, alpha: float = 0.05,
                   level: float = 0.95) -> pd.DataFrame:
    """The paper's headline comparisons (`headline_family`) as one Holm family.

    One row per hypothesis: the estimate (a weighted sum of label means, paired by topic), its
    percentile interval from the topic bootstrap (empty below stats.MIN_BOOTSTRAP_CLUSTERS
    topics), the topics it rests on, its two-sided p-value (`_contrast`: bootstrap from
    stats.MIN_BOOTSTRAP_CLUSTERS topics, else a sign-flip test over topics) and the Holm-adjusted
    p-value across the whole family (`p_holm`, `reject` at `alpha`). No rows when the configured
    systems allow none of them.
    """
    scored = _labelled(records)
    rows = []
    for h in headline_family(records):
        terms = []
        for w, system, setting, ops in h["terms"]:
            mask = (scored["system"] == system) & (scored["setting"] == setting)
            if ops is not None:
                mask &= scored["op_type"].isin(ops)
            terms.append((w, mask))
        c = _contrast(scored, terms, h["label"], scored.index, n_boot=n_boot, seed=seed, level=level)
        rows.append({"hypothesis": h["name"], "claim": h["claim"], "label": h["label"], **c})
    out = pd.DataFrame(rows)
    if out.empty:
        return pd.DataFrame(columns=list(HEADLINE_COLUMNS))
    reject, p_holm = stats.holm(out["p_value"].fillna(1.0).tolist(), alpha=alpha)
    out["p_holm"], out["reject"], out["family_size"] = p_holm, reject, len(out)
    return out[list(HEADLINE_COLUMNS)]
