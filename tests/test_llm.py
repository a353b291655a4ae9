"""The model layer against a real loopback HTTP server that injects faults."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest
from pydantic import BaseModel

from memlife.models import accounting, endpoints, llm, reply_cache

from conftest import point_at

MSG = lambda text: [{"role": "system", "content": "be brief"}, {"role": "user", "content": text}]  # noqa: E731


def test_ok_reply_is_cached_and_second_call_sends_nothing(isolated_llm, fault_server):
    c = point_at(isolated_llm, fault_server)
    a = c.complete(MSG("hello"), max_tokens=8)
    b = c.complete(MSG("hello"), max_tokens=8)
    assert a.text == b.text == "echo: hello"
    assert (a.cached, b.cached) == (False, True)
    assert a.request_id == b.request_id
    assert fault_server.received["hello"] == 1
    u = accounting.usage()
    assert (u.calls, u.cached_calls) == (2, 1)


def test_cache_key_covers_the_whole_request(isolated_llm, fault_server):
    c = point_at(isolated_llm, fault_server)
    c.complete(MSG("k"), max_tokens=8)
    c.complete(MSG("k"), max_tokens=9)
    c.complete(MSG("k"), max_tokens=8, temperature=0.5)
    c.complete(MSG("k"), max_tokens=8, seed=1)
    assert fault_server.received["k"] == 4


def test_429_with_retry_after_is_honoured(isolated_llm, fault_server):
    c = point_at(isolated_llm, fault_server)
    fault_server.script("rl", ("429", 1))
    t0 = time.monotonic()
    out = c.complete(MSG("rl"), max_tokens=8)
    assert out.text == "echo: rl"
    assert time.monotonic() - t0 >= 0.95  # waited the server's Retry-After, not a short backoff
    assert fault_server.received["rl"] == 2


@pytest.mark.parametrize("fault", ["500", "503", ("sleep", 3.0), "truncated"])
def test_transient_faults_are_retried(isolated_llm, fault_server, fault):
    c = point_at(isolated_llm, fault_server)
    fault_server.script("flaky", fault)
    out = c.complete(MSG("flaky"), max_tokens=8)
    assert out.text == "echo: flaky"
    assert fault_server.received["flaky"] == 2


def test_persistent_failure_raises_with_request_id_and_caches_nothing(isolated_llm, fault_server):
    c = point_at(isolated_llm, fault_server)
    fault_server.script("down", "500", "500", "500", "500")  # max_retries=3: four attempts
    with pytest.raises(endpoints.LLMCallError) as err:
        c.complete(MSG("down"), max_tokens=8)
    req, key = c._build(MSG("down"), 8, 0.0, 0, None, None, None)
    assert key[:16] in str(err.value)
    assert reply_cache.cache_get(key) is None
    # the server recovers: the next call is sent again, not answered from a cached failure
    assert c.complete(MSG("down"), max_tokens=8).cached is False
    assert fault_server.received["down"] == 5


def test_client_error_is_not_retried(isolated_llm, fault_server):
    c = point_at(isolated_llm, fault_server)
    fault_server.script("bad", "400")
    with pytest.raises(endpoints.LLMCallError, match="HTTP 400"):
        c.complete(MSG("bad"), max_tokens=8)
    assert fault_server.received["bad"] == 1


def test_judge_reply_that_is_not_a_label_is_invalid(isolated_llm, fault_server):
    c = point_at(isolated_llm, fault_server, role="judge")
    fault_server.script("grade me", ("text", "The answer is mostly CORRECT"))
    reply = c.complete(MSG("grade me"), max_tokens=16)
    assert llm.parse_label(reply.text) is None


@pytest.mark.parametrize("text,label", [
    ("CORRECT", "CORRECT"), ("INCORRECT", "INCORRECT"), (" correct.\n", "CORRECT"),
    ("**INCORRECT**", "INCORRECT"), ("INCORRECT because", None), ("not CORRECT", None),
    ("CORRECT INCORRECT", None), ("", None), ("yes", None),
])
def test_parse_label_is_strict(text, label):
    from memlife.models import llm

    assert llm.parse_label(text) == label


def test_replay_mode_fails_on_a_miss_naming_the_request(isolated_llm, fault_server, monkeypatch):
    c = point_at(isolated_llm, fault_server)
    c.complete(MSG("seen"), max_tokens=8)
    monkeypatch.setenv("MEMLIFE_LLM_MODE", "replay")
    assert c.complete(MSG("seen"), max_tokens=8).cached
    with pytest.raises(endpoints.CacheMiss, match="unseen"):
        c.complete(MSG("unseen"), max_tokens=8)
    assert fault_server.received["unseen"] == 0


def test_refresh_mode_resends(isolated_llm, fault_server, monkeypatch):
    c = point_at(isolated_llm, fault_server)
    c.complete(MSG("again"), max_tokens=8)
    monkeypatch.setenv("MEMLIFE_LLM_MODE", "refresh")
    assert c.complete(MSG("again"), max_tokens=8).cached is False
    assert fault_server.received["again"] == 2


class Verdict(BaseModel):
    answer: str
    confidence: int


def test_complete_json_parses_strictly(isolated_llm, fault_server):
    c = point_at(isolated_llm, fault_server)
    fault_server.script("j1", ("text", '{"answer": "Paris", "confidence": 3}'))
    fault_server.script("j2", ("text", 'Sure! {"answer": "Paris", "confidence": 3}'))
    fault_server.script("j3", ("text", '```json\n{"answer": "Rome", "confidence": 1}\n```'))
    ok, _ = c.complete_json(MSG("j1"), schema=Verdict, max_tokens=32)
    bad, comp = c.complete_json(MSG("j2"), schema=Verdict, max_tokens=32)
    fenced, _ = c.complete_json(MSG("j3"), schema=Verdict, max_tokens=32)
    assert ok == Verdict(answer="Paris", confidence=3)
    assert bad is None and "Verdict" in comp.error
    assert fenced.answer == "Rome"


def test_complete_many_keeps_order_and_sends_duplicates_once(isolated_llm, fault_server):
    c = point_at(isolated_llm, fault_server, concurrency=4)
    prompts = [f"p{i % 5}" for i in range(20)]
    out = c.complete_many([dict(messages=MSG(p), max_tokens=8) for p in prompts], progress=False)
    assert [o.text for o in out] == [f"echo: {p}" for p in prompts]
    assert all(fault_server.received[f"p{i}"] == 1 for i in range(5))


def test_spending_cap_stops_before_the_call(isolated_llm, fault_server):
    c = point_at(isolated_llm, fault_server, model="gpt-4o")
    endpoints._settings["spend_cap_usd"] = 1e-7
    with pytest.raises(endpoints.SpendingCapExceeded):
        c.complete(MSG("expensive"), max_tokens=500)
    assert fault_server.received["expensive"] == 0


def test_prices_and_usage_summary(isolated_llm, fault_server, tmp_path):
    assert accounting.price_usd("gpt-4o-mini", 1_000_000, 0) == pytest.approx(0.15)
    assert accounting.price_usd("gpt-4o-mini-2024-07-18", 0, 1_000_000) == pytest.approx(0.60)
    assert accounting.price_usd("smollm2-135m-instruct-q4_1", 10**6, 10**6) == 0.0
    assert accounting.price_usd("some-local-model", 10, 10) is None
    c = point_at(isolated_llm, fault_server, model="gpt-4o-mini")
    c.complete(MSG("one two three"), max_tokens=8)
    c.complete(MSG("one two three"), max_tokens=8)
    s = accounting.summarize_calls(tmp_path / "results" / "usage" / "pytest.calls.jsonl")
    assert (s["calls"], s["cached_calls"]) == (2, 1)
    assert s["prompt_tokens"] == 2 * 5 and s["usd_estimate"] > 0


def test_api_key_is_sent_but_never_stored(isolated_llm, fault_server, monkeypatch, tmp_path):
    secret = "sk-test-DO-NOT-STORE-0123456789abcdef"
    monkeypatch.setenv("MEMLIFE_API_KEY", secret)
    c = point_at(isolated_llm, fault_server)
    c.complete(MSG("secret check"), max_tokens=8)
    assert fault_server.auth_headers[-1] == f"Bearer {secret}"
    reply_cache._cache().close()
    for p in tmp_path.rglob("*"):
        if p.is_file():
            assert secret.encode() not in p.read_bytes(), p


def test_embedded_server_key_is_sent_but_never_stored_nor_in_the_cache_key(isolated_llm, fault_server,
                                                                           monkeypatch, tmp_path):
    """The embedded server's per-start key authenticates every call, and the cache key is what it
    was before the server had a key: the same request, the same key, whatever the server's key."""
    from memlife.models import serve

    secret = serve.new_api_key()
    port = int(fault_server.base_url.rsplit(":", 1)[1].split("/")[0])
    monkeypatch.setattr(serve, "ensure_server", lambda **kw: serve.Server(
        base_url=fault_server.base_url, port=port, pid=os.getpid(), api_key=secret))
    monkeypatch.setattr(serve, "model_fingerprint", lambda: serve.MODEL_ALIAS + "@1:0123abcd")
    c = llm.get_client("reader")
    assert c.is_embedded
    out = c.complete(MSG("embedded key check"), max_tokens=8)
    assert fault_server.auth_headers[-1] == f"Bearer {secret}"
    req = reply_cache.canonical_request(serve.MODEL_ALIAS + "@1:0123abcd", MSG("embedded key check"),
                                         max_tokens=8, temperature=0.0, seed=0, response_format=None, stop=None)
    assert out.request_id == reply_cache.request_key(req)
    assert secret not in json.dumps(req)
    reply_cache._cache().close()
    scanned = 0
    for f in tmp_path.rglob("*"):
        if f.is_file():
            scanned += 1
            assert secret.encode() not in f.read_bytes(), f
    assert scanned >= 2  # the cache and the usage log


