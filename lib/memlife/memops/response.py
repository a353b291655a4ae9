"""The response every evaluated system returns for a probe, and how a raw reply becomes one.

One JSON object: the answer, the memory operations the system believes happened (type,
target, old and new value) and the user quotes that support the answer. The pydantic model is
sent as the structured-output schema (`client.complete_json`), so an endpoint that honours
json_schema constrains decoding to it. A reply that still does not parse is kept as a
`malformed` record with its raw text and the parse error; it is never dropped, and the scorer
gives it its own label (DESIGN.md "The gold response scores perfect").
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError


# Every field is required and no field is nullable ("" stands for "no value"): llama-server
# compiles the schema into a sampling grammar, and optional or nullable fields (anyOf null)
# made generation pathologically slow on the embedded model — 0.37 tokens/s against 25 tokens/s
# for this flat schema on the same prompt (measured on 2 shared cores).


class PredictedOperation(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["remember", "forget", "update", "reflect"]
    target: str = Field(description="what the operation is about, e.g. 'home ZIP code'")
    old_value: str = Field(description="value removed or superseded; empty if none")
    new_value: str = Field(description="value stored, or the conclusion; empty if none")


class MemOpsResponse(BaseModel):
    model_config = ConfigDict(extra="forbid")

    answer: str
    operations: list[PredictedOperation]
    provenance: list[str] = Field(description="exact quotes of the user messages the answer rests on")


# What the reply holds, and nothing about how to treat forgotten or superseded values: the paper
# does not report telling its readers that, and it is what leakage and stale value measure.
RESPONSE_INSTRUCTIONS = (
    "Reply with one JSON object with the keys: "
    '"answer" (your answer to the question), '
    '"operations" (the memory operations in the conversation that matter for the question, '
    'each {"type": "remember"|"forget"|"update"|"reflect", "target": ..., "old_value": ..., '
    '"new_value": ...}, "" for a missing value), and "provenance" (exact quotes of the user messages your answer rests on).'
)
# The instructions as the reader was given them before (`systems.HINTED_SYSTEM_PROMPT`, a profile's
# `memory_hint: true`): the answer "stating the current values", and never a forgotten or
# superseded value.
HINTED_RESPONSE_INSTRUCTIONS = (
    "Reply with one JSON object with the keys: "
    '"answer" (your answer to the question, stating the current values), '
    '"operations" (the memory operations in the conversation that matter for the question, '
    'each {"type": "remember"|"forget"|"update"|"reflect", "target": ..., "old_value": ..., '
    '"new_value": ...}, "" for a missing value), and "provenance" (exact quotes of the user messages your answer rests on). '
    "Never state a value the user asked you to forget, and never give a superseded value as current."
)


@dataclass(frozen=True)
class ParsedResponse:
    """A system's reply to one probe: the parsed response, or why it is malformed."""

    raw: str
    response: MemOpsResponse | None
    error: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def malformed(self) -> bool:
        return self.response is None


# The one wrapper `llm.parse_json` also accepts, so that a reply parses the same whether it came
# through an endpoint (the Reader), from Temp-LoRA's own generation, or from a file scored later.
_FENCE = re.compile(r"^```(?:json)?\s*\n(.*)\n```$", re.S)


def parse_response(raw: str) -> ParsedResponse:
    """Strictly parse a raw reply: exactly one JSON object matching MemOpsResponse (a single
    ```json fence around it is tolerated, as `llm.parse_json` does).

    No repair, no salvage of a partial object: a weak model's truncated or off-schema reply is
    a real failure of that system and must be scored as one.
    """
    text = (raw or "").strip()
    if not text:
        return ParsedResponse(raw=raw or "", response=None, error="empty reply")
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1).strip()
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        return ParsedResponse(raw=raw, response=None, error=f"not JSON: {exc.msg} at char {exc.pos}")
    try:
        return ParsedResponse(raw=raw, response=MemOpsResponse.model_validate(obj))
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"]) or "<root>"
        return ParsedResponse(raw=raw, response=None, error=f"schema: {loc}: {first['msg']}")


# Bounds for the sampling grammar of a small local reader. Unbounded, SmolLM2-135M repeats one
# clause inside "answer" until the token cap, and the cut-off JSON is scored malformed (one quick
# probe: 192 tokens in 11.4 s, malformed; bounded: 127 tokens in 3.9 s, well-formed). These are
# floors: an evaluation widens each to what its dataset's gold responses need (`bounds_covering`),
# so the grammar never makes a perfect reply impossible (the quick build's gold needs answers of
# up to 290 characters, 5 operations and 7 quotes). The parser does not enforce them, so an API
# reader's longer reply stays valid.
GRAMMAR_BOUNDS = {"answer": 160, "target": 40, "old_value": 60, "new_value": 60,
                  "provenance_quote": 120, "operations_items": 2, "provenance_items": 1}


def reply_sizes(r: MemOpsResponse) -> dict[str, int]:
    """The size of each bounded field of one reply, in GRAMMAR_BOUNDS's keys."""
    ops = r.operations
    return {"answer": len(r.answer),
            "target": max((len(o.target) for o in ops), default=0),
            "old_value": max((len(o.old_value) for o in ops), default=0),
            "new_value": max((len(o.new_value) for o in ops), default=0),
            "provenance_quote": max((len(q) for q in r.provenance), default=0),
            "operations_items": len(ops), "provenance_items": len(r.provenance)}


def bounds_covering(replies, floor: dict | None = None) -> dict[str, int]:
    """GRAMMAR_BOUNDS (or `floor`) widened so that every one of `replies` is grammatical."""
    out = dict(floor or GRAMMAR_BOUNDS)
    for r in replies:
        for key, size in reply_sizes(r).items():
            out[key] = max(out[key], size)
    return out


def bounded_json_schema(bounds: dict | None = None) -> dict:
    """MemOpsResponse's JSON schema with maxLength on every string and maxItems on both lists."""
    b = {**GRAMMAR_BOUNDS, **(bounds or {})}
    s = json.loads(json.dumps(MemOpsResponse.model_json_schema()))
    op = s["$defs"]["PredictedOperation"]["properties"]
    for key in ("target", "old_value", "new_value"):
        op[key]["maxLength"] = b[key]
    props = s["properties"]
    props["answer"]["maxLength"] = b["answer"]
    props["operations"]["maxItems"] = b["operations_items"]
    props["provenance"]["items"]["maxLength"] = b["provenance_quote"]
    props["provenance"]["maxItems"] = b["provenance_items"]
    return s
