"""The one client for every model call in memlife (`get_client(role)`).

- Robustness: bounded concurrency; retries with exponential backoff and jitter on 429, 5xx,
  timeouts, connection errors and malformed bodies, honouring Retry-After and the x-ratelimit-*
  headers (`RateLimiter`). A call that still fails raises ``LLMCallError`` naming the request id.
  Failures are never cached; a refusal is a reply, cached and counted.
- Every call goes through ``memlife.models.reply_cache.memoized`` (recording, cache, model) and is
  accounted in ``memlife.models.accounting``; a spending cap (``memlife.models.spending``) holds
  for the whole run, across processes: a call is sent only after its worst case is reserved
  under the cap.
- Context windows are listed, configured, or asked of the server; a prompt that cannot fit is
  refused before it is sent (``ContextWindowExceeded``).
- Strict parsing: JSON replies against a schema (``parse_json``), judge labels (``parse_label``).
- ``check_paper_profile``: the paper profile spends real money, so it needs an endpoint, a cap
  and a price for every model before its first call.

Which endpoint each role uses, and the errors, are in ``memlife.models.endpoints``.
"""
from __future__ import annotations

import os
import random
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from email.utils import parsedate_to_datetime
from typing import Any, Iterable

from memlife.base import config
from memlife.models import accounting, endpoints, prompt_cache, reply_cache

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
    def __init__(self, endpoint: endpoints.Endpoint):
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
            from memlife.models import serve

            return serve.model_fingerprint()
        return self.model

    def price(self) -> accounting.Price | None:
        """USD per million tokens for this endpoint: its configured prices, else the list's; None
        when the model has neither."""
        ep, listed = self.endpoint, accounting.list_price(self.model)
        if ep.price_per_mtok is not None:
            pin, pout = ep.price_per_mtok
            # A configured input price with no cached one: the list's discount where the model is
            # listed at that same input price, else none (the cache's tokens at the whole price).
            same = listed is not None and listed.input == pin
            cached = ep.cached_price_per_mtok if ep.cached_price_per_mtok is not None else (
                listed.cached_input if same else pin)
            base = accounting.Price(pin, pout, cached)
        elif listed is None:
            return None
        else:
            base = listed if ep.cached_price_per_mtok is None else accounting.Price(
                listed.input, listed.output, ep.cached_price_per_mtok)
        if ep.batch_price_factor is not None:
            base = accounting.Price(base.input, base.output, base.cached_input, ep.batch_price_factor)
        return base

    def price_usd(self, prompt_tokens: int, completion_tokens: int, *, cached_tokens: int = 0,
                  batch: bool = False) -> float | None:
        """Cost of one call (`cached_tokens` of its prompt from the provider's cache; `batch`: sent
        through a Batch API): the endpoint's configured price, else the list price."""
        p = self.price()
        return None if p is None else p.usd(prompt_tokens, completion_tokens, cached_tokens=cached_tokens,
                                             batch=batch)

    def context_window(self) -> int:
        """Tokens of prompt plus completion this endpoint takes: configured, listed for the model
        (api_rules), or reported by the server (vLLM's /v1/models gives max_model_len). Unknown
        is an error, never a guess: a guessed 128k sends a 32k model prompts it rejects (vLLM) or
        silently truncates (Ollama)."""
        if self.is_embedded:
            from memlife.models import serve

            return serve.CONTEXT_WINDOW
        if self.endpoint.context_window:
            return self.endpoint.context_window
        with self._window_lock:
            if self._window is None:
                self._window = self._reported_window()
            if self._window is None:
                role = self.endpoint.role.upper()
                raise endpoints.LLMError(
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

        def unreachable(exc: Exception) -> endpoints.LLMError:
            return endpoints.LLMError(f"role {self.endpoint.role}: cannot reach {self.endpoint.base_url} to ask the context "
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
                from memlife.models import serve

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
        req = reply_cache.canonical_request(self.model_id, messages, max_tokens=max_tokens, temperature=temperature,
                                seed=seed, response_format=response_format, stop=stop, extra=merged,
                                wire=self.endpoint.wire())
        return req, reply_cache.request_key(req)

    def completion_budget(self, max_tokens: int) -> int:
        """Completion tokens asked of the endpoint: the reply's own budget plus room to reason."""
        return int(max_tokens) + self.endpoint.reasoning_tokens

    def complete(self, messages: list[dict], *, max_tokens: int, temperature: float = 0.0,
                 seed: int | None = 0, response_format: dict | None = None,
                 stop: list[str] | None = None, extra: dict | None = None) -> accounting.Completion:
        req, key = self._build(messages, max_tokens, temperature, seed, response_format, stop, extra)
        return self._complete(req, key)

    def _complete(self, req: dict, key: str) -> accounting.Completion:
        def send() -> accounting.Completion:
            return self._send_within_cap(req, key)

        last = (req["messages"][-1]["content"] if req["messages"] else "")[:80]
        return reply_cache.memoized(key, send, role=self.endpoint.role, model=self.model, price=self.price_usd,
                        describe=f"role {self.endpoint.role}, model {self.model}, last message {last!r}",
                        request=req, budget=self.completion_budget(req["max_tokens"]),
                        batch_line=None if self.is_embedded else lambda: self.batch_line(req))

    def batch_line(self, req: dict) -> dict:
        """What a Batch API needs of the canonical request `req`: where it goes, its body, and its
        worst case at the batch price (the whole completion budget, nothing from the prompt cache)."""
        from memlife.models import tokens

        price = self.price()
        worst = None if price is None else price.usd(tokens.count_messages(req["messages"]),
                                                     self.completion_budget(req["max_tokens"]), batch=True)
        return {"base_url": self.endpoint.base_url, "api_key_env": self.endpoint.api_key_env,
                "body": self.request_body(req), "worst_usd": worst,
                "price": None if price is None else [price.input, price.output, price.cached_input, price.batch_factor]}

    def _send_within_cap(self, req: dict, key: str) -> accounting.Completion:
        """Check the window, reserve the call's worst case in the run's ledger, send, settle."""
        from memlife.models import spending, tokens

        budget = self.completion_budget(req["max_tokens"])
        prompt = tokens.count_messages(req["messages"]) if not self.is_embedded else 0
        if not self.is_embedded:
            window = self.context_window()
            if prompt + budget > window:
                raise endpoints.ContextWindowExceeded(
                    f"request {key[:16]} (role {self.endpoint.role}, model {self.model}): the prompt "
                    f"(~{prompt} tokens) and the completion budget ({budget}) exceed the context window "
                    f"({window}); give the role a model with a larger window, or tell memlife its real window "
                    f"(MEMLIFE_{self.endpoint.role.upper()}_CONTEXT_WINDOW)")
        cap = endpoints.spend_cap_usd()
        reservation = None
        if cap is not None:
            worst = self.price_usd(prompt, budget)
            if worst is None:
                raise endpoints.UnpricedModel(accounting.unpriced_message(self.endpoint.role, self.model))
            if worst > 0:
                try:
                    reservation = spending.reserve(worst, cap, role=self.endpoint.role, model=self.model)
                except spending.CapReached as exc:
                    raise endpoints.SpendingCapExceeded(
                        f"spending cap ${cap:.2f} for this run: {exc}; raise MEMLIFE_SPEND_CAP_USD to "
                        "continue (replies already received are cached: a rerun does not pay for them again)"
                    ) from None
        self._limiter.wait(prompt + budget)
        try:
            c = self._send(req, key)
        except endpoints.LLMCallError as exc:
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
            spending.settle(reservation, self.price_usd(c.prompt_tokens, c.completion_tokens,
                                                        cached_tokens=c.cached_tokens) or 0.0)
        if not self.is_embedded and prompt > 2000 and c.prompt_tokens and c.prompt_tokens < 0.5 * prompt:
            accounting._say_once(self.endpoint.role, "truncated",
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
        body = dict(req["extra"] or {})
        if ep.prompt_cache_key and not self.is_embedded:
            # Wire only: the reply does not depend on it, so the cache key leaves it out.
            body.setdefault("prompt_cache_key", prompt_cache.cache_key(req["messages"]))
        if body:
            kwargs["extra_body"] = body
        return kwargs

    def request_body(self, req: dict) -> dict:
        """The JSON body this endpoint is sent for the canonical request `req` (a Batch API line's
        body): the SDK's keyword arguments with extra_body merged in, as the SDK sends them."""
        kwargs = self._kwargs(req)
        return {**{k: v for k, v in kwargs.items() if k != "extra_body"}, **(kwargs.get("extra_body") or {})}

    def completion_from(self, body: dict, key: str, *, latency_s: float = 0.0) -> accounting.Completion:
        return completion_of(body, key, self.model, latency_s=latency_s)

    def _send(self, req: dict, key: str) -> accounting.Completion:
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
                    raise endpoints.LLMCallError(f"request {key[:16]} (role {self.endpoint.role}, model {self.model}): the "
                                       f"endpoint {self.endpoint.base_url or 'embedded'} answered with {ctype}, not a "
                                       f"chat completion: {str(resp)[:120]!r}; is the base URL the API's (it "
                                       f"usually ends in /v1)?", status=raw.status_code)
                return self.completion_from(resp.model_dump(), key, latency_s=time.perf_counter() - t0)
            except openai.APIStatusError as exc:
                if exc.status_code not in _RETRYABLE_STATUS:
                    raise endpoints.LLMCallError(f"request {key[:16]} (role {self.endpoint.role}, model "
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
        raise endpoints.LLMCallError(f"request {key[:16]} (role {self.endpoint.role}, model {self.model}) failed "
                           f"after {self.endpoint.max_retries + 1} attempts: "
                           f"{type(last_exc).__name__}: {last_exc}", status=status) from last_exc

    # -- many calls

    def complete_many(self, requests: Iterable[dict], *, desc: str | None = None,
                      concurrency: int | None = None, progress: bool = True) -> list[accounting.Completion]:
        """Run requests (each the kwargs of `complete`) with bounded concurrency, in input order.

        Identical requests are sent once. With one worker the order given is the order sent,
        so callers put requests sharing a long prefix next to each other. The first call that
        fails for good (after its retries) raises at once, as does an interrupt: requests not yet
        sent are cancelled, and a rerun finds the replies already received in the cache.
        """
        from memlife.base.progress import bar as progress_bar

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
        results: dict[str, accounting.Completion] = {}
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


def completion_of(body: dict, key: str, model: str, *, latency_s: float = 0.0,
                  batch: bool = False) -> accounting.Completion:
    """A chat.completion body (a live reply's, or a Batch API output line's) as a Completion;
    ValueError when it is not one."""
    choices = body.get("choices") if isinstance(body, dict) else None
    if not choices or not isinstance(choices, list) or not isinstance(choices[0], dict):
        raise ValueError(f"not a chat completion: {str(body)[:120]!r}")
    choice = choices[0]
    message = choice.get("message") or {}
    refusal, text = message.get("refusal"), message.get("content")
    if text is None and refusal is None and choice.get("finish_reason") not in ("length", "content_filter"):
        raise ValueError("reply has neither content nor refusal")
    u = body.get("usage") or {}
    details = u.get("prompt_tokens_details") or {}
    return accounting.Completion(text=text or "", prompt_tokens=int(u.get("prompt_tokens") or 0),
                                 completion_tokens=int(u.get("completion_tokens") or 0), cached=False,
                                 latency_s=latency_s, request_id=key, model=model,
                                 finish_reason=choice.get("finish_reason"), refusal=refusal,
                                 cached_tokens=int(details.get("cached_tokens") or 0), batch=batch)


_clients: dict[str, tuple[int, Client]] = {}  # role -> (endpoints.generation() it was made in, client)
_clients_lock = threading.Lock()


def get_client(role: str) -> Client:
    with _clients_lock:
        ep = endpoints.endpoint_for(role)
        made, cur = _clients.get(role, (None, None))
        if cur is None or cur.endpoint != ep or made != endpoints.generation():
            cur = Client(ep)
            _clients[role] = (endpoints.generation(), cur)
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


def check_paper_profile(profile: str, notebook: str | None = None) -> None:
    """The paper profile spends real money: it needs a configured endpoint, a spending cap and a
    price for every model — unless the run is replayed from recorded replies
    (MEMLIFE_LLM_MODE=replay), which sends nothing and fails on the first request the recording
    lacks. `notebook` names the track whose models apply."""
    if profile != "paper" or endpoints.mode() in ("replay", "estimate"):
        return
    endpoints.configure(profile, track=config.track_of(notebook))
    embedded = [r for r in ("reader", "judge") if not endpoints.role_configured(r)]
    if embedded:
        raise SystemExit(f"profile 'paper' needs an API endpoint for {embedded}: set MEMLIFE_BASE_URL/"
                         f"OPENAI_API_KEY or configs/paper.yaml models (README, 'Backends')")
    if endpoints.spend_cap_usd() is None:
        raise SystemExit("profile 'paper' needs a spending cap: set MEMLIFE_SPEND_CAP_USD (US dollars); the run "
                         "stops before passing it, across all its notebooks")
    unpriced = [accounting.unpriced_message(r, ep.model) for r in config.ROLES
                if not (ep := endpoints.endpoint_for(r)).is_embedded and get_client(r).price_usd(1, 1) is None]
    if unpriced:
        raise SystemExit("; ".join(unpriced))
    unknown = []
    for r in config.ROLES:
        if endpoints.role_configured(r):
            try:
                get_client(r).context_window()  # listed, configured, or asked of the server
            except endpoints.LLMError as exc:
                unknown.append(str(exc))
    if unknown:  # before the first paid call, not after hours of them
        raise SystemExit("; ".join(unknown))
