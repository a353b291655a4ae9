"""Recorded replies (memlife.models.replies): export a run's replies, replay them with no model call.

The model here is a real HTTP server on loopback (tests/faultserver.py) answering ``echo: <prompt>``
unless scripted otherwise; `fault_server.received` counts every request that reached it.
"""
import gzip
import json
from pathlib import Path

import pytest

from memlife.base import paths
from memlife.models import accounting, endpoints, replies, replies_export, reply_cache

from conftest import point_at

MSG = lambda text: [{"role": "user", "content": text}]  # noqa: E731
PROMPTS = ("Where does Maya live?", "Which plan am I on?", "What is my locker number?")


def _run(llm, client, run: str, prompts=PROMPTS, profile="smoke"):
    """One 'notebook' run: its calls logged under `run`, then its summary, as the runner writes."""
    endpoints._settings["run"], endpoints._settings["profile"] = run, profile  # as the notebook's endpoints.configure(profile)
    usage = paths.layout(profile).usage
    usage.mkdir(parents=True, exist_ok=True)
    (usage / f"{run}.calls.jsonl").unlink(missing_ok=True)
    out = [client.complete(MSG(p), max_tokens=8) for p in prompts]
    summary = {"notebook": run, "profile": profile, **accounting.summarize_calls(usage / f"{run}.calls.jsonl")}
    (usage / f"{run}.json").write_text(json.dumps(summary))
    return out, summary


@pytest.fixture
def repo(isolated_llm, tmp_path):
    """A repository of two notebooks (the export takes every notebook's last run)."""
    (tmp_path / "notebooks").mkdir()
    for nb in ("01_first", "02_second"):
        (tmp_path / "notebooks" / f"{nb}.ipynb").write_text("{}")
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "smoke.yaml").write_text("common: {}\nnotebooks: {}\n")
    return tmp_path


def _record(llm, fault_server, repo):
    client = point_at(llm, fault_server, model="fake-model")
    _run(llm, client, "01_first", PROMPTS[:2])
    _run(llm, client, "02_second", PROMPTS[1:])  # one request shared with the first notebook
    return replies_export.export("smoke")


def test_a_replayed_run_makes_no_model_call_and_gets_the_recorded_replies(repo, isolated_llm, fault_server,
                                                                         monkeypatch, tmp_path):
    llm = isolated_llm
    path, manifest = _record(llm, fault_server, repo)
    assert path == repo / "results" / "replies" / "smoke.jsonl.gz"
    assert (manifest["replies"], manifest["calls"]) == (3, 4)
    assert manifest["calls_by_notebook"] == {"01_first": 2, "02_second": 2}
    sent = sum(fault_server.received.values())
    assert sent == 3  # the shared request came from the cache the second time

    # Elsewhere: an empty cache, the recording active, and replay mode so that a miss would raise.
    monkeypatch.setenv("MEMLIFE_CACHE_DIR", str(tmp_path / "other-cache"))
    monkeypatch.setenv("MEMLIFE_REPLIES", str(path))
    monkeypatch.setenv("MEMLIFE_LLM_MODE", "replay")
    client = point_at(llm, fault_server, model="fake-model")
    out, summary = _run(llm, client, "01_first", PROMPTS)
    assert sum(fault_server.received.values()) == sent
    assert [c.text for c in out] == [f"echo: {p}" for p in PROMPTS]
    assert all(c.cached and c.source == "recorded" for c in out)
    assert (summary["calls"], summary["cached_calls"], summary["recorded_calls"], summary["live_calls"]) == (3, 3, 3, 0)
    assert summary["usd_estimate"] == 0
    assert not (tmp_path / "other-cache" / "llm").exists() or reply_cache.cache_get(out[0].request_id) is None


def test_the_recording_comes_before_the_cache_and_off_turns_it_off(repo, isolated_llm, fault_server, monkeypatch):
    llm = isolated_llm
    path, _ = _record(llm, fault_server, repo)
    # A recording made elsewhere says something else than this machine's model (and cache) would.
    _prefix_replies(path, "recorded: ")
    monkeypatch.setenv("MEMLIFE_REPLIES", str(path))
    client = point_at(llm, fault_server, model="fake-model")
    assert client.complete(MSG(PROMPTS[0]), max_tokens=8).text == f"recorded: echo: {PROMPTS[0]}"
    monkeypatch.setenv("MEMLIFE_REPLIES", "off")
    c = client.complete(MSG(PROMPTS[0]), max_tokens=8)
    assert (c.text, c.source) == (f"echo: {PROMPTS[0]}", "cache")


