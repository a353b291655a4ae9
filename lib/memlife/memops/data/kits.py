"""Topic kits: the content a MemOps background is sampled from, one YAML file per sub-topic.

A kit holds what a topic's five evidence conversations need: the user's situations, an
attribute that is remembered and later superseded (`main`), a different attribute of the user's
that is easily confused with it (`neighbour`), a temporary value the user asks to be forgotten
(`temp`), a retained control that must survive the forget (`control`), clue sets that support
one bounded reflection (and the generalizations they do not support), other people whose
values are confusable, opening lines, a to-do list and task exchanges that give the assistant
real work to do. Values are written so that they can be quoted verbatim.

The files live in `memops/data/topics/`, named by their key. `load_kits()` validates every file and
the set as a whole (categories in the paper's Figure 4 proportions, no sub-topic, value or
opening line shared between topics); an error names the file and the field.
`python -m memlife.memops.data.kits [FILE ...]` runs the same checks and prints every problem.
"""
from __future__ import annotations

import re
import sys
from functools import lru_cache
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from memlife.memops.data.schema import CATEGORIES, outside_reply_alphabet
from memlife.memops.data.schema import normalize_value as _norm  # the normalization answer keys use

TOPICS_DIR = Path(__file__).with_name("topics")

# First names the backgrounds draw the user's name from; kits name other people by role ("my sister").
NAMES = (
    "Maya", "Daniel", "Priya", "Tom", "Lucia", "Kenji", "Amara", "Jonas", "Sofia", "Omar",
    "Elena", "Ravi", "Hannah", "Mateo", "Chloe", "Femi", "Ingrid", "Leo", "Nadia", "Sam",
)

_POSSESSIVE = re.compile(r"\w['’]s\b|\ws['’](?!\w)")  # "Jo's", "Weavers'", not "O'Connor"


def _contains_words(haystack: str, needle: str) -> bool:
    return f" {needle} " in f" {haystack} "


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    @field_validator("*", mode="after")
    @classmethod
    def _writable_text(cls, v, info):
        for s in (v if isinstance(v, tuple) else (v,)):
            if isinstance(s, str):
                if not s.strip():
                    raise ValueError("must not be blank")
                if "{" in s or "}" in s:
                    raise ValueError(f"must not contain braces (they are template slots): {s!r}")
                # The readers' reply grammar writes printable ASCII without quotes or backslashes
                # (one byte a character, so a reply's length bounds its tokens); a gold response
                # quotes these strings, so they must be written in it.
                outside = outside_reply_alphabet(s)
                if outside:
                    raise ValueError(f"must be printable ASCII without quotes or backslashes (the reply "
                                     f"grammar's alphabet), found {outside} in {s!r}")
        return v


class TargetSpec(_Strict):
    target: str  # canonical target name, e.g. "delivery address"
    np: str  # how the user refers to it, e.g. "my delivery address"
    aliases: tuple[str, ...] = Field(min_length=1)
    values: tuple[str, ...]

    @model_validator(mode="after")
    def _distinct_values(self):
        said = _norm(self.np)
        if not any(_contains_words(said, _norm(n)) for n in (self.target, *self.aliases)):
            raise ValueError(f"np {self.np!r} names the target by neither {self.target!r} nor an alias; "
                             "questions ask for it by those names, so the user must have used one")
        normed = [_norm(v) for v in self.values]
        if len(set(normed)) != len(normed):
            raise ValueError(f"values of {self.target!r} repeat: {list(self.values)}")
        for a in normed:
            for b in normed:
                if a != b and _contains_words(b, a):
                    raise ValueError(f"value {a!r} of {self.target!r} is contained in {b!r}: an answer naming one "
                                     "would seem to name the other")
        return self


class ReflectSet(_Strict):
    target: str
    clues: tuple[str, str, str]  # three user sentences, none of which states the conclusion
    conclusion: str  # the bounded inference, a sentence containing `key`
    key: str  # the short phrase a correct answer must contain
    unsupported: tuple[str, ...] = Field(min_length=2)  # over-generalizations the clues do not justify

    @model_validator(mode="after")
    def _key_in_conclusion_only(self):
        key = _norm(self.key)
        if set(key.split()) & {"user", "their", "they", "them"}:
            # The conclusion is rewritten to address the user ("their" -> "your"); the key is not.
            raise ValueError(f"reflect {self.target!r}: key {self.key!r} names the user in the third person")
        if not _contains_words(_norm(self.conclusion), key):
            raise ValueError(f"reflect {self.target!r}: key {self.key!r} is not in the conclusion")
        for clue in self.clues:
            if _contains_words(_norm(clue), key):
                raise ValueError(f"reflect {self.target!r}: clue states the key {self.key!r} outright: {clue!r}")
        for u in self.unsupported:
            if _contains_words(_norm(u), key):
                raise ValueError(f"reflect {self.target!r}: unsupported claim contains the key {self.key!r}: {u!r}")
            if not u.startswith("the user "):
                raise ValueError(f"reflect {self.target!r}: unsupported claims start with 'the user ': {u!r}")
        return self


class Task(_Strict):
    user: str
    assistant: str


