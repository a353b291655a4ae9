"""Reading an answer or a hypothesis for the offline LongMemEval grader: tokens and quantities.

Tokens carry negation ("not", "no longer" within the clause) and orientation (past or current:
"used to", "now"); numbers are read in words or digits with their units — money, percentages,
clock times, dates, durations and counts — and combined where a reply adds them up. The grading
rules that use these readings are in `memlife.restore.judging.answer_judge`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

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
