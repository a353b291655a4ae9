"""Systems and the evaluation run: retrieval, truncation, selection, journal, and a run killed
with SIGKILL mid-ingest that resumes without repeating a call or duplicating memories."""
import collections
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from memlife.memops.systems import answering, baselines, managed, reading, registry, temp_lora
from memlife.memops.scoring import labels
from memlife.memops.data.response import RESPONSE_INSTRUCTIONS, MemOpsResponse
from memlife.memops.data.schema import Instance

from conftest import completion

HERE = Path(__file__).parent
INSTANCE = Instance.model_validate(json.loads((HERE / "data" / "memops_instance.json").read_text()))
LIB = str(HERE.parent / "lib")


def _C(text: str):
    return completion(text, prompt_tokens=1, completion_tokens=1, request_id="r")


class _EchoClient:
    """Answers with the number of context lines it was shown, so tests can see the context."""

    model = "echo"
    is_embedded = True

    def __init__(self):
        self.seen = []

    def complete_json(self, messages, *, schema, max_tokens, **kw):
        self.seen.append(messages)
        self.grammars = getattr(self, "grammars", []) + [kw.get("grammar")]
        text = json.dumps({"answer": "ok", "operations": [], "provenance": []})
        return schema.model_validate_json(text), _C(text)


def test_histories_per_setting():
    adj = reading.history_for(INSTANCE, "adjacent")
    assert len(adj.sessions) == 3 and all(len(s) == 8 for s in adj.sessions)
    lc = reading.history_for(INSTANCE, "long_context")
    assert [len(s) for s in lc.sessions] == [len(c.turns) for c in INSTANCE.long_context.conversations]
    assert adj.history_id != lc.history_id
    with pytest.raises(ValueError, match="unknown setting"):
        reading.history_for(INSTANCE, "nearby")


def test_bm25_turn_retrieval_finds_the_correction_and_keeps_history_order():
    s = baselines.BM25System(reading.Reader(_EchoClient()), "turn", top_k=3)
    h = reading.history_for(INSTANCE, "adjacent")
    s.ingest(h)
    ids = s.retrieve(h, "ZIP code actually corrected")
    assert ids == sorted(ids) and len(ids) == 3
    turns = list(h.turns())
    texts = [turns[i][2]["content"] for i in ids]
    assert any("actually 94114" in t for t in texts)


def test_bm25_ties_go_to_the_newer_turn_whatever_the_cpu_sorts():
    """Equal scores are ordered by an explicit rule (newer first), not by a top-k kernel whose
    order of ties depends on the CPU's SIMD instructions."""
    same = {"role": "user", "content": "my parking spot is B12"}
    h = reading.History("ties@adjacent", "adjacent",
                        ((same, {"role": "assistant", "content": "noted"}, same, same, {"role": "user", "content": "bye"}),))
    s = baselines.BM25System(reading.Reader(_EchoClient()), "turn", top_k=2)
    s.ingest(h)
    assert s.retrieve(h, "where is my parking spot") == [2, 3]
    assert s.retrieve(h, "zebra") == [3, 4]  # no shared term: every turn scores 0, the newest win
    from memlife import retrieve

    assert retrieve.best_first([1.0, 2.0, 2.0, 0.5], [0, 1, 2, 3]) == [2, 1, 0, 3]


def test_bm25_session_level_returns_whole_sessions():
    client = _EchoClient()
    s = baselines.BM25System(reading.Reader(client), "session", top_k=1)
    h = reading.history_for(INSTANCE, "long_context")
    s.ingest(h)
    ans = s.answer(h, "silent study room library Tuesdays")
    assert ans.retrieved == ["1"]  # the conversation holding segment 2
    context = client.seen[-1][1]["content"]
    assert "silent study room" in context and context.count("[session 2]") == len(h.sessions[1])


