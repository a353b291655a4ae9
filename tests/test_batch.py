"""The Batch API path against a loopback stand-in of OpenAI's Files and Batches APIs
(tests/batchserver.py): requests collected instead of sent, written as batch input files, submitted,
polled, and their replies read into the cache, so that the run that follows sends nothing."""
import json

import pytest

from batchserver import BatchServer

HISTORY = " ".join(f"On day {i} the user moved the meeting with Dana to room {i % 7}." for i in range(160))
QUESTIONS = ["Which room is the meeting in?", "Who is the meeting with?", "How many days are mentioned?"]


def _reader_messages(q: str) -> list[dict]:
    return [{"role": "system", "content": "Answer from the history only."},
            {"role": "user", "content": f"History:\n{HISTORY}\n\nQuestion: {q}"}]


@pytest.fixture
def project(isolated_llm, tmp_path, monkeypatch):
    """A profile 't' whose reader is the stand-in; the client layer fresh, under tmp_path."""
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "t.yaml").write_text("common: {}\nnotebooks: {}\n")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    return tmp_path


def _point(isolated_llm, url: str, model: str = "gpt-4o-mini", **extra) -> None:
    from memlife.models import endpoints

    cap = extra.pop("cap", None)
    endpoints.configure(None, run="pytest", models={r: {"base_url": url, "model": model, **extra}
                                                    for r in ("reader", "judge")}, spend_cap_usd=cap)


def _collect(isolated_llm, monkeypatch, tmp_path, questions=QUESTIONS) -> list[dict]:
    """Ask the reader in collect mode; the collected lines."""
    from memlife.models import reply_cache

    where = tmp_path / "collected"
    monkeypatch.setenv("MEMLIFE_LLM_MODE", "collect")
    monkeypatch.setenv(reply_cache.COLLECT_DIR_ENV, str(where))
    reader = isolated_llm.get_client("reader")
    replies = [reader.complete(_reader_messages(q), max_tokens=64) for q in questions]
    assert all(reply_cache.PENDING_MARK in c.text for c in replies if not c.cached)  # stand-ins, marked
    monkeypatch.setenv("MEMLIFE_LLM_MODE", "live")
    return [json.loads(line) for f in sorted(where.glob("*.jsonl")) for line in f.read_text().splitlines()]


def _batch(project, requests, wave=1):
    from memlife.running import batch

    state = batch.load_state("t", project)
    batch.submit(state, "t", requests, wave, project / "wave", root=project, say=lambda *a: None)
    return state


