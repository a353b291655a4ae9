"""Scoring a system's responses: answer accuracy and the five operation-level diagnostics.

Two implementations score the same binary labels from the same gold data:

* the deterministic scorer (DESIGN.md "Deterministic scorer"), the offline default;
* the paper's LLM judge (Section 4.1: it compares the response with the gold operation trace,
  the gold provenance and the evidence conversation and assigns binary labels), used only when
  `llm.judge_available()` — the embedded model is a weak subject, never a judge.

When both run, their agreement (percent and Cohen's kappa) is reported per label
(`judge_agreement`), and the judge's labels go into Tables 3-5 in rows of their own beside the
scorer's (`table3_rows`, `accuracy_table`).

Labels per probe (None = the metric does not apply to this probe):

accuracy      all `answer_key.required` values stated and no `forbidden` value asserted as current
op_f1         F1 of predicted vs the probe's gold operations (`op_ids`), matched one-to-one by type
              and target (aliases allowed): the prompt asks for the operations that matter for the
              question, so a reply naming exactly those scores 1
provenance    a predicted quote shares with a gold provenance quote of the probe one verbatim
              passage holding half its content words, and not a passage of the question
leakage       a forgotten value (forget op's old_value listed as forbidden) appears in the answer
stale         an update's old value (listed as forbidden) is asserted as current
reflect       the bounded conclusion is stated and no `unsupported` generalization is asserted
malformed     the reply did not parse

Leakage counts any mention: forgetting means not reproducing the value, so "I deleted 7ABC123"
still leaks it. Everything else reads each occurrence of a value in its clause (`stances`):
negated ("94114, not 94110 anymore" does not assert 94110), previous ("changed from X to Y"
states X as the earlier value, which a trajectory's history needs, and does not assert it as
current), removed, tentative ("April 11 was only a possibility") or someone else's ("March 28
belongs to your flatmate"). Only a bare occurrence asserts a value as current.

A malformed reply is its own label: accuracy/provenance/reflect False and op_f1 0 where they
apply, and leakage/stale None, since a reply that says nothing neither leaks nor goes stale.
Every probe's own gold response (`gold_response`) scores `Labels.perfect`; a build gate checks it.
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass

from .response import MemOpsResponse, ParsedResponse, PredictedOperation
from .schema import Instance, Probe, key_value, normalize_value

# ----------------------------------------------------------------------------- text matching
#
# Every occurrence of a value in an answer is read inside its clause and gets the set of stances
# its cue words give it. No stance: the answer states the value as the user's current one.
# Forbidden, stale and unsupported values are "asserted" only by such a bare occurrence; a
# required value is "stated" by a bare occurrence or by one whose stances the gold trace allows
# for it (a superseded value that a trajectory lists as history, the target a forget removed).

NEGATED = "negated"      # "not 94110", "94110 is wrong"
PREVIOUS = "previous"    # "changed from 94110 to 94114", "94110 is no longer valid"
REMOVED = "removed"      # "I deleted the gate code", "4471 was removed"
TENTATIVE = "tentative"  # "April 11 was only a possibility", "maybe April 11"
OTHERS = "others"        # "March 28 belongs to your flatmate", "that was your sister's"


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Cue words shortly before a value, in the same clause.
_BEFORE = {
    NEGATED: _words("not no never nor neither nothing none without except"),
    PREVIOUS: _words("""formerly previously former old older earlier original originally outdated obsolete
        stale superseded replaced replace replacing"""),
    REMOVED: _words("""removed remove removing deleted delete deleting forgotten forget forgetting forgot
        erased erase erasing dropped drop dropping discard discarded cancelled canceled cancel wiped wipe
        purged purge withdrawn withdrew"""),
    TENTATIVE: _words("""maybe perhaps possibly possible potential potentially tentative tentatively
        considered considering hypothetical hypothetically unconfirmed if whether thinking"""),
}
# Cue words shortly after a value, in the same clause ("94110 is outdated", "April 11 was only a
# possibility"). Participles are separate: "94110 was replaced" makes 94110 the old value, but
# in "94114 replaced 94110" or "94114, corrected from 94110" the participle is about another one.
_AFTER = {
    NEGATED: _words("invalid incorrect wrong false mistaken mistake"),
    PREVIOUS: _words("anymore outdated obsolete stale expired previous former old retired"),
    REMOVED: _words("gone"),
    TENTATIVE: _words("""possibility possible possibly maybe perhaps tentative tentatively option idea
        considered hypothetical unconfirmed speculative"""),
    OTHERS: _words("belongs belong belonged belonging owned"),
}
_PARTICIPLES = {
    PREVIOUS: _words("replaced superseded changed updated corrected overwritten revised"),
    REMOVED: _words("""removed deleted forgotten erased dropped cancelled canceled discarded wiped purged
        withdrawn"""),
}
# "rather than X", "instead of X" reject X; "would rather have quiet rooms" prefers them.
_REJECTING = frozenset({("rather", "than"), ("instead", "of")})
# Verbs before a value whose own negation keeps the value current ("did not delete 94114").
_VERBS_BEFORE = _BEFORE[REMOVED] | _words("replaced replace replacing superseded")
# After these a participle is passive, so it is about the value before it ("94110 was replaced").
_AUX = _words("""is was are were be been being am has have had get got gets do does did will would should
    shall can could may might must""")
# A participle followed by one of these is passive even without an auxiliary ("4471 deleted at
# your request", "94110 replaced by 94114"); followed by anything else it is active ("94114
# replaced 94110") and says nothing about the value before it.
_PASSIVE_NEXT = _words("by with at on in as per upon after for to")
# "March 28 is your flatmate's", "that was your sister's": only a copula hands a value to an
# owner further on ("Aunt May's house" is a value of its own, and "may" no copula).
_COPULAS = _words("is was are were be been being am")
_DETERMINERS = _words("the a an your my our its their this that these those")
_FILLERS = _AUX | _words("actually really just only still also probably clearly definitely simply")
# Words that end the look-back: what precedes them describes something else ("changed from 94110
# to 94114", "replaced by 94114", "no longer X, now Y").
_RESET_BEFORE = _words("to now currently but by with and so then while whereas yet though although because")
# Words that end the look-ahead: what follows them is another clause or a comparison.
_STOP_AFTER = _words("and but while whereas yet though although because so then than")
# After a comma or dash, a relative or demonstrative clause still describes the value before it
# ("not March 28, that was your flatmate's"; "94110, which is no longer valid").
_ANAPHORS = _words("which that who")
_BREAKS = frozenset({",", "--", "\u2014", "\u2013"})
# "it's", "that's", "what's": the 's of a contraction, not of an owner; "the user's" and "today's"
# do not hand the value to another person either.
_NOT_OWNERS = _words("""it that what there here he she who where how when why let this which user today
    tomorrow yesterday week month year night morning evening""")
_BEFORE_WINDOW = 5
_AFTER_WINDOW = 5
_TOKEN = re.compile(r"[0-9a-z]+|[,.;:!?()\[\]\n]|--|\u2014|\u2013")


@dataclass(frozen=True)
class _Text:
    tokens: list[str]
    possessive: frozenset[int]  # indices of "s" tokens that were an apostrophe-s


def _tokens(text: str) -> _Text:
    import unicodedata

    folded = unicodedata.normalize("NFKC", text).casefold().replace("\u2019", "'")
    folded = re.sub(r"n't\b", " not", folded)  # isn't -> is not, can't -> ca not
    tokens, poss = [], set()
    for m in _TOKEN.finditer(folded):
        if m.group() == "s" and m.start() > 0 and folded[m.start() - 1] == "'":
            poss.add(len(tokens))
        tokens.append(m.group())
    return _Text(tokens, frozenset(poss))


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


def _owner_at(t: _Text, i: int, names: str) -> bool:
    """tokens[i] is the 's of a person other than the user ("flatmate's"), not a contraction
    ("it's") and not part of a target's own name ("new landlord's name", "Lena's favourite flower")."""
    if i not in t.possessive or i == 0 or not _is_word(t.tokens[i - 1]):
        return False
    owner = t.tokens[i - 1]
    return owner not in _NOT_OWNERS and f" {owner} s " not in names


