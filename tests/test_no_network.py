"""A whole evaluation run (every LLM-backed system, both settings) opens no connection off loopback.

The run happens in a subprocess started with tests/audit_site/ on its PYTHONPATH and
MEMLIFE_NET_AUDIT set: that directory's sitecustomize installs `sys.addaudithook` on
"socket.connect" (netaudit.py there) before anything else runs, in the run's process and in every
Python process it starts with its environment — the MemOS worker under `.venv-memos` included.
Any attempt to reach a non-loopback address — telemetry, a model hub, a DNS-resolved host — is
logged and refused.
"""
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memlife.memops.systems import managed

HERE = Path(__file__).parent
AUDIT_SITE = HERE / "audit_site"
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(AUDIT_SITE))
import netaudit  # noqa: E402

from _memops_fake_server import FakeServer  # noqa: E402


def audited_env(log: Path, **extra) -> dict:
    """An environment whose Python processes audit themselves from start-up, logging to `log`."""
    env = {**os.environ, **extra}
    env["PYTHONPATH"] = os.pathsep.join([str(AUDIT_SITE), str(HERE.parent / "lib")])
    env[netaudit.ENV] = str(log)
    return env


# The project's interpreter, and the MemOS worker's where its environment is built: the audit must
# reach both, since the worker cannot import memlife.
INTERPRETERS = [sys.executable] + ([str(managed.memos_python())] if managed.memos_available() else [])


@pytest.mark.parametrize("python", INTERPRETERS)
def test_audit_hook_refuses_off_loopback_from_start_up(tmp_path, python):
    log = tmp_path / "net.log"
    code = """
import socket
s = socket.socket(); s.settimeout(0.5)
try:
    s.connect(("192.0.2.1", 80))  # TEST-NET-1: never routed
except ConnectionRefusedError as e:
    print("refused", e)
s = socket.socket(); s.settimeout(0.5)
try:
    s.connect(("127.0.0.1", 9))  # loopback passes the audit (nothing listens: refused by the OS)
except OSError as e:
    print("loopback", type(e).__name__, "network audit" in str(e))
"""
    out = subprocess.run([python, "-c", code], env=audited_env(log), capture_output=True, text=True, timeout=30)
    assert "refused network audit" in out.stdout, out.stderr[-2000:]
    assert "loopback ConnectionRefusedError False" in out.stdout, out.stdout
    assert "192.0.2.1" in log.read_text() and "127.0.0.1" not in log.read_text()


def test_is_loopback():
    assert netaudit.is_loopback(("127.0.0.1", 1)) and netaudit.is_loopback(("::1", 1, 0, 0))
    assert netaudit.is_loopback(("::1%lo", 1, 0, 0)) and netaudit.is_loopback("/tmp/socket")  # AF_UNIX
    assert not netaudit.is_loopback(("10.0.0.1", 1))


@pytest.mark.slow
def test_evaluation_run_stays_on_loopback(tmp_path):
    if importlib.util.find_spec("mem0") is None:  # not imported here: mem0 reads MEM0_TELEMETRY on import
        pytest.skip("mem0 is not installed")
    names = ["long_context", "bm25_turn", "bm25_session", "mem0"] + (["memos"] if managed.memos_available() else [])
    inst = json.loads((HERE / "data" / "memops_instance.json").read_text())
    (tmp_path / "i.jsonl").write_text(json.dumps(inst) + "\n")
    log = tmp_path / "net.log"
    srv = FakeServer()
    try:
        env = audited_env(log, MEMLIFE_READER_BASE_URL=srv.base_url, MEMLIFE_READER_MODEL="fake",
                          MEMLIFE_CACHE_DIR=str(tmp_path / "cache"))
        for name in ("MEM0_TELEMETRY", "HF_HUB_OFFLINE"):
            env.pop(name, None)
        out = subprocess.run([sys.executable, "-m", "memlife.memops", "evaluate", "--instances", str(tmp_path / "i.jsonl"),
                              "--out", str(tmp_path / "out"), "--systems", ",".join(names), "--max-probes", "1"],
                             env=env, capture_output=True, text=True, timeout=300)
    finally:
        srv.close()
    assert not log.exists(), f"non-loopback connections: {log.read_text()}"
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"records": 2 * len(names)}
    assert srv.requests  # the systems really called the (loopback) model
