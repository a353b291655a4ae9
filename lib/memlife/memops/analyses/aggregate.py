"""From per-probe labels to the paper's tables: scorer and judge labels resolved, means per cell.

`table3_rows` (Table 3's columns with n per cell, truncated and malformed replies counted),
`accuracy_table` (Table 4's shape), `judge_agreement` and `pooled_agreement` (percent agreement
and Cohen's kappa between the judge and the scorer, per label). Every number is recomputed from
the records (`memlife.memops.scoring.labels` writes them).
"""
from __future__ import annotations

from memlife.memops.scoring import judging, metrics

# ----------------------------------------------------------------------------- aggregation
#
# Records (notebook 12's records.parquet, `labels.scored`) carry each label as True/False/None
# (None: does not apply, or undecided) and `undecided`, the names of the labels the scorer left
# undecided. Where an LLM judge ran (`labels.judge_reply`: on every reply with an undecided label
# and on a sample of the rest), a record also carries judge_valid and judge_<label> for the six
# JUDGE_LABELS. A judge reply that did not parse (judge_valid False) has no labels: it is counted
# as invalid, never as a disagreement. The scorer's conventions hold for the judge too: None is
# "not applicable", and on a malformed reply leakage and stale do not apply.
#
# The label a table averages (`resolved`): the scorer's where it decided, else the judge's, else
# missing. The judge's labels on the sample of decided replies are not used in the means: they
# are what `judge_agreement` compares with the scorer's (agreement and Cohen's kappa).

TABLE3_COLUMNS = {
    "accuracy": "Accuracy",
    # The paper's column name; the mean of the binary operation label (`operation_label`), as
    # the paper's judge averages binary labels.
    "operation": "Operation F1",
    "provenance": "Provenance",
    "leakage": "Leakage",
    "stale": "Stale Value",
    "reflect": "Reflect Precision",
    # Not columns of the paper's Table 3 (its rows read NaN there):
    "op_f1": "Op-F1 (continuous)",  # `operation_f1`, against the same gold trace
    # the share of replies that did not parse, without which a row of malformed replies would
    # read as a row of wrong answers
    "malformed": "Malformed",
    # the share of replies with a label the scorer could not decide (before any judge)
    "undecided": "Undecided",
}
# Our rows of Tables 3-5 say whose labels they carry: "scorer", or "scorer + judge" where a judge
# labelled what the scorer left undecided.
LABELS_COLUMN = "labels"
JUDGE_TABLE3_COLUMNS = {"agreement": "Judge agreement", "kappa": "Judge kappa", "n": "n_judge_pairs"}
# Judge replies that did not parse, per row (an `n_` column, so `artifacts.save_table` writes it
# as a count).
JUDGE_INVALID = "n_judge_invalid"
AGREEMENT_COLUMNS = ("label", "judged", "invalid", "one_na", "n", "agreement", "kappa", "scorer_rate", "judge_rate")


def _frame(records):
    import pandas as pd

    return records if isinstance(records, pd.DataFrame) else pd.DataFrame(records)


def _flag(v) -> bool | None:
    import pandas as pd

    if isinstance(v, str):
        if v == metrics.UNDECIDED:
            return None
        raise ValueError(f"not a label: {v!r}")
    return None if v is None or pd.isna(v) else bool(v)


def _undecided_sets(df) -> list[frozenset[str]]:
    """Per record, the labels the scorer left undecided (none for records without the column)."""
    if "undecided" not in df.columns:
        return [frozenset()] * len(df)
    return [frozenset(x for x in str(v).split(",") if x) if isinstance(v, str) else frozenset()
            for v in df["undecided"]]


def _judged_mask(df):
    """The records an LLM judge replied to (validly or not)."""
    import pandas as pd

    if "judge_valid" not in df.columns:
        return pd.Series(False, index=df.index)
    return df["judge_valid"].notna()