def _look_back(t: _Text, first: int, names: str) -> set[str]:
    toks, found = t.tokens, set()
    i, seen, removal_at = first - 1, 0, None
    # "from" introduces the value a change started from only when it governs the value itself.
    j = i
    while j >= 0 and toks[j] in _DETERMINERS:
        j -= 1
    if j >= 0 and toks[j] == "from":
        found.add(PREVIOUS)
    while i >= 0 and seen < _BEFORE_WINDOW:
        tok = toks[i]
        if tok == "(":  # "your flatmate's (March 28)": the parenthesis names what precedes it
            i -= 1
            continue
        if not _is_word(tok) or tok in _RESET_BEFORE:
            break
        if _owner_at(t, i, names):
            found.add(OTHERS)
        elif tok == "longer" and i > 0 and toks[i - 1] == "no":  # "no longer 94110": it was, once
            found.add(PREVIOUS)
            i -= 2
            seen += 2
            continue
        elif i > 0 and (toks[i - 1], tok) in _REJECTING:
            found.add(NEGATED)
        else:
            for stance, cues in _BEFORE.items():
                if tok in cues:
                    if stance == NEGATED and removal_at is not None:
                        # "did not delete the 94114" / "never replaced 94114": the negation is
                        # the verb's, and the value stays current.
                        found.discard(removal_at)
                        removal_at = None
                        break
                    found.add(stance)
                    if tok in _VERBS_BEFORE:
                        removal_at = stance
        seen += i not in t.possessive
        i -= 1
    return found


