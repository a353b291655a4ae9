"""The whole offline build at the smoke profile: determinism, manifest, re-validation."""
from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path

from memlife.memops.build import build, params_for, validate_file


def test_build_is_byte_identical_for_a_seed_and_differs_for_another(tmp_path):
    params = params_for("smoke")
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    ra = build(params, a, progress=False)
    build(params, b, progress=False)
    build(replace(params, seed=params.seed + 1), c, progress=False)
    for name in ("instances.jsonl", "manifest.json", "gate_log.json"):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    assert (a / "instances.jsonl").read_bytes() != (c / "instances.jsonl").read_bytes()
    manifest = json.loads((a / "manifest.json").read_text())
    assert manifest["sha256"] == hashlib.sha256((a / "instances.jsonl").read_bytes()).hexdigest()
    assert manifest["instances"] == 5 * params.n_topics == len(ra.instances)
    assert manifest["realizer"] == "template"
    assert validate_file(a / "instances.jsonl") == []
    lines = (a / "instances.jsonl").read_text().splitlines()
    ids = [json.loads(x)["instance_id"] for x in lines]
    assert len(set(ids)) == len(ids)
    topics = [i.split("-")[0] for i in ids]
    assert topics == sorted(topics)  # plan order: topic by topic


def test_validate_reports_a_line_that_is_not_json(tmp_path):
    f = tmp_path / "bad.jsonl"
    f.write_text("{not json\n")
    [(where, reasons)] = validate_file(f)
    assert where == f"{f}:1" and "not valid JSON" in reasons[0]


def test_every_profile_sets_a_retention_floor_that_is_a_fraction():
    from memlife.base import config

    for profile in ("smoke", "quick", "paper"):
        floor = config.notebook_params(profile, "10_memops_build")["min_retention"]
        assert 0 < floor <= 1, (profile, floor)


def test_the_paper_profile_builds_offline_at_the_papers_breadth(tmp_path):
    """The issue's must-show, on the real paper parameters (60k-token histories included)."""
    from collections import Counter

    from memlife.memops.data import describe
    from memlife.memops.scoring import metrics
    from memlife.memops.data.schema import DISTRACTOR_TAGS, load_instances

    params = replace(params_for("paper"), realizer="template", verifier="off")
    result = build(params, tmp_path / "a", progress=False)
    again = build(params, None, progress=False)
    assert again.manifest["sha256"] == result.manifest["sha256"]  # stable across two builds of one seed
    insts = load_instances(tmp_path / "a" / "instances.jsonl")
    assert len(insts) == result.manifest["planned_conversations"] == 403  # the template realizer drops nothing
    assert len({i.subtopic for i in insts}) == len({i.topic_id for i in insts}) == 100
    probes = [p for i in insts for p in i.probes]
    assert abs(len(probes) - 2006) <= 0.02 * 2006
    tags = Counter(d.tag for p in probes for d in p.distractors)
    assert set(tags) == set(DISTRACTOR_TAGS)
    assert validate_file(tmp_path / "a" / "instances.jsonl") == []
    assert all(metrics.gold_failures(i, p) == [] for i in insts for p in i.probes)
    assert describe.shared_openings(insts) <= 0.05
    # the long histories' lengths, drawn per conversation around 61k, are the paper's within 10%
    from memlife.paper_reference import MEMOPS_TABLE2

    lengths = [i.long_context.approx_tokens for i in insts]
    for ours, paper in ((sum(lengths) / len(lengths), MEMOPS_TABLE2["Avg. approx. tokens (long-context)"]),
                        (max(lengths), MEMOPS_TABLE2["Max. approx. tokens (long-context)"])):
        assert abs(ours - paper) <= 0.1 * paper, (ours, paper)
    # and the committed Table 2 JSON of the paper profile is this build's
    committed = json.loads((Path(__file__).parents[1] / "results" / "tables" / "table2_memops_paper_profile.json").read_text())
    assert committed["sha256"] == result.manifest["sha256"]
