"""The one client for every model call in memlife.

- Configuration: an endpoint (base URL, model) per role — reader, judge, generator, scorer,
  verifier, judge_audit (the restore paper's second judge, re-grading a sample) — from the profile's ``models:`` section and environment variables
  (``MEMLIFE_<ROLE>_BASE_URL`` / ``MEMLIFE_<ROLE>_MODEL``, or ``MEMLIFE_BASE_URL`` /
  ``MEMLIFE_MODEL`` for all roles). The key comes from the environment only and is never stored.
  With nothing configured every role uses the embedded llama-server (``memlife.serve``).
- Cache: every reply is stored on disk (diskcache, SQLite: safe for concurrent writers and
  atomic under SIGKILL) under the SHA-256 of the canonical request. A recording of replies
  (``memlife.replies``: MEMLIFE_REPLIES, or the profile's ``recorded_replies``) is consulted
  first, so a run rests on the same replies on every machine. ``MEMLIFE_LLM_MODE=replay``
  answers only from the recording and the cache and fails on a miss; ``refresh`` ignores both.
- Robustness: bounded concurrency; retries with exponential backoff and jitter on 429, 5xx,
  timeouts, connection errors and malformed bodies, honouring Retry-After. A call that still
  fails raises ``LLMCallError`` naming the request id. Failures are never cached.
- Accounting: every call (cached or not) is appended to ``results/usage/<run>.calls.jsonl``;
  ``usage_summary`` aggregates; a spending cap stops a run before an uncached call could pass it.
"""
from __future__ import annotations

import hashlib
import json
import os
import random
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any, Callable, Iterable

from . import paths

ROLES = ("reader", "judge", "generator", "scorer", "verifier", "judge_audit")
MODES = ("live", "replay", "refresh")
CACHE_FORMAT = 1  # bump to invalidate every cached reply when the stored shape changes

# USD per million tokens (input, output), list prices of the named API models.
# Models not listed are reported as unpriced (usd_estimate counts them as 0 and says so).
PRICES_PER_MTOK: dict[str, tuple[float, float]] = {
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4o": (2.50, 10.00),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-5-mini": (0.25, 2.00),
    "gpt-5": (1.25, 10.00),
}


class LLMError(RuntimeError):
    pass


class LLMCallError(LLMError):
    """A call that failed after its retries, or that cannot succeed (4xx)."""


class CacheMiss(LLMError):
    """Replay mode found no cached reply for a request."""


class SpendingCapExceeded(LLMError):
    pass


# --------------------------------------------------------------------------- configuration


@dataclass(frozen=True)
class Endpoint:
    role: str
    model: str
    base_url: str | None = None  # None: the embedded llama-server
    api_key_env: str | None = None  # the NAME of the variable holding the key, never the key
    structured_output: bool = True  # send response_format json_schema
    timeout_s: float = 600.0
    max_retries: int = 5
    concurrency: int = 1

    @property
    def is_embedded(self) -> bool:
        return self.base_url is None


_settings: dict[str, Any] = {"models": {}, "run": None, "spend_cap_usd": None, "replies": None}


def configure(profile: str | None = None, *, run: str | None = None,
              models: dict | None = None, spend_cap_usd: float | None = None) -> None:
    """Load model endpoints from a profile (configs/<profile>.yaml, key ``models``).

    Environment variables still win over the profile, so a user points any profile at another
    endpoint without editing files.
    """
    cfg_models: dict = {}
    cap = None
    recorded = None
    if profile is not None:
        from . import config

        cfg = config.load_profile(profile)
        cfg_models = cfg.get("models") or {}
        cap = cfg.get("spend_cap_usd")
        if cfg.get("recorded_replies"):
            recorded = paths.repo_root() / cfg["recorded_replies"]
    _settings["models"] = {**cfg_models, **(models or {})}
    _settings["replies"] = recorded
    _settings["spend_cap_usd"] = spend_cap_usd if spend_cap_usd is not None else cap
    if run is not None:
        _settings["run"] = run
    _clients.clear()


def _env(role: str, name: str) -> str | None:
    return os.environ.get(f"MEMLIFE_{role.upper()}_{name}") or os.environ.get(f"MEMLIFE_{name}")


