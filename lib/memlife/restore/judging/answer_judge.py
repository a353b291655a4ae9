"""Grading a reader's hypothesis against a LongMemEval answer, offline: CORRECT, INCORRECT or
UNDECIDED.

LongMemEval's answers are not short keys. Temporal answers carry alternatives ("7 days. 8 days
(including the last day) is also acceptable.", "25 minutes and 50 seconds (or 25:50)"), counts
come in words or digits, multi-session answers may be sentences whose key fact is one number
("I have worked on or bought five model kits. The scales ..."), and preference answers are rubric
sentences ("The user would prefer responses that ..."). :func:`grade` reads an answer into its
acceptable alternatives and their key facts, reads what the hypothesis asserts, and decides only
what those facts decide:

1. The answer's own text is CORRECT; an empty reply is INCORRECT.
2. An abstention or refusal ("I don't know", "not mentioned in the snippets", "I'd rather not
   answer that") is INCORRECT on every question: every non-abstention question of the file has an
   answer. A reply that abstains yet states the key facts ("not sure, but it was Luna") is graded
   on the facts.
3. A preference rubric is UNDECIDED for any other reply: whether advice fits a rubric is a
   reader's judgement.
4. Numbers decide numeric answers, in words or digits, with units: money, percentages, clock
   times, dates, durations (converted within seconds/minutes/hours, days/weeks, months/years) and
   counts. The hypothesis' values of the answer's kind must all be acceptable; a different value
   is INCORRECT ("You have 4 items" for 3). Next to other values of the kind, the answer's value
   counts when it is marked as the total ("so $160 in total") or the others add up to it (a
   breakdown); joined to a wrong value by "or" / "to" / "-" it is a hedge (INCORRECT); otherwise
   UNDECIDED. Values stated as superseded ("used to", "up from") or current ("now") are set aside
   when the question asks for the other one.
5. Yes/no answers are decided by the reply's first word; "A or B" questions by the option the
   reply names first; order questions by the order of the named entities.
6. Any other answer is checked by its key words (short answers: content words not already in the
   question; sentences: quoted titles and capitalized names). All present: CORRECT. None present,
   or a name of the answer missing while the reply names another: INCORRECT where the key is one
   word or a name, else UNDECIDED (a description can be paraphrased without sharing a word).
   Partly present: UNDECIDED.

Negation: a key word or value preceded in its clause by "not", "no", "never", "no longer",
"instead of", ... ("not Luna anymore", "is no longer at TechCorp") is not asserted.

Known limits: paraphrases that share no word with a multi-word description, synonyms ("weekly"
for "every week") and order answers without names stay UNDECIDED; sequence-sensitive keys that are
not an order question (a melody of note letters) are matched as a set.
"""
from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import yaml

from memlife.restore.judging import answer_text

CORRECT, INCORRECT, UNDECIDED = "CORRECT", "INCORRECT", "UNDECIDED"
LABELS = (CORRECT, INCORRECT, UNDECIDED)

PREFERENCE = "single-session-preference"
KNOWLEDGE_UPDATE = "knowledge-update"


# ---------------------------------------------------------------------------------------------
# The answer: alternatives and key facts
# ---------------------------------------------------------------------------------------------
@dataclass
class Alternative:
    text: str
    is_range: bool = False  # "Answers ranging from 7 days to 10 days are also acceptable"