def _look_ahead(t: _Text, last: int, names: str) -> set[str]:
    toks, found = t.tokens, set()
    i, seen = last + 1, 0
    only_fillers, copula, negation = True, False, False
    while i < len(toks) and seen < _AFTER_WINDOW:
        tok = toks[i]
        if tok == ")":
            i += 1
            continue
        if tok in _BREAKS and seen == 0 and i + 1 < len(toks) and toks[i + 1] in _ANAPHORS:
            i += 2  # the relative clause describes the value: read on inside it
            seen += 1
            continue
        if not _is_word(tok) or tok in _STOP_AFTER:
            break
        nxt = toks[i + 1] if i + 1 < len(toks) else "."
        prev = toks[i - 1]
        if tok in ("not", "never", "no") and only_fillers:
            if tok == "no" and nxt == "longer":  # "94110 is no longer valid"
                found.add(PREVIOUS)
                i += 2
                seen += 2
                continue
            negation = True
        elif _owner_at(t, i, names) and (copula or only_fillers):
            found.add(OTHERS)  # "March 28 is your flatmate's", "that was your sister's"
        else:
            for stance, cues in _AFTER.items():
                if tok in cues:
                    found.add(stance)
            for stance, cues in _PARTICIPLES.items():
                if tok in cues and nxt != "from" and (
                        prev in _AUX or prev == "not" or nxt in _PASSIVE_NEXT or not _is_word(nxt)):
                    if negation:  # "4471 was not deleted": it is still there
                        negation = False
                    else:
                        found.add(stance)
        if tok in _COPULAS:
            copula = True
        if tok not in _FILLERS and tok not in _DETERMINERS and tok not in ("not", "never", "no"):
            only_fillers = False
        seen += i not in t.possessive  # "Mia's friend Noor's": the 's belongs to its word
        i += 1
    if negation:
        found.add(NEGATED)
    return found


def stances(text: str, value: str, names: str = "") -> list[frozenset[str]]:
    """The stances of each occurrence of the value in the text, in order (empty set: current).

    `names` is `target_names(instance)`: the apostrophe-s inside a target's own name ("new
    landlord's name") is not read as another person's ownership.
    """
    vw = _value_words(value)
    if not vw:
        return []
    t = _tokens(text)
    word_idx = [i for i, tok in enumerate(t.tokens) if _is_word(tok)]
    words = [t.tokens[i] for i in word_idx]
    out = []
    for start in _find(words, vw):
        first, last = word_idx[start], word_idx[start + len(vw) - 1]
        found = _look_back(t, first, names) | _look_ahead(t, last, names)
        if PREVIOUS in found and NEGATED in found and _framed_as_past(t, first, last):
            found.discard(NEGATED)  # "not 94110 anymore": it was 94110, once
        out.append(frozenset(found))
    return out


def _framed_as_past(t: _Text, first: int, last: int) -> bool:
    """The occurrence is framed by "not/no ... anymore/longer": a past value, not a false one."""
    after = t.tokens[last + 1:last + 1 + _AFTER_WINDOW]
    return "anymore" in after or "longer" in after or "longer" in t.tokens[max(0, first - 3):first]


