"""The one path every reply takes: the canonical request, its key, and the on-disk cache.

Every reply is stored on disk (diskcache, SQLite: safe for concurrent writers and atomic under
SIGKILL) under the SHA-256 of the canonical request (``request_key``). ``memoized`` consults a
recording of replies first (``memlife.models.replies``: MEMLIFE_REPLIES, or the profile's
``recorded_replies``), so a run rests on the same replies on every machine, then the cache, then
the model. An entry that cannot be read is moved aside (``damaged_dir``), said, and asked again;
replay mode stops, naming it. ``MEMLIFE_LLM_MODE=replay`` answers only from the recording and the
cache and fails on a miss; ``refresh`` ignores both; ``estimate`` answers a miss with a stand-in
reply (``memlife.models.standin``), sends and caches nothing, and logs what the call would cost
(the prompt tokens a provider's cache would serve modelled by ``memlife.models.prompt_cache``).

``collect`` (the Batch API's waves, ``memlife.running.batch``) answers a miss as ``estimate`` does
and writes the request, as the endpoint would be sent it, to the run's collection
(``MEMLIFE_COLLECT_DIR``) for a batch to send. A stand-in reply carries a pending mark; a request
whose prompt holds one was built on a reply not yet received (the judge after the reader) and is
not collected: a later wave asks it with the real reply. Requests that cannot wait for a wave —
memory ingestion, each call depending on the last (``synchronous()``) — are sent at once, and the
embedded model's and a local model's generations, which cost nothing, are made as in a live run.
"""
from __future__ import annotations

import hashlib
import json
import os
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Callable

from memlife.base import paths
from memlife.models import accounting, endpoints

CACHE_FORMAT = 1  # bump to invalidate every cached reply when the stored shape changes


# --------------------------------------------------------------------------- the request


def canonical_request(model_id: str, messages: list[dict], *, max_tokens: int, temperature: float,
                      seed: int | None, response_format: dict | None, stop: list[str] | None,
                      extra: dict | None = None, wire: dict | None = None) -> dict:
    """Everything that determines a reply — and nothing secret (no key, no URL, no port).

    `wire` (Endpoint.wire) appears only when the endpoint takes other parameters than the plain
    chat request, so the requests of the embedded model keep the keys recorded replies use."""
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or "role" not in m or "content" not in m:
            raise ValueError(f"messages[{i}] must be a dict with 'role' and 'content'")
    req = {
        "cache_format": CACHE_FORMAT,
        "model": model_id,
        "messages": [{"role": m["role"], "content": m["content"]} for m in messages],
        "max_tokens": int(max_tokens),
        "temperature": float(temperature),
        "seed": seed,
        "response_format": response_format,
        "stop": list(stop) if stop else None,
        "extra": extra or None,
    }
    if wire:
        req["wire"] = dict(wire)
    return req


