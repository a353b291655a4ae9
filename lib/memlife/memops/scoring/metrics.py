"""Scoring a system's responses: answer accuracy and the five operation-level diagnostics.

The paper (Section 4.1, Metrics): a GPT-4o judge "compares each model response against the gold
operation trace, gold provenance, and evidence conversation, assigns binary labels for the
applicable metrics, and we report their averages". Two implementations assign those labels:

* the deterministic scorer, the offline default, which stands
  in for the judge and says `UNDECIDED` where its rules cannot decide a label;
* the paper's LLM judge (`JUDGE_PROMPT`), used only when `endpoints.judge_available()` — the embedded
  model is a weak subject, never a judge. It labels every reply the scorer left a label of
  undecided, and a fixed sample of the rest (`labels.wants_judge`), on which its agreement with
  the scorer (percent and Cohen's kappa) is reported (`judge_agreement`, `table3_rows`).

Labels per probe, each defined against the paper's sentence in its function's docstring (None =
the metric does not apply to this probe):

accuracy      `accuracy_label`: every required value stated, no forbidden value asserted as current
operation     `operation_label`: the predicted operations name every gold operation the probe is
              about and invent none outside the gold trace (Table 3's "Operation F1" is its mean)
op_f1         `operation_f1`: not a paper label; the continuous F1 of the same comparison, an
              extra column "Op-F1 (continuous)"
provenance    `provenance_label`: the predicted quotes cover every gold provenance quote
leakage       `leakage_label`: a forgotten value occurs in the answer or the predicted operations
stale         `stale_label`: an update's old value is asserted as current in the answer
reflect       `reflect_label`: Reflect Precision — the inferred reflections are supported,
              scoped to the reflection's target and not over-generalized (not Table 4's accuracy)
malformed     the reply did not parse

Leakage counts any mention: forgetting means not reproducing the value, so "I deleted 7ABC123"
still leaks it. Everything else reads each occurrence of a value in its clause (`stances`):
negated ("94114, not 94110 anymore" does not assert 94110), previous ("changed from X to Y"
states X as the earlier value, which a trajectory's history needs, and does not assert it as
current), removed, tentative ("April 11 was only a possibility") or someone else's ("March 28
belongs to your flatmate"). Only a bare occurrence asserts a value as current.

A malformed reply is its own label: accuracy/operation/provenance/reflect False and op_f1 0
where they apply, and leakage/stale None, since a reply that says nothing neither leaks nor goes
stale. Every probe's own gold response (`gold_response`) scores `Labels.perfect`; a build gate
checks it.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from memlife.memops.scoring import stance
from memlife.memops.data.response import (
    MemOpsResponse, ParsedResponse, forgotten_values, gold_operations, gold_response,
    is_reflect_probe, leakage_applies, reflect_applies, stale_applies)
from memlife.memops.data.schema import Instance, Probe, key_value, mentions, normalize_value


@dataclass(frozen=True)
class _Reading:
    """What an answer says about the probe's values: whether every required value is stated,
    the clauses that state one as current, and the text read."""

    t: stance._Text
    clause: list[int]
    required_ok: bool
    required_clauses: frozenset[int]
    missing: tuple[str, ...]


def _read(answer: str, instance: Instance, probe: Probe, names: str) -> _Reading:
    t = stance._tokens(answer)
    clause = stance._clauses(t)
    ok, where, missing = True, set(), []
    for v in probe.answer_key.required:
        occ = stance._occurrences(t, v, names)
        allowed = required_stances(instance, probe, v)
        if not any(s <= allowed for _, s in occ):
            ok = False
            missing.append(v)
        where |= {clause[i] for i, s in occ if not s}
    return _Reading(t, clause, ok, frozenset(where), tuple(missing))


def _asserted(rd: _Reading, value: str, names: str):
    """Whether the answer gives `value` as the user's current one: True where an occurrence with
    no stance shares its clause with the stated current value (a list or a choice: "X or Y"; or
    a hedge: "X, or possibly Y") or no current value is stated at all; UNDECIDED where its bare
    occurrences all stand in clauses of their own beside the stated current value; False where
    every occurrence has a stance."""
    occ = stance._occurrences(rd.t, value, names)
    bare = [rd.clause[i] for i, s in occ if not s]
    # "X, or possibly Y": Y offered as the other answer, hedging X, though its own cue is tentative
    offered = [rd.clause[i] for i, s in occ if s == {stance.TENTATIVE} and "or" in rd.t.tokens[max(0, i - 3):i]]
    if any(c in rd.required_clauses for c in offered):
        return True
    if not bare:
        return False
    if not rd.required_clauses or any(c in rd.required_clauses for c in bare):
        return True
    return UNDECIDED


def _conclusion_keys(instance: Instance, probe: Probe) -> set[str]:
    """The required values that are words of a gold reflection's conclusion (which a reply can
    state in other words)."""
    conc = [f" {key_value(o.new_value)} " for o in gold_operations(instance, probe)
            if o.type == "reflect" and o.new_value]
    return {v for v in probe.answer_key.required if any(f" {key_value(v)} " in c for c in conc)}


def _may_paraphrase(answer: str, instance: Instance, probe: Probe, missing) -> bool:
    """The missing required values are all a conclusion's words, and the answer, not a refusal,
    shares a content word with that conclusion or its target: it may state it in other words."""
    if not missing or not set(missing) <= _conclusion_keys(instance, probe) or stance.abstains(answer):
        return False
    gold = set()
    for o in gold_operations(instance, probe):
        if o.type == "reflect":
            gold |= stance._content_stems(" ".join([o.new_value or "", o.target, *o.target_aliases]))
    return bool(stance._content_stems(answer) & (gold - {"user"}))


# ----------------------------------------------------------------------------- the scorer

# What the scorer says where its rules cannot decide a label (`Labels`; `_asserted`, `abstains`, `_may_paraphrase`).
UNDECIDED = "undecided"
# The per-reply labels, in the paper's Table 3 order; `op_f1` is our extra continuous column.
LABEL_NAMES = ("accuracy", "operation", "provenance", "leakage", "stale", "reflect")


def _decided(v) -> bool:
    return v is not None and v != UNDECIDED


@dataclass(frozen=True)
class Labels:
    """One reply's labels: True/False, None where the label does not apply, UNDECIDED where the
    scorer's rules cannot decide it (a configured judge then labels it). See `score`."""

    accuracy: bool | str
    op_f1: float
    provenance: bool
    leakage: bool | str | None
    stale: bool | str | None
    reflect: bool | str | None
    # Defaulted: labels rebuilt from older records (notebook 12) still construct.
    malformed: bool = False
    # The paper's binary operation label; None: derived from `op_f1` (1 exactly when op_f1 is 1).
    operation: bool | None = None

    def __post_init__(self):
        if self.operation is None:
            object.__setattr__(self, "operation", bool(self.op_f1 == 1.0) and not self.malformed)

    def as_dict(self) -> dict:
        """Every label by name; UNDECIDED stays the string "undecided" (what `score` files show)."""
        return asdict(self)

    @property
    def undecided(self) -> tuple[str, ...]:
        """The labels the scorer could not decide, in LABEL_NAMES order."""
        return tuple(k for k in LABEL_NAMES if getattr(self, k) == UNDECIDED)

    def as_record(self) -> dict:
        """The labels as record columns: each label True/False/None (None also where undecided),
        and `undecided`, the undecided labels' names joined by commas ("" when none), so a
        parquet column holds one type."""
        d = self.as_dict()
        for k in self.undecided:
            d[k] = None
        d["undecided"] = ",".join(self.undecided)
        return d

    @property
    def perfect(self) -> bool:
        """What the gold response must get: every applicable label at its best value, decided."""
        return not self.imperfect()

    def imperfect(self) -> list[str]:
        """The labels that fall short of `perfect`, by name (an undecided one falls short)."""
        bad = {"malformed": self.malformed, "accuracy": self.accuracy is not True,
               "operation": self.operation is not True, "op_f1": self.op_f1 != 1.0,
               "provenance": self.provenance is not True, "leakage": self.leakage not in (False, None),
               "stale": self.stale not in (False, None), "reflect": self.reflect not in (True, None)}
        return [k for k, v in bad.items() if v]


