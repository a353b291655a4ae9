"""`make estimate` against the run it estimates: the restore track's notebooks at the smoke profile,
estimated with nothing sent, then run against the strict emulator playing a reasoning model."""
import json
from pathlib import Path

import pytest

from strictserver import StrictServer

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ["20_longmem_data", "21_eviction", "22_read_restore"]


@pytest.mark.slow
def test_the_estimate_counts_the_calls_and_prompt_tokens_the_run_then_makes(isolated_llm, monkeypatch, tmp_path):
    from memlife.running import estimate, runner

    monkeypatch.setenv("MEMLIFE_ROOT", str(ROOT))
    with StrictServer() as s:
        monkeypatch.setenv("MEMLIFE_BASE_URL", s.base_url)
        monkeypatch.setenv("MEMLIFE_MODEL", "gpt-5-mini")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
        est = estimate.run("smoke", NOTEBOOKS, root=ROOT, dest=tmp_path / "estimate.json")
        assert est["failed"] == {} and sum(s.received.values()) == 0  # nothing was sent
        assert json.loads((tmp_path / "estimate.json").read_text())["profile"] == "smoke"
        text = estimate.render(est)
        assert "21_eviction" in text and "scorer" in text and "gpt-5-mini" in text

        # The rehearsal: the same notebooks, sent to the emulator, in a scratch project of their own.
        scratch = estimate.prepare("smoke", ROOT, kind="rehearsal")
        monkeypatch.setenv("MEMLIFE_ROOT", str(scratch))
        ran = [runner.run_notebook(n, "smoke", root=scratch, quiet=True) for n in NOTEBOOKS]
    assert s.rejected == []
    for e, r in zip(est["notebooks"], ran):
        assert e["notebook"] == r["notebook"]
        for role, er in e["by_role"].items():
            rr = r["by_role"][role]
            assert er["live_calls"] == rr["live_calls"] > 0, (e["notebook"], role)
            assert abs(er["prompt_tokens"] - rr["prompt_tokens"]) <= 0.1 * rr["prompt_tokens"], (e["notebook"], role)
            assert er["completion_tokens"] >= rr["completion_tokens"]  # the budget: an upper bound
    assert {r for e in est["notebooks"] for r in e["by_role"]} == {"scorer", "reader", "judge"}


def test_a_scratch_project_finds_memos_environment_so_memos_is_run_and_counted(tmp_path, monkeypatch):
    from memlife.memops import managed
    from memlife.running import estimate

    monkeypatch.setenv("MEMLIFE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("MEMLIFE_MEMOS_PYTHON", raising=False)
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "paper.yaml").write_text("common: {}\nnotebooks: {}\n")
    memos = tmp_path / ".venv-memos" / "bin" / "python"
    memos.parent.mkdir(parents=True)
    memos.write_text("")
    scratch = estimate.prepare("paper", tmp_path)
    assert managed.memos_python(scratch).is_file()
    monkeypatch.setenv("MEMLIFE_ROOT", str(scratch))
    assert managed.memos_available()
