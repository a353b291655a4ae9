"""A strict OpenAI-compatible server on loopback: it enforces what the real APIs document.

Where tests/faultserver.py injects transport faults into a server that checks nothing, this one
rejects what OpenAI, vLLM and Ollama reject, with their status codes and error bodies:

- a missing or empty bearer key: 401;
- ``response_format`` json_schema with ``strict: true`` whose schema breaks the strict rules
  (memlife.models.api_rules.strict_schema_problems, the same rules the project checks itself): 400;
- for a reasoning model (api_rules.is_reasoning_model): ``max_tokens`` (400, "use
  max_completion_tokens") and any temperature but 1 (400 unsupported_value); hidden reasoning
  spends ``reasoning_cost`` completion tokens before the visible reply, and a budget that does not
  cover it gets an empty reply with finish_reason "length", as OpenAI answers;
- a prompt (o200k tokens) plus completion budget over the model's window: 400
  context_length_exceeded; ``GET /models`` reports the window like vLLM (``max_model_len``)
  unless ``report_window=False`` (Ollama reports none);
- more than ``rpm`` requests in a minute (``rate_window_s``): 429 with Retry-After and x-ratelimit-* headers; every
  answer carries the x-ratelimit-* headers;
- a prompt containing ``REFUSE-ME``: a refusal (``content: null``, ``message.refusal``).

Every reply's usage carries ``prompt_tokens_details.cached_tokens`` (OpenAI always reports it). It
is 0 unless ``prompt_cache=True``; then it is OpenAI's prompt cache: the longest prefix (o200k
tokens, see `prompt_token_ids`) this request shares with an earlier accepted request of the same
model, counted as OpenAI counts it: 0 below 1,024 tokens, else rounded down to a multiple of 128.

Every accepted request gets a reply valid for its role: the realizer's 8 turns carrying the
sentences its prompt requires, an instance of any other JSON schema, one label for a
CORRECT/INCORRECT judge, an integer for an importance score, text otherwise.

Run standalone (``python tests/strictserver.py --window 32768``) it prints its URL and serves
until killed, for a dress rehearsal of whole notebooks.
"""
from __future__ import annotations

import hashlib
import json
import threading
import time
from array import array
from collections import Counter, deque

from memlife.models import api_rules, tokens
from memlife.models.standin import reply_text

from faultserver import JSONHandler, Loopback

# OpenAI's prompt cache: "caching is available for prompts containing 1024 tokens or more", and hits
# come "in increments of 128 tokens" (the prompt-caching guide). cached_tokens is always one of
# 0, 1024, 1152, 1280, ...
CACHE_MIN_TOKENS = 1024
CACHE_STEP_TOKENS = 128


def prompt_token_ids(messages: list[dict]) -> list[int]:
    """A request's prompt as the cache sees it: for each message, its role's o200k tokens and then
    its content's, in order. (The real template adds a few marker tokens per message; they do not
    change which prefixes two prompts share.) Content that is not a string (a list of parts) is
    tokenized as its JSON."""
    enc = tokens.encoding()
    ids: list[int] = []
    for m in messages:
        content = m.get("content")
        if content is None:
            content = ""
        elif not isinstance(content, str):
            content = json.dumps(content, sort_keys=True)
        ids += enc.encode(str(m.get("role", "")), disallowed_special=())
        ids += enc.encode(content, disallowed_special=())
    return ids


def prefix_hashes(model: str, ids: list[int]) -> list[tuple[int, bytes]]:
    """(length, hash of ids[:length]) at every cache boundary length (1024, 1152, ... <= len(ids)).

    One running hash over the token ids, copied at each boundary: a 60k-token prompt costs one pass,
    not one hash per prefix. Seeded with the model: OpenAI's cache is per model."""
    h = hashlib.blake2b(model.encode(), digest_size=16)
    out, pos = [], 0
    for end in range(CACHE_MIN_TOKENS, len(ids) + 1, CACHE_STEP_TOKENS):
        h.update(array("I", ids[pos:end]).tobytes())  # o200k ids are < 2**32
        pos = end
        out.append((end, h.copy().digest()))
    return out


