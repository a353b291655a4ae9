"""MemOS's failures are of two kinds: the extractor's reply did not parse (the model's failure, a
measurement: counted in the store's INGESTED marker, as always), or its model call got no reply
(memlife's client raised behind the proxy — the spending cap, a call failed for good, a replay
miss — or the proxy could not be reached), which stops the run and leaves the store unfinished."""
import importlib.util
import json
import sys
from pathlib import Path

import pytest

from memlife.memops.systems import baselines, managed, reading
from memlife.memops.data.schema import Instance
from memlife.models import endpoints, proxy

from conftest import completion

HERE = Path(__file__).parent
INSTANCE = Instance.model_validate(json.loads((HERE / "data" / "memops_instance.json").read_text()))
WORKER = HERE.parent / "lib" / "memlife" / "memops" / "systems" / "memos_worker.py"
CHAT = {"model": "x", "messages": [{"role": "user", "content": "extract my memories"}]}


class _RaisingClient:
    model = "fake-model"

    def __init__(self, exc):
        self.exc, self.calls = exc, 0

    def complete(self, messages, **kwargs):
        self.calls += 1
        raise self.exc


@pytest.fixture
def worker(monkeypatch):
    """memos_worker imported in this process (it points sys.stdout at stderr on import: undone)."""
    stdout = sys.stdout
    spec = importlib.util.spec_from_file_location("memlife_memos_worker_under_test", WORKER)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    finally:
        sys.stdout = stdout
    monkeypatch.setattr(module, "_open", {})
    monkeypatch.setattr(module, "_secrets", set())
    return module


# ----------------------------------------------------------------------------- the proxy


@pytest.mark.parametrize("exc, kind", [
    (endpoints.SpendingCapExceeded("spending cap $0.01: $0.0100 spent"), "spending_cap"),
    (endpoints.CacheMiss("replay mode: no recorded or cached reply for request abc"), "cache_miss"),
    (endpoints.LLMCallError("request abc failed after 6 attempts: APITimeoutError"), "call_failed"),
    (RuntimeError("a bug behind the proxy"), "internal"),
])
def test_a_forward_that_raises_is_answered_marked_recorded_and_not_retried(exc, kind):
    openai = pytest.importorskip("openai")
    client = _RaisingClient(exc)
    with proxy.start(client=client) as p:
        sdk = openai.OpenAI(base_url=p.base_url, api_key=p.token)  # the SDK's default retries
        with pytest.raises(openai.APIStatusError) as ei:
            sdk.chat.completions.create(**CHAT)
        failures = list(p.stats.failures)
    # Asked once: the SDK's own rule retries every 5xx twice, re-running memlife's retries or its refusal.
    assert client.calls == 1
    assert ei.value.status_code == 500 and ei.value.response.headers["x-should-retry"] == "false"
    assert ei.value.type == proxy.ERROR_TYPE and ei.value.code == kind
    assert ei.value.body["message"] == str(exc)
    (f,) = failures
    assert (f.id, f.kind, f.status, f.error_type, f.message) == (ei.value.body["failure"], kind, 500,
                                                                 type(exc).__name__, str(exc))
    assert f.exception is exc and p.stats.failure(f.id) is f and p.stats.failure(f.id + 1) is None


def test_an_unsupported_request_is_a_marked_bad_request():
    openai = pytest.importorskip("openai")
    client = _RaisingClient(AssertionError("never called"))
    with proxy.start(client=client) as p:
        sdk = openai.OpenAI(base_url=p.base_url, api_key=p.token)
        with pytest.raises(openai.BadRequestError) as ei:
            sdk.chat.completions.create(**CHAT, logit_bias={"1": 5})
        assert p.stats.failure(ei.value.body["failure"]).kind == "bad_request"
    assert ei.value.code == "bad_request" and client.calls == 0


# ----------------------------------------------------------------------------- the worker


class _Memory:
    """What the worker's "add" uses of a MemOS memory, its extraction one SDK call to the proxy."""

    def __init__(self, base_url, token, parse):
        import openai

        self.sdk = openai.OpenAI(base_url=base_url, api_key=token, max_retries=0)
        self.parse = parse
        self.added = []

    def extract(self, messages):
        text = self.sdk.chat.completions.create(model="x", messages=messages).choices[0].message.content
        return self.parse(text)

    def add(self, items):
        self.added.extend(items)


