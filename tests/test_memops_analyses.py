"""memlife.memops.analyses.paper_analyses and memops.analyses.figures on hand-made records whose numbers are worked out
by hand: the tables notebook 13 saves, and the figures notebooks 11 and 13 save."""
import math

import matplotlib.pyplot as plt
import pandas as pd
import pytest

from memlife import paper_reference
from memlife.memops.analyses import figures, paper_analyses


def _records():
    """Two conversations of two topics, two systems. bm25_turn: adjacent right on both
    conversations' probes, long-context right on one of two; mem0 only adjacent."""
    rows = []
    for iid, op, probe, adj, lc in (("c1", "update", "StateTrajectory", True, True),
                                    ("c2", "forget", "OperationTrace", True, False)):
        base = dict(reader="smollm2", instance_id=iid, topic_id="T" + iid, op_type=op, probe_type=probe)
        rows.append(dict(system="bm25_turn", setting="adjacent", **base, accuracy=adj))
        rows.append(dict(system="bm25_turn", setting="long_context", **base, accuracy=lc))
        rows.append(dict(system="mem0", setting="adjacent", **base, accuracy=False))
    return pd.DataFrame(rows)


def test_method_labels_name_models_and_reference_subjects_apart():
    rec = _records().head(2)
    assert paper_analyses.method_labels(rec) == ["ours: bm25_turn (Adjacent)", "ours: bm25_turn (Long Context)"]
    assert paper_analyses.method_labels(rec.assign(reader="gold"))[0] == "gold (reference): bm25_turn (Adjacent)"


def test_beside_paper_puts_the_papers_rows_first_in_our_columns():
    paper = pd.DataFrame({"Method": ["GPT-4o (Adjacent)"], "Accuracy": [0.85], "Operation F1": [0.798]})
    ours = pd.DataFrame({"Method": ["ours: x"], "Accuracy": [0.5], "Malformed": [0.1]})
    t = paper_analyses.beside_paper(paper, ours)
    assert list(t.columns) == ["source", "Method", "Accuracy", "Malformed"]
    assert t["source"].tolist() == ["paper", "ours"] and math.isnan(t.loc[0, "Malformed"])
    assert "source" not in ours.columns and "source" not in paper.columns  # inputs left alone


def test_setting_deltas_only_for_systems_in_both_settings():
    d = paper_analyses.setting_deltas(_records(), "op_type")
    assert d.to_dict("records") == [{"system": "bm25_turn", "op_type": "forget", "delta": -1.0},
                                    {"system": "bm25_turn", "op_type": "update", "delta": 0.0}]
    only_adjacent = _records().query("setting == 'adjacent'")
    assert paper_analyses.setting_deltas(only_adjacent, "op_type").empty


def test_paper_setting_deltas_from_the_published_table():
    d = paper_analyses.paper_setting_deltas(paper_reference.memops_table(5), list(paper_analyses.PROBE_NAMES.values()))
    assert d["system"].nunique() == 7  # the models the paper ran in both settings
    gpt4o = d[(d["system"] == "paper: GPT-4o") & (d["category"] == "State Trajectory")]["delta"].item()
    assert gpt4o == pytest.approx(0.390 - 0.866)


def test_adjacent_to_long_delta_table():
    t = paper_analyses.adjacent_to_long_delta(_records(), paper_reference.memops_table(4), paper_reference.memops_table(5))
    assert list(t.columns) == ["axis", "system", "category", "delta"]
    ours = t[t["system"] == "ours: bm25_turn"]
    assert dict(zip(ours["axis"] + "/" + ours["category"], ours["delta"])) == {
        "operation/Forget": -1.0, "operation/Update": 0.0, "probe/Operation Trace": -1.0, "probe/State Trajectory": 0.0}
    assert t["axis"].tolist() == sorted(t["axis"], key=["operation", "probe"].index)  # operation rows first
    assert len(t) == 7 * 5 + 2 + 7 * 6 + 2


