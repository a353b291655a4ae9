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

    from memlife import runner

    summary = runner.run_notebook("00_backend", "smoke", root=root)
    assert summary["calls"] > 0 and summary["usd_estimate"] > 0
    assert fault_server.auth_headers and all(h == f"Bearer {secret}" for h in fault_server.auth_headers)
    scanned = 0
    for p in root.rglob("*"):
        if p.is_file():
            scanned += 1
            assert secret.encode() not in p.read_bytes(), f"API key found in {p}"
    assert (root / "results" / "notebooks" / "00_backend.ipynb").exists()
    assert (root / "results" / "usage" / "00_backend.json").exists()
    assert scanned >= 4


def test_second_run_makes_no_uncached_call(repo_copy, monkeypatch, fault_server):
    import json

    root = repo_copy
    monkeypatch.setenv("MEMLIFE_MODEL", "local-model")

    from memlife import runner

    first = runner.run_notebook("00_backend", "smoke", root=root)
    sent = sum(fault_server.received.values())
    second = runner.run_notebook("00_backend", "smoke", root=root)
    assert first["cached_calls"] < first["calls"]
    assert second["calls"] == first["calls"] and second["cached_calls"] == second["calls"]
    assert sum(fault_server.received.values()) == sent  # nothing reached the server
    on_disk = json.loads((root / "results" / "usage" / "00_backend.json").read_text())
    assert on_disk["cached_calls"] == on_disk["calls"] and on_disk["unpriced_models"] == []