def alternatives(answer: str) -> list[Alternative]:
    """The acceptable answers an answer states: the main one, "X. Y is also acceptable", "X (or
    Y)", an acronym glossing a short answer ("University of California, Los Angeles (UCLA)"), and
    "A or B" only where the whole answer is two short phrases (a list "Ruby, Python, or PHP"
    names what was said, not alternatives)."""
    text = str(answer).strip()
    out: list[Alternative] = []
    m = re.match(r"(.+?[.!])\s+(.+?)\s+(?:is|are) also acceptable\.?\s*$", text, re.S | re.I)
    if m:
        text, other = m.group(1).strip(), re.sub(r"\s*\([^)]*\)", "", m.group(2)).strip()
        rng = re.match(r"answers ranging from (.+)$", other, re.I)
        out.append(Alternative(rng.group(1), True) if rng else Alternative(other))
    m = re.search(r"\(\s*or\s+([^)]+)\)", text)
    if m:
        out.append(Alternative(re.split(r",\s*if\b", m.group(1))[0].strip()))
        text = (text[:m.start()] + text[m.end():]).strip()
    m = re.fullmatch(r"(.+?)\s*\(([A-Z]{2,}[a-z]?)\)\.?", text)
    if m and len(m.group(1).split()) <= 6:
        out.append(Alternative(m.group(2)))
        text = m.group(1)
    m = re.fullmatch(r"([^,]+?)\s+or\s+([^,]+?)\.?", text)
    if m and all(len(p.split()) <= 3 for p in m.groups()):
        return [Alternative(m.group(1)), Alternative(m.group(2))] + out
    return [Alternative(text)] + out


def _drop_parentheses(text: str) -> str:
    return re.sub(r"\s*\([^)]*\)", "", text)


def _question_unit(question: str) -> tuple[str, float] | None:
    """The duration a bare number answers: "How many weeks ago ...?" -> weeks; ages in years."""
    q = question.lower()
    m = answer_text._QUESTION_UNIT.search(q)
    if m:
        return answer_text._unit_of(m.group(1))
    return answer_text._DURATION["year"] if answer_text._QUESTION_AGE.search(q) else None


@dataclass
class NumericKey:
    kind: str
    values: list  # required values (several: a stated range or a two-part answer)
    intervals: list = field(default_factory=list)  # single-valued: acceptable [lo, hi]
    unit: str | None = None
    modifier: bool = False
    bound: str = ""  # the answer's value is a bound ("over a year"): see Quantity.bound

    @property
    def single(self) -> bool:
        return bool(self.intervals)


def _numeric_key(alt: Alternative, question: str) -> NumericKey | None:
    toks = answer_text._tokens(_drop_parentheses(alt.text))
    quantitative = bool(answer_text._QUANTITATIVE.search(question.lower()))
    qs = [q for q in answer_text._quantities(toks, _question_unit(question)) if not q.negated
          and (q.kind != "count" or quantitative)]
    if not qs:
        return None
    kind = qs[0].kind
    ks = [q for q in qs if q.kind == kind]
    if len(answer_text._content(toks)) > answer_text._LONG_ANSWER:
        # a sentence: its total, else (unless the question asks two things) its first sentence
        totals = [q for q in ks if q.total]
        if totals:
            ks = totals[-1:]
        elif question.count("?") < 2:
            ks = [q for q in ks if q.sentence == ks[0].sentence]
    if kind == "count" and any(not q.modifier for q in ks):
        ks = [q for q in ks if not q.modifier]
    first = ks[0]
    key = NumericKey(kind, [q.value for q in ks], unit=first.unit, modifier=first.modifier, bound=first.bound)
    if alt.is_range and len(ks) == 2:
        key.intervals = [(min(key.values), max(key.values))]
    elif len({_hashable(v) for v in key.values}) == 1:
        v = key.values[0]
        key.intervals = [(v, float("inf")) if key.bound == "min" else (0.0, v) if key.bound == "max" else (v, v)]
    return key


def _hashable(v):
    return tuple(v) if isinstance(v, (tuple, list)) else round(float(v), 6)


def _same(kind: str, a, b, ampm: bool = True) -> bool:
    if isinstance(a, tuple) or isinstance(b, tuple):
        return isinstance(a, tuple) and isinstance(b, tuple) and a == b
    if kind == "clock" and not ampm:
        return abs((a - b) % 720) < 1e-6 or abs((b - a) % 720) < 1e-6
    return abs(float(a) - float(b)) < 1e-6 * max(1.0, abs(float(a)))