def asserts(text: str, value: str, names: str = "") -> bool:
    """The text states the value as the user's current one: some occurrence has no stance."""
    return any(not s for s in stances(text, value, names))


def states(text: str, value: str, allowed: frozenset[str] = frozenset(),
           names: str = "") -> bool:
    """The text states the value: some occurrence is current or only in an `allowed` stance."""
    return any(s <= allowed for s in stances(text, value, names))


# Words that carry no evidence: a quote made of them matches any user message.
_STOPWORDS = _words("""a an the and or but if so of to in on at for from by with about as into over
    after before than then that this these those it its is are was were be been being am do does did
    have has had will would should can could may might must shall i me my mine we us our you your
    yours he him his she her they them their what which who whom when where why how there here not
    no yes all any some just also very too now please thanks thank ok okay oh hi hey well s t d ll m re ve""")


def quotes_overlap(predicted: str, gold: str, *, question: str = "", min_cover: float = 0.5) -> bool:
    """A predicted quote supports a gold quote when they share one passage, word for word, that
    holds at least `min_cover` of the gold quote's content words and that the question does not
    contain.

    Content words, so that "What is my ZIP code now?" does not match "my ZIP code is 94114"
    through "my", "is" and "code"; one passage, so that words in another order do not either; not
    the question's, because the question is not part of the conversation: quoting "... which is
    my current reservation time? 8:30 pm ..." back shows nothing about where the user said it.
    """
    p, g = normalize_value(predicted).split(), normalize_value(gold).split()
    content = {w for w in g if w not in _STOPWORDS}
    if not p or not content:
        return False
    asked = f" {normalize_value(question)} "
    need = max(1.0, min_cover * len(content))
    prev = [0] * (len(g) + 1)
    for x in p:
        cur = [0] * (len(g) + 1)
        for j, y in enumerate(g, 1):
            if x == y:
                cur[j] = prev[j - 1] + 1
                run = g[j - cur[j]:j]  # the longest shared passage ending here
                if (len({w for w in run if w not in _STOPWORDS}) >= need
                        and f" {' '.join(run)} " not in asked):
                    return True
        prev = cur
    return False


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
    # Last and defaulted: labels rebuilt from the six judged columns (notebook 12) still construct.
    malformed: bool = False

    def as_dict(self) -> dict:
        return asdict(self)

    @property
    def perfect(self) -> bool:
        """What the gold response must get: every applicable label at its best value."""
        return (not self.malformed and self.accuracy is True and self.op_f1 == 1.0 and self.provenance is True
                and self.leakage is not True and self.stale is not True and self.reflect is not False)

    def imperfect(self) -> list[str]:
        """The labels that fall short of `perfect`, by name."""
        bad = {"malformed": self.malformed, "accuracy": self.accuracy is not True, "op_f1": self.op_f1 != 1.0,
               "provenance": self.provenance is not True, "leakage": self.leakage is True,
               "stale": self.stale is True, "reflect": self.reflect is False}
        return [k for k, v in bad.items() if v]


def gold_operations(instance: Instance, probe: Probe) -> list:
    """The operations this probe is about (`op_ids`): what its prompt asks a system to name,
    so what Operation F1 compares with."""
    wanted = set(probe.op_ids)
    return [o for o in instance.operations if o.op_id in wanted]


def operation_f1(response: MemOpsResponse, instance: Instance, probe: Probe) -> float:
    gold = gold_operations(instance, probe)
    pred = list(response.operations)
    if not pred or not gold:
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
            allowed.add(PREVIOUS)
        if o.type == "forget" and value in {key_value(n) for n in (o.target, *o.target_aliases)}:
            allowed.add(REMOVED)
    return frozenset(allowed)


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
    return [u for o in gold_operations(instance, probe) if o.type == "reflect" for u in o.unsupported]


