"""The provider's prompt cache, modelled: which of a request's prompt tokens it would serve.

OpenAI (and Azure OpenAI, and vLLM with prefix caching) serves a prompt's head from its cache
when an earlier request began with the same tokens: at least ``MIN_TOKENS`` (1,024) of them,
counted in steps of ``STEP`` (128), reported as ``usage.prompt_tokens_details.cached_tokens`` and
billed at the cached-input price. memlife's prompts put the stable part first (system prompt,
history or memory, the question last) and five probes share each MemOps history, so most of a
long-context run's prompt tokens can come from the cache.

``PrefixIndex`` is the model an estimate uses: a request's cached tokens are the longest prefix,
past the minimum and in whole steps, that it shares with any request before it in the same
process (one notebook's run). Tokens are o200k, laid out as ``tokens.count_messages`` counts them
(a few tokens per message, then its content), so cached and prompt tokens are in the same units.
The model assumes the provider keeps every prefix for the whole run; OpenAI keeps one for
minutes of inactivity (an hour at most), which requests sent back to back on one history meet.
``cache_key`` is the ``prompt_cache_key`` sent where the endpoint takes one, so that requests
sharing a head reach the same cache.
"""
from __future__ import annotations

import hashlib
import threading
from array import array

from memlife.models import tokens

MIN_TOKENS = 1024
STEP = 128
MESSAGE_OVERHEAD = 4  # tokens.count_messages' per-message tokens; its +2 closes the prompt


def message_tokens(messages: list[dict]) -> list[int]:
    """The prompt's tokens in order: per message, its role's marker tokens, then its content's."""
    enc = tokens.encoding()
    out: list[int] = []
    for m in messages:
        marker = int.from_bytes(hashlib.blake2b(str(m.get("role")).encode(), digest_size=3).digest(), "big")
        out += [marker] * MESSAGE_OVERHEAD  # ids no content token has: o200k's are below 2**18
        out += enc.encode(m.get("content") or "", disallowed_special=())
    return out


def boundary_hashes(ids: list[int]) -> list[int]:
    """One hash per whole step from MIN_TOKENS on: entry j covers ids[:MIN_TOKENS + j * STEP]."""
    h = hashlib.blake2b(digest_size=8)
    out = []
    for end in range(STEP, len(ids) + 1, STEP):
        h.update(array("I", ids[end - STEP:end]).tobytes())
        if end >= MIN_TOKENS:
            out.append(int.from_bytes(h.copy().digest(), "big"))
    return out


class PrefixIndex:
    """The prefixes this run has sent; ``observe`` says how many of a request's tokens a provider's
    cache would serve, then remembers the request's own prefixes."""

    def __init__(self) -> None:
        self._seen: set[int] = set()
        self._lock = threading.Lock()

    def observe(self, messages: list[dict]) -> int:
        ids = message_tokens(messages)
        hashes = boundary_hashes(ids)
        with self._lock:
            hit = 0
            for h in hashes:  # nested prefixes: the first one missing ends the match
                if h not in self._seen:
                    break
                hit += 1
            self._seen.update(hashes)
        return MIN_TOKENS + (hit - 1) * STEP if hit else 0


_index = PrefixIndex()


def modelled_cached_tokens(messages: list[dict]) -> int:
    """What this process's provider cache would serve of `messages` (estimate mode)."""
    return _index.observe(messages)


def reset() -> None:
    global _index
    _index = PrefixIndex()


HEAD_CHARS = 4096  # about the first 1,024 tokens: the part requests on one history share


def cache_key(messages: list[dict]) -> str:
    """OpenAI's prompt_cache_key for a request: a hash of its head, the same for every request that
    opens with the same system prompt and history. Never part of a reply's cache key: it does not
    change the reply."""
    head = "".join(f"{m.get('role')}\n{m.get('content') or ''}\n" for m in messages)[:HEAD_CHARS]
    return "memlife-" + hashlib.sha256(head.encode("utf-8")).hexdigest()[:24]