def request_key(request: dict) -> str:
    blob = json.dumps(request, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------- cache and usage


_cache_lock = threading.Lock()
_cache_obj = None


def cache_dir() -> Path:
    return paths.cache_dir() / "llm"


def _cache():
    global _cache_obj
    with _cache_lock:
        want = str(cache_dir())
        if _cache_obj is None or _cache_obj.directory != want:
            import diskcache

            Path(want).mkdir(parents=True, exist_ok=True)
            _cache_obj = diskcache.Cache(want, size_limit=2**40, eviction_policy="none")
        return _cache_obj


def damaged_dir() -> Path:
    """Where unreadable cache entries are moved: beside the cache, never inside diskcache's folder."""
    return paths.cache_dir() / "llm-damaged"


def cache_get(key: str) -> dict | None:
    """The cached reply under `key`, or None. One damaged entry (a pickle cut short, a disk error)
    does not stop a run or cost every paid reply: it is moved aside to damaged_dir(), said, and
    the request asked again; replay mode, which cannot ask, stops naming it and changes nothing."""
    cache = _cache()
    try:
        value = cache.get(key)
        problem = None if value is None or _reply_shape_ok(value) else f"not a stored reply: {type(value).__name__}"
    except Exception as exc:  # whatever unpickling bytes of any kind raises
        problem = f"{type(exc).__name__}: {exc}"
    if problem is None:
        return value
    where = f"the cached reply for request {key} in {cache_dir()} cannot be read ({problem})"
    if endpoints.mode() == "replay":
        raise endpoints.DamagedCacheEntry(f"{where}; replay mode cannot ask again: rerun in live mode (the entry is then "
                                f"moved aside to {damaged_dir()} and asked again), or restore the cache")
    kept = _move_aside(cache, key)
    from memlife.base import progress

    progress.notice(f"{where}; moved aside to {kept} and asked again")
    return None


def _reply_shape_ok(value) -> bool:
    return isinstance(value, dict) and {"text", "prompt_tokens", "completion_tokens"} <= set(value)


def _move_aside(cache, key: str) -> Path:
    """Copy the entry's stored bytes to damaged_dir()/KEY.entry (for a post-mortem), then delete it."""
    import shutil

    out = damaged_dir() / f"{key}.entry"
    out.parent.mkdir(parents=True, exist_ok=True)
    row = cache._sql("SELECT filename, value FROM Cache WHERE key = ? AND raw = 1", (key,)).fetchone()
    if row is not None:
        filename, value = row
        if filename and (Path(cache.directory) / filename).is_file():
            shutil.copyfile(Path(cache.directory) / filename, out)
        elif value is not None:
            out.write_bytes(value if isinstance(value, bytes) else str(value).encode())
    cache.delete(key, retry=True)
    return out


def cache_put(key: str, value: dict) -> None:
    _cache().set(key, value)


def memoized(key: str, compute: Callable[[], accounting.Completion], *, role: str, model: str, describe: str,
             price: accounting.PriceFn | None = None, request: dict | None = None,
             budget: int | None = None, batch_line: Callable[[], dict] | None = None) -> accounting.Completion:
    """The reply recorded or cached under `key`, or `compute()`'s, cached; accounted under `role`.

    The one path of every model call — the endpoint clients' and a local model's own generations
    (Temp-LoRA) — so that all obey MEMLIFE_LLM_MODE (replay fails on a miss naming `describe`,
    refresh ignores hits), and all are counted. The active recording comes before the cache: its
    replies are the ones a shared result rests on, whatever this machine's model would say. A
    failed call raises and caches nothing; a refusal or an empty reply is the model's answer and
    is cached like any other (and said, once per role and process). `batch_line`, given for a
    request to a remote endpoint, makes the collection's line for it (collect mode).
    """
    from memlife.models import replies

    m = endpoints.mode()
    if m != "refresh":
        source, hit = "recorded", replies.lookup(key)
        if hit is None:
            source, hit = "cache", cache_get(key)
        if hit is not None:
            c = accounting.Completion(text=hit["text"], prompt_tokens=hit["prompt_tokens"],
                           completion_tokens=hit["completion_tokens"], cached=True, latency_s=0.0,
                           request_id=key, model=model, finish_reason=hit.get("finish_reason"),
                           source=source, refusal=hit.get("refusal"), cached_tokens=hit.get("cached_tokens", 0),
                           batch=bool(hit.get("batch")))
            accounting._account(role, c, price)
            return c
    if m == "replay":
        raise endpoints.CacheMiss(f"replay mode: no recorded or cached reply for request {key[:16]} ({describe})")
    if m == "estimate":
        # A request asked again in the same run (notebook 10 builds twice to check determinism;
        # two systems may ask the same) would come from the cache then: counted as cached here.
        seen = _estimates_seen()
        again = seen.get(key) if seen is not None else None
        c = _estimated(key, model, request, budget, remote=batch_line is not None)
        if again is not None:
            c.cached, c.source = True, "cache"
        elif seen is not None:
            seen.set(key, True)
        accounting._account(role, c, price)
        return c
    if m == "collect" and (_pending(request) or (batch_line is not None and not _in_synchronous())):
        c = _estimated(key, model, request, budget, remote=batch_line is not None, mark=key)
        if _pending(request):
            c.source = "deferred"  # built on a stand-in: asked in a later wave
        else:
            c.source = "pending"
            _collect({"key": key, "role": role, "model": model, "prompt_tokens": c.prompt_tokens,
                      "budget": c.completion_tokens, "notebook": endpoints.run_name(), **batch_line()})
        accounting._account(role, c, price)
        return c
    # Live, or collecting a call that cannot wait (ingestion) or costs nothing (a local model's).
    c = compute()
    store(key, c, model)
    c.source = "live"
    accounting._account(role, c, price)
    return c


def store(key: str, c: accounting.Completion, model: str) -> None:
    """Put a reply received (live, or from a Batch API's output file) in the cache under `key`."""
    from memlife.models import replies

    # Where the reply was made travels with it, into any recording exported from this cache.
    value = {"text": c.text, "prompt_tokens": c.prompt_tokens, "completion_tokens": c.completion_tokens,
             "finish_reason": c.finish_reason, "provenance": replies.provenance(model)}
    if c.refusal is not None:
        value["refusal"] = c.refusal
    if c.cached_tokens:
        value["cached_tokens"] = c.cached_tokens
    if c.batch:
        value["batch"] = True
    cache_put(key, value)


# --------------------------------------------------------------------------- collect mode

COLLECT_DIR_ENV = "MEMLIFE_COLLECT_DIR"
PENDING_MARK = "[[memlife-pending-"  # in every stand-in reply a collecting run gives
_sync = threading.local()


@contextmanager
def synchronous():
    """Calls made inside are sent at once even while collecting: memory ingestion (Mem0, MemOS),
    where each call depends on the reply to the last, cannot wait for a batch."""
    depth = getattr(_sync, "depth", 0)
    _sync.depth = depth + 1
    try:
        yield
    finally:
        _sync.depth = depth


def _in_synchronous() -> bool:
    return getattr(_sync, "depth", 0) > 0


def _pending(request: dict | None) -> bool:
    return any(PENDING_MARK in str(m.get("content")) for m in (request or {}).get("messages") or [])


def _collect(line: dict) -> None:
    where = os.environ.get(COLLECT_DIR_ENV)
    if not where:
        raise endpoints.LLMError(f"MEMLIFE_LLM_MODE=collect needs {COLLECT_DIR_ENV}, the folder the requests are "
                                 "collected in (memlife.running.batch sets it)")
    accounting.append_line(Path(where) / f"{os.getpid()}.jsonl", line)


ESTIMATE_SEEN_ENV = "MEMLIFE_ESTIMATE_SEEN"
_seen_obj = None


def _estimates_seen():
    """The keys an estimate run has counted, on disk for all its notebooks (memlife.running.estimate
    sets the folder); None outside one."""
    global _seen_obj
    where = os.environ.get(ESTIMATE_SEEN_ENV)
    if not where:
        return None
    with _cache_lock:
        if _seen_obj is None or _seen_obj.directory != where:
            import diskcache

            _seen_obj = diskcache.Cache(where, eviction_policy="none")
        return _seen_obj


def _estimated(key: str, model: str, request: dict | None, budget: int | None, *, remote: bool = False,
               mark: str | None = None) -> accounting.Completion:
    """What `make estimate` counts for a call the run would send: its prompt (o200k tokens), of
    which a remote endpoint's prompt cache would serve what an earlier request of this process
    shares with it (`memlife.models.prompt_cache`), its whole completion budget (the worst case, as
    the spending ledger reserves it), and a stand-in reply so that the notebook goes on as a run
    would; `mark` (collect mode) puts the pending mark in the stand-in's text."""
    from memlife.models import prompt_cache, standin, tokens

    messages = (request or {}).get("messages") or []
    fmt = (request or {}).get("response_format")
    text = standin.reply_text(messages, fmt, mark=f"{PENDING_MARK}{mark[:16]}]]" if mark else None) if request else ""
    return accounting.Completion(text=text, prompt_tokens=tokens.count_messages(messages) if messages else 0,
                      completion_tokens=int(budget if budget is not None else (request or {}).get("max_tokens", 0)),
                      cached=False, latency_s=0.0, request_id=key, model=model, finish_reason="stop",
                      source="estimate",
                      cached_tokens=prompt_cache.modelled_cached_tokens(messages) if remote and messages else 0)
