"""The stage 1-3 planner: the paper profile's scale and proportions, and determinism."""
from __future__ import annotations

import hashlib
from collections import Counter

import pytest

from memlife.memops.data import backgrounds, plan, realize
from memlife.memops.data.schema import PROBE_TYPES, dumps, key_value
from memlife.paper_reference import MEMOPS_CATEGORY_COUNTS


@pytest.fixture(scope="module")
def paper_plan():
    return plan.plan(plan.PlanParams(n_topics=100, seed=0, max_conversations=403))


def test_category_counts_match_the_paper_at_100_and_scale_down():
    assert backgrounds.category_counts(100) == MEMOPS_CATEGORY_COUNTS
    small = backgrounds.category_counts(10)
    assert sum(small.values()) == 10
    # Largest categories keep the largest shares when scaled down.
    assert small["Plans & Events"] >= small["Corrections & Errors"]
    assert backgrounds.category_counts(2) == {"Plans & Events": 1, "Personal Profile": 1, "Social Contacts": 0,
                                    "Preferences & Devices": 0, "Temporary Status": 0,
                                    "Corrections & Errors": 0}


def test_paper_plan_scale(paper_plan):
    topics = {cp.topic.background.topic_id for cp in paper_plan}
    assert len(topics) == 100
    assert len(paper_plan) == 403
    n_probes = sum(len(cp.probes) for cp in paper_plan)
    assert 1900 <= n_probes <= 2100  # paper: 2,006
    by_topic = Counter(cp.topic.kit.category for cp in {cp.topic.index: cp for cp in paper_plan}.values())
    assert dict(by_topic) == MEMOPS_CATEGORY_COUNTS
    assert len({cp.topic.kit.subtopic for cp in paper_plan}) == 100  # one kit per topic, none resampled


def test_paper_plan_proportions(paper_plan):
    ops = Counter(cp.op_type for cp in paper_plan)
    assert set(ops) == {"remember", "forget", "update", "reflect", "trajectory"}
    assert max(ops.values()) - min(ops.values()) <= 1  # comparable proportions
    probes = [p for cp in paper_plan for p in cp.probes]
    types = Counter(p.probe_type for p in probes)
    assert set(types) == set(PROBE_TYPES)
    assert all(c >= 0.05 * len(probes) for c in types.values())
    multi = sum(p.multi_hop for p in probes) / len(probes)
    assert 0.17 <= multi <= 0.23  # paper: 20.1%
    traj = [cp for cp in paper_plan if cp.op_type == "trajectory"]
    assert sum(len(cp.ops) for cp in traj) / len(traj) == pytest.approx(4.0, abs=0.1)
    # StateTrajectory only ever on trajectory conversations.
    assert all(cp.op_type == "trajectory" for cp in paper_plan for p in cp.probes if p.probe_type == "StateTrajectory")
    # Every forget conversation carries a retained control and a probe stressed by it.
    for cp in paper_plan:
        if cp.op_type == "forget":
            assert any(d[0] == "retained_control" for p in cp.probes for d in p.distractors)


def test_required_answers_and_forbidden_values_disjoint(paper_plan):
    for cp in paper_plan:
        for p in cp.probes:
            assert p.required, p.probe_id
            assert not set(p.required) & set(p.forbidden), p.probe_id


def _digest(seed: int, n_topics: int = 6) -> str:
    cps = plan.plan(plan.PlanParams(n_topics=n_topics, seed=seed))
    lines = "".join(dumps(realize.template_instance(cp)) + "\n" for cp in cps)
    return hashlib.sha256(lines.encode()).hexdigest()


def test_same_seed_is_byte_identical_and_another_seed_differs():
    assert _digest(0) == _digest(0)
    assert _digest(0) != _digest(1)


def test_different_seeds_draw_different_values():
    a = backgrounds.plan_topics(20, 0)
    b = backgrounds.plan_topics(20, 1)
    assert [t.main_values for t in a] != [t.main_values for t in b]


