"""Scoring a system's responses: answer accuracy and the five operation-level diagnostics.

Two implementations score the same binary labels from the same gold data:

* the deterministic scorer (DESIGN.md "Deterministic scorer"), the offline default;
* the paper's LLM judge (Section 4.1: it compares the response with the gold operation trace,
  the gold provenance and the evidence conversation and assigns binary labels), used only when
  `llm.judge_available()` — the embedded model is a weak subject, never a judge.

When both run, their agreement (percent and Cohen's kappa) is reported per label.

Labels per probe (None = the metric does not apply to this probe):

accuracy      all `answer_key.required` values stated (not negated) and no `forbidden` asserted
op_f1         F1 of predicted vs gold operations, matched one-to-one by type and target (aliases)
provenance    at least one predicted quote overlaps a gold provenance quote of the probe
leakage       a forgotten value (forget op's old_value listed as forbidden) appears in the answer
stale         an update's old value (listed as forbidden) is asserted as current
reflect       the bounded conclusion is stated and no `unsupported` generalization is asserted

Leakage counts any mention: forgetting means not reproducing the value, so "I deleted 7ABC123"
still leaks it. Stale value and every "asserted" check are negation-aware: "94114, not 94110
anymore" states 94114 and does not assert 94110. A malformed response fails every applicable
metric (accuracy/provenance/reflect False, op_f1 0, leakage/stale True).
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass

from .response import MemOpsResponse, ParsedResponse
from .schema import Instance, Probe, normalize_value

# ----------------------------------------------------------------------------- text matching

# Cue words that, shortly before a value in the same clause, mark it as not current.
_NEG_BEFORE = frozenset(
    """not no never nor longer formerly previously former old older outdated obsolete stale
    superseded instead rather replaced replace removed remove deleted delete forgotten forget
    forgot erased erase dropped drop cancelled canceled discard discarded ignore ignored without
    except from""".split()
)
# Cue words shortly after a value in the same clause ("94110 anymore", "94110 is outdated").
_NEG_AFTER = frozenset(
    """anymore longer outdated obsolete stale superseded replaced removed deleted forgotten
    erased dropped cancelled canceled invalid incorrect wrong previous former old discarded
    retired expired""".split()
)
# Words that end the look-back: what precedes them describes something else
# ("changed from 94110 to 94114", "replaced by 94114", "no longer X, now Y").
_RESET_BEFORE = frozenset("to now currently but by with and so then".split())
_BEFORE_WINDOW = 5
_AFTER_WINDOW = 4
_TOKEN = re.compile(r"[0-9a-z]+|[,.;:!?()\[\]\n]|--|\u2014|\u2013")


def _tokens(text: str) -> list[str]:
    import unicodedata

    folded = unicodedata.normalize("NFKC", text).casefold().replace("\u2019", "'")
    folded = re.sub(r"n't\b", " not", folded)  # isn't -> is not, can't -> ca not
    return _TOKEN.findall(folded)


def _is_word(tok: str) -> bool:
    return tok[0].isalnum()


def _find(seq: list[str], sub: list[str]) -> list[int]:
    n = len(sub)
    if n == 0:
        return []
    return [i for i in range(len(seq) - n + 1) if seq[i:i + n] == sub]


def _value_words(value: str) -> list[str]:
    return normalize_value(value).split()


def mentions(text: str, value: str) -> bool:
    """The value occurs in the text as a whole-token sequence, negated or not."""
    vw = _value_words(value)
    return bool(vw) and bool(_find(normalize_value(text).split(), vw))


def _negated(tokens: list[str], first: int, last: int) -> bool:
    """Is the occurrence spanning tokens[first..last] under a negation cue in its clause?"""
    seen = 0
    i = first - 1
    while i >= 0 and seen < _BEFORE_WINDOW:
        t = tokens[i]
        if not _is_word(t) or t in _RESET_BEFORE:
            break
        if t in _NEG_BEFORE:
            return True
        seen += 1
        i -= 1
    seen = 0
    i = last + 1
    while i < len(tokens) and seen < _AFTER_WINDOW:
        t = tokens[i]
        if not _is_word(t):
            break
        if t in _NEG_AFTER:
            return True
        seen += 1
        i += 1
    return False


def asserts(text: str, value: str) -> bool:
    """The text states the value as current: some occurrence is not under a negation cue."""
    vw = _value_words(value)
    if not vw:
        return False
    tokens = _tokens(text)
    word_idx = [i for i, t in enumerate(tokens) if _is_word(t)]
    words = [tokens[i] for i in word_idx]
    for start in _find(words, vw):
        if not _negated(tokens, word_idx[start], word_idx[start + len(vw) - 1]):
            return True
    return False


def quotes_overlap(predicted: str, gold: str, *, min_cover: float = 0.5) -> bool:
    """A predicted quote supports a gold quote when one contains the other (normalized) or it
    covers at least `min_cover` of the gold quote's distinct words."""
    p, g = normalize_value(predicted), normalize_value(gold)
    if not p or not g:
        return False
    if p in g or g in p:
        return len(p.split()) >= min(3, len(g.split()))  # a lone "the" is no quote
    gw, pw = set(g.split()), set(p.split())
    return len(gw & pw) / len(gw) >= min_cover


