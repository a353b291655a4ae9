"""Eviction and retrieval time over the whole restore grid at paper scale, and reader-call dedup.

Reconstructs LongMemEval-S offline from the oracle file (`memlife.reconstruct`; default: all
470 questions at ~102k tokens, ~400 turns each), then runs every policy × budget (the paper's 8k/30k/80k as fractions of the history) × seed
(3; seed-independent policies once), ranks the retained units with BM25 for each cell, and
assembles the top-k, forced-gold and restore contexts (k=60, 2,000-token cap) exactly as
notebook 22 does. Prints wall time per stage and policy, and the number of distinct reader
prompts against the naive count (identical contexts across cells are read once).

No model is called: the LLM-importance policy runs on stand-in scores (a hash of the unit
text, 1–10), because this measures the store and the retriever, not the scorer.

    PYTHONPATH=lib python bench/bench_restore_grid.py [--questions 470] [--history-tokens 102000]
"""
from __future__ import annotations

import argparse
import hashlib
import time
from collections import defaultdict

from memlife import longmem, retrieve
from memlife.restore.data import dataset, units
from memlife.restore.eviction import evict
from memlife.restore.reading import arms


def stand_in_importance(texts) -> dict[str, float]:
    return {t: float(hashlib.sha256(t.encode()).digest()[0] % 10 + 1) for t in set(texts)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--questions", type=int, default=470)
    ap.add_argument("--history-tokens", type=int, default=102_000, help="history length (LongMemEval-S: ~102k)")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--k", type=int, default=60)
    ap.add_argument("--restore-cap", type=int, default=2000)
    ap.add_argument("--bm25-questions", type=int, default=47, help="questions whose cells time BM25 both ways")
    args = ap.parse_args()

    t0 = time.perf_counter()
    records = dataset.build_records("reconstructed", n_questions=args.questions,
                                    history_tokens=args.history_tokens, seed=0)
    qs = [longmem.to_question(r) for r in records]
    t_build = time.perf_counter() - t0
    t0 = time.perf_counter()
    hist = {q.question_id: units.units_of(q) for q in qs}
    t_units = time.perf_counter() - t0
    n_turns = [len(v) for v in hist.values()]
    budgets = arms.scaled_budgets(args.history_tokens)
    seeds = list(range(args.seeds))
    importance = stand_in_importance(u.text for us in hist.values() for u in us)
    print(f"dataset: {len(qs)} questions, {sum(n_turns) / len(n_turns):.0f} turns and "
          f"{sum(u.tokens for v in hist.values() for u in v) / len(qs):,.0f} tokens per history "
          f"(built in {t_build:.1f} s, units in {t_units:.1f} s)")
    print(f"grid: {len(evict.POLICIES)} policies x budgets {budgets} x seeds {seeds} x 2 regimes; "
          f"k={args.k}, restore cap {args.restore_cap}")

    # eviction, per policy (the control is calibrated over the dataset, as in notebook 21)
    t_policy: dict[str, float] = {}
    evictions = []
    for policy in evict.POLICIES:
        t0 = time.perf_counter()
        evictions += evict.evict_grid(hist, [policy], budgets, seeds, importance)
        t_policy[policy] = time.perf_counter() - t0
    by_q = defaultdict(list)
    for e in evictions:
        by_q[e.question_id].append(e)

    # retrieval and context assembly (BM25 per cell, both regimes, restore), and prompt dedup
    t0 = time.perf_counter()
    naive = distinct = 0
    for q in qs:
        reads = arms.build_reads(q, hist[q.question_id], by_q[q.question_id], k=args.k,
                                 restore_cap=args.restore_cap)
        plan = arms.plan_reads(reads)
        naive += plan.naive_calls
        distinct += plan.distinct_calls
    t_read = time.perf_counter() - t0

    print(f"cells: {len(evictions):,} evictions")
    for policy, t in t_policy.items():
        n = sum(e.policy == policy for e in evictions)
        print(f"  evict {policy:<11} {t:7.1f} s  ({1000 * t / n:6.1f} ms per cell, {n:,} cells)")
    print(f"  evict total       {sum(t_policy.values()):7.1f} s")
    print(f"retrieval + contexts: {t_read:.1f} s for {naive:,} reads "
          f"({1000 * t_read / len(evictions):.1f} ms per cell incl. BM25 index, ranking, rendering, token counts)")
    # BM25 of each cell's retained units, two ways, on the same cells in this run: bm25s indexing the
    # subset anew (what every cell did before) and the history's term matrix (retrieve.subset_scores)
    t_index = t_matrix = 0.0
    sample = qs[:args.bm25_questions]
    for q in sample:
        us = hist[q.question_id]
        toks = retrieve.tokenize([u.text for u in us])
        query = retrieve.tokenize([q.question])[0]
        t0 = time.perf_counter()
        index = retrieve.history_index(toks)
        pos = {u.unit_id: i for i, u in enumerate(us)}
        cells = [[pos[i] for i in e.retained] for e in by_q[q.question_id]]
        for rows in cells:
            retrieve.subset_scores(index, rows, query)
        t_matrix += time.perf_counter() - t0
        t0 = time.perf_counter()
        for rows in cells:
            retrieve.bm25_scores([toks[i] for i in rows], query)
        t_index += time.perf_counter() - t0
    n_cells = sum(len(by_q[q.question_id]) for q in sample)
    print(f"BM25 over {n_cells:,} cells of {len(sample)} questions: an index per cell (bm25s) {t_index:.1f} s, "
          f"one term matrix per history {t_matrix:.1f} s ({t_index / max(t_matrix, 1e-9):.0f}x)")
    print(f"reader calls: {distinct:,} distinct prompts vs {naive:,} naive "
          f"({naive - distinct:,} identical contexts read once; {distinct / naive:.1%} of naive)")


if __name__ == "__main__":
    main()
