"""Scoring a system's responses: answer accuracy and the five operation-level diagnostics.

The paper (Section 4.1, Metrics): a GPT-4o judge "compares each model response against the gold
operation trace, gold provenance, and evidence conversation, assigns binary labels for the
applicable metrics, and we report their averages". Two implementations assign those labels:

* the deterministic scorer, the offline default, which stands
  in for the judge and says `UNDECIDED` where its rules cannot decide a label;
* the paper's LLM judge (`JUDGE_PROMPT`), used only when `llm.judge_available()` — the embedded
  model is a weak subject, never a judge. It labels every reply the scorer left a label of
  undecided, and a fixed sample of the rest (`evaluate.wants_judge`), on which its agreement with
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
        stale superseded replaced replace replacing initially first"""),
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
    PREVIOUS: _words("anymore outdated obsolete stale expired previous former old retired first"),
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
    # indices of words joined to the word before by one hyphen: "metrics-first", "data-backed"
    hyphenated: frozenset[int] = frozenset()


def _tokens(text: str) -> _Text:
    import unicodedata

    folded = unicodedata.normalize("NFKC", text).casefold().replace("\u2019", "'")
    folded = re.sub(r"n't\b", " not", folded)  # isn't -> is not, can't -> ca not
    tokens, poss, joined = [], set(), set()
    for m in _TOKEN.finditer(folded):
        if m.group() == "s" and m.start() > 0 and folded[m.start() - 1] == "'":
            poss.add(len(tokens))
        if (m.start() > 1 and folded[m.start() - 1] == "-" and folded[m.start() - 2].isalnum()
                and m.group()[0].isalnum()):
            joined.add(len(tokens))
        tokens.append(m.group())
    return _Text(tokens, frozenset(poss), frozenset(joined))


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


# Phrases that mark a value as an earlier one, right before it ("it used to be X") or after it
# ("X is out of date"), read as one cue.
_PREVIOUS_BEFORE = (("used", "to", "be"), ("used", "to"))
_PREVIOUS_AFTER = (("out", "of", "date"),)


def _look_back(t: _Text, first: int, names: str) -> set[str]:
    toks, found = t.tokens, set()
    for phrase in _PREVIOUS_BEFORE:
        if tuple(toks[max(0, first - len(phrase)):first]) == phrase:
            found.add(PREVIOUS)
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
    # A word hyphenated to the value makes one compound with it ("metrics-first reporting"),
    # whose words are no cue about the value: "first" there is not "you first said".
    while i < len(toks) and i in t.hyphenated:
        i += 1
    only_fillers, copula, negation = True, False, False
    while i < len(toks) and seen < _AFTER_WINDOW:
        tok = toks[i]
        if tok == ")":
            i += 1
            continue
        if any(tuple(toks[i:i + len(ph)]) == ph for ph in _PREVIOUS_AFTER):
            found.add(PREVIOUS)  # "X is out of date"
            break
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
    return [s for _, s in _occurrences(_tokens(text), value, names)]


def _occurrences(t: _Text, value: str, names: str = "") -> list[tuple[int, frozenset[str]]]:
    """(index of its first token, its stances) for each occurrence of the value, in order."""
    vw = _value_words(value)
    if not vw:
        return []
    word_idx = [i for i, tok in enumerate(t.tokens) if _is_word(tok)]
    words = [t.tokens[i] for i in word_idx]
    out = []
    for start in _find(words, vw):
        first, last = word_idx[start], word_idx[start + len(vw) - 1]
        found = _look_back(t, first, names) | _look_ahead(t, last, names)
        if PREVIOUS in found and NEGATED in found and _framed_as_past(t, first, last):
            found.discard(NEGATED)  # "not 94110 anymore": it was 94110, once
        out.append((first, frozenset(found)))
    return out


# ----------------------------------------------------------------------------- where the cues cannot decide
#
# A cue-word reader decides what a value's own clause says about it. Where a reply gives the
# current value in one clause and a competing value in another with no cue at all ("You first
# said X, then corrected it to Y"; "The latest is Y; X was the earlier one"), the clause of X
# does not say whether X is history or a second answer: the scorer says UNDECIDED rather than
# guess, and a configured judge labels it. So too a refusal that still names the right value,
# and a conclusion that may be stated in other words.