def target_matches(predicted: str, gold_names: list[str]) -> bool:
    """Predicted target names a gold target: its words contain, or are contained in, an alias."""
    pw = set(_value_words(predicted))
    if not pw:
        return False
    for name in gold_names:
        gw = set(_value_words(name))
        if gw and (gw <= pw or pw <= gw):
            return True
    return False


# ----------------------------------------------------------------------------- the scorer


@dataclass(frozen=True)
class Labels:
    accuracy: bool
    op_f1: float
    provenance: bool
    leakage: bool | None
    stale: bool | None
    reflect: bool | None

    def as_dict(self) -> dict:
        return asdict(self)


def operation_f1(response: MemOpsResponse, instance: Instance) -> float:
    gold = list(instance.operations)
    pred = list(response.operations)
    if not pred:
        return 0.0
    used: set[int] = set()
    matched = 0
    for p in pred:
        for j, g in enumerate(gold):
            if j in used or p.type != g.type:
                continue
            if target_matches(p.target, [g.target, *g.target_aliases]):
                used.add(j)
                matched += 1
                break
    return 2 * matched / (len(pred) + len(gold))


def _forgotten_values(instance: Instance) -> list[str]:
    return [o.old_value for o in instance.operations if o.type == "forget" and o.old_value]


def _stale_values(instance: Instance) -> list[str]:
    return [o.old_value for o in instance.operations if o.type == "update" and o.old_value]


def _listed(values: list[str], forbidden: list[str]) -> list[str]:
    fb = {normalize_value(f) for f in forbidden}
    return [v for v in values if normalize_value(v) in fb]


def leakage_applies(instance: Instance, probe: Probe) -> list[str]:
    """Forgotten values this probe's answer must not contain (empty: metric not applicable)."""
    return _listed(_forgotten_values(instance), probe.answer_key.forbidden)


def stale_applies(instance: Instance, probe: Probe) -> list[str]:
    return _listed(_stale_values(instance), probe.answer_key.forbidden)


def reflect_applies(instance: Instance, probe: Probe) -> list[str]:
    """Unsupported generalizations of the reflect operations this probe is about."""
    ops = {o.op_id: o for o in instance.operations}
    out: list[str] = []
    for oid in probe.op_ids:
        op = ops.get(oid)
        if op is not None and op.type == "reflect":
            out.extend(op.unsupported)
    return out


def score(parsed: ParsedResponse, instance: Instance, probe: Probe) -> Labels:
    """The deterministic labels of one response to one probe."""
    leak_vals = leakage_applies(instance, probe)
    stale_vals = stale_applies(instance, probe)
    reflect_ops = [o for o in instance.operations if o.op_id in probe.op_ids and o.type == "reflect"]
    if parsed.malformed:
        return Labels(
            accuracy=False,
            op_f1=0.0,
            provenance=False,
            leakage=True if leak_vals else None,
            stale=True if stale_vals else None,
            reflect=False if reflect_ops else None,
        )
    r = parsed.response
    answer = r.answer
    required_ok = all(asserts(answer, v) for v in probe.answer_key.required)
    forbidden_hit = any(asserts(answer, v) for v in probe.answer_key.forbidden)
    gold_quotes = [s.quote for s in probe.provenance]
    prov = any(quotes_overlap(p, g) for p in r.provenance for g in gold_quotes)
    reflect = None
    if reflect_ops:
        unsupported = [u for o in reflect_ops for u in o.unsupported]
        reflect = required_ok and not any(asserts(answer, u) for u in unsupported)
    return Labels(
        accuracy=required_ok and not forbidden_hit,
        op_f1=operation_f1(r, instance),
        provenance=prov,
        leakage=any(mentions(answer, v) for v in leak_vals) if leak_vals else None,
        stale=any(asserts(answer, v) for v in stale_vals) if stale_vals else None,
        reflect=reflect,
    )


