import os
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).parent
sys.path.insert(0, str(TESTS))  # faultserver and other test helpers


@pytest.fixture
def isolated_llm(tmp_path, monkeypatch):
    """A fresh llm layer whose cache, usage logs and results live under tmp_path."""
    from memlife.models import accounting, endpoints, llm

    monkeypatch.setenv("MEMLIFE_ROOT", str(tmp_path))
    monkeypatch.setenv("MEMLIFE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("MEMLIFE_RUN", "pytest")
    for name in list(os.environ):
        if name.startswith("MEMLIFE_") and name not in ("MEMLIFE_ROOT", "MEMLIFE_CACHE_DIR", "MEMLIFE_RUN"):
            monkeypatch.delenv(name)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    endpoints.configure(None, run="pytest", models={}, spend_cap_usd=None)
    accounting.reset_usage()
    yield llm
    endpoints.configure(None, models={})
    accounting.reset_usage()
    endpoints._settings["run"] = None


@pytest.fixture
def fault_server():
    from faultserver import FaultServer

    with FaultServer() as s:
        yield s


def point_at(llm, server, role="reader", model="fake-model", **extra):
    from memlife.models import endpoints

    endpoints.configure(None, run="pytest", models={role: {"base_url": server.base_url, "model": model,
                                                      "timeout_s": 2, "max_retries": 3, **extra}})
    return llm.get_client(role)


def completion(text, **fields):
    """A reply as the llm client returns it, for stand-in clients (the proxy's tests)."""
    from memlife.models import accounting

    base = dict(prompt_tokens=7, completion_tokens=3, cached=False, latency_s=0.0, request_id="r1", model="fake-model")
    return accounting.Completion(text=text, **{**base, **fields})


def pytest_collection_modifyitems(config, items):
    """The files that hold a slow test first, each file's tests in their own order. `make test`
    spreads files over the cores (`--dist loadfile`), each core taking the next file as it
    finishes: started first, the few minute-long files (the estimate's, the ones running notebooks
    through make) do not leave one core running the last of them while the other waits."""
    slow = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow)  # stable: the collection's order otherwise