def judged(records) -> bool:
    """Whether any record carries an LLM judge's reply."""
    return bool(_judged_mask(_frame(records)).any())


def scorer_binary(records):
    """The scorer's six labels (JUDGE_LABELS), one row per record, same index; None where a
    label does not apply or the scorer left it undecided. Records without an `operation` column
    (written before it existed) get it from Op-F1 (1 exactly when the label is 1)."""
    import pandas as pd

    df = _frame(records)
    out = pd.DataFrame(index=df.index, columns=list(judging.JUDGE_LABELS), dtype=object)
    for k in judging.JUDGE_LABELS:
        if k == "operation" and k not in df.columns and "op_f1" in df.columns:
            col = [None if pd.isna(v) else float(v) == 1.0 for v in df["op_f1"]]
        else:
            col = df[k] if k in df.columns else [None] * len(df)
        out[k] = [_flag(v) for v in col]
    return out


def judge_binary(records):
    """The judge's six labels, one row per record, same index: None where the judge said NA,
    where it did not reply or its reply was invalid, and for leakage and stale on a malformed
    reply (the scorer's convention)."""
    import pandas as pd

    df = _frame(records)
    ok = [_flag(v) is True for v in (df["judge_valid"] if "judge_valid" in df.columns else [None] * len(df))]
    malformed = [_flag(v) is True for v in (df["malformed"] if "malformed" in df.columns else [None] * len(df))]
    out = pd.DataFrame(index=df.index, columns=list(judging.JUDGE_LABELS), dtype=object)
    for k in judging.JUDGE_LABELS:
        col = df[f"judge_{k}"] if f"judge_{k}" in df.columns else [None] * len(df)
        out[k] = [None if not good or (bad and k in ("leakage", "stale")) else _flag(v)
                  for v, good, bad in zip(col, ok, malformed)]
    return out


def resolved(records):
    """The labels the tables average, one row per record, same index: the scorer's where it
    decided; where it left a label undecided, the judge's (None where no judge labelled it)."""
    df = _frame(records)
    out = scorer_binary(df)
    if not judged(df):
        return out
    judge = judge_binary(df)
    for (idx, und) in zip(df.index, _undecided_sets(df)):
        for k in und & set(judging.JUDGE_LABELS):
            out.at[idx, k] = judge.at[idx, k]
    return out


def summarize(records, by: list[str]):
    """Every label's mean over the probes where it applies and is decided, grouped by `by`.

    Columns: the six labels (JUDGE_LABELS; where a judge ran, the scorer's undecided labels are
    the judge's: `resolved`), op_f1 (the continuous Op-F1), malformed (share of all replies),
    undecided (share of replies with a label the scorer left undecided), n (replies) and
    n_<label> (the replies each label's mean is over). None (not applicable, undecided and not
    judged, or leakage/stale of a malformed reply) is left out of a mean, so the leakage and
    stale rates are over the well-formed replies they apply to. Records without a column
    (malformed, op_f1, undecided) get none in the summary.
    """
    df = _frame(records)
    labels = resolved(df)
    frame = df[by].copy()
    cols = []
    for k in TABLE3_COLUMNS:
        if k in judging.JUDGE_LABELS:
            frame[k] = labels[k]
        elif k == "undecided":
            if k not in df.columns:
                continue
            frame[k] = [bool(u) for u in _undecided_sets(df)]
        elif k in df.columns:
            frame[k] = df[k]
        else:
            continue
        cols.append(k)
    out = _means(frame, by, cols)
    counts = frame.groupby(by, sort=True)[list(judging.JUDGE_LABELS)].count().reset_index(drop=True)
    for k in judging.JUDGE_LABELS:
        out[f"n_{k}"] = counts[k].astype(int).values
    return out