def score(parsed: ParsedResponse, instance: Instance, probe: Probe) -> Labels:
    """The deterministic labels of one response to one probe."""
    leak_vals = leakage_applies(instance, probe)
    stale_vals = stale_applies(instance, probe)
    is_reflect = any(o.type == "reflect" for o in gold_operations(instance, probe))
    if parsed.malformed:
        # Nothing was said, so nothing leaked and no stale value was given: those two do not
        # apply; every label that needs a correct answer fails.
        return Labels(accuracy=False, op_f1=0.0, provenance=False, leakage=None, stale=None,
                      reflect=False if is_reflect else None, malformed=True)
    r = parsed.response
    answer = r.answer
    names = target_names(instance)
    required_ok = all(states(answer, v, required_stances(instance, probe, v), names)
                      for v in probe.answer_key.required)
    forbidden_hit = any(asserts(answer, v, names) for v in probe.answer_key.forbidden)
    gold_quotes = [s.quote for s in probe.provenance]
    prov = any(quotes_overlap(p, g, question=probe.question) for p in r.provenance for g in gold_quotes)
    reflect = None
    if is_reflect:
        reflect = required_ok and not any(asserts(answer, u, names) for u in reflect_applies(instance, probe))
    return Labels(
        accuracy=required_ok and not forbidden_hit,
        op_f1=operation_f1(r, instance, probe),
        provenance=prov,
        leakage=any(mentions(answer, v) for v in leak_vals) if leak_vals else None,
        stale=any(asserts(answer, v, names) for v in stale_vals) if stale_vals else None,
        reflect=reflect,
    )


def gold_response(instance: Instance, probe: Probe) -> ParsedResponse:
    """The reply made of the probe's expected answer, its gold operations and its provenance
    quotes: the scorer must give it `Labels.perfect` (DESIGN.md "The gold response scores perfect")."""
    r = MemOpsResponse(
        answer=probe.expected_answer,
        operations=[PredictedOperation(type=o.type, target=o.target, old_value=o.old_value or "",
                                       new_value=o.new_value or "") for o in gold_operations(instance, probe)],
        provenance=[s.quote for s in probe.provenance],
    )
    return ParsedResponse(raw=r.model_dump_json(), response=r)


def applicable_labels(instance: Instance, probe: Probe) -> frozenset[str]:
    """The labels that apply to this probe (accuracy, op_f1 and provenance always; leakage,
    stale and reflect where the probe is about such a value): those the gold response gets."""
    labels = score(gold_response(instance, probe), instance, probe).as_dict()
    return frozenset(k for k, v in labels.items() if k != "malformed" and v is not None)


def gold_failures(instance: Instance, probe: Probe) -> list[str]:
    """Why the probe's own gold response is not perfect, one reason per failing label (empty:
    it is perfect). A non-empty list means the scorer misreads the gold answer or the answer
    key contradicts the expected answer; either way the probe cannot be scored."""
    labels = score(gold_response(instance, probe), instance, probe)
    answer, names = probe.expected_answer, target_names(instance)
    out = []
    for label in labels.imperfect():
        if label in ("accuracy", "reflect"):
            missing = [v for v in probe.answer_key.required
                       if not states(answer, v, required_stances(instance, probe, v), names)]
            wrong = probe.answer_key.forbidden if label == "accuracy" else reflect_applies(instance, probe)
            hit = [v for v in wrong if asserts(answer, v, names)]
            detail = "; ".join([f"required value {v!r} not stated" for v in missing]
                               + [f"{v!r} asserted as current" for v in hit])
        elif label == "op_f1":
            detail = f"{labels.op_f1:.3f}"
        elif label == "leakage":
            detail = "mentions " + ", ".join(repr(v) for v in leakage_applies(instance, probe) if mentions(answer, v))
        elif label == "stale":
            detail = "asserts " + ", ".join(repr(v) for v in stale_applies(instance, probe) if asserts(answer, v, names))
        else:
            detail = "no gold quote supports itself (all stopwords, or a passage of the question)"
        out.append(f"{label}: {detail}")
    return out


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
    from memlife import llm

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


# ----------------------------------------------------------------------------- aggregation

TABLE3_COLUMNS = {
    "accuracy": "Accuracy",
    "op_f1": "Operation F1",
    "provenance": "Provenance",
    "leakage": "Leakage",
    "stale": "Stale Value",
    "reflect": "Reflect Precision",
    # Not a column of the paper's Table 3 (its rows read NaN): the share of replies that did not
    # parse, without which a row of malformed replies would read as a row of wrong answers.
    "malformed": "Malformed",
}


def _frame(records):
    import pandas as pd

    return records if isinstance(records, pd.DataFrame) else pd.DataFrame(records)


