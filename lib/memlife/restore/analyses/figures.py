"""Figures of the restore audit: stacked decomposition bars, the R2 gap plot, the R3 forest plot.

Each function takes a table from `memlife.restore.analyses.paper_analyses` and returns a matplotlib Figure; the
notebooks save them with `memlife.base.artifacts.save_figure`.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from memlife.base import artifacts  # noqa: F401  (sets the headless backend and byte-stable rcParams)

# Marks a cell whose interval rests on too few questions to be drawn (analyses.MIN_CLUSTERS).
FEW_MARK = "†"
BIN_COLORS = dict(zip(("irreversible", "recoverable", "residual"), sns.color_palette("colorblind", 3)))


def _cell_label(policy, budget) -> str:
    return f"{policy} @ {int(budget):,}"


def decomposition_bars(r1: pd.DataFrame, reader: str, judge: str) -> plt.Figure:
    """Stacked irreversible / recoverable / residual shares of oracle-answerable errors, one panel
    per retrieval regime. Whiskers: the interval of the irreversible share (top of the first
    segment) and of irreversible + recoverable = 1 - residual share (top of the second)."""
    t = r1[(r1["reader"] == reader) & (r1["judge"] == judge)]
    regimes = [r for r in ("topk", "forced_gold") if r in set(t["regime"])]
    n_cells = max(1, len(t) // max(1, len(regimes)))
    fig, axes = plt.subplots(len(regimes), 1, figsize=(max(6, 0.5 * n_cells + 2), 3.0 * len(regimes)),
                             sharey=True, squeeze=False)
    for ax, regime in zip(axes[:, 0], regimes):
        g = t[t["regime"] == regime].reset_index(drop=True)
        x = np.arange(len(g))
        bottom = np.zeros(len(g))
        for b in ("irreversible", "recoverable", "residual"):
            h = g[f"{b}_share"].fillna(0).to_numpy()
            ax.bar(x, h, bottom=bottom, color=BIN_COLORS[b], label=b, width=0.75)
            bottom = bottom + h
        irr = g["irreversible_share"].to_numpy()
        ax.errorbar(x, irr, yerr=[irr - g["irreversible_share_low"], g["irreversible_share_high"] - irr],
                    fmt="none", ecolor="black", capsize=2, lw=0.8)
        both = 1 - g["residual_share"].to_numpy()
        ax.errorbar(x, both, yerr=[both - (1 - g["residual_share_high"]), (1 - g["residual_share_low"]) - both],
                    fmt="none", ecolor="dimgray", capsize=2, lw=0.8)
        # An interval left empty (too few questions, analyses.shares) is marked, not drawn.
        few = (g["n_errors"] > 0) & g["irreversible_share_low"].isna()
        for xi, n, f in zip(x, g["n_errors"], few):
            ax.text(xi, 1.02, f"{int(n)}{FEW_MARK if f else ''}", ha="center", va="bottom", fontsize=7,
                    color="dimgray" if f else "black")
        ax.set_xticks(x, [_cell_label(p, b) for p, b in zip(g["policy"], g["budget"])], fontsize=7,
                      rotation=45, ha="right")
        ax.set_title(f"{'top-k' if regime == 'topk' else 'forced-gold'} retrieval", fontsize=10)
        ax.set_ylim(0, 1.12)
        ax.set_ylabel("share of errors")
    axes[0][0].legend(loc="upper left", fontsize=7, frameon=True, bbox_to_anchor=(1.0, 1.0))
    fig.suptitle(f"Restore decomposition (numbers above bars: errors; {FEW_MARK}: too few questions "
                 f"for an interval) — reader {reader}", fontsize=10)
    fig.tight_layout()
    return fig


def regime_gap_plot(r2: pd.DataFrame, reader: str, judge: str) -> plt.Figure:
    """Recoverable-share gap (top-k minus forced-gold) per evicting cell with its interval;
    filled markers and '*' are cells whose test rejects after Holm."""
    g = r2[(r2["reader"] == reader) & (r2["judge"] == judge)].reset_index(drop=True)
    fig, ax = plt.subplots(figsize=(max(5, 0.6 * len(g)), 3.6))
    x = np.arange(len(g))
    gap = g["gap"].to_numpy(dtype=float)
    ax.axhline(0, color="gray", lw=0.8)
    ax.errorbar(x, gap, yerr=[gap - g["gap_low"], g["gap_high"] - gap], fmt="none", ecolor="black",
                capsize=3, lw=0.9)
    rej = g["holm_reject"].to_numpy(dtype=bool)
    color = sns.color_palette("colorblind")[0]
    ax.scatter(x[rej], gap[rej], color=color, zorder=3, label="Holm rejects")
    ax.scatter(x[~rej], gap[~rej], facecolors="white", edgecolors=color, zorder=3,
               label="not rejected")
    top = np.fmax(g["gap_high"].to_numpy(dtype=float), gap)
    for xi in x[rej]:
        ax.text(xi, top[xi] + 0.02, "*", ha="center", fontsize=12)
    few = g["few_questions"].to_numpy(dtype=bool) if "few_questions" in g else np.zeros(len(g), bool)
    ax.set_xticks(x, [_cell_label(p, b) + (f" {FEW_MARK}" if f else "")
                      for p, b, f in zip(g["policy"], g["budget"], few)], fontsize=7, rotation=45, ha="right")
    if few.any():
        ax.set_xlabel(f"{FEW_MARK} fewer questions than the interval needs: no interval", fontsize=7)
    ax.set_ylabel("recoverable share: top-k − forced-gold")
    ax.set_title(f"R2: {int(rej.sum())} of {len(g)} evicting cells reject after Holm", fontsize=10)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def forest_plot(r3: pd.DataFrame) -> plt.Figure:
    """R3: difference in irreversible rate (a − b) with its paired interval, one row per contrast;
    matched-accuracy pairs and the destructive-control contrasts in two colours."""
    g = r3.reset_index(drop=True)
    fig, ax = plt.subplots(figsize=(6.5, max(2.5, 0.32 * len(g) + 1)))
    y = np.arange(len(g))[::-1]
    pal = sns.color_palette("colorblind")
    colors = {"matched_pair": pal[0], "control": pal[3]}
    diff = g["difference"].to_numpy(dtype=float)
    few = g["few_questions"].to_numpy(dtype=bool) if "few_questions" in g else np.zeros(len(g), bool)
    if few.any():
        ax.scatter(diff[few], y[few], facecolors="white", edgecolors="gray", s=16, zorder=3,
                   label=f"{FEW_MARK} too few questions: no interval")
    for kind, label in (("matched_pair", "accuracy-matched pair"), ("control", "destructive control")):
        m = (g["comparison"] == kind).to_numpy() & ~few
        if m.any():
            ax.errorbar(diff[m], y[m], xerr=[diff[m] - g["low"][m], g["high"][m] - diff[m]], fmt="o",
                        color=colors[kind], capsize=2, ms=4, lw=0.9, label=label)
    ax.axvline(0, color="gray", lw=0.8)
    ax.set_yticks(y, [f"{int(b):,}: {a} − {c}" + (f" {FEW_MARK}" if f else "")
                      for b, a, c, f in zip(g["budget"], g["policy_a"], g["policy_b"], few)], fontsize=7)
    ax.set_xlabel("difference in irreversible rate (per oracle-answerable observation)")
    ax.set_title("R3: matched-accuracy contrasts", fontsize=10)
    if len(g):
        ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    return fig
