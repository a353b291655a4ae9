"""Quality gates (Section 3.3): deterministic local gates, the LLM verifier, regeneration.

Each deterministic gate returns `GateFailure(gate, reason)` records naming the gate and what
exactly is wrong (segment, turn, probe or operation), so a failed attempt can be stored and its
reasons fed back to the realizer. The LLM verifier runs only when a capable "verifier"
endpoint is configured; the embedded model is too weak to audit semantics.
"""
from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from pydantic import BaseModel, ConfigDict, ValidationError

from memlife.memops.data import schema as _schema
from memlife.memops.data.schema import (
    DISTRACTOR_TAGS,
    N_SEGMENTS,
    PROBE_TYPES,
    TURNS_PER_SEGMENT,
    Instance,
    Probe,
    Span,
    key_value,
    normalize_value,
    user_turn_text,
)

GATES = (
    "schema",
    "segments",
    "alternation",
    "quote_role",
    "quote_verbatim",
    "probe_structure",
    "gold_response",
    "retained_control",
    "grounding",
    "leaked_label",
    "long_context",
    "filler_value",
    "distractor_unspoken",
    "llm_verifier",
)


@dataclass(frozen=True)
class GateFailure:
    gate: str
    reason: str

    def __str__(self) -> str:
        return f"[{self.gate}] {self.reason}"


# Internal labels that must never surface in dialogue. A capable realizer writes natural speech,
# where "a gold necklace", "no trace of it", "on reflection", "career trajectory", "please forget
# the code" and "I'll update you" are ordinary words; so the gate looks for *label forms* only:
# identifiers copied from the schema, operation names written as labels, and benchmark vocabulary
# that no one says in conversation. Bare "probe" stays allowed (a meat probe, a space probe, a
# police probe): only its benchmark compounds are labels.
_OPS = "remember|forget|update|reflect|trajectory"


def _schema_identifiers() -> list[str]:
    # Derived from the models, so a field added to the schema is caught without editing this list.
    models = [v for v in vars(_schema).values()
              if isinstance(v, type) and issubclass(v, BaseModel) and v.__module__ == _schema.__name__]
    # A one-word tag ("tentative") is an ordinary word, so only the compound tags count as labels.
    snake = {f for m in models for f in m.model_fields if "_" in f} | {t for t in DISTRACTOR_TAGS if "_" in t}
    camel = {m.__name__ for m in models if re.fullmatch(r"(?:[A-Z][a-z]+){2,}", m.__name__)}
    words = snake | camel | set(PROBE_TYPES) | {"trajectoryops", "memops"}
    return sorted(words, key=len, reverse=True)


def _camel_fields() -> list[str]:
    # opType, probeId: the fields as a JSON-minded writer spells them. Matched case-sensitively,
    # since lowercased they are words ("username" from user_name).
    snake = [w for w in _schema_identifiers() if "_" in w]
    return [re.sub(r"_([a-z])", lambda m: m.group(1).upper(), w) for w in snake]


# "state transition", "state-transition": the probe types spaced out. None of the six pairs is
# a phrase of everyday dialogue, so all are labels.
_SPACED_PROBES = [r"[\s_-]+".join(w.lower() for w in re.findall(r"[A-Z][a-z]+", p)) for p in PROBE_TYPES]