SCRIPT = r"""
import json, sys
from memlife.models import endpoints, llm
endpoints.configure(None, run="killtest", models={"reader": {"base_url": sys.argv[1], "model": "fake",
              "timeout_s": 5, "max_retries": 2, "concurrency": 4}})
c = llm.get_client("reader")
out = c.complete_many([dict(messages=[{"role": "user", "content": f"q{i:03d}"}], max_tokens=8)
                       for i in range(int(sys.argv[2]))], progress=False)
json.dump([o.text for o in out], open(sys.argv[3], "w"))
"""


def _run_script(tmp_path, env, url, n, out, wait=True):
    script = tmp_path / "many.py"
    script.write_text(SCRIPT)
    p = subprocess.Popen([sys.executable, str(script), url, str(n), str(out)], env=env)
    if wait:
        assert p.wait(timeout=120) == 0
    return p


def test_sigkill_halfway_then_rerun_repeats_no_cached_request(tmp_path):
    from faultserver import FaultServer

    n = 40
    env = {**os.environ, "MEMLIFE_ROOT": str(tmp_path), "MEMLIFE_CACHE_DIR": str(tmp_path / "cache")}
    with FaultServer(delay_s=0.05) as srv:
        p = _run_script(tmp_path, env, srv.base_url, n, tmp_path / "a.json", wait=False)
        deadline = time.monotonic() + 60
        while sum(srv.received.values()) < n // 2:
            assert time.monotonic() < deadline and p.poll() is None
            time.sleep(0.01)
        p.send_signal(signal.SIGKILL)
        p.wait()
        assert not (tmp_path / "a.json").exists()
        before = dict(srv.received)

        import diskcache

        from memlife.models import reply_cache

        with diskcache.Cache(str(tmp_path / "cache" / "llm")) as cache:
            cached_keys = set(cache.iterkeys())
        assert 0 < len(cached_keys) < n
        _run_script(tmp_path, env, srv.base_url, n, tmp_path / "a.json")
        resent = {k: v - before.get(k, 0) for k, v in srv.received.items()}
        for i in range(n):
            prompt = f"q{i:03d}"
            req = reply_cache.canonical_request("fake", [{"role": "user", "content": prompt}], max_tokens=8,
                                        temperature=0.0, seed=0, response_format=None, stop=None)
            if reply_cache.request_key(req) in cached_keys:
                assert resent.get(prompt, 0) == 0, f"{prompt} was cached yet sent again"
        assert sum(srv.received.values()) < n + 8  # only the few in flight at the kill are repeated

    # an uninterrupted run with an empty cache gives the same outputs
    env2 = {**env, "MEMLIFE_CACHE_DIR": str(tmp_path / "cache2")}
    with FaultServer() as srv2:
        _run_script(tmp_path, env2, srv2.base_url, n, tmp_path / "b.json")
    assert json.loads((tmp_path / "a.json").read_text()) == json.loads((tmp_path / "b.json").read_text())