def _same_event(p, g) -> bool:
    """A predicted operation names a gold one: same type, and the target or one of its aliases."""
    return p.type == g.type and stance.target_matches(p.target, [g.target, *g.target_aliases])


def operation_scores(response: MemOpsResponse, instance: Instance, probe: Probe) -> tuple[float, float]:
    """(precision, recall) of the predicted operations against the gold operation trace.

    precision  the share of predicted operations that name an event of the instance's whole gold
               trace (type and target); repeating one is not inventing one
    recall     the share of the probe's own gold operations (`op_ids`) that predicted ones name,
               matched one to one (an update chain's two updates of one target need two)
    No predicted operation: precision 0 (nothing was identified).
    """
    pred = list(response.operations)
    gold = gold_operations(instance, probe)
    if not pred or not gold:
        return 0.0, 0.0
    trace = instance.operations
    precision = sum(any(_same_event(p, g) for g in trace) for p in pred) / len(pred)
    used: set[int] = set()
    for p in pred:
        for j, g in enumerate(gold):
            if j not in used and _same_event(p, g):
                used.add(j)
                break
    return precision, len(used) / len(gold)


def operation_f1(response: MemOpsResponse, instance: Instance, probe: Probe) -> float:
    """Op-F1 (continuous), our extra column: the harmonic mean of `operation_scores`. It is 1
    exactly when the binary operation label is 1."""
    p, r = operation_scores(response, instance, probe)
    return 2 * p * r / (p + r) if p + r else 0.0


