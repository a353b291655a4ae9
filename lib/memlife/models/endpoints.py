"""Which model answers each role, and the settings of a run.

- An endpoint (base URL, model) per role — reader, judge, generator, scorer, verifier,
  judge_audit (the restore paper's second judge, re-grading a sample) — from the profile's
  ``models:`` section and environment variables (``MEMLIFE_<ROLE>_BASE_URL`` /
  ``MEMLIFE_<ROLE>_MODEL``, or ``MEMLIFE_BASE_URL`` / ``MEMLIFE_MODEL`` for all roles). The key
  comes from the environment only and is never stored. With nothing configured every role uses
  the embedded llama-server (``memlife.models.serve``).
- What an endpoint accepts (``memlife.models.api_rules``): per role its context window, token
  parameter, whether temperature and seed are sent, room for reasoning, extra body fields, price
  and rate budget (``Endpoint``); OpenAI's reasoning models get their parameters by name.
- Every number a user sets (a cap, prices, windows, timeouts, retries, concurrency, rates) is
  parsed by one function per kind (``parse_usd``, ``parse_seconds``, ``parse_count``,
  ``parse_price_pair``) that names the variable or profile field and checks its range.
- The mode (``MEMLIFE_LLM_MODE``: live, replay, refresh, estimate), the run's name and its
  spending cap; the errors every part of model access raises.
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from typing import Any

from memlife.base import config, paths

MODES = ("live", "replay", "refresh", "estimate", "collect")


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
    # USD per million prompt tokens served from the provider's prompt cache; None: the list's
    # (CACHED_INPUT_PER_MTOK), or the input price where neither knows it.
    cached_price_per_mtok: float | None = None
    batch_price_factor: float | None = None  # a Batch API call's price against a single one; None: 0.5
    # Send OpenAI's prompt_cache_key (a hash of the request's stable head), so requests sharing a
    # long prefix reach the same cache; on by default for api.openai.com, off elsewhere (an
    # unknown field is an error on some servers).
    prompt_cache_key: bool = False
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

# How many times configure() has run: a client made before the last one is made again.
_generation = 0


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
        from memlife.base import config

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
    global _generation
    _generation += 1  # every configure() gives fresh clients (llm.get_client)


def generation() -> int:
    return _generation


def spend_cap_usd() -> float | None:
    return _settings.get("spend_cap_usd")


def _env(role: str, name: str) -> str | None:
    return os.environ.get(f"MEMLIFE_{role.upper()}_{name}") or os.environ.get(f"MEMLIFE_{name}")


def endpoint_for(role: str) -> Endpoint:
    if role not in config.ROLES:
        raise ValueError(f"unknown role {role!r}; expected one of {config.ROLES}")
    prof = dict((_settings["models"] or {}).get(role) or {})
    base_url = _env(role, "BASE_URL") or prof.get("base_url")
    model = _env(role, "MODEL") or prof.get("model")
    if base_url in ("", "embedded"):
        base_url = None
    if base_url is None:
        from memlife.models import serve

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
    from memlife.models import api_rules

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
    where, cached = _sourced(role, prof, "cached_price_per_mtok")
    if cached is not None:
        out["cached_price_per_mtok"] = parse_usd(where, cached)
    where, factor = _sourced(role, prof, "batch_price_factor")
    if factor is not None:
        out["batch_price_factor"] = parse_usd(where, factor)
        if out["batch_price_factor"] > 1:
            raise LLMError(f"{where}={factor!r}: a batch price factor is a share of the list price, at most 1")
    key = _setting(role, prof, "prompt_cache_key")
    out["prompt_cache_key"] = (_is_openai(base_url_of(role, prof)) if key in (None, "")
                               else _flag(role, "prompt_cache_key", key))
    for name in ("requests_per_minute", "tokens_per_minute"):
        where, v = _sourced(role, prof, name)
        out[name] = None if v is None else parse_count(where, v, minimum=1, unit=name.split("_")[0])
    return out


def base_url_of(role: str, prof: dict) -> str | None:
    return _env(role, "BASE_URL") or prof.get("base_url")


def _is_openai(base_url: str | None) -> bool:
    from urllib.parse import urlparse

    return bool(base_url) and (urlparse(base_url).hostname or "").endswith("api.openai.com")


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


def run_name() -> str:
    return _settings.get("run") or os.environ.get("MEMLIFE_RUN") or "adhoc"
