"""MemOS worker: runs under the isolated .venv-memos interpreter, speaks JSON lines on stdio.

MemOS (PyPI `MemoryOS`) pins openai<2 and transformers<5, which conflict with memlife's pins,
so it lives in its own environment and memlife drives it through this process. Requests, one
JSON object per line on stdin; one reply per line on stdout ({"ok": true, ...} or
{"ok": false, "error": ...}):

  {"cmd": "hello"}
  {"cmd": "add",    "store": DIR, "base_url": URL, "api_key": TOKEN, "model": M, "embedder": PATH,
                    "messages": [...]}
  {"cmd": "search", ...same..., "query": Q, "top_k": K}
  {"cmd": "all",    ...same...}
  {"cmd": "drop",   ...same...}     close the store (the caller then deletes DIR)
  {"cmd": "quit"}

A call that fails because MemOS's model call did not get an answer — the memlife proxy answered
an HTTP error (memlife's client raised: the spending cap, a call that failed for good, a replay
miss) or the proxy could not be reached — is replied {"ok": false, "error": ..., "transport":
{"kind", "status", "failure", "message"}}: `failure` is the proxy's number for it (its
ProxyStats.failures), `kind` its code, or "connection" / "timeout" / "http_<status>". Only a
reply the extractor did get and that does not parse is the model's failure: "add" then answers
{"ok": true, "added": 0, "extract_error": ...}.

The memory is MemOS's `general_text` textual memory: the MemOS extractor LLM (pointed at the
memlife proxy) turns each session into memory items, the local MiniLM embeds them, and a local
Qdrant collection under DIR stores them. This file imports nothing from memlife. (The tests'
network audit reaches this process through its environment: tests/audit_site/.)

TOKEN is the proxy's per-run bearer token, the extractor's API key. It is a secret: it arrives
only on stdin, and every error this worker reports or prints has it blanked out first.
"""
import json
import os
import sys
import traceback

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

_REAL_STDOUT = sys.stdout
sys.stdout = sys.stderr  # the library's prints must not corrupt the protocol

_open = {}
_secrets = set()  # every token seen on stdin: blanked out of whatever this worker reports


def _redact(text):
    for secret in _secrets:
        text = text.replace(secret, "[token]")
    return text


# The error bodies the memlife proxy marks as its own (memlife.models.proxy.ERROR_TYPE and its refusals).
_PROXY_ERROR_TYPES = ("memlife_proxy_error", "memlife_proxy_refused")


def _causes(exc):
    """`exc` and the exceptions it came from: raised from, raised while handling, or retried."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        nxt = exc.__cause__ or exc.__context__
        last = getattr(exc, "last_attempt", None)  # tenacity's RetryError keeps the last failure
        if nxt is None and last is not None and hasattr(last, "exception"):
            nxt = last.exception()
        exc = nxt


def _transport_failure(exc):
    """What went wrong between MemOS and the model, when `exc` comes from the openai SDK failing
    to get a completion (an HTTP error from the proxy, a connection that failed, a body that is
    not a completion); None otherwise. Told by the exception's class and the proxy's marked body,
    never by message text: MemOS's own errors (a reply it cannot parse) are not openai's."""
    import openai  # MemOS's own client library: always there where MemOS is

    for e in _causes(exc):
        if isinstance(e, openai.APIStatusError):
            body = e.body if isinstance(e.body, dict) else {}
            marked = body.get("type") in _PROXY_ERROR_TYPES
            kind = str(body["code"]) if marked and body.get("code") else f"http_{e.status_code}"
            return {"kind": kind, "status": e.status_code, "failure": body.get("failure") if marked else None,
                    "message": _redact(str(body.get("message") or e.message))[:500]}
        if isinstance(e, openai.APIConnectionError):  # a timeout is one too
            cause = f" ({type(e.__cause__).__name__}: {e.__cause__})" if e.__cause__ is not None else ""
            return {"kind": "timeout" if isinstance(e, openai.APITimeoutError) else "connection",
                    "status": None, "failure": None, "message": _redact(f"{e}{cause}")[:500]}
        if isinstance(e, openai.APIError):
            return {"kind": "bad_response", "status": None, "failure": None,
                    "message": _redact(f"{type(e).__name__}: {e}")[:500]}
    return None


def _memory(req):
    store = req["store"]
    if store in _open:
        return _open[store]
    from memos.configs.memory import MemoryConfigFactory
    from memos.memories.factory import MemoryFactory

    os.makedirs(store, exist_ok=True)
    config = MemoryConfigFactory(
        backend="general_text",
        config={
            "extractor_llm": {"backend": "openai", "config": {
                "model_name_or_path": req["model"], "api_key": req["api_key"], "api_base": req["base_url"],
                "temperature": 0.0, "max_tokens": int(req.get("max_tokens", 384)), "top_p": 1.0}},
            "vector_db": {"backend": "qdrant", "config": {
                "collection_name": "memops", "vector_dimension": 384, "distance_metric": "cosine",
                "path": os.path.join(store, "qdrant")}},
            "embedder": {"backend": "sentence_transformer", "config": {
                "model_name_or_path": req["embedder"], "trust_remote_code": False}},
        },
    )
    _open[store] = MemoryFactory.from_config(config)
    return _open[store]


def _close(store):
    m = _open.pop(store, None)
    if m is not None:
        client = getattr(getattr(m, "vector_db", None), "client", None)
        if client is not None and hasattr(client, "close"):
            client.close()


def handle(req):
    cmd = req.get("cmd")
    if cmd == "hello":
        import memos

        return {"version": getattr(memos, "__version__", "?")}
    if cmd == "drop":
        _close(req["store"])
        return {}
    if cmd == "add":
        m = _memory(req)
        try:
            items = m.extract(req["messages"])
        except Exception as exc:  # MemOS retries a JSON decode error 3 times, then raises
            if _transport_failure(exc) is not None:
                raise  # no reply to measure: the call fails, and the store is left unfinished
            return {"added": 0, "extract_error": _redact(f"{type(exc).__name__}: {exc}")[:500]}
        if items:
            m.add(items)
        return {"added": len(items)}
    if cmd == "search":
        hits = _memory(req).search(req["query"], top_k=int(req["top_k"]))
        return {"memories": [h.memory for h in hits]}
    if cmd == "all":
        return {"memories": sorted(h.memory for h in _memory(req).get_all())}
    raise ValueError(f"unknown cmd {cmd!r}")


def main():
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        if req.get("api_key"):
            _secrets.add(req["api_key"])
        if req.get("cmd") == "quit":
            for store in list(_open):
                _close(store)
            _REAL_STDOUT.write(json.dumps({"ok": True}) + "\n")
            _REAL_STDOUT.flush()
            return
        try:
            out = {"ok": True, **handle(req)}
        except Exception as exc:
            # A library's error may quote its config, key included (stderr reaches the notebook).
            sys.stderr.write(_redact(traceback.format_exc()))
            out = {"ok": False, "error": _redact(f"{type(exc).__name__}: {exc}")}
            transport = _transport_failure(exc)
            if transport is not None:
                out["transport"] = transport
        _REAL_STDOUT.write(json.dumps(out) + "\n")
        _REAL_STDOUT.flush()


if __name__ == "__main__":
    main()
