"""`make batch` end to end: the restore notebooks at the smoke profile, their requests sent in waves
through the Batch API stand-in (tests/batchserver.py), then replayed with no model at all, their
records equal to those of a synchronous run against the same endpoint."""
import json
from pathlib import Path

import pandas as pd
import pytest

from batchserver import BatchServer

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ["20_longmem_data", "21_eviction", "22_read_restore"]


def _records(scratch: Path) -> pd.DataFrame:
    files = sorted((scratch / "results" / "smoke" / "restore" / "records").glob("*.parquet"))
    assert files, f"no records under {scratch}"
    df = pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)
    return df.sort_values(list(df.columns[:8])).reset_index(drop=True)


@pytest.mark.slow
def test_a_batch_run_leaves_the_notebooks_nothing_to_send_and_gives_a_synchronous_runs_records(
        isolated_llm, monkeypatch, tmp_path):
    from memlife.running import batch, estimate, runner

    with BatchServer(prompt_cache=True) as s:
        monkeypatch.setenv("MEMLIFE_BASE_URL", s.base_url)
        monkeypatch.setenv("MEMLIFE_MODEL", "gpt-4o-mini")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
        monkeypatch.setenv("MEMLIFE_SPEND_CAP_USD", "5")
        monkeypatch.setenv("MEMLIFE_SPEND_RUN", "batch-notebooks")
        project = estimate.prepare("smoke", ROOT, kind="batch-project")
        monkeypatch.setenv("MEMLIFE_ROOT", str(project))
        said = []
        state = batch.run("smoke", NOTEBOOKS, root=project, poll_s=0, say=said.append)
        waves = state["waves"]
        # The reader waits for the importance scores (21), the judges for the reader's answers.
        assert len(waves) >= 3 and waves[-1]["requests"] == 0, said
        assert waves[0]["notebooks"]["22_read_restore"] == {"waits_for": ["21_eviction"]}
        assert sum(w.get("imported", 0) for w in waves) == sum(s.batch_lines_processed.values()) > 0
        chat = sum(s.received.values()) - sum(s.batch_lines_processed.values())
        assert chat == 0  # nothing sent one by one: no notebook here ingests memories
        assert {r["role"] for b in state["done"] for r in
                json.loads((project / b["file"]).with_suffix(".meta.json").read_text())} == \
            {"scorer", "reader", "judge"}

        # Replayed: every request is in the cache, so nothing is sent and nothing is missing.
        replay = estimate.prepare("smoke", ROOT, kind="batch-replay")
        monkeypatch.setenv("MEMLIFE_ROOT", str(replay))
        with runner.environ(MEMLIFE_LLM_MODE="replay"):
            for nb in NOTEBOOKS:
                runner.run_notebook(nb, "smoke", root=replay, quiet=True)
        batched = _records(replay)

        # The reads and judgements made synchronously on the same evictions: the same endpoint, a
        # cache of its own (the importance scores' batch path is held to the synchronous one in
        # tests/test_batch.py).
        monkeypatch.setenv("MEMLIFE_CACHE_DIR", str(tmp_path / "sync-cache"))
        before = sum(s.received.values())
        runner.run_notebook("22_read_restore", "smoke", root=replay, quiet=True)
        assert sum(s.received.values()) - before == sum(
            1 for b in state["done"] for r in json.loads((project / b["file"]).with_suffix(".meta.json").read_text())
            if r["notebook"] == "22_read_restore")  # one by one, what the waves sent in batches
    assert s.rejected == []
    pd.testing.assert_frame_equal(batched, _records(replay))
