"""What every call cost: the reply with its tokens (``Completion``), prices, and the call log.

Every call (cached or not) is appended to ``results/<profile>/usage/<run>.calls.jsonl``;
``summarize_calls`` aggregates a log; ``usage`` counts this process's calls. Models without a
list price (``PRICES_PER_MTOK``) are reported as unpriced, never counted as free in silence.
"""
from __future__ import annotations

import json
import os
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from memlife.base import paths
from memlife.models import endpoints

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


_said: set[tuple[str, str]] = set()


def _say_once(role: str, kind: str, message: str) -> None:
    if (role, kind) in _said:
        return
    _said.add((role, kind))
    from memlife.base import progress

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
    from memlife.models import serve

    if model == serve.MODEL_ALIAS or model.startswith(serve.MODEL_ALIAS + "@"):
        return 0.0
    base = model.split("/")[-1]
    for name in sorted(PRICES_PER_MTOK, key=len, reverse=True):
        if base == name or base.startswith(name + "-2"):  # dated snapshots, e.g. gpt-4o-mini-2024-07-18
            pin, pout = PRICES_PER_MTOK[name]
            return (prompt_tokens * pin + completion_tokens * pout) / 1e6
    return None


def usage_dir() -> Path:
    """Where this process logs its calls: the configured profile's usage folder, else the ad hoc one."""
    profile = endpoints._settings.get("profile")
    return paths.layout(profile).usage if profile else paths.adhoc_usage()


def _log_call(rec: dict) -> None:
    d = usage_dir()
    d.mkdir(parents=True, exist_ok=True)
    line = json.dumps(rec, sort_keys=True) + "\n"
    # One write() on an O_APPEND descriptor: lines from concurrent processes never interleave.
    fd = os.open(d / f"{endpoints.run_name()}.calls.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
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
                raise endpoints.LLMError(f"{log_path}:{n}: not a JSON line ({exc})") from exc
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


def unpriced_message(role: str, model: str) -> str:
    return (f"role {role}: model {model!r} has no price, so a spending cap could never stop it; give its price "
            f"as MEMLIFE_{role.upper()}_PRICE_PER_MTOK='input,output' (US dollars per million tokens; 0,0 "
            f"for a self-hosted model) or models.{role}.price_per_mtok in the profile")
