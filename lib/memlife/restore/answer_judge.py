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

CORRECT, INCORRECT, UNDECIDED = "CORRECT", "INCORRECT", "UNDECIDED"
LABELS = (CORRECT, INCORRECT, UNDECIDED)

PREFERENCE = "single-session-preference"
KNOWLEDGE_UPDATE = "knowledge-update"

# ---------------------------------------------------------------------------------------------
# Lexicon
# ---------------------------------------------------------------------------------------------
_SMALL = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen".split())}
_TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70,
         "eighty": 80, "ninety": 90}
_SCALES = {"hundred": 100, "thousand": 1_000, "million": 1_000_000}
_TIMES = {"once": 1, "twice": 2, "thrice": 3}
# "one" is a pronoun after these words ("the one I set up") or before "of" ("one of them").
_ONE_PRONOUN_BEFORE = {"the", "this", "that", "which", "each", "every", "any", "no", "another", "other"}
_ONE_PRONOUN_AFTER = {"of", "another"}

# unit word (stemmed) -> (kind, size in the kind's base unit); durations convert only within a
# group whose units are exact multiples of each other.
_DURATION = {"second": ("dur_s", 1), "sec": ("dur_s", 1), "minute": ("dur_s", 60), "min": ("dur_s", 60),
             "hour": ("dur_s", 3600), "hr": ("dur_s", 3600), "day": ("dur_d", 1), "week": ("dur_d", 7),
             "fortnight": ("dur_d", 14), "month": ("dur_m", 1), "year": ("dur_m", 12), "yr": ("dur_m", 12)}
# Measure units of counts: a count in one of these is compared only with counts in the same unit.
_MEASURE = {"lb": "pound", "lbs": "pound", "pound": "pound", "gb": "gb", "gigabyte": "gb", "mb": "mb",
            "tb": "tb", "mbps": "mbps", "inch": "inch", "mile": "mile", "mi": "mile",
            "km": "km", "kilometer": "km", "kg": "kg", "kilogram": "kg", "ounce": "ounce", "oz": "ounce",
            "point": "point", "mm": "mm", "cm": "cm", "foot": "foot", "feet": "foot", "meter": "meter",
            "mpg": "mpg"}
_MONTHS = {m: i + 1 for i, m in enumerate(
    "january february march april may june july august september october november december".split())}
_MONTHS.update({m[:3]: i for m, i in list(_MONTHS.items())})
_MONTHS.update({"sept": 9})
_HOLIDAYS = {("valentine", "day"): 214, ("christmas", "day"): 1225, ("christmas", "eve"): 1224,
             ("new", "year", "eve"): 1231, ("new", "year", "day"): 101, ("halloween",): 1031}
_ORDINAL_SUFFIX = {"st", "nd", "rd", "th"}

STOPWORDS = frozenset("""
a an the i me my mine myself you your yours yourself we us our ours he him his she her hers it its
they them their theirs this that these those there here is are was were be been being am have has
had having do does did will would shall should can could may might must of in on at to for with
from by about as into onto than then so and or but if also just very too some any all both each
what which who whom whose where when why how that's it's dr mr mrs ms mx st
""".split())
_ARTICLES = {"a", "an", "the"}
# Capitalized words that start sentences without naming anything.
_STARTERS = STOPWORDS | set("""first then finally lastly next after before previously currently now
yes no according considering however sure okay ok answer answers since""".split())
_NAME_JOINERS = {"of", "de", "du", "la", "von", "van", "the", "and"}

_NEGATIONS = {"not", "no", "never", "neither", "nor", "without", "none", "except"}
_NEGATION_PAIRS = {("instead", "of"), ("rather", "than"), ("other", "than")}
_NEGATION_WINDOW = 5  # tokens before a key word that a negation reaches, within its clause
_BE = {"is", "was", "are", "were"}
_CLAUSE_WORDS = {"but", "and", "however", "although", "though", "whereas", "while", "so", "then"}
_SENTENCE_PUNCT = set(".!?")
_PAST_MARKERS = ("used to", "previously", "initially", "originally", "at first", "formerly",
                 "up from", "down from", "back then")
_CURRENT_MARKERS = ("now", "currently", "these days", "at the moment", "as of now", "nowadays")
_QUESTION_PAST = re.compile(r"\b(previous|previously|initially|originally|used to|at first|formerly|earlier)\b")
_QUESTION_NOW = re.compile(r"\b(currently|now)\b")  # "current status" is a noun phrase, "currently" asks
_TOTAL_BEFORE = {"total", "totaling", "totalling", "altogether", "combined", "overall", "sum", "so", "making"}
_TOTAL_AFTER = {"total", "altogether", "combined", "overall"}
_NOT_THE_ANSWER = {"before", "after", "than", "then", "followed", "later", "prior", "until", "since"}