def _rewrite(path, lines):
    """Rewrite a recording's lines and re-seal its manifest (as a tool editing it honestly would)."""
    path.write_bytes(gzip.compress(replies_export._serialize(lines), mtime=0))
    mpath = replies.manifest_path(path)
    manifest = json.loads(mpath.read_text())
    manifest["sha256"] = paths.file_sha256(path)
    manifest["replies"] = len(lines)
    mpath.write_text(json.dumps(manifest))


def _prefix_replies(path, prefix):
    """Make the recording's replies differ from what the model (and cache) would say."""
    lines = [json.loads(x) for x in gzip.decompress(path.read_bytes()).decode().splitlines()]
    for rec in lines:
        rec["text"] = prefix + rec["text"]
    _rewrite(path, lines)


def test_export_takes_each_reply_from_where_the_run_got_it(repo, isolated_llm, fault_server, monkeypatch):
    """After a replayed run the recording is rewritten unchanged; after a live run (LIVE=1) it
    holds the model's new replies, not the old recording's."""
    llm = isolated_llm
    path, _ = _record(llm, fault_server, repo)
    _prefix_replies(path, "old: ")
    before = path.read_bytes(), replies.manifest_path(path).read_bytes()
    mtime = path.stat().st_mtime_ns

    monkeypatch.setenv("MEMLIFE_REPLIES", str(path))
    client = point_at(llm, fault_server, model="fake-model")
    _run(llm, client, "01_first", PROMPTS[:2])
    _run(llm, client, "02_second", PROMPTS[1:])
    replies_export.export("smoke")
    assert (path.read_bytes(), replies.manifest_path(path).read_bytes()) == before
    assert path.stat().st_mtime_ns == mtime  # untouched, not rewritten with the same bytes

    monkeypatch.setenv("MEMLIFE_REPLIES", "off")
    fault_server.scripts[PROMPTS[0]].append(("text", "a new reply"))
    monkeypatch.setenv("MEMLIFE_LLM_MODE", "refresh")  # LIVE=1 on a machine whose cache is empty
    _run(llm, client, "01_first", PROMPTS[:2])
    _run(llm, client, "02_second", PROMPTS[1:])
    _, manifest = replies_export.export("smoke")
    texts = sorted(r["text"] for r in replies.load(path).replies.values())
    assert texts == sorted(["a new reply", f"echo: {PROMPTS[1]}", f"echo: {PROMPTS[2]}"])
    assert manifest["sha256"] == paths.file_sha256(path)


def test_export_is_deterministic_and_names_where_replies_were_made(repo, isolated_llm, fault_server):
    llm = isolated_llm
    path, manifest = _record(llm, fault_server, repo)
    first = path.read_bytes()
    path.unlink()
    replies.manifest_path(path).unlink()
    replies_export.export("smoke")
    assert path.read_bytes() == first
    assert first[4:8] == b"\0\0\0\0"  # gzip header: no timestamp
    lines = [json.loads(x) for x in gzip.decompress(first).decode().splitlines()]
    assert [r["key"] for r in lines] == sorted(r["key"] for r in lines)
    assert {r["role"] for r in lines} == {"reader"}
    (rec_id, prov), = manifest["recordings"].items()
    assert {r["recording"] for r in lines} == {rec_id}
    assert prov["model"] == "fake-model" and prov["runtime"] == "remote endpoint" and prov["date"]


def test_no_secret_or_endpoint_in_the_recording(repo, isolated_llm, fault_server, monkeypatch):
    secret = "sk-proj-SECRET-must-never-be-recorded-41b7"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    llm = isolated_llm
    path, _ = _record(llm, fault_server, repo)
    assert fault_server.auth_headers[-1] == f"Bearer {secret}"
    host_port = fault_server.base_url.split("//")[1].split("/")[0]
    for blob in (gzip.decompress(path.read_bytes()), replies.manifest_path(path).read_bytes()):
        for needle in (secret, host_port, fault_server.base_url, "127.0.0.1"):
            assert needle.encode() not in blob, needle


