"""What OpenAI-compatible endpoints document about the requests they accept.

One place for the rules the client follows and the test emulator (tests/strictserver.py)
enforces, so that the two cannot drift apart:

- **Strict structured output** (``response_format`` json_schema with ``strict: true``): the root is
  an object; every object lists all its properties in ``required`` and sets
  ``additionalProperties: false``; only a subset of JSON Schema keywords is supported (OpenAI,
  "Structured Outputs", supported schemas). ``strict_schema_problems`` names every violation.
- **Reasoning models** (OpenAI's o-series and gpt-5 family): ``max_completion_tokens`` instead of
  ``max_tokens`` (which they reject), only the default temperature, and a completion budget that
  also pays for the hidden reasoning tokens.
- **Context windows** of the API models the profiles name.
"""
from __future__ import annotations

import re

# Keywords strict mode accepts, per the documented subset. Anything else (minLength, maxLength,
# patternProperties, uniqueItems, default, ...) is rejected with a 400.
_COMMON = {"type", "description", "title", "enum", "const", "anyOf", "$ref", "$defs", "definitions"}
_BY_TYPE = {
    "object": {"properties", "required", "additionalProperties"},
    "array": {"items", "minItems", "maxItems"},
    "string": {"pattern", "format"},
    "number": {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"},
    "integer": {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"},
    "boolean": set(),
    "null": set(),
}
MAX_NESTING = 10
MAX_PROPERTIES = 5000


def strict_schema_problems(schema: dict) -> list[str]:
    """Every way `schema` breaks the strict structured-output rules, each naming its JSON path;
    [] when an endpoint enforcing them would accept it."""
    problems: list[str] = []
    defs = {**(schema.get("$defs") or {}), **(schema.get("definitions") or {})}
    n_props = 0

    def walk(node, path: str, depth: int, root: bool = False) -> None:
        nonlocal n_props
        if not isinstance(node, dict):
            problems.append(f"{path}: not a schema object")
            return
        if depth > MAX_NESTING:
            problems.append(f"{path}: nested deeper than {MAX_NESTING} levels")
            return
        if "$ref" in node:
            ref = node["$ref"]
            name = ref.rsplit("/", 1)[-1]
            if not re.fullmatch(r"#/(\$defs|definitions)/[^/]+", ref) or name not in defs:
                problems.append(f"{path}: $ref {ref!r} does not resolve to a local definition")
            extra = set(node) - {"$ref", "description", "title"}
            if extra:
                problems.append(f"{path}: keywords beside $ref: {sorted(extra)}")
            return
        if "anyOf" in node:
            if root:
                problems.append(f"{path}: the root may not be anyOf")
            for i, sub in enumerate(node["anyOf"]):
                walk(sub, f"{path}.anyOf[{i}]", depth + 1)
            extra = set(node) - {"anyOf", "description", "title"}
            if extra:
                problems.append(f"{path}: keywords beside anyOf: {sorted(extra)}")
            return
        types = node.get("type")
        if types is None:
            if "enum" in node or "const" in node:
                return  # an enum of literal values needs no type
            problems.append(f"{path}: no type")
            return
        type_list = types if isinstance(types, list) else [types]
        allowed = set(_COMMON)
        for t in type_list:
            if t not in _BY_TYPE:
                problems.append(f"{path}: unsupported type {t!r}")
                continue
            allowed |= _BY_TYPE[t]
        for key in sorted(set(node) - allowed):
            problems.append(f"{path}: keyword {key!r} is not supported in strict mode")
        if root and type_list != ["object"]:
            problems.append(f"{path}: the root must be an object")
        if "object" in type_list:
            props = node.get("properties")
            if not isinstance(props, dict):
                problems.append(f"{path}: an object must list its properties")
                props = {}
            n_props += len(props)
            if node.get("additionalProperties") is not False:
                problems.append(f"{path}: additionalProperties must be false")
            required = node.get("required") or []
            missing = [p for p in props if p not in required]
            if missing:
                problems.append(f"{path}: properties not in required: {missing}")
            for name, sub in props.items():
                walk(sub, f"{path}.{name}", depth + 1)
        if "array" in type_list:
            if "items" not in node:
                problems.append(f"{path}: an array must give its items")
            else:
                walk(node["items"], f"{path}[]", depth + 1)

    walk(schema, "$", 1, root=True)
    for name, sub in defs.items():
        walk(sub, f"$defs.{name}", 1)
    if n_props > MAX_PROPERTIES:
        problems.append(f"$: {n_props} properties in all, more than {MAX_PROPERTIES}")
    return problems


# ------------------------------------------------------------------------------ reasoning models

_REASONING = re.compile(r"^(o\d+|gpt-5)([-.].*)?$")


def is_reasoning_model(model: str) -> bool:
    """OpenAI's reasoning models by name (o1, o3-mini, o4-mini, gpt-5, gpt-5.4-mini, ...), with or
    without a provider prefix such as 'openai/'."""
    return bool(_REASONING.match(model.split("/")[-1].lower()))


# Completion tokens kept for a reasoning model's hidden reasoning on top of each call's own
# budget: a 16-token judge budget is otherwise spent before the first visible token and the
# reply comes back empty (finish_reason "length").
DEFAULT_REASONING_TOKENS = 4096


# ------------------------------------------------------------------------------ context windows

# Tokens of context (prompt + completion) of the API models the profiles name, from their model
# pages. A model not listed needs its window configured (or a server that reports it).
CONTEXT_WINDOWS: dict[str, int] = {
    "gpt-4o-mini": 128_000,
    "gpt-4o": 128_000,
    "gpt-4.1": 1_047_576,
    "gpt-4.1-mini": 1_047_576,
    "gpt-4.1-nano": 1_047_576,
    "gpt-5": 400_000,
    "gpt-5-mini": 400_000,
    "gpt-5-nano": 400_000,
    "gpt-5.4-mini": 400_000,
    "o3": 200_000,
    "o3-mini": 200_000,
    "o4-mini": 200_000,
}


def known_context_window(model: str) -> int | None:
    """The listed window of `model` or of the model it is a dated snapshot of
    (gpt-4o-mini-2024-07-18), else None."""
    base = model.split("/")[-1].lower()
    for name in sorted(CONTEXT_WINDOWS, key=len, reverse=True):
        if base == name or base.startswith(name + "-2"):
            return CONTEXT_WINDOWS[name]
    return None
