"""What every call cost: the reply with its tokens (``Completion``), prices, and the call log.

Every call (cached or not) is appended to ``results/<profile>/usage/<run>.calls.jsonl``;
``summarize_calls`` aggregates a log; ``usage`` counts this process's calls. Models without a
list price (``PRICES_PER_MTOK``) are reported as unpriced, never counted as free in silence.

Three prices per model: input, output, and input the provider served from its prompt cache
(``cached_tokens``, part of the prompt tokens; OpenAI bills it at a half (gpt-4o), a quarter
(gpt-4.1) or a tenth (gpt-5) of the input price). A call sent through a Batch API costs
``BATCH_PRICE_FACTOR`` of the same (OpenAI, Azure OpenAI, Together: half), unless configured.
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
# USD per million prompt tokens served from the provider's prompt cache (OpenAI's list prices).
# A model priced above but not here pays its whole input price for cached tokens.
CACHED_INPUT_PER_MTOK: dict[str, float] = {
    "gpt-4o-mini": 0.075,
    "gpt-4o": 1.25,
    "gpt-4.1": 0.50,
    "gpt-4.1-mini": 0.10,
    "gpt-4.1-nano": 0.025,
    "gpt-5-mini": 0.025,
    "gpt-5": 0.125,
}
# What a Batch API call costs against the same call sent alone (every price above).
BATCH_PRICE_FACTOR = 0.5


@dataclass(frozen=True)
class Price:
    """USD per million tokens: input, output, cached input; and the Batch API's factor on all three."""
    input: float
    output: float
    cached_input: float
    batch_factor: float = BATCH_PRICE_FACTOR

    def usd(self, prompt_tokens: int, completion_tokens: int, *, cached_tokens: int = 0,
            batch: bool = False) -> float:
        cached = min(max(int(cached_tokens), 0), int(prompt_tokens))
        usd = ((prompt_tokens - cached) * self.input + cached * self.cached_input
               + completion_tokens * self.output) / 1e6
        return usd * (self.batch_factor if batch else 1.0)


def list_price(model: str) -> Price | None:
    """The model's list price; 0 for the embedded model, None when the model is unpriced."""
    from memlife.models import serve

    if model == serve.MODEL_ALIAS or model.startswith(serve.MODEL_ALIAS + "@"):
        return Price(0.0, 0.0, 0.0)
    base = model.split("/")[-1]
    for name in sorted(PRICES_PER_MTOK, key=len, reverse=True):
        if base == name or base.startswith(name + "-2"):  # dated snapshots, e.g. gpt-4o-mini-2024-07-18
            pin, pout = PRICES_PER_MTOK[name]
            return Price(pin, pout, CACHED_INPUT_PER_MTOK.get(name, pin))
    return None


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
    # Of prompt_tokens, those the provider served from its prompt cache (usage.prompt_tokens_details
    # .cached_tokens; modelled by an estimate); 0 where the endpoint reports none.
    cached_tokens: int = 0
    batch: bool = False  # answered through a Batch API (priced at its factor)


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
    cached_prompt_tokens: int = 0  # of prompt_tokens, served from the provider's prompt cache
    completion_tokens: int = 0
    usd_estimate: float = 0.0
    unpriced_models: list[str] = field(default_factory=list)
    refusals: int = 0
    empty_replies: int = 0  # no text and no refusal, e.g. a reasoning model out of budget


_usage = Usage()
_usage_lock = threading.Lock()


def price_usd(model: str, prompt_tokens: int, completion_tokens: int, *, cached_tokens: int = 0,
              batch: bool = False) -> float | None:
    """Cost of one call at list price (`cached_tokens` of the prompt at the cached-input price, a
    Batch API call at its factor); 0 for the embedded model, None when the model is unpriced."""
    p = list_price(model)
    return None if p is None else p.usd(prompt_tokens, completion_tokens, cached_tokens=cached_tokens, batch=batch)


# A price function: (prompt, completion, cached_tokens=, batch=) -> USD or None (unpriced).
PriceFn = Callable[..., "float | None"]


def usage_dir() -> Path:
    """Where this process logs its calls: the configured profile's usage folder, else the ad hoc one."""
    profile = endpoints._settings.get("profile")
    return paths.layout(profile).usage if profile else paths.adhoc_usage()