def test_events_never_share_a_user_turn():
    bad = [plan.Event("e0", 0, 1, "state", "x", "x", value="1"), plan.Event("e1", 0, 1, "state", "y", "y", value="2")]
    with pytest.raises(ValueError, match="share a turn"):
        plan._check_slots("T-bad", bad)


def test_select_pairs_keeps_everything_without_a_cap():
    topics = backgrounds.plan_topics(3, 0)
    assert len(plan.select_pairs(topics, None, 0)) == 15
    capped = plan.select_pairs(topics, 11, 0)
    assert len(capped) == 11
    assert max(Counter(op for _, op in capped).values()) - min(Counter(op for _, op in capped).values()) <= 1


@pytest.mark.parametrize("text, person, want", [
    ("The user works mostly remotely, with one office day a week.", "you",
     "You work mostly remotely, with one office day a week."),
    ("the user never goes to the office", "I", "I never go to the office"),
    ("the user is allergic to caffeine", "you", "you are allergic to caffeine"),
    ("The user's sleep is disrupted on weekdays.", "you", "Your sleep is disrupted on weekdays."),
    ("the user dislikes their team", "I", "I dislike my team"),
    ("Lena values experiences more than physical gifts.", "you", "Lena values experiences more than physical gifts."),
])
def test_as_person_rewrites_claims_about_the_user(text, person, want):
    assert plan.as_person(text, person) == want


def test_reflect_probes_forbid_unsupported_claims_in_both_wordings(paper_plan):
    cp = next(c for c in paper_plan if c.op_type == "reflect")
    for p in cp.probes:
        for u in cp.topic.reflect.unsupported:
            assert key_value(u) in p.forbidden
            assert key_value(plan.as_person(u, "you")) in p.forbidden


@pytest.mark.parametrize("text, want", [("a MacBook Air M3", "macbook air m3"), ("my brother Karim", "brother karim"),
                                        ("The Visa ending 4821", "visa ending 4821"), ("#A-558190", "a 558190"),
                                        ("Another Day", "another day")])
def test_key_value_drops_only_a_leading_determiner(text, want):
    assert key_value(text) == want


def test_only_an_echo_is_said_by_the_assistant():
    with pytest.raises(ValueError, match="said by"):
        plan._check_slots("T-bad", [plan.Event("e0", 0, 1, "state", "x", "x", value="1", speaker="assistant")])
    echo = plan.Event("e1", 0, 1, "echo_placeholder", "x", "x", value="2", speaker="assistant")
    plan._check_slots("T-ok", [plan.Event("e0", 0, 1, "state", "x", "x", value="1"), echo])  # same exchange, other turn
    assert echo.turn == 3


def test_every_dialogue_distractor_is_planned_as_something_said(paper_plan):
    """A probe's candidate value is planned as an event's value or voiced claim, so the realizer says it."""
    for cp in paper_plan:
        said = {key_value(x) for e in cp.events for x in (e.value, e.old_value, e.clue) if x}
        for p in cp.probes:
            for tag, value, _ in p.distractors:
                parts = value.split(" -> ") if tag == "update_chain" else [value]
                for part in parts:
                    assert key_value(part) in said, (p.probe_id, tag, part)


def test_the_paper_plan_tags_every_distractor_kind(paper_plan):
    from memlife.memops.data.schema import DISTRACTOR_TAGS

    tags = Counter(t for cp in paper_plan for p in cp.probes for t in {d[0] for d in p.distractors})
    assert set(tags) == set(DISTRACTOR_TAGS) - {"context_level"}  # context-level ones come with stage 4


def test_a_topics_conversations_open_differently():
    cps = plan.plan(plan.PlanParams(n_topics=6, seed=0))
    by_topic = {}
    for cp in cps:
        by_topic.setdefault(cp.topic.index, []).append(realize.kit_opener(cp))
    for lines in by_topic.values():
        assert len(set(lines)) == len(lines) == 5
