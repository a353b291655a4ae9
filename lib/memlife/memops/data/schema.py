"""The MemOps instance format (docs/design.md, "Data contracts"), as typed and validated models.

One instance = one evidence conversation of one topic and one operation type, with its gold
operation trace, its probes and its long-context embedding. Indexing is 0-based everywhere:
`segment` in 0..2, `turn` in 0..7 within a segment (even turns are the user's, odd turns the
assistant's), `conversation` and `position` index into `long_context.conversations[c].turns`.

Structural checks that need more than one field (quotes verbatim in the cited user turn,
alternation, operation-aware probe structure) live in `memops.data.gates`, so that a malformed
instance still loads and the gate can name what is wrong.
"""
from __future__ import annotations

import json
import re
import unicodedata
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

CATEGORIES = (
    "Plans & Events",
    "Personal Profile",
    "Social Contacts",
    "Preferences & Devices",
    "Temporary Status",
    "Corrections & Errors",
)
OP_TYPES = ("remember", "forget", "update", "reflect", "trajectory")  # conversation-level
OPERATION_TYPES = ("remember", "forget", "update", "reflect")  # one gold operation
PROBE_TYPES = (
    "OperationTrace",
    "TargetBinding",
    "StateTransition",
    "CandidateDisambiguation",
    "OperationApplication",
    "StateTrajectory",
)
DISTRACTOR_TAGS = (
    "same_target",
    "stale_value",
    "recency_top",
    "retained_control",
    "update_chain",
    "context_level",
    # Further confusable candidates the paper names for CandidateDisambiguation (Section 3.3).
    "neighbouring_target",
    "assistant_echo",
    "third_party",
    "tentative",
)
FIGURE_5C_TAGS = DISTRACTOR_TAGS[:6]  # the targeted distractors and controls Figure 5(c) counts
N_SEGMENTS = 3
TURNS_PER_SEGMENT = 8

# Literal of a tuple spells each value out: one list of names, typed and iterable.
OpType = Literal[OP_TYPES]
OperationType = Literal[OPERATION_TYPES]
ProbeType = Literal[PROBE_TYPES]
DistractorTag = Literal[DISTRACTOR_TAGS]
Role = Literal["user", "assistant"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=False)


# ----------------------------------------------------------------------------- dialogue


class Turn(_Strict):
    role: Role
    text: str = Field(min_length=1)


class Span(_Strict):
    """A verbatim quote from a user turn, located by segment and turn (0-based)."""

    segment: int = Field(ge=0)
    turn: int = Field(ge=0)
    quote: str = Field(min_length=1)


# ----------------------------------------------------------------------------- background


class Fact(_Strict):
    """A user-centric attribute: the target it describes and one value of it."""

    target: str
    value: str
    aliases: list[str] = Field(default_factory=list)


class Supersession(_Strict):
    target: str
    old_value: str
    new_value: str
    aliases: list[str] = Field(default_factory=list)


class Reflection(_Strict):
    target: str
    clues: list[str] = Field(min_length=2)
    conclusion: str
    unsupported: list[str] = Field(min_length=1)
    aliases: list[str] = Field(default_factory=list)


class Neighbour(_Strict):
    """A confusable candidate: another person's value, a neighbouring target, a tentative value,
    a third party's mistaken belief, or a placeholder the assistant proposed."""

    kind: Literal["other_person", "other_target", "tentative", "third_party", "assistant_echo"]
    target: str
    value: str
    owner: str = ""


class Background(_Strict):
    """Stage 1 metadata that guides generation. Never evidence: probes cite dialogue only."""

    topic_id: str
    category: str
    subtopic: str
    title: str
    user_name: str
    setting: str
    attributes: list[Fact]
    superseding: list[Supersession]
    temporary: list[Fact]
    retained_controls: list[Fact]
    reflection: Reflection
    neighbours: list[Neighbour]


# ----------------------------------------------------------------------------- gold trace


class Operation(_Strict):
    op_id: str
    type: OperationType
    target: str
    target_aliases: list[str] = Field(default_factory=list)
    old_value: str | None = None  # update: the superseded value; forget: the removed value
    new_value: str | None = None  # remember/update: the active value; reflect: the conclusion
    trigger: Span
    evidence: list[Span] = Field(default_factory=list)
    unsupported: list[str] = Field(default_factory=list)  # reflect only


class ReasoningChain(_Strict):
    """Multi-hop audit trail: source facts (quoted), intermediate inferences, final answer."""

    source_facts: list[Span] = Field(min_length=2)
    inferences: list[str] = Field(min_length=1)
    answer: str


class Distractor(_Strict):
    tag: DistractorTag
    value: str  # the confusable value or target the probe is stressed by
    note: str = ""


class AnswerKey(_Strict):
    """Normalized values a correct answer must state / must not assert as current."""

    required: list[str] = Field(min_length=1)
    forbidden: list[str] = Field(default_factory=list)


class Probe(_Strict):
    probe_id: str
    probe_type: ProbeType
    question: str
    expected_answer: str
    provenance: list[Span] = Field(min_length=1)
    reasoning_chain: ReasoningChain | None = None
    distractors: list[Distractor] = Field(default_factory=list)
    multi_hop: bool = False
    answer_key: AnswerKey
    op_ids: list[str] = Field(min_length=1)  # the gold operations this probe is about


# ----------------------------------------------------------------------------- long context