class StrictServer(Loopback):
    def __init__(self, *, window: int = 128_000, report_window: bool = True, rpm: int | None = None,
                 reasoning_cost: int = 64, delay_s: float = 0.0, rate_window_s: float = 60.0,
                 prompt_cache: bool = False):
        self.window, self.report_window, self.rpm = window, report_window, rpm
        self.prompt_cache = prompt_cache
        self._cache_index: set[tuple[int, bytes]] = set()  # (length, prefix hash) of accepted prompts
        self.rate_window_s = rate_window_s  # "a minute" (shorter in tests)
        self.reasoning_cost, self.delay_s = reasoning_cost, delay_s
        self.received: Counter = Counter()  # accepted requests per last-message content
        self.rejected: list[tuple[int, str]] = []  # (status, reason) of every request refused
        self.bodies: list[dict] = []
        self._sent: deque = deque()
        self._lock = threading.Lock()
        outer = self

        class Handler(JSONHandler):
            def do_GET(self):
                if not self._authorized():
                    return
                entry = {"object": "model", "owned_by": "test"}
                if outer.report_window:
                    entry["max_model_len"] = outer.window
                if self.path.endswith("/models"):
                    self._json(200, {"object": "list", "data": []})  # no model listed: ask for one
                elif "/models/" in self.path:
                    self._json(200, {"id": self.path.rsplit("/", 1)[1], **entry})
                else:
                    self._json(404, {"error": {"message": "not found"}})

            def do_POST(self):
                if not self._authorized():
                    return
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                status, error, headers = outer._check(body)
                if status:
                    self._json(status, {"error": error}, headers)
                    return
                if outer.delay_s:
                    time.sleep(outer.delay_s)
                self._json(200, outer._answer(body), outer._limit_headers())

            def _authorized(self) -> bool:
                auth = self.headers.get("Authorization", "")
                if not auth.startswith("Bearer ") or not auth[7:].strip():
                    outer.rejected.append((401, "no key"))
                    self._json(401, {"error": {"message": "missing API key", "type": "invalid_request_error",
                                               "code": "invalid_api_key"}})
                    return False
                return True

        Loopback.__init__(self, Handler)

    # -- the rules

    def _reject(self, status: int, message: str, code: str | None = None, param: str | None = None,
                headers: dict | None = None):
        self.rejected.append((status, message))
        return status, {"message": message, "type": "invalid_request_error", "param": param, "code": code}, headers

    def _check(self, body: dict):
        model = body.get("model", "")
        reasoning = api_rules.is_reasoning_model(model)
        if reasoning and "max_tokens" in body:
            return self._reject(400, "Unsupported parameter: 'max_tokens' is not supported with this model. "
                                     "Use 'max_completion_tokens' instead.", "unsupported_parameter", "max_tokens")
        if reasoning and body.get("temperature", 1) != 1:
            return self._reject(400, "Unsupported value: 'temperature' does not support "
                                     f"{body['temperature']} with this model. Only the default (1) value is supported.",
                                "unsupported_value", "temperature")
        fmt = body.get("response_format") or {}
        if fmt.get("type") == "json_schema" and fmt["json_schema"].get("strict"):
            problems = api_rules.strict_schema_problems(fmt["json_schema"].get("schema") or {})
            if problems:
                return self._reject(400, f"Invalid schema for response_format "
                                         f"'{fmt['json_schema'].get('name')}': {problems[0]}",
                                    "invalid_json_schema", "response_format")
        budget = body.get("max_completion_tokens", body.get("max_tokens", 0)) or 0
        prompt = tokens.count_messages(body.get("messages") or [])
        if prompt + budget > self.window:
            return self._reject(400, f"This model's maximum context length is {self.window} tokens. However, you "
                                     f"requested {prompt + budget} tokens ({prompt} in the messages, {budget} in "
                                     "the completion).", "context_length_exceeded", "messages")
        with self._lock:
            now = time.monotonic()
            while self._sent and now - self._sent[0] >= self.rate_window_s:
                self._sent.popleft()
            if self.rpm and len(self._sent) >= self.rpm:
                reset = self.rate_window_s - (now - self._sent[0])
                return self._reject(429, "Rate limit reached for requests", "rate_limit_exceeded", None,
                                    {"Retry-After": f"{reset:.3f}", **self._limit_headers(now)})
            self._sent.append(now)
        return 0, None, None

    def _limit_headers(self, now: float | None = None) -> dict:
        if not self.rpm:
            return {}
        with (self._lock if now is None else _Null()):
            now = time.monotonic() if now is None else now
            left = max(0, self.rpm - len(self._sent))
            reset = (self.rate_window_s - (now - self._sent[0])) if self._sent else 0.0
        return {"x-ratelimit-limit-requests": str(self.rpm), "x-ratelimit-remaining-requests": str(left),
                "x-ratelimit-reset-requests": f"{max(reset, 0.001):.3f}s"}

    def _answer(self, body: dict) -> dict:
        messages = body.get("messages") or []
        last = str(messages[-1].get("content")) if messages else ""
        with self._lock:
            self.received[last] += 1
            self.bodies.append(body)
        reasoning = api_rules.is_reasoning_model(body.get("model", ""))
        budget = body.get("max_completion_tokens", body.get("max_tokens")) or 10**9
        spent = self.reasoning_cost if reasoning else 0
        message: dict = {"role": "assistant", "content": None, "refusal": None}
        finish = "stop"
        if "REFUSE-ME" in last:
            message["refusal"] = "I can't help with that."
        elif spent >= budget:
            message["content"], finish, spent = "", "length", budget
        else:
            message["content"] = reply_text(messages, body.get("response_format"))
        visible = len((message["content"] or "").split())
        prompt_tokens = tokens.count_messages(messages)
        cached = self._cached_tokens(body.get("model") or "", messages, prompt_tokens) if self.prompt_cache else 0
        return {"id": "chatcmpl-strict", "object": "chat.completion", "created": 0, "model": body.get("model"),
                "choices": [{"index": 0, "finish_reason": finish, "message": message}],
                "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": spent + visible,
                          "total_tokens": 0,
                          "prompt_tokens_details": {"cached_tokens": cached},
                          "completion_tokens_details": {"reasoning_tokens": spent}}}

    def _cached_tokens(self, model: str, messages: list[dict], prompt_tokens: int) -> int:
        """The prompt-cache hit of this (accepted) request, then remember its prefixes for later ones."""
        hashes = prefix_hashes(model, prompt_token_ids(messages))  # tokenized outside the lock
        with self._lock:
            hit = max((n for n, h in hashes if (n, h) in self._cache_index), default=0)
            self._cache_index.update(hashes)
        # Never more than the prompt it is part of (still a multiple of 128).
        return min(hit, prompt_tokens - prompt_tokens % CACHE_STEP_TOKENS)

class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


if __name__ == "__main__":  # standalone, for a dress rehearsal: prints its URL, serves until killed
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("--window", type=int, default=128_000)
    ap.add_argument("--no-window-report", action="store_true")
    ap.add_argument("--rpm", type=int)
    ap.add_argument("--prompt-cache", action="store_true")
    a = ap.parse_args()
    # Started in the background of a shell, a process inherits SIGINT ignored: stop on either signal.
    import signal

    def _stop(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGTERM, _stop)
    with StrictServer(window=a.window, report_window=not a.no_window_report, rpm=a.rpm,
                      prompt_cache=a.prompt_cache) as srv:
        try:  # the URL is printed inside, so a signal right after it still gets the counts
            print(srv.base_url, flush=True)
            while True:
                time.sleep(3600)
        finally:
            print(json.dumps({"accepted": sum(srv.received.values()), "rejected": srv.rejected[:20]}), flush=True)
