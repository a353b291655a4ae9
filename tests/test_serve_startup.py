"""Start-up failures of the embedded server are reported by cause, with the server's own last words.

Stand-in binaries (shell scripts) play a server that dies by a signal, exits with an error or
never becomes healthy; the real server's start-up is covered by test_serve.py and `make env`.
"""
import signal
import stat

import pytest

from memlife.models import serve


@pytest.fixture
def stand_in(tmp_path, monkeypatch):
    """Write an executable script; logs and server state go under tmp_path."""
    monkeypatch.setenv("MEMLIFE_ROOT", str(tmp_path))
    monkeypatch.setenv("MEMLIFE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(serve, "model_path", lambda: tmp_path / "model.gguf")

    def write(body: str):
        path = tmp_path / "llama-server"
        path.write_text("#!/bin/sh\n" + body)
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
        monkeypatch.setattr(serve, "server_command", lambda: [str(path)])
        return path

    return write


def test_a_death_by_sigill_is_named_with_the_log_tail(stand_in, tmp_path):
    stand_in('echo "llama threadpool init, n_threads = 2"\nkill -ILL $$\n')
    with pytest.raises(serve.ServerStartError) as err:
        serve.ensure_server(timeout_s=20)
    msg = str(err.value)
    assert "SIGILL" in msg and "illegal instruction" in msg
    assert "LLAMA_CPU_ARGS" in msg  # what to do about it
    assert "llama threadpool init, n_threads = 2" in msg  # the log's last line, quoted
    assert str(tmp_path / "results" / "logs" / "llama-server.log") in msg
    assert not (tmp_path / "cache" / "llama-server" / "state.json").exists()


def test_only_this_start_ups_log_lines_are_quoted(stand_in, tmp_path):
    log = tmp_path / "results" / "logs" / "llama-server.log"
    log.parent.mkdir(parents=True)
    log.write_text("an earlier run's line\n")
    stand_in('echo "error: failed to load model"\nexit 1\n')
    with pytest.raises(serve.ServerStartError) as err:
        serve.ensure_server(timeout_s=20)
    msg = str(err.value)
    assert "exited with code 1" in msg and "failed to load model" in msg
    assert "an earlier run's line" not in msg


def test_a_server_that_never_answers_is_stopped_and_reported(stand_in):
    stand_in('echo "loading"\nexec sleep 60\n')
    with pytest.raises(serve.ServerStartError, match="not healthy after 1 s"):
        serve.ensure_server(timeout_s=1)


def test_check_fails_by_name_on_a_binary_that_dies(stand_in, capsys):
    path = stand_in("kill -ILL $$\n")
    assert serve.main(["check", "--binary", str(path)]) == 1
    assert "SIGILL" in capsys.readouterr().err


@pytest.mark.parametrize("code, words", [
    (-signal.SIGILL, ["SIGILL", "illegal instruction", "LLAMA_CPU_ARGS"]),
    (128 + signal.SIGILL, ["code 132", "128 + SIGILL"]),
    (-signal.SIGKILL, ["SIGKILL", "out-of-memory"]),
    (-signal.SIGTERM, ["SIGTERM"]),
    (3, ["exited with code 3"]),
])
def test_exit_statuses_in_words(code, words):
    text = serve.describe_exit(code)
    for w in words:
        assert w in text, (code, text)


def test_the_api_key_reaches_the_server_by_its_environment_not_its_command_line(stand_in, monkeypatch):
    """Any local user can read a process's command line (ps, /proc/PID/cmdline); only its own user
    can read its environment. The stand-in prints both, then dies so that the log is quoted."""
    monkeypatch.setattr(serve, "new_api_key", lambda: "KEY-0f3a9c-not-on-the-command-line")
    stand_in('echo "argv: $*"\necho "env key: $LLAMA_API_KEY"\nexit 1\n')
    with pytest.raises(serve.ServerStartError) as err:
        serve.ensure_server(timeout_s=20)
    lines = str(err.value).splitlines()
    argv = next(ln for ln in lines if "argv:" in ln)
    assert "--host 127.0.0.1" in argv and "KEY-0f3a9c" not in argv and "--api-key" not in argv
    assert any(ln.strip() == "env key: KEY-0f3a9c-not-on-the-command-line" for ln in lines)


def test_the_state_file_is_created_private_and_an_unprivate_one_is_not_trusted(tmp_path, monkeypatch):
    import os

    monkeypatch.setenv("MEMLIFE_CACHE_DIR", str(tmp_path / "cache"))
    old_umask = os.umask(0)  # even with nothing masked, the file is created 0600
    try:
        server = serve.Server(base_url="http://127.0.0.1:9/v1", port=9, pid=os.getpid(), api_key="k" * 43)
        serve._write_state(server)
    finally:
        os.umask(old_umask)
    state = tmp_path / "cache" / "llama-server" / "state.json"
    assert stat.S_IMODE(state.stat().st_mode) == 0o600
    assert serve._read_state() == server
    assert "k" * 43 not in repr(server)
    assert [p.name for p in state.parent.iterdir()] == ["state.json"]  # no temporary left behind
    # Readable by others (an older memlife wrote 0644, with no key): not reused.
    state.chmod(0o644)
    assert serve._read_state() is None
    state.chmod(0o600)
    state.write_text('{"base_url": "http://127.0.0.1:9/v1", "port": 9, "pid": 1}')  # no key
    assert serve._read_state() is None
    # A symlink planted in its place is not followed.
    state.unlink()
    (tmp_path / "elsewhere.json").write_text("{}")
    state.symlink_to(tmp_path / "elsewhere.json")
    assert serve._read_state() is None


def test_memlife_llama_server_names_an_executable_to_run_instead(tmp_path, monkeypatch):
    own = tmp_path / "llama-server"
    monkeypatch.setenv(serve.SERVER_ENV, str(own))
    with pytest.raises(serve.ServerStartError, match="not an executable file"):
        serve.server_command()
    own.write_text("#!/bin/sh\n")
    own.chmod(0o755)
    assert serve.server_command() == [str(own)] and serve.runtime() == f"llama-server at {own}"
    monkeypatch.delenv(serve.SERVER_ENV)
    assert serve.server_command()[1:] == ["-m", "memlife.models.serve", "run"]  # xllamacpp's, in its own process


def test_the_server_process_refuses_to_start_without_a_key(monkeypatch, capsys):
    monkeypatch.delenv("LLAMA_API_KEY", raising=False)
    flags = ["-m", "model.gguf", "--alias", "a", "--host", "127.0.0.1", "--port", "9", "--ctx-size", "64",
             "--threads", "1", "--cors-origins", "http://127.0.0.1:9"]
    assert serve.main(["run", *flags]) == 2
    assert "LLAMA_API_KEY is not set" in capsys.readouterr().err