class LongConversation(_Strict):
    """One unrelated conversation of the long history, with evidence already inserted."""

    conversation_id: str
    source: str  # e.g. "sharegpt:<conversation id>" or "ultrachat:<id>"
    turns: list[Turn]


class Insertion(_Strict):
    conversation: int = Field(ge=0)
    segment: int = Field(ge=0)
    position: int = Field(ge=0)  # index of the segment's first turn in that conversation
    messages: int = Field(ge=1)


class ContextDistractor(_Strict):
    """A state-neutral snippet close to a gold target, inserted into the long history."""

    conversation: int = Field(ge=0)
    position: int = Field(ge=0)
    messages: int = Field(ge=2)
    op_id: str
    target: str
    turns: list[Turn]


class LongContext(_Strict):
    conversations: list[LongConversation]
    insertions: list[Insertion]
    context_distractors: list[ContextDistractor]
    approx_tokens: int = Field(ge=0)


# ----------------------------------------------------------------------------- instance


class Instance(_Strict):
    instance_id: str
    topic_id: str
    category: str
    subtopic: str
    op_type: OpType
    background: Background
    segments: list[list[Turn]]
    operations: list[Operation] = Field(min_length=1)
    probes: list[Probe] = Field(min_length=1)
    long_context: LongContext | None = None
    realizer: str = "template"


# ----------------------------------------------------------------------------- helpers

_NON_ALNUM = re.compile(r"[^0-9a-z]+")


def normalize_value(text: str) -> str:
    """The normalization answer keys are written in: NFKC, casefold, non-alphanumerics -> space."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return _NON_ALNUM.sub(" ", folded).strip()


_LEADING_DETERMINER = re.compile(r"^\s*(?:a|an|the|my|your)\s+", re.IGNORECASE)


# The characters a reply can write: printable ASCII other than the quote and the backslash
# (`memlife.memops.data.response.reply_grammar`, which says why). The topic kits' values are
# checked against it, so that every gold reply can be written under the grammar.
REPLY_ALPHABET = frozenset(chr(c) for c in range(0x20, 0x7F)) - {'"', "\\"}


def outside_reply_alphabet(text: str) -> list[str]:
    """The characters of `text` a reply under the reply grammar cannot write, sorted."""
    return sorted(set(text) - REPLY_ALPHABET)


def mentions(text: str, value: str) -> bool:
    """The value occurs in the text as a whole-token sequence (normalized as answer keys are),
    negated or not: what the scorer's stances start from, and what keeps a forgotten value out
    of a gold reply."""
    words, vw = normalize_value(text).split(), normalize_value(value).split()
    n = len(vw)
    return n > 0 and any(words[i:i + n] == vw for i in range(len(words) - n + 1))


def key_value(text: str) -> str:
    """An answer-key entry: the normalized value without a leading determiner.

    "a MacBook Air M3" -> "macbook air m3", "my brother Karim" -> "brother karim", so an answer
    that drops or changes the article still contains the key.
    """
    # Stripped from the raw text, so "#A-558190" keeps its letter while "a MacBook" loses its article.
    return normalize_value(_LEADING_DETERMINER.sub("", text))


def dumps(instance: Instance) -> str:
    """One canonical JSONL line: sorted keys, no whitespace variation, no timestamps."""
    return json.dumps(instance.model_dump(mode="json"), sort_keys=True, ensure_ascii=False)


class InstanceFileError(ValueError):
    """A JSONL line that does not parse or does not match the schema; names file, line, field."""


def parse_line(line: str, *, source: str = "<string>", lineno: int = 0) -> Instance:
    try:
        raw = json.loads(line)
    except json.JSONDecodeError as exc:
        raise InstanceFileError(f"{source}:{lineno}: not valid JSON ({exc.msg})") from exc
    try:
        return Instance.model_validate(raw)
    except ValidationError as exc:
        iid = raw.get("instance_id", "?") if isinstance(raw, dict) else "?"
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        raise InstanceFileError(
            f"{source}:{lineno}: instance {iid}: field {field}: {first['msg']}"
            f" ({exc.error_count()} schema error(s))"
        ) from exc


def jsonl_lines(path) -> list[tuple[int, str]]:
    """(line number, text) of every non-blank line of a JSONL file; a line that is not UTF-8 is an
    InstanceFileError naming the file, line and column, not a UnicodeDecodeError from deep inside."""
    out = []
    with open(path, "rb") as fh:
        for i, raw in enumerate(fh, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InstanceFileError(f"{path}:{i}: column {exc.start + 1}: byte 0x{raw[exc.start]:02x} "
                                        "is not UTF-8 (JSONL files are UTF-8)") from None
            if line.strip():
                out.append((i, line))
    return out


def load_instances(path) -> list[Instance]:
    """Read a JSONL file of instances; a bad line raises InstanceFileError naming it."""
    return [parse_line(line, source=str(path), lineno=i) for i, line in jsonl_lines(path)]


def user_turn_text(instance: Instance, span: Span) -> str | None:
    """The text of the user turn a span cites, or None when it does not cite a user turn."""
    if span.segment >= len(instance.segments):
        return None
    seg = instance.segments[span.segment]
    if span.turn >= len(seg) or seg[span.turn].role != "user":
        return None
    return seg[span.turn].text


def long_context_history(instance: Instance) -> list[list[Turn]]:
    """The long-context setting: one turn list per conversation, evidence already in place."""
    if instance.long_context is None:
        raise ValueError(f"instance {instance.instance_id}: no long_context (build stage 4 first)")
    return [list(c.turns) for c in instance.long_context.conversations]
