"""A run replayed from recorded replies starts without the server installed; the first request
the recording lacks installs it through the Makefile (a scratch Makefile here stands in for
`make llama-server`, and records how it was invoked)."""
import sys

import pytest

from memlife.models import serve

MAKEFILE = """llama-server:
\t@echo "profile=$(PROFILE) level=$(MAKELEVEL) flags=[$(MAKEFLAGS)]" > invoked.txt
\t@echo "compiling ggml"; echo "error: no compiler"; exit 3
"""


def test_a_missing_server_is_installed_on_first_use_by_a_make_of_its_own(tmp_path, monkeypatch):
    (tmp_path / "Makefile").write_text(MAKEFILE)
    monkeypatch.setenv("MEMLIFE_ROOT", str(tmp_path))
    monkeypatch.setenv("MEMLIFE_CACHE_DIR", str(tmp_path / ".cache"))
    # As inside a notebook that `make -j2 reproduce` started: a parent's job server and level.
    monkeypatch.setenv("MAKEFLAGS", "-j2 --jobserver-auth=fifo:/nonexistent")
    monkeypatch.setenv("MAKELEVEL", "1")
    monkeypatch.setitem(sys.modules, "xllamacpp", None)  # not installed: import fails
    monkeypatch.delenv(serve.SERVER_ENV, raising=False)
    with pytest.raises(serve.ServerStartError,
                       match=r"(?s)installing llama.cpp's server failed \(make exited 2\).*error: no compiler"):
        serve.ensure_server(timeout_s=5)
    invoked = (tmp_path / "invoked.txt").read_text()
    # Not the parent's job server: a make of its own (executed notebooks are scoped by profile, so
    # the build needs none).
    assert invoked.startswith("profile= level=0 ") and "jobserver" not in invoked
    assert "compiling ggml" in (tmp_path / "results" / "logs" / "llama-build.log").read_text()
    assert not (tmp_path / ".cache" / "llama-server" / "state.json").exists()
