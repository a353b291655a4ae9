"""Power by simulation (memlife.power, memlife.memops.analyses.power, memlife.restore.analyses.power,
memlife.running.power): checked against closed forms, against the rates it plants, and for
determinism."""
from __future__ import annotations

import json

import numpy as np
import pytest
import yaml

from memlife import power
from memlife.base import paths
from memlife.memops.analyses import power as memops_power
from memlife.restore.analyses import decompose
from memlife.restore.analyses import power as restore_power
from memlife.restore.eviction.evict import Eviction
from memlife.running import power as power_run

ROOT = paths.repo_root()


@pytest.mark.parametrize("p1, p2, clusters, size, latent", [
    (0.50, 0.60, 200, 1, 0.0),   # unclustered: the normal approximation itself
    (0.70, 0.85, 100, 1, 0.0),
    (0.50, 0.62, 40, 10, 0.3),   # clustered: the design-effect formula
    (0.80, 0.90, 30, 8, 0.2),
])
def test_simulated_power_matches_the_closed_form_within_simulation_error(p1, p2, clusters, size, latent):
    icc = power.binary_icc((p1 + p2) / 2, latent)
    closed = power.clustered_two_proportion_power(p1, p2, clusters, size, icc)
    sim, se = power.simulated_two_proportion_power(p1, p2, clusters, size, latent, reps=300, n_boot=300, seed=3)
    assert 0.2 < closed < 0.95  # a case where power can be wrong in either direction
    assert abs(sim - closed) <= 4 * se + 0.03, (sim, closed, se)


def test_closed_forms_against_values_computed_by_hand():
    # p 0.5 vs 0.6, 200 a group: SE = sqrt(.25/200 + .24/200) = 0.049497; d = 2.0203;
    # power = Phi(2.0203 - 1.95996) + Phi(-2.0203 - 1.95996) = 0.52400 + 0.00003
    assert power.two_proportion_power(0.5, 0.6, 200, 200) == pytest.approx(0.52403, abs=1e-4)
    assert power.design_effect(10, 0.2) == pytest.approx(2.8)
    # 40 clusters of 10 at ICC 0.2: 400 / 2.8 = 142.86 effective observations an arm
    assert power.clustered_two_proportion_power(0.5, 0.6, 40, 10, 0.2) == pytest.approx(
        power.two_proportion_power(0.5, 0.6, 400 / 2.8, 400 / 2.8))
    assert power.binary_icc(0.3, 0.0) == 0.0
    # the 0/1-scale correlation is below the latent one, and grows with it
    assert 0 < power.binary_icc(0.5, 0.2) < power.binary_icc(0.5, 0.5) < 0.5


def test_latent_uniforms_keep_their_rate_and_share_their_cluster_part():
    rng = np.random.default_rng(0)
    z = rng.standard_normal((2000, 1))
    u = power.latent_uniforms(rng, (2000, 2), [(0.6, z)])
    assert abs((u < 0.3).mean() - 0.3) < 0.02  # the rate is exactly p in expectation
    latent = np.corrcoef(*(np.quantile(np.random.default_rng(1).standard_normal(10**6), u.T.ravel()).reshape(2, -1)))
    assert latent[0, 1] == pytest.approx(0.6, abs=0.05)
    with pytest.raises(ValueError, match="sum to 1.2"):
        power.latent_uniforms(rng, (3, 1), [(0.6, z[:3]), (0.6, z[:3])])


def test_a_curve_counts_successes_and_n_needed_is_read_at_the_last_crossing():
    c = power.Claim("t", "k", "a claim", 0.1, "topics")
    cur = power.curve(c, {10: [0, 0, 1, 0], 20: [1, 1, 1, 0, 1], 40: [1, 1, 1, 1], 80: [1, 0, 1, 1]})
    assert cur.value == [0.25, 0.8, 1.0, 0.75]
    assert power.n_needed(cur) is None  # the largest size falls below 80%
    cur = power.curve(c, {10: [1, 1, 1, 1], 20: [0, 0, 1, 0], 40: [1, 1, 1, 1, 0], 80: [1, 1, 1, 1]})
    assert power.n_needed(cur) == 40  # not 10: the curve dips below after it
    res = power.Claim("t", "r", "a null at a resolution", 0.06, "questions", kind="resolution", target=0.06)
    cur = power.curve(res, {50: [0.09, 0.07, float("nan"), 0.05], 100: [0.05, 0.04, 0.06, 0.059]})
    assert cur.value == [0.25, 1.0]  # a run with no matched pair resolves nothing
    assert cur.median == [0.07, pytest.approx(0.0545)]
    with pytest.raises(ValueError, match="needs its target"):
        power.Claim("t", "r", "x", 0.1, "q", kind="resolution")