LEAK_PATTERN = re.compile(
    r"\b(?:"
    + "|".join(re.escape(w) for w in _schema_identifiers()) + "|"
    + "(?-i:" + "|".join(_camel_fields()) + ")|"
    + "|".join(_SPACED_PROBES)
    # benchmark vocabulary; "gold" alone, "gold standard" and "gold key" are ordinary English
    + r"|gold[\s_-]+(?:traces?|answers?|operations?|ops?|labels?|responses?|provenance|annotations?)"
    r"|memory[\s_-]+operations?|operation[\s_-]+types?|op[\s_-]+types?|probe[\s_-]+(?:types?|ids?|questions?)"
    rf"|(?:{_OPS})[\s-]+(?:ops?|operations?|probes?)"
    # colon- or equals-labelled: "Operation: update", "type: reflect", "op=forget"; a lone
    # "Update: I got the job" is how people write news, so the key before the colon must be a label
    rf"|(?:operations?|op|type|label|tag|probe)\s*[:=]\s*[\"'`\[(]?\s*(?:{_OPS})"
    # op and instance identifiers, case-sensitive so that a product name (the OP-1 synth) passes
    rf"|(?-i:op_?\d+)|(?-i:T\d{{3,}}-(?:{_OPS})(?:-p\d+)?)"
    r")\b"
    # bracketed: "[forget]", "(update)", "<reflect>"
    rf"|[\[({{<]\s*(?:{_OPS})\s*[\])}}>]",
    re.IGNORECASE,
)
LEAK_CAPS = re.compile(r"\b(?:REMEMBER|FORGET|UPDATE|REFLECT|TRAJECTORY)\b")
# An operation name in capitals next to another all-caps word is shouting ("PLEASE DON'T FORGET
# IT"), which is emphasis, not a label; followed by a colon ("UPDATE: NEW ADDRESS") it is a
# heading, which is.
_SHOUTED = re.compile(r"[A-Z][A-Z']+")


def _shouted(text: str, m: re.Match) -> bool:
    if text[m.end():].lstrip().startswith((":", "=")):
        return False
    near = re.findall(r"[A-Za-z']+", text[: m.start()])[-1:] + re.findall(r"[A-Za-z']+", text[m.end():])[:1]
    return any(_SHOUTED.fullmatch(w) and not LEAK_CAPS.fullmatch(w) for w in near)


def leaked_labels(text: str) -> list[str]:
    return ([m.group(0) for m in LEAK_PATTERN.finditer(text)]
            + [m.group(0) for m in LEAK_CAPS.finditer(text) if not _shouted(text, m)])


def _all_spans(inst: Instance) -> list[tuple[str, Span]]:
    out: list[tuple[str, Span]] = []
    for op in inst.operations:
        out.append((f"operation {op.op_id} trigger", op.trigger))
        out += [(f"operation {op.op_id} evidence {i}", s) for i, s in enumerate(op.evidence)]
    for p in inst.probes:
        out += [(f"probe {p.probe_id} provenance {i}", s) for i, s in enumerate(p.provenance)]
        if p.reasoning_chain:
            out += [(f"probe {p.probe_id} reasoning source {i}", s)
                    for i, s in enumerate(p.reasoning_chain.source_facts)]
    return out


def gate_segments(inst: Instance) -> list[GateFailure]:
    out = []
    if len(inst.segments) != N_SEGMENTS:
        out.append(GateFailure("segments", f"missing segment: expected {N_SEGMENTS} segments, found {len(inst.segments)}"))
    for s, seg in enumerate(inst.segments):
        if len(seg) != TURNS_PER_SEGMENT:
            out.append(GateFailure("segments", f"segment {s} has {len(seg)} turns, expected {TURNS_PER_SEGMENT}"))
    return out


def gate_alternation(inst: Instance) -> list[GateFailure]:
    out = []
    for s, seg in enumerate(inst.segments):
        for t, turn in enumerate(seg):
            want = "user" if t % 2 == 0 else "assistant"
            if turn.role != want:
                out.append(GateFailure("alternation", f"segment {s} turn {t}: expected {want}, found {turn.role}"))
        if seg and seg[-1].role != "assistant":
            out.append(GateFailure("alternation", f"segment {s} does not end with the assistant"))
    return out


def gate_quotes(inst: Instance) -> list[GateFailure]:
    out = []
    for where, span in _all_spans(inst):
        seg_ok = span.segment < len(inst.segments) and span.turn < len(inst.segments[span.segment])
        if not seg_ok:
            out.append(GateFailure("quote_role", f"{where} cites segment {span.segment} turn {span.turn}, which does not exist"))
            continue
        text = user_turn_text(inst, span)
        if text is None:
            role = inst.segments[span.segment][span.turn].role
            out.append(GateFailure("quote_role", f"{where} cites segment {span.segment} turn {span.turn}, an {role} turn, not a user turn"))
        elif span.quote not in text:
            out.append(GateFailure("quote_verbatim", f"{where}: quote {span.quote!r} is not verbatim in segment {span.segment} turn {span.turn}"))
    return out