def test_long_context_truncates_from_the_front_and_records_it():
    client = _EchoClient()
    reader = reading.Reader(client, max_tokens=100, context_window=700, token_margin=1.0)
    ans = baselines.LongContextSystem(reader).answer(reading.history_for(INSTANCE, "long_context"), "What is my ZIP?")
    context = client.seen[-1][1]["content"]
    assert ans.truncated_tokens > 0
    assert "Filler question 0.0" not in context          # the oldest turns went first
    assert "Filler answer 3.1" in context                # the newest turn stayed
    full = reading.Reader(_EchoClient(), context_window=100_000).read(["a", "b"], "q")
    assert full.truncated_tokens == 0


def test_probes_on_one_history_keep_the_same_lines_whatever_the_question():
    reader = reading.Reader(_EchoClient(), max_tokens=100, context_window=700, token_margin=1.0)
    lines = reading.format_turns(reading.history_for(INSTANCE, "long_context").turns())
    short, dropped = reader.fit(lines, "ZIP?")
    assert dropped > 0 and reader.fit(lines, "What is my current ZIP code, after the move " * 5) == (short, dropped)


def test_malformed_reply_is_kept_not_dropped():
    class Bad(_EchoClient):
        def complete_json(self, messages, *, schema, max_tokens, **kw):
            return None, _C('{"answer": "94114", "operations": [{"type": "memorise"')
    ans = reading.Reader(Bad()).read(["x"], "q")
    assert ans.parsed.malformed and ans.parsed.raw.startswith('{"answer"')


def test_select_instances_balances_op_types():
    base = INSTANCE.model_dump()
    insts = []
    for t in ("remember", "forget", "update", "reflect", "trajectory"):
        for k in range(3):
            insts.append(Instance.model_validate({**base, "instance_id": f"T{k}-{t}", "op_type": t}))
    picked = answering.select_instances(insts, 5)
    assert sorted(i.op_type for i in picked) == sorted(["remember", "forget", "update", "reflect", "trajectory"])
    assert answering.select_instances(insts, None) == sorted(insts, key=lambda i: i.instance_id)


def test_select_probes_covers_the_rarest_probe_types_first():
    base = INSTANCE.model_dump()

    def inst(iid, types):
        probes = [{**base["probes"][0], "probe_id": f"{iid}-p{k}", "probe_type": t} for k, t in enumerate(types)]
        return Instance.model_validate({**base, "instance_id": iid, "probes": probes})

    common = ["OperationTrace", "TargetBinding", "StateTransition", "CandidateDisambiguation", "OperationApplication"]
    traj = ["StateTrajectory", "StateTrajectory", "StateTransition", "CandidateDisambiguation", "OperationTrace"]
    chosen = [inst("a", common), inst("b", common), inst("c", common), inst("d", traj), inst("e", common),
              inst("f", common)]
    one = answering.select_probes(chosen, 1)
    # every probe type once: StateTrajectory from the only instance that has it
    assert sorted(ps[0].probe_type for ps in one) == sorted(set(common) | {"StateTrajectory"})
    assert one[3][0].probe_type == "StateTrajectory"
    assert answering.select_probes(chosen, 1) == one  # deterministic
    two = answering.select_probes(chosen[:2], 2)
    assert [len(ps) for ps in two] == [2, 2] and len({p.probe_type for ps in two for p in ps}) == 4
    assert answering.select_probes(chosen, None) == [list(i.probes) for i in chosen]
    assert [len(ps) for ps in answering.select_probes(chosen, 9)] == [5] * 6


def test_journal_ignores_and_repairs_a_torn_last_line(tmp_path):
    j = answering.Journal(tmp_path / "j.jsonl")
    j.append({"a": 1})
    with open(j.path, "a") as fh:
        fh.write('{"a": 2, "b"')  # killed mid-write
    assert j.read() == [{"a": 1}]
    j.append({"a": 3})
    assert j.read() == [{"a": 1}, {"a": 3}]


def test_response_schema_is_what_the_reader_sends():
    client = _EchoClient()
    reading.Reader(client).read(["[session 1] user: hi"], "q?")
    msgs = client.seen[-1]
    assert msgs[0]["role"] == "system" and "JSON" in msgs[0]["content"]
    assert msgs[1]["content"].endswith("## Question\nq?")  # the question last: prefix reuse
    schema = MemOpsResponse.model_json_schema()
    # flat and fully required: optional/nullable fields made llama-server's grammar crawl
    assert schema["required"] == ["answer", "operations", "provenance"]
    assert "anyOf" not in json.dumps(schema)