def _means(df, by: list[str], cols: list[str]):
    """Mean of each column of `cols` per `by` group over its non-missing values, and the group's size `n`."""
    import pandas as pd

    num = df[by + cols].copy()
    for c in cols:
        num[c] = pd.to_numeric(num[c].astype("object").where(num[c].notna()), errors="coerce")
    out = num.groupby(by, sort=True)[cols].mean().reset_index()
    out["n"] = num.groupby(by, sort=True).size().values
    return out


# Our rows of Table 3 count the replies that failed before any label could be read, two ways
# (`artifacts.save_table` writes `n_` columns as counts): cut off at the token cap, and ended on their
# own without parsing — the cap's doing and the model's are not one number.
TRUNCATED_COUNT = "n_truncated"
MALFORMED_COUNT = "n_malformed"


def reply_failures(records, by: list[str]):
    """Per `by` group: TRUNCATED_COUNT, the replies that hit the token cap (finish_reason
    "length"), and MALFORMED_COUNT, those that did not parse and were not cut off. Records
    without a `truncated` column count none as truncated."""
    import pandas as pd

    df = _frame(records)
    trunc = [_flag(v) is True for v in (df["truncated"] if "truncated" in df.columns else [None] * len(df))]
    bad = [_flag(v) is True for v in (df["malformed"] if "malformed" in df.columns else [None] * len(df))]
    frame = df[by].copy()
    frame[TRUNCATED_COUNT] = trunc
    frame[MALFORMED_COUNT] = [b and not t for b, t in zip(bad, trunc)]
    out = frame.groupby(by, sort=True)[[TRUNCATED_COUNT, MALFORMED_COUNT]].sum().astype(int).reset_index()
    return out if len(out) else pd.DataFrame(columns=[*by, TRUNCATED_COUNT, MALFORMED_COUNT])


def table3_rows(records, by: list[str]):
    """Our rows of Table 3: `summarize(records, by)` with TABLE3_COLUMNS names, n, and n_<label>
    for the replies behind each label's mean.

    A judge ran: the `labels` column says "scorer + judge" (the judge labelled what the scorer
    left undecided), and each row gets the judge's agreement with the scorer on the decided
    labels it also saw (`Judge agreement`, `Judge kappa`, pooled over the six labels, over
    n_judge_pairs label pairs) and JUDGE_INVALID, its replies that did not parse.

    Each row also counts the replies that failed before any label could be read
    (`reply_failures`): TRUNCATED_COUNT and MALFORMED_COUNT, in place of a malformed share.
    """
    import pandas as pd

    df = _frame(records)
    failures = reply_failures(df, by)
    out = summarize(df, by).rename(columns=TABLE3_COLUMNS)
    out = out.drop(columns=[TABLE3_COLUMNS["malformed"]], errors="ignore").merge(failures, on=by, how="left")
    if not judged(df):
        return out
    out.insert(len(by), LABELS_COLUMN, "scorer + judge")
    rows = []
    for key, g in df.groupby(by, sort=True):
        pooled = pooled_agreement(g)
        rows.append({**dict(zip(by, key if isinstance(key, tuple) else (key,))), **pooled,
                     JUDGE_INVALID: int((_judged_mask(g) & g["judge_valid"].map(lambda v: _flag(v) is False)).sum())})
    agree = pd.DataFrame(rows).rename(columns=JUDGE_TABLE3_COLUMNS)
    return out.merge(agree, on=by, how="left")


def pooled_agreement(records) -> dict:
    """The judge's agreement with the scorer over every (record, label) pair both decided:
    {"n", "agreement", "kappa"} (`stats.agreement`; NaN where there is no pair)."""
    from memlife import stats

    df = _frame(records)
    df = df[_judged_mask(df)]
    if df.empty:
        return {"n": 0, "agreement": float("nan"), "kappa": float("nan")}
    a, b = scorer_binary(df), judge_binary(df)
    xs = [a.at[i, k] for i in df.index for k in judging.JUDGE_LABELS]
    ys = [b.at[i, k] for i in df.index for k in judging.JUDGE_LABELS]
    ag = stats.agreement(xs, ys)
    return {"n": ag.n, "agreement": ag.percent_agreement, "kappa": ag.cohen_kappa}


