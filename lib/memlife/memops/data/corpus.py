"""Real human-written dialogues for filler sessions and unrelated long-context conversations.

The offline default is the BYU Chit-Chat Challenge corpus (7,168 two-person conversations,
with timestamps) that the PyPI package ``chitchat-dataset`` ships as one JSON file. The first
speaker of each conversation becomes the ``user``, the second the ``assistant``; consecutive
messages of one speaker are joined into one turn. Nothing here is invented text.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path


@dataclass(frozen=True)
class Dialogue:
    dialogue_id: str
    date: str  # ISO date of the first message
    turns: tuple[dict, ...]  # ({"role": "user"|"assistant", "content": str}, ...), user first


def chitchat_path() -> Path:
    spec = importlib.util.find_spec("chitchat_dataset")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            "chitchat-dataset is not installed; `make env` installs it (pyproject.toml)"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "dataset.json"


def _to_dialogue(conv_id: str, conv: dict) -> Dialogue | None:
    turns: list[dict] = []
    speakers: list[str] = []
    for group in conv.get("messages", []):
        texts = [m["text"].strip() for m in group if m.get("text", "").strip()]
        if not texts:
            continue
        sender = group[0]["sender"]
        if sender not in speakers:
            speakers.append(sender)
        role = "user" if sender == speakers[0] else "assistant"
        text = " ".join(texts)
        if turns and turns[-1]["role"] == role:
            turns[-1] = {"role": role, "content": turns[-1]["content"] + " " + text}
        else:
            turns.append({"role": role, "content": text})
    if len(speakers) != 2 or len(turns) < 2:
        return None
    first = conv["messages"][0][0].get("timestamp", "")[:10]
    return Dialogue(dialogue_id=conv_id, date=first, turns=tuple(turns))


@lru_cache(maxsize=1)
def load_dialogues() -> tuple[Dialogue, ...]:
    """All usable two-speaker dialogues, sorted by id so that seeded sampling is stable."""
    with open(chitchat_path()) as fh:
        raw = json.load(fh)
    out = [d for k in sorted(raw) if (d := _to_dialogue(k, raw[k])) is not None]
    return tuple(out)


def corpus_sha256() -> str:
    """Hash of the shipped corpus file, recorded in dataset manifests."""
    h = hashlib.sha256()
    with open(chitchat_path(), "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
