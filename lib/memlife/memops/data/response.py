"""The response every evaluated system returns for a probe, and how a raw reply becomes one.

One JSON object: the answer, the memory operations the system believes happened (type,
target, old and new value) and the user quotes that support the answer. The pydantic model is
sent as the structured-output schema (`client.complete_json`), so an endpoint that honours
json_schema constrains decoding to it. A reply that still does not parse is kept as a
`malformed` record with its raw text and the parse error; it is never dropped, and the scorer
gives it its own label (tests/test_memops_score.py holds it to that).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from memlife.memops.data.plan import as_person  # the planner's rewording of a claim about "the user"
from memlife.memops.data.schema import Instance, Probe, mentions, normalize_value

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
# The instructions as the reader was given them before (`reading.HINTED_SYSTEM_PROMPT`, a profile's
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
    """A system's reply to one probe: the parsed response, or why it is malformed.

    `malformed` is the scorer's label: no response could be read (scored as a failure either way).
    `truncated` says why, where the reason is the token cap: the reply was still being written
    when it hit `max_tokens` (finish_reason "length"), so the system never finished it. Counted
    apart from a reply that ended on its own and did not parse (`failed_format`), which is the
    model failing the format."""

    raw: str
    response: MemOpsResponse | None
    error: str = ""
    extra: dict = field(default_factory=dict)
    finish_reason: str | None = None

    @property
    def malformed(self) -> bool:
        return self.response is None

    @property
    def truncated(self) -> bool:
        return self.finish_reason == "length"

    @property
    def failed_format(self) -> bool:
        return self.malformed and not self.truncated


# The one wrapper `llm.parse_json` also accepts, so that a reply parses the same whether it came
# through an endpoint (the Reader), from Temp-LoRA's own generation, or from a file scored later.
_FENCE = re.compile(r"^```(?:json)?\s*\n(.*)\n```$", re.S)


def parse_response(raw: str, finish_reason: str | None = None) -> ParsedResponse:
    """Strictly parse a raw reply: exactly one JSON object matching MemOpsResponse (a single
    ```json fence around it is tolerated, as `llm.parse_json` does). `finish_reason` is the
    generation's ("length": it hit the token cap); it is kept, and names the cause in `error`.

    No repair, no salvage of a partial object: a weak model's truncated or off-schema reply is
    a real failure of that system and must be scored as one.
    """
    cut = " (cut off at the token cap)" if finish_reason == "length" else ""
    text = (raw or "").strip()
    if not text:
        return ParsedResponse(raw=raw or "", response=None, error="empty reply" + cut, finish_reason=finish_reason)
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1).strip()
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        return ParsedResponse(raw=raw, response=None, error=f"not JSON: {exc.msg} at char {exc.pos}{cut}",
                              finish_reason=finish_reason)
    try:
        return ParsedResponse(raw=raw, response=MemOpsResponse.model_validate(obj), finish_reason=finish_reason)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"]) or "<root>"
        return ParsedResponse(raw=raw, response=None, error=f"schema: {loc}: {first['msg']}{cut}",
                              finish_reason=finish_reason)


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


# ----------------------------------------------------------------------------- the sampling grammar
#
# llama-server compiles a json_schema into a GBNF grammar whose `space` rule,
# `| " " | "\n"{1,2} [ \t]{0,20}`, may follow every brace, colon and comma: up to 22 characters
# at each of some hundred places of a five-operation reply, and the embedded model pretty-prints
# with them until the token cap cuts the reply (quick: every malformed reply of the embedded
# reader was one cut at the cap). The grammar below fixes every separator instead: the reply is
# pydantic's compact JSON (`model_dump_json`), the format of the gold responses, so the only
# free text is inside the bounded strings and the only free length is the bounded lists.
# The same grammar text goes to llama-server (as `grammar`) and to Temp-LoRA's own decoder
# (llguidance), so every system answers under one grammar.
#
# A string's characters are printable ASCII other than the quote and the backslash, and no escape:
# every character of a reply is then one byte, and since no token of a byte-level BPE is shorter
# than a byte, the reply's characters bound its tokens. `grammar_longest_reply` is so a token
# bound, and a cap at least that long (answering.resolve_reply_cap) leaves no grammatical reply
# that the cap could cut. The gold responses are ASCII (the topic files are; a test checks it).
_GBNF_CHAR = r'''char ::= [\x20\x21\x23-\x5B\x5D-\x7E]'''  # REPLY_ALPHABET as a character class


def _gbnf_string(n: int) -> str:
    return f'"\\"" char{{0,{int(n)}}} "\\""'


def _gbnf_list(item: str, n: int) -> str:
    """At most `n` items, comma-separated, no whitespace."""
    if n <= 0:
        return '""'
    return f'( {item} ( "," {item} ){{0,{n - 1}}} )?' if n > 1 else f"( {item} )?"


def reply_grammar(bounds: dict | None = None) -> str:
    """The GBNF grammar of a MemOpsResponse within `bounds` (GRAMMAR_BOUNDS's keys), with fixed
    separators: no whitespace anywhere outside strings, keys in the schema's order."""
    b = {**GRAMMAR_BOUNDS, **(bounds or {})}
    types = " | ".join(f'"\\"{t}\\""' for t in PredictedOperation.model_fields["type"].annotation.__args__)
    return "\n".join([
        'root ::= "{\\"answer\\":" answer ",\\"operations\\":[" ops "],\\"provenance\\":[" prov "]}"',
        f"answer ::= {_gbnf_string(b['answer'])}",
        f"ops ::= {_gbnf_list('op', b['operations_items'])}",
        'op ::= "{\\"type\\":" optype ",\\"target\\":" target ",\\"old_value\\":" oldvalue '
        '",\\"new_value\\":" newvalue "}"',
        f"optype ::= {types}",
        f"target ::= {_gbnf_string(b['target'])}",
        f"oldvalue ::= {_gbnf_string(b['old_value'])}",
        f"newvalue ::= {_gbnf_string(b['new_value'])}",
        f"prov ::= {_gbnf_list('quote', b['provenance_items'])}",
        f"quote ::= {_gbnf_string(b['provenance_quote'])}",
        _GBNF_CHAR,
    ]) + "\n"


def grammar_longest_reply(bounds: dict | None = None) -> int:
    """Characters in the longest reply `reply_grammar(bounds)` admits: every string at its bound,
    every list full, the longest operation type. Every character is one ASCII byte, so this is
    also the most tokens any grammatical reply can take in a byte-level BPE (SmolLM2's, o200k)."""
    b = {**GRAMMAR_BOUNDS, **(bounds or {})}
    longest_type = max(len(t) for t in PredictedOperation.model_fields["type"].annotation.__args__)
    op = PredictedOperation(type="remember", target="", old_value="", new_value="").model_dump_json()
    op_len = len(op) - len("remember") + longest_type + b["target"] + b["old_value"] + b["new_value"]
    n_ops, n_quotes = b["operations_items"], b["provenance_items"]
    empty = len(MemOpsResponse(answer="", operations=[], provenance=[]).model_dump_json())
    return (empty + b["answer"] + n_ops * op_len + max(n_ops - 1, 0)
            + n_quotes * (b["provenance_quote"] + 2) + max(n_quotes - 1, 0))


# ----------------------------------------------------------------------------- the gold reply


def gold_operations(instance: Instance, probe: Probe) -> list:
    """The operations this probe is about (`op_ids`): what its prompt asks a system to name,
    so what the operation label's recall is measured against."""
    wanted = set(probe.op_ids)
    return [o for o in instance.operations if o.op_id in wanted]


def forgotten_values(instance: Instance) -> list[str]:
    """The values the user asked to forget: no reply may state them (the leakage label)."""
    return [o.old_value for o in instance.operations if o.type == "forget" and o.old_value]


def gold_response(instance: Instance, probe: Probe) -> ParsedResponse:
    """The reply made of the probe's expected answer, its gold operations and its provenance
    quotes: the scorer must give it `Labels.perfect` (tests/test_memops_score.py holds it to that, and the
    build's gold gate on every probe built: `memlife.memops.data.gates.gate_gold_response`).

    A value the user asked to forget is left out of its operations ("" where it stood: the
    forget operation's old value, the remember operation that first stored it), as the gold
    answer leaves it out: a reply that records it in an operation leaks it (`leakage_label`).
    """
    forgotten = forgotten_values(instance)

    def kept(value: str | None) -> str:
        return "" if not value or any(mentions(value, f) for f in forgotten) else value

    r = MemOpsResponse(
        answer=probe.expected_answer,
        operations=[PredictedOperation(type=o.type, target=o.target, old_value=kept(o.old_value),
                                       new_value=kept(o.new_value)) for o in gold_operations(instance, probe)],
        provenance=[s.quote for s in probe.provenance],
    )
    return ParsedResponse(raw=r.model_dump_json(), response=r)


def _stale_values(instance: Instance) -> list[str]:
    return [o.old_value for o in instance.operations if o.type == "update" and o.old_value]


def _listed(values: list[str], forbidden: list[str]) -> list[str]:
    fb = {normalize_value(f) for f in forbidden}
    return [v for v in values if normalize_value(v) in fb]


def leakage_applies(instance: Instance, probe: Probe) -> list[str]:
    """Forgotten values this probe's reply must not contain (empty: metric not applicable)."""
    return _listed(forgotten_values(instance), probe.answer_key.forbidden)


def stale_applies(instance: Instance, probe: Probe) -> list[str]:
    """Superseded values this probe's answer must not give as current (empty: not applicable)."""
    return _listed(_stale_values(instance), probe.answer_key.forbidden)


def reflect_applies(instance: Instance, probe: Probe) -> list[str]:
    """The over-generalizations of the reflect operations this probe is about: the gold trace's
    `unsupported` claims and their rewordings addressed to the user ("you hate grammar" for "the
    user hates grammar", as the planner forbids them). Empty: the probe is not about a reflect operation (or its
    reflection has no over-generalization listed)."""
    claims = [u for o in gold_operations(instance, probe) if o.type == "reflect" for u in o.unsupported]
    return list(dict.fromkeys([*claims, *(as_person(u, "you") for u in claims)]))


def is_reflect_probe(instance: Instance, probe: Probe) -> bool:
    return any(o.type == "reflect" for o in gold_operations(instance, probe))


def applicable_labels(instance: Instance, probe: Probe) -> frozenset[str]:
    """The labels that apply to this probe: accuracy, op_f1, operation and provenance always;
    leakage, stale and reflect where the probe is about such a value. They are the labels the
    scorer gives the gold reply (tests/test_memops_score.py holds the two to each other on every
    probe), read here from the answer key alone, so that choosing which probes to ask
    (`memlife.memops.systems.answering.select_probes`) needs no scorer."""
    out = {"accuracy", "op_f1", "operation", "provenance"}
    out |= {"leakage"} if leakage_applies(instance, probe) else set()
    out |= {"stale"} if stale_applies(instance, probe) else set()
    out |= {"reflect"} if is_reflect_probe(instance, probe) else set()
    return frozenset(out)