def accuracy_table(records, column: str, names: dict, index: str = "Method"):
    """Accuracy by `column` (op_type: Table 4; probe_type: Table 5), one row per `index` value,
    one column per `names` value in its order (`names` maps the records' values to the table's),
    then `n_<name>` per column (the replies behind the cell) and `Undecided` (the share of the
    row's replies whose accuracy the scorer left undecided).

    Accuracy is `resolved`: where a judge ran, it labels what the scorer left undecided, and the
    `labels` column says "scorer + judge".
    """
    import pandas as pd

    df = _frame(records)
    frame = df[[index, column]].copy()
    frame["accuracy"] = pd.to_numeric(resolved(df)["accuracy"].astype("object"), errors="coerce")
    acc = frame.pivot_table(index=index, columns=column, values="accuracy", aggfunc="mean", dropna=False)
    cnt = frame.pivot_table(index=index, columns=column, values="accuracy", aggfunc="count", dropna=False)
    acc = acc.rename(columns=names).reindex(columns=list(names.values()))
    cnt = cnt.rename(columns=names).reindex(columns=list(names.values())).fillna(0).astype(int)
    cnt.columns = [f"n_{c}" for c in cnt.columns]
    ours = pd.concat([acc, cnt], axis=1)
    ours.columns.name = None
    ours = ours.reset_index()
    if "undecided" in df.columns:
        und = pd.Series(["accuracy" in u for u in _undecided_sets(df)], index=df.index, dtype=float)
        ours["Undecided"] = ours[index].map(und.groupby(df[index]).mean())
    if judged(df):
        ours.insert(1, LABELS_COLUMN, "scorer + judge")
    return ours


def judge_agreement(records, by: list[str] | None = None):
    """Judge-scorer agreement per label (rows: `by` groups x JUDGE_LABELS), over the records a
    judge replied to.

    judged       records the judge replied to
    invalid      of those, replies that did not parse: counted here, never as disagreements
    one_na       valid replies where exactly one of judge and scorer calls the label not
                 applicable (or the scorer left it undecided)
    n, agreement, kappa   `stats.agreement` (percent and Cohen's kappa) over the items both label
                 (the scorer's decided labels: undecided ones have nothing to agree on)
    scorer_rate, judge_rate   the share of those items each labels 1
    Empty, with these columns, when no judge ran.
    """
    import pandas as pd

    from memlife import stats

    by = list(by or [])
    df = _frame(records)
    df = df[_judged_mask(df)]
    cols = [*by, *AGREEMENT_COLUMNS]
    if df.empty:
        return pd.DataFrame(columns=cols)
    scorer, judge = scorer_binary(df), judge_binary(df)
    valid = pd.Series([_flag(v) is True for v in df["judge_valid"]], index=df.index)
    groups = df.groupby(by, sort=True).groups.items() if by else [((), df.index)]
    rows = []
    for key, idx in groups:
        key = key if isinstance(key, tuple) else (key,)
        ok = idx[valid[idx].to_numpy()]
        for label in judging.JUDGE_LABELS:
            a, b = scorer.loc[ok, label].tolist(), judge.loc[ok, label].tolist()
            paired = [(x, y) for x, y in zip(a, b) if x is not None and y is not None]
            ag = stats.agreement(a, b)
            rows.append({**dict(zip(by, key)), "label": label, "judged": len(idx), "invalid": len(idx) - len(ok),
                         "one_na": sum((x is None) != (y is None) for x, y in zip(a, b)),
                         "n": ag.n, "agreement": ag.percent_agreement, "kappa": ag.cohen_kappa,
                         "scorer_rate": sum(x for x, _ in paired) / len(paired) if paired else float("nan"),
                         "judge_rate": sum(y for _, y in paired) / len(paired) if paired else float("nan")})
    return pd.DataFrame(rows, columns=cols)