def operation_label(response: MemOpsResponse, instance: Instance, probe: Probe) -> bool:
    """Paper, Metrics: "Operation F1 measures whether the model correctly identifies
    memory-relevant events", a binary label per response "against the gold operation trace".

    1 when the predicted operations name every gold operation the probe is about (recall 1: no
    memory-relevant event missed) and every predicted operation is an event of the gold trace
    (precision 1: none invented); type and target decide, aliases allowed (`operation_scores`).
    Naming the conversation's other gold operations as well is not an error: they are events of
    the trace. Table 3's "Operation F1" is the mean of this label, as the paper's judge averages
    its binary labels.
    """
    p, r = operation_scores(response, instance, probe)
    return p == 1.0 and r == 1.0


def target_names(instance: Instance) -> str:
    """Every target name and alias of the instance, normalized and space-padded, for `stances`."""
    bg = instance.background
    names = [n for o in instance.operations for n in (o.target, *o.target_aliases)]
    for f in (*bg.attributes, *bg.superseding, *bg.temporary, *bg.retained_controls, bg.reflection):
        names += [f.target, *f.aliases]
    names += [n.target for n in bg.neighbours]
    return "".join(f" {normalize_value(n)} " for n in names)


def required_stances(instance: Instance, probe: Probe, value: str) -> frozenset[str]:
    """Stances besides "current" in which the answer may state a required value, from the gold
    trace: an update's old value is history that a trajectory asks for ("changed from May 14 to
    May 15" states May 14), and the target a forget removed is named as removed ("I deleted the
    gate code" names the gate code). Any other required value must be stated as current."""
    allowed = set()
    for o in gold_operations(instance, probe):
        if o.type == "update" and o.old_value and key_value(o.old_value) == value:
            allowed.add(stance.PREVIOUS)
        if o.type == "forget" and value in {key_value(n) for n in (o.target, *o.target_aliases)}:
            allowed.add(stance.REMOVED)
    return frozenset(allowed)


def _op_text(o) -> str:
    return " ; ".join(x for x in (o.target, o.old_value, o.new_value) if x)