def test_a_batch_answers_the_run_as_a_synchronous_run_does_and_the_run_then_sends_nothing(
        project, isolated_llm, monkeypatch, tmp_path):
    from memlife.models import accounting
    from memlife.running import batch

    with BatchServer(prompt_cache=True) as s:
        _point(isolated_llm, s.base_url, prompt_cache_key=True)
        # The synchronous run, in a cache of its own.
        monkeypatch.setenv("MEMLIFE_CACHE_DIR", str(tmp_path / "sync-cache"))
        reader = isolated_llm.get_client("reader")
        sync = [reader.complete(_reader_messages(q), max_tokens=64) for q in QUESTIONS]
        assert sync[1].cached_tokens >= 1024 and sync[1].cached_tokens % 128 == 0  # the provider's cache, read
        sent = sum(s.received.values())

        monkeypatch.setenv("MEMLIFE_CACHE_DIR", str(tmp_path / "batch-cache"))
        requests = _collect(isolated_llm, monkeypatch, tmp_path)
        assert sum(s.received.values()) == sent  # collecting sends nothing
        assert [r["body"]["messages"][-1]["content"][-30:] for r in requests] == \
            [_reader_messages(q)[-1]["content"][-30:] for q in QUESTIONS]  # in the order asked
        assert all(r["body"]["prompt_cache_key"] == requests[0]["body"]["prompt_cache_key"] for r in requests)
        state = _batch(project, requests)
        assert len(s.batches) == 1 and state["open"][0]["lines"] == 3
        batch.finish_open(state, "t", root=project, poll_s=0, say=lambda *a: None)
        assert state["open"] == [] and state["done"][0]["imported"] == 3

        again = [reader.complete(_reader_messages(q), max_tokens=64) for q in QUESTIONS]
        assert sum(s.received.values()) == sent + 3  # the three batch lines, and no synchronous call
    assert all(c.cached and c.source == "cache" for c in again)
    assert [(c.text, c.prompt_tokens, c.completion_tokens) for c in again] == \
        [(c.text, c.prompt_tokens, c.completion_tokens) for c in sync]
    log = [json.loads(x) for x in (tmp_path / "results" / "usage" / "pytest.calls.jsonl").read_text().splitlines()]
    batched = [r for r in log if r["source"] == "batch"]
    assert len(batched) == 3 and all(r["batch"] for r in batched)
    # The ledger's price: half the list price, the cached prompt tokens at the cached-input price.
    p = accounting.list_price("gpt-4o-mini")
    for r in batched:
        want = 0.5 * ((r["prompt_tokens"] - r["cached_prompt_tokens"]) * p.input
                      + r["cached_prompt_tokens"] * p.cached_input + r["completion_tokens"] * p.output) / 1e6
        assert r["usd"] == pytest.approx(want)
        assert r["usd_saved"] == pytest.approx((r["prompt_tokens"] * p.input + r["completion_tokens"] * p.output) / 1e6
                                               - want)
    assert state["done"][0]["usd"] == pytest.approx(sum(r["usd"] for r in batched))


def test_a_request_built_on_a_reply_not_yet_received_waits_for_a_later_wave(project, isolated_llm, monkeypatch,
                                                                            tmp_path):
    from memlife.models import reply_cache

    with BatchServer() as s:
        _point(isolated_llm, s.base_url)
        monkeypatch.setenv("MEMLIFE_LLM_MODE", "collect")
        monkeypatch.setenv(reply_cache.COLLECT_DIR_ENV, str(tmp_path / "collected"))
        answer = isolated_llm.get_client("reader").complete(_reader_messages(QUESTIONS[0]), max_tokens=64)
        verdict = isolated_llm.get_client("judge").complete(
            [{"role": "user", "content": f"Reply: {answer.text}\nIs it CORRECT or INCORRECT?"}], max_tokens=4)
        assert verdict.source == "deferred"
        with reply_cache.synchronous():  # ingestion cannot wait: sent at once
            sent = isolated_llm.get_client("reader").complete([{"role": "user", "content": "remember: room 4"}],
                                                              max_tokens=8)
        assert sent.source == "live" and sum(s.received.values()) == 1
    lines = [json.loads(x) for f in (tmp_path / "collected").glob("*.jsonl") for x in f.read_text().splitlines()]
    assert [ln["role"] for ln in lines] == ["reader"]


def test_an_interrupted_batch_run_polls_the_batch_it_submitted_and_submits_nothing_again(
        project, isolated_llm, monkeypatch, tmp_path):
    from memlife.running import batch

    with BatchServer() as s:
        _point(isolated_llm, s.base_url)
        _batch(project, _collect(isolated_llm, monkeypatch, tmp_path))
        # The process dies here; a new one reads the state from disk.
        state = batch.load_state("t", project)
        assert [b["id"] for b in state["open"]] == s.batches
        batch.finish_open(state, "t", root=project, poll_s=0, say=lambda *a: None)
        assert len(s.batches) == 1 and len(s.uploads) == 1
        assert batch.load_state("t", project)["done"][0]["imported"] == 3
        assert _collect(isolated_llm, monkeypatch, tmp_path / "next") == []  # every request answered


