"""Real endpoints' documented rules, met: reasoning-model parameters, strict schemas, context
windows, rate limits, refusals, and one spending cap across processes — against tests/strictserver.py."""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pydantic import BaseModel

from memlife.models import accounting, endpoints, llm, reply_cache

from conftest import point_at
from strictserver import StrictServer

HERE = Path(__file__).resolve().parent
LIB = str(HERE.parent / "lib")


@pytest.fixture
def strict():
    with StrictServer() as s:
        yield s


def client_for(llm, server, role="reader", model="gpt-5-mini", **extra):
    return point_at(llm, server, role=role, model=model, **extra)


MSG = lambda text: [{"role": "user", "content": text}]  # noqa: E731


def test_a_reasoning_model_gets_max_completion_tokens_no_temperature_and_room_to_reason(isolated_llm, strict):
    c = client_for(isolated_llm, strict, model="gpt-5-mini")
    out = c.complete(MSG("What is 2+2?"), max_tokens=16, temperature=0.0)
    body = strict.bodies[-1]
    assert "max_tokens" not in body and "temperature" not in body
    assert body["max_completion_tokens"] == 16 + c.endpoint.reasoning_tokens > 16
    assert out.text and strict.rejected == []


def test_without_those_rules_the_strict_endpoint_rejects_the_call(isolated_llm, strict):
    c = client_for(isolated_llm, strict, model="o4-mini", token_param="max_tokens")
    with pytest.raises(endpoints.LLMCallError, match="HTTP 400.*max_completion_tokens") as err:
        c.complete(MSG("q1"), max_tokens=16)
    assert err.value.status == 400
    c = client_for(isolated_llm, strict, model="o4-mini", send_temperature=True)
    with pytest.raises(endpoints.LLMCallError, match="temperature"):
        c.complete(MSG("q2"), max_tokens=16)
    assert strict.received == {}


def test_a_reasoning_budget_too_small_is_an_empty_reply_said_and_counted(isolated_llm, tmp_path, monkeypatch):
    notices = tmp_path / "notices.jsonl"
    monkeypatch.setenv("MEMLIFE_NOTICES", str(notices))
    monkeypatch.setenv("MEMLIFE_JUDGE_REASONING_TOKENS", "0")
    accounting._said.clear()
    with StrictServer(reasoning_cost=64) as s:
        c = client_for(isolated_llm, s, role="judge", model="gpt-5-mini")
        out = c.complete(MSG("grade this"), max_tokens=16)
    assert out.text == "" and out.finish_reason == "length"
    summary = accounting.summarize_calls(tmp_path / "results" / "usage" / "pytest.calls.jsonl")
    assert summary["empty_replies"] == 1
    assert "MEMLIFE_JUDGE_REASONING_TOKENS" in notices.read_text()


def test_schemas_the_strict_endpoint_accepts_and_one_it_rejects(isolated_llm, strict):
    from memlife.memops.data.realize import GeneratedSegment

    class Loose(BaseModel):
        turns: list[str]

    c = client_for(isolated_llm, strict, role="generator", model="gpt-4o")
    obj, _ = c.complete_json(MSG("write turns"), schema=GeneratedSegment, max_tokens=64)
    assert obj is not None and len(obj.turns) == 8
    with pytest.raises(endpoints.LLMCallError, match="additionalProperties"):
        c.complete_json(MSG("write turns again"), schema=Loose, max_tokens=64)


def test_a_32k_vllm_model_reports_its_window_and_memops_prompts_fit_it(isolated_llm):
    from memlife.memops.systems.reading import Reader

    with StrictServer(window=32_768) as s:
        c = client_for(isolated_llm, s, model="Qwen/Qwen2.5-7B-Instruct", price_per_mtok="0,0")
        assert c.context_window() == 32_768
        reader = Reader(client=c, max_tokens=600)
        lines = [f"[session {i}] user: my locker number is {i} and I keep my bike in the garage" for i in range(4000)]
        ans = reader.read(lines, "What is my locker number?")
        assert ans.truncated_tokens > 0 and not ans.parsed.malformed
        assert s.rejected == [] and sum(s.received.values()) == 1
        with pytest.raises(endpoints.ContextWindowExceeded, match="32768"):
            c.complete(MSG("word " * 40_000), max_tokens=16)
        assert s.rejected == []  # refused here, before anything was sent


