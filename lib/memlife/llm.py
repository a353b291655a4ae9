"""The one client for every model call in memlife.

- Configuration: an endpoint (base URL, model) per role — reader, judge, generator, scorer,
  verifier, judge_audit (the restore paper's second judge, re-grading a sample) — from the profile's ``models:`` section and environment variables
  (``MEMLIFE_<ROLE>_BASE_URL`` / ``MEMLIFE_<ROLE>_MODEL``, or ``MEMLIFE_BASE_URL`` /
  ``MEMLIFE_MODEL`` for all roles). The key comes from the environment only and is never stored.
  With nothing configured every role uses the embedded llama-server (``memlife.serve``).
- Cache: every reply is stored on disk (diskcache, SQLite: safe for concurrent writers and
  atomic under SIGKILL) under the SHA-256 of the canonical request. A recording of replies
  (``memlife.replies``: MEMLIFE_REPLIES, or the profile's ``recorded_replies``) is consulted
  first, so a run rests on the same replies on every machine. An entry that cannot be read is
  moved aside (``damaged_dir``), said, and asked again; replay mode stops, naming it. ``MEMLIFE_LLM_MODE=replay``
  answers only from the recording and the cache and fails on a miss; ``refresh`` ignores both;
  ``estimate`` answers a miss with a stand-in reply (``memlife.standin``), sends and caches
  nothing, and logs what the call would cost (``make estimate``, ``memlife.estimate``).
- Every number a user sets (a cap, prices, windows, timeouts, retries, concurrency, rates) is
  parsed by one function per kind (``parse_usd``, ``parse_seconds``, ``parse_count``,
  ``parse_price_pair``) that names the variable or profile field and checks its range.
- What an endpoint accepts (``memlife.api_rules``): per role its context window, token
  parameter, whether temperature and seed are sent, room for reasoning, extra body fields, price
  and rate budget (``Endpoint``); OpenAI's reasoning models get their parameters by name.
- Robustness: bounded concurrency; retries with exponential backoff and jitter on 429, 5xx,
  timeouts, connection errors and malformed bodies, honouring Retry-After and the x-ratelimit-*
  headers. A call that still fails raises ``LLMCallError`` naming the request id. Failures are
  never cached; a refusal is a reply, cached and counted.
- Accounting: every call (cached or not) is appended to ``results/<profile>/usage/<run>.calls.jsonl``;
  ``summarize_calls`` aggregates; a spending cap (``memlife.spending``) holds for the whole run,
  across processes: a call is sent only after its worst case is reserved under the cap.
"""
from __future__ import annotations

import hashlib
import json
import math
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
MODES = ("live", "replay", "refresh", "estimate")
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

    def __init__(self, message: str, *, status: int | None = None):
        super().__init__(message)
        self.status = status  # the HTTP status that ended it, if one did


class ContextWindowExceeded(LLMCallError):
    """The prompt and its completion budget do not fit the endpoint's context window."""


class CacheMiss(LLMError):
    """Replay mode found no cached reply for a request."""


class SpendingCapExceeded(LLMError):
    pass


class UnpricedModel(LLMError):
    """A spending cap is set and the model has no price: the cap could never trip."""


class DamagedCacheEntry(LLMError):
    """A cached reply that cannot be read, in replay mode (which may not ask again)."""


# --------------------------------------------------------------------------- the numbers a user sets
#
# One parser per kind of number, each naming where the value came from (an environment variable,
# or a profile field) and checking its range: a cap of nan or inf would never trip, a negative one
# refuses everything, and -1 retries sends nothing at all.


def _number(where: str, value, kind: str) -> float:
    if isinstance(value, bool):  # YAML's yes/no: a number was meant
        raise LLMError(f"{where}={value!r} is not {kind}")
    try:
        x = float(str(value).strip()) if isinstance(value, str) else float(value)
    except (TypeError, ValueError):
        raise LLMError(f"{where}={value!r} is not {kind}") from None
    if not math.isfinite(x):
        raise LLMError(f"{where}={value!r} is not {kind}: it must be a finite number")
    return x


def parse_usd(where: str, value) -> float:
    """US dollars: a finite number >= 0 (a spending cap, a price)."""
    x = _number(where, value, "a number of US dollars")
    if x < 0:
        raise LLMError(f"{where}={value!r}: US dollars cannot be negative")
    return x


