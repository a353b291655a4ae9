"""The loopback proxy forwards OpenAI-style requests through a memlife client, and only that."""
import json
import urllib.error
import urllib.request
from dataclasses import dataclass

import pytest

from memlife import proxy


@dataclass
class _Completion:
    text: str
    prompt_tokens: int = 7
    completion_tokens: int = 3
    request_id: str = "r1"


class _RecordingClient:
    model = "fake-model"

    def __init__(self):
        self.calls = []

    def complete(self, messages, **kwargs):
        self.calls.append((messages, kwargs))
        return _Completion(text="echo:" + messages[-1]["content"])


def _post(url, payload):
    req = urllib.request.Request(url, data=json.dumps(payload).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=5) as r:
        return json.loads(r.read())


def test_chat_completion_goes_through_the_client():
    client = _RecordingClient()
    with proxy.start(client=client) as p:
        assert p.base_url.startswith("http://127.0.0.1:")
        out = _post(p.base_url + "/chat/completions", {
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
        sdk = openai.OpenAI(base_url=p.base_url, api_key="unused")
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
                _post(p.base_url + "/chat/completions", bad)
            assert ei.value.code == 400
        assert p.stats.errors == 3 and p.stats.requests == 0
    assert client.calls == []


def test_binds_loopback_only():
    with proxy.start(client=_RecordingClient()) as p:
        assert p._server.server_address[0] == "127.0.0.1"