def test_complete_many_stops_sending_at_the_first_hard_failure(isolated_llm, fault_server):
    """A request that fails for good raises at once; what was still queued is never sent, and what
    was answered is cached, so the rerun sends only what is missing."""
    c = point_at(isolated_llm, fault_server, concurrency=2)
    fault_server.delay_s = 0.2
    fault_server.script("p0", "400")
    prompts = [f"p{i}" for i in range(12)]
    with pytest.raises(endpoints.LLMCallError, match="BadRequest|400"):
        c.complete_many([dict(messages=MSG(p), max_tokens=8) for p in prompts], progress=False)
    sent = sum(fault_server.received[p] for p in prompts)
    assert sent < len(prompts)  # the queue was cancelled, not drained
    answered = sent - 1
    fault_server.received.clear()
    out = c.complete_many([dict(messages=MSG(p), max_tokens=8) for p in prompts], progress=False)
    assert [o.text for o in out] == [f"echo: {p}" for p in prompts]
    assert sum(fault_server.received[p] for p in prompts) == len(prompts) - answered


def test_configure_gives_fresh_clients_even_for_the_same_endpoint(isolated_llm):
    first = llm.get_client("reader")
    assert llm.get_client("reader") is first  # one client per role between configures
    endpoints.configure(None, run="pytest", models={})
    assert llm.get_client("reader") is not first