def test_an_endpoint_that_reports_no_window_needs_one_configured(isolated_llm, monkeypatch):
    with StrictServer(window=4096, report_window=False) as s:  # Ollama: no window reported
        c = client_for(isolated_llm, s, model="llama3.1:8b")
        with pytest.raises(endpoints.LLMError, match="MEMLIFE_READER_CONTEXT_WINDOW"):
            c.complete(MSG("hello"), max_tokens=8)
        monkeypatch.setenv("MEMLIFE_READER_CONTEXT_WINDOW", "4096")
        c = client_for(isolated_llm, s, model="llama3.1:8b")
        assert c.context_window() == 4096 and c.complete(MSG("hello"), max_tokens=8).text


def test_rate_limit_headers_are_honoured_instead_of_collecting_429s(isolated_llm):
    with StrictServer(rpm=3, rate_window_s=1.5) as s:
        c = client_for(isolated_llm, s, model="gpt-4o-mini", concurrency=1)
        t0 = time.monotonic()
        out = c.complete_many([dict(messages=MSG(f"r{i}"), max_tokens=8) for i in range(7)], progress=False)
        took = time.monotonic() - t0
    assert len(out) == 7 and s.rejected == []
    assert took >= 2 * 1.5 * 0.9  # two waits for the window to reset, not retries


def test_a_configured_requests_per_minute_budget_is_kept(isolated_llm):
    with StrictServer() as s:  # no headers: only the configured budget paces
        c = client_for(isolated_llm, s, model="gpt-4o-mini", requests_per_minute=2, concurrency=4)
        c.complete_many([dict(messages=MSG(f"b{i}"), max_tokens=8) for i in range(2)], progress=False)
        limiter = c._limiter
        assert len(limiter._sent) == 2
        limiter._sent[0] = (time.monotonic() - 59.0, limiter._sent[0][1])  # the first is 59 s old
        t0 = time.monotonic()
        c.complete(MSG("b2"), max_tokens=8)
        assert 0.7 <= time.monotonic() - t0 < 5 and s.rejected == []


def test_a_refusal_is_recorded_as_such_cached_and_counted(isolated_llm, strict, tmp_path):
    from memlife.memops.data.response import MemOpsResponse

    c = client_for(isolated_llm, strict, model="gpt-4o-mini")
    obj, out = c.complete_json(MSG("REFUSE-ME please"), schema=MemOpsResponse, max_tokens=64)
    assert obj is None and out.refusal and "refused" in out.error and out.text == ""
    again = c.complete(MSG("REFUSE-ME please"), max_tokens=64,
                       response_format=llm.json_schema_format(MemOpsResponse))
    assert again.cached and again.refusal == out.refusal and sum(strict.received.values()) == 1
    s = accounting.summarize_calls(tmp_path / "results" / "usage" / "pytest.calls.jsonl")
    assert s["refusals"] == 2 and s["empty_replies"] == 0


def test_the_memops_judge_sends_its_schema_and_accepts_the_structured_reply(isolated_llm, strict):
    from memlife.memops import build
    from memlife.memops.scoring import judging, labels
    from memlife.memops.data.response import MemOpsResponse, ParsedResponse

    params = build.BuildParams(profile="smoke", seed=0, n_topics=1, max_conversations=1, longctx_tokens=2000,
                               realizer="template", verifier="off")
    inst = build.build(params, progress=False).instances[0]
    probe = inst.probes[0]
    parsed = ParsedResponse(raw="{}", response=MemOpsResponse(answer=probe.expected_answer, operations=[],
                                                              provenance=[]))
    judge = client_for(isolated_llm, strict, role="judge", model="gpt-4o")
    out = labels.judge_reply(inst, probe, parsed, judge)
    assert strict.bodies[-1]["response_format"]["json_schema"]["name"] == "MemOpsJudgement"
    assert out["judge_valid"] and out["judge_model"] == "gpt-4o" and strict.rejected == []
    assert judging.parse_judge('```json\n{"accuracy": 1, "operation": 0, "provenance": 1, "leakage": "NA", '
                               '"stale": 0, "reflect": "NA"}\n```')["accuracy"] is True


