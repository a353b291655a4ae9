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


def test_server_stops_when_its_starter_is_killed(tmp_path):
    """A SIGKILLed starter (a killed notebook kernel) must not leave a llama-server behind."""
    import os
    import signal
    import subprocess
    import sys
    import time

    env = {**os.environ, "MEMLIFE_CACHE_DIR": str(tmp_path / "cache"), "MEMLIFE_ROOT": str(tmp_path)}
    code = ("from memlife import serve; import time; s = serve.ensure_server(); "
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
    from memlife import serve

    r = serve.check()
    assert r["reply"] and r["generated_tokens_per_s"] > 0 and r["prompt_tokens_per_s"] > 0
    assert serve.ensure_server().pid == server.pid  # the shared server was left alone


@pytest.mark.skipif(__import__("platform").machine() != "x86_64", reason="x86-64 instruction sets only")
def test_the_installed_build_uses_no_instruction_beyond_x86_64_v3():
    """The portable build (Makefile LLAMA_CPU_ARGS) runs on every x86-64-v3 machine: its CPU
    backend uses AVX2's ymm registers and neither AVX-512's zmm/opmask nor AMX's tile registers,
    whatever CPU built it."""
    import re
    import subprocess

    from memlife import serve

    lib = serve.binary_path().parent / "libggml-cpu.so"
    asm = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(lib)], capture_output=True,
                         text=True, check=True).stdout
    assert len(re.findall(r"%ymm\d", asm)) > 1000  # AVX2 kernels are there: the scan can see them
    assert not re.findall(r"%zmm\d|%k[1-7]\b", asm), "AVX-512 instructions in the portable build"
    assert not re.findall(r"%tmm\d|\btile(zero|loadd|stored|release)\b|\btdp", asm), "AMX in the portable build"
