"""Faults and bad input a user meets (issue 32): every number a user sets is parsed with its name
and range, misspelled profile keys are refused with the nearest valid name, one run per notebook
at a time, a damaged cache entry is moved aside and asked again, and the validators turn bad
bytes and empty files into findings."""
import json
import os
import shutil
import socket
import sqlite3
from pathlib import Path

import pytest

from memlife.models import accounting, endpoints, reply_cache

from conftest import point_at
from faultserver import JSONHandler, Loopback

ROOT = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------- the spending cap


@pytest.mark.parametrize("value, words", [("nan", "finite"), ("inf", "finite"), ("-1", "negative"),
                                          ("ten dollars", "not a number of US dollars")])
def test_a_cap_that_could_never_trip_or_refuses_everything_is_refused(isolated_llm, monkeypatch, value, words):
    monkeypatch.setenv("MEMLIFE_SPEND_CAP_USD", value)
    with pytest.raises(endpoints.LLMError, match=rf"MEMLIFE_SPEND_CAP_USD={value!r}.*{words}"):
        endpoints.configure(None, run="pytest")
    monkeypatch.delenv("MEMLIFE_SPEND_CAP_USD")


def test_a_profile_cap_of_nan_is_refused_with_its_field(isolated_llm, tmp_path, monkeypatch):
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "mine.yaml").write_text("common: {}\nnotebooks: {}\nspend_cap_usd: .nan\n")
    with pytest.raises(endpoints.LLMError, match=r"configs/mine.yaml spend_cap_usd=nan.*finite"):
        endpoints.configure("mine")
    endpoints.configure(None, spend_cap_usd=0)  # zero is a cap: nothing priced may be sent
    assert endpoints.spend_cap_usd() == 0.0


def test_the_ledger_refuses_a_cap_that_is_not_a_number(isolated_llm):
    from memlife.models import spending

    with pytest.raises(ValueError, match="finite"):
        spending.reserve(0.01, float("nan"), role="reader", model="m")
    assert spending.spent() == 0.0


# --------------------------------------------------------------------------- role variables


@pytest.mark.parametrize("var, value, words", [
    ("MEMLIFE_READER_CONCURRENCY", "abc", "not a whole number"),
    ("MEMLIFE_CONCURRENCY", "0", "at least 1"),
    ("MEMLIFE_READER_CONTEXT_WINDOW", "32k", "not a whole number of tokens"),
    ("MEMLIFE_READER_CONTEXT_WINDOW", "-5", "at least 1"),
    ("MEMLIFE_READER_TIMEOUT_S", "ten", "not a number of seconds"),
    ("MEMLIFE_TIMEOUT_S", "0", "more than 0"),
    ("MEMLIFE_READER_MAX_RETRIES", "-1", "at least 0"),
    ("MEMLIFE_READER_PRICE_PER_MTOK", "abc", "expected 'input,output'"),
    ("MEMLIFE_READER_PRICE_PER_MTOK", "0.15,nan", "finite"),
    ("MEMLIFE_READER_REASONING_TOKENS", "1.5", "not a whole number"),
    ("MEMLIFE_READER_REQUESTS_PER_MINUTE", "many", "not a whole number"),
])
def test_each_role_number_is_checked_and_its_variable_named(isolated_llm, monkeypatch, var, value, words):
    endpoints.configure(None, run="pytest", models={"reader": {"base_url": "http://127.0.0.1:9/v1",
                                                                  "model": "gpt-4o-mini"}})
    monkeypatch.setenv(var, value)
    with pytest.raises(endpoints.LLMError, match=rf"{var}={value!r}.*{words}"):
        endpoints.endpoint_for("reader")


def test_a_profile_field_is_named_as_such(isolated_llm):
    endpoints.configure(None, run="pytest", models={"reader": {"base_url": "http://127.0.0.1:9/v1",
                                                                  "model": "gpt-4o-mini", "max_retries": -1}})
    with pytest.raises(endpoints.LLMError, match=r"models.reader.max_retries=-1: must be at least 0"):
        endpoints.endpoint_for("reader")


def test_valid_numbers_still_parse(isolated_llm, monkeypatch):
    endpoints.configure(None, run="pytest", models={"reader": {"base_url": "http://127.0.0.1:9/v1",
                                                                  "model": "m", "price_per_mtok": [0.1, 0.4]}})
    for var, value in (("MEMLIFE_READER_CONTEXT_WINDOW", "32768"), ("MEMLIFE_READER_MAX_RETRIES", "0"),
                       ("MEMLIFE_READER_TIMEOUT_S", "2.5"), ("MEMLIFE_CONCURRENCY", "3")):
        monkeypatch.setenv(var, value)
    ep = endpoints.endpoint_for("reader")
    assert (ep.context_window, ep.max_retries, ep.timeout_s, ep.concurrency, ep.price_per_mtok) == (
        32768, 0, 2.5, 3, (0.1, 0.4))