def test_an_unpriced_model_is_refused_while_a_cap_is_set_unless_priced(isolated_llm, strict):
    c = client_for(isolated_llm, strict, model="Qwen/Qwen2.5-7B-Instruct")
    endpoints._settings["spend_cap_usd"] = 5.0
    with pytest.raises(endpoints.UnpricedModel, match="MEMLIFE_READER_PRICE_PER_MTOK"):
        c.complete(MSG("free?"), max_tokens=8)
    assert strict.received == {}
    c = client_for(isolated_llm, strict, model="Qwen/Qwen2.5-7B-Instruct", price_per_mtok=[0.2, 0.8])
    endpoints._settings["spend_cap_usd"] = 5.0
    assert c.complete(MSG("priced"), max_tokens=8).text


def test_the_environment_cap_wins_over_the_profile(isolated_llm, monkeypatch, tmp_path):
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "paper.yaml").write_text("common: {}\nnotebooks: {}\nspend_cap_usd: 10\n")
    endpoints.configure("paper", run="pytest")
    assert endpoints.spend_cap_usd() == 10.0
    monkeypatch.setenv("MEMLIFE_SPEND_CAP_USD", "2.5")
    endpoints.configure("paper", run="pytest")
    assert endpoints.spend_cap_usd() == 2.5
    monkeypatch.setenv("MEMLIFE_SPEND_CAP_USD", "ten dollars")
    with pytest.raises(endpoints.LLMError, match="not a number"):
        endpoints.configure("paper", run="pytest")
    monkeypatch.delenv("MEMLIFE_SPEND_CAP_USD")


def test_a_tracks_models_override_the_profiles_for_its_notebooks(isolated_llm, tmp_path):
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "paper.yaml").write_text(
        "common: {}\nnotebooks: {}\nmodels:\n  reader: {base_url: 'http://x/v1', model: gpt-4o-mini}\n"
        "tracks:\n  memops:\n    models:\n      reader: {model: gpt-4.1-mini}\n")
    endpoints.configure("paper", run="12_memops_eval")
    assert endpoints.endpoint_for("reader").model == "gpt-4.1-mini"
    endpoints.configure("paper", run="22_read_restore")
    assert endpoints.endpoint_for("reader").model == "gpt-4o-mini"
    endpoints.configure("paper", run="adhoc", track="memops")
    assert endpoints.endpoint_for("reader").model == "gpt-4.1-mini"


_SPENDER = """
import json, sys
from memlife.models import endpoints, llm
endpoints.configure(None, run=sys.argv[2], models={"reader": {"base_url": sys.argv[1], "model": "gpt-4o",
                                                        "timeout_s": 5, "max_retries": 0}})
c = llm.get_client("reader")
sent = 0
try:
    for i in range(40):
        c.complete([{"role": "user", "content": f"{sys.argv[2]} call {i} " + "word " * 200}], max_tokens=100)
        sent += 1
except endpoints.SpendingCapExceeded as exc:
    print(json.dumps({"sent": sent, "stopped": str(exc)[:200]}))
else:
    print(json.dumps({"sent": sent, "stopped": None}))
"""