def _means(df, by: list[str], cols: list[str]):
    """Mean of each column of `cols` per `by` group over its non-missing values, and the group's size `n`."""
    import pandas as pd

    num = df[by + cols].copy()
    for c in cols:
        num[c] = pd.to_numeric(num[c].astype("object").where(num[c].notna()), errors="coerce")
    out = num.groupby(by, sort=True)[cols].mean().reset_index()
    out["n"] = num.groupby(by, sort=True).size().values
    return out


def summarize(records, by: list[str]):
    """Mean of every label over the probes where it applies, grouped by `by` columns.

    None (not applicable, or leakage/stale of a malformed reply) is left out of a mean, so the
    leakage and stale rates are over the well-formed replies they apply to, and "malformed" is
    the share of all replies. Records without a "malformed" column get none in the summary.
    """
    df = _frame(records)
    return _means(df, by, [c for c in TABLE3_COLUMNS if c != "malformed" or c in df.columns])


# ----------------------------------------------------------------------------- the judge's labels beside the scorer's
#
# Where an LLM judge ran (`evaluate._judge`), every record carries judge_valid and judge_<label>
# for the six JUDGE_LABELS. A reply that did not parse (judge_valid False) has no labels: it is
# counted as invalid, never as a disagreement, and left out of the judge's means. The scorer's
# conventions hold for the judge too: None is "not applicable", and on a malformed reply leakage
# and stale do not apply (nothing was said, so nothing leaked).

# Our rows of Tables 3-5 say whose labels they carry once a judge ran: "scorer" or "judge".
LABELS_COLUMN = "labels"
# The judge's `operation` label is binary (were the gold operations identified?), the scorer's
# Operation F1 continuous, so the judge's rate gets a column of its own; the scorer's rows fill
# it with the binarisation the agreement uses (`deterministic_binary`: Operation F1 >= 0.5).
OPERATION_BINARY = "Operation (binary)"
JUDGE_TABLE3_COLUMNS = {
    "accuracy": "Accuracy",
    "operation": OPERATION_BINARY,
    "provenance": "Provenance",
    "leakage": "Leakage",
    "stale": "Stale Value",
    "reflect": "Reflect Precision",
    "malformed": "Malformed",
}
# Judge replies that did not parse, per row of the judge's: not in its means (an `n_` column, so
# `report.save_table` writes it as a count).
JUDGE_INVALID = "n_judge_invalid"
AGREEMENT_COLUMNS = ("label", "judged", "invalid", "one_na", "n", "agreement", "kappa", "scorer_rate", "judge_rate")


def _flag(v) -> bool | None:
    import pandas as pd

    return None if v is None or pd.isna(v) else bool(v)


def _judged_mask(df):
    """The records an LLM judge replied to (validly or not)."""
    import pandas as pd

    if "judge_valid" not in df.columns:
        return pd.Series(False, index=df.index)
    return df["judge_valid"].notna()


def judged(records) -> bool:
    """Whether any record carries an LLM judge's reply."""
    return bool(_judged_mask(_frame(records)).any())


def scorer_binary(records):
    """The scorer's labels as the judge's six binary ones (`deterministic_binary`), one row per
    record, same index; None where a label does not apply."""
    import pandas as pd

    df = _frame(records)
    fields = ("accuracy", "op_f1", "provenance", "leakage", "stale", "reflect")
    rows = []
    for rec in df[list(fields)].itertuples(index=False):
        v = dict(zip(fields, rec))
        d = deterministic_binary(Labels(accuracy=bool(v["accuracy"]), op_f1=float(v["op_f1"]),
                                        provenance=bool(v["provenance"]), leakage=_flag(v["leakage"]),
                                        stale=_flag(v["stale"]), reflect=_flag(v["reflect"])))
        rows.append({k: _flag(x) for k, x in d.items()})
    return pd.DataFrame(rows, index=df.index, columns=list(JUDGE_LABELS), dtype=object)


def judge_binary(records):
    """The judge's six labels, one row per record, same index: None where the judge said NA,
    where it did not reply or its reply was invalid, and for leakage and stale on a malformed
    reply (the scorer's convention)."""
    import pandas as pd

    df = _frame(records)
    ok = [_flag(v) is True for v in (df["judge_valid"] if "judge_valid" in df.columns else [None] * len(df))]
    malformed = [_flag(v) is True for v in (df["malformed"] if "malformed" in df.columns else [None] * len(df))]
    out = pd.DataFrame(index=df.index, columns=list(JUDGE_LABELS), dtype=object)
    for k in JUDGE_LABELS:
        col = df[f"judge_{k}"] if f"judge_{k}" in df.columns else [None] * len(df)
        out[k] = [None if not good or (bad and k in ("leakage", "stale")) else _flag(v)
                  for v, good, bad in zip(col, ok, malformed)]
    return out