def gate_probe_structure(inst: Instance) -> list[GateFailure]:
    out = []
    fail = lambda r: out.append(GateFailure("probe_structure", r))  # noqa: E731
    op_ids = [o.op_id for o in inst.operations]
    types = [o.type for o in inst.operations]
    if len(set(op_ids)) != len(op_ids):
        fail("duplicate op_id in operations")
    pids = [p.probe_id for p in inst.probes]
    if len(set(pids)) != len(pids):
        fail("duplicate probe_id in probes")
    need = {"remember": "remember", "forget": "forget", "update": "update", "reflect": "reflect"}
    if inst.op_type in need and need[inst.op_type] not in types:
        fail(f"{inst.op_type} conversation has no {need[inst.op_type]} operation")
    if inst.op_type == "trajectory":
        if len(inst.operations) < 3:
            fail(f"trajectory conversation composes only {len(inst.operations)} operations (need >= 3)")
        if not any(p.probe_type == "StateTrajectory" for p in inst.probes):
            fail("trajectory conversation has no StateTrajectory probe")
    for p in inst.probes:
        if p.probe_type == "StateTrajectory" and inst.op_type != "trajectory":
            fail(f"probe {p.probe_id}: StateTrajectory on a {inst.op_type} conversation (trajectory only)")
        for oid in p.op_ids:
            if oid not in op_ids:
                fail(f"probe {p.probe_id}: refers to unknown operation {oid}")
        if p.multi_hop != (p.reasoning_chain is not None):
            fail(f"probe {p.probe_id}: multi_hop={p.multi_hop} but reasoning chain {'missing' if p.multi_hop else 'present'}")
        for v in p.answer_key.required + p.answer_key.forbidden:
            if v != normalize_value(v) or not v:
                fail(f"probe {p.probe_id}: answer key value {v!r} is not normalized")
        both = set(p.answer_key.required) & set(p.answer_key.forbidden)
        if both:
            fail(f"probe {p.probe_id}: {sorted(both)} both required and forbidden")
    gone = [normalize_value(o.old_value) for o in inst.operations if o.type == "forget" and o.old_value]
    for p in inst.probes:
        said = f" {normalize_value(p.expected_answer)} "
        for v in gone:
            if f" {v} " in said:
                fail(f"probe {p.probe_id}: expected answer repeats the deleted value {v!r}")
    for o in inst.operations:
        if o.type == "update" and (not o.old_value or not o.new_value or o.old_value == o.new_value):
            fail(f"operation {o.op_id}: an update needs distinct old and new values")
        if o.type == "forget" and (not o.old_value or o.new_value):
            fail(f"operation {o.op_id}: a forget removes an old value and sets none")
        if o.type == "remember" and (not o.new_value or o.old_value):
            fail(f"operation {o.op_id}: a remember introduces a new value only")
        if o.type == "reflect" and (not o.new_value or not o.unsupported):
            fail(f"operation {o.op_id}: a reflect needs a conclusion and its unsupported generalizations")
        if o.type != "reflect" and o.unsupported:
            fail(f"operation {o.op_id}: only reflect operations list unsupported generalizations")
    return out


# The scorer's reasons why a probe's gold reply is not perfect (`memlife.memops.scoring.metrics.
# gold_failures`). The scorer reads the data, so the data does not import it: the gates are handed it.
GoldCheck = Callable[[Instance, Probe], list[str]]


def gate_gold_response(inst: Instance, gold_failures: GoldCheck) -> list[GateFailure]:
    """Each probe's own gold response (expected answer, gold operations, provenance quotes) must
    score perfect with the deterministic scorer. Plain containment of the required values is not
    enough: "the later mention of April 11 was only a possibility" contains April 11 without
    asserting it, and a scorer that misread such an answer would mark correct replies wrong."""
    return [GateFailure("gold_response", f"probe {p.probe_id}: gold response is not perfect: {r}")
            for p in inst.probes for r in gold_failures(inst, p)]