def test_the_cap_holds_across_two_notebooks_run_at_once(isolated_llm, tmp_path):
    """Two processes of one run (as `make -j2` runs two notebooks) share the ledger: together they
    stop within the cap, where each alone would have spent it all."""
    from memlife.models import spending

    cap = 0.03  # gpt-4o: ~200 prompt tokens + 100 reserved completion ≈ $0.0015 worst case a call
    env = {**os.environ, "PYTHONPATH": LIB, "MEMLIFE_SPEND_CAP_USD": str(cap), "MEMLIFE_SPEND_RUN": "run-1",
           "OPENAI_API_KEY": "sk-test"}
    with StrictServer(delay_s=0.02) as s:
        procs = [subprocess.Popen([sys.executable, "-c", _SPENDER, s.base_url, name], env=env,
                                  stdout=subprocess.PIPE, text=True) for name in ("12_memops_eval", "22_read_restore")]
        outs = [json.loads(p.communicate(timeout=120)[0]) for p in procs]
    assert all(o["stopped"] for o in outs), outs
    total_sent = sum(o["sent"] for o in outs)
    assert total_sent == sum(s.received.values())
    os.environ["MEMLIFE_SPEND_RUN"] = "run-1"
    try:
        spent = spending.spent("run-1")
    finally:
        del os.environ["MEMLIFE_SPEND_RUN"]
    # Both ran until the shared total neared the cap: with a cap each, they would have spent twice it.
    worst = accounting.price_usd("gpt-4o", 230, 100)
    assert cap - 2 * worst < spent <= cap


def test_a_paper_run_refuses_to_start_without_prices_and_windows(isolated_llm, monkeypatch):
    """Before its first paid call: the paper profile's GPT-5.5 audit judge has no list price, and a
    server that reports no window leaves the reader's unknown."""
    from memlife.models import llm

    monkeypatch.setenv("MEMLIFE_ROOT", str(HERE.parent))
    monkeypatch.setenv("MEMLIFE_SPEND_CAP_USD", "5")
    with StrictServer(report_window=False) as s:
        monkeypatch.setenv("MEMLIFE_BASE_URL", s.base_url)
        with pytest.raises(SystemExit, match="MEMLIFE_JUDGE_AUDIT_PRICE_PER_MTOK"):
            llm.check_paper_profile("paper", "22_read_restore")
        monkeypatch.setenv("MEMLIFE_JUDGE_AUDIT_PRICE_PER_MTOK", "1.25,10")
        monkeypatch.setenv("MEMLIFE_MODEL", "my-finetune")  # every role: unpriced and of unknown window
        monkeypatch.setenv("MEMLIFE_PRICE_PER_MTOK", "0,0")
        with pytest.raises(SystemExit, match="MEMLIFE_READER_CONTEXT_WINDOW"):
            llm.check_paper_profile("paper", "12_memops_eval")
        monkeypatch.setenv("MEMLIFE_CONTEXT_WINDOW", "32768")
        llm.check_paper_profile("paper", "12_memops_eval")
        assert sum(s.received.values()) == 0  # nothing was sent to find out


