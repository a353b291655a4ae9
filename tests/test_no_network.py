"""A whole evaluation run (every LLM-backed system, both settings) opens no connection off loopback.

The run happens in a subprocess whose first act is `sys.addaudithook` on "socket.connect"
(memlife.netaudit); the MemOS worker installs the same hook. Any attempt to reach a
non-loopback address — telemetry, a model hub, a DNS-resolved host — is logged and refused.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memlife import netaudit
from memlife.memops import systems

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from _memops_fake_server import FakeServer  # noqa: E402

RUNNER = """
import sys, runpy
from memlife import netaudit
netaudit.install(sys.argv[1])
sys.argv = ["evaluate"] + sys.argv[2:]
runpy.run_module("memlife.memops.evaluate", run_name="__main__")
"""


def test_audit_hook_refuses_off_loopback(tmp_path):
    log = tmp_path / "net.log"
    code = f"""
import socket
from memlife import netaudit
netaudit.install({str(log)!r})
s = socket.socket(); s.settimeout(0.5)
try:
    s.connect(("192.0.2.1", 80))  # TEST-NET-1: never routed
except ConnectionRefusedError as e:
    print("refused", e)
"""
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(HERE.parent / "lib")},
                         capture_output=True, text=True, timeout=30)
    assert "refused network audit" in out.stdout
    assert "192.0.2.1" in log.read_text()
    assert netaudit.is_loopback(("127.0.0.1", 1)) and netaudit.is_loopback(("::1", 1, 0, 0))
    assert not netaudit.is_loopback(("10.0.0.1", 1))


@pytest.mark.slow
def test_evaluation_run_stays_on_loopback(tmp_path):
    pytest.importorskip("mem0")
    names = ["long_context", "bm25_turn", "bm25_session", "mem0"] + (["memos"] if systems.memos_available() else [])
    inst = json.loads((HERE / "data" / "memops_instance.json").read_text())
    (tmp_path / "i.jsonl").write_text(json.dumps(inst) + "\n")
    log = tmp_path / "net.log"
    srv = FakeServer()
    try:
        env = {k: v for k, v in os.environ.items() if k not in ("MEM0_TELEMETRY", "HF_HUB_OFFLINE")}
        env.update({"PYTHONPATH": str(HERE.parent / "lib"), "MEMLIFE_READER_BASE_URL": srv.base_url,
                    "MEMLIFE_READER_MODEL": "fake", "MEMLIFE_CACHE_DIR": str(tmp_path / "cache"),
                    "MEMLIFE_NET_AUDIT": str(log)})
        out = subprocess.run([sys.executable, "-c", RUNNER, str(log), "--instances", str(tmp_path / "i.jsonl"),
                              "--out", str(tmp_path / "out"), "--systems", ",".join(names), "--max-probes", "1"],
                             env=env, capture_output=True, text=True, timeout=300)
    finally:
        srv.close()
    assert not log.exists(), f"non-loopback connections: {log.read_text()}"
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"records": 2 * len(names)}
    assert srv.requests  # the systems really called the (loopback) model
