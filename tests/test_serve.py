"""The embedded model: a real llama-server, the real SmolLM2 GGUF, through the openai client."""
import json

import pytest

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def server():
    from memlife import serve

    return serve.ensure_server()


def test_server_serves_the_embedded_model(server):
    import openai

    from memlife import serve

    client = openai.OpenAI(base_url=server.base_url, api_key="unused")
    assert serve.MODEL_ALIAS in [m.id for m in client.models.list().data]
    r = client.chat.completions.create(
        model=serve.MODEL_ALIAS, temperature=0, max_tokens=16, seed=0,
        messages=[{"role": "user", "content": "Say hello."}])
    assert r.choices[0].message.content.strip()
    assert r.usage.prompt_tokens > 0 and r.usage.completion_tokens > 0


def test_json_schema_response_format_is_honoured(server):
    import openai

    from memlife import serve

    schema = {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
              "required": ["city", "days"], "additionalProperties": False}
    client = openai.OpenAI(base_url=server.base_url, api_key="unused")
    r = client.chat.completions.create(
        model=serve.MODEL_ALIAS, temperature=0, max_tokens=40, seed=0,
        response_format={"type": "json_schema", "json_schema": {"name": "trip", "schema": schema, "strict": True}},
        messages=[{"role": "user", "content": "I am going to Oslo for 3 days. Give city and days."}])
    obj = json.loads(r.choices[0].message.content)
    assert set(obj) == {"city", "days"} and isinstance(obj["days"], int)


def test_server_is_reused_not_restarted(server):
    from memlife import serve

    assert serve.ensure_server().pid == server.pid


def test_greedy_decoding_is_deterministic(server):
    from memlife import llm

    c = llm.get_client("reader")
    msgs = [{"role": "user", "content": "Name three colours."}]
    req, key = c._build(msgs, 20, 0.0, 0, None, None, None)
    a = c._send(req, key)
    b = c._send(req, key)
    assert a.text == b.text
