"""What a run tells the person who started it: one live line per notebook, the project's notices,
and everything else (library warnings, log records, subprocesses' stderr) in the notebook's log."""
import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from memlife.base import artifacts, progress
from memlife.running import runner

ROOT = Path(__file__).resolve().parents[1]

# A notebook that makes every kind of noise a kernel makes, and one notice.
NOISY_CELLS = [
    'profile = "smoke"',
    """import logging, os, subprocess, sys, warnings
from memlife.base import progress
warnings.warn("LIBRARY-WARNING-7c1", UserWarning)
logging.getLogger("some.library").warning("LOG-RECORD-7c1")
os.write(2, b"NATIVE-STDERR-7c1\\n")
subprocess.run([sys.executable, "-c", "import sys; sys.stderr.write('SUBPROCESS-STDERR-7c1\\\\n')"], check=True)
for _ in progress.bar(range(3), desc="work that matters"):
    pass
progress.notice("NOTICE-7c1: most replies malformed")
print("CELL-PRINT-7c1")""",
]
NOISE = ("LIBRARY-WARNING-7c1", "LOG-RECORD-7c1", "NATIVE-STDERR-7c1", "SUBPROCESS-STDERR-7c1")


@pytest.fixture
def noisy_repo(tmp_path):
    root = tmp_path / "repo"
    (root / "notebooks").mkdir(parents=True)
    (root / "configs").mkdir()
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in NOISY_CELLS]
    nb.cells[0].metadata["tags"] = ["parameters"]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, root / "notebooks" / "90_noisy.ipynb")
    (root / "configs" / "smoke.yaml").write_text("common: {}\nnotebooks:\n  90_noisy: {}\n")
    return root


def _run_cli(root: Path, **env) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k != "MEMLIFE_VERBOSE"}
    full.update(MEMLIFE_ROOT=str(root), MEMLIFE_CACHE_DIR=str(root / ".cache"), **env)
    return subprocess.run([sys.executable, "-m", "memlife.running.runner", "90_noisy", "--profile", "smoke"], cwd=root,
                          env=full, capture_output=True, text=True, timeout=300)


def test_library_noise_lands_in_the_log_and_the_terminal_gets_the_notice(noisy_repo):
    done = _run_cli(noisy_repo)
    assert done.returncode == 0, done.stderr
    terminal = done.stdout + done.stderr
    for noise in NOISE:
        assert noise not in terminal, f"{noise} reached the terminal:\n{terminal}"
    log = (noisy_repo / "results" / "smoke" / "logs" / "90_noisy.log").read_text()
    for noise in NOISE:
        assert noise in log, f"{noise} is missing from the log"
    assert "NOTICE-7c1: most replies malformed" in terminal  # said by the project, with the log's path
    assert "results/smoke/logs/90_noisy.log" in terminal
    summary = json.loads((noisy_repo / "results" / "smoke" / "usage" / "90_noisy.json").read_text())
    assert summary["notices"] == ["NOTICE-7c1: most replies malformed"]
    assert summary["log"] == "results/smoke/logs/90_noisy.log"
    # The executed notebook still has what a reader of it wants: the cell's own print.
    executed = (noisy_repo / "results" / "smoke" / "notebooks" / "90_noisy.ipynb").read_text()
    assert "CELL-PRINT-7c1" in executed


def test_verbose_shows_everything_in_the_terminal(noisy_repo):
    done = _run_cli(noisy_repo, MEMLIFE_VERBOSE="1")
    assert done.returncode == 0, done.stderr
    assert "NATIVE-STDERR-7c1" in done.stdout + done.stderr


def test_a_failed_notebook_names_its_executed_copy_and_log(noisy_repo):
    nb = nbformat.read(noisy_repo / "notebooks" / "90_noisy.ipynb", as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell('raise RuntimeError("BROKEN-7c1")'))
    nbformat.write(nb, noisy_repo / "notebooks" / "90_noisy.ipynb")
    done = _run_cli(noisy_repo)
    assert done.returncode == 1
    assert "BROKEN-7c1" in done.stderr and "90_noisy.FAILED.ipynb" in done.stderr
    assert "results/smoke/logs/90_noisy.log" in done.stderr
    assert not any(noise in done.stdout + done.stderr for noise in NOISE)