# --------------------------------------------------------------------------- profiles checked by name


def _profile_root(tmp_path, edit, notebooks=("20_longmem_data", "00_backend")):
    root = tmp_path / "repo"
    (root / "configs").mkdir(parents=True)
    (root / "notebooks").mkdir()
    for nb in notebooks:
        shutil.copy(ROOT / "notebooks" / f"{nb}.ipynb", root / "notebooks")
    (root / "configs" / "mine.yaml").write_text(edit((ROOT / "configs" / "quick.yaml").read_text()))
    return root


@pytest.mark.parametrize("edit, words", [
    (lambda t: t.replace("  20_longmem_data:\n", "  20_longmem_data:\n    n_questoins: 3\n"),
     r"notebooks.20_longmem_data.n_questoins is not a parameter of notebooks/20_longmem_data.ipynb "
     r"\(did you mean n_questions\?\)"),
    (lambda t: t.replace("common:\n  seed: 0", "common:\n  seed: 0\n  sede: 1"),
     r"common.sede is not a parameter of any notebook in \S+ \(did you mean seed\?\)"),
    (lambda t: t + "spend_cap_uds: 5\n", r"spend_cap_uds is not a profile field \(did you mean spend_cap_usd\?\)"),
    (lambda t: t + "models:\n  reeder: {base_url: 'http://x/v1', model: m}\n",
     r"models.reeder is not a role \(did you mean reader\?\)"),
    (lambda t: t + "models:\n  reader: {base_url: 'http://x/v1', model: m, concurency: 3}\n",
     r"models.reader.concurency is not an endpoint field \(did you mean concurrency\?\)"),
    (lambda t: t + "tracks:\n  memops:\n    models:\n      judge: {modle: gpt-4o}\n",
     r"tracks.memops.models.judge.modle is not an endpoint field \(did you mean model\?\)"),
    (lambda t: t + "tracks:\n  restor: {models: {}}\n", r"tracks.restor is not a track \(did you mean restore\?\)"),
])
def test_unknown_profile_keys_are_refused_with_the_nearest_name(tmp_path, edit, words):
    from memlife.base import config

    root = _profile_root(tmp_path, edit)
    with pytest.raises(ValueError, match=r"configs/mine.yaml: .*" + words):
        config.load_profile("mine", root)
    with pytest.raises(ValueError, match=words):  # what a notebook run asks first
        config.notebook_params("mine", "00_backend", root)


def test_a_misspelled_section_is_named_when_its_notebook_asks(tmp_path):
    from memlife.base import config

    root = _profile_root(tmp_path, lambda t: t.replace("  20_longmem_data:\n", "  20_longmem_dta:\n"))
    with pytest.raises(KeyError, match=r"no section notebooks.20_longmem_data \(did you mean 20_longmem_dta\?\)"):
        config.notebook_params("mine", "20_longmem_data", root)


def test_the_shipped_profiles_pass_the_check():
    from memlife.base import config

    for profile in ("smoke", "quick", "paper"):
        assert config.profile_problems(config.load_profile(profile, ROOT), ROOT) == []


# --------------------------------------------------------------------------- the runner


@pytest.fixture
def run_root(tmp_path, monkeypatch):
    root = tmp_path / "repo"
    (root / "notebooks").mkdir(parents=True)
    shutil.copy(ROOT / "notebooks" / "00_backend.ipynb", root / "notebooks")
    shutil.copytree(ROOT / "configs", root / "configs")
    monkeypatch.setenv("MEMLIFE_ROOT", str(root))
    monkeypatch.setenv("MEMLIFE_CACHE_DIR", str(root / ".cache"))
    monkeypatch.delenv("MEMLIFE_LLM_MODE", raising=False)
    return root


def test_a_second_run_of_a_notebook_is_refused_naming_the_first(run_root, monkeypatch):
    import papermill

    from memlife.base import paths
    from memlife.running import runner

    lay = paths.layout("smoke", run_root)
    lay.usage.mkdir(parents=True)
    calls = lay.usage / "00_backend.calls.jsonl"
    calls.write_text('{"the first run": "its calls"}\n')
    sent = []
    monkeypatch.setattr(papermill, "execute_notebook", lambda *a, **k: sent.append(a))
    with runner.notebook_lock(lay, "00_backend"):
        with pytest.raises(runner.NotebookBusy, match=rf"00_backend \[smoke\] is already running \(process {os.getpid()} "):
            runner.run_notebook("00_backend", "smoke", root=run_root)
    assert sent == [] and calls.read_text() == '{"the first run": "its calls"}\n'  # the first run's, untouched
    with runner.notebook_lock(lay, "00_backend"):  # released when its holder is done
        pass