def summarize_judge(records, by: list[str]):
    """The judge's labels in `summarize`'s shape, over the records a judge replied to: the mean
    of each of JUDGE_LABELS where it applies and the reply was valid, "malformed" (the share of
    the system's replies that did not parse, as in `summarize`), `n` (records judged) and
    JUDGE_INVALID (judge replies that did not parse). `operation` is the judge's binary label,
    not an F1. Empty (no rows) when no judge ran."""
    df = _frame(records)
    df = df[_judged_mask(df)]
    labels = judge_binary(df)
    frame = df[by].copy()
    for k in JUDGE_LABELS:
        frame[k] = labels[k]
    cols = list(JUDGE_LABELS)
    if "malformed" in df.columns:
        frame["malformed"] = df["malformed"]
        cols.append("malformed")
    frame[JUDGE_INVALID] = [_flag(v) is False for v in df["judge_valid"]] if len(df) else []
    out = _means(frame, by, cols)
    out[JUDGE_INVALID] = frame.groupby(by, sort=True)[JUDGE_INVALID].sum().astype(int).values
    return out


def _with_judge_rows(scorer, judge, by: list[str]):
    """Scorer rows, then for each group its judge row, told apart by LABELS_COLUMN."""
    import pandas as pd

    scorer = scorer.copy()
    judge = judge.copy()
    scorer.insert(len(by), LABELS_COLUMN, "scorer")
    judge.insert(len(by), LABELS_COLUMN, "judge")
    out = pd.concat([scorer, judge], ignore_index=True)
    out["_judge"] = out[LABELS_COLUMN] == "judge"
    out = out.sort_values(by + ["_judge"], kind="stable").drop(columns="_judge").reset_index(drop=True)
    return out


# Our rows of Table 3 count the replies that failed before any label could be read, two ways
# (`report.save_table` writes `n_` columns as counts): cut off at the token cap, and ended on their
# own without parsing — the cap's doing and the model's are not one number.
TRUNCATED_COUNT = "n_truncated"
MALFORMED_COUNT = "n_malformed"


def reply_failures(records, by: list[str]):
    """Per `by` group: TRUNCATED_COUNT, the replies that hit the token cap (finish_reason
    "length"), and MALFORMED_COUNT, those that did not parse and were not cut off. Records
    without a `truncated` column count none as truncated."""
    import pandas as pd

    df = _frame(records)
    trunc = [_flag(v) is True for v in (df["truncated"] if "truncated" in df.columns else [None] * len(df))]
    bad = [_flag(v) is True for v in (df["malformed"] if "malformed" in df.columns else [None] * len(df))]
    frame = df[by].copy()
    frame[TRUNCATED_COUNT] = trunc
    frame[MALFORMED_COUNT] = [b and not t for b, t in zip(bad, trunc)]
    out = frame.groupby(by, sort=True)[[TRUNCATED_COUNT, MALFORMED_COUNT]].sum().astype(int).reset_index()
    return out if len(out) else pd.DataFrame(columns=[*by, TRUNCATED_COUNT, MALFORMED_COUNT])


