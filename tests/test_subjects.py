"""Reference subjects: names and labels, the seeded draw, planted rates and their coverage, and the
MemOps subjects through the model-free memory systems (docs/design.md, "Reference subjects")."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from memlife import subjects as ref
from memlife.memops.systems import answering, baselines, reading
from memlife.memops.scoring import labels
from memlife.memops.scoring import metrics
from memlife.memops.analyses import controls
from memlife.memops.systems import subjects as msub
from memlife.memops.build import BuildParams, load_or_build

LIB = str(Path(__file__).resolve().parents[1] / "lib")


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """Two topics (10 conversations, ~50 probes) with 12k-token long contexts: an 8k window truncates them."""
    params = BuildParams(profile="smoke", seed=0, n_topics=2, max_conversations=None, longctx_tokens=12000,
                         realizer="template", verifier="off")
    return load_or_build(params, tmp_path_factory.mktemp("memops"), progress=False)


# ----------------------------------------------------------------------------- names and draws


def test_names_labels_and_row_names():
    for name in ref.SUBJECTS:
        assert ref.is_reference(name) and ref.is_reference(ref.label(name))
        assert ref.label(name) == f"{name} (reference)" and ref.label(ref.label(name)) == ref.label(name)
    for model in ("gpt-4o-mini", "smollm2-135m-instruct", "", None, "gold-model", "oracle"):
        assert not ref.is_reference(model)
    assert ref.label("gpt-4o-mini") == "gpt-4o-mini"
    assert ref.row_name("bm25_turn (Adjacent)", "gold") == "gold (reference): bm25_turn (Adjacent)"
    assert ref.row_name("bm25_turn (Adjacent)", "gpt-4o-mini") == "ours: bm25_turn (Adjacent)"
    with pytest.raises(ValueError, match="unknown reference subject"):
        ref.canonical("oracle")


def test_seeded_draw_is_pinned_and_independent_of_the_interpreter():
    # Pinned values: a change to the hashing or the mixing changes every planted error in every run.
    assert ref.draw(0, "T000-remember", "T000-remember-p1", "bm25_turn", "adjacent") == 0.4423456135396918
    assert ref.draw(7, "x") == 0.040577175708466084
    assert ref.key_hash("miss", "a") == 14874733213987713825
    code = "from memlife import subjects as s; print(repr(s.draw(3, 'probe', 'bm25_turn', 'adjacent')))"
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONPATH": LIB, "PYTHONHASHSEED": h}).stdout for h in ("0", "1", "random")}
    assert len(outs) == 1 and float(outs.pop()) == ref.draw(3, "probe", "bm25_turn", "adjacent")


def test_vectorised_draws_equal_the_scalar_draw_and_look_uniform():
    keys = [("p", i) for i in range(20_000)]
    hashes = np.array([ref.key_hash(*k) for k in keys], dtype=np.uint64)
    u = ref.uniforms(np.array([[5], [6]]), hashes)
    assert u.shape == (2, 20_000)
    assert [ref.draw(5, *k) for k in keys[:50]] == list(u[0, :50])
    assert 0 <= u.min() and u.max() < 1
    assert abs(u.mean() - 0.5) < 0.01 and abs(np.mean(u < 0.1) - 0.1) < 0.01
    assert abs(np.corrcoef(u[0], u[1])[0, 1]) < 0.03  # another seed is another draw


def test_miss_rate_grows_with_context_and_is_capped():
    n = ref.Noise(miss_base=0.05, miss_slope_per_1k=0.01, miss_cap=0.3, confusion=0.1)
    assert n.miss_rate(0) == pytest.approx(0.05)
    assert n.miss_rate(10_000) == pytest.approx(0.15)
    assert n.miss_rate(100_000) == pytest.approx(0.3)
    assert list(n.miss_rate(np.array([0, 10_000]))) == pytest.approx([0.05, 0.15])
    with pytest.raises(ValueError):
        ref.Noise(confusion=1.5)


def test_planted_rates_are_reproduced_and_deterministic_per_seed():
    noise = ref.Noise(miss_base=0.05, miss_slope_per_1k=0.01, miss_cap=0.5, confusion=0.2)
    n = 40_000
    keys = [("inst", f"p{i}", "bm25_turn", "adjacent") for i in range(n)]
    mh = np.array([ref.key_hash("miss", *k) for k in keys], dtype=np.uint64)
    ch = np.array([ref.key_hash("confuse", *k) for k in keys], dtype=np.uint64)
    ctx = np.where(np.arange(n) % 2 == 0, 2_000, 30_000)  # p = 0.07 and 0.35
    conf = np.arange(n) % 3 != 0
    out = ref.outcomes(noise, [11], mh, ch, ctx, conf)[0]
    for tokens, p in ((2_000, 0.07), (30_000, 0.35)):
        sel = ctx == tokens
        miss = np.mean(out[sel] == ref.MISS)
        assert abs(miss - p) < 4 * np.sqrt(p * (1 - p) / sel.sum()), (tokens, miss, p)
    eligible = conf & (out != ref.MISS)
    rate = np.mean(out[eligible] == ref.CONFUSE)
    assert abs(rate - 0.2) < 4 * np.sqrt(0.2 * 0.8 / eligible.sum())
    assert not np.any(out[~conf] == ref.CONFUSE)  # no distractor listed, no confusion
    again = ref.outcomes(noise, [11], mh, ch, ctx, conf)[0]
    other = ref.outcomes(noise, [12], mh, ch, ctx, conf)[0]
    assert (again == out).all() and (other != out).mean() > 0.1
    # the scalar path the subject takes draws the same
    assert [ref.outcome(noise, 11, k, c, f) for k, c, f in zip(keys[:200], ctx[:200], conf[:200])] == list(out[:200])


def test_clustered_intervals_cover_a_true_rate_at_the_nominal_rate_and_not_a_wrong_one():
    rng = np.random.default_rng(0)
    clusters = np.repeat(np.arange(200), 5)
    hits = rng.random((300, clusters.size)) < 0.1
    eligible = np.ones_like(hits)
    covered = ref.interval_coverage(hits, eligible, clusters, 0.1, n_boot=1000, seed=1)
    assert 0.91 <= covered.mean() <= 0.98
    assert ref.interval_coverage(hits, eligible, clusters, 0.13, n_boot=1000, seed=1).mean() < 0.2
    # a per-row planted rate, and a row with nothing eligible counts as not covered
    e2 = eligible.copy()
    e2[0] = False
    assert not ref.interval_coverage(hits, e2, clusters, np.full(300, 0.1), n_boot=200, seed=1)[0]


# ----------------------------------------------------------------------------- MemOps replies


def _probe(dataset, want=lambda p: True):
    return next((i, p) for i in dataset for p in i.probes if want(p))


def test_evidence_oracle_answers_exactly_when_every_evidence_turn_is_in_the_context(dataset):
    inst, probe = _probe(dataset, lambda p: p.reasoning_chain is not None)
    turns = msub.evidence_turns(inst, probe)
    cited = {(s.segment, s.turn) for s in probe.provenance} | {(s.segment, s.turn) for s in probe.reasoning_chain.source_facts}
    assert len(turns) == len({inst.segments[s][t].text for s, t in cited})
    lines = reading.format_turns(reading.history_for(inst, "adjacent").turns())
    full = "\n".join(lines)
    r = msub.reply("evidence-oracle", inst, probe, full, 1000, system="long_context", setting="adjacent")
    assert r.available and r.outcome == ref.ANSWER and metrics.score(r.parsed, inst, probe).perfect
    for dropped in turns:  # remove any one evidence turn (provenance or source fact): abstain
        partial = "\n".join(line for line in lines if not line.endswith(dropped))
        r = msub.reply("evidence-oracle", inst, probe, partial, 1000, system="long_context", setting="adjacent")
        assert not r.available and r.outcome == msub.ABSTAIN
        labels = metrics.score(r.parsed, inst, probe)
        assert not labels.malformed and not labels.accuracy and labels.op_f1 == 0 and not labels.provenance
        assert labels.leakage is not True and labels.stale is not True
        assert msub.any_evidence(inst, probe, partial) == (len(turns) > 1)
        # gold does not look at the context
        g = msub.reply("gold", inst, probe, partial, 1000, system="long_context", setting="adjacent")
        assert metrics.score(g.parsed, inst, probe).perfect


def test_subject_reader_sees_what_the_window_fit_keeps(dataset):
    inst, probe = _probe(dataset)
    history = reading.history_for(inst, "long_context")
    lc = baselines.LongContextSystem(msub.SubjectReader(None, subject="evidence-oracle", context_window=200_000))
    with pytest.raises(RuntimeError, match="bind"):
        lc.answer(history, probe.question)
    lc.reader.bind(inst, probe, "long_context", "long_context")
    ans = lc.answer(history, probe.question)
    assert ans.truncated_tokens == 0 and metrics.score(ans.parsed, inst, probe).perfect
    assert lc.reader.model == "evidence-oracle (reference)"
    # the embedded reader's 8k window drops the front of a 12k-token history: the first segment's
    # evidence goes with it, and the oracle abstains exactly because of that
    small = baselines.LongContextSystem(msub.SubjectReader(None, subject="evidence-oracle"))
    small.reader.bind(inst, probe, "long_context", "long_context")
    ans = small.answer(history, probe.question)
    context, dropped = reading.Reader(None).context(reading.format_turns(history.turns()), probe.question)
    assert ans.truncated_tokens == dropped > 0 and small.reader.last.context == context
    assert small.reader.last_reply.available == msub.evidence_available(inst, probe, context)
    assert not small.reader.last_reply.available and ans.parsed.response.answer == msub.ABSTENTION_ANSWER


def test_noisy_oracle_confusion_asserts_a_forbidden_value_and_is_scored_wrong(dataset):
    inst, probe = _probe(dataset, msub.confusable)
    r = msub.confused_reply(inst, probe, 0, ("k",))
    assert r.response.answer in probe.answer_key.forbidden
    labels = metrics.score(r, inst, probe)
    assert not labels.accuracy and not labels.malformed and labels.op_f1 == 1.0 and labels.provenance
    always = ref.Noise(miss_base=0.0, miss_slope_per_1k=0.0, confusion=1.0)
    got = msub.reply("noisy-oracle", inst, probe, "\n".join(msub.evidence_turns(inst, probe)), 10,
                     system="bm25_turn", setting="adjacent", noise=always)
    assert got.outcome == ref.CONFUSE
    never = ref.Noise(miss_base=1.0, miss_cap=1.0, confusion=0.0)
    got = msub.reply("noisy-oracle", inst, probe, "\n".join(msub.evidence_turns(inst, probe)), 10,
                     system="bm25_turn", setting="adjacent", noise=never)
    assert got.outcome == ref.MISS and got.parsed.response.answer == msub.ABSTENTION_ANSWER


# ----------------------------------------------------------------------------- through the systems


def test_gold_is_perfect_and_the_oracles_behave_through_every_model_free_system(dataset, tmp_path):
    cfg = controls.ControlsConfig(systems=["long_context", "bm25_turn", "bm25_session"],
                                  reader_windows=[8192, 128_000])
    rec = controls.run(dataset, cfg, tmp_path, progress=False)
    n_probes = sum(len(i.probes) for i in dataset)
    assert len(rec) == 3 * 2 * 2 * 3 * n_probes
    gold = rec[rec.subject == "gold (reference)"]
    assert gold["perfect"].all() and not gold["malformed"].any()
    oracle = rec[rec.subject == "evidence-oracle (reference)"]
    assert (oracle["perfect"] == oracle["available"]).all()
    assert not oracle.loc[~oracle.available, "accuracy"].any() and not oracle["malformed"].any()
    # the long-context system hands everything over when the window holds the history, nothing
    # of the first segment when it does not; BM25 hands over part of it
    lc = rec[(rec.subject == "gold (reference)") & (rec.system == "long_context")]
    assert lc[lc.reader_window == 128_000]["available"].all()
    assert lc[(lc.setting == "adjacent")]["available"].all()
    assert not lc[(lc.reader_window == 8192) & (lc.setting == "long_context")]["available"].all()
    assert 0 < gold[gold.system == "bm25_turn"]["available"].mean() < 1
    noisy = rec[rec.subject == "noisy-oracle (reference)"]
    assert set(noisy.loc[~noisy.available, "outcome"]) == {msub.ABSTAIN}
    assert noisy.loc[noisy.outcome == ref.ANSWER, "perfect"].all()
    assert not noisy.loc[noisy.outcome.isin([ref.MISS, ref.CONFUSE]), "accuracy"].any()
    # the recorded noisy outcomes are the simulation's at the run's seed
    items, sim = controls.simulated_outcomes(rec, cfg.noise, [cfg.seed])
    assert list(items["outcome"]) == list(sim[0])
    table = controls.availability(rec, ["system", "setting", "reader_window"], n_boot=200, seed=0)
    assert (table["low"] <= table["available"] + 1e-12).all() and (table["available"] <= table["high"] + 1e-12).all()
    assert (table["available"] <= table["any_evidence"]).all()


@pytest.mark.slow
def test_gold_is_perfect_through_mem0_raw_memories(dataset, tmp_path):
    cfg = controls.ControlsConfig(systems=["mem0"], settings=["adjacent"], mem0_max_instances=2)
    rec = controls.run(dataset, cfg, tmp_path, progress=False)
    assert len(rec) == 3 * sum(len(i.probes) for i in answering.select_instances(dataset, 2))
    assert rec.loc[rec.subject == "gold (reference)", "perfect"].all()
    assert set(rec["variant"]) == {"raw (infer=False)"}
    oracle = rec[rec.subject == "evidence-oracle (reference)"]
    assert (oracle["perfect"] == oracle["available"]).all()
    # top_k = 10 at most: Mem0's search leaves out hits under its similarity threshold (0.1)
    assert oracle["n_retrieved"].between(1, 10).all() and oracle["n_retrieved"].eq(10).mean() > 0.5


def test_evaluate_runs_a_subject_in_the_readers_place(dataset, tmp_path):
    inst = dataset[:2]
    cfg = answering.EvalConfig(systems=["long_context", "bm25_session"], settings=["adjacent"], judge=False,
                              subject="gold")
    rec = labels.run(answering.run(inst, cfg, tmp_path, reader_client=None, progress=False), inst, cfg, tmp_path,
                     progress=False)
    assert len(rec) == 2 * sum(len(i.probes) for i in inst)
    assert set(rec["reader"]) == {"gold (reference)"} and (rec["accuracy"] == True).all()  # noqa: E712
    key = answering.run_key(cfg, "gold (reference)")
    assert key != answering.run_key(answering.EvalConfig(subject="evidence-oracle"), "gold (reference)")
    model_key = answering.run_key(answering.EvalConfig(), "m")
    assert model_key == answering.run_key(answering.EvalConfig(subject=""), "m")
    with pytest.raises(ValueError, match="model-free"):
        answering.run(inst, answering.EvalConfig(systems=["memos"], settings=["adjacent"], subject="gold", judge=False),
                     tmp_path, reader_client=None, progress=False)


def test_load_or_build_reuses_a_matching_dataset_and_rebuilds_a_changed_one(tmp_path):
    params = BuildParams(profile="smoke", seed=0, n_topics=1, max_conversations=2, longctx_tokens=2000,
                         realizer="template", verifier="off")
    first = load_or_build(params, tmp_path, progress=False)
    stamp = (tmp_path / "instances.jsonl").stat().st_mtime_ns
    assert [i.instance_id for i in load_or_build(params, tmp_path, progress=False)] == [i.instance_id for i in first]
    assert (tmp_path / "instances.jsonl").stat().st_mtime_ns == stamp
    (tmp_path / "instances.jsonl").write_text((tmp_path / "instances.jsonl").read_text()[:-10])
    assert len(load_or_build(params, tmp_path, progress=False)) == len(first)  # damaged: rebuilt
    bigger = load_or_build(BuildParams(**{**params.__dict__, "max_conversations": 3}), tmp_path, progress=False)
    assert len(bigger) == 3