def test_memops_runs_plant_the_papers_rates_and_its_claims_carry_the_papers_differences():
    model = memops_power.paper_model(topic_correlation=0.0, probe_correlation=0.0)
    rec = memops_power.simulate_records(model, 400, np.random.default_rng(0))
    # Table 2's shape: ~4.03 conversations a topic, five probes each, four system-setting cells
    assert len(rec) / 4 / 5 / 400 == pytest.approx(403 / 100, rel=0.05)
    cell = rec[(rec["system"] == "bm25_turn") & (rec["op_type"] == "trajectory")]
    assert cell["accuracy"].mean() == pytest.approx(0.444, abs=0.04)  # Table 4, RAG turn-level, TrajectoryOps
    effects = {c.key: c.effect for c in memops_power.claims(model)}
    assert effects["long - adjacent: Reflect"] == pytest.approx(0.817 - 0.823)  # Table 4, GPT-4.1-mini
    assert effects["session - turn retrieval: operation"] == pytest.approx(0.845 - 0.629)  # Table 3
    assert len([k for k in effects if not k.startswith("long - adjacent accuracy")]) == 9  # notebook 13's family


def test_memops_probes_are_paired_across_cells_and_clustered_within_topics():
    def corr(model):
        rec = memops_power.simulate_records(model, 300, np.random.default_rng(1))
        lc = rec[rec["system"] == "long_context"]
        wide = lc.pivot_table(index=["conversation_id", lc.groupby(["conversation_id", "setting"]).cumcount()],
                              columns="setting", values="accuracy").astype(float)
        topic = rec.groupby("topic_id")["accuracy"].mean()
        return np.corrcoef(wide["adjacent"], wide["long_context"])[0, 1], topic.std()
    paired, spread_paired = corr(memops_power.paper_model(probe_correlation=0.5, topic_correlation=0.2))
    independent, spread_independent = corr(memops_power.paper_model(probe_correlation=0.0, topic_correlation=0.0))
    assert abs(independent) < 0.05 < 0.15 < paired  # one probe's two settings move together
    assert spread_paired > 1.5 * spread_independent  # topics differ more than their probes' noise


@pytest.fixture(scope="module")
def restore_model():
    return restore_power.paper_model()


def test_restore_runs_plant_the_papers_shares_and_hold_the_constructions_identities(restore_model):
    obs = restore_power.simulate_observations(restore_model, 470, np.random.default_rng(0))
    primary = obs[obs["reader"] == restore_power.PRIMARY]
    dec = decompose.decompose(primary).set_index(["policy", "budget", "regime"])
    # forced-gold has no recoverable error: by construction, as in the paper
    assert (dec.xs("forced_gold", level="regime")["recoverable"] == 0).all()
    # no-evict loses nothing, so nothing it gets wrong is irreversible
    assert (dec.xs("no_evict", level="policy")["irreversible"] == 0).all()
    # the 80k top-k two-bin shares are the paper's, within sampling error (~100-200 corrected errors a cell)
    for p, share in (("fifo", 0.71), ("random", 0.73), ("redundancy", 0.67), ("importance", 0.60)):
        assert dec.loc[(p, 80000, "topk"), "two_bin_share"] == pytest.approx(share, abs=0.1), p
    # the seeded policies run at every seed, the others once (as memlife.restore.eviction.evict runs them)
    assert primary.groupby("policy")["seed"].nunique().to_dict() == {
        "control": 3, "fifo": 1, "importance": 1, "no_evict": 1, "random": 3, "redundancy": 1}
    # the residual rate at no-evict 80k forced-gold is the paper's 59 of 336 for the primary reader
    r4 = obs[(obs["policy"] == "no_evict") & (obs["budget"] == 80000) & (obs["regime"] == "forced_gold")]
    rates = r4.groupby("reader")[["residual", "n_oracle_answerable"]].sum()
    assert rates.loc[restore_power.PRIMARY, "residual"] / rates.loc[restore_power.PRIMARY, "n_oracle_answerable"] \
        == pytest.approx(59 / 336, abs=0.05)
    assert rates["n_oracle_answerable"].iloc[0] / 470 == pytest.approx(336 / 470, abs=0.07)