# Words that open a new clause: a value's reading does not reach across them.
_CLAUSE_BREAKS = _words("but then so while whereas yet though although because now later afterwards since however")
_SENTENCE_ENDS = frozenset({".", ";", "!", "?", "\n"})
# The point after these ends no sentence ("Ms. Kowalski", "Dr. Patel").
_TITLES = _words("mr mrs ms dr st prof jr sr mt no vs etc")
# A parenthesis is an aside, not a second answer in the same breath: "It's Y (before that it was X)".
_ASIDES = frozenset({"(", ")"})


def _clauses(t: _Text) -> list[int]:
    """The clause number of every token: a sentence end (not the point of "13.8" or "Ms."), a
    parenthesis or a clause-opening word starts the next."""
    out, c, toks = [], 0, t.tokens
    for i, tok in enumerate(toks):
        not_an_end = tok == "." and 0 < i and (toks[i - 1] in _TITLES or (
            i < len(toks) - 1 and toks[i - 1].isdigit() and toks[i + 1].isdigit()))
        if (tok in _SENTENCE_ENDS and not not_an_end) or tok in _CLAUSE_BREAKS or tok in _ASIDES:
            c += 1
        out.append(c)
    return out


_ABSTAIN = re.compile(
    r"\b(?:i (?:do |did |could |would |am |have )?not (?:know|have|remember|recall|find|see|tell|share|help|"
    r"answer|say|provide|give|keep|hold)|i cannot|i am (?:not able|unable)|unable to|"
    r"no (?:information|record|details?|data) (?:about|on|of|for)|sorry)\b")


def abstains(text: str) -> bool:
    """The answer declines or says it does not know ("I don't know", "I can't share that", "I have
    no information about ...", "Sorry, ...")."""
    import unicodedata

    t = unicodedata.normalize("NFKC", text).casefold().replace("\u2019", "'")
    t = re.sub(r"\bcan't\b|\bcan not\b", "cannot", t)
    t = re.sub(r"n't\b", " not", t).replace("i'm", "i am").replace("i've", "i have")
    return bool(_ABSTAIN.search(t))


def _stem(w: str) -> str:
    for suf in ("ing", "ed", "es", "s"):
        if len(w) > len(suf) + 3 and w.endswith(suf):
            return w[: -len(suf)]
    return w


def _content_stems(text: str) -> set[str]:
    return {_stem(w) for w in normalize_value(text).split() if w not in _STOPWORDS and len(w) > 2 and not w.isdigit()}


@dataclass(frozen=True)
class _Reading:
    """What an answer says about the probe's values: whether every required value is stated,
    the clauses that state one as current, and the text read."""

    t: _Text
    clause: list[int]
    required_ok: bool
    required_clauses: frozenset[int]
    missing: tuple[str, ...]


def _read(answer: str, instance: Instance, probe: Probe, names: str) -> _Reading:
    t = _tokens(answer)
    clause = _clauses(t)
    ok, where, missing = True, set(), []
    for v in probe.answer_key.required:
        occ = _occurrences(t, v, names)
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
    occ = _occurrences(rd.t, value, names)
    bare = [rd.clause[i] for i, s in occ if not s]
    # "X, or possibly Y": Y offered as the other answer, hedging X, though its own cue is tentative
    offered = [rd.clause[i] for i, s in occ if s == {TENTATIVE} and "or" in rd.t.tokens[max(0, i - 3):i]]
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
    if not missing or not set(missing) <= _conclusion_keys(instance, probe) or abstains(answer):
        return False
    gold = set()
    for o in gold_operations(instance, probe):
        if o.type == "reflect":
            gold |= _content_stems(" ".join([o.new_value or "", o.target, *o.target_aliases]))
    return bool(_content_stems(answer) & (gold - {"user"}))


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


def gold_operations(instance: Instance, probe: Probe) -> list:
    """The operations this probe is about (`op_ids`): what its prompt asks a system to name,
    so what the operation label's recall is measured against."""
    wanted = set(probe.op_ids)
    return [o for o in instance.operations if o.op_id in wanted]


