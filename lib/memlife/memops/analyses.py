"""MemOps analyses over the per-probe records of notebook 12 (Section 4 of the MemOps paper).

Every function takes `records.parquet` as notebook 12 writes it (one row per probe x system x
setting, with the scorer's labels) and returns a table, so every number notebook 13 shows is
recomputed from the records:

- `method_labels`, `beside_paper`: our rows named and set beside the paper's rows of Tables 3-5.
- `setting_deltas`, `paper_setting_deltas`, `adjacent_to_long_delta`: long-context minus adjacent
  accuracy per operation type and per probe type, ours and the paper's (recomputed from its
  published Tables 4 and 5).
- `setting_comparison`: what the paper does not report — accuracy per system and setting with a
  bootstrap interval clustered by evidence conversation, and each system's adjacent ->
  long-context change as a paired contrast, Holm-corrected across systems (`memlife.stats`, the
  same code as the restore audit's).
"""
from __future__ import annotations

import pandas as pd

from .. import stats
from .. import subjects as ref
from .schema import OP_TYPES, PROBE_TYPES

# The papers' column names of Table 4 (by operation type) and Table 5 (by probe type), keyed by
# the records' op_type and probe_type values, in the paper's column order.
OPERATION_NAMES = dict(zip(OP_TYPES, ("Remember", "Forget", "Update", "Reflect", "TrajectoryOps")))
PROBE_NAMES = dict(zip(PROBE_TYPES, ("Operation Trace", "Target Binding", "State Transition",
                                     "Candidate Disambiguation", "Operation Application",
                                     "State Trajectory")))
# How the paper names the two settings in its row labels: "GPT-4o (Adjacent)".
SETTING_NAMES = {"adjacent": "Adjacent", "long_context": "Long Context"}
SETTINGS = tuple(SETTING_NAMES)
# Evidence conversations are the resampling unit: a conversation's probes share its dialogue.
CLUSTER = "instance_id"


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
    acc = records.pivot_table(index=["system", by], columns="setting", values="accuracy", aggfunc="mean")
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


def setting_comparison(records: pd.DataFrame, *, n_boot: int, seed: int,
                       alpha: float = 0.05) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Accuracy intervals and adjacent -> long-context contrasts, clustered by evidence conversation.

    intervals: one row per system x setting — accuracy with its 95% percentile interval from
      resampling conversations (`stats.clustered_ratio`), and the probes and conversations behind it.
    contrasts: one row per system run in both settings — long-context minus adjacent accuracy,
      a paired contrast (both settings resampled with the same conversation draws, so a
      conversation's difficulty cancels), its bootstrap p-value, and Holm across the systems
      (`p_holm`, `significant`); no rows when no system ran in both settings.

    The paper reports point estimates only; at a handful of conversations these intervals are
    what says how little a difference between two rows means.
    """
    clusters = sorted(records[CLUSTER].unique())
    counts = stats.cluster_counts(len(clusters), n_boot, seed)
    scored = records.assign(acc=records["accuracy"].astype(float), one=1.0)
    rows = []
    for (system, setting), g in scored.groupby(["system", "setting"], sort=True):
        iv = stats.clustered_ratio(g, CLUSTER, "acc", n_boot=n_boot, seed=seed)
        rows.append({"system": system, "reader": ref.label(g["reader"].iloc[0]), "setting": setting,
                     "accuracy": iv.estimate, "low": iv.low, "high": iv.high,
                     "probes": len(g), "conversations": g[CLUSTER].nunique()})
    intervals = pd.DataFrame(rows)
    contrasts = []
    for system, g in scored.groupby("system", sort=True):
        if not set(SETTINGS) <= set(g["setting"]):
            continue
        sums = {st: stats.cluster_sums(g[g.setting == st], CLUSTER, ["acc", "one"], clusters=clusters)[1]
                for st in SETTINGS}
        c = stats.paired_ratio_difference(counts, sums["long_context"][:, 0], sums["long_context"][:, 1],
                                          sums["adjacent"][:, 0], sums["adjacent"][:, 1])
        contrasts.append({"system": system, "long_minus_adjacent": c.estimate, "low": c.low, "high": c.high,
                          "p_value": c.p_value})
    contrasts = pd.DataFrame(contrasts)
    if len(contrasts):
        reject, p_holm = stats.holm(contrasts["p_value"].fillna(1.0).tolist(), alpha=alpha)
        contrasts["p_holm"], contrasts["significant"] = p_holm, reject
    return intervals, contrasts
