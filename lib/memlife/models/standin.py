"""Stand-in replies: what a capable model would answer, shaped for each of memlife's roles.

Used where the run's structure matters and the model's judgement does not: `make estimate`
(llm mode "estimate" answers every request the cache and the recording lack with one of these,
sends nothing and caches nothing, so the notebooks take the paths a real run takes and their
calls can be counted), and the strict loopback emulator of the tests.

- the MemOps realizer's segment: 8 turns, each user turn its prompt names carrying the required
  sentence verbatim (so the gates pass, as a capable generator's would);
- any other JSON schema: its smallest valid instance (an empty answer, a passing verdict, the
  first label of every enum);
- MemOS's memory reader (a text prompt asking for a JSON object with a "memory list"): one memory
  per user line of the conversation it quotes, so that MemOS stores and searches something;
- a CORRECT/INCORRECT judge: "CORRECT"; an importance score: "7"; anything else: a short text.
"""
from __future__ import annotations

import hashlib
import json
import re


def instance_of(schema: dict, defs: dict | None = None, text: str = "unknown"):
    """A small value valid under `schema` (the strict subset): the reply a schema-bound model
    gives; its strings are `text`."""
    defs = defs if defs is not None else {**(schema.get("$defs") or {})}
    if "$ref" in schema:
        return instance_of(defs[schema["$ref"].rsplit("/", 1)[1]], defs, text)
    if "anyOf" in schema:
        return instance_of(schema["anyOf"][0], defs, text)
    if "enum" in schema:
        return schema["enum"][0]
    t = schema.get("type")
    t = t[0] if isinstance(t, list) else t
    if t == "object":
        return {k: instance_of(v, defs, text) for k, v in (schema.get("properties") or {}).items()}
    if t == "array":
        return [instance_of(schema["items"], defs, text) for _ in range(schema.get("minItems", 0))]
    return {"string": text, "integer": 0, "number": 0.0, "boolean": True, "null": None}[t]


_FIXED_TURN = re.compile(r'^- (user|assistant) turn (\d+): "(.*)"$', re.M)
_OPENER = re.compile(r'^The first user turn opens with: "(.*?)"', re.M)


def generator_turns(prompt: str) -> list[str]:
    """The 8 turns a capable generator writes for memlife's realizer prompt: each turn the prompt
    names carries its sentence verbatim, in ordinary surrounding speech."""
    fixed = {(role, int(n)): sentence for role, n, sentence in _FIXED_TURN.findall(prompt)}
    opener = _OPENER.search(prompt)
    turns = []
    for slot in range(1, 5):
        greeting = opener.group(1) if opener and slot == 1 else "Hi again."
        sentence = fixed.get(("user", slot), "")
        turns.append(f"{greeting} {sentence} Could you help me plan the next few days around that?".replace("  ", " "))
        echo = fixed.get(("assistant", slot), "")
        turns.append(f"Sure. Here is a plan: errands on Monday, calls on Wednesday, and Friday kept free for you. {echo}"
                     .strip())
    return turns


def _tag(messages: list[dict]) -> str:
    # Each request its own reply, as a model's differ: identical stand-ins would merge requests a
    # run keeps apart (the restore audit judges each distinct answer once).
    return hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()[:8]


_USER_LINE = re.compile(r"^user:\s*(.+)$", re.M)


def memory_list_reply(prompt: str) -> str:
    """MemOS's extraction format: the user's lines of the quoted conversation as memories."""
    said = _USER_LINE.findall(prompt)[:5]
    return json.dumps({"memory list": [{"key": f"user statement {i + 1}", "memory_type": "UserMemory",
                                        "value": line.strip(), "tags": ["conversation"]}
                                       for i, line in enumerate(said)],
                       "summary": " ".join(line.strip() for line in said)[:400]})


def text_reply(messages: list[dict]) -> str:
    text = "\n".join(str(m.get("content")) for m in messages)
    if '"memory list"' in text:
        return memory_list_reply(text)
    if "CORRECT or INCORRECT" in text:
        return "CORRECT"
    if "Importance (1-10)" in text:
        return "7"
    return f"I do not know ({_tag(messages)})."


def reply_text(messages: list[dict], response_format: dict | None, *, mark: str | None = None) -> str:
    """The stand-in reply to a chat request with this response format. `mark` goes into its free
    text (never into a label or a number, which a strict parser reads whole), so that a request
    built from it can be told apart (collect mode: ``memlife.models.reply_cache``)."""
    last = str(messages[-1].get("content")) if messages else ""
    fmt = response_format or {}
    if fmt.get("type") == "json_schema":
        spec = fmt.get("json_schema") or {}
        if spec.get("name") == "GeneratedSegment":
            turns = generator_turns(last)
            if mark:
                turns[-1] = f"{turns[-1]} {mark}"
            return json.dumps({"turns": turns})
        text = f"unknown {_tag(messages)}" + (f" {mark}" if mark else "")
        return json.dumps(instance_of(spec.get("schema") or {}, text=text))
    if fmt.get("type") == "json_object":
        return json.dumps({"memory": [], "memory list": [], "summary": mark or ""})
    reply = text_reply(messages)
    if mark and reply.startswith("I do not know"):
        reply = f"{reply} {mark}"
    return reply