def _same_event(p, g) -> bool:
    """A predicted operation names a gold one: same type, and the target or one of its aliases."""
    return p.type == g.type and target_matches(p.target, [g.target, *g.target_aliases])


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
    """Forgotten values this probe's reply must not contain (empty: metric not applicable)."""
    return _listed(_forgotten_values(instance), probe.answer_key.forbidden)


def stale_applies(instance: Instance, probe: Probe) -> list[str]:
    """Superseded values this probe's answer must not give as current (empty: not applicable)."""
    return _listed(_stale_values(instance), probe.answer_key.forbidden)


def reflect_applies(instance: Instance, probe: Probe) -> list[str]:
    """The over-generalizations of the reflect operations this probe is about: the gold trace's
    `unsupported` claims and their rewordings addressed to the user ("you hate grammar" for "the
    user hates grammar", as the planner forbids them). Empty: the probe is not about a reflect operation (or its
    reflection has no over-generalization listed)."""
    from .plan import as_person  # the planner's rewording of a claim about "the user"

    claims = [u for o in gold_operations(instance, probe) if o.type == "reflect" for u in o.unsupported]
    return list(dict.fromkeys([*claims, *(as_person(u, "you") for u in claims)]))


def _is_reflect_probe(instance: Instance, probe: Probe) -> bool:
    return any(o.type == "reflect" for o in gold_operations(instance, probe))


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
    if not _is_reflect_probe(instance, probe):
        return None
    gold = [o for o in gold_operations(instance, probe) if o.type == "reflect"]
    keys = sorted(_conclusion_keys(instance, probe)) or probe.answer_key.required
    pred = [o for o in r.operations if o.type == "reflect"]
    over = reflect_applies(instance, probe)
    if any(asserts(t, u, names) for t in (r.answer, *(o.new_value for o in r.operations)) for u in over):
        return False  # over-generalized
    if not all(any(target_matches(o.target, [g.target, *g.target_aliases]) for g in gold) for o in pred):
        return False  # out of scope
    missing = [k for k in keys if not states(r.answer, k, frozenset(), names)]
    if not missing or any(all(states(o.new_value, k, frozenset(), names) for k in keys) for o in pred):
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
    return all(any(quotes_overlap(p, s.quote, question=probe.question) for p in r.provenance)
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
    forgotten = {key_value(v) for v in _forgotten_values(instance)}
    got = [any(not st for _, st in _occurrences(rd.t, v, names)) if key_value(v) in forgotten
           else _asserted(rd, v, names) for v in probe.answer_key.forbidden]
    if True in got:
        return False
    if not rd.required_ok:
        return UNDECIDED if _may_paraphrase(r.answer, instance, probe, rd.missing) else False
    if UNDECIDED in got or abstains(r.answer):
        return UNDECIDED
    return True


def score(parsed: ParsedResponse, instance: Instance, probe: Probe) -> Labels:
    """The deterministic labels of one response to one probe (each defined, against the paper's
    sentence, in its `*_label` function)."""
    is_reflect = _is_reflect_probe(instance, probe)
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


def gold_response(instance: Instance, probe: Probe) -> ParsedResponse:
    """The reply made of the probe's expected answer, its gold operations and its provenance
    quotes: the scorer must give it `Labels.perfect` (tests/test_memops_score.py holds it to that).

    A value the user asked to forget is left out of its operations ("" where it stood: the
    forget operation's old value, the remember operation that first stored it), as the gold
    answer leaves it out: a reply that records it in an operation leaks it (`leakage_label`).
    """
    forgotten = _forgotten_values(instance)

    def kept(value: str | None) -> str:
        return "" if not value or any(mentions(value, f) for f in forgotten) else value

    r = MemOpsResponse(
        answer=probe.expected_answer,
        operations=[PredictedOperation(type=o.type, target=o.target, old_value=kept(o.old_value),
                                       new_value=kept(o.new_value)) for o in gold_operations(instance, probe)],
        provenance=[s.quote for s in probe.provenance],
    )
    return ParsedResponse(raw=r.model_dump_json(), response=r)


def applicable_labels(instance: Instance, probe: Probe) -> frozenset[str]:
    """The labels that apply to this probe (accuracy, op_f1, operation and provenance always;
    leakage, stale and reflect where the probe is about such a value): those the gold response gets."""
    labels = score(gold_response(instance, probe), instance, probe).as_dict()
    return frozenset(k for k, v in labels.items() if k != "malformed" and v is not None)


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
                       if not states(answer, v, required_stances(instance, probe, v), names)]
            hit = [v for v in probe.answer_key.forbidden if asserts(answer, v, names)]
            detail = "; ".join([f"required value {v!r} not stated" for v in missing]
                               + [f"{v!r} asserted as current" for v in hit])
        elif label == "reflect":
            hit = [v for v in reflect_applies(instance, probe) if asserts(answer, v, names)]
            missing = [v for v in probe.answer_key.required if not states(answer, v, frozenset(), names)]
            detail = "; ".join([f"conclusion {v!r} not stated" for v in missing]
                               + [f"over-generalization {v!r} asserted" for v in hit])
        elif label in ("op_f1", "operation"):
            p, rc = operation_scores(r, instance, probe)
            detail = f"precision {p:.3f}, recall {rc:.3f}"
        elif label == "leakage":
            detail = "mentions " + ", ".join(repr(v) for v in leakage_applies(instance, probe) if mentions(answer, v))
        elif label == "stale":
            detail = "asserts " + ", ".join(repr(v) for v in stale_applies(instance, probe) if asserts(answer, v, names))
        elif label == "provenance":
            bad = [s.quote for s in probe.provenance
                   if not any(quotes_overlap(q, s.quote, question=probe.question) for q in r.provenance)]
            detail = "gold quotes that support no quote, themselves included (all stopwords, or a passage of " \
                     "the question): " + "; ".join(repr(q) for q in bad)
        else:
            detail = label
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