def parse_seconds(where: str, value) -> float:
    """A duration in seconds: finite and > 0."""
    x = _number(where, value, "a number of seconds")
    if x <= 0:
        raise LLMError(f"{where}={value!r}: seconds must be more than 0")
    return x


def parse_count(where: str, value, *, minimum: int, unit: str = "") -> int:
    """A whole number >= `minimum` (retries 0, concurrency and windows 1); '32k' is refused, not guessed."""
    kind = f"a whole number{' of ' + unit if unit else ''}"
    x = _number(where, value, kind)
    if x != int(x):
        raise LLMError(f"{where}={value!r} is not {kind}")
    if x < minimum:
        raise LLMError(f"{where}={value!r}: must be at least {minimum}")
    return int(x)


def parse_price_pair(where: str, value) -> tuple[float, float]:
    """USD per million tokens, 'input,output' (or a two-item list)."""
    parts = value.split(",") if isinstance(value, str) else value
    try:
        if not isinstance(parts, (list, tuple)) or len(parts) != 2:
            raise LLMError("not two numbers")
        return parse_usd(where, parts[0]), parse_usd(where, parts[1])
    except LLMError:
        raise LLMError(f"{where}={value!r}; expected 'input,output', two finite numbers >= 0 in USD per million "
                       "tokens, e.g. 0.15,0.60 (0,0 for a self-hosted model)") from None


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
    # What the endpoint accepts (api_rules): a reasoning model takes max_completion_tokens, only
    # its default temperature, and a budget that also pays for its hidden reasoning.
    context_window: int | None = None  # prompt + completion tokens; None: not known yet
    token_param: str = "max_tokens"  # or "max_completion_tokens"
    send_temperature: bool = True
    send_seed: bool = True
    reasoning_tokens: int = 0  # added to every call's completion budget
    extra_body: str = ""  # a JSON object merged into every request body, e.g. {"reasoning_effort": "low"}
    price_per_mtok: tuple[float, float] | None = None  # USD (input, output); None: PRICES_PER_MTOK
    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None

    @property
    def is_embedded(self) -> bool:
        return self.base_url is None

    def wire(self) -> dict | None:
        """How this endpoint's requests differ on the wire from the plain chat request; part of
        every cache key, so a reply given under other parameters is never reused. None (the
        embedded model's case) leaves the key as it always was."""
        w: dict[str, Any] = {}
        if self.token_param != "max_tokens":
            w["token_param"] = self.token_param
        if not self.send_temperature:
            w["temperature"] = "endpoint default"
        if not self.send_seed:
            w["seed"] = "not sent"
        if self.reasoning_tokens:
            w["reasoning_tokens"] = self.reasoning_tokens
        return w or None

    def extra(self) -> dict:
        return json.loads(self.extra_body) if self.extra_body else {}


_settings: dict[str, Any] = {"models": {}, "run": None, "spend_cap_usd": None, "replies": None, "profile": None}


