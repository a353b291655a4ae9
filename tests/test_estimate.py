"""`make estimate`, `make pilot` and `make batch` against the run they stand for: the restore track's
notebooks at the smoke profile, estimated with nothing sent, piloted, run, and sent through the
Batch API, against the loopback stand-in of OpenAI's API (tests/batchserver.py) playing a
reasoning model with a prompt cache."""
import json
from pathlib import Path

import pandas as pd
import pytest

from batchserver import BatchServer

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ["20_longmem_data", "21_eviction", "22_read_restore"]


def _whole_run(usage: Path, notebooks: list[str]) -> dict[str, dict]:
    """Per role, what a run sent or would have sent with an empty cache: each request once (the
    first time it was asked, live or from the cache), with the tokens its reply carries."""
    from memlife.models import accounting

    seen, out = set(), {}
    for nb in notebooks:
        log = usage / f"{nb}.calls.jsonl"
        for line in log.read_text().splitlines() if log.exists() else []:
            c = json.loads(line)
            if c["request_id"] in seen or c["source"] not in ("live", "cache"):
                continue
            seen.add(c["request_id"])
            r = out.setdefault(c["role"], {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "usd": 0.0})
            r["calls"] += 1
            r["prompt_tokens"] += c["prompt_tokens"]
            r["completion_tokens"] += c["completion_tokens"]
            r["usd"] += accounting.list_price(c["model"]).usd(c["prompt_tokens"], c["completion_tokens"],
                                                               cached_tokens=c.get("cached_prompt_tokens") or 0)
    return out


def _records(project: Path) -> pd.DataFrame:
    files = sorted((project / "results" / "smoke" / "restore" / "records").glob("*.parquet"))
    assert files, f"no records under {project}"
    df = pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)
    return df.sort_values(list(df.columns[:8])).reset_index(drop=True)