def _gbnf_str(n):
    return '"\\"" char{0,%d} "\\""' % n


def test_embedded_reader_bounds_the_grammar_but_not_the_parser():
    from memlife.memops.data.response import GRAMMAR_BOUNDS, parse_response, reply_grammar

    client = _EchoClient()
    reading.Reader(client).read(["[session 1] user: hi"], "q?")
    g = client.grammars[-1]
    assert g == reply_grammar() and f"answer ::= {_gbnf_str(GRAMMAR_BOUNDS['answer'])}" in g
    assert f"target ::= {_gbnf_str(GRAMMAR_BOUNDS['target'])}" in g
    assert f"quote ::= {_gbnf_str(GRAMMAR_BOUNDS['provenance_quote'])}" in g
    assert f'( "," op ){{0,{GRAMMAR_BOUNDS["operations_items"] - 1}}}' in g
    assert "maxLength" not in json.dumps(MemOpsResponse.model_json_schema())  # the model itself is unbounded
    client.is_embedded = False  # an API reader gets the plain schema ...
    reading.Reader(client).read(["[session 1] user: hi"], "q?")
    assert client.grammars[-1] is None
    # ... and a reply longer than the grammar's bounds still parses.
    long = json.dumps({"answer": "x" * (GRAMMAR_BOUNDS["answer"] * 2), "operations": [], "provenance": []})
    assert not parse_response(long).malformed


# ----------------------------------------------------------------------------- kill and resume

sys.path.insert(0, str(HERE))
from memlife.models import reply_cache

from _memops_fake_server import FakeServer  # noqa: E402


def _run(tmp, server, systems_arg, *, kill_after=None, timeout=240, extra=()):
    env = {**os.environ, "PYTHONPATH": LIB, "MEMLIFE_READER_BASE_URL": server.base_url,
           "MEMLIFE_READER_MODEL": "fake", "MEMLIFE_CACHE_DIR": str(tmp / "cache"),
           "MEM0_TELEMETRY": "False", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "memlife.memops", "evaluate", "--instances", str(tmp / "i.jsonl"),
                             "--out", str(tmp / "out"), "--systems", systems_arg, "--settings", "adjacent",
                             "--max-probes", "1", "--extract-max-tokens", "77", *extra], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    server.kill_pid = proc.pid
    server.kill_after = kill_after
    try:
        proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode


def _stores(tmp):
    (root,) = (tmp / "out" / "stores").iterdir()  # one run key: the parameters did not change
    return root


def _memories(system_cls, tmp):
    reader = reading.Reader(_EchoClient())
    s = system_cls(reader, _stores(tmp), top_k=10)
    try:
        return s.memories(reading.history_for(INSTANCE, "adjacent"))
    finally:
        s.close()