def test_a_failed_run_leaves_no_usage_summary_of_an_earlier_one(run_root, monkeypatch):
    import papermill

    from memlife.base import paths
    from memlife.running import runner

    lay = paths.layout("smoke", run_root)
    lay.usage.mkdir(parents=True)
    (lay.usage / "00_backend.json").write_text(json.dumps({"notebook": "00_backend", "profile": "smoke"}))

    def fails(*a, **k):
        raise RuntimeError("a cell failed")

    monkeypatch.setattr(papermill, "execute_notebook", fails)
    with pytest.raises(RuntimeError, match="a cell failed"):
        runner.run_notebook("00_backend", "smoke", root=run_root)
    assert not (lay.usage / "00_backend.json").exists()
    assert "nothing ran" in runner.summary("smoke", run_root)


def test_ctrl_c_is_one_short_message(run_root, monkeypatch, capsys):
    from papermill.exceptions import PapermillExecutionError

    from memlife.running import runner

    kernel_traceback = [f"  File \"cell\", line {i}, in <module>" for i in range(50)]
    for exc in (KeyboardInterrupt(),
                PapermillExecutionError(3, 3, "llm.complete_many(...)", "KeyboardInterrupt", "", kernel_traceback)):
        def interrupted(*a, exc=exc, **k):
            raise exc

        monkeypatch.setattr(runner, "run_notebook", interrupted)
        try:
            rc = runner.main(["00_backend", "--profile", "smoke"])
        except KeyboardInterrupt:
            pytest.fail("Ctrl-C escaped the runner as a traceback")
        assert rc == 130
        err = capsys.readouterr().err
        assert "00_backend [smoke] interrupted" in err and "cached" in err
        assert "File" not in err and len(err.strip().splitlines()) == 1


def test_an_unknown_profile_is_said_once(run_root, capsys):
    from memlife.running import runner

    assert runner.main(["00_backend", "--profile", "huge"]) == 2
    err = capsys.readouterr().err
    assert err.count("unknown profile 'huge'") == 1 and "Traceback" not in err


# --------------------------------------------------------------------------- the cache


def _damage(llm, key):
    reply_cache._cache()._sql("UPDATE Cache SET value = ? WHERE key = ?", (sqlite3.Binary(b"\x80\x04garbage"), key))


def test_a_damaged_cache_entry_is_moved_aside_and_asked_again(isolated_llm, capsys):
    llm = isolated_llm
    good = {"text": "kept", "prompt_tokens": 1, "completion_tokens": 1}
    reply_cache.cache_put("a" * 64, good)
    reply_cache.cache_put("b" * 64, {"text": "paid for", "prompt_tokens": 2, "completion_tokens": 3})
    _damage(llm, "b" * 64)
    asked = []

    def ask():
        asked.append(1)
        return accounting.Completion(text="asked again", prompt_tokens=2, completion_tokens=3, cached=False,
                              latency_s=0.0, request_id="b" * 64, model="m")

    c = reply_cache.memoized("b" * 64, ask, role="reader", model="m", describe="the test's request")
    assert (c.text, asked) == ("asked again", [1])
    out = capsys.readouterr().out
    assert f"request {'b' * 64}" in out and "moved aside" in out
    kept = reply_cache.damaged_dir() / f"{'b' * 64}.entry"
    assert kept.read_bytes() == b"\x80\x04garbage"
    assert reply_cache.cache_get("b" * 64)["text"] == "asked again"  # the new reply is cached
    assert reply_cache.cache_get("a" * 64) == good  # and no other reply was lost


def test_replay_stops_at_a_damaged_entry_naming_it_and_changes_nothing(isolated_llm, monkeypatch):
    llm = isolated_llm
    reply_cache.cache_put("c" * 64, {"text": "paid for", "prompt_tokens": 2, "completion_tokens": 3})
    _damage(llm, "c" * 64)
    monkeypatch.setenv("MEMLIFE_LLM_MODE", "replay")
    with pytest.raises(endpoints.DamagedCacheEntry, match=rf"request {'c' * 64} in .*cannot be read"):
        reply_cache.memoized("c" * 64, lambda: None, role="reader", model="m", describe="x")
    assert not reply_cache.damaged_dir().exists()