def _in(key: NumericKey, q: answer_text.Quantity) -> bool:
    if q.bound in ("min", "max") and q.bound != key.bound:
        return False  # "under a year" for "over a year"; "more than 3" for exactly 3
    if key.kind == "pair":
        return any(_same("pair", lo, q.value) for lo, _ in key.intervals)
    return any(lo - 1e-9 <= q.value <= hi + 1e-9 if lo != hi else _same(key.kind, lo, q.value, q.ampm)
               for lo, hi in key.intervals)


def _relevant(key: NumericKey, qs: list[answer_text.Quantity], asks_past: bool) -> list[answer_text.Quantity]:
    """The hypothesis' values that answer what the key asks."""
    if key.kind == "clock":
        # a bare "7:00" pair is a clock time when a clock time is asked
        qs = [answer_text.Quantity("clock", q.value[0] % 12 * 60 + q.value[1], q.i, q.j, ampm=False, link=q.link,
                       negated=q.negated, orient=q.orient, total=q.total)
              if q.kind == "pair" and not q.ampm else q for q in qs]
    if key.kind == "dur_s":
        # "27:45" for a duration: minutes:seconds or hours:minutes, whichever the answer's value is
        targets = [lo for lo, _ in key.intervals] + [v for v in key.values if not isinstance(v, tuple)]
        qs = [answer_text.Quantity("dur_s", _clock_duration(q.value, targets), q.i, q.j, link=q.link, negated=q.negated,
                       orient=q.orient, total=q.total) if q.kind == "pair" and q.value[1] < 60 else q for q in qs]
    h = [q for q in qs if q.kind == key.kind and not q.negated]
    h = [q for q in h if q.orient != ("current" if asks_past else "past")]
    if key.kind == "count":
        yearlike = all(1900 <= float(v) <= 2099 for v in key.values)
        h = [q for q in h if (not q.modifier or key.modifier) and (yearlike or not 1900 <= q.value <= 2099)]
        if key.unit in answer_text._MEASURE.values():
            h = [q for q in h if q.unit in (key.unit, None)]
        elif key.unit is not None:
            h = [q for q in h if q.unit not in answer_text._MEASURE.values()]
    return h


def _clock_duration(pair: tuple, targets: list) -> float:
    a, b = pair
    readings = (a * 60 + b, a * 3600 + b * 60)
    return next((r for r in readings if any(_same("dur_s", r, t) for t in targets)), readings[0])


def _grade_numbers(keys: list[NumericKey], hyp_qs: list[answer_text.Quantity], asks_past: bool) -> str:
    labels = []
    # single-valued keys of one kind pool their acceptable values: "7 or 8 days" is right when
    # both 7 and 8 days are acceptable
    pooled: dict[str, NumericKey] = {}
    for k in keys:
        if k.single:
            if k.kind in pooled:
                pooled[k.kind].intervals += k.intervals
            else:
                pooled[k.kind] = NumericKey(k.kind, list(k.values), list(k.intervals), k.unit, k.modifier, k.bound)
    for key in pooled.values():
        h = _relevant(key, hyp_qs, asks_past)
        if not h and key.kind == "pair":
            # "one part tea tree oil to ten parts carrier oil" states the ratio 1:10 in words
            words = NumericKey("count", list(key.values[0]))
            labels.append(_grade_multi(words, _relevant(words, hyp_qs, asks_past)))
            continue
        labels.append(_grade_single(key, h))
    for key in keys:
        if not key.single:
            labels.append(_grade_multi(key, _relevant(key, hyp_qs, asks_past)))
    return _any_correct(labels)