def test_a_bar_publishes_its_state_for_the_runner(tmp_path, monkeypatch):
    state = tmp_path / "progress.json"
    monkeypatch.setenv(progress.PROGRESS_ENV, str(state))
    with progress.bar(total=5, desc="probes answered") as bar:
        bar.update(2)
        bar.set_postfix_str("mem0 / adjacent")
        bar._publish(force=True)
        seen = json.loads(state.read_text())
        assert (seen["desc"], seen["n"], seen["total"], seen["postfix"], seen["closed"]) == \
               ("probes answered", 2, 5, "mem0 / adjacent", False)
        bar.update(3)
    assert json.loads(state.read_text())["closed"] is True and json.loads(state.read_text())["n"] == 5
    monkeypatch.setattr(progress, "_PUBLISH_EVERY_S", 0.0)
    seen = []
    for _ in progress.bar(range(3), desc="an iteration"):
        seen.append(json.loads(state.read_text())["n"])
    assert seen[-1] >= 1 and json.loads(state.read_text())["n"] == 3  # counted while it runs, not only at the end
    with progress.bar(total=3, desc="hidden", disable=True) as bar:
        bar.update(1)
    assert json.loads(state.read_text())["desc"] == "an iteration"  # a disabled bar says nothing


def test_the_line_counts_calls_as_they_are_appended_and_estimates_what_is_left(tmp_path):
    calls = tmp_path / "calls.jsonl"
    counter = progress._CallCounter(calls)
    counter.poll()  # no file yet
    calls.write_text(json.dumps({"cached": True}) + "\n" + json.dumps({"cached": False}) + "\n{\"cach")
    counter.poll()
    assert (counter.calls, counter.cached) == (2, 1)  # the half-written line is not counted yet
    with open(calls, "a") as fh:
        fh.write('ed": true}\n')
    counter.poll()
    assert (counter.calls, counter.cached) == (3, 2)
    state = {"desc": "probes answered", "n": 30, "total": 72, "elapsed_s": 50.0, "postfix": "mem0 / adjacent",
             "closed": False, "time": 1000.0}
    line = progress.format_line("12_memops_eval", state, counter.calls, counter.cached, 75.0, now=1010.0)
    # 30 probes in 60 s (50 s when the state was written, 10 s since): 42 left take 84 s
    assert line == "12_memops_eval | probes answered 30/72 (42%, ETA 01:24) | mem0 / adjacent | " \
                   "3 model calls (2 cached) | 01:15"
    assert "ETA ?" in progress.format_line("x", {**state, "n": 0}, 0, 0, 1.0, now=1000.0)
    assert progress.format_line("20_longmem_data", None, 0, 0, 3.0) == "20_longmem_data | 0 model calls (0 cached) | 00:03"


def test_notices_and_outputs_are_recorded_for_the_summary(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(progress.NOTICES_ENV, str(tmp_path / "notices.jsonl"))
    monkeypatch.setenv(progress.OUTPUTS_ENV, str(tmp_path / "outputs.jsonl"))
    progress.notice("memos stored no memory")
    progress.notice("memos stored no memory")
    assert "notice: memos stored no memory" in capsys.readouterr().out  # the notebook shows it too
    assert progress.read_notices(tmp_path / "notices.jsonl") == ["memos stored no memory"]
    import pandas as pd

    artifacts.save_table(pd.DataFrame({"a": [1]}), "t1", tmp_path / "results" / "tables")
    assert progress.read_outputs(tmp_path / "outputs.jsonl", tmp_path) == ["results/tables/t1.csv"]
    (tmp_path / "broken.jsonl").write_text("not json\n")
    with pytest.raises(ValueError, match=r"broken.jsonl: line 1: field 'message'"):
        progress.read_notices(tmp_path / "broken.jsonl")


def test_the_closing_summary_lists_calls_outputs_and_notices(tmp_path):
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "quick.yaml").write_text("common: {}\nnotebooks: {}\n")
    usage = tmp_path / "results" / "quick" / "usage"
    usage.mkdir(parents=True)
    for name, calls, cached, outputs, notices in (
            ("12_memops_eval", 147, 100, [], ["most replies malformed: temp_lora/adjacent 6 of 6"]),
            ("13_memops_tables", 0, 0, ["results/quick/tables/memops_table3.csv", "results/quick/figures/memops_delta.png"], [])):
        (tmp_path / "notebooks" / f"{name}.ipynb").write_text("{}")
        (usage / f"{name}.json").write_text(json.dumps({
            "notebook": name, "profile": "quick", "wall_s": 61.0, "calls": calls, "cached_calls": cached,
            "live_calls": calls - cached, "prompt_tokens": 1000, "completion_tokens": 200, "usd_estimate": 0.0,
            "outputs": outputs, "notices": notices, "log": f"results/quick/logs/{name}.log"}))
    text = runner.summary("quick", tmp_path)
    lines = text.splitlines()
    assert lines[0] == "== [quick] 2 notebooks run"
    assert lines[2].split() == ["12_memops_eval", "01:01", "147", "100", "47", "1,200", "0.0000"]
    assert lines[4].split()[:5] == ["total", "02:02", "147", "100", "47"]
    assert "written to results/quick/figures/ (1): memops_delta.png" in lines
    assert "written to results/quick/tables/ (1): memops_table3.csv" in lines
    assert ("notice from 12_memops_eval: most replies malformed: temp_lora/adjacent 6 of 6 "
            "(log: results/quick/logs/12_memops_eval.log)") in lines
    assert runner.summary("quick", tmp_path, since=4e9).startswith("== [quick] nothing ran")


