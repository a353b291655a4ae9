"""Stage 1 of the MemOps pipeline, model-free: the topics and their backgrounds.

Topics are drawn per category in the paper's proportions (`category_counts`, Table 2's counts
scaled); each gets a background sampled from a topic kit (`memlife.memops.data.kits`): the persona's
facts, neighbours and reflections the later stages build on. Seeded per purpose (`seeded_rng`), so
a background is a pure function of (seed, index, kit).
"""
from __future__ import annotations

import random
from dataclasses import dataclass

from memlife.memops.data import kits as K
from memlife.memops.data.schema import (
    CATEGORIES,
    Background,
    Fact,
    Neighbour,
    Reflection,
    Supersession,
)
from memlife.paper_reference import MEMOPS_CATEGORY_COUNTS


def seeded_rng(seed: int, *purpose: object) -> random.Random:
    # A string seed is hashed with SHA-512 by `random`, so this is stable across runs and platforms.
    return random.Random(":".join(str(p) for p in (seed, *purpose)))


# ----------------------------------------------------------------------------- stage 1


@dataclass(frozen=True)
class Topic:
    index: int
    kit: K.Kit
    background: Background
    main_values: tuple[str, ...]  # v1, v2, v3 (update chain), vn (another owner's value)
    temp_value: str
    control_value: str
    other_control_value: str
    owner: str
    reflect: K.ReflectSet
    neighbour_value: str  # the user's own value for the kit's neighbouring target
    claimed_value: str  # what a third party wrongly believes the main value is
    echo_value: str  # a placeholder the assistant proposes and the user never confirms
    claimant: str  # the third party


def category_counts(n_topics: int) -> dict[str, int]:
    """The paper's 22/21/20/16/11/10 split scaled to n_topics (largest remainder, ties by order)."""
    if n_topics < 1:
        raise ValueError(f"n_topics must be >= 1, got {n_topics}")
    total = sum(MEMOPS_CATEGORY_COUNTS.values())
    exact = {c: MEMOPS_CATEGORY_COUNTS[c] * n_topics / total for c in CATEGORIES}
    counts = {c: int(exact[c]) for c in CATEGORIES}
    rest = n_topics - sum(counts.values())
    order = sorted(CATEGORIES, key=lambda c: (-(exact[c] - counts[c]), CATEGORIES.index(c)))
    for c in order[:rest]:
        counts[c] += 1
    return counts


def plan_topics(n_topics: int, seed: int) -> list[Topic]:
    by_cat = K.kits_by_category()
    topics: list[Topic] = []
    for cat, count in category_counts(n_topics).items():
        kits = by_cat[cat]
        if count and not kits:
            raise ValueError(f"no topic kit in category {cat!r} ({K.TOPICS_DIR}), but {count} topic(s) asked for")
        # Rotate the starting kit by seed so a different seed draws different sub-topics too.
        start = seeded_rng(seed, "kit-start", cat).randrange(len(kits))
        for i in range(count):
            kit = kits[(start + i) % len(kits)]
            topics.append(_background(len(topics), kit, seed))
    return topics


def _background(index: int, kit: K.Kit, seed: int) -> Topic:
    rng = seeded_rng(seed, "background", index, kit.key)
    topic_id = f"T{index:03d}"
    v = rng.sample(kit.main.values, 6)
    temp = rng.choice(kit.temp.values)
    c1, c2 = rng.sample(kit.control.values, 2)
    owner, claimant = rng.sample(kit.owners, 2)
    nb_value = rng.choice(kit.neighbour.values)
    reflect = rng.choice(kit.reflect)
    name = rng.choice(K.NAMES)
    setting = rng.choice(kit.settings)
    bg = Background(
        topic_id=topic_id,
        category=kit.category,
        subtopic=kit.subtopic,
        title=f"{name}: {setting}",
        user_name=name,
        setting=setting,
        attributes=[
            Fact(target=kit.main.target, value=v[0], aliases=list(kit.main.aliases)),
            Fact(target=kit.control.target, value=c1, aliases=list(kit.control.aliases)),
        ],
        superseding=[
            Supersession(target=kit.main.target, old_value=v[0], new_value=v[1], aliases=list(kit.main.aliases)),
            Supersession(target=kit.main.target, old_value=v[1], new_value=v[2], aliases=list(kit.main.aliases)),
        ],
        temporary=[Fact(target=kit.temp.target, value=temp, aliases=list(kit.temp.aliases))],
        retained_controls=[Fact(target=kit.control.target, value=c1, aliases=list(kit.control.aliases))],
        reflection=Reflection(
            target=reflect.target,
            clues=list(reflect.clues),
            conclusion=reflect.conclusion,
            unsupported=list(reflect.unsupported),
            aliases=[reflect.key],
        ),
        neighbours=[
            Neighbour(kind="other_person", target=kit.main.target, value=v[3], owner=owner),
            Neighbour(kind="tentative", target=kit.main.target, value=v[2]),
            Neighbour(kind="other_target", target=kit.neighbour.target, value=nb_value),
            Neighbour(kind="third_party", target=kit.main.target, value=v[5], owner=claimant),
            Neighbour(kind="assistant_echo", target=kit.main.target, value=v[4]),
        ],
    )
    return Topic(index, kit, bg, tuple(v[:4]), temp, c1, c2, owner, reflect, nb_value, v[5], v[4], claimant)
