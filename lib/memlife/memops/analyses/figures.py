"""Figures of the MemOps track: the dataset's Figures 4 and 5 (notebook 11) and the adjacent ->
long-context change (notebook 13).

Each function takes a table from `memops.data.describe` or `memops.analyses.paper_analyses` and returns a matplotlib
Figure; the notebooks save them with `memlife.base.artifacts.save_figure`. The seaborn theme is the
caller's (notebook 11 sets one), so a figure looks like the others of its notebook.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from memlife import paper_reference
from memlife.base import artifacts  # noqa: F401  (sets the headless backend and byte-stable rcParams)
from memlife.memops.analyses.paper_analyses import OPERATION_NAMES, PROBE_NAMES
from memlife.memops.data.schema import CATEGORIES


def topics_and_lengths(categories: pd.DataFrame, lengths: pd.DataFrame) -> plt.Figure:
    """Figure 4: topics per category, ours beside the paper's split scaled to our topic count
    (`describe.category_breakdown`), then the token lengths of evidence conversations and of
    long-context histories (`describe.token_lengths`), each titled with the paper's mean."""
    n_topics = categories["topics"].sum()
    per_cat = categories.groupby("category", observed=False)["topics"].sum().reindex(list(CATEGORIES)).fillna(0)
    paper_topics = sum(paper_reference.MEMOPS_CATEGORY_COUNTS.values())
    paper_scaled = [paper_reference.MEMOPS_CATEGORY_COUNTS[c] * n_topics / paper_topics for c in CATEGORIES]
    paper_adjacent = paper_reference.MEMOPS_TABLE2["Avg. approx. tokens (adjacent)"]
    paper_long = paper_reference.MEMOPS_TABLE2["Avg. approx. tokens (long-context)"]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    ax = axes[0]
    y = range(len(CATEGORIES))
    ax.barh([i + 0.2 for i in y], per_cat.values, height=0.4, label="ours", color=sns.color_palette()[0])
    ax.barh([i - 0.2 for i in y], paper_scaled, height=0.4, label="paper (scaled)", color=sns.color_palette()[7])
    ax.set_yticks(list(y), list(CATEGORIES))
    ax.invert_yaxis()
    ax.set_xlabel("topics")
    ax.legend()
    ax.set_title("Topics per category")
    sns.histplot(lengths["adjacent_tokens"], ax=axes[1], bins=20)
    axes[1].axvline(lengths["adjacent_tokens"].mean(), color="k", ls="--", lw=1)
    axes[1].set_title(f"Evidence conversation (mean {lengths['adjacent_tokens'].mean():.0f}; paper {paper_adjacent:,})")
    axes[1].set_xlabel("tokens (o200k_base)")
    sns.histplot(lengths["long_context_tokens"], ax=axes[2], bins=20, color=sns.color_palette()[2])
    axes[2].set_title(f"Long-context history (mean {lengths['long_context_tokens'].mean():,.0f}; paper {paper_long:,})")
    axes[2].set_xlabel("tokens (o200k_base)")
    fig.tight_layout()
    return fig


def composition(comp: dict[str, pd.DataFrame]) -> plt.Figure:
    """Figure 5 from `describe.composition`: (a) conversations per operation type, (b) probes per
    probe type, (c) probes equipped with each distractor or control tag."""
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    sns.barplot(data=comp["operations"], x="op_type", y="conversations", ax=axes[0], color=sns.color_palette()[0])
    axes[0].set_title("(a) operation types")
    sns.barplot(data=comp["probes"], y="probe_type", x="probes", ax=axes[1], color=sns.color_palette()[1])
    axes[1].set_title("(b) probe types")
    paper, more = "in the paper's 5(c)", "also named in Section 3.3"
    dis = comp["distractors"].assign(figure=lambda d: d["in_figure_5c"].map({True: paper, False: more}))
    sns.barplot(data=dis, y="tag", x="probes", hue="figure", dodge=False, ax=axes[2],
                palette={paper: sns.color_palette()[2], more: sns.color_palette()[7]})
    axes[2].set_title("(c) distractors and controls")
    axes[2].legend(fontsize=7)
    for ax in axes:
        ax.set_ylabel(ax.get_ylabel())
        ax.tick_params(axis="x", rotation=20)
    fig.tight_layout()
    return fig


def lexical_overlap(overlap: pd.DataFrame) -> plt.Figure:
    """Word-trigram Jaccard overlap of conversation pairs from one topic against pairs of the same
    operation type from different topics (`describe.lexical_overlap`), one histogram each."""
    fig, ax = plt.subplots(figsize=(7, 4))
    for k, (pair, colour) in enumerate((("different topics", 7), ("same topic", 0))):
        vals = overlap.loc[overlap["pair"] == pair, "jaccard"]
        if len(vals):
            sns.histplot(vals, ax=ax, bins=30, binrange=(0, max(overlap["jaccard"].max(), 0.01)), stat="density",
                         color=sns.color_palette()[colour], alpha=0.6,
                         label=f"{pair} (n={len(vals)}, median {vals.median():.3f})")
    ax.set_xlabel("word-trigram Jaccard overlap of two conversations")
    ax.set_title("Lexical diversity: how alike two conversations read")
    ax.legend()
    fig.tight_layout()
    return fig


def adjacent_to_long_delta(deltas: pd.DataFrame, seed: int) -> plt.Figure:
    """Long-context minus adjacent accuracy, one point per system (the paper's models and ours),
    by operation type (left) and by probe type (right), from `analyses.adjacent_to_long_delta`.

    seaborn draws the strip jitter from numpy's global RNG, so it is seeded here first: the same
    table gives the same bytes run after run."""
    np.random.seed(seed)
    fig, axes = plt.subplots(1, 2, figsize=(13, 5), sharey=True)
    panels = [("by operation type", "operation", list(OPERATION_NAMES.values())),
              ("by probe type", "probe", list(PROBE_NAMES.values()))]
    for ax, (title, axis, order) in zip(axes, panels):
        sns.stripplot(data=deltas[deltas["axis"] == axis], x="category", y="delta", hue="system", order=order,
                      ax=ax, dodge=False, size=7, jitter=0.15, palette="tab20")
        ax.axhline(0, color="grey", lw=0.8)
        ax.set_title(f"long-context minus adjacent accuracy, {title}")
        ax.set_xlabel("")
        ax.tick_params(axis="x", rotation=30)
        ax.get_legend().remove()
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8)
    axes[0].set_ylabel("Δ accuracy")
    fig.tight_layout()
    return fig
