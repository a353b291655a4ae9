"""The embedded model: a real llama-server, the real SmolLM2 GGUF, through the openai client."""
import json

import pytest

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def server():
    from memlife.models import serve

    return serve.ensure_server()


def test_server_serves_the_embedded_model(server):
    import openai

    from memlife.models import serve

    client = openai.OpenAI(base_url=server.base_url, api_key=server.api_key)
    assert serve.MODEL_ALIAS in [m.id for m in client.models.list().data]
    r = client.chat.completions.create(
        model=serve.MODEL_ALIAS, temperature=0, max_tokens=16, seed=0,
        messages=[{"role": "user", "content": "Say hello."}])
    assert r.choices[0].message.content.strip()
    assert r.usage.prompt_tokens > 0 and r.usage.completion_tokens > 0


def test_json_schema_response_format_is_honoured(server):
    import openai

    from memlife.models import serve

    schema = {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
              "required": ["city", "days"], "additionalProperties": False}
    client = openai.OpenAI(base_url=server.base_url, api_key=server.api_key)
    r = client.chat.completions.create(
        model=serve.MODEL_ALIAS, temperature=0, max_tokens=40, seed=0,
        response_format={"type": "json_schema", "json_schema": {"name": "trip", "schema": schema, "strict": True}},
        messages=[{"role": "user", "content": "I am going to Oslo for 3 days. Give city and days."}])
    obj = json.loads(r.choices[0].message.content)
    assert set(obj) == {"city", "days"} and isinstance(obj["days"], int)


def _status(url, *, data=None, headers=None):
    """Status and headers of one request, sending exactly `headers`."""
    return _status_method("POST" if data is not None else "GET", url, data=data, headers=headers)


def _status_method(method, url, *, data=None, headers=None):
    import http.client
    import urllib.parse

    u = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    try:
        conn.request(method, u.path, body=data, headers=headers or {})
        r = conn.getresponse()
        r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}
    finally:
        conn.close()


def test_server_refuses_a_request_without_its_key(server):
    """Only the project may spend the server: its model routes want the per-start key."""
    from memlife.models import serve

    url = server.base_url + "/chat/completions"
    body = json.dumps({"model": serve.MODEL_ALIAS, "max_tokens": 1, "temperature": 0,
                       "messages": [{"role": "user", "content": "Say hi."}]}).encode()
    plain = {"Content-Type": "application/json"}
    assert _status(url, data=body, headers=plain)[0] == 401
    assert _status(url, data=body, headers={**plain, **serve.auth_headers(serve.new_api_key())})[0] == 401
    assert _status(url, data=body, headers={**plain, **serve.auth_headers(server.api_key)})[0] == 200
    # /health stays public, so that any process can tell whether the shared server is up.
    assert _status(f"http://127.0.0.1:{server.port}/health")[0] == 200 and serve.healthy(server.port)
    assert _status(server.base_url + "/models")[0] == 401


def test_no_web_page_may_read_the_server(server):
    """llama-server's default CORS echoes any Origin back with credentials; ours allows only the
    server's own origin, so a browser hands no page (not even one on localhost) a reply."""
    from memlife.models import serve

    url = server.base_url + "/chat/completions"
    for origin in ("https://evil.example", "http://localhost:8888", "null"):
        preflight = {"Origin": origin, "Access-Control-Request-Method": "POST",
                     "Access-Control-Request-Headers": "authorization,content-type"}
        _, headers = _status_method("OPTIONS", url, headers=preflight)
        assert headers.get("access-control-allow-origin") in (None, f"http://127.0.0.1:{server.port}"), origin
        assert headers.get("access-control-allow-credentials") != "true", origin
        body = json.dumps({"model": serve.MODEL_ALIAS, "max_tokens": 1, "temperature": 0,
                           "messages": [{"role": "user", "content": "Say hi."}]}).encode()
        _, headers = _status(url, data=body, headers={"Origin": origin, "Content-Type": "application/json",
                                                      **serve.auth_headers(server.api_key)})
        assert headers.get("access-control-allow-origin") in (None, f"http://127.0.0.1:{server.port}"), origin