def test_the_restore_models_kept_gold_error_gives_the_two_bin_share_it_is_asked_for(restore_model):
    g, e = restore_model.lost_rate("fifo", 80000), restore_model.error_if_lost
    k = restore_model.kept_error("fifo", 80000)
    assert g * e / (g * e + (1 - g) * k) == pytest.approx(0.71)
    assert restore_model.kept_error("fifo", 8000) == 0.0  # the paper's 1.00 at 8k
    bad = restore_power.Model(patterns={("fifo", 80000): np.ones((4, 3), dtype=bool) * [[1], [0], [1], [0]]},
                              two_bin={("fifo", 80000): 0.1})
    with pytest.raises(ValueError, match="kept-gold error rate"):
        bad.kept_error("fifo", 80000)


def test_gold_loss_patterns_are_counted_from_the_evictions_and_read_back_per_policy(tmp_path):
    def ev(q, policy, budget, seed, lost):
        return Eviction(q, policy, budget, seed, (), (), 0, 2, lost)
    evs = [ev(q, p, b, sd, int(q == "q1" and b == 8000) + int(p == "control"))
           for q in ("q2", "q1") for p in ("fifo", "redundancy", "random", "control") for b in (8000, 30000, 80000)
           for sd in ((0, 1, 2) if p in ("random", "control") else (0,))]
    evs.append(ev("q1", "no_evict", None, 0, 0))  # no budget: not an evicted cell
    pat = restore_power.gold_loss_patterns(evs)
    assert list(pat["question_id"]) == ["q1", "q2"] and pat.shape == (2, 1 + 2 * 3 + 2 * 3 * 3)
    assert pat.loc[0, "fifo 8000 0"] == 1 and pat.loc[1, "fifo 8000 0"] == 0 and pat["control 80000 2"].all()
    path = tmp_path / "patterns.csv"
    pat.to_csv(path, index=False)
    loaded = restore_power.load_patterns(path, seeds=3)
    assert loaded[("fifo", 8000)].tolist() == [[True] * 3, [False] * 3]  # one eviction, every seed
    assert (loaded[("importance", 30000)] == loaded[("redundancy", 30000)]).all()
    assert not loaded[("no_evict", 80000)].any() and loaded[("control", 8000)].all()
    pat.drop(columns="random 80000 2").to_csv(path, index=False)
    with pytest.raises(ValueError, match="no column 'random 80000 2'"):
        restore_power.load_patterns(path, seeds=3)
    with pytest.raises(FileNotFoundError, match="gold-loss patterns"):
        restore_power.load_patterns(tmp_path / "missing.csv")


def test_the_committed_patterns_lose_gold_as_the_committed_reference_decomposition_counts():
    import pandas as pd

    model = restore_power.paper_model()
    ref = pd.read_csv(ROOT / "results" / "tables" / "restore_reference_decomposition.csv")
    ref = ref[(ref["reader"] == "evidence-oracle (reference)") & (ref["regime"] == "topk")]
    for r in ref[ref["policy"].isin(["fifo", "random", "redundancy", "control"])].itertuples():
        # the evidence-oracle errs irreversibly exactly where gold was lost: the same count
        assert model.lost_rate(r.policy, r.paper_budget) == pytest.approx(r.irreversible / r.n_observations), r
    assert model.lost_rate("control", 80000) > model.lost_rate("fifo", 80000)


def test_too_few_resamples_to_ever_reject_is_refused():
    sizes = power_run.Sizes(2, 1, 1)
    with pytest.raises(ValueError, match="could never reject; use at least 480"):
        power_run.simulate(sizes, reps=2, n_boot=400)


def test_the_table_is_the_same_for_the_same_seed_whatever_the_workers():
    sizes = power_run.Sizes(topics=3, questions=12, seeds=2)
    grids = {"memops": (6,), "restore": (20,)}
    one = power_run.table(power_run.simulate(sizes, reps=3, n_boot=480, seed=5, grids=grids, workers=1))
    two = power_run.table(power_run.simulate(sizes, reps=3, n_boot=480, seed=5, grids=grids, workers=2))
    assert json.dumps(one) == json.dumps(two)
    assert {r["claim"] for r in one} >= {"R3 matched-pair resolution", "long - adjacent: Reflect"}
    assert all(set(r["curve"]) == ({"3", "6"} if r["track"] == "memops" else {"12", "20"}) for r in one)