def _memos_parse(text):
    """MemOS general_text's reading of a reply: a reply without its "memory list" is a KeyError."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        data = {}
    return [m["value"] for m in data["memory list"]]


def _add(worker, p, memory):
    worker._open["store"] = memory
    worker._secrets.add(p.token)
    return worker.handle({"cmd": "add", "store": "store", "messages": [{"role": "user", "content": "hi"}]})


def test_worker_counts_a_reply_that_does_not_parse(worker):
    pytest.importorskip("openai")

    class Replies:
        model = "fake-model"

        def complete(self, messages, **kwargs):
            return completion("Sure! Here are the memories: none.")

    with proxy.start(client=Replies()) as p:
        out = _add(worker, p, _Memory(p.base_url, p.token, _memos_parse))
    assert out == {"added": 0, "extract_error": "KeyError: 'memory list'"}


def test_worker_raises_a_refused_call_and_names_the_proxys_failure(worker):
    openai = pytest.importorskip("openai")
    with proxy.start(client=_RaisingClient(endpoints.SpendingCapExceeded("spending cap $0.50"))) as p:
        memory = _Memory(p.base_url, p.token, _memos_parse)
        with pytest.raises(openai.APIStatusError) as ei:
            _add(worker, p, memory)
        (f,) = p.stats.failures
    assert memory.added == []
    assert worker._transport_failure(ei.value) == {"kind": "spending_cap", "status": 500, "failure": f.id,
                                                   "message": "spending cap $0.50"}
    # However MemOS wraps it (a retry, an error raised while handling it), it is still found.
    try:
        try:
            raise ei.value
        except Exception as inner:
            raise KeyError("memory list") from inner
    except KeyError as outer:
        assert worker._transport_failure(outer)["failure"] == f.id
    assert worker._transport_failure(KeyError("memory list")) is None
    assert worker._transport_failure(json.JSONDecodeError("Expecting value", "", 0)) is None


def test_worker_blanks_the_token_in_the_proxys_reason(worker):
    openai = pytest.importorskip("openai")
    client = _RaisingClient(None)
    with proxy.start(client=client) as p:
        client.exc = endpoints.LLMCallError(f"HTTP 401: a library quoted its config, api_key={p.token}")
        with pytest.raises(openai.APIStatusError) as ei:
            _add(worker, p, _Memory(p.base_url, p.token, _memos_parse))
    failure = worker._transport_failure(ei.value)
    assert failure["kind"] == "call_failed"
    assert failure["message"] == "HTTP 401: a library quoted its config, api_key=[token]"


def test_worker_raises_when_the_proxy_cannot_be_reached(worker):
    openai = pytest.importorskip("openai")
    p = proxy.start(client=_RaisingClient(AssertionError("never called")))
    p.close()
    with pytest.raises(openai.APIConnectionError) as ei:
        _add(worker, p, _Memory(p.base_url, p.token, _memos_parse))
    failure = worker._transport_failure(ei.value)
    assert (failure["kind"], failure["status"], failure["failure"]) == ("connection", None, None)
    assert "Connection" in failure["message"]


# ----------------------------------------------------------------------------- MemOS itself

sys.path.insert(0, str(HERE))
import _memops_fake_server  # noqa: E402
from _memops_fake_server import FakeServer  # noqa: E402

# Found before isolated_llm moves MEMLIFE_ROOT (and with it the repository root) to a tmp_path.
MEMOS_PYTHON = managed.memos_python()


@pytest.fixture
def memos_env(isolated_llm, monkeypatch):
    if not MEMOS_PYTHON.is_file():
        pytest.skip("the MemOS environment is not installed (`make memos-env`)")
    for var, value in (("HF_HUB_OFFLINE", "1"), ("TRANSFORMERS_OFFLINE", "1"),
                       ("MEMLIFE_MEMOS_PYTHON", str(MEMOS_PYTHON))):
        monkeypatch.setenv(var, value)
    srv = FakeServer()
    yield isolated_llm, srv
    srv.close()


def _memos(llm_, srv, root, *, cap=None):
    """A MemOS system as a run makes one: its reader a priced model, so the spending cap applies."""
    endpoints.configure(None, run="pytest", spend_cap_usd=cap, models={"reader": {
        "base_url": srv.base_url, "model": "gpt-4o-mini", "timeout_s": 5, "max_retries": 0}})
    return managed.MemOSSystem(reading.Reader(llm_.get_client("reader")), root, top_k=5)


@pytest.mark.slow
def test_a_cap_refusal_mid_ingest_stops_the_run_and_a_rerun_resumes(memos_env, tmp_path):
    llm_, srv = memos_env
    h = reading.history_for(INSTANCE, "adjacent")
    root = tmp_path / "stores"
    marker = baselines.IngestMarker(baselines.store_dir(root, "memos", h.history_id))

    # The first session's extraction is already in the cache (another history began the same way).
    s = _memos(llm_, srv, root)
    try:
        s.ingest(reading.History("warm@adjacent", "adjacent", h.sessions[:1]))
    finally:
        s.close()
    assert len(srv.requests) == 1

    # The cap refuses the second session's extraction: the ingest stops, the store is unfinished.
    s = _memos(llm_, srv, root, cap=1e-9)
    try:
        with pytest.raises(managed.MemOSCallError) as ei:
            s.ingest(h)
        token, failures = s._proxy.token, list(s._proxy.stats.failures)
    finally:
        s.close()
    err = ei.value
    assert isinstance(err, endpoints.LLMError) and isinstance(err.__cause__, endpoints.SpendingCapExceeded)
    assert (err.kind, err.cmd, err.history_id) == ("spending_cap", "add", h.history_id)
    assert err.store == str(marker.directory)
    message = str(err)
    for part in ("MemOS add of session 2 of 3", h.history_id, str(marker.directory), "spending cap",
                 str(err.__cause__)):
        assert part in message
    assert token not in message
    assert [f.kind for f in failures] == ["spending_cap"]  # refused once, not retried
    assert not marker.done()
    assert len(srv.requests) == 1  # session 1 from the cache, session 2 refused before the model

    # The rerun: session 1 is not asked again, and the store is whole.
    s = _memos(llm_, srv, root)
    try:
        s.ingest(h)
        memories = s.memories(h)
    finally:
        s.close()
    assert len(srv.requests) == 3 and len(set(srv.requests)) == 3
    info = marker.read()
    assert info["memories_added"] == [1, 1, 1] and info["extract_errors"] == [] and len(memories) == 3


@pytest.mark.slow
def test_a_reply_that_does_not_parse_is_counted_as_before(memos_env, tmp_path, monkeypatch):
    llm_, srv = memos_env
    real = _memops_fake_server.reply_for

    def reply_for(messages, response_format):
        text = "\n".join(str(m.get("content", "")) for m in messages)
        return "I could not find any memories." if "memory list" in text else real(messages, response_format)

    monkeypatch.setattr(_memops_fake_server, "reply_for", reply_for)
    h = reading.history_for(INSTANCE, "adjacent")
    s = _memos(llm_, srv, tmp_path / "stores")
    try:
        s.ingest(h)
        errors = s._proxy.stats.errors
        memories = s.memories(h)
    finally:
        s.close()
    info = baselines.IngestMarker(baselines.store_dir(tmp_path / "stores", "memos", h.history_id)).read()
    assert info["memories_added"] == [0, 0, 0] and memories == []
    assert info["extract_errors"] == ["KeyError: 'memory list'"] * 3
    assert errors == 0 and len(srv.requests) == 3  # every reply was given, once


@pytest.mark.slow
def test_a_proxy_that_cannot_be_reached_stops_the_ingest(memos_env, tmp_path):
    llm_, srv = memos_env
    h = reading.history_for(INSTANCE, "adjacent")
    s = _memos(llm_, srv, tmp_path / "stores")
    try:
        s._worker()
        s._proxy.close()  # the worker keeps the proxy's address; nothing answers there now
        with pytest.raises(managed.MemOSCallError) as ei:
            s.ingest(h)
    finally:
        s.close()
    assert ei.value.kind == "connection" and ei.value.__cause__ is None
    assert "MemOS add of session 1 of 3" in str(ei.value) and "could not reach the memlife proxy" in str(ei.value)
    assert not baselines.IngestMarker(baselines.store_dir(tmp_path / "stores", "memos", h.history_id)).done()
    assert srv.requests == []