def test_the_key_is_in_a_state_file_only_the_user_can_read(server):
    import stat

    from memlife.models import serve

    state = serve._state_dir() / "state.json"
    assert stat.S_IMODE(state.stat().st_mode) == 0o600 and state.stat().st_uid == __import__("os").geteuid()
    assert server.api_key and json.loads(state.read_text())["api_key"] == server.api_key
    assert server.api_key not in repr(server)
    assert server.api_key not in open(f"/proc/{server.pid}/cmdline", "rb").read().decode(errors="replace")


def test_server_is_reused_not_restarted(server):
    from memlife.models import serve

    again = serve.ensure_server()
    assert again.pid == server.pid and again.api_key == server.api_key  # the key, read back from the state


def test_greedy_decoding_is_deterministic(server):
    from memlife.models import llm

    c = llm.get_client("reader")
    msgs = [{"role": "user", "content": "Name three colours."}]
    req, key = c._build(msgs, 20, 0.0, 0, None, None, None)
    a = c._send(req, key)
    b = c._send(req, key)
    assert a.text == b.text


def test_server_stops_when_its_starter_is_killed(tmp_path):
    """A SIGKILLed starter (a killed notebook kernel) must not leave a llama-server behind."""
    import os
    import signal
    import subprocess
    import sys
    import time

    env = {**os.environ, "MEMLIFE_CACHE_DIR": str(tmp_path / "cache"), "MEMLIFE_ROOT": str(tmp_path)}
    code = ("from memlife.models import serve; import time; s = serve.ensure_server(); "
            "print(s.pid, flush=True); time.sleep(600)")
    p = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
    pid = int(p.stdout.readline())
    os.kill(pid, 0)  # running
    p.send_signal(signal.SIGKILL)
    p.wait()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    os.kill(pid, signal.SIGKILL)
    raise AssertionError("llama-server outlived the process that started it")


def test_check_starts_a_private_server_and_gets_an_answer(server):
    from memlife.models import serve

    r = serve.check()
    assert r["reply"] and r["generated_tokens_per_s"] > 0 and r["prompt_tokens_per_s"] > 0
    assert serve.ensure_server().pid == server.pid  # the shared server was left alone


@pytest.mark.skipif(__import__("platform").machine() != "x86_64", reason="x86-64 instruction sets only")
def test_the_installed_runtime_uses_no_instruction_beyond_x86_64_v3():
    """xllamacpp's wheel (requirements-llama.txt) runs on every x86-64-v3 machine, as the build
    the project made from source did (Makefile LLAMA_CPU_ARGS): its CPU code uses AVX2's ymm
    registers and neither AVX-512's zmm/opmask nor AMX's tile registers."""
    import importlib.util
    import subprocess
    from pathlib import Path

    spec = importlib.util.find_spec("xllamacpp")
    (lib,) = Path(next(iter(spec.submodule_search_locations))).glob("xllamacpp*.so")
    # grep reads objdump's ~170 MB of text (the library is 106 MB) in seconds; Python would take a minute
    pattern = r"%ymm[0-9]+|%zmm[0-9]+|%k[1-7]\b|%tmm[0-9]+|\btile(zero|loadd|stored|release)\b|\btdp[a-z0-9]*"
    found = subprocess.run(f"objdump -d --no-show-raw-insn '{lib}' | grep -oE '{pattern}'", shell=True,
                           capture_output=True, text=True).stdout.split()
    ymm = [r for r in found if r.startswith("%ymm")]
    beyond = [r for r in found if not r.startswith("%ymm")]
    assert len(ymm) > 1000  # AVX2 kernels are there: the scan can see them
    assert not beyond, f"AVX-512 or AMX instructions in the runtime: {sorted(set(beyond))[:5]}"