def test_the_restore_curves_can_be_at_the_papers_seeds_and_the_profiles_point_at_its_own():
    sizes = power_run.Sizes(topics=3, questions=12, seeds=1)
    sim = power_run.simulate(sizes, reps=2, n_boot=480, seed=5, grids={"restore": (20,)}, grid_seeds=3)
    rows = power_run.table(sim)
    assert all(set(r["curve"]) == {"20"} for r in rows)  # the profile's 12 questions at 1 seed are not a grid point
    assert all(r["profile_n"] == 12 and r["profile_seeds"] == 1 and r["grid_seeds"] == 3 for r in rows)
    assert sim.curves[0].runs == [2]


def test_the_command_writes_the_claims_json(tmp_path, monkeypatch):
    monkeypatch.setattr(power_run, "GRIDS", {"memops": (4,), "restore": (10,)})
    out = tmp_path / "power.json"
    assert power_run.main(["--profile", "smoke", "--out", str(out), "--reps", "2", "--n-boot", "480",
                           "--workers", "1"]) == 0
    doc = json.loads(out.read_text())
    assert doc["sizes"] == {"topics": 2, "questions": 1, "seeds": 1}
    for row in doc["claims"]:
        assert {"track", "claim", "effect", "unit", "n_needed", "power_at_profile_n"} <= set(row)
        assert 0 <= row["power_at_profile_n"] <= 1


def test_lite_sizes_keep_every_testable_claim_and_name_the_rest():
    rows = [{"track": "memops", "claim": "a", "n_needed": 30}, {"track": "memops", "claim": "b", "n_needed": 75},
            {"track": "memops", "claim": "c", "n_needed": None}, {"track": "restore", "claim": "d", "n_needed": 200},
            {"track": "restore", "claim": "e", "n_needed": 400}]
    rows.append({"track": "restore", "claim": "f", "n_needed": 300, "claimed": False})
    lite, given_up = power_run.lite_sizes(rows, power_run.Sizes(100, 300, 3))
    assert lite == {"memops": 75, "restore": 200}
    # e needs more than the profile has; f the paper itself leaves unresolved
    assert given_up == ["memops: c", "restore: e", "restore: f"]
    prof = power_run.lite_profile(lite, power_run.Sizes(100, 300, 3))
    assert prof["extends"] == "paper"
    assert prof["notebooks"]["10_memops_build"] == {"n_topics": 75, "max_conversations": 303}
    assert prof["notebooks"]["20_longmem_data"] == {"n_questions": 200}
    # a size the base already has is not restated
    assert power_run.lite_profile({"memops": 100, "restore": 300}, power_run.Sizes(100, 470, 3))["notebooks"] == {
        "20_longmem_data": {"n_questions": 300}}


def test_the_committed_lite_profile_is_the_committed_power_tables():
    doc = json.loads((ROOT / power_run.PAPER_TABLE).read_text())
    lite = yaml.safe_load((ROOT / "configs" / "paper-lite.yaml").read_text())
    expected = power_run.lite_profile(doc["lite_sizes"], power_run.profile_sizes("paper"))
    assert lite["extends"] == expected["extends"]
    for nb, params in expected["notebooks"].items():
        assert {k: lite["notebooks"][nb][k] for k in params} == params, nb
    assert doc["profile"] == "paper" and doc["reps"] >= 200


def test_with_no_effect_a_claim_is_shown_about_as_often_as_the_tests_level_allows():
    """The known answer of a power simulation: at a null, "power" is the test's false-positive rate."""
    import dataclasses

    model = memops_power.paper_model()
    null = dataclasses.replace(model, rates={k: (model.rates[("bm25_turn", *k[1:])] if k[0] == "bm25_session" else v)
                                             for k, v in model.rates.items()})
    claims = memops_power.claims(null)
    assert next(c for c in claims if c.key == "session - turn retrieval: accuracy").effect == 0
    shown = [memops_power.run(null, claims, 30, rep, seed=1, n_boot=500)["session - turn retrieval: accuracy"]
             for rep in range(15)]
    assert sum(shown) <= 2  # Holm at 0.05 over nine: expected well under one of 15
    r = restore_power.paper_model()
    same = dataclasses.replace(r, residual={k: r.residual[restore_power.PRIMARY] for k in r.residual})
    rclaims = restore_power.claims(same)
    shown = [restore_power.run(same, rclaims, 100, rep, seed=1, n_boot=500)["R4 residual depends on the reader"]
             for rep in range(20)]
    assert sum(shown) <= 4  # 5% of 20 is 1; more than four happens with probability 0.003
