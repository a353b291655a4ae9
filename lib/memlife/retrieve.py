"""BM25 retrieval, shared by both tracks: the restore audit's ranker and MemOps' retrieval systems.

The ranker is a frozen BM25 ("BM25-lite" in the restore paper) from ``bm25s`` with its defaults
(Lucene variant, k1=1.5, b=0.75). Tokenization is ``bm25s.tokenize``: lower-cased, the regex
``(?u)\\b\\w\\w+\\b`` (words of two or more letters/digits; one-character tokens and
punctuation dropped), bm25s's English stop-word list, no stemming. An index may be scored over
any subset of its documents as an index of that subset alone would (`subset_scores`: the restore
audit's IDF is computed over what survived eviction). Documents are ranked by score, ties broken
by recency (newer first) (`best_first`), so documents with no query term rank newest first.

What each track builds on it: :mod:`memlife.restore.reading.read_context` (the restore audit's regimes
and contexts) and :class:`memlife.memops.systems.baselines.BM25System`.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

import bm25s
import numpy as np
from scipy import sparse

STOPWORDS = "en"


def tokenize(texts: Sequence[str]) -> list[list[str]]:
    return bm25s.tokenize(list(texts), stopwords=STOPWORDS, return_ids=False, show_progress=False)


@lru_cache(maxsize=1 << 18)
def _part_tokens(text: str) -> tuple[str, ...]:
    return tuple(tokenize([text])[0])


def tokenize_lines(groups: Sequence[Sequence[str]]) -> list[list[str]]:
    """`tokenize(["\\n".join(g) for g in groups])`, from parts that recur across histories. A token
    (two or more word characters) never spans whitespace, and lower-casing reads no context
    across it (Greek final sigma included), so a line's tokens are those of its head up to the
    first ": " followed by those of the rest, and a group's the concatenation of its lines':
    each distinct part is tokenized once per process (tests/test_retrieve.py checks it)."""
    out = []
    for group in groups:
        toks: list[str] = []
        for line in group:
            cut = line.find(": ")
            if cut >= 0:
                toks += _part_tokens(line[:cut + 1])
                toks += _part_tokens(line[cut + 1:])
            else:
                toks += _part_tokens(line)
        out.append(toks)
    return out


def bm25_scores(docs: Sequence[list[str]], query: list[str], index: "bm25s.BM25 | None" = None) -> np.ndarray:
    """BM25 score of each of `docs` (token lists) for the `query` tokens; zeros when they share no
    term. `index` may pass :func:`bm25_index` of the same docs, built once."""
    scores = np.zeros(len(docs), dtype=np.float64)
    if index is None and any(docs) and query:
        index = bm25_index(docs)
    if index is not None:
        query = [t for t in query if t in index.vocab_dict]
        if query:
            scores = np.asarray(index.get_scores(query), dtype=np.float64)
    return scores


def bm25_index(docs: Sequence[list[str]]) -> "bm25s.BM25 | None":
    if not any(docs):
        return None
    bm = bm25s.BM25()
    bm.index(list(docs), show_progress=False)
    return bm


@dataclass(frozen=True)
class HistoryIndex:
    """A history's term counts, built once (:func:`history_index`), from which :func:`subset_scores`
    scores any subset of its units as an index of that subset alone would."""

    counts: sparse.csc_matrix  # units x vocabulary: how often each term occurs in each unit
    lengths: np.ndarray  # tokens per unit
    vocab: dict[str, int]


def history_index(unit_tokens: Sequence[list[str]]) -> HistoryIndex:
    # Columns in the order terms first occur; built with dict and numpy passes rather than a
    # Python step per token (a ~102k-token history holds ~40,000 tokens).
    flat = [t for toks in unit_tokens for t in toks]
    vocab = {t: i for i, t in enumerate(dict.fromkeys(flat))}
    cols = np.fromiter(map(vocab.__getitem__, flat), dtype=np.int64, count=len(flat))
    lengths = np.array([len(t) for t in unit_tokens], dtype=np.int64)
    rows = np.repeat(np.arange(len(unit_tokens), dtype=np.int64), lengths)
    counts = sparse.csc_matrix((np.ones(len(flat)), (rows, cols)), shape=(len(unit_tokens), max(len(vocab), 1)))
    counts.sum_duplicates()
    return HistoryIndex(counts, lengths.astype(np.float64), vocab)


def subset_scores(index: HistoryIndex, rows: Sequence[int], query: list[str],
                  k1: float = 1.5, b: float = 0.75) -> np.ndarray:
    """BM25 (the Lucene variant bm25s computes, its defaults k1=1.5, b=0.75) of the units at ``rows``
    for the ``query`` tokens, with IDF and the mean length taken over those units only — the
    scores an index of the subset would give (tests/test_retrieve.py checks them against bm25s's).

    The restore grid ranks each question's retained units once per policy × budget × seed cell;
    indexing each cell's subset anew cost two-thirds of notebook 25's retrieval time, where this
    reads the few query columns of one matrix built per history. Scores are float64 (bm25s's are
    float32), so units that tie in bm25s by rounding may be ordered by their exact scores here."""
    rows = np.asarray(rows, dtype=np.int64)
    scores = np.zeros(len(rows), dtype=np.float64)
    terms = [index.vocab[t] for t in query if t in index.vocab]
    if not len(rows) or not terms:
        return scores
    tf = index.counts[:, terms].toarray()[rows]  # subset x query terms, a query term once per occurrence
    lengths = index.lengths[rows]
    avg = lengths.mean()
    if avg == 0:
        return scores
    df = (tf > 0).sum(axis=0)
    idf = np.log(1 + (len(rows) - df + 0.5) / (df + 0.5))
    norm = k1 * (1 - b + b * lengths / avg)
    return (idf * tf / (tf + norm[:, None])).sum(axis=1)


def best_first(scores: Sequence[float], recency: Sequence[int]) -> list[int]:
    """Positions of `scores`, best first; ties: the higher `recency` (the newer) first.

    The tie-break is explicit because a library's top-k (bm25s's, numpy's argpartition) leaves
    the order of equal scores to the CPU's sort kernels: the same query would retrieve other
    units on a machine with other SIMD instructions."""
    return sorted(range(len(scores)), key=lambda j: (-scores[j], -recency[j]))