_QUANTITATIVE = re.compile(
    r"\b(how (many|much|long|old|often|far|fast)|what (time|percentage|year)|when|total|average|"
    r"number of|percentage|ratio|difference|score|speed|size|record|minimum|maximum|age)\b")
_QUESTION_UNIT = re.compile(r"\bhow many (seconds|minutes|hours|days|weeks|months|years)\b")
_QUESTION_AGE = re.compile(r"\b(how old|years older|age)\b")

# Abstentions and refusals, on the prepared (lower-case, "n't" -> " not") text.
_ABSTAIN = re.compile(r"\b(" + "|".join([
    r"(i|we) do not know", r"do not know", r"not sure", r"no idea", r"unsure",
    r"(is|was|were|are|been) not (mentioned|specified|stated|provided|given|recorded|included|shared|available)",
    r"not (mentioned|specified|stated) (in|anywhere)",
    r"no (mention|information|info|record|records|details?|data|indication) (of|about|on|in|regarding)",
    r"not (in|from) (the|my|these|your|our) (snippets?|notes|memory|memories|conversations?|context|records|chats?)",
    r"(can|could) ?not (determine|tell|say|answer|find|recall|be determined|help)",
    r"unable to (determine|tell|say|answer|find|recall)",
    r"do not (have|see|find) (any |enough |that |this |the |a )?(information|info|record|details?|mention|memory|data)",
    r"do not (recall|remember)", r"no (way|means) to (know|tell)", r"not enough (information|context)",
    r"insufficient (information|context)", r"never (mentioned|said|told|came up)",
    r"rather not (answer|say)", r"(will|would) not (answer|say)", r"decline to", r"refuse to",
]) + r")\b")
_ABSTAIN_SHORT_WORDS = 30  # a reply this short is an abstention wherever the phrase stands
_RUBRIC = re.compile(r"\b(the user|they) (would|might|may)\b", re.I)
_LONG_ANSWER = 8  # content words: longer answers are sentences, checked on their names and numbers


# ---------------------------------------------------------------------------------------------
# Tokens and normalization
# ---------------------------------------------------------------------------------------------
@dataclass
class Tok:
    text: str  # lower case; a number's canonical digits
    kind: str  # "w" word, "n" number, "p" punctuation, "s" symbol ($ % : / + -)
    start: int
    end: int
    cap: bool = False  # capitalized in the source text
    value: float | None = None
    clause: int = 0
    sentence: int = 0
    negated: bool = False
    orient: str = ""  # "past" / "current": the clause states a superseded or a current value


_TOKEN = re.compile(r"[a-z]+\d[a-z\d]*|\d+(?:\.\d+)?|[a-z]+|[$%:/+\-]|[.,;!?()\[\]\"]", re.I)


def _prepare(text: str) -> str:
    """Quotes and dashes unified, contractions expanded, thousands separators dropped."""
    s = str(text)
    for a, b in (("\u2019", "'"), ("\u2018", "'"), ("\u201c", '"'), ("\u201d", '"'), ("\u2014", " ; "),
                 ("\u2013", "-"), ("\u00a0", " ")):
        s = s.replace(a, b)
    s = re.sub(r"\b(can)'t\b", r"\1 not", s, flags=re.I)
    s = re.sub(r"\bwon't\b", "will not", s, flags=re.I)
    s = re.sub(r"n't\b", " not", s, flags=re.I)
    s = re.sub(r"'(s|d|m|re|ve|ll)\b", lambda m: {"s": "", "d": " would", "m": " am", "re": " are",
                                                  "ve": " have", "ll": " will"}[m.group(1).lower()], s, flags=re.I)
    s = re.sub(r"(?<=\d),(?=\d{3}\b)", "", s)
    s = re.sub(r"(?<![\w'])'(\d\d)\b", r"yr\1", s)  # '69: a year that names a model, not a count
    s = re.sub(r"\b([ap])\.m\.", r"\1m", s, flags=re.I)
    return s


