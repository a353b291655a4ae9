"""The evaluated memory systems, behind one interface: ingest a history, answer a probe.

Paper Section 4.1 evaluates four memory families; each is here with the real mechanism:

* long-context — the whole history in the prompt (truncated from the front only when it does
  not fit the reader's window; the truncation is recorded);
* retrieval — BM25 over turns or over sessions, the best-ranked units within a token budget both
  granularities share (`RETRIEVAL_TOKENS`), chronological, then the reader; scored, tokenized and
  tie-broken by `memlife.retrieve` (bm25s), the same ranker as the restore audit's;
* managed memory — Mem0 (`mem0ai`, in-process, local MiniLM embedder, local Qdrant store) and
  MemOS (`MemoryOS` general_text memory, in its own environment behind a JSON-lines worker,
  because its pins — openai<2, transformers<5 — conflict with ours);
* parametric — Temp-LoRA: a temporary LoRA adapter trained on every chunk of the history, for
  the epochs its paper sets (transformers + peft on CPU, SmolLM2-135M-Instruct loaded from the
  same GGUF the embedded server runs), then generation with it under the readers' grammar.

Every reader call goes through `memlife.models.llm` (structured output with the MemOpsResponse schema).
Mem0 and MemOS make their own OpenAI-style calls; they are pointed at `memlife.models.proxy`, which
routes them through `memlife.models.llm` too, so they are cached, counted and replayable. Temp-LoRA's
generation is the adapted local model itself, so it cannot go through an endpoint; its replies
are cached in the same on-disk cache under the whole request, and its adapter is saved per
history so a resumed run does not retrain it.

Settings: `adjacent` (the evidence conversation: three segments = three sessions) and
`long_context` (the dispersed history: one session per unrelated conversation).

Each system is a `SystemSpec` in a registry (`registered_systems`) that declares whether it needs a
model besides the reader and whether it may answer histories in parallel. A system of one's own is
a class in one's own module, named "module:Class" in notebook 12's `systems` (`resolve_systems`;
docs/extending.md).
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Protocol

from memlife.memops.systems import reading

SYSTEMS = ("long_context", "bm25_turn", "bm25_session", "mem0", "memos", "temp_lora")


# ----------------------------------------------------------------------------- the interface


class MemorySystem(Protocol):
    name: str

    def ingest(self, history: reading.History) -> None: ...

    def answer(self, history: reading.History, question: str) -> reading.Answer: ...

    def close(self) -> None: ...


class LongContextSystem:
    name = "long_context"
    variant = ""

    def __init__(self, reader: reading.Reader):
        self.reader = reader

    def ingest(self, history: reading.History) -> None:
        return None  # the history itself is the memory

    def answer(self, history: reading.History, question: str) -> reading.Answer:
        return self.reader.read(reading.format_turns(history.turns()), question)

    def close(self) -> None:
        return None


# The context budget both BM25 granularities share (tokens as `Reader.fit` counts them: each line's
# o200k tokens plus one for its newline). Turn- and session-level retrieval are compared at the
# same budget, not at the same number of units: a session is 8 to 100+ turns, so "top-k" means a
# different amount of text at each granularity. 5,000 is the largest round budget the embedded
# reader's 8k window holds whole (`Reader.room`: about 5,500 to 5,800 tokens, with 600 to 320 reply
# tokens), so neither granularity's handover is cut by the window fit. Notebook 14 sweeps the
# budget and k for both and shows where each holds the evidence ("The retrieval sweep").
RETRIEVAL_TOKENS = 5000


def context_tokens(kept: list[str]) -> int:
    """The tokens of the context `Reader.handover` makes of the kept lines (`_count` of it)."""
    from memlife.models import tokens

    return tokens.count_lines(kept) if kept else reading._count(reading.NO_MEMORY)


_LINE_COUNTS: dict[str, list[int]] = {}
_LINE_COUNTS_KEEP = 2048  # histories; a 60k-token history's counts are ~3,200 ints


def history_line_tokens(lines: list[str]) -> list[int]:
    """`line_tokens` of each of a history's lines, counted once per history: the turn- and the
    session-level system hold the same lines; each line from its cached parts (`tokens.count_line`:
    a turn that recurs in other histories is not encoded again)."""
    h = hashlib.sha256()
    for line in lines:  # length-prefixed: no two lists of lines share a key
        b = line.encode()
        h.update(len(b).to_bytes(8, "little") + b)
    key = h.hexdigest()
    if key not in _LINE_COUNTS:
        if len(_LINE_COUNTS) >= _LINE_COUNTS_KEEP:
            _LINE_COUNTS.pop(next(iter(_LINE_COUNTS)))
        from memlife.models import tokens

        _LINE_COUNTS[key] = [tokens.count_line(line) + 1 for line in lines]
    return _LINE_COUNTS[key]


def select_units(tokens, *, top_k: int | None = None, budget: int | None = None) -> list[int]:
    """Which units a retriever hands over, given their `tokens` in rank order (best first): the
    positions (into that order) of each unit, best first, that fits what remains of `budget`
    tokens — a unit that does not fit is skipped, not a stop, as in `memlife.restore.reading.read_context.inject`, so
    one oversized unit never empties the handover — and at most `top_k` of them. None: no cap of
    that kind. The number of units handed over (k) follows from the budget and the units' lengths.

    The greedy walk takes every run of units that fits whole at once (a search in the running
    sum), and after a unit that does not fit jumps to the next that does: a 3,000-turn ranking is
    walked in a few steps, so notebook 14's sweep calls this for every probe and budget."""
    import numpy as np

    t = np.asarray(tokens, dtype=np.int64)
    if top_k is not None and top_k < 0 or budget is not None and budget < 0:
        raise ValueError(f"top_k and budget must be >= 0 (got top_k={top_k}, budget={budget})")
    n = len(t) if top_k is None else min(len(t), int(top_k))
    if budget is None:
        return list(range(n))
    cs = np.concatenate([[0], np.cumsum(t)])  # cs[j]: tokens of the first j units
    chosen: list[int] = []
    room, j = int(budget), 0
    while j < len(t) and len(chosen) < n:
        # the longest run from j that fits whole: the largest p with cs[p] - cs[j] <= room
        p = int(np.searchsorted(cs, cs[j] + room, side="right")) - 1
        if p > j:
            chosen.extend(range(j, p))
            room -= int(cs[p] - cs[j])
            j = p
        if j >= len(t):
            break
        fits = np.flatnonzero(t[j + 1:] <= room)  # unit j does not fit: the next one that does
        if not len(fits):
            break
        j += 1 + int(fits[0])
    return chosen[:n]