def endpoint_for(role: str) -> Endpoint:
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}; expected one of {ROLES}")
    prof = dict((_settings["models"] or {}).get(role) or {})
    base_url = _env(role, "BASE_URL") or prof.get("base_url")
    model = _env(role, "MODEL") or prof.get("model")
    if base_url in ("", "embedded"):
        base_url = None
    if base_url is None:
        from . import serve

        model = serve.MODEL_ALIAS
    elif not model:
        raise LLMError(f"role {role!r}: base URL {base_url!r} is set but no model name "
                       f"(set MEMLIFE_{role.upper()}_MODEL or models.{role}.model)")
    key_env = None
    for name in (f"MEMLIFE_{role.upper()}_API_KEY", "MEMLIFE_API_KEY", "OPENAI_API_KEY"):
        if os.environ.get(name):
            key_env = name
            break
    structured = prof.get("structured_output", True)
    if os.environ.get(f"MEMLIFE_{role.upper()}_STRUCTURED") is not None:
        structured = os.environ[f"MEMLIFE_{role.upper()}_STRUCTURED"] not in ("0", "false", "no")
    return Endpoint(
        role=role, model=model, base_url=base_url, api_key_env=key_env if base_url else None,
        structured_output=bool(structured),
        timeout_s=float(_env(role, "TIMEOUT_S") or prof.get("timeout_s", 600)),
        max_retries=int(_env(role, "MAX_RETRIES") or prof.get("max_retries", 5)),
        concurrency=int(_env(role, "CONCURRENCY") or prof.get("concurrency", 1 if base_url is None else 8)),
    )


def role_configured(role: str) -> bool:
    """True when `role` points at an endpoint other than the embedded model."""
    return not endpoint_for(role).is_embedded


def judge_available() -> bool:
    """An LLM judge runs only on a configured, capable endpoint — never the embedded model."""
    return role_configured("judge")


def judge_audit_unavailable() -> str | None:
    """Why the judge audit cannot run, or None when it can: it needs its own configured endpoint
    (never the embedded model), with a model other than the primary judge's — the same model
    name would replay the primary judge's cached grades and agree by construction."""
    if not role_configured("judge_audit"):
        return ("no endpoint is configured for the judge_audit role "
                "(MEMLIFE_JUDGE_AUDIT_BASE_URL / models.judge_audit)")
    audit = endpoint_for("judge_audit").model
    if judge_available() and endpoint_for("judge").model == audit:
        return (f"the judge_audit role is the primary judge's model ({audit}); set "
                "MEMLIFE_JUDGE_AUDIT_MODEL (or models.judge_audit.model) to a different model")
    return None


def judge_audit_available() -> bool:
    return judge_audit_unavailable() is None


def mode() -> str:
    m = os.environ.get("MEMLIFE_LLM_MODE", "live")
    if m not in MODES:
        raise LLMError(f"MEMLIFE_LLM_MODE={m!r}; expected one of {MODES}")
    return m


# --------------------------------------------------------------------------- the request


