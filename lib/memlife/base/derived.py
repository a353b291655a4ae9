"""What is derived from an installed data file, kept on disk so that each process does not derive it again.

ShareGPT's split (125 MB of JSON) is read, filtered and tokenized the same way by every process
that builds a history: notebook kernels, ``make`` runs, tests. :func:`cached` keeps the result as a
pickle keyed by everything it depends on (the source file's size and modification time, the code
that derives it), so a new process loads it in about a second; anything else that changes the
result changes the key.

The files live in the environment that holds the data file (``sys.prefix``/share/memlife), not in
a profile's model-call cache (``MEMLIFE_CACHE_DIR``), which tests point elsewhere and ``make
clean-cache`` empties: they are the environment's, as the wheel is. A file that cannot be read is
derived again; a directory that cannot be written leaves the result uncached. Writing a
name's file removes its files of other keys (each is ~100 MB). Nothing here is a
model call, so no secret and no reply is ever kept.
"""
from __future__ import annotations

import hashlib
import json
import os
import pickle
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def directory() -> Path:
    return Path(os.environ.get("MEMLIFE_DERIVED_DIR") or Path(sys.prefix) / "share" / "memlife")


def source_digest(*files: str | Path) -> str:
    """The SHA-256 of source files' bytes together: a key part that changes when the code does."""
    h = hashlib.sha256()
    for f in files:
        h.update(Path(f).read_bytes())
    return h.hexdigest()


def file_stamp(path: str | Path) -> list:
    """A data file as a key part: its path, size and modification time (cheap; a changed file
    changes one of them, and the derivation reads and checks the file itself)."""
    st = Path(path).stat()
    return [str(path), st.st_size, st.st_mtime_ns]


def path_for(name: str, key_parts: list) -> Path:
    key = hashlib.sha256(json.dumps([sys.version_info[:2], key_parts], sort_keys=True).encode()).hexdigest()
    return directory() / f"{name}-{key[:20]}.pkl"


def cached(name: str, key_parts: list, derive: Callable[[], T]) -> T:
    """``derive()``, or what it returned before under the same ``key_parts`` (JSON-able)."""
    path = path_for(name, key_parts)
    try:
        with open(path, "rb") as fh:
            return pickle.load(fh)
    except FileNotFoundError:
        pass
    except Exception:  # a torn or foreign file: derived again and replaced below
        pass
    value = derive()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{name}-")
        with os.fdopen(fd, "wb") as fh:
            pickle.dump(value, fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)  # atomic: a process reading at the same time sees the old file or the new
        for old in path.parent.glob(f"{name}-*.pkl"):  # another key's: this environment's code no longer makes it
            if old != path:
                old.unlink(missing_ok=True)
    except OSError:
        pass
    return value