@pytest.mark.slow
def test_sigkill_mid_ingest_resumes_without_repeats_or_duplicate_memories(tmp_path):
    pytest.importorskip("mem0")
    use_memos = managed.memos_available()
    names = "mem0,memos,long_context" if use_memos else "mem0,long_context"
    (tmp_path / "i.jsonl").write_text(json.dumps(INSTANCE.model_dump(mode="json")) + "\n")
    seen = collections.Counter()
    caps = set()

    # 1: killed during Mem0's ingest of the 3-session history (2nd extraction call in flight)
    srv = FakeServer()
    assert _run(tmp_path, srv, names, kill_after=2) == -signal.SIGKILL and srv.killed
    killed = [srv.requests[-1]]
    seen.update(srv.requests)
    caps.update(srv.max_tokens)
    srv.close()
    store = baselines.store_dir(_stores(tmp_path), "mem0", "t-test-trajectory@adjacent")
    assert store.is_dir() and not (store / "INGESTED").exists()  # interrupted mid-ingest

    # 2: killed during MemOS's ingest (Mem0 completes: 2 new extractions + 1 read, then MemOS)
    if use_memos:
        srv = FakeServer()
        assert _run(tmp_path, srv, names, kill_after=5) == -signal.SIGKILL and srv.killed
        killed.append(srv.requests[-1])
        seen.update(srv.requests)
        caps.update(srv.max_tokens)
        srv.close()

    # 3: runs to the end
    srv = FakeServer()
    assert _run(tmp_path, srv, names) == 0
    seen.update(srv.requests)
    caps.update(srv.max_tokens)
    srv.close()
    # Mem0's and MemOS's own extraction calls carry the run's cap; the reader keeps its own (by
    # default the longest reply the grammar of the dataset's gold bounds admits).
    from memlife.memops.data.response import grammar_longest_reply

    assert caps == {77, grammar_longest_reply(answering.gold_grammar_bounds([INSTANCE]))}

    # No request reached the model twice, except each one that was in flight when killed.
    repeats = {k: n for k, n in seen.items() if n > 1}
    assert repeats == {k: 2 for k in killed}
    # Exactly one memory per session (the fake extractor yields one fact per call): no duplicates.
    assert len(_memories(managed.Mem0System, tmp_path)) == 3
    if use_memos:
        assert len(_memories(managed.MemOSSystem, tmp_path)) == 3
    df = answering.collect(tmp_path / "out")
    assert len(df) == len(names.split(",")) and not df.duplicated(["system", "setting", "probe_id"]).any()


WIDE = ("--reader-max-tokens", "400")  # room for every gold reply of the smoke dataset


def test_sigkill_during_a_parallel_evaluation_resumes_without_repeating_a_call(tmp_path, monkeypatch):
    """Instances answered four at a time (an endpoint's concurrency): killed mid-run, the rerun asks
    only what had no reply, at most the four calls in flight a second time, and the records are
    those a run one call at a time makes."""
    from memlife.memops import build

    params = build.BuildParams(profile="smoke", seed=0, n_topics=2, max_conversations=None, longctx_tokens=1500,
                               realizer="template", verifier="off")
    instances = build.build(params, progress=False).instances
    (tmp_path / "i.jsonl").write_text("".join(json.dumps(i.model_dump(mode="json")) + "\n" for i in instances))
    monkeypatch.setenv("MEMLIFE_READER_CONCURRENCY", "4")
    seen = collections.Counter()
    srv = FakeServer()
    assert _run(tmp_path, srv, "long_context,bm25_turn", kill_after=9, extra=WIDE) == -signal.SIGKILL and srv.killed
    first = list(srv.requests)
    seen.update(first)
    srv.close()
    srv = FakeServer()
    assert _run(tmp_path, srv, "long_context,bm25_turn", extra=WIDE) == 0
    seen.update(srv.requests)
    srv.close()
    repeats = {k: n for k, n in seen.items() if n > 1}
    assert all(n == 2 for n in repeats.values()) and 1 <= len(repeats) <= 4  # only those in flight
    assert set(repeats) <= set(first[-4:])  # four at a time: those in flight are the last four received
    parallel = answering.collect(tmp_path / "out")
    assert len(parallel) == 2 * len(instances) and not parallel.duplicated(["system", "instance_id", "probe_id"]).any()
    # One call at a time, from the same cache: the same records.
    monkeypatch.setenv("MEMLIFE_READER_CONCURRENCY", "1")
    srv = FakeServer()
    (tmp_path / "serial").mkdir()
    env_out = tmp_path / "serial"
    (env_out / "i.jsonl").write_text((tmp_path / "i.jsonl").read_text())
    (env_out / "cache").symlink_to(tmp_path / "cache")
    assert _run(env_out, srv, "long_context,bm25_turn", extra=WIDE) == 0 and srv.requests == []
    srv.close()
    serial = answering.collect(env_out / "out")
    cols = ["system", "setting", "instance_id", "probe_id", "raw", "request_id"]
    assert parallel[cols].equals(serial[cols])