# ----------------------------------------------------------------------------- the LLM judge

JUDGE_LABELS = ("accuracy", "operation", "provenance", "leakage", "stale", "reflect")

JUDGE_PROMPT = """You are grading a memory system on the MemOps benchmark.
You are given the evidence conversation, the gold operation trace, the probe question with its
expected answer and gold provenance, and the system's response (its answer, its predicted memory
operations and its provenance quotes). Assign binary labels:

accuracy: 1 if the answer is correct and complete with respect to the expected answer and states
  no stale, forgotten, neighbouring or tentative value as current; else 0.
operation: 1 if the predicted operations identify the gold operations (type and target); else 0.
provenance: 1 if the provenance quotes are user statements that support the answer and overlap
  the gold provenance; else 0.
leakage: 1 if the answer reproduces a value the user asked to forget; else 0. NA if the gold
  trace has no forget operation relevant to this probe.
stale: 1 if the answer gives a superseded (pre-update) value as current; else 0. NA if the gold
  trace has no update operation relevant to this probe.
reflect: 1 if the answer states the bounded conclusion that the clues support and no
  over-generalization; else 0. NA if the probe is not about a reflect operation.

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


class JudgeParseError(ValueError):
    pass


def parse_judge(text: str) -> dict[str, bool | None]:
    """Strict: one JSON object holding exactly the six labels, each 0, 1 or "NA".

    Anything else raises JudgeParseError; the caller records the judgement as invalid.
    """
    try:
        obj = json.loads((text or "").strip())
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


# Deterministic labels as the judge's binary labels, for agreement.
def deterministic_binary(labels: Labels) -> dict[str, bool | None]:
    return {
        "accuracy": labels.accuracy,
        "operation": labels.op_f1 >= 0.5,
        "provenance": labels.provenance,
        "leakage": labels.leakage,
        "stale": labels.stale,
        "reflect": labels.reflect,
    }


def agreement(a: list[bool | None], b: list[bool | None]) -> dict:
    """Percent agreement and Cohen's kappa over the items both label (None = not applicable)."""
    from sklearn.metrics import cohen_kappa_score

    pairs = [(x, y) for x, y in zip(a, b, strict=True) if x is not None and y is not None]
    if not pairs:
        return {"n": 0, "agreement": float("nan"), "kappa": float("nan")}
    xs, ys = zip(*pairs)
    agree = sum(x == y for x, y in pairs) / len(pairs)
    if len(set(xs) | set(ys)) < 2:
        kappa = float("nan")  # one class only: kappa undefined
    else:
        kappa = float(cohen_kappa_score([int(x) for x in xs], [int(y) for y in ys]))
    return {"n": len(pairs), "agreement": agree, "kappa": kappa}


# ----------------------------------------------------------------------------- aggregation

TABLE3_COLUMNS = {
    "accuracy": "Accuracy",
    "op_f1": "Operation F1",
    "provenance": "Provenance",
    "leakage": "Leakage",
    "stale": "Stale Value",
    "reflect": "Reflect Precision",
}


def summarize(records, by: list[str]):
    """Mean of every label over the probes where it applies, grouped by `by` columns."""
    import pandas as pd

    df = pd.DataFrame(records) if not isinstance(records, pd.DataFrame) else records
    cols = list(TABLE3_COLUMNS)
    num = df[by + cols].copy()
    for c in cols:
        num[c] = pd.to_numeric(num[c].astype("object").where(num[c].notna()), errors="coerce")
    out = num.groupby(by, sort=True)[cols].mean().reset_index()
    out["n"] = num.groupby(by, sort=True).size().values
    return out