def append_line(path: Path, rec: dict) -> None:
    """Append `rec` as one JSON line to `path`, creating its folder: one write() on an O_APPEND
    descriptor, so lines from concurrent threads and processes never interleave."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    data = (json.dumps(rec, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def _log_call(rec: dict) -> None:
    append_line(usage_dir() / f"{endpoints.run_name()}.calls.jsonl", rec)


def _account(role: str, c: Completion, price: PriceFn | None = None) -> None:
    saved = 0.0  # what the provider's prompt cache and the Batch API took off the list price
    if c.cached:
        usd = 0.0
    else:
        fn = price or (lambda p, o, **kw: price_usd(c.model, p, o, **kw))
        usd = fn(c.prompt_tokens, c.completion_tokens, cached_tokens=c.cached_tokens, batch=c.batch)
        if usd is not None and (c.cached_tokens or c.batch):
            saved = (fn(c.prompt_tokens, c.completion_tokens) or 0.0) - usd
    empty = c.source != "estimate" and c.refusal is None and not (c.text or "").strip()
    with _usage_lock:
        _usage.calls += 1
        _usage.cached_calls += int(c.cached)
        _usage.recorded_calls += int(c.source == "recorded")
        _usage.prompt_tokens += c.prompt_tokens
        _usage.cached_prompt_tokens += c.cached_tokens
        _usage.completion_tokens += c.completion_tokens
        _usage.refusals += int(c.refusal is not None)
        _usage.empty_replies += int(empty)
        if usd is None:
            if c.model not in _usage.unpriced_models:
                _usage.unpriced_models.append(c.model)
        else:
            _usage.usd_estimate += usd
    rec = {"role": role, "model": c.model, "request_id": c.request_id, "cached": c.cached,
           "source": c.source, "prompt_tokens": c.prompt_tokens, "cached_prompt_tokens": c.cached_tokens,
           "completion_tokens": c.completion_tokens, "batch": c.batch, "latency_s": round(c.latency_s, 4), "usd": usd,
           "usd_saved": round(saved, 9)}
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
    out = {"calls": 0, "cached_calls": 0, "recorded_calls": 0, "live_calls": 0, "batch_calls": 0,
           "prompt_tokens": 0, "cached_prompt_tokens": 0, "completion_tokens": 0,
           "usd_estimate": 0.0, "usd_saved": 0.0, "unpriced_models": [], "latency_s": 0.0, "refusals": 0,
           "empty_replies": 0, "by_role": {}}
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
            # Logs written before prompt caching and batches were counted lack these fields: none then.
            cached_prompt = int(r.get("cached_prompt_tokens") or 0)
            out["cached_prompt_tokens"] += cached_prompt
            out["batch_calls"] += int(bool(r.get("batch")))
            out["usd_saved"] += float(r.get("usd_saved") or 0.0)
            out["latency_s"] += r["latency_s"]
            out["refusals"] += int(bool(r.get("refusal")))
            out["empty_replies"] += int(bool(r.get("empty")))
            role = out["by_role"].setdefault(r["role"], {"calls": 0, "cached_calls": 0, "live_calls": 0,
                                                         "batch_calls": 0, "prompt_tokens": 0,
                                                         "cached_prompt_tokens": 0, "completion_tokens": 0,
                                                         "usd": 0.0, "usd_saved": 0.0, "models": []})
            role["calls"] += 1
            role["cached_calls"] += int(r["cached"])
            role["live_calls"] += int(not r["cached"])
            if not r["cached"]:  # what was (or, estimated, would be) sent
                role["prompt_tokens"] += r["prompt_tokens"]
                role["cached_prompt_tokens"] += cached_prompt
                role["completion_tokens"] += r["completion_tokens"]
                role["batch_calls"] += int(bool(r.get("batch")))
            role["usd"] = round(role["usd"] + (r["usd"] or 0.0), 6)
            role["usd_saved"] = round(role["usd_saved"] + float(r.get("usd_saved") or 0.0), 6)
            if r["model"] not in role["models"]:
                role["models"].append(r["model"])
            if r["usd"] is None:
                if r["model"] not in out["unpriced_models"]:
                    out["unpriced_models"].append(r["model"])
            else:
                out["usd_estimate"] += r["usd"]
    out["usd_estimate"] = round(out["usd_estimate"], 6)
    out["usd_saved"] = round(out["usd_saved"], 6)
    out["latency_s"] = round(out["latency_s"], 3)
    return out


def unpriced_message(role: str, model: str) -> str:
    return (f"role {role}: model {model!r} has no price, so a spending cap could never stop it; give its price "
            f"as MEMLIFE_{role.upper()}_PRICE_PER_MTOK='input,output' (US dollars per million tokens; 0,0 "
            f"for a self-hosted model) or models.{role}.price_per_mtok in the profile")