def test_setting_comparison_intervals_and_contrasts():
    intervals, contrasts = paper_analyses.setting_comparison(_records(), n_boot=200, seed=0)
    iv = intervals.set_index(["system", "setting"])
    assert iv.loc[("bm25_turn", "adjacent"), "accuracy"] == 1.0
    assert iv.loc[("bm25_turn", "long_context"), "accuracy"] == 0.5
    assert iv.loc[("bm25_turn", "long_context"), ["probes", "topics"]].tolist() == [2, 2]
    # two topics: exact intervals, never the zero-width [1, 1] a two-topic bootstrap gives
    assert (intervals["interval"] == "clopper-pearson").all()
    assert iv.loc[("bm25_turn", "adjacent"), "low"] == pytest.approx(0.025 ** 0.5)  # 2 of 2: (alpha/2)^(1/n)
    assert (intervals["low"] <= intervals["accuracy"]).all() and (intervals["accuracy"] <= intervals["high"]).all()
    # mem0 ran in one setting only: no contrast
    assert contrasts["system"].tolist() == ["bm25_turn"]
    c = contrasts.iloc[0]
    assert c["long_minus_adjacent"] == -0.5
    # two topics: a sign-flip test, whose smallest p-value is 2 / 2^2, and no bootstrap interval
    assert c["test"] == "sign-flip over topics" and c["topics"] == 2 and c["p_value"] >= 0.5
    assert math.isnan(c["low"]) and math.isnan(c["high"])
    assert "p_holm" not in contrasts  # descriptive: the Holm family is headline_tests
    again = paper_analyses.setting_comparison(_records(), n_boot=200, seed=0)
    pd.testing.assert_frame_equal(again[1], contrasts)  # seeded


def test_no_system_in_both_settings_gives_no_contrasts():
    _, contrasts = paper_analyses.setting_comparison(_records().query("setting == 'adjacent'"), n_boot=50, seed=0)
    assert contrasts.empty


def _grid(n_topics=24, seed=0):
    """Every system and setting the paper's comparisons need, over `n_topics` topics with one
    conversation per operation type: long context loses on trajectory only, and session-level
    retrieval beats turn-level on trajectory only."""
    import numpy as np

    rng = np.random.default_rng(seed)
    rows = []
    for t in range(n_topics):
        for op in ("remember", "forget", "update", "reflect", "trajectory"):
            for system, setting in (("long_context", "adjacent"), ("long_context", "long_context"),
                                    ("bm25_turn", "long_context"), ("bm25_session", "long_context")):
                p = 0.8
                if op == "trajectory" and (setting, system) in (("long_context", "long_context"),
                                                                ("long_context", "bm25_turn")):
                    p = 0.1
                right = bool(rng.random() < p)
                rows.append(dict(system=system, setting=setting, reader="smollm2", instance_id=f"T{t}-{op}",
                                 topic_id=f"T{t}", op_type=op, probe_type="StateTrajectory",
                                 accuracy=right, operation=right))
    return pd.DataFrame(rows)


def test_headline_family_is_what_the_configured_systems_allow():
    names = [h["name"] for h in paper_analyses.headline_family(_grid(3))]
    assert names == ["session - turn retrieval: accuracy", "session - turn retrieval: operation",
                     "trajectory - single-step: session - turn", "trajectory - single-step: long - adjacent",
                     "long - adjacent: Remember", "long - adjacent: Forget", "long - adjacent: Update",
                     "long - adjacent: Reflect", "long - adjacent: TrajectoryOps"]
    no_rag = _grid(3).query("system == 'long_context'")
    assert [h["name"] for h in paper_analyses.headline_family(no_rag)][0] == "trajectory - single-step: long - adjacent"
    assert paper_analyses.headline_family(_records().query("system == 'mem0'")) == []
    assert paper_analyses.headline_tests(_records().query("system == 'mem0'"), n_boot=50, seed=0).empty