def test_export_refuses_an_incomplete_run(repo, isolated_llm, fault_server):
    llm = isolated_llm
    client = point_at(llm, fault_server, model="fake-model")
    _run(llm, client, "01_first", PROMPTS[:1])
    with pytest.raises(replies.RepliesError, match=r"02_second has no finished run .*make reproduce PROFILE=smoke"):
        replies_export.export("smoke")
    _run(llm, client, "02_second", PROMPTS[:1], profile="smoke")
    summary = repo / "results" / "smoke" / "usage" / "02_second.json"
    summary.write_text(json.dumps({**json.loads(summary.read_text()), "profile": "quick"}))
    with pytest.raises(replies.RepliesError, match="02_second last ran under profile 'quick'"):
        replies_export.export("smoke")
    _run(llm, client, "02_second", PROMPTS[:1])
    reply_cache._cache().clear()
    with pytest.raises(replies.RepliesError, match=r"1 replies .* missing .*01_first.calls.jsonl:1"):
        replies_export.export("smoke")
    assert not (repo / "results" / "replies").exists()


def test_export_refuses_a_run_that_resumed_work_the_recording_holds(repo, isolated_llm, fault_server):
    """A notebook that resumed from its journal logs no call for the kept work: exporting it would
    drop replies a fresh clone needs, so the export stops and leaves the recording as it was."""
    llm = isolated_llm
    path, _ = _record(llm, fault_server, repo)
    before = path.read_bytes(), replies.manifest_path(path).read_bytes()
    client = point_at(llm, fault_server, model="fake-model")
    _run(llm, client, "02_second", ())  # its answers came from an earlier run's journal
    with pytest.raises(replies.RepliesError, match=r"02_second \(2 calls recorded, none in this run\).*make publish"):
        replies_export.export("smoke")
    assert (path.read_bytes(), replies.manifest_path(path).read_bytes()) == before
    _run(llm, client, "02_second", PROMPTS[1:])  # a clean run of it: the export goes through
    assert replies_export.export("smoke")[1]["calls_by_notebook"] == {"01_first": 2, "02_second": 2}


def test_a_damaged_recording_is_refused_naming_file_line_and_field(repo, isolated_llm, fault_server, monkeypatch):
    llm = isolated_llm
    path, _ = _record(llm, fault_server, repo)
    good = path.read_bytes()
    path.write_bytes(good[:-9])  # truncated
    with pytest.raises(replies.RepliesError, match=r"smoke.jsonl.gz: SHA-256 .* does not match field 'sha256'"):
        replies.load(path)

    path.write_bytes(good)
    lines = [json.loads(x) for x in gzip.decompress(good).decode().splitlines()]
    del lines[1]["completion_tokens"]
    _rewrite(path, lines)
    with pytest.raises(replies.RepliesError, match=r"smoke.jsonl.gz: line 2: field 'completion_tokens' is missing"):
        replies.load(path)
    lines[1]["completion_tokens"] = "7"
    _rewrite(path, lines)
    with pytest.raises(replies.RepliesError, match=r"line 2 .*field 'completion_tokens' has type str"):
        replies.load(path)

    # A run pointed at a missing recording stops at its first call instead of asking the model.
    monkeypatch.setenv("MEMLIFE_REPLIES", str(repo / "nowhere.jsonl.gz"))
    client = point_at(llm, fault_server, model="fake-model")
    sent = sum(fault_server.received.values())
    with pytest.raises(replies.RepliesError, match="nowhere.jsonl.gz: no such recording"):
        client.complete(MSG("anything"), max_tokens=8)
    assert sum(fault_server.received.values()) == sent


def test_a_profile_names_its_recording_and_the_environment_wins(isolated_llm, monkeypatch, tmp_path):
    from memlife.base import paths

    llm = isolated_llm
    monkeypatch.setenv("MEMLIFE_ROOT", str(Path(__file__).resolve().parents[1]))
    endpoints.configure("quick")
    assert replies.active_path() == paths.repo_root() / "results" / "replies" / "quick.jsonl.gz"
    endpoints.configure("smoke")
    assert replies.active_path() is None
    monkeypatch.setenv("MEMLIFE_REPLIES", str(tmp_path / "theirs.jsonl.gz"))
    assert replies.active_path() == tmp_path / "theirs.jsonl.gz"
    monkeypatch.setenv("MEMLIFE_REPLIES", "off")
    endpoints.configure("quick")
    assert replies.active_path() is None


def test_a_replayed_paper_run_needs_no_endpoint_and_no_cap(isolated_llm, monkeypatch):
    from memlife.models import llm

    monkeypatch.setenv("MEMLIFE_ROOT", str(Path(__file__).resolve().parents[1]))
    with pytest.raises(SystemExit, match="needs a spending cap"):
        llm.check_paper_profile("paper")
    monkeypatch.setenv("MEMLIFE_LLM_MODE", "replay")
    llm.check_paper_profile("paper")  # nothing can be sent, so nothing can be spent
