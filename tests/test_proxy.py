"""The loopback proxy forwards OpenAI-style requests through a memlife client, and only that."""
import http.client
import json
import urllib.error
import urllib.parse
import urllib.request

import pytest

from memlife.models import proxy

from conftest import completion


class _RecordingClient:
    model = "fake-model"

    def __init__(self):
        self.calls = []

    def complete(self, messages, **kwargs):
        self.calls.append((messages, kwargs))
        return completion("echo:" + messages[-1]["content"])


def _post(url, payload, token, **headers):
    req = urllib.request.Request(url, data=json.dumps(payload).encode(),
                                 headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}",
                                          **headers})
    with urllib.request.urlopen(req, timeout=5) as r:
        return json.loads(r.read())


def _status(url, *, data=None, headers=None):
    """The HTTP status of one request, sending exactly `headers` (urllib would add a type)."""
    u = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=5)
    try:
        conn.request("POST" if data is not None else "GET", u.path, body=data, headers=headers or {})
        r = conn.getresponse()
        r.read()
        return r.status
    finally:
        conn.close()


CHAT = {"model": "x", "messages": [{"role": "user", "content": "spend my money"}]}


def test_chat_completion_goes_through_the_client():
    client = _RecordingClient()
    with proxy.start(client=client) as p:
        assert p.base_url.startswith("http://127.0.0.1:")
        out = _post(p.base_url + "/chat/completions", token=p.token, payload={
            "model": "whatever", "temperature": 0.1, "max_tokens": 50,
            "response_format": {"type": "json_object"},
            "messages": [{"role": "system", "content": "sys"},
                         {"role": "user", "content": [{"type": "text", "text": "hello"}]}]})
        assert p.stats.requests == 1
    assert out["choices"][0]["message"]["content"] == "echo:hello"
    assert out["usage"] == {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}
    messages, kwargs = client.calls[0]
    assert messages == [{"role": "system", "content": "sys"}, {"role": "user", "content": "hello"}]
    assert kwargs == {"max_tokens": 50, "temperature": 0.1, "response_format": {"type": "json_object"}}


def test_openai_sdk_talks_to_the_proxy():
    openai = pytest.importorskip("openai")
    client = _RecordingClient()
    with proxy.start(client=client) as p:
        sdk = openai.OpenAI(base_url=p.base_url, api_key=p.token)
        r = sdk.chat.completions.create(model="x", messages=[{"role": "user", "content": "ping"}])
        models = sdk.models.list()
    assert r.choices[0].message.content == "echo:ping"
    assert [m.id for m in models.data] == ["fake-model"]


def test_unsupported_requests_fail_loudly_and_are_counted():
    client = _RecordingClient()
    with proxy.start(client=client) as p:
        for bad in ({"messages": [{"role": "user", "content": "x"}], "stream": True},
                    {"messages": [{"role": "user", "content": "x"}], "logit_bias": {"1": 5}},
                    {"messages": []}):
            with pytest.raises(urllib.error.HTTPError) as ei:
                _post(p.base_url + "/chat/completions", bad, p.token)
            assert ei.value.code == 400
        assert p.stats.errors == 3 and p.stats.requests == 0
    assert client.calls == []


def test_binds_loopback_only():
    with proxy.start(client=_RecordingClient()) as p:
        assert p._server.server_address[0] == "127.0.0.1"


def test_requests_without_the_token_json_or_with_an_origin_are_refused_before_any_call():
    client = _RecordingClient()
    url_of = lambda p: p.base_url + "/chat/completions"  # noqa: E731
    body = json.dumps(CHAT).encode()
    with proxy.start(client=client) as p:
        good = {"Content-Type": "application/json", "Authorization": f"Bearer {p.token}"}
        cases = [
            (401, {"Content-Type": "application/json"}),                                  # no token
            (401, {**good, "Authorization": "Bearer " + p.token[:-1] + "x"}),             # wrong token
            (401, {**good, "Authorization": p.token}),                                    # no Bearer scheme
            (401, {**good, "Authorization": "Basic " + p.token}),
            (415, {**good, "Content-Type": "text/plain"}),                                # a cross-site form's type
            (415, {"Authorization": good["Authorization"]}),                              # no type at all
            (415, {**good, "Content-Type": "application/x-www-form-urlencoded"}),
            (403, {**good, "Origin": "https://evil.example"}),                            # a web page
            (403, {**good, "Origin": "null"}),
        ]
        for want, headers in cases:
            assert _status(url_of(p), data=body, headers=headers) == want, headers
        # The model list is behind the token too, and a page cannot read it either.
        assert _status(p.base_url + "/models") == 401
        assert _status(p.base_url + "/models", headers={**good, "Origin": "http://localhost"}) == 403
        assert p.stats.refused == len(cases) + 2
        assert p.stats.requests == 0 and p.stats.errors == 0
        assert client.calls == []  # no refusal reached the model
        # ... and the proxy still serves the project afterwards, charset parameter and all.
        assert _status(url_of(p), data=body, headers={**good, "Content-Type": "application/json; charset=utf-8"}) == 200
    assert len(client.calls) == 1


def test_the_openai_sdk_with_another_key_is_refused():
    openai = pytest.importorskip("openai")
    client = _RecordingClient()
    with proxy.start(client=client) as p:
        sdk = openai.OpenAI(base_url=p.base_url, api_key="sk-some-other-process", max_retries=0)
        with pytest.raises(openai.AuthenticationError):
            sdk.chat.completions.create(model="x", messages=[{"role": "user", "content": "ping"}])
    assert client.calls == []


def test_each_proxy_draws_its_own_token_and_never_shows_it():
    with proxy.start(client=_RecordingClient()) as a, proxy.start(client=_RecordingClient()) as b:
        assert a.token != b.token and len(a.token) >= 40  # 32 random bytes, url-safe base64
        for p in (a, b):
            assert p.token not in repr(p) + repr(p.stats) + p.base_url
        # One proxy's token opens no other proxy.
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {a.token}"}
        assert _status(b.base_url + "/chat/completions", data=json.dumps(CHAT).encode(), headers=headers) == 401