def test_headline_tests_are_one_holm_family():
    t = paper_analyses.headline_tests(_grid(24), n_boot=1000, seed=0).set_index("hypothesis")
    assert (t["family_size"] == 9).all() and (t["test"] == "topic bootstrap").all()
    assert (t["p_holm"] >= t["p_value"] - 1e-12).all()
    # the planted effects: trajectory loses under long context and gains from session-level retrieval
    dd = t.loc["trajectory - single-step: long - adjacent"]
    assert dd["estimate"] < -0.4 and dd["reject"]
    assert t.loc["trajectory - single-step: session - turn", "reject"]
    assert t.loc["long - adjacent: TrajectoryOps", "reject"]
    assert not t.loc["long - adjacent: Remember", "reject"]
    # by hand: the difference of differences is the four cell means combined
    g = _grid(24)
    m = g.groupby(["system", "setting", g["op_type"] == "trajectory"])["accuracy"].mean()
    want = (m[("long_context", "long_context", True)] - m[("long_context", "adjacent", True)]
            - m[("long_context", "long_context", False)] + m[("long_context", "adjacent", False)])
    assert dd["estimate"] == pytest.approx(want)
    # four topics: every test is a sign-flip over topics, and none can reach p < 2 / 2^4
    few = paper_analyses.headline_tests(_grid(4), n_boot=200, seed=0)
    assert (few["test"] == "sign-flip over topics").all() and (few["p_value"] >= 2 / 16 - 1e-12).all()
    assert few["low"].isna().all() and few["high"].isna().all()
    assert (t["low"] <= t["estimate"]).all() and (t["estimate"] <= t["high"]).all()


def test_label_intervals_say_n_and_method_per_cell():
    rec = _grid(24).assign(Method=lambda d: d["system"] + " " + d["setting"])
    iv = paper_analyses.label_intervals(rec, ["Method"], n_boot=200, seed=0, labels=("accuracy",))
    assert (iv["n"] == 120).all() and (iv["topics"] == 24).all() and (iv["interval"] == "bootstrap").all()
    small = paper_analyses.label_intervals(_records(), ["system", "setting"], n_boot=50, seed=0, labels=("accuracy",))
    assert (small["interval"] == "clopper-pearson").all() and small["n"].tolist() == [2, 2, 2]


def test_figures_return_figures():
    rec = _records()
    deltas = paper_analyses.adjacent_to_long_delta(rec, paper_reference.memops_table(4), paper_reference.memops_table(5))
    fig = figures.adjacent_to_long_delta(deltas, seed=0)
    assert len(fig.axes) == 2 and fig.axes[0].get_ylabel() == "Δ accuracy"
    cats = pd.DataFrame({"category": ["Plans & Events", "Personal Profile"], "subtopic": ["a", "b"], "topics": [1, 1]})
    lengths = pd.DataFrame({"adjacent_tokens": [100, 200], "long_context_tokens": [3000, 3100]})
    fig4 = figures.topics_and_lengths(cats, lengths)
    assert "paper 2,557" in fig4.axes[1].get_title() and "paper 60,821" in fig4.axes[2].get_title()
    comp = {"operations": pd.DataFrame({"op_type": ["remember"], "conversations": [1]}),
            "probes": pd.DataFrame({"probe_type": ["OperationTrace"], "probes": [1]}),
            "distractors": pd.DataFrame({"tag": ["context_level", "third_party"], "probes": [2, 1],
                                         "in_figure_5c": [True, False]})}
    fig5 = figures.composition(comp)
    assert [ax.get_title() for ax in fig5.axes] == ["(a) operation types", "(b) probe types",
                                                    "(c) distractors and controls"]
    assert [t.get_text() for t in fig5.axes[2].get_legend().get_texts()] == ["in the paper's 5(c)",
                                                                             "also named in Section 3.3"]
    plt.close("all")
