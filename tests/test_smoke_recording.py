"""nbval at smoke answers from the committed smoke recording and makes no live model call."""
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RECORDING = ROOT / "results" / "replies" / "smoke.jsonl.gz"
# The notebooks whose smoke run calls a model (its reader, scorer or Temp-LoRA's own generation).
CALLING = ("00_backend", "12_memops_eval", "21_eviction", "22_read_restore")


def _plan() -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "CONDA_DEFAULT_ENV")}
    return subprocess.run(["make", "-n", "test-notebooks"], cwd=ROOT, env=env, capture_output=True, text=True,
                          check=True).stdout.replace("\\\n", " ")


def test_nbval_runs_in_replay_mode_on_the_committed_smoke_recording_with_an_empty_cache():
    (line,) = [ln for ln in _plan().splitlines() if "--nbval-lax" in ln]
    assert "MEMLIFE_LLM_MODE=replay" in line  # a request the recording lacks raises instead of reaching a model
    assert f"MEMLIFE_REPLIES={RECORDING}" in line
    cache = re.search(r"MEMLIFE_CACHE_DIR=(\S+)", line)
    assert cache, "a cache of this machine would answer what a fresh machine's nbval cannot"
    assert f"rm -rf {cache.group(1)}" in _plan()


def test_the_smoke_recording_is_intact_and_covers_every_notebook_that_calls_a_model():
    from memlife.models import replies

    rec = replies.load(RECORDING)  # checks the file's SHA-256 against its manifest, line by line
    assert rec.manifest["profile"] == "smoke"
    by_notebook = rec.manifest["calls_by_notebook"]
    assert all(by_notebook.get(nb, 0) > 0 for nb in CALLING), by_notebook
    assert len(rec) > 0


@pytest.mark.slow
def test_a_smoke_notebook_replayed_from_the_committed_recording_makes_no_live_call(tmp_path, monkeypatch):
    """The LLM-importance policy's scores at smoke come from the recording: notebook 21 on a fresh
    machine (an empty cache), in replay mode, asks no model."""
    from memlife.running import runner

    repo = tmp_path / "repo"
    (repo / "notebooks").mkdir(parents=True)
    for nb in ("20_longmem_data", "21_eviction"):
        shutil.copy(ROOT / "notebooks" / f"{nb}.ipynb", repo / "notebooks")
    shutil.copytree(ROOT / "configs", repo / "configs")
    for name in ("MEMLIFE_BASE_URL", "MEMLIFE_MODEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MEMLIFE_ROOT", str(repo))
    monkeypatch.setenv("MEMLIFE_CACHE_DIR", str(repo / ".cache"))
    monkeypatch.setenv("MEMLIFE_REPLIES", str(RECORDING))
    monkeypatch.setenv("MEMLIFE_LLM_MODE", "replay")
    runs = [runner.run_notebook(nb, "smoke", root=repo) for nb in ("20_longmem_data", "21_eviction")]
    assert runs[1]["calls"] > 0
    assert (runs[1]["recorded_calls"], runs[1]["live_calls"]) == (runs[1]["calls"], 0)
    assert not (repo / ".cache" / "llama-server" / "state.json").exists()  # no server was started