def gate_retained_control(inst: Instance) -> list[GateFailure]:
    if inst.op_type != "forget":
        return []
    forgotten = {o.target for o in inst.operations if o.type == "forget"}
    kept = [o for o in inst.operations if o.type in ("remember", "update") and o.target not in forgotten]
    out = []
    if not kept:
        out.append(GateFailure("retained_control", "forget conversation without a retained control (no kept value on another target)"))
    if not any(d.tag == "retained_control" for p in inst.probes for d in p.distractors):
        out.append(GateFailure("retained_control", "forget conversation has no probe tagged retained_control"))
    return out


def gate_grounding(inst: Instance) -> list[GateFailure]:
    """Required answer values of non-inferential probes must be said by the user in the dialogue."""
    user_text = " ".join(normalize_value(t.text) for seg in inst.segments for t in seg if t.role == "user")
    reflect_ids = {o.op_id for o in inst.operations if o.type == "reflect"}
    # Answer keys are written as key_value ("the public" -> "public"), so the aliases are compared the same way.
    reflect_keys = {key_value(a) for o in inst.operations if o.type == "reflect" for a in o.target_aliases}
    out = []
    for p in inst.probes:
        for v in p.answer_key.required:
            if v in reflect_keys and reflect_ids & set(p.op_ids):
                continue  # a bounded inference is, by design, not stated by the user
            if f" {v} " not in f" {user_text} ":
                out.append(GateFailure("grounding", f"probe {p.probe_id}: required value {v!r} never appears in a user turn"))
    return out


def gate_distractors_spoken(inst: Instance) -> list[GateFailure]:
    """Every dialogue-level distractor a probe is tagged with must be said in the conversation.

    A tag whose candidate never appears stresses nothing: the probe would be counted in Figure 5(c)
    without the confusable value being there to confuse. Context-level distractors live in the
    long history and are checked by `gate_long_context`.
    """
    text = f" {' '.join(normalize_value(t.text) for seg in inst.segments for t in seg)} "
    out = []
    for p in inst.probes:
        for d in p.distractors:
            if d.tag == "context_level":
                continue
            parts = d.value.split(" -> ") if d.tag == "update_chain" else [d.value]
            for part in parts:
                if f" {normalize_value(part)} " not in text:
                    out.append(GateFailure("distractor_unspoken",
                                           f"probe {p.probe_id}: {d.tag} candidate {part!r} is never said in the dialogue"))
    return out


def gate_leaked_label(inst: Instance) -> list[GateFailure]:
    out = []
    for s, seg in enumerate(inst.segments):
        for t, turn in enumerate(seg):
            hits = leaked_labels(turn.text)
            if hits:
                out.append(GateFailure("leaked_label", f"segment {s} turn {t} ({turn.role}) leaks internal label(s) {sorted(set(hits))}"))
    if inst.long_context:
        for i, d in enumerate(inst.long_context.context_distractors):
            for turn in d.turns:
                hits = leaked_labels(turn.text)
                if hits:
                    out.append(GateFailure("leaked_label", f"context distractor {i} leaks internal label(s) {sorted(set(hits))}"))
    return out