@pytest.mark.slow
@pytest.mark.parametrize("name", ["mem0", "memos"])
def test_managed_memory_calls_the_proxy_with_its_token_and_writes_it_nowhere(name, isolated_llm, tmp_path,
                                                                             monkeypatch):
    """Mem0 and MemOS are given the proxy's per-run token as their API key: their extraction calls
    get through (the proxy refuses anyone without it), and the token is in no store, cache or log."""
    from conftest import point_at

    for var, value in (("MEM0_TELEMETRY", "False"), ("HF_HUB_OFFLINE", "1"), ("TRANSFORMERS_OFFLINE", "1")):
        monkeypatch.setenv(var, value)  # before mem0 is imported: it reads them then
    if name == "mem0":
        pytest.importorskip("mem0")
    else:
        # isolated_llm points the repository root at tmp_path: name the checkout's MemOS environment
        memos_python = Path(__file__).resolve().parents[1] / ".venv-memos" / "bin" / "python"
        if memos_python.is_file():
            monkeypatch.setenv("MEMLIFE_MEMOS_PYTHON", str(memos_python))
        if not managed.memos_available():
            pytest.skip("the MemOS environment is not installed (`make memos-env`)")
    srv = FakeServer()
    try:
        reader = reading.Reader(point_at(isolated_llm, srv, model="fake"))
        if name == "mem0":
            s = managed.Mem0System(reader, tmp_path / "stores", top_k=5, infer=True)
        else:
            s = managed.MemOSSystem(reader, tmp_path / "stores", top_k=5)
        h = reading.history_for(INSTANCE, "adjacent")
        try:
            s.ingest(h)
            s.answer(h, "What is my ZIP code?")
            assert len(s.memories(h)) == len(h.sessions)  # one extracted fact per session
            token, stats = s._proxy.token, s._proxy.stats
        finally:
            s.close()
    finally:
        srv.close()
    assert stats.requests == len(h.sessions) and stats.refused == 0 and stats.errors == 0
    reply_cache._cache().close()
    scanned = 0
    for p in tmp_path.rglob("*"):
        if p.is_file():
            scanned += 1
            assert token.encode() not in p.read_bytes(), f"the proxy's token found in {p}"
    assert scanned > 5


def test_temp_lora_trains_on_every_chunk_for_every_epoch_in_order():
    cfg = temp_lora.TempLoRAConfig(chunk_tokens=100, context_tokens=150, epochs=3)
    steps = temp_lora.temp_lora_schedule(450, cfg)
    # 5 chunks (the last of 50 tokens), each 3 times before the next, oldest first
    assert [(s.chunk, s.epoch) for s in steps] == [(c, e) for c in range(5) for e in range(3)]
    assert [(s.middle, s.end) for s in steps[::3]] == [(0, 100), (100, 200), (200, 300), (300, 400), (400, 450)]
    # every token is in exactly one chunk, and each chunk sees up to context_tokens before it
    assert sorted(t for s in steps[::3] for t in range(s.middle, s.end)) == list(range(450))
    assert [s.start for s in steps[::3]] == [0, 0, 50, 150, 250]
    assert temp_lora.temp_lora_schedule(0, cfg) == []
    with pytest.raises(ValueError, match="epochs > 0"):
        temp_lora.temp_lora_schedule(10, temp_lora.TempLoRAConfig(epochs=0))
    # the paper's settings are the defaults: 1,024-token chunks, 2 epochs, lr 5e-5, rank 64
    d = temp_lora.TempLoRAConfig()
    assert (d.chunk_tokens, d.epochs, d.lr, d.rank, d.alpha) == (1024, 2, 5e-5, 64, 64)


