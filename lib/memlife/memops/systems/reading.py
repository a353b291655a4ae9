"""What a MemOps reader is shown and how it answers: histories, prompts, and the `Reader`.

`History` is what a system ingests (sessions of messages, one per setting: `adjacent` or
`long_context`); `Reader` puts a context and a probe in front of the reader model under the
reply grammar, fits the context to the reader's window (counted exactly in the embedded model's
own tokens), and returns an `Answer` with the parsed reply, its tokens and any truncation.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from memlife.memops.data.response import (
    HINTED_RESPONSE_INSTRUCTIONS,
    RESPONSE_INSTRUCTIONS,
    MemOpsResponse,
    ParsedResponse,
    parse_response,
    reply_grammar,
)
from memlife.memops.data.schema import Instance, long_context_history

SETTINGS = ("adjacent", "long_context")


def line_tokens(line: str) -> int:
    """A context line's tokens as `Reader.fit` counts them: its own, plus its newline."""
    from memlife.models import tokens

    return tokens.count_line(line) + 1

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
    from memlife.models import tokens

    return tokens.count(text)


@lru_cache(maxsize=65_536)
def _count_embedded(text: str) -> int:
    from memlife.models import tokens

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
        from memlife.models import tokens

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
        from memlife.models import tokens

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
        A reference subject (memops.systems.subjects) reads exactly this, with no model call."""
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