def canonical_request(model_id: str, messages: list[dict], *, max_tokens: int, temperature: float,
                      seed: int | None, response_format: dict | None, stop: list[str] | None,
                      extra: dict | None = None) -> dict:
    """Everything that determines a reply — and nothing secret (no key, no URL, no port)."""
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or "role" not in m or "content" not in m:
            raise ValueError(f"messages[{i}] must be a dict with 'role' and 'content'")
    return {
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


def request_key(request: dict) -> str:
    blob = json.dumps(request, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


@dataclass
class Completion:
    text: str
    prompt_tokens: int
    completion_tokens: int
    cached: bool
    latency_s: float
    request_id: str  # the cache key: the same id in logs, errors and the cache
    model: str
    finish_reason: str | None = None
    error: str | None = None  # set by complete_json when the reply does not parse
    source: str = "live"  # "recorded" (a recording of replies), "cache" (the disk cache) or "live"


# --------------------------------------------------------------------------- cache and usage


_cache_lock = threading.Lock()
_cache_obj = None


def cache_dir() -> Path:
    return paths.layout("smoke").cache / "llm"


def _cache():
    global _cache_obj
    with _cache_lock:
        want = str(cache_dir())
        if _cache_obj is None or _cache_obj.directory != want:
            import diskcache

            Path(want).mkdir(parents=True, exist_ok=True)
            _cache_obj = diskcache.Cache(want, size_limit=2**40, eviction_policy="none")
        return _cache_obj


def cache_get(key: str) -> dict | None:
    return _cache().get(key)


def cache_put(key: str, value: dict) -> None:
    _cache().set(key, value)


def memoized(key: str, compute: Callable[[], Completion], *, role: str, model: str, describe: str) -> Completion:
    """The reply recorded or cached under `key`, or `compute()`'s, cached; accounted under `role`.

    The one path of every model call — the endpoint clients' and a local model's own generations
    (Temp-LoRA) — so that all obey MEMLIFE_LLM_MODE (replay fails on a miss naming `describe`,
    refresh ignores hits), and all are counted. The active recording comes before the cache: its
    replies are the ones a shared result rests on, whatever this machine's model would say. A
    failed call raises and caches nothing.
    """
    from . import replies

    m = mode()
    if m != "refresh":
        source, hit = "recorded", replies.lookup(key)
        if hit is None:
            source, hit = "cache", cache_get(key)
        if hit is not None:
            c = Completion(text=hit["text"], prompt_tokens=hit["prompt_tokens"],
                           completion_tokens=hit["completion_tokens"], cached=True, latency_s=0.0,
                           request_id=key, model=model, finish_reason=hit.get("finish_reason"),
                           source=source)
            _account(role, c)
            return c
    if m == "replay":
        raise CacheMiss(f"replay mode: no recorded or cached reply for request {key[:16]} ({describe})")
    c = compute()
    # Where the reply was made travels with it, into any recording exported from this cache.
    cache_put(key, {"text": c.text, "prompt_tokens": c.prompt_tokens,
                    "completion_tokens": c.completion_tokens, "finish_reason": c.finish_reason,
                    "provenance": replies.provenance(model)})
    c.source = "live"
    _account(role, c)
    return c


@dataclass
class Usage:
    calls: int = 0
    cached_calls: int = 0  # answered without a model call: from the cache or a recording
    recorded_calls: int = 0  # of those, from the recording of replies
    prompt_tokens: int = 0
    completion_tokens: int = 0
    usd_estimate: float = 0.0
    unpriced_models: list[str] = field(default_factory=list)


_usage = Usage()
_usage_lock = threading.Lock()


def price_usd(model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
    """Cost of one uncached call; 0 for the embedded model, None when the model is unpriced."""
    from . import serve

    if model == serve.MODEL_ALIAS or model.startswith(serve.MODEL_ALIAS + "@"):
        return 0.0
    base = model.split("/")[-1]
    for name in sorted(PRICES_PER_MTOK, key=len, reverse=True):
        if base == name or base.startswith(name + "-2"):  # dated snapshots, e.g. gpt-4o-mini-2024-07-18
            pin, pout = PRICES_PER_MTOK[name]
            return (prompt_tokens * pin + completion_tokens * pout) / 1e6
    return None


def run_name() -> str:
    return _settings.get("run") or os.environ.get("MEMLIFE_RUN") or "adhoc"


def _log_call(rec: dict) -> None:
    d = paths.layout("smoke").usage
    d.mkdir(parents=True, exist_ok=True)
    line = json.dumps(rec, sort_keys=True) + "\n"
    # One write() on an O_APPEND descriptor: lines from concurrent processes never interleave.
    fd = os.open(d / f"{run_name()}.calls.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def _account(role: str, c: Completion) -> None:
    usd = 0.0 if c.cached else price_usd(c.model, c.prompt_tokens, c.completion_tokens)
    with _usage_lock:
        _usage.calls += 1
        _usage.cached_calls += int(c.cached)
        _usage.recorded_calls += int(c.source == "recorded")
        _usage.prompt_tokens += c.prompt_tokens
        _usage.completion_tokens += c.completion_tokens
        if usd is None:
            if c.model not in _usage.unpriced_models:
                _usage.unpriced_models.append(c.model)
        else:
            _usage.usd_estimate += usd
    _log_call({"role": role, "model": c.model, "request_id": c.request_id, "cached": c.cached,
               "source": c.source,
               "prompt_tokens": c.prompt_tokens, "completion_tokens": c.completion_tokens,
               "latency_s": round(c.latency_s, 4), "usd": usd})


def usage() -> Usage:
    with _usage_lock:
        return Usage(**{**asdict(_usage), "unpriced_models": list(_usage.unpriced_models)})


def reset_usage() -> None:
    global _usage
    with _usage_lock:
        _usage = Usage()


def summarize_calls(log_path: Path) -> dict:
    """Aggregate a calls log (one JSON line per call) into the per-run usage summary."""
    out = {"calls": 0, "cached_calls": 0, "recorded_calls": 0, "live_calls": 0,
           "prompt_tokens": 0, "completion_tokens": 0,
           "usd_estimate": 0.0, "unpriced_models": [], "latency_s": 0.0}
    if Path(log_path).exists():
        for n, line in enumerate(Path(log_path).read_text().splitlines(), 1):
            if not line.strip():
                continue
            try:
                r = json.loads(line)
            except ValueError as exc:
                raise LLMError(f"{log_path}:{n}: not a JSON line ({exc})") from exc
            out["calls"] += 1
            out["cached_calls"] += int(r["cached"])
            out["recorded_calls"] += int(r.get("source") == "recorded")
            out["live_calls"] += int(not r["cached"])
            out["prompt_tokens"] += r["prompt_tokens"]
            out["completion_tokens"] += r["completion_tokens"]
            out["latency_s"] += r["latency_s"]
            if r["usd"] is None:
                if r["model"] not in out["unpriced_models"]:
                    out["unpriced_models"].append(r["model"])
            else:
                out["usd_estimate"] += r["usd"]
    out["usd_estimate"] = round(out["usd_estimate"], 6)
    out["latency_s"] = round(out["latency_s"], 3)
    return out


# --------------------------------------------------------------------------- the client

_RETRYABLE_STATUS = {408, 409, 429, 500, 502, 503, 504}


def _retry_after_s(exc: Exception) -> float | None:
    resp = getattr(exc, "response", None)
    headers = getattr(resp, "headers", None)
    if not headers:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return float(ms) / 1000
        except ValueError:
            pass
    ra = headers.get("retry-after")
    if not ra:
        return None
    try:
        return float(ra)
    except ValueError:
        try:
            return max(0.0, parsedate_to_datetime(ra).timestamp() - time.time())
        except (TypeError, ValueError):
            return None


class Client:
    def __init__(self, endpoint: Endpoint):
        self.endpoint = endpoint
        self._openai = None
        self._spent_usd = 0.0
        self._spend_lock = threading.Lock()

    @property
    def model(self) -> str:
        return self.endpoint.model

    @property
    def is_embedded(self) -> bool:
        return self.endpoint.is_embedded

    @property
    def model_id(self) -> str:
        """The model identity in cache keys: for the embedded model, alias plus file fingerprint."""
        if self.is_embedded:
            from . import serve

            return serve.model_fingerprint()
        return self.model

    def _client(self):
        if self._openai is None:
            import openai

            if self.is_embedded:
                from . import serve

                server = serve.ensure_server()  # its key is per start, and never part of a cache key
                base_url, key = server.base_url, server.api_key
            else:
                base_url = self.endpoint.base_url
                key = os.environ.get(self.endpoint.api_key_env or "", "") or "not-needed"
            # Retries are ours (backoff, jitter, Retry-After, request ids), not the SDK's.
            self._openai = openai.OpenAI(base_url=base_url, api_key=key, max_retries=0,
                                         timeout=self.endpoint.timeout_s)
        return self._openai

    # -- one call

    def _build(self, messages, max_tokens, temperature, seed, response_format, stop, extra):
        req = canonical_request(self.model_id, messages, max_tokens=max_tokens, temperature=temperature,
                                seed=seed, response_format=response_format, stop=stop, extra=extra)
        return req, request_key(req)

    def complete(self, messages: list[dict], *, max_tokens: int, temperature: float = 0.0,
                 seed: int | None = 0, response_format: dict | None = None,
                 stop: list[str] | None = None, extra: dict | None = None) -> Completion:
        req, key = self._build(messages, max_tokens, temperature, seed, response_format, stop, extra)
        return self._complete(req, key)

    def _complete(self, req: dict, key: str) -> Completion:
        def send() -> Completion:
            self._check_cap(req)
            return self._send(req, key)

        last = (req["messages"][-1]["content"] if req["messages"] else "")[:80]
        return memoized(key, send, role=self.endpoint.role, model=self.model,
                        describe=f"role {self.endpoint.role}, model {self.model}, last message {last!r}")

    def _check_cap(self, req: dict) -> None:
        cap = _settings.get("spend_cap_usd")
        if cap is None and os.environ.get("MEMLIFE_SPEND_CAP_USD"):
            cap = float(os.environ["MEMLIFE_SPEND_CAP_USD"])
        if cap is None:
            return
        from . import tokens

        worst = price_usd(self.model, tokens.count_messages(req["messages"]), req["max_tokens"]) or 0.0
        with self._spend_lock:
            spent = usage().usd_estimate
            if spent + worst > cap:
                raise SpendingCapExceeded(
                    f"spending cap ${cap:.2f}: ${spent:.4f} spent, the next call could cost up to "
                    f"${worst:.4f}; raise MEMLIFE_SPEND_CAP_USD or spend_cap_usd to continue")

    def _send(self, req: dict, key: str) -> Completion:
        import openai

        kwargs: dict[str, Any] = {"model": self.model, "messages": req["messages"],
                                  "max_tokens": req["max_tokens"], "temperature": req["temperature"]}
        if req["seed"] is not None:
            kwargs["seed"] = req["seed"]
        if req["stop"]:
            kwargs["stop"] = req["stop"]
        if req["response_format"] is not None:
            kwargs["response_format"] = req["response_format"]
        if req["extra"]:
            kwargs["extra_body"] = req["extra"]
        last_exc: Exception | None = None
        for attempt in range(self.endpoint.max_retries + 1):
            t0 = time.perf_counter()
            try:
                resp = self._client().chat.completions.create(**kwargs)
                choice = resp.choices[0]
                text = choice.message.content
                if text is None:
                    raise LLMCallError(f"request {key[:16]}: reply has no message content")
                u = resp.usage
                return Completion(text=text, prompt_tokens=getattr(u, "prompt_tokens", 0) or 0,
                                  completion_tokens=getattr(u, "completion_tokens", 0) or 0,
                                  cached=False, latency_s=time.perf_counter() - t0, request_id=key,
                                  model=self.model, finish_reason=choice.finish_reason)
            except openai.APIStatusError as exc:
                if exc.status_code not in _RETRYABLE_STATUS:
                    raise LLMCallError(f"request {key[:16]} (role {self.endpoint.role}, model "
                                       f"{self.model}): HTTP {exc.status_code}: {exc.message}") from exc
                last_exc = exc
            except (openai.APITimeoutError, openai.APIConnectionError, openai.APIResponseValidationError,
                    ValueError, AttributeError, IndexError, TypeError) as exc:
                last_exc = exc  # timeouts, dropped connections, truncated or malformed bodies
                if self.is_embedded and isinstance(exc, openai.APIConnectionError):
                    self._openai = None  # the shared server may have stopped: find or start one again
            if attempt == self.endpoint.max_retries:
                break
            wait = _retry_after_s(last_exc)
            if wait is None:
                wait = min(60.0, 0.5 * 2**attempt) * (0.5 + random.random())  # full jitter
            time.sleep(min(wait, 120.0))
        raise LLMCallError(f"request {key[:16]} (role {self.endpoint.role}, model {self.model}) failed "
                           f"after {self.endpoint.max_retries + 1} attempts: "
                           f"{type(last_exc).__name__}: {last_exc}") from last_exc

    # -- many calls

    def complete_many(self, requests: Iterable[dict], *, desc: str | None = None,
                      concurrency: int | None = None, progress: bool = True) -> list[Completion]:
        """Run requests (each the kwargs of `complete`) with bounded concurrency, in input order.

        Identical requests are sent once. With one worker the order given is the order sent,
        so callers put requests sharing a long prefix next to each other. The first call that
        fails for good (after its retries) raises at once, as does an interrupt: requests not yet
        sent are cancelled, and a rerun finds the replies already received in the cache.
        """
        from .progress import bar as progress_bar

        built = []
        for r in requests:
            r = dict(r)
            built.append(self._build(r.pop("messages"), r.pop("max_tokens"), r.pop("temperature", 0.0),
                                     r.pop("seed", 0), r.pop("response_format", None), r.pop("stop", None),
                                     r.pop("extra", None)))
            if r:
                raise TypeError(f"complete_many: unknown request fields {sorted(r)}")
        unique: dict[str, dict] = {}
        for req, key in built:
            unique.setdefault(key, req)
        results: dict[str, Completion] = {}
        workers = max(1, concurrency or self.endpoint.concurrency)
        bar = progress_bar(total=len(unique), desc=desc or f"{self.endpoint.role} calls", disable=not progress)
        try:
            if workers == 1:
                for key, req in unique.items():
                    results[key] = self._complete(req, key)
                    bar.update()
            else:
                pool = ThreadPoolExecutor(max_workers=workers)
                try:
                    futs = {pool.submit(self._complete, req, key): key for key, req in unique.items()}
                    for fut in as_completed(futs):
                        results[futs[fut]] = fut.result()
                        bar.update()
                finally:
                    # A hard failure or an interrupt: the requests still queued are never sent
                    # (those in flight finish, and their replies are cached for the rerun).
                    pool.shutdown(wait=True, cancel_futures=True)
        finally:
            bar.close()
        return [results[key] for _, key in built]

    # -- structured output

    def complete_json(self, messages: list[dict], *, schema, max_tokens: int, grammar_schema: dict | None = None,
                      **kw):
        """(schema instance, Completion); the instance is None when the reply does not parse.

        `grammar_schema` replaces the JSON schema sent as response_format (e.g. a tighter one
        that bounds string lengths for a small model); the reply is still parsed with `schema`.
        """
        if self.endpoint.structured_output:
            kw["response_format"] = json_schema_format(schema, grammar_schema)
        c = self.complete(messages, max_tokens=max_tokens, **kw)
        obj, err = parse_json(c.text, schema)
        c.error = err
        return obj, c


_clients: dict[str, Client] = {}
_clients_lock = threading.Lock()


def get_client(role: str) -> Client:
    with _clients_lock:
        ep = endpoint_for(role)
        cur = _clients.get(role)
        if cur is None or cur.endpoint != ep:
            cur = _clients[role] = Client(ep)
        return cur


# --------------------------------------------------------------------------- strict parsing


def json_schema_format(schema, json_schema: dict | None = None) -> dict:
    return {"type": "json_schema",
            "json_schema": {"name": schema.__name__, "schema": json_schema or schema.model_json_schema(),
                            "strict": True}}


_FENCE = re.compile(r"^```(?:json)?\s*\n(.*)\n```$", re.S)


def parse_json(text: str, schema):
    """Strict: the reply is the JSON object (a single ```json fence is tolerated), nothing else."""
    from pydantic import ValidationError

    body = text.strip()
    m = _FENCE.match(body)
    if m:
        body = m.group(1).strip()
    try:
        return schema.model_validate_json(body), None
    except ValidationError as exc:
        return None, f"reply does not match {schema.__name__}: {exc.errors()[0]['msg']}"


LABELS = ("CORRECT", "INCORRECT")


def parse_label(text: str, labels: tuple[str, ...] = LABELS) -> str | None:
    """The label when the reply is exactly one of `labels` (case, surrounding whitespace, quotes,
    asterisks and one final period aside); None — an invalid judgement — for anything else.
    Never substring matching: 'INCORRECT' contains 'CORRECT'."""
    t = text.strip().strip("*\"'`").strip()
    if t.endswith("."):
        t = t[:-1].rstrip()
    t = t.upper()
    return t if t in labels else None