def test_temp_lora_records_its_training_in_the_variant_and_the_cache_key(tmp_path):
    from memlife.models import serve

    try:
        serve.model_path()
    except (ModuleNotFoundError, FileNotFoundError) as exc:
        pytest.skip(f"SmolLM2 GGUF not installed: {exc}")
    h = reading.history_for(INSTANCE, "adjacent")
    two = temp_lora.TempLoRASystem(tmp_path, temp_lora.TempLoRAConfig(epochs=2))
    one = temp_lora.TempLoRASystem(tmp_path, temp_lora.TempLoRAConfig(epochs=1))
    assert "epochs=2" in two.variant and "base=SmolLM2-135M-Instruct" in two.variant and "rank=64" in two.variant
    key = two.request_key(h, "What is my ZIP code?")
    assert one.request_key(h, "What is my ZIP code?") != key  # other training, another generation
    faster = temp_lora.TempLoRASystem(tmp_path, temp_lora.TempLoRAConfig(lr=1e-4))
    assert faster.request_key(h, "What is my ZIP code?") != key
    tighter = temp_lora.TempLoRASystem(tmp_path, temp_lora.TempLoRAConfig(epochs=2), grammar_bounds={"answer": 10})
    assert tighter.request_key(h, "What is my ZIP code?") != key  # another grammar, too
    assert two.messages("q?")[0]["content"].endswith(RESPONSE_INSTRUCTIONS)  # the readers' reply format
    assert two.messages("q?")[1]["content"] == "## Question\nq?"  # and no memory text


# A grammar whose every reply (172 characters at most) fits in 220 tokens, so that a short real
# generation under it completes: no token is shorter than one character of ASCII text.
TINY_BOUNDS = {"answer": 24, "target": 8, "old_value": 8, "new_value": 8, "provenance_quote": 16,
               "operations_items": 1, "provenance_items": 1}


