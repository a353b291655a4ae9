"""The notebook runner: usage summaries, a rerun that is all cache hits, and no secret on disk."""
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def repo_copy(tmp_path, monkeypatch, fault_server):
    """A repository holding 00_backend and the configs, every role pointed at the fault server."""
    root = tmp_path / "repo"
    (root / "notebooks").mkdir(parents=True)
    shutil.copy(ROOT / "notebooks" / "00_backend.ipynb", root / "notebooks")
    shutil.copytree(ROOT / "configs", root / "configs")
    monkeypatch.setenv("MEMLIFE_ROOT", str(root))
    monkeypatch.setenv("MEMLIFE_CACHE_DIR", str(root / ".cache"))
    monkeypatch.setenv("MEMLIFE_BASE_URL", fault_server.base_url)
    return root


def test_no_api_key_in_results_cache_logs_or_notebooks(repo_copy, monkeypatch, fault_server):
    secret = "sk-proj-SECRET-must-never-be-written-7f3a9c"
    root = repo_copy
    monkeypatch.setenv("MEMLIFE_MODEL", "gpt-4o-mini")
    monkeypatch.setenv("OPENAI_API_KEY", secret)

    from memlife.running import runner

    summary = runner.run_notebook("00_backend", "smoke", root=root)
    assert summary["calls"] > 0 and summary["usd_estimate"] > 0
    assert fault_server.auth_headers and all(h == f"Bearer {secret}" for h in fault_server.auth_headers)
    scanned = 0
    for p in root.rglob("*"):
        if p.is_file():
            scanned += 1
            assert secret.encode() not in p.read_bytes(), f"API key found in {p}"
    assert (root / "results" / "smoke" / "notebooks" / "00_backend.ipynb").exists()
    assert (root / "results" / "smoke" / "usage" / "00_backend.json").exists()
    assert scanned >= 4


@pytest.mark.model
def test_no_embedded_server_key_in_results_cache_logs_or_notebooks(repo_copy, monkeypatch):
    """A notebook run on the embedded model: the kernel finds the shared server and its key in the
    state file and authenticates with it, and the key is written nowhere but that file."""
    import stat

    import yaml

    from memlife.models import serve

    root = repo_copy
    monkeypatch.delenv("MEMLIFE_BASE_URL")  # every role on the embedded model
    cfg_path = root / "configs" / "smoke.yaml"  # the fewest, shortest calls that still make the point
    cfg = yaml.safe_load(cfg_path.read_text())
    cfg["notebooks"]["00_backend"] = {"n_prompts": 1, "concurrency_levels": [1], "max_tokens": 4}
    cfg_path.write_text(yaml.safe_dump(cfg))
    server = serve.ensure_server()  # this process starts it; the notebook's kernel must reuse it
    try:
        from memlife.running import runner

        summary = runner.run_notebook("00_backend", "smoke", root=root)
        assert summary["calls"] > summary["cached_calls"] > 0  # real, authenticated calls
        state = root / ".cache" / "llama-server" / "state.json"
        assert stat.S_IMODE(state.stat().st_mode) == 0o600 and server.api_key in state.read_text()
        assert serve.ensure_server().pid == server.pid  # reused, not restarted with another key
        key = server.api_key.encode()
        scanned = set()
        for p in root.rglob("*"):
            if p.is_file() and p != state:
                scanned.add(p.relative_to(root).parts[0] if p.parent != root else p.name)
                assert key not in p.read_bytes(), f"the embedded server's key found in {p}"
        assert {"results", ".cache"} <= scanned
        assert (root / "results" / "logs" / "llama-server.log").is_file()
        assert (root / "results" / "smoke" / "notebooks" / "00_backend.ipynb").is_file()
        assert any((root / ".cache" / "llm").iterdir())
    finally:
        serve.stop_server(server)
    assert not (root / ".cache" / "llama-server" / "state.json").exists()  # the key goes with the server


def test_second_run_makes_no_uncached_call(repo_copy, monkeypatch, fault_server):
    import json

    root = repo_copy
    monkeypatch.setenv("MEMLIFE_MODEL", "local-model")

    from memlife.running import runner

    first = runner.run_notebook("00_backend", "smoke", root=root)
    sent = sum(fault_server.received.values())
    second = runner.run_notebook("00_backend", "smoke", root=root)
    assert first["cached_calls"] < first["calls"]
    assert second["calls"] == first["calls"] and second["cached_calls"] == second["calls"]
    assert sum(fault_server.received.values()) == sent  # nothing reached the server
    on_disk = json.loads((root / "results" / "smoke" / "usage" / "00_backend.json").read_text())
    assert on_disk["cached_calls"] == on_disk["calls"] and on_disk["unpriced_models"] == []


def _notebook(path):
    import nbformat

    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell("fail = False")
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_code_cell("half_done = 1"),
                nbformat.v4.new_code_cell("if fail:\n    raise RuntimeError('broken mid-run')")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


def test_a_failed_run_leaves_no_executed_copy_for_make_to_take_as_done(repo_copy):
    import papermill as pm
    import yaml

    from memlife.running import runner

    root = repo_copy
    cfg_path = root / "configs" / "smoke.yaml"
    cfg = yaml.safe_load(cfg_path.read_text())

    def set_fail(value: bool):
        cfg["notebooks"]["99_midway"] = {"fail": value}
        cfg_path.write_text(yaml.safe_dump(cfg))

    _notebook(root / "notebooks" / "99_midway.ipynb")
    executed = root / "results" / "smoke" / "notebooks" / "99_midway.ipynb"
    failed = executed.with_name("99_midway.FAILED.ipynb")

    # An earlier success, then a run that fails in its last cell.
    set_fail(False)
    runner.run_notebook("99_midway", "smoke", root=root)
    assert executed.exists()
    set_fail(True)
    with pytest.raises(pm.PapermillExecutionError, match="broken mid-run"):
        runner.run_notebook("99_midway", "smoke", root=root)
    assert not executed.exists()  # make sees a missing target and runs the notebook again
    assert "broken mid-run" in failed.read_text()  # the partial copy, named as what it is
    assert sorted(p.name for p in executed.parent.iterdir()) == ["99_midway.FAILED.ipynb"]

    # The next successful run publishes its copy and clears the failed one.
    set_fail(False)
    runner.run_notebook("99_midway", "smoke", root=root)
    assert executed.exists() and not failed.exists()


def test_a_run_stopped_by_sigterm_leaves_only_a_failed_copy(repo_copy):
    import signal
    import subprocess
    import sys
    import time

    import nbformat
    import yaml

    root = repo_copy
    cfg_path = root / "configs" / "smoke.yaml"
    cfg = yaml.safe_load(cfg_path.read_text())
    cfg["notebooks"]["98_long"] = {}
    cfg_path.write_text(yaml.safe_dump(cfg))
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("started = True"), nbformat.v4.new_code_cell("import time\ntime.sleep(120)")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, root / "notebooks" / "98_long.ipynb")
    out_dir = root / "results" / "smoke" / "notebooks"

    proc = subprocess.Popen([sys.executable, "-m", "memlife.running.runner", "98_long", "--profile", "smoke"], cwd=root)
    deadline = time.monotonic() + 90
    while not (out_dir / "98_long.running.ipynb").exists():  # papermill has started the notebook
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.2)
    time.sleep(3)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 128 + signal.SIGTERM
    assert sorted(p.name for p in out_dir.iterdir()) == ["98_long.FAILED.ipynb"]
