"""The pilot's forecast, by hand: calls and prompt tokens from the estimate, per-call completions,
the prompt cache's share and latency from the pilot's replies, prices, concurrency and rate limits.
(A pilot run end to end against the emulator, and the whole run it forecasts: tests/test_estimate.py.)"""
import json
from pathlib import Path

import pytest

from memlife.models.accounting import Price
from memlife.models.endpoints import Endpoint
from memlife.running import pilot

ROOT = Path(__file__).resolve().parents[1]

READER_PRICE = Price(input=1.0, output=4.0, cached_input=0.5, batch_factor=0.5)
JUDGE_PRICE = Price(input=2.0, output=8.0, cached_input=1.0, batch_factor=0.5)


def _est() -> dict:
    role = {"cached_calls": 0, "batch_calls": 0, "usd": 0.0}
    return {"profile": "hand", "failed": {}, "notebooks": [{"notebook": "22_read_restore", "by_role": {
        # 100 reader calls to send, 2,000 prompt tokens each, budgets of 500
        "reader": {**role, "calls": 100, "live_calls": 100, "prompt_tokens": 200_000, "cached_prompt_tokens": 0,
                   "completion_tokens": 50_000, "models": ["m-reader"]},
        "judge": {**role, "calls": 50, "live_calls": 50, "prompt_tokens": 50_000, "cached_prompt_tokens": 0,
                  "completion_tokens": 800, "models": ["m-judge"]},
        "scorer": {**role, "calls": 7, "cached_calls": 7, "live_calls": 0, "prompt_tokens": 0,
                   "cached_prompt_tokens": 0, "completion_tokens": 0, "models": ["m-judge"]}}}]}


def _call(rid, completion, *, prompt=1000, cached_tokens=0, latency=0.0, source="live", role="reader"):
    return {"role": role, "model": "m", "request_id": rid, "cached": source != "live", "source": source,
            "prompt_tokens": prompt, "cached_prompt_tokens": cached_tokens, "completion_tokens": completion,
            "latency_s": latency, "usd": 0.001 if source == "live" else 0.0}


def _calls() -> dict:
    return {
        ("22_read_restore", "reader"): [
            _call("r1", 10, prompt=2000, cached_tokens=1000, latency=2.0),
            _call("r2", 20, prompt=2000, cached_tokens=0, latency=4.0),
            _call("r3", 30, prompt=2000, cached_tokens=500, latency=3.0),
            _call("r1", 10, prompt=2000, cached_tokens=1000, source="cache"),  # asked again: counted once
        ],
        ("22_read_restore", "judge"): [
            _call("j1", 2, latency=1.0, role="judge"), _call("j2", 2, latency=1.0, role="judge"),
            # replies from the cache and the recording: completions count, no latency, no fresh cache share
            _call("j3", 4, cached_tokens=1000, source="cache", role="judge"),
            _call("j4", 4, source="cache", role="judge"), _call("j5", 3, source="recorded", role="judge"),
        ],
    }


def _endpoint_of(notebook, role):
    if role == "reader":
        return READER_PRICE, Endpoint(role="reader", model="m-reader", base_url="http://x", concurrency=4,
                                      requests_per_minute=60)
    return JUDGE_PRICE, Endpoint(role=role, model="m-judge", base_url="http://x", concurrency=10,
                                 tokens_per_minute=30_000)


