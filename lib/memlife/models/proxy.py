"""A loopback OpenAI-compatible endpoint that routes every request through `memlife.models.llm`.

Mem0 and MemOS make their own OpenAI-style HTTP calls. Pointing them at this proxy instead of
at the model server puts each of their calls through `llm.get_client(role).complete(...)`, so
it is cached on disk, counted in the usage accounting and replayable without a model — exactly
like the project's own calls. Only 127.0.0.1 is bound; the port is chosen by the OS.

Only the project may call it: behind it is the user's API key and spending cap, and any local
process can reach a loopback port. Each proxy draws a random token (`Proxy.token`, held in memory
only — never in a cache key, record, notebook or log) that Mem0 and MemOS are given as their API
key; a request is refused, with no model call, when it
- carries an ``Origin`` header (403): a browser sends one on cross-origin requests, so a web page
  cannot reach the proxy even by guessing the token;
- lacks ``Authorization: Bearer <token>`` (401), compared in constant time;
- is a POST whose body is not ``application/json`` (415): a page can send ``text/plain`` across
  origins without a CORS preflight, never ``application/json``.

A request it cannot serve — memlife's client raised (the spending cap, a call that failed after
its retries, a replay-mode miss) or the request is not one it supports — is answered with an HTTP
error whose JSON body is marked ``{"error": {"type": "memlife_proxy_error", "code": KIND,
"failure": N, ...}}`` and recorded in `ProxyStats.failures` under N, exception and all, so that the
caller's side can tell such a failure from a model's reply and the project can name it.

Supported: POST /v1/chat/completions (non-streaming) and GET /v1/models.
"""
from __future__ import annotations

import collections
import hmac
import json
import secrets
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

from memlife.models import reply_cache

# Request fields forwarded to Client.complete; anything else the libraries send (user, n=1,
# logprobs=None...) is checked below so nothing that would change the answer is dropped silently.
_FORWARDED = ("max_tokens", "temperature", "seed", "response_format", "stop")
_IGNORABLE = {"model", "messages", "stream", "n", "user", "top_p", "max_completion_tokens",
              "frequency_penalty", "presence_penalty", "logprobs", "store", "metadata"}


# A refused request's body is read (up to this much) and dropped, never parsed.
_DISCARD_LIMIT = 1 << 20


def new_token() -> str:
    """A fresh random bearer token: 256 bits from the OS's CSPRNG."""
    return secrets.token_urlsafe(32)


def _bearer_matches(header: str | None, token: str) -> bool:
    """Whether an Authorization header carries `token` as a Bearer credential.

    compare_digest takes time independent of where the strings differ, so response timing does
    not reveal how much of a guess was right.
    """
    scheme, _, presented = (header or "").partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(presented.strip().encode("utf-8"), token.encode("utf-8"))


def _message_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # [{"type": "text", "text": ...}]
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return "" if content is None else str(content)


# The `type` of the error body of a request the proxy took but could not serve; its `code` is one
# of the kinds of `failure_kind`.
ERROR_TYPE = "memlife_proxy_error"


def failure_kind(exc: BaseException) -> str:
    """What kind of failure `exc`, raised while forwarding a request, is: the code in its reply."""
    from memlife.models import endpoints

    if isinstance(exc, endpoints.SpendingCapExceeded):
        return "spending_cap"
    if isinstance(exc, endpoints.CacheMiss):
        return "cache_miss"
    if isinstance(exc, endpoints.LLMCallError):
        return "call_failed"
    if isinstance(exc, endpoints.LLMError):
        return "llm_error"
    if isinstance(exc, ValueError):  # a request the proxy does not support, or a body not JSON
        return "bad_request"
    return "internal"


@dataclass(frozen=True)
class ProxyFailure:
    """One request the proxy answered with an error instead of a completion."""

    id: int  # the `failure` field of the reply's error body
    kind: str  # failure_kind
    status: int
    error_type: str  # the exception's class name
    message: str
    exception: BaseException | None = field(default=None, repr=False, compare=False)


# Failures kept for look-up: a caller asks right after its call failed, so the last few suffice,
# and each holds an exception with its traceback.
_FAILURES_KEPT = 256


@dataclass
class ProxyStats:
    requests: int = 0
    errors: int = 0
    refused: int = 0  # answered 403/401/415 unparsed and unforwarded: an Origin, no token, not JSON
    last_error: str = ""
    failures: collections.deque = field(default_factory=lambda: collections.deque(maxlen=_FAILURES_KEPT))
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def failure(self, failure_id) -> ProxyFailure | None:
        """The failure a reply's error body named by its `failure` field, if still kept."""
        with self.lock:
            return next((f for f in self.failures if f.id == failure_id), None)