# Deterministic labels as the judge's binary labels, for agreement: the same six labels, the
# scorer's undecided ones as None (nothing to agree on).
def deterministic_binary(labels: Labels) -> dict[str, bool | None]:
    return {k: (v if _decided(v) else None) for k, v in
            {"accuracy": labels.accuracy, "operation": labels.operation, "provenance": labels.provenance,
             "leakage": labels.leakage, "stale": labels.stale, "reflect": labels.reflect}.items()}


# ----------------------------------------------------------------------------- aggregation
#
# Records (notebook 12's records.parquet, `evaluate._scored`) carry each label as True/False/None
# (None: does not apply, or undecided) and `undecided`, the names of the labels the scorer left
# undecided. Where an LLM judge ran (`evaluate._judge`: on every reply with an undecided label
# and on a sample of the rest), a record also carries judge_valid and judge_<label> for the six
# JUDGE_LABELS. A judge reply that did not parse (judge_valid False) has no labels: it is counted
# as invalid, never as a disagreement. The scorer's conventions hold for the judge too: None is
# "not applicable", and on a malformed reply leakage and stale do not apply.
#
# The label a table averages (`resolved`): the scorer's where it decided, else the judge's, else
# missing. The judge's labels on the sample of decided replies are not used in the means: they
# are what `judge_agreement` compares with the scorer's (agreement and Cohen's kappa).

TABLE3_COLUMNS = {
    "accuracy": "Accuracy",
    # The paper's column name; the mean of the binary operation label (`operation_label`), as
    # the paper's judge averages binary labels.
    "operation": "Operation F1",
    "provenance": "Provenance",
    "leakage": "Leakage",
    "stale": "Stale Value",
    "reflect": "Reflect Precision",
    # Not columns of the paper's Table 3 (its rows read NaN there):
    "op_f1": "Op-F1 (continuous)",  # `operation_f1`, against the same gold trace
    # the share of replies that did not parse, without which a row of malformed replies would
    # read as a row of wrong answers
    "malformed": "Malformed",
    # the share of replies with a label the scorer could not decide (before any judge)
    "undecided": "Undecided",
}
# Our rows of Tables 3-5 say whose labels they carry: "scorer", or "scorer + judge" where a judge
# labelled what the scorer left undecided.
LABELS_COLUMN = "labels"
JUDGE_TABLE3_COLUMNS = {"agreement": "Judge agreement", "kappa": "Judge kappa", "n": "n_judge_pairs"}
# Judge replies that did not parse, per row (an `n_` column, so `report.save_table` writes it
# as a count).
JUDGE_INVALID = "n_judge_invalid"
AGREEMENT_COLUMNS = ("label", "judged", "invalid", "one_na", "n", "agreement", "kappa", "scorer_rate", "judge_rate")