def configure(profile: str | None = None, *, run: str | None = None, track: str | None = None,
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
        cfg_models = dict(cfg.get("models") or {})
        # A track's own models (the two papers name different ones for the same role) over the
        # profile's; the track is the notebook's (its number) unless named.
        track = track or config.track_of(run or run_name())
        for role, ep in (((cfg.get("tracks") or {}).get(track) or {}).get("models") or {}).items():
            cfg_models[role] = {**(cfg_models.get(role) or {}), **ep}
        cap = cfg.get("spend_cap_usd")
        if cfg.get("recorded_replies"):
            recorded = paths.repo_root() / cfg["recorded_replies"]
    _settings["models"] = {**cfg_models, **(models or {})}
    _settings["replies"] = recorded
    _settings["profile"] = profile
    # The environment wins over the profile, as everywhere else; an explicit argument over both.
    env_cap = os.environ.get("MEMLIFE_SPEND_CAP_USD")
    if spend_cap_usd is not None:
        _settings["spend_cap_usd"] = parse_usd("spend_cap_usd", spend_cap_usd)
    elif env_cap:
        _settings["spend_cap_usd"] = parse_usd("MEMLIFE_SPEND_CAP_USD", env_cap)
    else:
        _settings["spend_cap_usd"] = None if cap is None else parse_usd(f"configs/{profile}.yaml spend_cap_usd", cap)
    if run is not None:
        _settings["run"] = run
    _clients.clear()


def spend_cap_usd() -> float | None:
    return _settings.get("spend_cap_usd")


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
        structured = _flag(role, "STRUCTURED", os.environ[f"MEMLIFE_{role.upper()}_STRUCTURED"])
    common = {"timeout_s": parse_seconds(*_sourced(role, prof, "timeout_s", 600)),
              "max_retries": parse_count(*_sourced(role, prof, "max_retries", 5), minimum=0, unit="retries"),
              "concurrency": parse_count(*_sourced(role, prof, "concurrency", 1 if base_url is None else 8),
                                         minimum=1, unit="requests at a time")}
    if base_url is None:
        return Endpoint(role=role, model=model, structured_output=bool(structured), **common)
    return Endpoint(role=role, model=model, base_url=base_url, api_key_env=key_env,
                    structured_output=bool(structured), **common, **_capabilities(role, model, prof))


# The fields a profile's models.<role> may set: Endpoint's, less the two that are not settings
# (the role is the section's name; the key comes from the environment only).
ENDPOINT_FIELDS = tuple(f for f in Endpoint.__dataclass_fields__ if f not in ("role", "api_key_env"))


def _sourced(role: str, prof: dict, name: str, default=None) -> tuple[str, Any]:
    """(where, value) of a setting: MEMLIFE_<ROLE>_<NAME>, then MEMLIFE_<NAME>, then the profile's
    models.<role>.<name>, then `default`; `where` names the one that gave it, for error messages."""
    for var in (f"MEMLIFE_{role.upper()}_{name.upper()}", f"MEMLIFE_{name.upper()}"):
        if os.environ.get(var):
            return var, os.environ[var]
    if prof.get(name) not in (None, ""):
        return f"models.{role}.{name}", prof[name]
    return f"models.{role}.{name}", default


def _setting(role: str, prof: dict, name: str):
    """MEMLIFE_<ROLE>_<NAME>, then MEMLIFE_<NAME>, then the profile's models.<role>.<name>."""
    value = _env(role, name.upper())
    return value if value is not None else prof.get(name)


def _flag(role: str, name: str, value) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise LLMError(f"role {role!r}: {name}={value!r} is not a yes/no value (1/0, true/false)")


def _capabilities(role: str, model: str, prof: dict) -> dict:
    """The request parameters an endpoint takes, from the environment or profile, else from the
    model's name: OpenAI's reasoning models get max_completion_tokens, no temperature and room for
    reasoning without any setting."""
    from . import api_rules

    reasoning = api_rules.is_reasoning_model(model)
    out: dict[str, Any] = {}
    where, window = _sourced(role, prof, "context_window")
    out["context_window"] = (api_rules.known_context_window(model) if window is None
                             else parse_count(where, window, minimum=1, unit="tokens"))
    token_param = _setting(role, prof, "token_param") or ("max_completion_tokens" if reasoning else "max_tokens")
    if token_param not in ("max_tokens", "max_completion_tokens"):
        raise LLMError(f"role {role!r}: token_param={token_param!r}; expected max_tokens or max_completion_tokens")
    out["token_param"] = token_param
    temp = _setting(role, prof, "send_temperature")
    out["send_temperature"] = (not reasoning) if temp in (None, "") else _flag(role, "send_temperature", temp)
    seed = _setting(role, prof, "send_seed")
    out["send_seed"] = True if seed in (None, "") else _flag(role, "send_seed", seed)
    where, rt = _sourced(role, prof, "reasoning_tokens")
    out["reasoning_tokens"] = ((api_rules.DEFAULT_REASONING_TOKENS if reasoning else 0) if rt is None
                               else parse_count(where, rt, minimum=0, unit="tokens"))
    body = _setting(role, prof, "extra_body")
    if isinstance(body, str) and body.strip():
        try:
            body = json.loads(body)
        except ValueError as exc:
            raise LLMError(f"role {role!r}: extra_body is not JSON ({exc})") from None
    if body and not isinstance(body, dict):
        raise LLMError(f"role {role!r}: extra_body must be a JSON object, got {body!r}")
    if body and {"model", "messages"} & set(body):
        raise LLMError(f"role {role!r}: extra_body may not set model or messages")
    out["extra_body"] = json.dumps(body, sort_keys=True) if body else ""
    where, price = _sourced(role, prof, "price_per_mtok")
    if price is not None:
        out["price_per_mtok"] = parse_price_pair(where, price)
    for name in ("requests_per_minute", "tokens_per_minute"):
        where, v = _sourced(role, prof, name)
        out[name] = None if v is None else parse_count(where, v, minimum=1, unit=name.split("_")[0])
    return out


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
    refusal: str | None = None  # the model declined (OpenAI's message.refusal); text is then ""


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
    if mode() == "replay":
        raise DamagedCacheEntry(f"{where}; replay mode cannot ask again: rerun in live mode (the entry is then "
                                f"moved aside to {damaged_dir()} and asked again), or restore the cache")
    kept = _move_aside(cache, key)
    from . import progress

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


def memoized(key: str, compute: Callable[[], Completion], *, role: str, model: str, describe: str,
             price: Callable[[int, int], float | None] | None = None, request: dict | None = None,
             budget: int | None = None) -> Completion:
    """The reply recorded or cached under `key`, or `compute()`'s, cached; accounted under `role`.

    The one path of every model call — the endpoint clients' and a local model's own generations
    (Temp-LoRA) — so that all obey MEMLIFE_LLM_MODE (replay fails on a miss naming `describe`,
    refresh ignores hits), and all are counted. The active recording comes before the cache: its
    replies are the ones a shared result rests on, whatever this machine's model would say. A
    failed call raises and caches nothing; a refusal or an empty reply is the model's answer and
    is cached like any other (and said, once per role and process).
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
                           source=source, refusal=hit.get("refusal"))
            _account(role, c, price)
            return c
    if m == "replay":
        raise CacheMiss(f"replay mode: no recorded or cached reply for request {key[:16]} ({describe})")
    if m == "estimate":
        # A request asked again in the same run (notebook 10 builds twice to check determinism;
        # two systems may ask the same) would come from the cache then: counted as cached here.
        seen = _estimates_seen()
        again = seen.get(key) if seen is not None else None
        c = _estimated(key, model, request, budget)
        if again is not None:
            c.cached, c.source = True, "cache"
        elif seen is not None:
            seen.set(key, True)
        _account(role, c, price)
        return c
    c = compute()
    # Where the reply was made travels with it, into any recording exported from this cache.
    value = {"text": c.text, "prompt_tokens": c.prompt_tokens, "completion_tokens": c.completion_tokens,
             "finish_reason": c.finish_reason, "provenance": replies.provenance(model)}
    if c.refusal is not None:
        value["refusal"] = c.refusal
    cache_put(key, value)
    c.source = "live"
    _account(role, c, price)
    return c


ESTIMATE_SEEN_ENV = "MEMLIFE_ESTIMATE_SEEN"
_seen_obj = None


def _estimates_seen():
    """The keys an estimate run has counted, on disk for all its notebooks (memlife.estimate
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


def _estimated(key: str, model: str, request: dict | None, budget: int | None) -> Completion:
    """What `make estimate` counts for a call the run would send: its prompt (o200k tokens), its
    whole completion budget (the worst case, as the spending ledger reserves it), and a stand-in
    reply so that the notebook goes on as a run would."""
    from . import standin, tokens

    messages = (request or {}).get("messages") or []
    text = standin.reply_text(messages, (request or {}).get("response_format")) if request else ""
    return Completion(text=text, prompt_tokens=tokens.count_messages(messages) if messages else 0,
                      completion_tokens=int(budget if budget is not None else (request or {}).get("max_tokens", 0)),
                      cached=False, latency_s=0.0, request_id=key, model=model, finish_reason="stop",
                      source="estimate")


_said: set[tuple[str, str]] = set()


def _say_once(role: str, kind: str, message: str) -> None:
    if (role, kind) in _said:
        return
    _said.add((role, kind))
    from . import progress

    progress.notice(message)


@dataclass
class Usage:
    calls: int = 0
    cached_calls: int = 0  # answered without a model call: from the cache or a recording
    recorded_calls: int = 0  # of those, from the recording of replies
    prompt_tokens: int = 0
    completion_tokens: int = 0
    usd_estimate: float = 0.0
    unpriced_models: list[str] = field(default_factory=list)
    refusals: int = 0
    empty_replies: int = 0  # no text and no refusal, e.g. a reasoning model out of budget


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


def usage_dir() -> Path:
    """Where this process logs its calls: the configured profile's usage folder, else the ad hoc one."""
    profile = _settings.get("profile")
    return paths.layout(profile).usage if profile else paths.adhoc_usage()


def _log_call(rec: dict) -> None:
    d = usage_dir()
    d.mkdir(parents=True, exist_ok=True)
    line = json.dumps(rec, sort_keys=True) + "\n"
    # One write() on an O_APPEND descriptor: lines from concurrent processes never interleave.
    fd = os.open(d / f"{run_name()}.calls.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def _account(role: str, c: Completion, price: Callable[[int, int], float | None] | None = None) -> None:
    if c.cached:
        usd = 0.0
    elif price is not None:
        usd = price(c.prompt_tokens, c.completion_tokens)
    else:
        usd = price_usd(c.model, c.prompt_tokens, c.completion_tokens)
    empty = c.source != "estimate" and c.refusal is None and not (c.text or "").strip()
    with _usage_lock:
        _usage.calls += 1
        _usage.cached_calls += int(c.cached)
        _usage.recorded_calls += int(c.source == "recorded")
        _usage.prompt_tokens += c.prompt_tokens
        _usage.completion_tokens += c.completion_tokens
        _usage.refusals += int(c.refusal is not None)
        _usage.empty_replies += int(empty)
        if usd is None:
            if c.model not in _usage.unpriced_models:
                _usage.unpriced_models.append(c.model)
        else:
            _usage.usd_estimate += usd
    rec = {"role": role, "model": c.model, "request_id": c.request_id, "cached": c.cached,
           "source": c.source, "prompt_tokens": c.prompt_tokens, "completion_tokens": c.completion_tokens,
           "latency_s": round(c.latency_s, 4), "usd": usd}
    if c.refusal is not None:
        rec["refusal"] = True
        _say_once(role, "refusal", f"role {role} ({c.model}) refused a request ({c.request_id[:16]}): "
                                   f"{c.refusal[:120]!r}; refusals are recorded as such and counted in the run's usage log")
    if empty:
        rec["empty"] = True
        hint = (f"; if it is a reasoning model, its reasoning used the whole budget: raise "
                f"MEMLIFE_{role.upper()}_REASONING_TOKENS") if c.finish_reason == "length" else ""
        _say_once(role, "empty", f"role {role} ({c.model}) returned an empty reply (finish_reason "
                                 f"{c.finish_reason}, request {c.request_id[:16]}){hint}")
    _log_call(rec)


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
           "usd_estimate": 0.0, "unpriced_models": [], "latency_s": 0.0, "refusals": 0, "empty_replies": 0,
           "by_role": {}}
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
            out["refusals"] += int(bool(r.get("refusal")))
            out["empty_replies"] += int(bool(r.get("empty")))
            role = out["by_role"].setdefault(r["role"], {"calls": 0, "cached_calls": 0, "live_calls": 0,
                                                         "prompt_tokens": 0, "completion_tokens": 0, "usd": 0.0,
                                                         "models": []})
            role["calls"] += 1
            role["cached_calls"] += int(r["cached"])
            role["live_calls"] += int(not r["cached"])
            if not r["cached"]:  # what was (or, estimated, would be) sent
                role["prompt_tokens"] += r["prompt_tokens"]
                role["completion_tokens"] += r["completion_tokens"]
            role["usd"] = round(role["usd"] + (r["usd"] or 0.0), 6)
            if r["model"] not in role["models"]:
                role["models"].append(r["model"])
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


def unpriced_message(role: str, model: str) -> str:
    return (f"role {role}: model {model!r} has no price, so a spending cap could never stop it; give its price "
            f"as MEMLIFE_{role.upper()}_PRICE_PER_MTOK='input,output' (US dollars per million tokens; 0,0 "
            f"for a self-hosted model) or models.{role}.price_per_mtok in the profile")


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")


def _duration_s(text: str) -> float | None:
    """OpenAI's x-ratelimit-reset-* values: '1s', '6m0s', '20ms', '1h2m3.5s'."""
    parts = _DURATION.findall(text or "")
    if not parts or "".join(n + u for n, u in parts) != text.strip():
        return None
    scale = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    return sum(float(n) * scale[u] for n, u in parts)


class RateLimiter:
    """Requests and tokens per minute for one endpoint, shared by its worker threads: a configured
    budget (a sliding minute), and the endpoint's own x-ratelimit-* headers (when one says nothing
    remains, every thread waits for its reset instead of collecting 429s)."""

    def __init__(self, requests_per_minute: int | None = None, tokens_per_minute: int | None = None):
        from collections import deque

        self.rpm, self.tpm = requests_per_minute, tokens_per_minute
        self._lock = threading.Lock()
        self._sent: "deque[tuple[float, int]]" = deque()
        self._blocked_until = 0.0

    def wait(self, tokens: int) -> None:
        while True:
            with self._lock:
                now = time.monotonic()
                while self._sent and now - self._sent[0][0] >= 60.0:
                    self._sent.popleft()
                delay = self._blocked_until - now
                if self._sent:
                    oldest = 60.0 - (now - self._sent[0][0])
                    if self.rpm and len(self._sent) >= self.rpm:
                        delay = max(delay, oldest)
                    if self.tpm and sum(t for _, t in self._sent) + tokens > self.tpm:
                        delay = max(delay, oldest)
                if delay <= 0:
                    if self.rpm or self.tpm:
                        self._sent.append((now, int(tokens)))
                    return
            time.sleep(min(delay, 5.0))

    def observe(self, headers) -> None:
        if not headers:
            return
        for kind in ("requests", "tokens"):
            remaining, reset = headers.get(f"x-ratelimit-remaining-{kind}"), headers.get(f"x-ratelimit-reset-{kind}")
            if remaining is None or reset is None:
                continue
            try:
                left = float(remaining)
            except ValueError:
                continue
            wait = _duration_s(reset)
            if left <= 0 and wait:
                with self._lock:
                    self._blocked_until = max(self._blocked_until, time.monotonic() + min(wait, 120.0))


class Client:
    def __init__(self, endpoint: Endpoint):
        self.endpoint = endpoint
        self._openai = None
        self._window: int | None = None
        self._window_lock = threading.Lock()
        self._limiter = RateLimiter(endpoint.requests_per_minute, endpoint.tokens_per_minute)

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

    def price_usd(self, prompt_tokens: int, completion_tokens: int) -> float | None:
        """Cost of one uncached call: the endpoint's configured price, else the list price."""
        if self.endpoint.price_per_mtok is not None:
            pin, pout = self.endpoint.price_per_mtok
            return (prompt_tokens * pin + completion_tokens * pout) / 1e6
        return price_usd(self.model, prompt_tokens, completion_tokens)

    def context_window(self) -> int:
        """Tokens of prompt plus completion this endpoint takes: configured, listed for the model
        (api_rules), or reported by the server (vLLM's /v1/models gives max_model_len). Unknown
        is an error, never a guess: a guessed 128k sends a 32k model prompts it rejects (vLLM) or
        silently truncates (Ollama)."""
        if self.is_embedded:
            from . import serve

            return serve.CONTEXT_WINDOW
        if self.endpoint.context_window:
            return self.endpoint.context_window
        with self._window_lock:
            if self._window is None:
                self._window = self._reported_window()
            if self._window is None:
                role = self.endpoint.role.upper()
                raise LLMError(
                    f"role {self.endpoint.role}: the context window of model {self.model!r} is not known and the "
                    f"server does not report it; set MEMLIFE_{role}_CONTEXT_WINDOW (or models."
                    f"{self.endpoint.role}.context_window) to its tokens, e.g. 32768 (README, 'Backends')")
            return self._window

    def _reported_window(self) -> int | None:
        def window_of(m) -> int | None:
            extra = getattr(m, "model_extra", None) or {}
            for name in ("max_model_len", "context_length", "context_window"):
                if isinstance(extra.get(name), int) and extra[name] > 0:
                    return int(extra[name])
            return None

        import openai

        def unreachable(exc: Exception) -> LLMError:
            return LLMError(f"role {self.endpoint.role}: cannot reach {self.endpoint.base_url} to ask the context "
                            f"window of model {self.model!r} ({type(exc).__name__}: {exc}); is the server up and "
                            f"the URL right? (MEMLIFE_{self.endpoint.role.upper()}_BASE_URL or models."
                            f"{self.endpoint.role}.base_url)")

        # vLLM lists max_model_len; other servers may give it for the one model only.
        try:
            for m in getattr(self._client().models.list(), "data", None) or []:
                if getattr(m, "id", None) == self.model and window_of(m):
                    return window_of(m)
        except openai.APIConnectionError as exc:  # timeouts included: no answer at all, said as such
            raise unreachable(exc) from None
        except Exception:  # a server without /models, or one that refuses it
            pass
        try:
            return window_of(self._client().models.retrieve(self.model))
        except openai.APIConnectionError as exc:
            raise unreachable(exc) from None
        except Exception:
            return None

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
        merged = {**self.endpoint.extra(), **(extra or {})} or None
        req = canonical_request(self.model_id, messages, max_tokens=max_tokens, temperature=temperature,
                                seed=seed, response_format=response_format, stop=stop, extra=merged,
                                wire=self.endpoint.wire())
        return req, request_key(req)

    def completion_budget(self, max_tokens: int) -> int:
        """Completion tokens asked of the endpoint: the reply's own budget plus room to reason."""
        return int(max_tokens) + self.endpoint.reasoning_tokens

    def complete(self, messages: list[dict], *, max_tokens: int, temperature: float = 0.0,
                 seed: int | None = 0, response_format: dict | None = None,
                 stop: list[str] | None = None, extra: dict | None = None) -> Completion:
        req, key = self._build(messages, max_tokens, temperature, seed, response_format, stop, extra)
        return self._complete(req, key)

    def _complete(self, req: dict, key: str) -> Completion:
        def send() -> Completion:
            return self._send_within_cap(req, key)

        last = (req["messages"][-1]["content"] if req["messages"] else "")[:80]
        return memoized(key, send, role=self.endpoint.role, model=self.model, price=self.price_usd,
                        describe=f"role {self.endpoint.role}, model {self.model}, last message {last!r}",
                        request=req, budget=self.completion_budget(req["max_tokens"]))

    def _send_within_cap(self, req: dict, key: str) -> Completion:
        """Check the window, reserve the call's worst case in the run's ledger, send, settle."""
        from . import spending, tokens

        budget = self.completion_budget(req["max_tokens"])
        prompt = tokens.count_messages(req["messages"]) if not self.is_embedded else 0
        if not self.is_embedded:
            window = self.context_window()
            if prompt + budget > window:
                raise ContextWindowExceeded(
                    f"request {key[:16]} (role {self.endpoint.role}, model {self.model}): the prompt "
                    f"(~{prompt} tokens) and the completion budget ({budget}) exceed the context window "
                    f"({window}); give the role a model with a larger window, or tell memlife its real window "
                    f"(MEMLIFE_{self.endpoint.role.upper()}_CONTEXT_WINDOW)")
        cap = spend_cap_usd()
        reservation = None
        if cap is not None:
            worst = self.price_usd(prompt, budget)
            if worst is None:
                raise UnpricedModel(unpriced_message(self.endpoint.role, self.model))
            if worst > 0:
                try:
                    reservation = spending.reserve(worst, cap, role=self.endpoint.role, model=self.model)
                except spending.CapReached as exc:
                    raise SpendingCapExceeded(
                        f"spending cap ${cap:.2f} for this run: {exc}; raise MEMLIFE_SPEND_CAP_USD to "
                        "continue (replies already received are cached: a rerun does not pay for them again)"
                    ) from None
        self._limiter.wait(prompt + budget)
        try:
            c = self._send(req, key)
        except LLMCallError as exc:
            if reservation is not None:
                # A request the endpoint rejected (4xx) is not billed; anything else may have been.
                rejected = exc.status is not None and 400 <= exc.status < 500 and exc.status not in (408, 409, 429)
                spending.settle(reservation, 0.0 if rejected else worst)
            raise
        except BaseException:
            if reservation is not None:
                spending.settle(reservation, worst)
            raise
        if reservation is not None:
            spending.settle(reservation, self.price_usd(c.prompt_tokens, c.completion_tokens) or 0.0)
        if not self.is_embedded and prompt > 2000 and c.prompt_tokens and c.prompt_tokens < 0.5 * prompt:
            _say_once(self.endpoint.role, "truncated",
                      f"role {self.endpoint.role} ({self.model}): the endpoint counted {c.prompt_tokens} prompt tokens "
                      f"for a prompt of ~{prompt}; it may be truncating silently (Ollama: set the model's context "
                      f"length, README 'Backends'), and MEMLIFE_{self.endpoint.role.upper()}_CONTEXT_WINDOW to match")
        return c

    def _kwargs(self, req: dict) -> dict[str, Any]:
        """The request as this endpoint takes it (Endpoint.wire)."""
        ep = self.endpoint
        kwargs: dict[str, Any] = {"model": self.model, "messages": req["messages"],
                                  ep.token_param: self.completion_budget(req["max_tokens"])}
        if ep.send_temperature:
            kwargs["temperature"] = req["temperature"]
        if req["seed"] is not None and ep.send_seed:
            kwargs["seed"] = req["seed"]
        if req["stop"]:
            kwargs["stop"] = req["stop"]
        if req["response_format"] is not None:
            kwargs["response_format"] = req["response_format"]
        if req["extra"]:
            kwargs["extra_body"] = req["extra"]
        return kwargs

    def _send(self, req: dict, key: str) -> Completion:
        import openai

        kwargs = self._kwargs(req)
        last_exc: Exception | None = None
        for attempt in range(self.endpoint.max_retries + 1):
            t0 = time.perf_counter()
            try:
                raw = self._client().chat.completions.with_raw_response.create(**kwargs)
                self._limiter.observe(raw.headers)
                resp = raw.parse()
                if not hasattr(resp, "choices"):
                    # An HTML page with status 200: a URL that is not the API (a missing /v1, a
                    # login portal). Asking again gets the same page.
                    ctype = raw.headers.get("content-type", "?")
                    raise LLMCallError(f"request {key[:16]} (role {self.endpoint.role}, model {self.model}): the "
                                       f"endpoint {self.endpoint.base_url or 'embedded'} answered with {ctype}, not a "
                                       f"chat completion: {str(resp)[:120]!r}; is the base URL the API's (it "
                                       f"usually ends in /v1)?", status=raw.status_code)
                choice = resp.choices[0]
                refusal = getattr(choice.message, "refusal", None)
                text = choice.message.content
                if text is None and refusal is None and choice.finish_reason not in ("length", "content_filter"):
                    raise ValueError("reply has neither content nor refusal")
                u = resp.usage
                return Completion(text=text or "", prompt_tokens=getattr(u, "prompt_tokens", 0) or 0,
                                  completion_tokens=getattr(u, "completion_tokens", 0) or 0,
                                  cached=False, latency_s=time.perf_counter() - t0, request_id=key,
                                  model=self.model, finish_reason=choice.finish_reason, refusal=refusal)
            except openai.APIStatusError as exc:
                if exc.status_code not in _RETRYABLE_STATUS:
                    raise LLMCallError(f"request {key[:16]} (role {self.endpoint.role}, model "
                                       f"{self.model}): HTTP {exc.status_code}: {exc.message}",
                                       status=exc.status_code) from exc
                last_exc = exc
                self._limiter.observe(getattr(exc.response, "headers", None))
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
        status = getattr(last_exc, "status_code", None)
        raise LLMCallError(f"request {key[:16]} (role {self.endpoint.role}, model {self.model}) failed "
                           f"after {self.endpoint.max_retries + 1} attempts: "
                           f"{type(last_exc).__name__}: {last_exc}", status=status) from last_exc

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
                      grammar: str | None = None, **kw):
        """(schema instance, Completion); the instance is None when the reply does not parse.

        `grammar_schema` replaces the JSON schema sent as response_format (e.g. a tighter one
        that bounds string lengths for a small model); the reply is still parsed with `schema`.
        `grammar`, a GBNF grammar, is sent instead of any response_format (llama-server's own
        field: the embedded model only), for a format a JSON schema cannot fix, such as its
        whitespace.
        """
        if grammar is not None:
            if not self.is_embedded:
                raise ValueError(f"role {self.endpoint.role}: a GBNF grammar is for the embedded llama-server only")
            kw["extra"] = {**(kw.get("extra") or {}), "grammar": grammar}
        elif self.endpoint.structured_output:
            kw["response_format"] = json_schema_format(schema, grammar_schema)
        c = self.complete(messages, max_tokens=max_tokens, **kw)
        if c.refusal is not None:
            c.error = f"the model refused: {c.refusal[:200]}"
            return None, c
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
    """response_format for a pydantic model (or `json_schema` in its place), strict: every schema
    the project sends obeys api_rules.strict_schema_problems (tests/test_api_rules.py)."""
    return named_schema_format(schema.__name__, json_schema or schema.model_json_schema())


def named_schema_format(name: str, json_schema: dict) -> dict:
    return {"type": "json_schema", "json_schema": {"name": name, "schema": json_schema, "strict": True}}


_FENCE = re.compile(r"^```(?:json)?\s*\n(.*)\n```$", re.S)


def strip_fence(text: str) -> str:
    """The reply without one ```json fence around it, the only wrapper a strict parser tolerates."""
    body = (text or "").strip()
    m = _FENCE.match(body)
    return m.group(1).strip() if m else body


def parse_json(text: str, schema):
    """Strict: the reply is the JSON object (a single ```json fence is tolerated), nothing else."""
    from pydantic import ValidationError

    body = strip_fence(text)
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