# --------------------------------------------------------------------------- endpoints


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_unreachable_endpoint_is_said_as_such_not_as_an_unknown_window(isolated_llm):
    llm = isolated_llm
    endpoints.configure(None, run="pytest", models={"reader": {"base_url": f"http://127.0.0.1:{_closed_port()}/v1",
                                                         "model": "mystery-model", "timeout_s": 2}})
    with pytest.raises(endpoints.LLMError, match=r"role reader: cannot reach http://127.0.0.1:\d+/v1") as info:
        llm.get_client("reader").context_window()
    assert "not known" not in str(info.value)


class _LoginPage(JSONHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        page = b"<html><body>Sign in</body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(page)))
        self.end_headers()
        self.wfile.write(page)


def test_an_html_reply_is_named_and_not_retried(isolated_llm):
    with Loopback(_LoginPage) as server:
        client = point_at(isolated_llm, server, context_window=4096, max_retries=3)
        with pytest.raises(endpoints.LLMCallError, match=r"answered with text/html, not a chat completion.*/v1"):
            client.complete([{"role": "user", "content": "hi"}], max_tokens=5)


# --------------------------------------------------------------------------- validators


def _memops(argv):
    from memlife.memops.__main__ import main

    return main([str(a) for a in argv])


def test_memops_validate_names_a_byte_that_is_not_utf8_and_refuses_an_empty_file(tmp_path, capsys):
    bad = tmp_path / "instances.jsonl"
    bad.write_bytes(b'{"instance_id": "x"}\n{"instance_id": "caf\xe9"}\n')
    assert _memops(["validate", bad]) == 1
    assert f"{bad}:2: column 21: byte 0xe9 is not UTF-8" in capsys.readouterr().err
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    assert _memops(["validate", empty]) == 1
    assert "no JSON lines" in capsys.readouterr().err


def test_memops_score_names_a_byte_that_is_not_utf8(tmp_path, capsys):
    instances = tmp_path / "instances.jsonl"
    instances.write_bytes(b'\xff{"instance_id": "x"}\n')
    responses = tmp_path / "responses.jsonl"
    responses.write_text(json.dumps({"id": "a", "probe_id": "p1", "response": "x"}) + "\n")
    assert _memops(["score", instances, responses, "--out", tmp_path / "labels.jsonl"]) == 1
    assert f"{instances}:1: column 1: byte 0xff is not UTF-8" in capsys.readouterr().err
    responses.write_bytes(b"")
    instances.write_text("{}\n")
    assert _memops(["score", instances, responses, "--out", tmp_path / "labels.jsonl"]) == 1
    assert f"{responses}: no JSON lines" in capsys.readouterr().err


@pytest.fixture(scope="module")
def record():
    import longmem_templates

    return longmem_templates.build(n_questions=1, history_tokens=600, seed=1)[0]


def _longmem_validate(tmp_path, records, capsys, raw: bytes | None = None):
    from memlife.restore.data import dataset

    path = tmp_path / "lm.json"
    path.write_bytes(raw if raw is not None else json.dumps(records).encode())
    rc = dataset.main(["validate", str(path)])
    return rc, capsys.readouterr().out


def test_longmem_validate_names_a_byte_that_is_not_utf8(tmp_path, record, capsys):
    raw = json.dumps([record], indent=1).encode().replace(b'"question_id"', b'"question_\xe9id"', 1)
    rc, out = _longmem_validate(tmp_path, None, capsys, raw)
    assert rc == 1 and out.startswith(f"{tmp_path / 'lm.json'}: line 3, column 13: byte 0xe9 is not UTF-8")


@pytest.mark.parametrize("mutate, field", [
    (lambda r: r["haystack_sessions"].__setitem__(0, None), "haystack_sessions[0]"),
    (lambda r: r.__setitem__("answer_session_ids", [["s1"]]), "answer_session_ids[0]"),
    (lambda r: r["haystack_session_ids"].__setitem__(0, {"id": 1}), "haystack_session_ids"),
])
def test_longmem_validate_turns_wrong_types_into_findings(tmp_path, record, capsys, mutate, field):
    import copy

    bad = copy.deepcopy(record)
    mutate(bad)
    rc, out = _longmem_validate(tmp_path, [bad], capsys)
    assert rc == 1 and f"question {record['question_id']!r}, field {field!r}" in out


def test_longmem_validate_refuses_an_empty_dataset(tmp_path, capsys):
    rc, out = _longmem_validate(tmp_path, [], capsys)
    assert rc == 1 and "no question records" in out