class _Handler(BaseHTTPRequestHandler):
    server: "_ProxyServer"

    def log_message(self, fmt, *args):  # keep notebook output clean
        return

    def _send(self, status: int, payload: dict, *, no_retry: bool = False) -> None:
        body = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        if status == 401:
            self.send_header("WWW-Authenticate", 'Bearer realm="memlife-proxy"')
        if no_retry:
            # The openai SDK obeys this header over its own rule, which retries every 5xx twice.
            self.send_header("x-should-retry", "false")
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _discard_body(self) -> None:
        """Read what the caller sent before refusing: closing a socket with unread bytes makes
        the kernel answer with a reset, and the caller would see that instead of the status."""
        try:
            left = min(int(self.headers.get("Content-Length") or 0), _DISCARD_LIMIT)
        except ValueError:
            left = 0
        while left > 0:
            chunk = self.rfile.read(min(left, 1 << 16))
            if not chunk:
                break
            left -= len(chunk)

    def _refused(self, *, post: bool) -> bool:
        """Refuse a request the project did not make; True when refused (and answered)."""
        if self.headers.get("Origin") is not None:
            status, why = 403, "cross-origin requests are refused"
        elif not _bearer_matches(self.headers.get("Authorization"), self.server.token):
            status, why = 401, "missing or wrong bearer token"
        elif post and self.headers.get_content_type() != "application/json":
            status, why = 415, "the body must be application/json"
        else:
            return False
        with self.server.stats.lock:
            self.server.stats.refused += 1
        self._discard_body()
        self._send(status, {"error": {"message": why, "type": "memlife_proxy_refused"}})
        return True

    def do_GET(self):  # noqa: N802
        if self._refused(post=False):
            return
        if self.path.rstrip("/").endswith("/models"):
            model = self.server.model_name()
            self._send(200, {"object": "list", "data": [{"id": model, "object": "model", "owned_by": "memlife"}]})
        else:
            self._send(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self):  # noqa: N802
        if self._refused(post=True):
            return
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send(404, {"error": {"message": f"no route {self.path}"}})
            return
        stats = self.server.stats
        try:
            req = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            completion = self.server.forward(req)
        except Exception as exc:  # report to the library as an HTTP error, count it and keep it
            kind = failure_kind(exc)
            status = 400 if kind == "bad_request" else 500
            with stats.lock:
                stats.errors += 1
                stats.last_error = f"{type(exc).__name__}: {exc}"
                failure = ProxyFailure(id=stats.errors, kind=kind, status=status, error_type=type(exc).__name__,
                                       message=str(exc), exception=exc)
                stats.failures.append(failure)
            # Never retried: memlife's client has made its own retries, and a refusal (the cap, a
            # replay miss) or an unsupported request would only be answered the same way again.
            self._send(status, {"error": {"message": str(exc), "type": ERROR_TYPE, "code": kind,
                                          "failure": failure.id}}, no_retry=True)
            return
        with stats.lock:
            stats.requests += 1
        self._send(200, completion)


class _ProxyServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, client_factory: Callable[[], Any], token: str):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.token = token
        self._client_factory = client_factory
        self._client = None
        self.stats = ProxyStats()

    def client(self):
        if self._client is None:
            self._client = self._client_factory()
        return self._client

    def model_name(self) -> str:
        return str(getattr(self.client(), "model", "memlife"))

    def forward(self, req: dict) -> dict:
        if req.get("stream"):
            raise ValueError("streaming is not supported by the memlife proxy")
        if req.get("tools") or req.get("functions"):
            raise ValueError("tool calls are not supported by the memlife proxy")
        unknown = set(req) - _IGNORABLE - set(_FORWARDED) - {"tools", "functions", "tool_choice"}
        if unknown:
            raise ValueError(f"unsupported request fields: {sorted(unknown)}")
        messages = [
            {"role": m.get("role", "user"), "content": _message_text(m.get("content"))}
            for m in req.get("messages") or []
        ]
        if not messages:
            raise ValueError("request has no messages")
        kwargs = {k: req[k] for k in _FORWARDED if req.get(k) is not None}
        if "max_tokens" not in kwargs and req.get("max_completion_tokens"):
            kwargs["max_tokens"] = req["max_completion_tokens"]
        # Mem0's and MemOS's calls are ingestion, each depending on the last: sent at once even
        # while a Batch API wave collects every other request.
        with reply_cache.synchronous():
            c = self.client().complete(messages, **kwargs)
        return {
            "id": f"chatcmpl-{getattr(c, 'request_id', '') or 'memlife'}",
            "object": "chat.completion",
            "created": 0,  # deterministic: the libraries never read it
            "model": self.model_name(),
            # A refusal reaches the library as the API gives it: no content, the refusal beside it.
            "choices": [{"index": 0, "message": {"role": "assistant",
                                                 "content": None if c.refusal is not None else c.text,
                                                 "refusal": c.refusal},
                         "finish_reason": "stop", "logprobs": None}],
            "usage": {"prompt_tokens": int(c.prompt_tokens or 0),
                      "completion_tokens": int(c.completion_tokens or 0),
                      "total_tokens": int((c.prompt_tokens or 0) + (c.completion_tokens or 0))},
        }


class Proxy:
    """A running proxy: `base_url` ends in /v1, and callers send `token` as their API key
    (``Authorization: Bearer <token>``). Use as a context manager or call close()."""

    def __init__(self, role: str = "reader", client=None):
        if client is None:
            def factory():
                from memlife.models import llm
                return llm.get_client(role)
        else:
            def factory():
                return client
        self._server = _ProxyServer(factory, new_token())
        self._thread = threading.Thread(target=self._server.serve_forever, name="memlife-proxy", daemon=True)
        self._thread.start()

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    @property
    def token(self) -> str:
        """This proxy's bearer token: hand it to a caller as its API key, never write it down."""
        return self._server.token

    @property
    def stats(self) -> ProxyStats:
        return self._server.stats

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> "Proxy":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def start(role: str = "reader", client=None) -> Proxy:
    return Proxy(role=role, client=client)