class Kit(_Strict):
    key: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    category: str
    subtopic: str
    settings: tuple[str, ...] = Field(min_length=3)  # the user's situation, completes "I'm ..."
    openers: tuple[str, ...] = Field(min_length=6)  # the first user line of a conversation, in this topic's voice
    main: TargetSpec
    neighbour: TargetSpec  # the user's own, different attribute that is easily confused with `main`
    temp: TargetSpec
    control: TargetSpec
    reflect: tuple[ReflectSet, ...] = Field(min_length=2)
    owners: tuple[str, ...] = Field(min_length=3)  # other people, e.g. "my sister"; confusable owners
    items: tuple[str, ...] = Field(min_length=6)  # to-do items the assistant organises
    tasks: tuple[Task, ...] = Field(min_length=8)  # task exchanges
    use: str  # an application task, completes "Can you ..."

    @field_validator("category")
    @classmethod
    def _known_category(cls, v):
        if v not in CATEGORIES:
            raise ValueError(f"unknown category {v!r}; expected one of {list(CATEGORIES)}")
        return v

    @model_validator(mode="after")
    def _shape(self):
        need = {"main": 6, "neighbour": 3, "temp": 4, "control": 4}
        for name, n in need.items():
            spec = getattr(self, name)
            if len(spec.values) < n:
                raise ValueError(f"{name}.values: at least {n} needed, got {len(spec.values)}")
        for v in self.main.values:
            # Update chains list main values side by side ("went A -> B"); a possessive inside one
            # ("St Aldric's") reads to the scorer as naming another owner for the value after it.
            if _POSSESSIVE.search(v):
                raise ValueError(f"main.values: {v!r} holds a possessive; write it without one")
        own = {name: {_norm(v) for v in getattr(self, name).values} for name in need}
        names = list(need)
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                both = own[a] & own[b]
                if both:
                    raise ValueError(f"{a}.values and {b}.values share {sorted(both)}")
                for x in own[a]:
                    for y in own[b]:
                        if _contains_words(x, y) or _contains_words(y, x):
                            raise ValueError(f"{a}.values {x!r} and {b}.values {y!r}: one contains the other")
        targets = [_norm(getattr(self, n).target) for n in names]
        if len(set(targets)) != len(targets):
            raise ValueError(f"main, neighbour, temp and control must be four different targets, got {targets}")
        for name, lst in (("openers", self.openers), ("settings", self.settings), ("items", self.items),
                          ("owners", self.owners)):
            if len({_norm(x) for x in lst}) != len(lst):
                raise ValueError(f"{name} repeat an entry")
        for o in self.owners:
            if not o.startswith("my "):
                raise ValueError(f"owners are people named from the user's side, starting 'my ': {o!r}")
        return self


class KitError(ValueError):
    pass


def load_kit(path: Path) -> Kit:
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise KitError(f"{path}: not valid YAML ({exc})") from exc
    if not isinstance(raw, dict):
        raise KitError(f"{path}: expected a mapping of kit fields")
    try:
        kit = Kit.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(x) for x in e['loc']) or '(kit)'}: {e['msg']}" for e in exc.errors())
        raise KitError(f"{path}: {problems}") from None
    if kit.key != path.stem:
        raise KitError(f"{path}: key {kit.key!r} differs from the file name")
    return kit


def _values_of(kit: Kit) -> dict[str, str]:
    return {_norm(v): f"{name}.values" for name in ("main", "neighbour", "temp", "control")
            for v in getattr(kit, name).values}


def check_set(kits: list[Kit], paths: dict[str, Path] | None = None) -> list[str]:
    """Problems across kits: shared sub-topics, values, settings or opening lines."""
    problems: list[str] = []
    where = (lambda k: str(paths[k.key])) if paths else (lambda k: k.key)
    seen: dict[str, dict[str, Kit]] = {"subtopic": {}, "value": {}, "opener": {}, "setting": {}}
    for kit in kits:
        entries = {"subtopic": [(_norm(kit.subtopic), "subtopic")],
                   "value": list(_values_of(kit).items()),
                   "opener": [(_norm(o), "openers") for o in kit.openers],
                   "setting": [(_norm(s), "settings") for s in kit.settings]}
        for kind, pairs in entries.items():
            for text, field in pairs:
                other = seen[kind].get(text)
                if other is not None and other.key != kit.key:
                    problems.append(f"{where(kit)}: {field} {text!r} is also in {where(other)}")
                seen[kind].setdefault(text, kit)
    return problems


@lru_cache(maxsize=4)
def load_kits(directory: str | None = None) -> tuple[Kit, ...]:
    """Every kit under `directory` (default: the shipped topics), validated one by one and as a set."""
    root = Path(directory) if directory else TOPICS_DIR
    paths = sorted(root.glob("*.yaml"))
    if not paths:
        raise KitError(f"{root}: no topic kits (*.yaml)")
    kits = [load_kit(p) for p in paths]
    problems = check_set(kits, {k.key: p for k, p in zip(kits, paths)})
    if problems:
        raise KitError(f"{root}: {len(problems)} problem(s) across kits:\n  " + "\n  ".join(problems))
    return tuple(kits)


def kits_by_category(directory: str | None = None) -> dict[str, list[Kit]]:
    out: dict[str, list[Kit]] = {c: [] for c in CATEGORIES}
    for kit in load_kits(directory):
        out[kit.category].append(kit)
    return out


def main(argv: list[str]) -> int:
    """Check the named kit files (default: all shipped kits) and print every problem found."""
    paths = [Path(a) for a in argv] or sorted(TOPICS_DIR.glob("*.yaml"))
    kits, problems = [], []
    for p in paths:
        try:
            kits.append((p, load_kit(p)))
        except KitError as exc:
            problems.append(str(exc))
    problems += check_set([k for _, k in kits], {k.key: p for p, k in kits})
    counts = {c: sum(k.category == c for _, k in kits) for c in CATEGORIES}
    print(f"{len(kits)} kit(s) valid of {len(paths)}; by category: {counts}")
    for line in problems:
        print("PROBLEM", line)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