def _fmt(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else f"{v:g}"


def _adjacent(a: Tok, b: Tok) -> bool:
    return a.end == b.start


def _merge_numbers(toks: list[Tok]) -> list[Tok]:
    """Number words to numbers ("twenty-five", "one hundred and twenty", "a dozen", "twice" ->
    2 times); digits followed by a scale ("400 thousand", "$400k")."""
    out: list[Tok] = []
    i = 0
    while i < len(toks):
        t = toks[i]
        w = t.text
        if t.kind == "w" and w in _TIMES:
            out += [Tok(_fmt(_TIMES[w]), "n", t.start, t.end, value=_TIMES[w]), Tok("time", "w", t.end, t.end)]
            i += 1
            continue
        starts_number = w in _SMALL or w in _TENS or (
            w in ("a", "an") and i + 1 < len(toks) and toks[i + 1].text in ("hundred", "thousand", "dozen"))
        if t.kind == "w" and w == "one":
            prev = toks[i - 1].text if i else ""
            nxt = toks[i + 1] if i + 1 < len(toks) else None
            if prev in _ONE_PRONOUN_BEFORE or (nxt is not None and nxt.text in _ONE_PRONOUN_AFTER):
                starts_number = False
        if t.kind == "w" and starts_number:
            total, cur, j, last = 0.0, 0.0, i, None
            while j < len(toks):
                u = toks[j].text
                if u in ("a", "an") and j == i:
                    cur = 1
                elif u in _SMALL and last in (None, "tens", "scale", "and"):
                    cur += _SMALL[u]
                    last = "small"
                elif u in _TENS and last in (None, "scale", "and"):
                    cur += _TENS[u]
                    last = "tens"
                elif u == "-" and last == "tens" and j + 1 < len(toks) and toks[j + 1].text in _SMALL:
                    pass
                elif u == "hundred" and last != "scale":
                    cur = max(cur, 1) * 100
                    last = "scale"
                elif u in ("thousand", "million"):
                    total += max(cur, 1) * _SCALES[u]
                    cur, last = 0, "scale"
                elif u == "dozen":
                    cur = max(cur, 1) * 12
                    last = "scale"
                elif u == "and" and last == "scale" and j + 1 < len(toks) and (
                        toks[j + 1].text in _SMALL or toks[j + 1].text in _TENS):
                    last = "and"
                else:
                    break
                j += 1
            value = total + cur
            if [x.text for x in toks[j:j + 3]] == ["and", "a", "half"] and j > i:
                value, j = value + 0.5, j + 3  # "two and a half"
            if j > i and not (j == i + 1 and w in ("a", "an")):
                out.append(Tok(_fmt(value), "n", t.start, toks[j - 1].end, value=value))
                i = j
                continue
        if t.kind == "n":
            value = float(w)
            j = i + 1
            if j < len(toks) and toks[j].text in ("thousand", "million"):
                value *= _SCALES[toks[j].text]
                j += 1
            elif (j < len(toks) and toks[j].text == "k" and _adjacent(t, toks[j]) and i
                  and toks[i - 1].text == "$"):
                value *= 1000
                j += 1
            elif [x.text for x in toks[j:j + 3]] == ["and", "a", "half"]:
                value += 0.5
                j += 3
            out.append(Tok(_fmt(value), "n", t.start, toks[j - 1].end, value=value))
            i = j
            continue
        out.append(t)
        i += 1
    return out


def _tokens(text: str) -> list[Tok]:
    """Tokens of a text with numbers merged, and each token's clause, sentence and negation."""
    s = _prepare(text)
    raw = []
    for m in _TOKEN.finditer(s):
        g = m.group()
        kind = "n" if g[0].isdigit() else "w" if g[0].isalpha() else "s" if g in "$%:/+-" else "p"
        raw.append(Tok(g.lower(), kind, m.start(), m.end(), cap=g[0].isupper()))
    toks = _merge_numbers(raw)
    clause = sentence = 0
    for t in toks:
        if t.kind == "p" or (t.kind == "w" and t.text in _CLAUSE_WORDS):
            clause += 1
            if t.text in _SENTENCE_PUNCT:
                sentence += 1
        t.clause, t.sentence = clause, sentence
    _mark_negation(toks)
    _mark_orientation(toks)
    return toks


def _mark_negation(toks: list[Tok]) -> None:
    for i, t in enumerate(toks):
        lo = max(0, i - _NEGATION_WINDOW)
        before = [u for u in toks[lo:i] if u.clause == t.clause]
        words = [u.text for u in before]
        if any(w in _NEGATIONS for w in words) or any(p in _NEGATION_PAIRS for p in zip(words, words[1:])):
            t.negated = True
            continue
        after = [u.text for u in toks[i + 1:i + 4] if u.clause == t.clause]
        if any(a in _BE and b in ("not", "no", "never") for a, b in zip(after, after[1:])):
            t.negated = True


def _mark_orientation(toks: list[Tok]) -> None:
    by_clause: dict[int, list[Tok]] = {}
    for t in toks:
        by_clause.setdefault(t.clause, []).append(t)
    for clause in by_clause.values():
        text = " " + " ".join(t.text for t in clause) + " "
        words = [t.text for t in clause if t.kind == "w"]
        # "you had 4 bikes before": a clause that ends on "before" looks back
        past = any(f" {m} " in text for m in _PAST_MARKERS) or (words[-1:] == ["before"] and len(words) > 1)
        current = any(f" {m} " in text for m in _CURRENT_MARKERS)
        orient = "past" if past and not current else "current" if current and not past else ""
        for t in clause:
            t.orient = orient


def normalize(text: str) -> str:
    """Lower case; contractions expanded; thousands separators dropped; number words to digits
    ("twenty-five" -> 25, "a dozen" -> 12); punctuation (but not $ and %) dropped; articles
    dropped; whitespace collapsed. The repository's one text normalizer for answers."""
    return " ".join(t.text for t in _tokens(text)
                    if t.kind == "n" or (t.kind == "w" and t.text not in _ARTICLES) or t.text in ("$", "%"))


def _stem(word: str) -> str:
    """A light stemmer, the same for answer and reply: plural and verb endings. (No final-e
    rule: it would make "care" the option "car".)"""
    w = word
    if not w.isalpha() or len(w) <= 3:
        return w
    if w.endswith("ies") and len(w) > 4:
        w = w[:-3] + "y"
    elif w.endswith(("ches", "shes", "xes", "zes", "sses")):
        w = w[:-2]
    elif w.endswith("s") and not w.endswith(("ss", "us", "is")):
        w = w[:-1]
    elif w.endswith("ing") and len(w) > 5:
        w = w[:-3]
    elif w.endswith("ed") and len(w) > 4:
        w = w[:-2]
    return w


def _content(toks: list[Tok]) -> list[Tok]:
    return [t for t in toks if t.kind == "n" or (t.kind == "w" and t.text not in STOPWORDS)]


def _key(t: Tok) -> str:
    return t.text if t.kind == "n" else _stem(t.text)


# ---------------------------------------------------------------------------------------------
# Quantities
# ---------------------------------------------------------------------------------------------
@dataclass
class Quantity:
    kind: str  # money percent clock date pair count dur_s dur_d dur_m
    value: float | tuple
    i: int  # first token
    j: int  # one past the last token
    unit: str | None = None  # counts: the counted word ("bike"), a measure unit, or None (bare)
    modifier: bool = False  # "5-piece": a count that describes a thing rather than counting it
    ampm: bool = True  # clock: stated with am/pm (else compared on a 12-hour dial)
    bound: str = ""  # "min" ("over a year", "at least 3"), "max" ("under", "less than"), "approx" ("nearly")
    total: bool = False  # marked as the total ("in total", "so")
    link: int | None = None  # values joined by "or" / "to" / "-" / "between .. and" share a link
    negated: bool = False
    orient: str = ""
    sentence: int = 0
    unit_size: float = 1.0


def _word(toks, k) -> str:
    return toks[k].text if 0 <= k < len(toks) else ""


def _unit_of(word: str):
    w = _stem(word) if word.isalpha() else word
    for cand in (word, w, w + "e"):
        if cand in _DURATION:
            return _DURATION[cand]
    return None


def _quantities(toks: list[Tok], q_unit: tuple[str, float] | None = None) -> list[Quantity]:
    """The values a token list states, each with its kind; numbers that only name something
    (F-15, 1/48 scale, list markers, ordinals) are left out."""
    out: list[Quantity] = []
    i, n = 0, len(toks)
    while i < n:
        t = toks[i]
        if t.kind == "w":
            # "a week", "an hour", "half an hour", holidays, noon
            if t.text in ("a", "an", "half") and i + 1 < n:
                k = i + 1
                if t.text == "half" and _word(toks, k) in ("a", "an"):
                    k += 1
                unit = _unit_of(_word(toks, k))
                prev = _word(toks, i - 1)
                modifier = k + 1 < n and toks[k + 1].text == "-" and _adjacent(toks[k], toks[k + 1])
                if unit and not modifier and prev not in ("times", "time", "per", "every") and not _unit_of(prev):
                    value = 0.5 if t.text == "half" else 1.0
                    out.append(Quantity(unit[0], value * unit[1], i, k + 1, unit_size=unit[1]))
                    i = k + 1
                    continue
            if t.text in ("noon", "midnight"):
                out.append(Quantity("clock", 720 if t.text == "noon" else 0, i, i + 1))
            for words, md in _HOLIDAYS.items():
                if tuple(_stem(x.text) for x in toks[i:i + len(words)]) == tuple(_stem(w) for w in words):
                    out.append(Quantity("date", md, i, i + len(words)))
            i += 1
            continue
        if t.kind != "n":
            i += 1
            continue
        prev, nxt = (toks[i - 1] if i else None), (toks[i + 1] if i + 1 < n else None)
        # names and markers, not values
        if prev is not None and prev.kind == "s" and prev.text == "-" and _adjacent(prev, t) and i >= 2 \
                and toks[i - 2].kind == "w" and _adjacent(toks[i - 2], prev):
            i += 1
            continue  # F-15, GR-90
        if prev is not None and prev.kind in "wn" and _adjacent(prev, t):
            i += 1
            continue  # glued to a word
        if nxt is not None and nxt.text == "/" and i + 2 < n and toks[i + 2].kind == "n":
            i += 3
            continue  # 1/48
        if nxt is not None and nxt.text == ")" or (
                nxt is not None and nxt.text == "." and (prev is None or prev.text in (".", ":", ",", ";", "("))
                and i + 2 < n and toks[i + 2].kind == "w"):
            i += 2
            continue  # list markers "1)" "2."
        v = float(t.value)
        # a:b -- a clock time with am/pm, else a pair (a ratio, a time like 25:50)
        if nxt is not None and nxt.text == ":" and i + 2 < n and toks[i + 2].kind == "n" and _adjacent(t, nxt):
            b = toks[i + 2]
            after = _word(toks, i + 3)
            if after in ("am", "pm"):
                out.append(Quantity("clock", (v % 12) * 60 + float(b.value) + (720 if after == "pm" else 0), i, i + 4))
                i += 4
            else:
                q = Quantity("pair", (v, float(b.value)), i, i + 3)
                if v <= 24 and len(b.text) == 2:  # also readable as a clock time on a 12-hour dial
                    q.ampm = False
                out.append(q)
                i += 3
            continue
        w1 = _word(toks, i + 1)
        modifier = nxt is not None and nxt.text == "-" and _adjacent(t, nxt) and i + 2 < n and toks[i + 2].kind == "w"
        unit_word = _word(toks, i + 2) if modifier else w1
        if prev is not None and prev.text == "$":
            out.append(Quantity("money", v, i - 1, i + 1))
        elif w1 in ("dollar", "dollars", "buck", "bucks", "usd"):
            out.append(Quantity("money", v, i, i + 2))
        elif w1 in ("cent", "cents"):
            out.append(Quantity("money", v / 100, i, i + 2))
        elif w1 in ("%", "percent") or (w1 == "per" and _word(toks, i + 2) == "cent"):
            out.append(Quantity("percent", v, i, i + 2))
        elif w1 in ("am", "pm"):
            out.append(Quantity("clock", (v % 12) * 60 + (720 if w1 == "pm" else 0), i, i + 2))
        elif w1 in _ORDINAL_SUFFIX and _adjacent(t, nxt) or (prev is not None and prev.text in _MONTHS) \
                or (w1 in _MONTHS and v <= 31):
            month = prev.text if prev is not None and prev.text in _MONTHS else None
            k = i + 2 if w1 in _ORDINAL_SUFFIX else i + 1
            if month is None and _word(toks, k) == "of" and _word(toks, k + 1) in _MONTHS:
                month = _word(toks, k + 1)
            elif month is None and _word(toks, k) in _MONTHS:
                month = _word(toks, k)
            if month is not None and v <= 31:
                out.append(Quantity("date", _MONTHS[month] * 100 + v, i, k))
            i = k  # an ordinal without a month ("27th parameter") states no value
            continue
        elif _unit_of(unit_word):
            kind, size = _unit_of(unit_word)
            out.append(Quantity(kind, v * size, i, i + (3 if modifier else 2), unit_size=size))
        else:
            unit = None
            if unit_word and toks[i + (2 if modifier else 1)].kind == "w" and unit_word not in STOPWORDS:
                unit = _MEASURE.get(unit_word, _MEASURE.get(_stem(unit_word), _stem(unit_word)))
            out.append(Quantity("count", v, i, i + 1, unit=unit, modifier=modifier))
        i += 1
    _combine(out, toks)
    for q in out:
        if q.kind == "count" and q.unit is None and not q.modifier and q_unit:
            kind, size = q_unit
            q.kind, q.value, q.unit_size = kind, q.value * size, size
        span = toks[q.i:q.j]
        q.negated = span[0].negated if span else False
        q.orient, q.sentence = toks[q.i].orient, toks[q.i].sentence
        before = [x.text for x in toks[max(0, q.i - 3):q.i]]
        after = [x.text for x in toks[q.j:q.j + 2]]
        q.total = any(w in _TOTAL_BEFORE for w in before) or any(w in _TOTAL_AFTER for w in after) \
            or before[-2:] == ["in", "all"]
        q.bound = _bound(" ".join(before))
    return out


def _bound(before: str) -> str:
    if re.search(r"\b(over|more than|at least)$", before):
        return "min"
    if re.search(r"\b(under|less than|at most)$", before):
        return "max"
    return "approx" if re.search(r"\b(nearly|almost)$", before) else ""


def _combine(qs: list[Quantity], toks: list[Tok]) -> None:
    """In place: compound durations summed ("1 year and 5 months", "an hour and a half"), ranges
    and hedges linked ("10-12 hours", "7 or 8 days", "between 2 and 3"), a bare first value of a
    range taking the second's unit."""
    k = 0
    while k < len(qs):
        q = qs[k]
        # "... and a half"
        if q.kind.startswith("dur") and [x.text for x in toks[q.j:q.j + 3]] == ["and", "a", "half"]:
            q.value += 0.5 * q.unit_size
            q.j += 3
        if k + 1 < len(qs):
            r = qs[k + 1]
            between = [x.text for x in toks[q.j:r.i]]
            if (q.kind == r.kind and q.kind.startswith("dur") and r.unit_size < q.unit_size
                    and between in ([], ["and"], [","])):
                q.value += r.value
                q.j = r.j
                del qs[k + 1]
                continue
        k += 1
    link = 0
    for q, r in zip(qs, qs[1:]):
        between = [x.text for x in toks[q.j:r.i]]
        joined = between in (["-"], ["to"], ["or"]) or (
            between == ["and"] and _word(toks, q.i - 1) == "between")
        if not joined:
            continue
        if q.kind == "count" and q.unit is None and r.kind != "count" and r.kind not in ("date", "pair"):
            q.kind = r.kind
            q.value = q.value * r.unit_size if r.kind.startswith("dur") else q.value
            q.unit_size = r.unit_size
        elif q.kind == "count" and r.kind == "count" and q.unit is None:
            q.unit = r.unit
        if q.kind == r.kind:
            link += 1
            q.link = q.link or link
            r.link = q.link


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
    m = _QUESTION_UNIT.search(q)
    if m:
        return _unit_of(m.group(1))
    return _DURATION["year"] if _QUESTION_AGE.search(q) else None


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
    toks = _tokens(_drop_parentheses(alt.text))
    quantitative = bool(_QUANTITATIVE.search(question.lower()))
    qs = [q for q in _quantities(toks, _question_unit(question)) if not q.negated
          and (q.kind != "count" or quantitative)]
    if not qs:
        return None
    kind = qs[0].kind
    ks = [q for q in qs if q.kind == kind]
    if len(_content(toks)) > _LONG_ANSWER:
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


def _in(key: NumericKey, q: Quantity) -> bool:
    if q.bound in ("min", "max") and q.bound != key.bound:
        return False  # "under a year" for "over a year"; "more than 3" for exactly 3
    if key.kind == "pair":
        return any(_same("pair", lo, q.value) for lo, _ in key.intervals)
    return any(lo - 1e-9 <= q.value <= hi + 1e-9 if lo != hi else _same(key.kind, lo, q.value, q.ampm)
               for lo, hi in key.intervals)


def _relevant(key: NumericKey, qs: list[Quantity], asks_past: bool) -> list[Quantity]:
    """The hypothesis' values that answer what the key asks."""
    if key.kind == "clock":
        # a bare "7:00" pair is a clock time when a clock time is asked
        qs = [Quantity("clock", q.value[0] % 12 * 60 + q.value[1], q.i, q.j, ampm=False, link=q.link,
                       negated=q.negated, orient=q.orient, total=q.total)
              if q.kind == "pair" and not q.ampm else q for q in qs]
    if key.kind == "dur_s":
        # "27:45" for a duration: minutes:seconds or hours:minutes, whichever the answer's value is
        targets = [lo for lo, _ in key.intervals] + [v for v in key.values if not isinstance(v, tuple)]
        qs = [Quantity("dur_s", _clock_duration(q.value, targets), q.i, q.j, link=q.link, negated=q.negated,
                       orient=q.orient, total=q.total) if q.kind == "pair" and q.value[1] < 60 else q for q in qs]
    h = [q for q in qs if q.kind == key.kind and not q.negated]
    h = [q for q in h if q.orient != ("current" if asks_past else "past")]
    if key.kind == "count":
        yearlike = all(1900 <= float(v) <= 2099 for v in key.values)
        h = [q for q in h if (not q.modifier or key.modifier) and (yearlike or not 1900 <= q.value <= 2099)]
        if key.unit in _MEASURE.values():
            h = [q for q in h if q.unit in (key.unit, None)]
        elif key.unit is not None:
            h = [q for q in h if q.unit not in _MEASURE.values()]
    return h


def _clock_duration(pair: tuple, targets: list) -> float:
    a, b = pair
    readings = (a * 60 + b, a * 3600 + b * 60)
    return next((r for r in readings if any(_same("dur_s", r, t) for t in targets)), readings[0])


def _grade_numbers(keys: list[NumericKey], hyp_qs: list[Quantity], asks_past: bool) -> str:
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


def _grade_single(key: NumericKey, h: list[Quantity]) -> str:
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


def _grade_multi(key: NumericKey, h: list[Quantity]) -> str:
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
def _entities(toks: list[Tok], text: str = "") -> list[tuple[int, tuple[str, ...]]]:
    """(first token, stems) of each name: runs of capitalized words (joined by "of", "the", ...,
    with numbers after a name: "XPS 13"), and quoted titles."""
    out = []
    k = 0
    while k < len(toks):
        t = toks[k]
        if t.kind == "w" and t.cap and t.text not in _STARTERS:
            run = [k]
            k += 1
            while k < len(toks):
                u = toks[k]
                if (u.kind == "w" and u.cap) or (u.kind == "n" and toks[k - 1].kind == "w" and toks[k - 1].cap):
                    run.append(k)
                elif (u.kind == "w" and u.text in _NAME_JOINERS and k + 1 < len(toks)
                      and toks[k + 1].kind == "w" and toks[k + 1].cap):
                    run.append(k)
                else:
                    break
                k += 1
            out.append((run[0], tuple(_key(toks[r]) for r in run if toks[r].text not in ("the", "and"))))
            continue
        k += 1
    for m in re.finditer(r"(?<![\w'])'([^']{2,}?)'(?![\w])|\"([^\"]{2,}?)\"", text):
        inner = _tokens(m.group(1) or m.group(2))
        stems = tuple(_key(t) for t in _content(inner))
        if stems:
            start = next((k for k, t in enumerate(toks) if t.start >= m.start()), 0)
            out.append((start, stems))
    return [e for e in out if e[1]]


def _find(seq: tuple[str, ...], hyp: list[Tok], asks_past: bool, negated: bool = False) -> int | None:
    """Index of the first asserted occurrence of a stem sequence among the reply's content
    tokens, or None. `negated`: the answer itself states the word negated ("GPS not
    functioning"), so the reply must too."""
    words = [t for t in _content(hyp)]
    keys = [_key(t) for t in words]
    for k in range(len(keys) - len(seq) + 1):
        if tuple(keys[k:k + len(seq)]) == seq:
            first = words[k]
            if first.negated == negated and first.orient != ("current" if asks_past else "past"):
                return k
    return None


def _content_entity(stems: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(s for s in stems if s not in STOPWORDS)


def _grade_yes_no(gold: str, hyp: list[Tok]) -> str:
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
    a, b = ({_key(t) for t in _content(_tokens(g))} for g in m.groups())
    a, b = a - b, b - a
    return (a, b) if a and b else None


def _grade_choice(options, gold_toks: list[Tok], hyp: list[Tok]) -> str | None:
    gold = {_key(t) for t in _content(gold_toks)}
    scores = [len(gold & o) for o in options]
    if scores[0] == scores[1]:
        return None  # the answer names neither option (or both): not a choice answer
    right = 0 if scores[0] > scores[1] else 1
    clauses: dict[int, set[int]] = {}
    for k, t in enumerate(hyp):
        if t.kind not in "wn" or t.negated:
            continue
        near = {u.text for u in hyp[max(0, k - 2):k] if u.clause == t.clause}
        if near & _NOT_THE_ANSWER:
            continue
        for o, opt in enumerate(options):
            if _key(t) in opt:
                clauses.setdefault(t.clause, set()).add(o)
    for c in sorted(clauses):
        named = clauses[c]
        if len(named) == 1:
            return CORRECT if right in named else INCORRECT
        return UNDECIDED
    return UNDECIDED


_ORDER_QUESTION = re.compile(r"\b(the|in|what) order\b|\border of\b|\bfirst, second\b", re.I)
_ORDER_SPLIT = re.compile(r"[,;]|\bthen\b|\bfinally\b|\blastly\b|\bfollowed by\b|\b\d+\.\s", re.I)


def _grade_order(answer: str, hyp: list[Tok], asks_past: bool) -> str:
    keys = []
    for seg in _ORDER_SPLIT.split(_drop_parentheses(answer)):
        ents = _entities(_tokens(seg), seg)
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


def _names_said(hyp: list[Tok]) -> set[str]:
    """Stems of the names a reply uses; a lone capitalized word opening a sentence ("Under your
    bed.") is not taken for a name."""
    out = set()
    for k, stems in _entities(hyp):
        opens = k == 0 or hyp[k - 1].text in _SENTENCE_PUNCT
        if len(stems) > 1 or not opens:
            out |= set(stems)
    return out


def _grade_text(alt: Alternative, question: str, hyp: list[Tok], asks_past: bool) -> str:
    text = _drop_parentheses(alt.text)
    toks = _tokens(text)
    question_stems = {_key(t) for t in _content(_tokens(question))}
    content = _content(toks)
    competing = _names_said(hyp) - {_key(t) for t in content} - question_stems - STOPWORDS
    if len(content) > _LONG_ANSWER:
        names = [_content_entity(s) for _, s in _entities(toks, text)]
        names = [s for s in names if s and not set(s) <= question_stems]
        if not names:
            return UNDECIDED  # a sentence without names or numbers to check
        found = [_find(s, hyp, asks_past) is not None for s in names]
        return CORRECT if all(found) else INCORRECT if not any(found) else UNDECIDED
    key = {_key(t) for t in content} - question_stems or {_key(t) for t in content}
    if not key:
        return UNDECIDED
    denied = {_key(t) for t in content if t.negated}
    asserted = {s for s in key if _find((s,), hyp, asks_past, s in denied) is not None}
    if asserted == key:
        return CORRECT
    proper = {_key(t) for t in content if t.cap and t.text not in _STARTERS}
    proper_missing = (key - asserted) & proper
    if not asserted:
        return INCORRECT if len(key) == 1 or proper_missing or competing else UNDECIDED
    return INCORRECT if proper_missing and competing else UNDECIDED


# ---------------------------------------------------------------------------------------------
# Grading
# ---------------------------------------------------------------------------------------------
def is_rubric(question_type: str, answer: str) -> bool:
    """A preference answer written as a rubric ("The user would prefer ...")."""
    return question_type == PREFERENCE and bool(_RUBRIC.search(str(answer)))


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
    s = _prepare(hypothesis).lower()
    first = re.split(r"(?<=[.!?])\s", s.strip(), maxsplit=1)[0]
    return bool(_ABSTAIN.search(first) or (len(s.split()) <= _ABSTAIN_SHORT_WORDS and _ABSTAIN.search(s)))


def grade(question: str, question_type: str, answer, hypothesis) -> str:
    """CORRECT, INCORRECT or UNDECIDED: `hypothesis` graded against a LongMemEval `answer` (an
    int answer is read as its digits)."""
    return _grade(str(question), str(question_type), str(answer), "" if hypothesis is None else str(hypothesis))


@functools.lru_cache(maxsize=1 << 16)  # records repeat an item's (question, answer, reply) across cells
def _grade(question: str, question_type: str, answer: str, hyp: str) -> str:
    said = normalize(hyp)
    if not said:
        return INCORRECT
    if said == normalize(answer):
        return CORRECT
    facts = _grade_facts(question, question_type, answer, hyp)
    if abstains(hyp):
        return CORRECT if facts == CORRECT else INCORRECT
    return facts


def _grade_facts(question: str, question_type: str, answer: str, hypothesis: str) -> str:
    if is_rubric(question_type, answer):
        return UNDECIDED
    hyp = _tokens(hypothesis)
    ql = question.lower()
    asks_past = question_type == KNOWLEDGE_UPDATE and bool(_QUESTION_PAST.search(ql)) and not _QUESTION_NOW.search(ql)
    if question_type != KNOWLEDGE_UPDATE:
        for t in hyp:
            t.orient = ""  # only knowledge updates weigh superseded against current values
    gold_words = [t.text for t in _tokens(answer) if t.kind == "w"]
    if gold_words and gold_words[0] in ("yes", "no"):
        return _grade_yes_no(gold_words[0], hyp)
    if _ORDER_QUESTION.search(question):
        return _grade_order(answer, hyp, asks_past)
    alts = alternatives(answer)
    options = _choice(question)
    if options is not None:
        labels = [_grade_choice(options, _tokens(a.text), hyp) for a in alts]
        if any(lab is not None for lab in labels):
            return _any_correct([lab or UNDECIDED for lab in labels])
    keys, text_alts = [], []
    for a in alts:
        k = _numeric_key(a, question)
        (keys.append(k) if k is not None else text_alts.append(a))
    labels = []
    if keys:
        labels.append(_grade_numbers(keys, _quantities(hyp, _question_unit(question)), asks_past))
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