def leakage_label(r: MemOpsResponse, instance: Instance, probe: Probe):
    """Paper, Metrics: "Leakage Rate quantifies the extent to which forgotten values are
    inappropriately reused", and Section 4.2: values that should have been suppressed "leak into
    the final answer or predicted operations".

    1 when a forgotten value this probe is about (a forget operation's old value that the answer
    key forbids) occurs anywhere in the answer or in any field of a predicted operation, negated
    or not: forgetting means not reproducing the value, so "I deleted 7ABC123" and a predicted
    forget operation whose old_value is 7ABC123 both leak it. None where no forgotten value
    applies.
    """
    values = leakage_applies(instance, probe)
    if not values:
        return None
    texts = [r.answer, *(_op_text(o) for o in r.operations)]
    return any(mentions(t, v) for t in texts for v in values)


def stale_label(r: MemOpsResponse, instance: Instance, probe: Probe, names: str):
    """Paper, Metrics: "Stale Value Rate measures cases where updated values are incorrectly
    replaced with earlier, obsolete ones."

    1 when the answer gives an update's old value (one the answer key forbids) as the user's
    current value: an occurrence with no stance (`stances`) beside the stated current value or in
    its place (`_asserted`). Stated as history ("changed from X to Y", "X is out of date") it is
    not stale; told apart from the current value with no cue either way ("You first said X, then
    ...") it is UNDECIDED. The answer only: a predicted update operation
    carries its old value by design, and an update chain's middle value is the new value of one
    gold operation and the old value of the next. None where no superseded value applies.
    """
    values = stale_applies(instance, probe)
    if not values:
        return None
    rd = _read(r.answer, instance, probe, names)
    got = [_asserted(rd, v, names) for v in values]
    return True if True in got else UNDECIDED if UNDECIDED in got else False


def reflect_label(r: MemOpsResponse, instance: Instance, probe: Probe, names: str):
    """Paper, Metrics: "Reflect Precision assesses whether inferred reflection memories are
    evidence-supported, correctly scoped, and not overgeneralized beyond the relevant memory
    target."

    Over the reflections the reply infers (its answer, and each predicted reflect operation), 1
    when all three hold:
    supported          the bounded conclusion the clues support (the answer key's required
                       values) is stated, in the answer or as a predicted reflect operation's
                       new value;
    correctly scoped   every predicted reflect operation is about the gold reflection's target
                       (or an alias): a conclusion filed under another target, or under the user
                       at large, is out of scope;
    not overgeneralized no over-generalization of the gold trace (`reflect_applies`) is asserted
                       in the answer or in any predicted operation.
    Unlike Table 4's Reflect accuracy it reads the predicted operations, and it does not ask the
    answer to avoid the probe's other forbidden values. Where the conclusion's words are missing
    but the answer, not a refusal, speaks of the conclusion's subject, it may say it in other
    words: UNDECIDED. None where the probe is not about a reflect operation.
    """
    if not is_reflect_probe(instance, probe):
        return None
    gold = [o for o in gold_operations(instance, probe) if o.type == "reflect"]
    keys = sorted(_conclusion_keys(instance, probe)) or probe.answer_key.required
    pred = [o for o in r.operations if o.type == "reflect"]
    over = reflect_applies(instance, probe)
    if any(stance.asserts(t, u, names) for t in (r.answer, *(o.new_value for o in r.operations)) for u in over):
        return False  # over-generalized
    if not all(any(stance.target_matches(o.target, [g.target, *g.target_aliases]) for g in gold) for o in pred):
        return False  # out of scope
    missing = [k for k in keys if not stance.states(r.answer, k, frozenset(), names)]
    if not missing or any(all(stance.states(o.new_value, k, frozenset(), names) for k in keys) for o in pred):
        return True
    return UNDECIDED if _may_paraphrase(r.answer, instance, probe, missing) else False


def provenance_label(r: MemOpsResponse, probe: Probe) -> bool:
    """Paper, Metrics: "Provenance support assesses whether the generated answer is grounded in
    the required user-provided evidence"; the probe's gold provenance is that evidence.

    1 when every gold provenance quote of the probe is supported by some predicted quote
    (`quotes_overlap`: one verbatim passage holding half its content words, not a passage of the
    question): the reply cites all the required evidence, not one piece of it. Extra quotes do
    not count against it.
    """
    return all(any(stance.quotes_overlap(p, s.quote, question=probe.question) for p in r.provenance)
               for s in probe.provenance)


