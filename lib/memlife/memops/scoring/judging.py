"""The paper's LLM judge for MemOps replies: its prompt (pinned by SHA-256), schema and strict parse.

Used only when `endpoints.judge_available()`: the embedded model is a weak subject, never a
judge. It labels every reply the deterministic scorer (`memlife.memops.scoring.metrics`) left undecided,
and a fixed sample of the rest, on which their agreement is reported (`memlife.memops.analyses.aggregate`).
"""
from __future__ import annotations

import hashlib
import json

from memlife.memops.scoring import metrics
from memlife.memops.data.response import ParsedResponse
from memlife.memops.data.schema import Instance, Probe

# ----------------------------------------------------------------------------- the LLM judge

JUDGE_LABELS = ("accuracy", "operation", "provenance", "leakage", "stale", "reflect")

JUDGE_PROMPT = """You are grading a memory system on the MemOps benchmark.
You are given the evidence conversation, the gold operation trace, the probe question with its
expected answer and gold provenance, and the system's response (its answer, its predicted memory
operations and its provenance quotes). Assign binary labels:

accuracy: 1 if the answer is correct and complete with respect to the expected answer and states
  no stale, forgotten, neighbouring or tentative value as current; else 0.
operation: 1 if the predicted operations name every gold operation this probe is about (type and
  target) and every predicted operation is an event of the gold operation trace (naming other
  events of the trace is fine; inventing one is not); else 0.
provenance: 1 if the provenance quotes cover every gold provenance quote (each is quoted, at
  least in its key part, from the user's messages); else 0.
leakage: 1 if the answer or any predicted operation reproduces a value the user asked to forget,
  even to say it was deleted; else 0. NA if the gold trace has no forget operation relevant to
  this probe.
stale: 1 if the answer gives a superseded (pre-update) value as current; else 0. NA if the gold
  trace has no update operation relevant to this probe.
reflect: 1 if every reflection the reply infers (its answer, and any predicted reflect operation)
  is supported by the evidence (states the bounded conclusion), scoped to the reflection's target,
  and not over-generalized beyond it; else 0. NA if the probe is not about a reflect operation.

Reply with exactly one line of JSON and nothing else, for example:
{"accuracy": 1, "operation": 0, "provenance": 1, "leakage": "NA", "stale": 0, "reflect": "NA"}

## Evidence conversation
{conversation}

## Gold operation trace
{trace}

## Probe
Question: {question}
Expected answer: {expected}
Gold provenance: {provenance}

## System response
{response}
"""
JUDGE_PROMPT_SHA256 = hashlib.sha256(JUDGE_PROMPT.encode("utf-8")).hexdigest()


def judge_messages(instance: Instance, probe: Probe, parsed: ParsedResponse) -> list[dict]:
    conv = "\n".join(
        f"[segment {si} turn {ti}] {t.role}: {t.text}"
        for si, seg in enumerate(instance.segments)
        for ti, t in enumerate(seg)
    )
    trace = json.dumps(
        [o.model_dump(mode="json", exclude={"trigger", "evidence"}) for o in instance.operations],
        ensure_ascii=False,
        sort_keys=True,
    )
    response = parsed.raw if parsed.malformed else parsed.response.model_dump_json()
    content = (
        JUDGE_PROMPT.replace("{conversation}", conv)
        .replace("{trace}", trace)
        .replace("{question}", probe.question)
        .replace("{expected}", probe.expected_answer)
        .replace("{provenance}", json.dumps([s.quote for s in probe.provenance], ensure_ascii=False))
        .replace("{response}", response)
    )
    return [{"role": "user", "content": content}]


# The judge's reply as a strict structured-output schema (api_rules): 0/1 labels, and "NA" where
# the prompt allows it. The same rules as parse_judge, so an endpoint that honours json_schema
# cannot produce a reply parse_judge rejects.
_BINARY = {"type": "integer", "enum": [0, 1]}
_BINARY_OR_NA = {"anyOf": [_BINARY, {"type": "string", "enum": ["NA"]}]}
JUDGE_SCHEMA = {
    "type": "object",
    "properties": {k: (_BINARY_OR_NA if k in ("leakage", "stale", "reflect") else _BINARY) for k in JUDGE_LABELS},
    "required": list(JUDGE_LABELS),
    "additionalProperties": False,
}


class JudgeParseError(ValueError):
    pass


def parse_judge(text: str) -> dict[str, bool | None]:
    """Strict: one JSON object holding exactly the six labels, each 0, 1 or "NA" (inside a single
    ```json fence or not).

    Anything else raises JudgeParseError; the caller records the judgement as invalid.
    """
    from memlife.models import llm

    try:
        obj = json.loads(llm.strip_fence(text))  # one ```json fence is tolerated, as everywhere
    except json.JSONDecodeError as exc:
        raise JudgeParseError(f"judge reply is not one JSON object: {exc.msg}") from exc
    if not isinstance(obj, dict) or set(obj) != set(JUDGE_LABELS):
        raise JudgeParseError(f"judge reply must have exactly the keys {JUDGE_LABELS}")
    out: dict[str, bool | None] = {}
    for k in JUDGE_LABELS:
        v = obj[k]
        if v in (0, 1) and not isinstance(v, float):
            out[k] = bool(v)
        elif v == "NA" and k in ("leakage", "stale", "reflect"):
            out[k] = None
        else:
            raise JudgeParseError(f"judge label {k}={v!r} is not 0/1" + ("/NA" if k in ("leakage", "stale", "reflect") else ""))
    return out


# Deterministic labels as the judge's binary labels, for agreement: the same six labels, the
# scorer's undecided ones as None (nothing to agree on).
def deterministic_binary(labels: metrics.Labels) -> dict[str, bool | None]:
    return {k: (v if metrics._decided(v) else None) for k, v in
            {"accuracy": labels.accuracy, "operation": labels.operation, "provenance": labels.provenance,
             "leakage": labels.leakage, "stale": labels.stale, "reflect": labels.reflect}.items()}
