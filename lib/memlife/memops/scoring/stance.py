"""Reading what a reply says about a value: mentioned, asserted as current, or set aside.

Each occurrence of a value is read in its clause for cues (`stances`): negated ("94114, not
94110 anymore"), previous ("changed from X to Y"), removed ("I deleted the gate code"),
tentative ("April 11 was only a possibility") or someone else's ("March 28 belongs to your
flatmate"). Only a bare occurrence asserts a value as current (`asserts`, `states`). Also here:
abstention, quotes that cover a gold quote (`quotes_overlap`), and target names
(`target_matches`). The labels built on these readings are in `memlife.memops.scoring.metrics`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from memlife.memops.data.schema import normalize_value

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