def test_a_memops_run_says_when_most_replies_are_malformed_or_a_store_stayed_empty():
    import pandas as pd

    from memlife.memops.systems import answering

    records = pd.DataFrame({"system": ["temp_lora"] * 2 + ["bm25_turn"] * 2, "setting": ["adjacent"] * 4,
                            "malformed": [True, True, True, False], "truncated_tokens": [0, 0, 0, 0]})
    ingested = pd.DataFrame({"system": ["memos", "memos", "mem0"], "memories_added": ["[0, 0]", "[1, 0]", None],
                             "extract_errors": ['["KeyError"]', "[]", None]})
    assert answering.run_notices(records, ingested) == [
        "most replies malformed (ended on their own and did not parse; kept and labelled malformed): "
        "temp_lora/adjacent 2 of 2",
        "memos stored no memory for 1 of 2 histories (1 extraction replies did not parse); its answers read an "
        "empty store"]
    assert answering.run_notices(records[records.system == "bm25_turn"], ingested.iloc[1:]) == []
    cut = records.assign(truncated_tokens=[0, 0, 1000, 3001])
    assert answering.run_notices(cut[cut.system == "bm25_turn"], ingested.iloc[1:]) == [
        "contexts cut to fit the reader's window (oldest turns dropped): bm25_turn/adjacent 2 of 2, "
        "2,000 tokens on average"]


def test_the_closing_summary_says_what_the_prompt_cache_and_the_batch_api_saved(tmp_path):
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "paper.yaml").write_text("common: {}\nnotebooks: {}\n")
    usage = tmp_path / "results" / "paper" / "usage"
    usage.mkdir(parents=True)
    (tmp_path / "notebooks" / "22_read_restore.ipynb").write_text("{}")
    (usage / "22_read_restore.json").write_text(json.dumps({
        "notebook": "22_read_restore", "profile": "paper", "wall_s": 5.0, "calls": 3, "cached_calls": 1,
        "live_calls": 2, "prompt_tokens": 9000, "cached_prompt_tokens": 4096, "completion_tokens": 30,
        "usd_estimate": 0.001, "usd_saved": 0.0003, "outputs": [], "notices": []}))
    (usage / "batch.calls.jsonl").write_text("".join(json.dumps(
        {"role": "reader", "model": "gpt-4o-mini", "request_id": f"k{i}", "cached": False, "source": "batch",
         "prompt_tokens": 1000, "cached_prompt_tokens": 0, "completion_tokens": 10, "batch": True,
         "latency_s": 0.0, "usd": 0.0000780, "usd_saved": 0.0000780}) + "\n" for i in range(2)))
    lines = runner.summary("paper", tmp_path).splitlines()
    assert ("of the prompt tokens sent, 4,096 came from the provider's prompt cache; it and the Batch API took "
            "$0.0003 off the list price") in lines
    assert ("sent through the Batch API (make batch): 2 replies, $0.0002 at the batch price, $0.0002 below the "
            "list price (results/paper/usage/batch.calls.jsonl)") in lines