class BM25System:
    """BM25 over turns or over sessions: units in BM25 rank order (ties: the newer), each that fits
    what remains of the token budget and at most `top_k` of them, shown to the reader in history
    order. `budget_tokens` is the fair setting (both granularities get the same tokens: see
    RETRIEVAL_TOKENS); `top_k` alone is the classic top-k, whose tokens differ by granularity."""

    def __init__(self, reader: reading.Reader, granularity: str, top_k: int | None = None,
                 budget_tokens: int | None = None):
        if granularity not in ("turn", "session"):
            raise ValueError(f"granularity must be 'turn' or 'session', not {granularity!r}")
        if top_k is None and budget_tokens is None:
            raise ValueError("BM25System needs top_k or budget_tokens (or both)")
        self.reader, self.granularity = reader, granularity
        self.top_k = None if top_k is None else int(top_k)
        self.budget_tokens = None if budget_tokens is None else int(budget_tokens)
        self.name = f"bm25_{granularity}"
        self.variant = ", ".join(([f"top_k={self.top_k}"] if self.top_k is not None else [])
                                 + ([f"budget={self.budget_tokens}"] if self.budget_tokens is not None else []))
        self._index: dict[str, tuple] = {}  # history id: (index, unit token lists, units, unit tokens, line tokens)
        self._last: tuple[str, str, list[int]] | None = None  # the last ranking: one per probe, whatever asks

    def _units(self, history: reading.History) -> list[list[str]]:
        if self.granularity == "turn":
            return [reading.format_turns([(si, ti, m)]) for si, ti, m in history.turns()]
        return [reading.format_turns([(si, ti, m) for ti, m in enumerate(sess)]) for si, sess in enumerate(history.sessions)]

    def ingest(self, history: reading.History) -> None:
        from memlife import retrieve

        units = self._units(history)
        docs = retrieve.tokenize_lines(units)
        lines = history_line_tokens([line for u in units for line in u])
        tokens, at = [], 0
        for u in units:
            tokens.append(sum(lines[at:at + len(u)]))
            at += len(u)
        self._index[history.history_id] = (retrieve.bm25_index(docs), docs, units, tokens, lines)
        self._last = None

    def units(self, history: reading.History) -> tuple[list[list[str]], list[int], list[int]]:
        """An ingested history's units (their context lines), each unit's tokens, and each line's
        (history order; all as `Reader.fit` counts them)."""
        _, _, units, tokens, lines = self._index[history.history_id]
        return units, tokens, lines

    def ranking(self, history: reading.History, question: str) -> list[int]:
        """Every unit, best BM25 match first (ties: the newer first)."""
        from memlife import retrieve

        if self._last is not None and self._last[:2] == (history.history_id, question):
            return list(self._last[2])  # the same probe read through another window, or swept
        index, docs, units = self._index[history.history_id][:3]
        scores = retrieve.bm25_scores(docs, retrieve.tokenize([question])[0], index)
        order = retrieve.best_first(scores, range(len(units)))
        self._last = (history.history_id, question, order)
        return list(order)

    def retrieve(self, history: reading.History, question: str) -> list[int]:
        """The units handed over (`select_units` of the ranking), in history order: update order matters."""
        order = self.ranking(history, question)
        tokens = self._index[history.history_id][3]
        picked = select_units([tokens[i] for i in order], top_k=self.top_k, budget=self.budget_tokens)
        return sorted(order[p] for p in picked)

    def answer(self, history: reading.History, question: str) -> reading.Answer:
        units = self._index[history.history_id][2]
        ids = self.retrieve(history, question)
        lines = [line for i in ids for line in units[i]]
        return self.reader.read(lines, question, retrieved=[str(i) for i in ids])

    def release(self, history: reading.History) -> None:
        """Drop one history's index once its probes are answered."""
        self._index.pop(history.history_id, None)
        self._last = None

    def close(self) -> None:
        self._index.clear()
        self._last = None


# ----------------------------------------------------------------------------- stores


def store_dir(root: Path, system: str, history_id: str) -> Path:
    """A deterministic per-(system, history) store path: a resumed run finds the same store."""
    safe = hashlib.sha256(history_id.encode()).hexdigest()[:16]
    return Path(root) / system / safe


class IngestMarker:
    """`INGESTED` is written only after a whole history is in the store. A store directory
    without it was interrupted mid-ingest: it is deleted and rebuilt (the library's LLM calls
    replay from the cache), so a killed run never leaves duplicated memories behind."""

    def __init__(self, directory: Path):
        self.directory = Path(directory)
        self.path = self.directory / "INGESTED"

    def done(self) -> bool:
        return self.path.is_file()

    def reset(self) -> None:
        if self.directory.exists():
            shutil.rmtree(self.directory)
        self.directory.mkdir(parents=True)

    def read(self) -> dict:
        return json.loads(self.path.read_text())

    def mark(self, info: dict) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(info, sort_keys=True))
        os.replace(tmp, self.path)