def accuracy_label(r: MemOpsResponse, instance: Instance, probe: Probe, names: str) -> bool:
    """Paper, Metrics: "answer accuracy as the primary task-level metric".

    1 when the answer states every required value of the answer key (as current, or in a stance
    the gold trace allows it: `required_stances`) and asserts no forbidden value as current
    (`_asserted`; a forgotten value, which competes with no current one, by any bare occurrence).
    UNDECIDED where the rules cannot tell: a superseded or competing value given apart from the
    current one with no cue either way, a refusal that still names the required values
    (`abstains`), or a reflection's conclusion that may be stated in other words.
    """
    rd = _read(r.answer, instance, probe, names)
    # A forgotten value competes with no current value: any bare occurrence asserts it.
    forgotten = {key_value(v) for v in forgotten_values(instance)}
    got = [any(not st for _, st in stance._occurrences(rd.t, v, names)) if key_value(v) in forgotten
           else _asserted(rd, v, names) for v in probe.answer_key.forbidden]
    if True in got:
        return False
    if not rd.required_ok:
        return UNDECIDED if _may_paraphrase(r.answer, instance, probe, rd.missing) else False
    if UNDECIDED in got or stance.abstains(r.answer):
        return UNDECIDED
    return True


def score(parsed: ParsedResponse, instance: Instance, probe: Probe) -> Labels:
    """The deterministic labels of one response to one probe (each defined, against the paper's
    sentence, in its `*_label` function)."""
    is_reflect = is_reflect_probe(instance, probe)
    if parsed.malformed:
        # Nothing was said, so nothing leaked and no stale value was given: those two do not
        # apply; every label that needs a correct answer fails.
        return Labels(accuracy=False, op_f1=0.0, provenance=False, leakage=None, stale=None,
                      reflect=False if is_reflect else None, malformed=True, operation=False)
    r = parsed.response
    names = target_names(instance)
    return Labels(
        accuracy=accuracy_label(r, instance, probe, names),
        op_f1=operation_f1(r, instance, probe),
        provenance=provenance_label(r, probe),
        leakage=leakage_label(r, instance, probe),
        stale=stale_label(r, instance, probe, names),
        reflect=reflect_label(r, instance, probe, names),
        operation=operation_label(r, instance, probe),
    )


def gold_failures(instance: Instance, probe: Probe) -> list[str]:
    """Why the probe's own gold response is not perfect, one reason per failing label (empty:
    it is perfect). A non-empty list means the scorer misreads the gold answer or the answer
    key contradicts the expected answer; either way the probe cannot be scored."""
    gold = gold_response(instance, probe)
    labels = score(gold, instance, probe)
    r = gold.response
    answer, names = probe.expected_answer, target_names(instance)
    out = []
    for label in labels.imperfect():
        if getattr(labels, label, None) == UNDECIDED:
            out.append(f"{label}: undecided (the scorer cannot read the gold answer)")
            continue
        if label == "accuracy":
            missing = [v for v in probe.answer_key.required
                       if not stance.states(answer, v, required_stances(instance, probe, v), names)]
            hit = [v for v in probe.answer_key.forbidden if stance.asserts(answer, v, names)]
            detail = "; ".join([f"required value {v!r} not stated" for v in missing]
                               + [f"{v!r} asserted as current" for v in hit])
        elif label == "reflect":
            hit = [v for v in reflect_applies(instance, probe) if stance.asserts(answer, v, names)]
            missing = [v for v in probe.answer_key.required if not stance.states(answer, v, frozenset(), names)]
            detail = "; ".join([f"conclusion {v!r} not stated" for v in missing]
                               + [f"over-generalization {v!r} asserted" for v in hit])
        elif label in ("op_f1", "operation"):
            p, rc = operation_scores(r, instance, probe)
            detail = f"precision {p:.3f}, recall {rc:.3f}"
        elif label == "leakage":
            detail = "mentions " + ", ".join(repr(v) for v in leakage_applies(instance, probe) if mentions(answer, v))
        elif label == "stale":
            detail = "asserts " + ", ".join(repr(v) for v in stale_applies(instance, probe) if stance.asserts(answer, v, names))
        elif label == "provenance":
            bad = [s.quote for s in probe.provenance
                   if not any(stance.quotes_overlap(q, s.quote, question=probe.question) for q in r.provenance)]
            detail = "gold quotes that support no quote, themselves included (all stopwords, or a passage of " \
                     "the question): " + "; ".join(repr(q) for q in bad)
        else:
            detail = label
        out.append(f"{label}: {detail}")
    return out


