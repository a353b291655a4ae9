"""The restore-counterfactual decomposition of oracle-answerable errors (paper Section 3).

Input: per-question restore records in the restore record contract (docs/design.md), one row per question x cell x arm.
A cell is policy x budget x regime x reader x judge; seed replicates of a question are pooled
within a cell, so each (question, seed) is one observation.

Per observation:
- oracle-answerable: the clean full-gold arm of the same question, reader and judge is correct;
- error: oracle-answerable and the policy arm is wrong;
- irreversible: error, the restore arm is correct, and at least one gold unit was evicted;
- recoverable: error, the restore arm is correct, and no gold unit was evicted;
- residual: error and the restore arm is still wrong.
two_bin_share = irreversible / (irreversible + recoverable), undefined when both are 0.
"""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from memlife.restore.eviction.evict import POLICIES
from memlife.restore.judging.grading import (
    AUDIT_JUDGE_PREFIX)
from memlife.restore.reading.arms import ABLATION_ARMS, ARMS
from memlife.restore.reading.read_context import REGIMES

CONTRACT_COLUMNS = (
    "question_id", "question_type", "policy", "budget", "regime", "seed", "reader", "judge",
    "arm", "correct", "n_gold", "n_gold_evicted", "context_tokens", "hypothesis", "judge_raw",
)
CELL = ("policy", "budget", "regime", "reader", "judge")
OBSERVATION_KEY = (*CELL, "question_id", "seed")
DECOMPOSITION_COLUMNS = (
    *CELL, "n_questions", "n_observations", "n_oracle_answerable", "n_errors", "irreversible", "recoverable",
    "residual", "two_bin_share", "accuracy",
)
# The per-observation indicators that every bootstrap statistic is a ratio of.
COUNT_COLUMNS = (
    "n_observations", "n_oracle_answerable", "n_errors", "irreversible", "recoverable",
    "residual", "n_correct",
)

_STRING_COLUMNS = ("question_id", "question_type", "policy", "regime", "reader", "judge", "arm")
_INT_COLUMNS = ("budget", "seed", "n_gold", "n_gold_evicted", "context_tokens")
_TRUE = {"true", "1", "t", "yes"}
_FALSE = {"false", "0", "f", "no"}


class RecordsError(ValueError):
    """Restore records that break the contract; the message names the file, rows and fields."""


def _describe(rows: pd.DataFrame, columns, limit: int = 3) -> str:
    shown = rows[list(columns)].drop_duplicates().head(limit).to_dict("records")
    return "; ".join(", ".join(f"{k}={_plain(v)!r}" for k, v in r.items()) for r in shown)


def _plain(v):
    if v is None or (isinstance(v, float) and np.isnan(v)) or v is pd.NA:
        return None
    return v.item() if hasattr(v, "item") else v