def _grade_single(key: NumericKey, h: list[answer_text.Quantity]) -> str:
    if not h:
        return INCORRECT  # no value of the kind asked
    ok = [_in(key, q) for q in h]
    if all(ok):
        return CORRECT
    if not any(ok):
        return UNDECIDED if key.bound == "approx" else INCORRECT
    good = [q for q, o in zip(h, ok) if o]
    bad = [q for q, o in zip(h, ok) if not o]
    if any(g.link is not None and any(b.link == g.link for b in bad) for g in good):
        return INCORRECT  # hedged: "$2,000 or $2,500"
    if any(g.total for g in good):
        return CORRECT  # "... so $185 in total"
    if key.kind != "pair" and any(_same(key.kind, sum(b.value for b in bad), g.value) for g in good):
        return CORRECT  # a breakdown that adds up to the stated value
    return UNDECIDED


def _grade_multi(key: NumericKey, h: list[answer_text.Quantity]) -> str:
    if not h:
        return INCORRECT
    have = [v for v in key.values if any(_same(key.kind, v, q.value, q.ampm) for q in h)]
    extra = [q for q in h if not any(_same(key.kind, v, q.value, q.ampm) for v in key.values)]
    if len(have) == len(key.values):
        return UNDECIDED if extra else CORRECT
    if extra:
        return INCORRECT if not have or key.kind != "count" else UNDECIDED
    return UNDECIDED


def _any_correct(labels: list[str]) -> str:
    if CORRECT in labels:
        return CORRECT
    if labels and all(lab == INCORRECT for lab in labels):
        return INCORRECT
    return UNDECIDED


# ---------------------------------------------------------------------------------------------
# Names, choices, order, key words
# ---------------------------------------------------------------------------------------------
def _entities(toks: list[answer_text.Tok], text: str = "") -> list[tuple[int, tuple[str, ...]]]:
    """(first token, stems) of each name: runs of capitalized words (joined by "of", "the", ...,
    with numbers after a name: "XPS 13"), and quoted titles."""
    out = []
    k = 0
    while k < len(toks):
        t = toks[k]
        if t.kind == "w" and t.cap and t.text not in answer_text._STARTERS:
            run = [k]
            k += 1
            while k < len(toks):
                u = toks[k]
                if (u.kind == "w" and u.cap) or (u.kind == "n" and toks[k - 1].kind == "w" and toks[k - 1].cap):
                    run.append(k)
                elif (u.kind == "w" and u.text in answer_text._NAME_JOINERS and k + 1 < len(toks)
                      and toks[k + 1].kind == "w" and toks[k + 1].cap):
                    run.append(k)
                else:
                    break
                k += 1
            out.append((run[0], tuple(answer_text._key(toks[r]) for r in run if toks[r].text not in ("the", "and"))))
            continue
        k += 1
    for m in re.finditer(r"(?<![\w'])'([^']{2,}?)'(?![\w])|\"([^\"]{2,}?)\"", text):
        inner = answer_text._tokens(m.group(1) or m.group(2))
        stems = tuple(answer_text._key(t) for t in answer_text._content(inner))
        if stems:
            start = next((k for k, t in enumerate(toks) if t.start >= m.start()), 0)
            out.append((start, stems))
    return [e for e in out if e[1]]


def _find(seq: tuple[str, ...], hyp: list[answer_text.Tok], asks_past: bool, negated: bool = False) -> int | None:
    """Index of the first asserted occurrence of a stem sequence among the reply's content
    tokens, or None. `negated`: the answer itself states the word negated ("GPS not
    functioning"), so the reply must too."""
    words = [t for t in answer_text._content(hyp)]
    keys = [answer_text._key(t) for t in words]
    for k in range(len(keys) - len(seq) + 1):
        if tuple(keys[k:k + len(seq)]) == seq:
            first = words[k]
            if first.negated == negated and first.orient != ("current" if asks_past else "past"):
                return k
    return None