def test_the_forecast_of_two_roles_computed_by_hand():
    report = pilot.forecast(pilot.units_from(_est(), _calls(), _endpoint_of), seed=0, n_boot=500)
    reader, judge = report["roles"]["reader"], report["roles"]["judge"]
    assert set(report["roles"]) == {"reader", "judge"}  # the scorer has nothing to send

    # reader: 20 completion tokens per call (10, 20, 30); a quarter of the prompt cached (1,500 of
    # 6,000); 3 s per call over 4 at a time is 75 s, under 60 a minute's 100 s
    assert (reader["calls"], reader["prompt_tokens"]) == (100, 200_000)
    assert reader["completion_tokens"] == 100 * 20 == 2_000
    assert reader["cached_prompt_tokens"] == 200_000 // 4 == 50_000
    assert reader["usd"] == pytest.approx((150_000 * 1.0 + 50_000 * 0.5 + 2_000 * 4.0) / 1e6)  # 0.183
    assert reader["usd_batch"] == pytest.approx(0.183 / 2)
    assert reader["usd_no_prompt_cache"] == pytest.approx((200_000 * 1.0 + 2_000 * 4.0) / 1e6)  # 0.208
    assert reader["usd_ceiling"] == pytest.approx((200_000 * 1.0 + 50_000 * 4.0) / 1e6)  # every budget spent
    assert reader["wall_s"] == pytest.approx(max(100 * 3.0 / 4, 100 / 60 * 60)) == 100.0
    assert (reader["pilot_calls"], reader["pilot_live_calls"], reader["pilot_cached_calls"]) == (4, 3, 1)
    assert reader["basis"] == "pilot" and reader["models"] == ["m-reader"]

    # judge: 3 completion tokens per call (2, 2, 4, 4, 3: every reply); nothing cached in its live
    # calls (the cached reply's 1,000 is not fresh); 1 s per call over 10 at a time is 5 s, under
    # 30,000 tokens a minute's (50,000 prompt + 800 budget) / 30,000 minutes = 101.6 s
    assert judge["completion_tokens"] == 50 * 3 == 150
    assert judge["cached_prompt_tokens"] == 0
    assert judge["usd"] == pytest.approx((50_000 * 2.0 + 150 * 8.0) / 1e6)  # 0.1012
    assert judge["wall_s"] == pytest.approx((50_000 + 800) / 30_000 * 60) == 101.6
    assert (judge["pilot_calls"], judge["pilot_live_calls"], judge["pilot_cached_calls"],
            judge["pilot_recorded_calls"]) == (5, 2, 2, 1)
    assert judge["notebooks"]["22_read_restore"]["per_call"] == {"completion_tokens": 3.0, "cached_share": 0.0,
                                                                  "latency_s": 1.0}

    total = report["total"]
    assert {"calls", "prompt_tokens", "cached_prompt_tokens", "completion_tokens", "usd", "usd_low", "usd_high",
            "wall_s"} <= set(total)
    assert (total["calls"], total["prompt_tokens"], total["cached_prompt_tokens"], total["completion_tokens"]) == (
        150, 250_000, 50_000, 2_150)
    assert total["usd"] == pytest.approx(0.183 + 0.1012)
    assert total["usd_batch"] == pytest.approx((0.183 + 0.1012) / 2)
    assert total["wall_s"] == pytest.approx(100.0 + 101.6)
    for r in (reader, judge, total):
        for k in ("completion_tokens", "usd", "wall_s"):
            assert r[f"{k}_low"] <= r[k] <= r[f"{k}_high"], k
    assert reader["completion_tokens_low"] < reader["completion_tokens_high"]  # the completions vary
    assert judge["wall_s_low"] == judge["wall_s_high"] == 101.6  # the token rate decides, whatever the latency
    json.dumps(report)  # as written


def test_a_role_the_pilot_did_not_exercise_is_forecast_from_the_ceiling_and_says_so():
    calls = _calls()
    del calls[("22_read_restore", "judge")]
    judge = pilot.forecast(pilot.units_from(_est(), calls, _endpoint_of), n_boot=200)["roles"]["judge"]
    assert judge["basis"] == "ceiling" and not judge["latency_known"]
    assert judge["completion_tokens"] == judge["completion_tokens_ceiling"] == 800
    assert judge["usd"] == pytest.approx(judge["usd_ceiling"]) == pytest.approx((50_000 * 2.0 + 800 * 8.0) / 1e6)
    assert judge["wall_s"] == pytest.approx((50_000 + 800) / 30_000 * 60)  # the rate limit alone
    assert judge["pilot_calls"] == 0


def test_a_role_answered_only_from_the_cache_has_its_completions_and_no_latency():
    calls = _calls()
    calls[("22_read_restore", "judge")] = [c for c in calls[("22_read_restore", "judge")] if c["source"] != "live"]
    judge = pilot.forecast(pilot.units_from(_est(), calls, _endpoint_of), n_boot=200)["roles"]["judge"]
    assert judge["basis"] == "pilot, no live call" and not judge["latency_known"]
    assert judge["completion_tokens"] == round(50 * 11 / 3)  # 4, 4, 3