def gate_long_context(inst: Instance) -> list[GateFailure]:
    lc = inst.long_context
    if lc is None:
        return []
    out = []
    fail = lambda r: out.append(GateFailure("long_context", r))  # noqa: E731
    for c, conv in enumerate(lc.conversations):
        for t, turn in enumerate(conv.turns):
            want = "user" if t % 2 == 0 else "assistant"
            if turn.role != want:
                fail(f"conversation {c} turn {t}: expected {want}, found {turn.role}")
                break
    seen_segments, used_convs = [], []
    for ins in lc.insertions:
        if ins.conversation >= len(lc.conversations) or ins.segment >= len(inst.segments):
            fail(f"insertion {ins} points outside the history")
            continue
        turns = lc.conversations[ins.conversation].turns[ins.position: ins.position + ins.messages]
        if [t.model_dump() for t in turns] != [t.model_dump() for t in inst.segments[ins.segment]]:
            fail(f"segment {ins.segment} is not found verbatim at conversation {ins.conversation} position {ins.position}")
        if ins.position % 2:
            fail(f"segment {ins.segment} inserted at odd position {ins.position} (not role-compatible)")
        seen_segments.append(ins.segment)
        used_convs.append(ins.conversation)
    if sorted(seen_segments) != list(range(len(inst.segments))):
        fail(f"insertions cover segments {sorted(seen_segments)}, expected each of 0..{len(inst.segments) - 1} once")
    if len(set(used_convs)) != len(used_convs):
        fail("two evidence segments were inserted into the same conversation")
    for i, d in enumerate(lc.context_distractors):
        if d.conversation >= len(lc.conversations):
            fail(f"context distractor {i} points outside the history")
            continue
        got = lc.conversations[d.conversation].turns[d.position: d.position + d.messages]
        if [t.model_dump() for t in got] != [t.model_dump() for t in d.turns]:
            fail(f"context distractor {i} is not found at conversation {d.conversation} position {d.position}")
        if d.op_id not in {o.op_id for o in inst.operations}:
            fail(f"context distractor {i} derives from unknown operation {d.op_id}")
    return out


def target_values(inst: Instance) -> list[str]:
    """The values the user gives its targets (every operation's old and new value but a
    reflection's, which is an inference, not a stated value), as answer keys are written."""
    vals = {key_value(v) for o in inst.operations if o.type != "reflect" for v in (o.old_value, o.new_value) if v}
    return sorted(v for v in vals if v)


def filler_turns(inst: Instance):
    """(conversation, turn index, turn, source) of each turn of the long history that is neither
    an evidence segment nor a context distractor: the unrelated sessions' own turns."""
    lc = inst.long_context
    if lc is None:
        return
    placed = {(b.conversation, b.position + k) for b in [*lc.insertions, *lc.context_distractors]
              for k in range(b.messages)}
    for c, conv in enumerate(lc.conversations):
        for t, turn in enumerate(conv.turns):
            if (c, t) not in placed:
                yield c, t, turn, conv.source


def gate_filler_values(inst: Instance) -> list[GateFailure]:
    """No unrelated session in the long history states a value of the instance's targets: there a
    reader or a retriever would find the value outside the evidence, and a correct answer could
    rest on the wrong turn (or a forgotten value could be "remembered" from filler)."""
    values = target_values(inst)
    out = []
    for c, t, turn, source in filler_turns(inst):
        norm = f" {normalize_value(turn.text)} "
        hits = [v for v in values if f" {v} " in norm]
        if hits:
            out.append(GateFailure("filler_value", f"conversation {c} turn {t} (filler {source}) states target value(s) {hits}"))
    return out


DETERMINISTIC: tuple[Callable[..., list[GateFailure]], ...] = (  # gate_gold_response also takes the scorer's check
    gate_segments,
    gate_alternation,
    gate_quotes,
    gate_probe_structure,
    gate_gold_response,
    gate_retained_control,
    gate_grounding,
    gate_distractors_spoken,
    gate_leaked_label,
    gate_long_context,
    gate_filler_values,
)


def check(inst: Instance, gold_failures: GoldCheck) -> list[GateFailure]:
    """Every deterministic gate on a parsed instance, the gold reply's judged by `gold_failures`
    (the scorer's); an empty list means it passes."""
    out: list[GateFailure] = []
    for gate in DETERMINISTIC:
        out += gate(inst, gold_failures) if gate is gate_gold_response else gate(inst)
    return out


def check_raw(obj: dict, gold_failures: GoldCheck) -> tuple[Instance | None, list[GateFailure]]:
    """The schema gate, then the others: for instances read from a file."""
    try:
        inst = Instance.model_validate(obj)
    except ValidationError as exc:
        reasons = [
            GateFailure("schema", f"field {'.'.join(str(p) for p in e['loc'])}: {e['msg']}") for e in exc.errors()
        ]
        return None, reasons
    return inst, check(inst, gold_failures)