@pytest.mark.slow
def test_the_estimate_counts_the_run_a_pilot_forecasts_it_and_a_batch_run_gives_its_records(
        isolated_llm, monkeypatch, tmp_path):
    """The smoke profile with two questions: estimated with nothing sent; a pilot at half of it (one
    question) sent to the emulator playing a reasoning model with OpenAI's prompt cache; then the
    whole run, which finds the pilot's replies in the cache and sends none of them again; then, from
    an empty cache, `make batch`: waves through the Batch API until nothing is left, after which
    the notebooks send nothing and their records are the synchronous run's. (One test, so that the
    notebooks run as few times as the checks need.)"""
    from memlife.base import config
    from memlife.models import reply_cache
    from memlife.running import batch, estimate, pilot, runner, scale

    cfg = config.load_profile("smoke", ROOT)
    cfg["notebooks"]["20_longmem_data"]["n_questions"] = 2
    root = scale.write_root(tmp_path / "project", "smoke", cfg, note="smoke with two questions", root=ROOT)
    monkeypatch.setenv("MEMLIFE_ROOT", str(root))
    with BatchServer(prompt_cache=True) as s:
        monkeypatch.setenv("MEMLIFE_BASE_URL", s.base_url)
        monkeypatch.setenv("MEMLIFE_MODEL", "gpt-5-mini")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
        est = estimate.run("smoke", NOTEBOOKS, root=root, dest=tmp_path / "estimate.json")
        assert est["failed"] == {} and len(s.bodies) == 0  # nothing was sent
        written = json.loads((tmp_path / "estimate.json").read_text())
        assert written["profile"] == "smoke" and written["fingerprint"] == estimate.fingerprint("smoke", root)
        assert all(r["wall_s"] > 0 for r in written["notebooks"]) and written["wall_s"] > 0
        text = estimate.render(est)
        assert "21_eviction" in text and "scorer" in text and "gpt-5-mini" in text and "batch+cache" in text

        report = pilot.run("smoke", 0.5, NOTEBOOKS, root=root, estimate_path=tmp_path / "estimate.json",
                           out=tmp_path / "pilot.json", say=lambda *a: None)
        assert report["estimate"]["reused"] and report["failed"] == {}
        assert "20_longmem_data.n_questions: 2 -> 1" in report["changes"]
        by_pilot = len(s.bodies)
        assert by_pilot == report["pilot"]["live_calls"] > 0
        assert json.loads((tmp_path / "pilot.json").read_text()) == {k: report[k] for k in ("roles", "total")}
        assert "the whole run forecast" in pilot.render(report)

        # The whole run, in a scratch project of its own, with the project's cache the pilot filled.
        scratch = estimate.prepare("smoke", root, kind="rehearsal")
        monkeypatch.setenv("MEMLIFE_ROOT", str(scratch))
        ran = [runner.run_notebook(n, "smoke", root=scratch, quiet=True) for n in NOTEBOOKS]
        bodies = [json.dumps(b, sort_keys=True) for b in s.bodies]

        # make batch, from an empty cache: the reads wait for the importance scores, the judges for the reads.
        monkeypatch.setenv("MEMLIFE_CACHE_DIR", str(tmp_path / "batch-cache"))
        monkeypatch.setenv("MEMLIFE_SPEND_CAP_USD", "5")
        monkeypatch.setenv("MEMLIFE_SPEND_RUN", "estimate-test-batch")
        project = estimate.prepare("smoke", root, kind="batch-project")
        monkeypatch.setenv("MEMLIFE_ROOT", str(project))
        said: list[str] = []
        state = batch.run("smoke", NOTEBOOKS, root=project, poll_s=0, say=said.append)
        chat = len(s.bodies) - len(bodies) - sum(s.batch_lines_processed.values())
        batched = _records(estimate.scratch_root("smoke", project, kind="batch"))
        monkeypatch.setenv("MEMLIFE_CACHE_DIR", str(tmp_path / "cache"))  # the pilot's and the run's, checked below
    assert s.rejected == []
    waves = state["waves"]
    assert len(waves) >= 3 and waves[-1]["requests"] == 0, said
    assert waves[0]["notebooks"]["22_read_restore"] == {"waits_for": ["21_eviction"]}
    assert sum(w.get("imported", 0) for w in waves) == sum(s.batch_lines_processed.values()) > 0
    assert chat == 0  # nothing sent one by one: these notebooks ingest no memories
    # Each notebook's last collecting run found every request in the cache: the run after the
    # waves sends nothing (a notebook's last wave is the one in which it was done).
    for nb in NOTEBOOKS:
        last = [w["notebooks"][nb] for w in waves if nb in w["notebooks"] and "waits_for" not in w["notebooks"][nb]][-1]
        assert (last["pending"], last["deferred"], last["sent_at_once"]) == (0, 0, 0), (nb, last)
    pd.testing.assert_frame_equal(batched, _records(scratch))
    assert len(set(bodies)) == len(bodies)  # nothing was sent twice
    assert len(bodies) - by_pilot == sum(r["live_calls"] for r in ran)
    pilot_usage = Path(report["scratch"]) / "results" / "smoke" / "usage"
    paid = [c["request_id"] for nb in NOTEBOOKS if (pilot_usage / f"{nb}.calls.jsonl").exists()
            for c in map(json.loads, (pilot_usage / f"{nb}.calls.jsonl").read_text().splitlines()) if not c["cached"]]
    assert len(paid) == by_pilot and all(reply_cache.cache_get(k) is not None for k in paid)
    whole = _whole_run(scratch / "results" / "smoke" / "usage", NOTEBOOKS)

    # The estimate: the whole run's calls exactly, its prompt tokens within 10%, budgets over what was spent.
    for e in est["notebooks"]:
        sent = _whole_run(scratch / "results" / "smoke" / "usage", [e["notebook"]])
        for role, er in e["by_role"].items():
            assert er["live_calls"] == sent[role]["calls"] > 0, (e["notebook"], role)
            assert abs(er["prompt_tokens"] - sent[role]["prompt_tokens"]) <= 0.1 * sent[role]["prompt_tokens"]
            assert er["completion_tokens"] >= sent[role]["completion_tokens"]  # the budget: an upper bound
    assert {r for e in est["notebooks"] for r in e["by_role"]} == {"scorer", "reader", "judge"}

    # The pilot's forecast of the whole run: within 15% per role and in total.
    assert set(report["roles"]) == set(whole)
    for role, truth in [*whole.items(), ("total", {k: sum(w[k] for w in whole.values()) for k in
                                                   ("calls", "prompt_tokens", "completion_tokens", "usd")})]:
        f = report["total"] if role == "total" else report["roles"][role]
        for k in ("calls", "prompt_tokens", "completion_tokens", "usd"):
            assert abs(f[k] - truth[k]) <= 0.15 * truth[k], (role, k, f[k], truth[k])
        assert f["usd"] > 0 and f["usd_low"] <= f["usd"] <= f["usd_high"] and f["usd"] < f["usd_ceiling"]


def test_a_scratch_project_finds_memos_environment_so_memos_is_run_and_counted(tmp_path, monkeypatch):
    from memlife.memops.systems import managed
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


def _row(**role) -> dict:
    base = {"calls": 10, "cached_calls": 2, "live_calls": 8, "prompt_tokens": 20_000, "completion_tokens": 4_000,
            "usd": 0.011, "models": ["gpt-4o-mini"]}
    return {"notebook": "22_read_restore", "by_role": {"reader": {**base, **role}}, "unpriced_models": []}