def load_records(path: str | Path) -> pd.DataFrame:
    """Read records from parquet or CSV, or every reader's file of a records directory
    (:func:`records_dir`) concatenated, and check them against the contract.

    A directory's files must hold one reader each, no reader in two files, and every reader must
    have read the same grid (question x policy x budget x seed x regime of the policy arm): a
    file left from a run with other parameters would otherwise be compared as if it were a
    second reader of the same experiment."""
    path = Path(path)
    if path.is_dir():
        return _load_records_dir(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such records file")
    if path.suffix == ".parquet":
        df = pd.read_parquet(path)
    elif path.suffix == ".csv":
        # Read everything as text: empty cells are the contract's "empty" (clean-gold rows), and a
        # hypothesis like "NA" must not turn into a missing value.
        df = pd.read_csv(path, dtype=str, keep_default_na=False)
    else:
        raise RecordsError(f"{path}: records must be .parquet or .csv")
    return normalize_records(df, source=str(path))


def _grid(rec: pd.DataFrame) -> set[tuple]:
    pol = rec[rec["arm"] == "policy"]
    return set(pol[["question_id", "policy", "budget", "seed", "regime"]].astype(str).itertuples(index=False, name=None))


def _load_records_dir(directory: Path) -> pd.DataFrame:
    files = sorted(p for p in directory.iterdir() if p.suffix in (".parquet", ".csv") and p.is_file())
    if not files:
        raise FileNotFoundError(f"{directory}: no records files (<reader>.parquet) in it")
    frames, owner, grids = [], {}, {}
    for f in files:
        rec = load_records(f)
        readers = sorted(rec["reader"].unique())
        if len(readers) != 1:
            raise RecordsError(f"{f}: a reader's records file holds {len(readers)} readers {readers}; "
                               "expected exactly one")
        reader = readers[0]
        if reader in owner:
            raise RecordsError(f"{f}: reader {reader!r} is also in {owner[reader]}; remove one of the two")
        owner[reader], grids[reader] = f, _grid(rec)
        frames.append(rec.drop(columns="_row"))
    first = next(iter(owner))
    for reader, f in owner.items():
        only = grids[reader] ^ grids[first]
        if only:
            example = dict(zip(("question_id", "policy", "budget", "seed", "regime"), sorted(only)[0]))
            raise RecordsError(
                f"{f}: reader {reader!r} read a different grid than {owner[first]} ({len(only)} policy "
                f"cell(s) in one file only, e.g. {example}): both readers must run 22_read_restore with "
                "the same profile; rerun the stale one or remove its file")
    return normalize_records(pd.concat(frames, ignore_index=True), source=str(directory))


def normalize_records(df: pd.DataFrame, source: str = "records") -> pd.DataFrame:
    """Check the contract's columns and value sets; return a copy with uniform dtypes.

    Strings become str (empty -> missing), integer fields nullable Int64, `correct` nullable
    boolean (a missing label stays missing; the decomposition refuses it where it needs it).
    """
    missing = [c for c in CONTRACT_COLUMNS if c not in df.columns]
    if missing:
        raise RecordsError(f"{source}: missing column(s) {', '.join(missing)}")
    out = df.copy()
    out["_row"] = np.arange(len(out))
    for col in _STRING_COLUMNS:
        s = out[col].astype("string").str.strip()
        out[col] = s.mask(s == "")
    for col in _INT_COLUMNS:
        s = out[col]
        if s.dtype == object or pd.api.types.is_string_dtype(s):
            s = s.astype("string").str.strip().replace("", pd.NA)
        num = pd.to_numeric(s, errors="coerce")
        bad = num.isna() & s.notna()
        if bad.any():
            raise RecordsError(
                f"{source}: field {col} is not a number in {int(bad.sum())} row(s), e.g. row "
                f"{int(out.loc[bad, '_row'].iloc[0])} value {s[bad].iloc[0]!r}"
            )
        if (num.dropna() % 1 != 0).any():
            raise RecordsError(f"{source}: field {col} must hold whole numbers")
        out[col] = num.astype("Int64")
    out["correct"] = _to_boolean(out["correct"], source, out["_row"])
    bad_arm = ~out["arm"].isin(ARMS)
    if bad_arm.any():
        raise RecordsError(
            f"{source}: field arm has unknown value(s) {sorted(out.loc[bad_arm, 'arm'].astype(str).unique())[:5]}"
            f"; expected one of {', '.join(ARMS)}"
        )
    for col in ("question_id", "reader", "judge"):
        if out[col].isna().any():
            row = int(out.loc[out[col].isna(), "_row"].iloc[0])
            raise RecordsError(f"{source}: field {col} is empty in row {row}")
    cell_rows = out["arm"] != "clean_gold"
    for col in ("policy", "budget", "regime", "seed"):
        empty = cell_rows & out[col].isna()
        if empty.any():
            rows = out[empty]
            raise RecordsError(
                f"{source}: field {col} is empty in {int(empty.sum())} {rows['arm'].iloc[0]} row(s), "
                f"e.g. row {int(rows['_row'].iloc[0])} (question_id={rows['question_id'].iloc[0]!r})"
            )
    bad_regime = cell_rows & ~out["regime"].isin(REGIMES)
    if bad_regime.any():
        raise RecordsError(
            f"{source}: field regime has unknown value(s) "
            f"{sorted(out.loc[bad_regime, 'regime'].astype(str).unique())}; expected topk or forced_gold"
        )
    return out


def _to_boolean(s: pd.Series, source: str, rows: pd.Series) -> pd.Series:
    if pd.api.types.is_bool_dtype(s):
        return s.astype("boolean")
    text = s.astype("string").str.strip().str.lower()
    out = pd.Series(pd.NA, index=s.index, dtype="boolean")
    out[text.isin(_TRUE)] = True
    out[text.isin(_FALSE)] = False
    bad = out.isna() & text.notna() & (text != "") & (text != "<na>") & (text != "nan")
    if bad.any():
        raise RecordsError(
            f"{source}: field correct must be true/false; row {int(rows[bad].iloc[0])} has {s[bad].iloc[0]!r}"
        )
    return out


def _unique_arm(rec: pd.DataFrame, arm: str, key: list[str], source: str) -> pd.DataFrame:
    rows = rec[rec["arm"] == arm]
    dup = rows.duplicated(key, keep=False)
    if dup.any():
        raise RecordsError(
            f"{source}: {int(dup.sum())} duplicate {arm} rows for the same {', '.join(key)}; "
            f"first: {_describe(rows[dup], key, 1)}"
        )
    return rows


def is_audit_judge(judge) -> bool:
    return isinstance(judge, str) and judge.startswith(AUDIT_JUDGE_PREFIX)


def observations(records: pd.DataFrame, source: str = "records") -> pd.DataFrame:
    """One row per cell x question x seed with the arms joined and the decomposition bins set.

    Raises RecordsError for a policy row without its clean-gold row, or an oracle-answerable
    error without its restore row (the restore arm is only needed where there is an error).
    Observations whose needed labels are empty (an errored judge call) are excluded with a
    warning; `attrs["n_excluded_unlabelled"]` counts them.
    """
    rec = records if "_row" in records.columns else normalize_records(records, source)
    # The audit judge graded a sample only: as a cell it would lack clean-gold and restore rows.
    rec = rec[~rec["judge"].map(is_audit_judge).astype(bool)]
    key = list(OBSERVATION_KEY)
    pol = _unique_arm(rec, "policy", key, source)
    if pol.empty:
        raise RecordsError(f"{source}: no policy rows")
    if pol["n_gold_evicted"].isna().any():
        bad = pol[pol["n_gold_evicted"].isna()]
        raise RecordsError(
            f"{source}: policy row {int(bad['_row'].iloc[0])} lacks n_gold_evicted "
            f"({_describe(bad, key, 1)})"
        )
    clean_key = ["question_id", "reader", "judge"]
    clean = _unique_arm(rec, "clean_gold", clean_key, source)
    obs = pol[key + ["question_type", "correct", "n_gold", "n_gold_evicted", "_row"]].rename(
        columns={"correct": "policy_correct"}
    )
    obs = obs.merge(
        clean[clean_key + ["correct"]].rename(columns={"correct": "clean_correct"}),
        on=clean_key, how="left", indicator=True,
    )
    orphan = obs["_merge"] == "left_only"
    if orphan.any():
        raise RecordsError(
            f"{source}: {int(orphan.sum())} policy row(s) have no clean_gold row for the same "
            f"question_id, reader, judge; missing: {_describe(obs[orphan], clean_key)}"
        )
    obs = obs.drop(columns="_merge")
    for arm in ("restore", *ABLATION_ARMS):
        rows = _unique_arm(rec, arm, key, source)[key + ["correct"]]
        obs = obs.merge(rows.rename(columns={"correct": f"{arm}_correct"}), on=key, how="left",
                        indicator=f"{arm}_present")
        obs[f"{arm}_present"] = obs[f"{arm}_present"] == "both"
        obs[f"{arm}_correct"] = obs[f"{arm}_correct"].astype("boolean")

    # A judge call that errored or did not parse leaves `correct` empty. Such an observation
    # cannot be classified; it is excluded (as the paper excludes its errored audit calls) and
    # counted, rather than guessed.
    oracle = obs["clean_correct"].fillna(False).astype(bool)
    error = oracle & ~obs["policy_correct"].fillna(True).astype(bool)
    no_restore = error & ~obs["restore_present"]
    if no_restore.any():
        raise RecordsError(
            f"{source}: {int(no_restore.sum())} oracle-answerable error(s) have no restore row; "
            f"missing: {_describe(obs[no_restore], key)}"
        )
    unlabelled = (obs["clean_correct"].isna() | obs["policy_correct"].isna()
                  | (error & obs["restore_correct"].isna()))
    if unlabelled.any():
        by_judge = obs.loc[unlabelled, "judge"].value_counts().sort_index().to_dict()
        warnings.warn(
            f"{source}: {int(unlabelled.sum())} observation(s) excluded for an empty correct "
            f"label (by judge: {by_judge})", stacklevel=2)
    obs = obs[~unlabelled].copy()
    oracle, error = oracle[~unlabelled], error[~unlabelled]
    restored = obs["restore_correct"].fillna(False).astype(bool)
    evicted = obs["n_gold_evicted"].astype(int) > 0
    obs["n_observations"] = 1
    obs["n_oracle_answerable"] = oracle.astype(int)
    obs["n_errors"] = error.astype(int)
    obs["irreversible"] = (error & restored & evicted).astype(int)
    obs["recoverable"] = (error & restored & ~evicted).astype(int)
    obs["residual"] = (error & ~restored).astype(int)
    obs["n_correct"] = obs["policy_correct"].astype(bool).astype(int)
    out = sort_cells(obs.drop(columns=[f"{a}_present" for a in ("restore", *ABLATION_ARMS)]), extra=["question_id", "seed"])
    out = out.reset_index(drop=True)
    out.attrs["n_excluded_unlabelled"] = int(unlabelled.sum())
    return out


def sort_cells(df: pd.DataFrame, extra: list[str] | None = None) -> pd.DataFrame:
    """Paper order: policies as in evict.POLICIES (others after, by name), budgets ascending,
    top-k before forced-gold, readers and judges by name."""
    order = {p: i for i, p in enumerate(POLICIES)}
    keys = {
        "policy": lambda s: s.map(lambda p: (order.get(p, len(order)), p)),
        "regime": lambda s: s.map(lambda r: REGIMES.index(r) if r in REGIMES else len(REGIMES)),
    }
    cols = [c for c in (*CELL, *(extra or [])) if c in df.columns]
    return df.sort_values(cols, key=lambda s: keys[s.name](s) if s.name in keys else s, kind="stable")


def decompose(obs: pd.DataFrame) -> pd.DataFrame:
    """One row per policy x budget x regime x reader x judge (DECOMPOSITION_COLUMNS)."""
    by = obs.groupby(list(CELL), sort=False, dropna=False)
    g = by[list(COUNT_COLUMNS)].sum()
    # the clusters every interval of the cell resamples (seed replicates of a question are one)
    g["n_questions"] = by["question_id"].nunique()
    g = g.reset_index()
    g["two_bin_share"] = g["irreversible"] / (g["irreversible"] + g["recoverable"]).where(
        lambda d: d > 0
    )
    g["accuracy"] = g["n_correct"] / g["n_observations"]
    g = sort_cells(g).reset_index(drop=True)
    for c in (*COUNT_COLUMNS, "n_questions"):
        g[c] = g[c].astype(int)
    return g[list(DECOMPOSITION_COLUMNS)]


def decompose_file(records_path: str | Path, out_path: str | Path) -> pd.DataFrame:
    """What `python -m memlife.restore decompose RECORDS --out CSV` does."""
    table = decompose(observations(load_records(records_path), source=str(records_path)))
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    # An undefined two-bin share is written as an empty field.
    table.to_csv(out_path, index=False, lineterminator="\n")
    return table