def test_failed_lines_and_expired_batches_are_asked_again_and_nothing_is_paid_twice(
        project, isolated_llm, monkeypatch, tmp_path):
    from memlife.models import reply_cache
    from memlife.running import batch

    with BatchServer() as s:
        _point(isolated_llm, s.base_url)
        requests = _collect(isolated_llm, monkeypatch, tmp_path)
        s.fail_custom_ids = {requests[0]["key"]}
        state = _batch(project, requests)
        batch.finish_open(state, "t", root=project, poll_s=0, say=lambda *a: None)
        assert (state["done"][0]["imported"], state["done"][0]["failed"]) == (2, 1)
        assert state["attempts"] == {requests[0]["key"]: 1}
        assert reply_cache.cache_get(requests[0]["key"]) is None
        # The next wave asks only what failed.
        again = _collect(isolated_llm, monkeypatch, tmp_path / "wave2")
        assert [r["key"] for r in again] == [requests[0]["key"]]
        s.fail_custom_ids = set()
        s.expire_next_batches = 1
        state = _batch(project, again, wave=2)
        batch.finish_open(state, "t", root=project, poll_s=0, say=lambda *a: None)
        assert state["done"][-1]["status"] == "expired" and state["done"][-1]["imported"] == 0
        state = _batch(project, _collect(isolated_llm, monkeypatch, tmp_path / "wave3"), wave=3)
        batch.finish_open(state, "t", root=project, poll_s=0, say=lambda *a: None)
    assert state["done"][-1]["imported"] == 1
    assert sum(s.batch_lines_processed.values()) == 4  # 3, then the failed one once: nothing run twice
    assert all(reply_cache.cache_get(r["key"]) is not None for r in requests)


def test_a_batch_that_fails_validation_costs_nothing_and_its_requests_are_asked_again(
        project, isolated_llm, monkeypatch, tmp_path):
    from memlife.models import spending
    from memlife.running import batch

    monkeypatch.setenv("MEMLIFE_SPEND_RUN", "batch-validation")
    with BatchServer() as s:
        _point(isolated_llm, s.base_url, cap=5.0)
        requests = _collect(isolated_llm, monkeypatch, tmp_path)
        s.fail_next_batches = 1
        state = _batch(project, requests)
        assert spending.spent() == pytest.approx(sum(r["worst_usd"] for r in requests))  # reserved while open
        batch.finish_open(state, "t", root=project, poll_s=0, say=lambda *a: None)
        assert state["done"][0]["status"] == "failed" and state["done"][0]["errors"][0]["code"] == "token_limit_exceeded"
        assert spending.spent() == 0.0  # settled at nothing
        assert len(_collect(isolated_llm, monkeypatch, tmp_path / "again")) == 3


def test_a_spending_cap_too_small_for_the_wave_submits_nothing_and_says_so(project, isolated_llm, monkeypatch,
                                                                          tmp_path):
    from memlife.models import endpoints

    monkeypatch.setenv("MEMLIFE_SPEND_RUN", "batch-cap")
    with BatchServer() as s:
        _point(isolated_llm, s.base_url, cap=0.00001)
        requests = _collect(isolated_llm, monkeypatch, tmp_path)
        with pytest.raises(endpoints.SpendingCapExceeded, match=r"3 requests\) could cost up to .*nothing was submitted"):
            _batch(project, requests)
        assert s.uploads == [] and s.batches == []


def test_an_endpoint_without_a_batch_api_is_named_with_what_to_do_instead(project, isolated_llm, monkeypatch,
                                                                          tmp_path):
    from memlife.models import batch_api

    with BatchServer(batch_api=False) as s:
        _point(isolated_llm, s.base_url, model="Qwen/Qwen2.5-7B-Instruct", price_per_mtok="0,0", context_window=32768)
        requests = _collect(isolated_llm, monkeypatch, tmp_path)
        with pytest.raises(batch_api.BatchUnsupported, match="has no Batch API.*--export"):
            _batch(project, requests)