# ----------------------------------------------------------------------------- LLM verifier


class VerifierVerdict(BaseModel):
    model_config = ConfigDict(extra="forbid")  # strict structured output (api_rules)

    passes: bool
    problems: list[str]


VERIFIER_SYSTEM = (
    "You audit a generated benchmark sample. Check: (1) every operation is grounded in the user "
    "turn it cites; (2) the trace is complete and correct (type, target, old and new value); "
    "(3) each probe's expected answer follows from the trace; (4) the dialogue reads naturally and "
    "never mentions internal labels. Reply as JSON {\"passes\": bool, \"problems\": [str]}."
)


def llm_verify(inst: Instance) -> list[GateFailure]:
    """Semantic audit through role "verifier"; returns [] when no capable verifier is configured."""
    from memlife.models import endpoints, llm

    if not endpoints.role_configured("verifier"):
        return []
    client = llm.get_client("verifier")
    payload = {
        "dialogue": [[f"{t.role}: {t.text}" for t in seg] for seg in inst.segments],
        "operations": [o.model_dump(mode="json") for o in inst.operations],
        "probes": [{"question": p.question, "expected_answer": p.expected_answer} for p in inst.probes],
    }
    verdict, c = client.complete_json(
        [{"role": "system", "content": VERIFIER_SYSTEM},
         {"role": "user", "content": json.dumps(payload, sort_keys=True)}],
        schema=VerifierVerdict, max_tokens=600, temperature=0.0, seed=0,
    )
    if verdict is None:
        return [GateFailure("llm_verifier", f"verifier reply did not parse: {c.error}")]
    if verdict.passes:
        return []
    return [GateFailure("llm_verifier", p) for p in (verdict.problems or ["rejected without a reason"])]


# ----------------------------------------------------------------------------- regeneration


@dataclass
class Attempt:
    instance_id: str
    attempt: int
    failures: list[str] = field(default_factory=list)


@dataclass
class GateLog:
    """Every attempt and its outcome: the retention statistics of Table 2 come from here."""

    attempts: list[Attempt] = field(default_factory=list)
    retained: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)

    @property
    def generated(self) -> int:
        return len(self.attempts)

    @property
    def retention_rate(self) -> float:
        return len(self.retained) / self.generated if self.generated else 0.0

    def failure_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for a in self.attempts:
            for f in a.failures:
                gate = f.split("]", 1)[0].lstrip("[")
                counts[gate] = counts.get(gate, 0) + 1
        return dict(sorted(counts.items()))

    def to_json(self) -> dict:
        return {"generated": self.generated, "retained": len(self.retained), "dropped": self.dropped,
                "retention_rate": round(self.retention_rate, 6), "failure_counts": self.failure_counts(),
                "attempts": [asdict(a) for a in self.attempts if a.failures]}


def feedback_text(failures: list[GateFailure]) -> str:
    """Failures turned into the feedback the next attempt is given."""
    return "; ".join(str(f) for f in failures[:8])


def generate_with_gates(
    realize: Callable[[int, str], Instance],
    instance_id: str,
    log: GateLog,
    max_attempts: int = 3,
    use_llm_verifier: bool = False,
    *,
    gold_failures: GoldCheck,
) -> Instance | None:
    """Realize, gate, store the failure with feedback, retry up to `max_attempts` times."""
    feedback = ""
    for attempt in range(max_attempts):
        try:
            inst = realize(attempt, feedback)
            failures = check(inst, gold_failures)
            if not failures and use_llm_verifier:
                failures = llm_verify(inst)
        except (ValueError, ValidationError) as exc:
            inst, failures = None, [GateFailure("schema", f"realizer error: {exc}")]
        log.attempts.append(Attempt(instance_id, attempt, [str(f) for f in failures]))
        if not failures:
            log.retained.append(instance_id)
            return inst
        feedback = feedback_text(failures)
    log.dropped.append(instance_id)
    return None