@pytest.mark.slow
def test_temp_lora_trains_every_chunk_then_answers_under_the_readers_grammar(isolated_llm, tmp_path, monkeypatch):
    """A real, small run: train on every chunk of a short adjacent history, generate greedily under
    the grammar (a reply that completes parses; one cut at the cap is truncated), cache the replies,
    discard the adapter once the history is done."""
    pytest.importorskip("peft")
    pytest.importorskip("llguidance")
    from memlife.memops.data.response import grammar_longest_reply
    from memlife.models import accounting, endpoints, serve

    try:
        serve.model_path()
    except (ModuleNotFoundError, FileNotFoundError) as exc:
        pytest.skip(f"SmolLM2 GGUF not installed: {exc}")

    assert grammar_longest_reply(TINY_BOUNDS) < 220
    # Two turns of each of the three sessions (~150 tokens) in 64-token chunks: several chunks, each
    # trained twice, at a third of the gradient steps' tokens the whole 500-token history would cost.
    cfg = temp_lora.TempLoRAConfig(chunk_tokens=64, context_tokens=16, epochs=2, rank=4, alpha=4,
                                 max_new_tokens=220)
    s = temp_lora.TempLoRASystem(tmp_path / "stores", cfg, grammar_bounds=TINY_BOUNDS)
    adjacent = reading.history_for(INSTANCE, "adjacent")
    h = reading.History(adjacent.history_id, "adjacent", tuple(session[:2] for session in adjacent.sessions))
    d = baselines.store_dir(tmp_path / "stores", "temp_lora", h.history_id)
    s.ingest(h)
    assert not (d / "INGESTED").exists()  # training waits until a reply is not cached
    ans = s.answer(h, "What is my ZIP code?")
    info = json.loads((d / "INGESTED").read_text())
    n = len(s._token_ids(h))
    assert info["tokens"] == n and info["chunks"] == -(-n // 64) > 2
    assert info["steps"] == 2 * info["chunks"] == len(info["losses"]) and info["epochs"] == 2
    assert info["base_model"] == "SmolLM2-135M-Instruct" and (d / "adapter" / "adapter_config.json").is_file()
    assert ans.finish_reason == "stop" and not ans.parsed.malformed, ans.parsed.raw  # the grammar held
    assert ans.request_id.startswith("temp_lora:") and not ans.cached
    # The same question under a cap the reply cannot fit: cut off, and said so.
    short = temp_lora.TempLoRASystem(tmp_path / "stores", temp_lora.TempLoRAConfig(**{**cfg.__dict__, "max_new_tokens": 6}),
                                   grammar_bounds=TINY_BOUNDS)
    cut = short.answer(h, "What is my ZIP code?")
    assert cut.finish_reason == "length" and cut.parsed.truncated and cut.completion_tokens == 6
    assert cut.parsed.malformed and not cut.parsed.failed_format and "token cap" in cut.parsed.error
    short.close()
    s.close()
    assert not (d / "adapter").exists() and (d / "INGESTED").is_file()  # temporary: discarded, the record kept

    # A cached reply needs neither training nor the model, and is counted like every other call.
    monkeypatch.setattr(temp_lora.TempLoRASystem, "_load_base", lambda *a: pytest.fail("loaded the model"))
    s3 = temp_lora.TempLoRASystem(tmp_path / "elsewhere", cfg, grammar_bounds=TINY_BOUNDS)
    before = accounting.usage()
    again = s3.answer(h, "What is my ZIP code?")
    assert again.cached and again.parsed.raw == ans.parsed.raw and again.finish_reason == "stop"
    after = accounting.usage()
    assert (after.calls - before.calls, after.cached_calls - before.cached_calls) == (1, 1)
    monkeypatch.setenv("MEMLIFE_LLM_MODE", "replay")
    with pytest.raises(endpoints.CacheMiss, match="Temp-LoRA"):
        s3.answer(h, "A question never asked")


def test_changing_an_answer_parameter_asks_again_and_records_only_the_current_run(tmp_path):
    client = _EchoClient()
    base = dict(systems=["long_context", "bm25_turn"], settings=["adjacent"], max_probes=2, judge=False)
    first = answering.run([INSTANCE], answering.EvalConfig(reader_max_tokens=1200, **base), tmp_path,
                         reader_client=client, progress=False)
    assert len(client.seen) == 4 and len(first) == 4 and first["run_key"].nunique() == 1
    # Same parameters: everything is journalled, nothing is asked.
    answering.run([INSTANCE], answering.EvalConfig(reader_max_tokens=1200, **base), tmp_path,
                 reader_client=client, progress=False)
    assert len(client.seen) == 4
    # Another token cap changes the answers: asked again, and only the new answers are the records.
    second = answering.run([INSTANCE], answering.EvalConfig(reader_max_tokens=1000, **base), tmp_path,
                          reader_client=client, progress=False)
    assert len(client.seen) == 8 and len(second) == 4
    assert set(second["run_key"]) != set(first["run_key"])
    labels.run(second, [INSTANCE], answering.EvalConfig(reader_max_tokens=1000, **base), tmp_path, progress=False)
    assert len(pd.read_parquet(tmp_path / "records.parquet")) == 4
    # A smaller selection under the same key asks nothing and records just that selection.
    third = answering.run([INSTANCE], answering.EvalConfig(reader_max_tokens=1000, **{**base, "max_probes": 1}),
                         tmp_path, reader_client=client, progress=False)
    assert len(client.seen) == 8 and len(third) == 2
    assert len(answering.collect(tmp_path)) == 8  # the journals keep every answer ever given


def test_temp_lora_generates_under_the_readers_token_cap(tmp_path, monkeypatch):
    """Every system gets room for a perfect reply: Temp-LoRA's generation cap is reader_max_tokens,
    not a fixed default below the longest gold response."""
    seen = {}

    class Stop(Exception):
        pass

    def make_system(name, **kw):
        seen[name] = kw["temp_lora"]
        raise Stop

    monkeypatch.setattr(registry, "make_system", make_system)
    cfg = answering.EvalConfig(systems=["temp_lora"], settings=["adjacent"], temp_lora_settings=["adjacent"],
                              max_probes=1, reader_max_tokens=1345, temp_lora_epochs=3, judge=False)
    with pytest.raises(Stop):
        answering.run([INSTANCE], cfg, tmp_path, reader_client=_EchoClient(), progress=False)
    assert seen["temp_lora"].max_new_tokens == 1345 > temp_lora.TempLoRAConfig().max_new_tokens
    assert seen["temp_lora"].epochs == 3  # temp_lora_epochs is the method's epochs per chunk
