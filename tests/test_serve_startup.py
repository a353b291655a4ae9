"""Start-up failures of llama-server are reported by cause, with the server's own last words.

Stand-in binaries (shell scripts) play a server that dies by a signal, exits with an error or
never becomes healthy; the real server's start-up is covered by test_serve.py and `make env`.
"""
import signal
import stat

import pytest

from memlife import serve


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
        monkeypatch.setattr(serve, "binary_path", lambda: path)
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