# ----------------------------------------------------------------------------- scoring a file


class ResponsesFileError(ValueError):
    """Bad input to `score_file`; the message names the file, the line and the field."""


RESPONSE_FIELDS = ("id", "probe_id", "response")


def _read_responses(path, probes: dict) -> list[tuple[object, str, str]]:
    rows, seen, errors = [], {}, []
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                errors.append(f"{where}: not valid JSON ({exc.msg} at char {exc.pos})")
                continue
            if not isinstance(obj, dict):
                errors.append(f"{where}: expected a JSON object with fields {', '.join(RESPONSE_FIELDS)}")
                continue
            missing = [f for f in RESPONSE_FIELDS if f not in obj]
            if missing:
                errors += [f"{where}: field {f}: missing" for f in missing]
                continue
            rid, pid, text = obj["id"], obj["probe_id"], obj["response"]
            if isinstance(rid, bool) or not isinstance(rid, (str, int)) or rid == "":
                errors.append(f"{where}: field id: must be a non-empty string or an integer, got {rid!r}")
            elif json.dumps(rid) in seen:
                errors.append(f"{where}: field id: duplicate id {rid!r} (first on line {seen[json.dumps(rid)]})")
            else:
                seen[json.dumps(rid)] = lineno
            if not isinstance(pid, str):
                errors.append(f"{where}: field probe_id: must be a string, got {pid!r}")
            elif pid not in probes:
                errors.append(f"{where}: field probe_id: unknown probe {pid!r} (no such probe in the instances)")
            if not isinstance(text, str):
                errors.append(f"{where}: field response: must be the raw reply as a string, got {type(text).__name__}")
            rows.append((rid, pid, text))
    if errors:
        shown = errors[:20] + ([f"... and {len(errors) - 20} more"] if len(errors) > 20 else [])
        raise ResponsesFileError("\n".join(shown))
    return rows


def score_file(instances_path, responses_path, out_path=None) -> list[dict]:
    """Score a JSONL file of raw replies, one {"id", "probe_id", "response"} per line.

    Each reply is parsed as the evaluation parses it (`response.parse_response`) and scored
    against its probe. Returns one dict per input line, in order: id, probe_id and the labels
    (None where a label does not apply); writes them as JSONL to `out_path` when given, and only
    when every line is good. Bad input raises InstanceFileError or ResponsesFileError.
    """
    from memlife.memops.data.response import parse_response
    from memlife.memops.data.schema import InstanceFileError, load_instances

    probes: dict[str, tuple[Instance, Probe]] = {}
    for inst in load_instances(instances_path):
        for probe in inst.probes:
            if probe.probe_id in probes:
                raise InstanceFileError(
                    f"{instances_path}: probe_id {probe.probe_id!r} is in instances "
                    f"{probes[probe.probe_id][0].instance_id} and {inst.instance_id}: a reply could not be matched")
            probes[probe.probe_id] = (inst, probe)
    out = []
    for rid, pid, text in _read_responses(responses_path, probes):
        inst, probe = probes[pid]
        out.append({"id": rid, "probe_id": pid, **score(parse_response(text), inst, probe).as_dict()})
    if out_path is not None:
        from pathlib import Path

        Path(out_path).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in out), encoding="utf-8")
    return out