def _content_entity(stems: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(s for s in stems if s not in answer_text.STOPWORDS)


def _grade_yes_no(gold: str, hyp: list[answer_text.Tok]) -> str:
    words = [t.text for t in hyp if t.kind == "w"]
    if not words:
        return UNDECIDED
    said = "yes" if words[0] in ("yes", "yeah", "yep", "correct", "indeed") else \
        "no" if words[0] in ("no", "nope", "not") else None
    return UNDECIDED if said is None else CORRECT if said == gold else INCORRECT


_CHOICE = re.compile(r",\s*([^,?]+?)\s+or\s+([^,?]+?)\s*\?\s*$")


def _choice(question: str):
    """The two options of an "..., A or B?" question, each as the stems only it has."""
    m = _CHOICE.search(question.strip())
    if not m or not m.group(1).strip():
        return None
    a, b = ({answer_text._key(t) for t in answer_text._content(answer_text._tokens(g))} for g in m.groups())
    a, b = a - b, b - a
    return (a, b) if a and b else None


def _grade_choice(options, gold_toks: list[answer_text.Tok], hyp: list[answer_text.Tok]) -> str | None:
    gold = {answer_text._key(t) for t in answer_text._content(gold_toks)}
    scores = [len(gold & o) for o in options]
    if scores[0] == scores[1]:
        return None  # the answer names neither option (or both): not a choice answer
    right = 0 if scores[0] > scores[1] else 1
    clauses: dict[int, set[int]] = {}
    for k, t in enumerate(hyp):
        if t.kind not in "wn" or t.negated:
            continue
        near = {u.text for u in hyp[max(0, k - 2):k] if u.clause == t.clause}
        if near & answer_text._NOT_THE_ANSWER:
            continue
        for o, opt in enumerate(options):
            if answer_text._key(t) in opt:
                clauses.setdefault(t.clause, set()).add(o)
    for c in sorted(clauses):
        named = clauses[c]
        if len(named) == 1:
            return CORRECT if right in named else INCORRECT
        return UNDECIDED
    return UNDECIDED


_ORDER_QUESTION = re.compile(r"\b(the|in|what) order\b|\border of\b|\bfirst, second\b", re.I)
_ORDER_SPLIT = re.compile(r"[,;]|\bthen\b|\bfinally\b|\blastly\b|\bfollowed by\b|\b\d+\.\s", re.I)


def _grade_order(answer: str, hyp: list[answer_text.Tok], asks_past: bool) -> str:
    keys = []
    for seg in _ORDER_SPLIT.split(_drop_parentheses(answer)):
        ents = _entities(answer_text._tokens(seg), seg)
        if ents:
            keys.append(_content_entity(min(ents)[1]))
    keys = [k for k in keys if k]
    if len(keys) < 2:
        return UNDECIDED
    found = [_find(k, hyp, asks_past) for k in keys]
    seen = [f for f in found if f is not None]
    if any(a >= b for a, b in zip(seen, seen[1:])):
        return INCORRECT
    return CORRECT if len(seen) == len(keys) else UNDECIDED


def _names_said(hyp: list[answer_text.Tok]) -> set[str]:
    """Stems of the names a reply uses; a lone capitalized word opening a sentence ("Under your
    bed.") is not taken for a name."""
    out = set()
    for k, stems in _entities(hyp):
        opens = k == 0 or hyp[k - 1].text in answer_text._SENTENCE_PUNCT
        if len(stems) > 1 or not opens:
            out |= set(stems)
    return out


def _grade_text(alt: Alternative, question: str, hyp: list[answer_text.Tok], asks_past: bool) -> str:
    text = _drop_parentheses(alt.text)
    toks = answer_text._tokens(text)
    question_stems = {answer_text._key(t) for t in answer_text._content(answer_text._tokens(question))}
    content = answer_text._content(toks)
    competing = _names_said(hyp) - {answer_text._key(t) for t in content} - question_stems - answer_text.STOPWORDS
    if len(content) > answer_text._LONG_ANSWER:
        names = [_content_entity(s) for _, s in _entities(toks, text)]
        names = [s for s in names if s and not set(s) <= question_stems]
        if not names:
            return UNDECIDED  # a sentence without names or numbers to check
        found = [_find(s, hyp, asks_past) is not None for s in names]
        return CORRECT if all(found) else INCORRECT if not any(found) else UNDECIDED
    key = {answer_text._key(t) for t in content} - question_stems or {answer_text._key(t) for t in content}
    if not key:
        return UNDECIDED
    denied = {answer_text._key(t) for t in content if t.negated}
    asserted = {s for s in key if _find((s,), hyp, asks_past, s in denied) is not None}
    if asserted == key:
        return CORRECT
    proper = {answer_text._key(t) for t in content if t.cap and t.text not in answer_text._STARTERS}
    proper_missing = (key - asserted) & proper
    if not asserted:
        return INCORRECT if len(key) == 1 or proper_missing or competing else UNDECIDED
    return INCORRECT if proper_missing and competing else UNDECIDED


# ---------------------------------------------------------------------------------------------
# Grading
# ---------------------------------------------------------------------------------------------
def is_rubric(question_type: str, answer: str) -> bool:
    """A preference answer written as a rubric ("The user would prefer ...")."""
    return question_type == PREFERENCE and bool(answer_text._RUBRIC.search(str(answer)))


def numeric_kind(question: str, answer) -> str | None:
    """The kind of value a numeric answer asks for ("count", "money", "duration", "date", ...), as
    :func:`grade` reads it (the first acceptable alternative with a numeric key); None when the
    answer is not decided by a number."""
    for alt in alternatives(str(answer)):
        key = _numeric_key(alt, str(question))
        if key is not None:
            return key.kind
    return None


def abstains(hypothesis: str) -> bool:
    """The reply says it does not know or will not answer: in its first sentence, or anywhere
    when the reply is short."""
    s = answer_text._prepare(hypothesis).lower()
    first = re.split(r"(?<=[.!?])\s", s.strip(), maxsplit=1)[0]
    return bool(answer_text._ABSTAIN.search(first) or (len(s.split()) <= answer_text._ABSTAIN_SHORT_WORDS and answer_text._ABSTAIN.search(s)))


def grade(question: str, question_type: str, answer, hypothesis) -> str:
    """CORRECT, INCORRECT or UNDECIDED: `hypothesis` graded against a LongMemEval `answer` (an
    int answer is read as its digits)."""
    return _grade(str(question), str(question_type), str(answer), "" if hypothesis is None else str(hypothesis))


@functools.lru_cache(maxsize=1 << 16)  # records repeat an item's (question, answer, reply) across cells
def _grade(question: str, question_type: str, answer: str, hyp: str) -> str:
    said = answer_text.normalize(hyp)
    if not said:
        return INCORRECT
    if said == answer_text.normalize(answer):
        return CORRECT
    facts = _grade_facts(question, question_type, answer, hyp)
    if abstains(hyp):
        return CORRECT if facts == CORRECT else INCORRECT
    return facts


def _grade_facts(question: str, question_type: str, answer: str, hypothesis: str) -> str:
    if is_rubric(question_type, answer):
        return UNDECIDED
    hyp = answer_text._tokens(hypothesis)
    ql = question.lower()
    asks_past = question_type == KNOWLEDGE_UPDATE and bool(answer_text._QUESTION_PAST.search(ql)) and not answer_text._QUESTION_NOW.search(ql)
    if question_type != KNOWLEDGE_UPDATE:
        for t in hyp:
            t.orient = ""  # only knowledge updates weigh superseded against current values
    gold_words = [t.text for t in answer_text._tokens(answer) if t.kind == "w"]
    if gold_words and gold_words[0] in ("yes", "no"):
        return _grade_yes_no(gold_words[0], hyp)
    if _ORDER_QUESTION.search(question):
        return _grade_order(answer, hyp, asks_past)
    alts = alternatives(answer)
    options = _choice(question)
    if options is not None:
        labels = [_grade_choice(options, answer_text._tokens(a.text), hyp) for a in alts]
        if any(lab is not None for lab in labels):
            return _any_correct([lab or UNDECIDED for lab in labels])
    keys, text_alts = [], []
    for a in alts:
        k = _numeric_key(a, question)
        (keys.append(k) if k is not None else text_alts.append(a))
    labels = []
    if keys:
        labels.append(_grade_numbers(keys, answer_text._quantities(hyp, _question_unit(question)), asks_past))
    labels += [_grade_text(a, question, hyp, asks_past) for a in text_alts]
    return _any_correct(labels)


# ---------------------------------------------------------------------------------------------
# Hand-graded cases and the judge's error rates
# ---------------------------------------------------------------------------------------------
CASE_COLUMNS = ("question_id", "question_type", "question", "answer", "hypothesis", "expected", "kind")


def load_cases(path: str | Path, oracle: str | Path | None = None) -> pd.DataFrame:
    """Hand-graded cases (a YAML mapping question type -> list of {id, hypothesis, expected,
    kind}; a null hypothesis is the answer itself) joined with their questions and answers from
    the LongMemEval oracle file (the pinned one, `memlife.reconstruct.read_oracle`, unless
    `oracle` names another)."""
    from memlife import reconstruct

    records = reconstruct.read_oracle() if oracle is None else json.loads(Path(oracle).read_text())
    by_id = {r["question_id"]: r for r in records}
    rows = []
    for qtype, cases in yaml.safe_load(Path(path).read_text()).items():
        for c in cases:
            r = by_id.get(str(c["id"]))
            if r is None:
                raise KeyError(f"{path}: question {c['id']!r} is not in the oracle file")
            if r["question_type"] != qtype:
                raise ValueError(f"{path}: question {c['id']} is {r['question_type']}, listed under {qtype}")
            if c["expected"] not in LABELS:
                raise ValueError(f"{path}: question {c['id']}: expected {c['expected']!r}, not one of {LABELS}")
            answer = str(r["answer"])
            hyp = answer if c.get("hypothesis") is None else str(c["hypothesis"])
            rows.append({"question_id": str(c["id"]), "question_type": qtype, "question": r["question"],
                         "answer": answer, "hypothesis": hyp, "expected": c["expected"], "kind": c.get("kind", "")})
    return pd.DataFrame(rows, columns=list(CASE_COLUMNS))


def graded(cases: pd.DataFrame) -> pd.DataFrame:
    """The cases with the judge's `label`."""
    return cases.assign(label=[grade(q, t, a, h) for q, t, a, h in
                               zip(cases["question"], cases["question_type"], cases["answer"], cases["hypothesis"])])


def error_rates(cases: pd.DataFrame) -> pd.DataFrame:
    """Per question type (and "all"): n_cases; n_decided (the judge said CORRECT or INCORRECT);
    undecided_share; n_wrong (a decided label other than the person's) and error_rate = n_wrong /
    n_decided; n_undecided_decidable (UNDECIDED where the person decided), counted apart from the
    errors; n_false_correct (CORRECT where the person said INCORRECT)."""
    df = cases if "label" in cases.columns else graded(cases)
    rows = []
    for qtype, g in [*df.groupby("question_type", sort=True), ("all", df)]:
        decided = g["label"] != UNDECIDED
        n_dec = int(decided.sum())
        wrong = int((decided & (g["label"] != g["expected"])).sum())
        rows.append({"question_type": qtype, "n_cases": len(g), "n_decided": n_dec,
                     "undecided_share": 1 - n_dec / len(g) if len(g) else float("nan"),
                     "n_wrong": wrong, "error_rate": wrong / n_dec if n_dec else float("nan"),
                     "n_undecided_decidable": int((~decided & (g["expected"] != UNDECIDED)).sum()),
                     "n_false_correct": int(((g["label"] == CORRECT) & (g["expected"] == INCORRECT)).sum())})
    return pd.DataFrame(rows)