def _frame(records):
    import pandas as pd

    return records if isinstance(records, pd.DataFrame) else pd.DataFrame(records)


def _flag(v) -> bool | None:
    import pandas as pd

    if isinstance(v, str):
        if v == UNDECIDED:
            return None
        raise ValueError(f"not a label: {v!r}")
    return None if v is None or pd.isna(v) else bool(v)


def _undecided_sets(df) -> list[frozenset[str]]:
    """Per record, the labels the scorer left undecided (none for records without the column)."""
    if "undecided" not in df.columns:
        return [frozenset()] * len(df)
    return [frozenset(x for x in str(v).split(",") if x) if isinstance(v, str) else frozenset()
            for v in df["undecided"]]


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
    """The scorer's six labels (JUDGE_LABELS), one row per record, same index; None where a
    label does not apply or the scorer left it undecided. Records without an `operation` column
    (written before it existed) get it from Op-F1 (1 exactly when the label is 1)."""
    import pandas as pd

    df = _frame(records)
    out = pd.DataFrame(index=df.index, columns=list(JUDGE_LABELS), dtype=object)
    for k in JUDGE_LABELS:
        if k == "operation" and k not in df.columns and "op_f1" in df.columns:
            col = [None if pd.isna(v) else float(v) == 1.0 for v in df["op_f1"]]
        else:
            col = df[k] if k in df.columns else [None] * len(df)
        out[k] = [_flag(v) for v in col]
    return out


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


def resolved(records):
    """The labels the tables average, one row per record, same index: the scorer's where it
    decided; where it left a label undecided, the judge's (None where no judge labelled it)."""
    df = _frame(records)
    out = scorer_binary(df)
    if not judged(df):
        return out
    judge = judge_binary(df)
    for (idx, und) in zip(df.index, _undecided_sets(df)):
        for k in und & set(JUDGE_LABELS):
            out.at[idx, k] = judge.at[idx, k]
    return out


def summarize(records, by: list[str]):
    """Every label's mean over the probes where it applies and is decided, grouped by `by`.

    Columns: the six labels (JUDGE_LABELS; where a judge ran, the scorer's undecided labels are
    the judge's: `resolved`), op_f1 (the continuous Op-F1), malformed (share of all replies),
    undecided (share of replies with a label the scorer left undecided), n (replies) and
    n_<label> (the replies each label's mean is over). None (not applicable, undecided and not
    judged, or leakage/stale of a malformed reply) is left out of a mean, so the leakage and
    stale rates are over the well-formed replies they apply to. Records without a column
    (malformed, op_f1, undecided) get none in the summary.
    """
    df = _frame(records)
    labels = resolved(df)
    frame = df[by].copy()
    cols = []
    for k in TABLE3_COLUMNS:
        if k in JUDGE_LABELS:
            frame[k] = labels[k]
        elif k == "undecided":
            if k not in df.columns:
                continue
            frame[k] = [bool(u) for u in _undecided_sets(df)]
        elif k in df.columns:
            frame[k] = df[k]
        else:
            continue
        cols.append(k)
    out = _means(frame, by, cols)
    counts = frame.groupby(by, sort=True)[list(JUDGE_LABELS)].count().reset_index(drop=True)
    for k in JUDGE_LABELS:
        out[f"n_{k}"] = counts[k].astype(int).values
    return out