def test_the_bootstrap_interval_is_the_same_for_the_same_seed():
    units = pilot.units_from(_est(), _calls(), _endpoint_of)
    a, b = pilot.forecast(units, seed=7, n_boot=300), pilot.forecast(units, seed=7, n_boot=300)
    assert a == b
    c = pilot.forecast(units, seed=8, n_boot=300)
    assert c["total"]["usd"] == a["total"]["usd"]  # the point forecast does not depend on the seed
    assert pilot.forecast(units, seed=7, n_boot=300)["interval"] == {
        "level": 0.95, "n_boot": 300, "seed": 7, "method": "percentile bootstrap over the pilot's calls"}
    assert (c["roles"]["reader"]["wall_s_low"], c["roles"]["reader"]["wall_s_high"]) != (
        a["roles"]["reader"]["wall_s_low"], a["roles"]["reader"]["wall_s_high"]) or (
        c["roles"]["reader"]["completion_tokens_low"], c["roles"]["reader"]["completion_tokens_high"]) != (
        a["roles"]["reader"]["completion_tokens_low"], a["roles"]["reader"]["completion_tokens_high"])


def test_the_table_shows_each_role_the_total_and_the_ceiling():
    report = pilot.forecast(pilot.units_from(_est(), _calls(), _endpoint_of), n_boot=100)
    report.update({"profile": "hand", "fraction": 0.1, "failed": {}, "pilot": {"calls": 9, "live_calls": 5,
                                                                                 "usd": 0.005, "wall_s": 12.0}})
    report["total"]["pilot_usd"] = 0.005
    text = pilot.render(report)
    assert "reader" in text and "judge" in text and "total" in text and "USD max" in text
    assert "0.1830" in text and "0.4000" in text  # the forecast, beside the estimate's ceiling


def test_the_notebooks_a_pilot_runs_include_those_they_read():
    assert pilot.needed(["22_read_restore"]) == ["20_longmem_data", "21_eviction", "22_read_restore"]
    assert "10_memops_build" in pilot.needed(None)


def _project(tmp_path: Path) -> Path:
    from memlife.base import config
    from memlife.running import scale

    return scale.write_root(tmp_path / "project", "smoke", config.load_profile("smoke", ROOT), note="a test",
                            root=ROOT)


def test_an_estimate_is_reused_only_while_its_profile_and_models_are_todays(isolated_llm, tmp_path, monkeypatch):
    from memlife.running import estimate

    root = _project(tmp_path)
    nbs = ["20_longmem_data", "21_eviction"]
    path = tmp_path / "estimate.json"
    est = {"profile": "smoke", "failed": {}, "fingerprint": estimate.fingerprint("smoke", root),
           "notebooks": [{"notebook": n, "by_role": {}} for n in nbs]}
    path.write_text(json.dumps(est))
    assert pilot.usable_estimate(path, "smoke", nbs, root)[0] is not None
    assert "did not estimate 22_read_restore" in pilot.usable_estimate(path, "smoke", [*nbs, "22_read_restore"], root)[1]
    monkeypatch.setenv("MEMLIFE_SCORER_MODEL", "gpt-4o-mini")
    monkeypatch.setenv("MEMLIFE_SCORER_BASE_URL", "http://127.0.0.1:9/v1")
    assert "other profile parameters or models" in pilot.usable_estimate(path, "smoke", nbs, root)[1]
    monkeypatch.delenv("MEMLIFE_SCORER_MODEL")
    monkeypatch.delenv("MEMLIFE_SCORER_BASE_URL")
    (root / "configs" / "smoke.yaml").write_text((root / "configs" / "smoke.yaml").read_text().replace(
        "n_questions: 1", "n_questions: 2"))
    assert "other profile parameters or models" in pilot.usable_estimate(path, "smoke", nbs, root)[1]
    assert "no estimate" in pilot.usable_estimate(tmp_path / "none.json", "smoke", nbs, root)[1]


def test_a_pilot_says_how_long_the_last_one_took_or_that_it_cannot_tell(isolated_llm, tmp_path):
    root = _project(tmp_path)
    nbs = ["20_longmem_data", "21_eviction", "22_read_restore"]
    first = pilot.announce("smoke", 0.5, nbs, root)
    assert "cannot be told" in first and "1 question of" in first
    path = pilot.pilot_path("smoke", root)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"fraction": 0.5, "made": "2026-01-02 03:04:05", "host": None,
                                "notebooks": [{"notebook": n, "wall_s": 60.0} for n in nbs]}))
    again = pilot.announce("smoke", 0.5, nbs, root)
    assert "took 03:00" in again and "2026-01-02" in again and "cannot" not in again
    assert "this one runs fraction 0.25" in pilot.announce("smoke", 0.25, nbs, root)