def test_every_role_is_accepted_by_a_strict_reasoning_endpoint_configured_by_the_readme_variables(
        isolated_llm, monkeypatch):
    """MEMLIFE_BASE_URL, MEMLIFE_MODEL and OPENAI_API_KEY only: the generator, verifier, reader,
    judge and importance calls of both tracks, as the library makes them, all accepted."""
    from memlife.memops import build
    from memlife.memops.data import gates
    from memlife.memops.scoring import labels
    from memlife.memops.systems import baselines, reading
    from memlife.memops.data.response import ParsedResponse
    from memlife.restore.eviction import evict
    from memlife.restore.reading import arms, prompts

    with StrictServer(window=400_000) as s:
        monkeypatch.setenv("MEMLIFE_BASE_URL", s.base_url)
        monkeypatch.setenv("MEMLIFE_MODEL", "gpt-5-mini")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
        endpoints.configure(None, run="pytest")
        # generator and verifier: notebook 10's LLM path, every conversation retained
        params = build.BuildParams(profile="smoke", seed=0, n_topics=1, max_conversations=2, longctx_tokens=1500,
                                   realizer="llm", verifier="auto")
        made = build.build(params, progress=False)
        assert made.manifest["realizer"] == "llm" and made.manifest["llm_verifier"]
        assert len(made.instances) == 2, made.log.to_json()
        inst = made.instances[0]
        assert gates.llm_verify(inst) == []
        # reader and judge: notebook 12
        reader = reading.Reader(llm.get_client("reader"), max_tokens=384)
        history = reading.history_for(inst, "long_context")
        ans = baselines.LongContextSystem(reader).answer(history, inst.probes[0].question)
        assert not ans.parsed.malformed
        judged = labels.judge_reply(inst, inst.probes[0], ParsedResponse(raw=ans.parsed.raw, response=ans.parsed.response),
                                 llm.get_client("judge"))
        assert judged["judge_valid"], judged
        # importance scorer, reader and judge: notebooks 21 and 22, at the paper's token budgets
        scores, invalid = evict.score_importance(["I moved to Lisbon in May.", "Nice weather."],
                                                 llm.get_client("scorer"))
        assert invalid == 0 and set(scores.values()) == {7.0}
        prompt = prompts.READER_USER.format(today="2024-05-01", snippets="I moved to Lisbon in May.",
                                            question="Where do I live?")
        read = arms.read_all(arms.ReadPlan(reads=[], distinct_prompts=[prompt]), llm.get_client("reader"))
        grade = llm.get_client("judge").complete(
            prompts.judge_messages("Where do I live?", "Lisbon", read[prompt]), max_tokens=prompts.JUDGE_MAX_TOKENS)
        assert llm.parse_label(grade.text) == "CORRECT"
    assert s.rejected == []
    roles = {b["max_completion_tokens"] for b in s.bodies}
    assert all("max_tokens" not in b and "temperature" not in b for b in s.bodies)
    assert {16 + 4096, 4 + 4096} <= roles  # the judge's and the importance scorer's budgets, with room to reason


def test_an_estimate_sends_nothing_and_counts_a_repeated_request_as_cached(isolated_llm, strict, tmp_path,
                                                                           monkeypatch):
    monkeypatch.setenv("MEMLIFE_LLM_MODE", "estimate")
    monkeypatch.setenv(reply_cache.ESTIMATE_SEEN_ENV, str(tmp_path / "seen"))
    c = client_for(isolated_llm, strict, model="gpt-4o")
    first = c.complete(MSG("how much?"), max_tokens=50)
    again = c.complete(MSG("how much?"), max_tokens=50)
    assert strict.received == {} and not first.cached and again.cached
    assert first.completion_tokens == 50 and first.prompt_tokens > 0  # the whole budget: the worst case
    s = accounting.summarize_calls(tmp_path / "results" / "usage" / "pytest.calls.jsonl")
    assert (s["calls"], s["live_calls"]) == (2, 1)
    assert s["usd_estimate"] == pytest.approx(accounting.price_usd("gpt-4o", first.prompt_tokens, 50), abs=1e-6)
    monkeypatch.setenv("MEMLIFE_LLM_MODE", "live")
    assert not c.complete(MSG("how much?"), max_tokens=50).cached and sum(strict.received.values()) == 1


def test_the_closing_summary_says_what_the_run_spent_against_its_cap(isolated_llm, monkeypatch, tmp_path):
    from memlife.models import spending
    from memlife.running import runner

    monkeypatch.setenv(spending.RUN_ENV, "run-7")
    endpoints.configure(None, run="pytest", spend_cap_usd=3.0)
    spending.settle(spending.reserve(0.5, 3.0, role="reader", model="gpt-4o"), 0.12)
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks" / "12_memops_eval.ipynb").write_text("{}")
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "quick.yaml").write_text("common: {}\nnotebooks: {}\n")
    usage = tmp_path / "results" / "quick" / "usage"
    usage.mkdir(parents=True, exist_ok=True)
    (usage / "12_memops_eval.json").write_text(json.dumps({
        "notebook": "12_memops_eval", "profile": "quick", "wall_s": 3, "calls": 1, "cached_calls": 0,
        "recorded_calls": 0, "live_calls": 1, "prompt_tokens": 5, "completion_tokens": 2, "usd_estimate": 0.12,
        "outputs": [], "notices": []}))
    assert "spent $0.1200 of the $3.00 cap in this run (MEMLIFE_SPEND_RUN=run-7" in runner.summary("quick", root=tmp_path)