def test_an_output_file_naming_requests_never_sent_is_refused_whole(project, isolated_llm, monkeypatch, tmp_path):
    from memlife.models import batch_api, reply_cache
    from memlife.running import batch

    with BatchServer() as s:
        _point(isolated_llm, s.base_url, model="Qwen/Qwen2.5-7B-Instruct", price_per_mtok="0,0", context_window=32768)
        requests = _collect(isolated_llm, monkeypatch, tmp_path)
        state = batch.load_state("t", project)
        state["exported"].append({"files": [], "requests": [{k: r[k] for k in ("key", "role", "model", "price",
                                                                                  "notebook")} for r in requests]})
        batch.save_state(state, "t", project)
        import openai

        sdk = openai.OpenAI(base_url=s.base_url, api_key="sk-test")
        out = []
        for r in requests:  # what vLLM's run_batch writes: OpenAI's output lines
            body = sdk.chat.completions.create(**r["body"]).model_dump()
            out.append({"id": "vllm-1", "custom_id": r["key"], "response": {"status_code": 200, "body": body},
                        "error": None})
    good = tmp_path / "out.jsonl"
    good.write_text("".join(json.dumps(x) + "\n" for x in out))
    bad = tmp_path / "other.jsonl"
    bad.write_text(json.dumps(out[0]) + "\n" + json.dumps({**out[1], "custom_id": "f" * 64}) + "\n")
    with pytest.raises(batch_api.BatchError, match=r"other.jsonl, line 2: custom_id 'f+' is no request this run sent"):
        batch.import_file("t", bad, root=project, say=lambda *a: None)
    assert reply_cache.cache_get(requests[0]["key"]) is None  # nothing of the refused file was read
    got = batch.import_file("t", good, root=project, say=lambda *a: None)
    assert got["imported"] == 3 and all(reply_cache.cache_get(r["key"]) for r in requests)


def test_input_files_keep_one_model_a_file_and_split_at_the_limits(tmp_path):
    from memlife.models import batch_api

    lines = [batch_api.input_line(f"k{i}", {"model": "a" if i < 5 else "b", "messages": [{"role": "user",
                                                                                        "content": "x" * 50}]})
             for i in range(7)]
    files = batch_api.input_files(lines, tmp_path, max_lines=2)
    rows = [[json.loads(x) for x in f.read_text().splitlines()] for f in files]
    assert [len(r) for r in rows] == [2, 2, 1, 2]
    assert all(len({x["body"]["model"] for x in r}) == 1 for r in rows)
    assert [x["custom_id"] for r in rows for x in r] == [f"k{i}" for i in range(7)]  # the order asked
    one = len(json.dumps(lines[0], separators=(",", ":"))) + 1
    assert [len(f.read_text().splitlines()) for f in batch_api.input_files(lines[:5], tmp_path / "b",
                                                                           max_bytes=2 * one + 5)] == [2, 2, 1]
    with pytest.raises(batch_api.BatchError, match="k0 twice"):
        batch_api.input_files([lines[0], lines[0]], tmp_path / "c")


def test_the_stores_the_waves_built_are_handed_to_the_project_and_never_over_its_own(project, tmp_path):
    from memlife.running import batch

    scratch = tmp_path / "scratch"
    (scratch / "configs").mkdir(parents=True)
    (scratch / "configs" / "t.yaml").write_text("common: {}\nnotebooks: {}\n")
    stores = scratch / "results" / "t" / "memops" / "stores"
    (stores / "key1" / "mem0").mkdir(parents=True)
    (stores / "key1" / "mem0" / "INGESTED").write_text("yes")
    (stores / "key2").mkdir()
    (stores / "key2" / "scratch's").write_text("")
    own = project / "results" / "t" / "memops" / "stores" / "key2"
    own.mkdir(parents=True)
    (own / "project's").write_text("")
    assert batch.adopt_local_work("t", scratch, project) == ["results/t/memops/stores/key1"]
    assert (project / "results" / "t" / "memops" / "stores" / "key1" / "mem0" / "INGESTED").read_text() == "yes"
    assert (stores / "key1").is_symlink() and (stores / "key1" / "mem0" / "INGESTED").is_file()
    assert sorted(p.name for p in own.iterdir()) == ["project's"]  # the project's own is kept
    assert batch.adopt_local_work("t", scratch, project) == []  # done once
