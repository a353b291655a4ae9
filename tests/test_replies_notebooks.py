"""Recorded replies end to end: notebooks 20 and 21 (LLM-importance scoring by the embedded model)
run live in one repository, their replies exported; a second repository with an empty cache replays
the recording and writes the same records, tables and figures, byte for byte, with no model call."""
import shutil
from pathlib import Path

import pytest
import yaml

pytestmark = [pytest.mark.model, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ("20_longmem_data", "21_eviction")
HISTORY_TOKENS = 3000


def _repo(root: Path) -> Path:
    (root / "notebooks").mkdir(parents=True)
    for nb in NOTEBOOKS:
        shutil.copy(ROOT / "notebooks" / f"{nb}.ipynb", root / "notebooks")
    shutil.copytree(ROOT / "configs", root / "configs")
    # A 3,000-token history instead of smoke's 10,000: a third of the units, so a third of the
    # importance scores to ask the model live and to replay; what is compared is unchanged.
    smoke = root / "configs" / "smoke.yaml"
    cfg = yaml.safe_load(smoke.read_text())
    cfg["notebooks"]["20_longmem_data"]["history_tokens"] = HISTORY_TOKENS  # 21's too: one home
    smoke.write_text(yaml.safe_dump(cfg))
    return root


def _outputs(root: Path) -> dict[str, bytes]:
    """The run's records, tables and figures (not its logs, usage and executed notebooks, which say
    how and when it ran)."""
    run = root / "results" / "smoke"
    return {str(p.relative_to(run)): p.read_bytes() for p in sorted(run.rglob("*"))
            if p.is_file() and p.relative_to(run).parts[0] not in ("logs", "usage", "notebooks")}


def test_a_notebook_replayed_from_its_recording_makes_no_call_and_writes_the_same_tables(tmp_path, monkeypatch):
    from memlife.models import endpoints, replies_export
    from memlife.running import runner

    for name in ("MEMLIFE_REPLIES", "MEMLIFE_LLM_MODE", "MEMLIFE_BASE_URL", "MEMLIFE_MODEL"):
        monkeypatch.delenv(name, raising=False)
    recorder = _repo(tmp_path / "recorder")
    monkeypatch.setenv("MEMLIFE_ROOT", str(recorder))
    monkeypatch.setenv("MEMLIFE_CACHE_DIR", str(recorder / ".cache"))
    live = [runner.run_notebook(nb, "smoke", root=recorder) for nb in NOTEBOOKS]
    assert live[1]["calls"] > 0 and live[1]["live_calls"] + live[1]["cached_calls"] == live[1]["calls"]
    endpoints.configure("smoke")
    recording, manifest = replies_export.export("smoke", root=recorder)
    assert manifest["calls"] == sum(s["calls"] for s in live)
    (prov,) = manifest["recordings"].values()
    assert prov["runtime"].startswith("xllamacpp ") and prov["gguf"].startswith("smollm2") and prov["cpu"]

    # Another machine: nothing cached, the recording named, and replay mode, in which a request the
    # recording lacks raises instead of reaching a model.
    replayer = _repo(tmp_path / "replayer")
    monkeypatch.setenv("MEMLIFE_ROOT", str(replayer))
    monkeypatch.setenv("MEMLIFE_CACHE_DIR", str(replayer / ".cache"))
    monkeypatch.setenv("MEMLIFE_REPLIES", str(recording))
    monkeypatch.setenv("MEMLIFE_LLM_MODE", "replay")
    replayed = [runner.run_notebook(nb, "smoke", root=replayer) for nb in NOTEBOOKS]
    for s, first in zip(replayed, live):
        assert (s["calls"], s["recorded_calls"], s["live_calls"]) == (first["calls"], first["calls"], 0)
    assert not (replayer / ".cache" / "llama-server" / "state.json").exists()  # no server was started

    ours, theirs = _outputs(recorder), _outputs(replayer)
    assert any(k.startswith("tables/restore_gold_retention") for k in ours)
    assert sorted(ours) == sorted(theirs)
    assert [k for k in ours if ours[k] != theirs[k]] == []

    # Exporting the replayed run gives the recording back, byte for byte.
    again, _ = replies_export.export("smoke", replayer / "again.jsonl.gz", root=replayer)
    assert again.read_bytes() == recording.read_bytes()