def _means(df, by: list[str], cols: list[str]):
    """Mean of each column of `cols` per `by` group over its non-missing values, and the group's size `n`."""
    import pandas as pd

    num = df[by + cols].copy()
    for c in cols:
        num[c] = pd.to_numeric(num[c].astype("object").where(num[c].notna()), errors="coerce")
    out = num.groupby(by, sort=True)[cols].mean().reset_index()
    out["n"] = num.groupby(by, sort=True).size().values
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
    """Our rows of Table 3: `summarize(records, by)` with TABLE3_COLUMNS names, n, and n_<label>
    for the replies behind each label's mean.

    A judge ran: the `labels` column says "scorer + judge" (the judge labelled what the scorer
    left undecided), and each row gets the judge's agreement with the scorer on the decided
    labels it also saw (`Judge agreement`, `Judge kappa`, pooled over the six labels, over
    n_judge_pairs label pairs) and JUDGE_INVALID, its replies that did not parse.

    Each row also counts the replies that failed before any label could be read
    (`reply_failures`): TRUNCATED_COUNT and MALFORMED_COUNT, in place of a malformed share.
    """
    import pandas as pd

    df = _frame(records)
    failures = reply_failures(df, by)
    out = summarize(df, by).rename(columns=TABLE3_COLUMNS)
    out = out.drop(columns=[TABLE3_COLUMNS["malformed"]], errors="ignore").merge(failures, on=by, how="left")
    if not judged(df):
        return out
    out.insert(len(by), LABELS_COLUMN, "scorer + judge")
    rows = []
    for key, g in df.groupby(by, sort=True):
        pooled = pooled_agreement(g)
        rows.append({**dict(zip(by, key if isinstance(key, tuple) else (key,))), **pooled,
                     JUDGE_INVALID: int((_judged_mask(g) & g["judge_valid"].map(lambda v: _flag(v) is False)).sum())})
    agree = pd.DataFrame(rows).rename(columns=JUDGE_TABLE3_COLUMNS)
    return out.merge(agree, on=by, how="left")


def pooled_agreement(records) -> dict:
    """The judge's agreement with the scorer over every (record, label) pair both decided:
    {"n", "agreement", "kappa"} (`stats.agreement`; NaN where there is no pair)."""
    from memlife import stats

    df = _frame(records)
    df = df[_judged_mask(df)]
    if df.empty:
        return {"n": 0, "agreement": float("nan"), "kappa": float("nan")}
    a, b = scorer_binary(df), judge_binary(df)
    xs = [a.at[i, k] for i in df.index for k in JUDGE_LABELS]
    ys = [b.at[i, k] for i in df.index for k in JUDGE_LABELS]
    ag = stats.agreement(xs, ys)
    return {"n": ag.n, "agreement": ag.percent_agreement, "kappa": ag.cohen_kappa}


def accuracy_table(records, column: str, names: dict, index: str = "Method"):
    """Accuracy by `column` (op_type: Table 4; probe_type: Table 5), one row per `index` value,
    one column per `names` value in its order (`names` maps the records' values to the table's),
    then `n_<name>` per column (the replies behind the cell) and `Undecided` (the share of the
    row's replies whose accuracy the scorer left undecided).

    Accuracy is `resolved`: where a judge ran, it labels what the scorer left undecided, and the
    `labels` column says "scorer + judge".
    """
    import pandas as pd

    df = _frame(records)
    frame = df[[index, column]].copy()
    frame["accuracy"] = pd.to_numeric(resolved(df)["accuracy"].astype("object"), errors="coerce")
    acc = frame.pivot_table(index=index, columns=column, values="accuracy", aggfunc="mean", dropna=False)
    cnt = frame.pivot_table(index=index, columns=column, values="accuracy", aggfunc="count", dropna=False)
    acc = acc.rename(columns=names).reindex(columns=list(names.values()))
    cnt = cnt.rename(columns=names).reindex(columns=list(names.values())).fillna(0).astype(int)
    cnt.columns = [f"n_{c}" for c in cnt.columns]
    ours = pd.concat([acc, cnt], axis=1)
    ours.columns.name = None
    ours = ours.reset_index()
    if "undecided" in df.columns:
        und = pd.Series(["accuracy" in u for u in _undecided_sets(df)], index=df.index, dtype=float)
        ours["Undecided"] = ours[index].map(und.groupby(df[index]).mean())
    if judged(df):
        ours.insert(1, LABELS_COLUMN, "scorer + judge")
    return ours


def judge_agreement(records, by: list[str] | None = None):
    """Judge-scorer agreement per label (rows: `by` groups x JUDGE_LABELS), over the records a
    judge replied to.

    judged       records the judge replied to
    invalid      of those, replies that did not parse: counted here, never as disagreements
    one_na       valid replies where exactly one of judge and scorer calls the label not
                 applicable (or the scorer left it undecided)
    n, agreement, kappa   `stats.agreement` (percent and Cohen's kappa) over the items both label
                 (the scorer's decided labels: undecided ones have nothing to agree on)
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