def table3_rows(records, by: list[str]):
    """Our rows of Table 3, with TABLE3_COLUMNS names, the share of malformed replies replaced by
    two counts (`reply_failures`): TRUNCATED_COUNT (cut off at the token cap) and MALFORMED_COUNT
    (ended on their own and did not parse), after `n`.

    No judge ran: `summarize(records, by)` renamed, so the tables read as they always have. A
    judge ran: the scorer's rows and the judge's (`summarize_judge`, JUDGE_TABLE3_COLUMNS names),
    each group's scorer row first, told apart by a `labels` column ("scorer"/"judge"); the judge's
    binary operation rate goes in OPERATION_BINARY (the scorer's rows: Operation F1 >= 0.5), never
    in Operation F1, and JUDGE_INVALID counts the judge's unparsed replies. Both rows of a group
    carry the same reply counts: they are the system's replies, whoever labelled them.
    """
    df = _frame(records)
    failures = reply_failures(df, by)

    def with_counts(rows):
        rows = rows.drop(columns=[TABLE3_COLUMNS["malformed"]], errors="ignore")
        return rows.merge(failures, on=by, how="left")

    scorer = summarize(df, by).rename(columns=TABLE3_COLUMNS)
    if not judged(df):
        return with_counts(scorer)
    binary = df[by].copy()
    binary["operation"] = scorer_binary(df)["operation"]
    scorer.insert(list(scorer.columns).index("Operation F1") + 1, OPERATION_BINARY,
                  _means(binary, by, ["operation"])["operation"].values)
    judge = summarize_judge(df, by).rename(columns=JUDGE_TABLE3_COLUMNS)
    out = with_counts(_with_judge_rows(scorer, judge, by))
    rest = [c for c in scorer.columns if c not in by and c != TABLE3_COLUMNS["malformed"]]
    return out[[*by, LABELS_COLUMN, *rest, TRUNCATED_COUNT, MALFORMED_COUNT, JUDGE_INVALID]]


def accuracy_table(records, column: str, names: dict, index: str = "Method"):
    """Accuracy by `column` (op_type: Table 4; probe_type: Table 5), one row per `index` value,
    one column per `names` value in its order (`names` maps the records' values to the table's).

    A judge ran: the judge's accuracy (valid replies only) in rows of their own, labelled as in
    `table3_rows`; otherwise the scorer's rows alone, unlabelled.
    """
    df = _frame(records)
    acc = df.pivot_table(index=index, columns=column, values="accuracy", aggfunc="mean").rename(columns=names)
    ours = acc.reindex(columns=list(names.values())).reset_index()
    if not judged(df):
        return ours
    mask = _judged_mask(df)
    j = df.loc[mask, [index, column]].copy()
    j["accuracy"] = judge_binary(df[mask])["accuracy"]
    jacc = _means(j, [index, column], ["accuracy"]).pivot(index=index, columns=column, values="accuracy")
    judge = jacc.rename(columns=names).reindex(columns=list(names.values())).reset_index()
    return _with_judge_rows(ours, judge, [index])


def judge_agreement(records, by: list[str] | None = None):
    """Judge-scorer agreement per label (rows: `by` groups x JUDGE_LABELS), over the records a
    judge replied to.

    judged       records the judge replied to
    invalid      of those, replies that did not parse: counted here, never as disagreements
    one_na       valid replies where exactly one of judge and scorer calls the label not applicable
    n, agreement, kappa   `stats.agreement` (percent and Cohen's kappa) over the items both label
                 (scorer: `deterministic_binary`)
    scorer_rate, judge_rate   the share of those items each labels 1
    Empty, with these columns, when no judge ran.
    """
    import pandas as pd

    from memlife import stats

    by = list(by or [])
    df = _frame(records)
    df = df[_judged_mask(df)]
    cols = [*by, *AGREEMENT_COLUMNS]
    if df.empty:
        return pd.DataFrame(columns=cols)
    scorer, judge = scorer_binary(df), judge_binary(df)
    valid = pd.Series([_flag(v) is True for v in df["judge_valid"]], index=df.index)
    groups = df.groupby(by, sort=True).groups.items() if by else [((), df.index)]
    rows = []
    for key, idx in groups:
        key = key if isinstance(key, tuple) else (key,)
        ok = idx[valid[idx].to_numpy()]
        for label in JUDGE_LABELS:
            a, b = scorer.loc[ok, label].tolist(), judge.loc[ok, label].tolist()
            paired = [(x, y) for x, y in zip(a, b) if x is not None and y is not None]
            ag = stats.agreement(a, b)
            rows.append({**dict(zip(by, key)), "label": label, "judged": len(idx), "invalid": len(idx) - len(ok),
                         "one_na": sum((x is None) != (y is None) for x, y in zip(a, b)),
                         "n": ag.n, "agreement": ag.percent_agreement, "kappa": ag.cohen_kappa,
                         "scorer_rate": sum(x for x, _ in paired) / len(paired) if paired else float("nan"),
                         "judge_rate": sum(y for _, y in paired) / len(paired) if paired else float("nan")})
    return pd.DataFrame(rows, columns=cols)


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
    from .response import parse_response
    from .schema import InstanceFileError, load_instances

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
