"""The documented request rules (memlife.models.api_rules) and every schema the project sends under them."""
import re
from pathlib import Path

import pytest
from pydantic import BaseModel

from memlife.memops.data import gates, realize, response
from memlife.memops.scoring import judging
from memlife.models import api_rules

LIB = Path(__file__).resolve().parents[1] / "lib" / "memlife"

# Every structured-output schema the project sends to an endpoint, by the name its call site uses.
SENT_SCHEMAS = {
    "MemOpsResponse": response.MemOpsResponse.model_json_schema(),
    "GeneratedSegment": realize.GeneratedSegment.model_json_schema(),
    "VerifierVerdict": gates.VerifierVerdict.model_json_schema(),
    "MemOpsJudgement": judging.JUDGE_SCHEMA,
}


def test_every_call_site_schema_is_in_the_checked_list():
    """A new `complete_json(schema=X)` or `named_schema_format("X", ...)` anywhere in the library
    fails here until X is added above (and so checked below)."""
    used = set()
    for path in LIB.rglob("*.py"):
        text = path.read_text()
        used |= set(re.findall(r"complete_json\([^)]*?schema=(\w+)", text, re.S))
        used |= set(re.findall(r'named_schema_format\("(\w+)"', text))
    used.discard("schema")  # llm.complete_json's own parameter
    assert used and used <= set(SENT_SCHEMAS), sorted(used - set(SENT_SCHEMAS))


@pytest.mark.parametrize("name", sorted(SENT_SCHEMAS))
def test_every_schema_sent_is_valid_under_the_strict_rules(name):
    assert api_rules.strict_schema_problems(SENT_SCHEMAS[name]) == []


def test_the_checker_finds_what_openai_rejects():
    class Loose(BaseModel):  # the realizer's segment before: no additionalProperties: false
        turns: list[str]

    class Optional_(BaseModel):
        model_config = {"extra": "forbid"}
        answer: str
        note: str = ""  # has a default, so pydantic leaves it out of required

    assert any("additionalProperties" in p for p in api_rules.strict_schema_problems(Loose.model_json_schema()))
    assert any("not in required: ['note']" in p
               for p in api_rules.strict_schema_problems(Optional_.model_json_schema()))
    bounded = api_rules.strict_schema_problems(response.bounded_json_schema())
    assert bounded and all("maxLength" in p for p in bounded)  # the embedded model's grammar only
    assert api_rules.strict_schema_problems({"type": "array", "items": {"type": "string"}}) == [
        "$: the root must be an object"]
    deep = {"type": "object", "properties": {}, "required": [], "additionalProperties": False}
    node = deep
    for _ in range(api_rules.MAX_NESTING):
        child = {"type": "object", "properties": {}, "required": [], "additionalProperties": False}
        node["properties"]["x"], node["required"] = child, ["x"]
        node = child
    assert any("nested deeper" in p for p in api_rules.strict_schema_problems(deep))
    assert api_rules.strict_schema_problems({"type": "object", "properties": {"a": {"$ref": "#/$defs/B"}},
                                             "required": ["a"], "additionalProperties": False}) == [
        "$.a: $ref '#/$defs/B' does not resolve to a local definition"]


def test_reasoning_models_by_name():
    for m in ("o1", "o1-mini", "o3", "o3-mini-2025-01-31", "o4-mini", "gpt-5", "gpt-5-mini", "gpt-5.4-mini",
              "gpt-5.5", "openai/gpt-5-nano"):
        assert api_rules.is_reasoning_model(m), m
    for m in ("gpt-4o", "gpt-4o-mini", "gpt-4.1-mini", "omni-model", "o", "qwen3-32b", "llama-3.1-8b", "gpt-50x"):
        assert not api_rules.is_reasoning_model(m), m


def test_known_context_windows():
    assert api_rules.known_context_window("gpt-4o-mini-2024-07-18") == 128_000
    assert api_rules.known_context_window("gpt-4.1-mini") == 1_047_576
    assert api_rules.known_context_window("openai/gpt-4o") == 128_000
    assert api_rules.known_context_window("Qwen/Qwen2.5-7B-Instruct") is None