def test_the_estimate_shows_the_dollars_four_ways_and_says_the_completions_are_budgets():
    from memlife.models.accounting import Price
    from memlife.running import estimate

    price = Price(0.15, 0.60, 0.075)
    row = _row(cached_prompt_tokens=8_000)
    r = row["by_role"]["reader"]
    for key, cached, batch in (("usd_list", 0, False), ("usd_list_cached", 8_000, False),
                               ("usd_batch", 0, True), ("usd_batch_cached", 8_000, True)):
        r[key] = price.usd(20_000, 4_000, cached_tokens=cached, batch=batch)
    text = estimate.render({"profile": "p", "notebooks": [row], "failed": {}, "wall_s": 75.0})
    line = next(x for x in text.splitlines() if x.startswith("22_read_restore"))
    # list 0.0054, with the cache 0.0048 (8,000 of the prompt at half the input price), batch half of each
    assert line.split()[-4:] == ["0.0054", "0.0048", "0.0027", "0.0024"] and "8,000" in line
    assert "whole completion budget" in text and "ceiling" in text and "took 01:15" in text


def test_an_estimate_written_before_the_prompt_cache_was_counted_still_renders():
    from memlife.running import estimate

    text = estimate.render({"profile": "p", "notebooks": [_row()], "failed": {}})
    line = next(x for x in text.splitlines() if x.startswith("22_read_restore"))
    assert line.split()[-4:] == ["0.0110", "0.0110", "-", "-"]  # its usd, without a cache then; no batch price
    total = next(x for x in text.splitlines() if x.startswith("total"))
    assert total.split()[-4:] == ["0.0110", "0.0110", "-", "-"]


def test_an_estimate_says_how_long_the_last_one_took_or_how_big_the_profile_is(isolated_llm, tmp_path):
    from memlife.base import config
    from memlife.running import estimate, scale

    root = scale.write_root(tmp_path / "project", "smoke", config.load_profile("smoke", ROOT), note="a test",
                            root=ROOT)
    nbs = ["20_longmem_data", "21_eviction"]
    first = estimate.announce("smoke", nbs, root=root)
    assert "cannot be told" in first and "1 question of ~10,000 tokens" in first and "conversation" not in first
    path = estimate.default_path("smoke", root)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"profile": "smoke", "made": "2026-01-02 03:04:05", "host": None,
                                "fingerprint": estimate.fingerprint("smoke", root),
                                "notebooks": [{"notebook": "20_longmem_data", "wall_s": 30.0}]}))
    again = estimate.announce("smoke", nbs, root=root)
    assert "took 00:30 for 20_longmem_data" in again and "did not run 21_eviction" in again
    assert "changed since" not in again


def test_an_estimate_priced_as_another_model_counts_only_what_goes_to_an_api():
    from memlife.models import accounting
    from memlife.running import estimate

    est = {"notebooks": [
        {"notebook": "22_read_restore", "by_role": {
            "reader": {"live_calls": 10, "prompt_tokens": 2_000_000, "cached_prompt_tokens": 1_000_000,
                       "completion_tokens": 100_000, "models": ["gpt-4o-mini"]},
            "judge": {"live_calls": 10, "prompt_tokens": 0, "cached_prompt_tokens": 0, "completion_tokens": 0,
                      "models": ["smollm2-135m-instruct-q4_1"]}}},
        {"notebook": "12_memops_eval", "by_role": {
            "temp_lora": {"live_calls": 5, "prompt_tokens": 9_999, "completion_tokens": 9_999, "models": ["x"]}}}]}
    r = estimate.repriced(est, "gpt-4.1-mini")
    p = accounting.list_price("gpt-4.1-mini")  # 0.40 in, 0.10 cached, 1.60 out
    assert r["calls"] == 10 and r["prompt_tokens"] == 2_000_000
    assert r["usd_list"] == round(2 * 0.40 + 0.1 * 1.60, 2) == 0.96
    assert r["usd_list_cached"] == round(1 * 0.40 + 1 * 0.10 + 0.1 * 1.60, 2) == 0.66
    assert r["usd_batch"] == 0.48 and r["usd_batch_cached"] == 0.33
    assert r["usd_prompt_share"] == round(0.80 / 0.96, 3)
    assert p.cached_input == 0.10


def test_a_local_models_own_role_is_priced_at_nothing_and_sent_nowhere(isolated_llm, monkeypatch):
    from memlife.running import estimate, pilot

    monkeypatch.setenv("MEMLIFE_ROOT", str(ROOT))
    rows = [{"notebook": "12_memops_eval", "by_role": {
        "temp_lora": {"live_calls": 3, "prompt_tokens": 900, "cached_prompt_tokens": 0, "completion_tokens": 30,
                      "models": ["temp-lora"]}}}]
    estimate.role_prices("smoke", rows)  # Temp-LoRA answers under a role of its own, which no endpoint has
    assert rows[0]["by_role"]["temp_lora"]["usd_list"] == 0.0
    assert pilot.units_from({"notebooks": rows}, {}, lambda nb, role: pytest.fail(f"asked for {role}")) == []
