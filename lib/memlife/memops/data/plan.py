"""Stages 2-3 of the MemOps pipeline, model-free: gold operation plans and probes (stage 1, the
backgrounds, is `memlife.memops.data.backgrounds`).

The plan says *what* happens in each evidence conversation — which user turn establishes,
supersedes, removes or hints at which value — without any dialogue text. A realizer
(`memops.data.realize`) turns each planned event into a user sentence; that sentence becomes the
verbatim quote of every span that cites the event. Everything here is seeded with its own
`random.Random` keyed by seed and purpose, so a plan is a pure function of (seed, parameters).
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field

from memlife.memops.data import backgrounds
from memlife.memops.data import kits as K
from memlife.memops.data.schema import (
    OP_TYPES,
    key_value,
    normalize_value,
)

USER_SLOTS = 4  # user turns per segment (turns 0, 2, 4, 6)


# ----------------------------------------------------------------------------- stage 2


@dataclass(frozen=True)
class Event:
    """One thing the user says. The realizer renders it as one sentence inside a user turn."""

    event_id: str
    segment: int
    slot: int  # exchange index within the segment: user turn 2 * slot, assistant turn 2 * slot + 1
    # state | reuse | update | forget | keep | neighbour | neighbour_target | tentative | third_party | clue
    # | echo_placeholder | echo_repeat (the last two are the assistant's)
    kind: str
    target: str
    np: str  # how the user names the target
    value: str = ""
    old_value: str = ""
    owner: str = ""
    clue: str = ""
    speaker: str = "user"  # only an assistant echo is said by the assistant; evidence is always the user's

    @property
    def turn(self) -> int:
        return 2 * self.slot + (self.speaker == "assistant")


@dataclass(frozen=True)
class OpPlan:
    op_id: str
    type: str
    target: str
    aliases: tuple[str, ...]
    old_value: str | None
    new_value: str | None
    trigger: str  # event id
    evidence: tuple[str, ...]  # event ids
    unsupported: tuple[str, ...] = ()


@dataclass(frozen=True)
class ProbePlan:
    probe_id: str
    probe_type: str
    question: str
    expected_answer: str
    provenance: tuple[str, ...]  # event ids
    required: tuple[str, ...]
    forbidden: tuple[str, ...]
    distractors: tuple[tuple[str, str, str], ...]  # (tag, value, note)
    op_ids: tuple[str, ...]
    multi_hop: bool = False
    chain_sources: tuple[str, ...] = ()  # event ids
    chain_inferences: tuple[str, ...] = ()


@dataclass(frozen=True)
class ConversationPlan:
    instance_id: str
    topic: backgrounds.Topic
    op_type: str
    variant: str
    events: tuple[Event, ...]
    ops: tuple[OpPlan, ...]
    probes: tuple[ProbePlan, ...] = field(default=())

    def event(self, event_id: str) -> Event:
        for e in self.events:
            if e.event_id == event_id:
                return e
        raise KeyError(f"{self.instance_id}: no event {event_id}")


class _Builder:
    """Accumulates events and operations for one conversation, numbering them in order."""

    def __init__(self, topic: backgrounds.Topic):
        self.t = topic
        self.events: list[Event] = []
        self.ops: list[OpPlan] = []
        self.neighbour_event = ""  # the event where another owner's value for the same target is said

    def ev(self, segment: int, slot: int, kind: str, spec: K.TargetSpec | None = None, **kw) -> str:
        eid = f"e{len(self.events)}"
        target = spec.target if spec else kw.pop("target", "")
        np = spec.np if spec else kw.pop("np", "")
        self.events.append(Event(eid, segment, slot, kind, target, np, **kw))
        return eid

    def op(self, type_: str, spec_target: str, aliases, old, new, trigger, evidence=(), unsupported=()) -> str:
        oid = f"op{len(self.ops) + 1}"
        self.ops.append(OpPlan(oid, type_, spec_target, tuple(aliases), old, new, trigger,
                               tuple(evidence), tuple(unsupported)))
        return oid


def _events_for(topic: backgrounds.Topic, op_type: str, variant: str, rng: random.Random) -> _Builder:
    kit, (v1, v2, v3, vn) = topic.kit, topic.main_values
    m, tmp, ctl, rf = kit.main, kit.temp, kit.control, topic.reflect
    b = _Builder(topic)
    if op_type == "remember":
        s = b.ev(0, 1, "state", m, value=v1)
        # Before the user states the value, the assistant offers a placeholder the user never takes up.
        b.ev(0, 0, "echo_placeholder", m, value=topic.echo_value, speaker="assistant")
        b.ev(0, 3, "neighbour_target", kit.neighbour, value=topic.neighbour_value)
        c = b.ev(1, 0, "state", ctl, value=topic.control_value)
        nb = b.ev(1, 1, "neighbour", m, value=vn, owner=topic.owner)
        b.ev(1, 2, "third_party", m, value=topic.claimed_value, owner=topic.claimant)
        r1 = b.ev(1, 3, "reuse", m, value=v1)
        b.ev(2, 1, "tentative", m, value=v3)
        r2 = b.ev(2, 2, "reuse", m, value=v1)
        b.op("remember", m.target, m.aliases, None, v1, s, (r1, r2))
        b.op("remember", ctl.target, ctl.aliases, None, topic.control_value, c, ())
        b.neighbour_event = nb
    elif op_type == "forget":
        s = b.ev(0, 1, "state", tmp, value=topic.temp_value)
        c = b.ev(0, 2, "state", ctl, value=topic.control_value)
        r = b.ev(1, 1, "reuse", tmp, value=topic.temp_value)
        # The assistant repeats the temporary value while it is still in use: an echo that outlives the request.
        b.ev(1, 1, "echo_repeat", tmp, value=topic.temp_value, speaker="assistant")
        rc = b.ev(1, 3, "reuse", ctl, value=topic.control_value)
        f = b.ev(2, rng.choice((0, 1)), "forget", tmp, old_value=topic.temp_value)
        k = b.ev(2, 3, "keep", ctl, value=topic.control_value)
        b.op("remember", tmp.target, tmp.aliases, None, topic.temp_value, s, (r,))
        b.op("remember", ctl.target, ctl.aliases, None, topic.control_value, c, (rc, k))
        b.op("forget", tmp.target, tmp.aliases, topic.temp_value, None, f, (s, k))
    elif op_type == "update":
        s = b.ev(0, 1, "state", m, value=v1)
        b.ev(0, 2, "third_party", m, value=topic.claimed_value, owner=topic.claimant)
        r = b.ev(0, 3, "reuse", m, value=v1)
        b.ev(1, 0, "neighbour_target", kit.neighbour, value=topic.neighbour_value)
        nb = b.ev(1, 1, "neighbour", m, value=vn, owner=topic.owner)
        useg, uslot = rng.choice(((1, 3), (2, 0)))
        u = b.ev(useg, uslot, "update", m, value=v2, old_value=v1)
        r2 = b.ev(2, 2, "reuse", m, value=v2)
        b.op("remember", m.target, m.aliases, None, v1, s, (r,))
        b.op("update", m.target, m.aliases, v1, v2, u, (s, r2))
        b.neighbour_event = nb
    elif op_type == "reflect":
        s = b.ev(0, 1, "state", m, value=v1)
        c1 = b.ev(0, 2, "clue", target=rf.target, np=rf.target, clue=rf.clues[0])
        c2 = b.ev(1, 1, "clue", target=rf.target, np=rf.target, clue=rf.clues[1])
        r = b.ev(1, 3, "reuse", m, value=v1)
        # Someone else's broad verdict on the same behaviour: a third-party over-generalization.
        b.ev(2, 0, "third_party", target=rf.target, np=rf.target, owner=topic.claimant,
             clue=as_person(rf.unsupported[0], "I"))
        c3 = b.ev(2, 2, "clue", target=rf.target, np=rf.target, clue=rf.clues[2])
        b.op("remember", m.target, m.aliases, None, v1, s, (r,))
        b.op("reflect", rf.target, (rf.key,), None, rf.conclusion, c3, (c1, c2), rf.unsupported)
    elif op_type == "trajectory":
        _trajectory_events(b, topic, variant)
    else:
        raise ValueError(f"unknown op_type {op_type!r}; expected one of {OP_TYPES}")
    return b


# Four trajectory shapes with 4, 4, 5 and 3 operations: the paper's average of 4.0 per trajectory.
TRAJECTORY_VARIANTS = ("A", "B", "C", "D")


def _trajectory_events(b: _Builder, topic: backgrounds.Topic, variant: str) -> None:
    kit, (v1, v2, v3, _) = topic.kit, topic.main_values
    m, tmp, ctl, rf = kit.main, kit.temp, kit.control, topic.reflect
    s = b.ev(0, 1, "state", m, value=v1)
    b.op("remember", m.target, m.aliases, None, v1, s, ())
    # Every trajectory shape leaves this exchange free: the user's neighbouring target, said late.
    b.ev(2, 2, "neighbour_target", kit.neighbour, value=topic.neighbour_value)
    if variant == "A":
        t = b.ev(1, 0, "state", tmp, value=topic.temp_value)
        b.op("remember", tmp.target, tmp.aliases, None, topic.temp_value, t, ())
        u = b.ev(1, 2, "update", m, value=v2, old_value=v1)
        b.op("update", m.target, m.aliases, v1, v2, u, (s,))
        f = b.ev(2, 1, "forget", tmp, old_value=topic.temp_value)
        r = b.ev(2, 3, "reuse", m, value=v2)
        b.op("forget", tmp.target, tmp.aliases, topic.temp_value, None, f, (t,))
        b.ops[2] = _with_evidence(b.ops[2], r)
    elif variant in ("B", "D"):
        if variant == "B":
            c = b.ev(0, 3, "state", ctl, value=topic.control_value)
            b.op("remember", ctl.target, ctl.aliases, None, topic.control_value, c, ())
        u1 = b.ev(1, 1, "update", m, value=v2, old_value=v1)
        b.op("update", m.target, m.aliases, v1, v2, u1, (s,))
        u2 = b.ev(2, 1, "update", m, value=v3, old_value=v2)
        r = b.ev(2, 3, "reuse", m, value=v3)
        b.op("update", m.target, m.aliases, v2, v3, u2, (u1, r))
    elif variant == "C":
        t = b.ev(0, 2, "state", tmp, value=topic.temp_value)
        b.op("remember", tmp.target, tmp.aliases, None, topic.temp_value, t, ())
        u = b.ev(1, 1, "update", m, value=v2, old_value=v1)
        b.op("update", m.target, m.aliases, v1, v2, u, (s,))
        c1 = b.ev(1, 3, "clue", target=rf.target, np=rf.target, clue=rf.clues[0])
        f = b.ev(2, 0, "forget", tmp, old_value=topic.temp_value)
        b.op("forget", tmp.target, tmp.aliases, topic.temp_value, None, f, (t,))
        c2 = b.ev(2, 1, "clue", target=rf.target, np=rf.target, clue=rf.clues[1])
        c3 = b.ev(2, 3, "clue", target=rf.target, np=rf.target, clue=rf.clues[2])
        b.op("reflect", rf.target, (rf.key,), None, rf.conclusion, c3, (c1, c2), rf.unsupported)
    else:
        raise ValueError(f"unknown trajectory variant {variant!r}")


def _with_evidence(op: OpPlan, event_id: str) -> OpPlan:
    return OpPlan(op.op_id, op.type, op.target, op.aliases, op.old_value, op.new_value, op.trigger,
                  (*op.evidence, event_id), op.unsupported)


# ----------------------------------------------------------------------------- stage 3

_N = normalize_value


def _spans(b: _Builder, *op_ids: str) -> tuple[str, ...]:
    out: list[str] = []
    for op in b.ops:
        if op.op_id in op_ids:
            for e in (op.trigger, *op.evidence):
                if e not in out:
                    out.append(e)
    return tuple(sorted(out, key=lambda e: int(e[1:])))


def _op(b: _Builder, type_: str, target: str | None = None, last: bool = False) -> OpPlan:
    found = [o for o in b.ops if o.type == type_ and (target is None or o.target == target)]
    if not found:
        raise LookupError(f"no {type_} operation on {target}")
    return found[-1] if last else found[0]


def yours(phrase: str) -> str:
    """A phrase as the assistant says it back: 'my sister' -> 'your sister', 'our hotel' -> 'your hotel'."""
    for mine in ("my ", "our "):
        if phrase.startswith(mine):
            return "your " + phrase[len(mine):]
    return phrase


_AUX = {"is": ("am", "are"), "has": ("have", "have"), "was": ("was", "were")}


def as_person(text: str, person: str) -> str:
    """Rewrite a third-person claim about 'the user' in the first ('I') or second ('you') person.

    Background conclusions are written about "the user"; probes address the user directly.
    """
    import re

    subj = "I" if person == "I" else "you"
    poss = "my" if person == "I" else "your"

    def verb(m: re.Match) -> str:
        lead, adv, v = m.group(1), m.group(2) or "", m.group(3)
        if v in _AUX:
            v = _AUX[v][0 if person == "I" else 1]
        elif v.endswith("ies"):
            v = v[:-3] + "y"
        elif v.endswith(("sses", "shes", "ches", "xes", "oes")):
            v = v[:-2]
        elif v.endswith("s") and not v.endswith("ss"):
            v = v[:-1]
        word = subj.capitalize() if lead[0].isupper() else subj
        return f"{word} {adv}{v}"

    text = re.sub(r"\b([Tt]he user)'s\b", lambda m: poss.capitalize() if m.group(1)[0] == "T" else poss, text)
    text = re.sub(r"\b([Tt]he user) ((?:never|always|still|actively|only|mostly) )?(\w+)", verb, text)
    return re.sub(r"\btheir\b", poss, text)


def possessive(owner: str) -> str:
    return owner + "'s"  # owners are singular people ("Jess's"), never plurals


def spoken_name(spec: K.TargetSpec) -> str:
    """The shortest name of a target that the user's own wording contains (for answer keys)."""
    said = f" {_N(spec.np)} "
    for name in sorted((*spec.aliases, spec.target), key=len):
        if f" {_N(name)} " in said:
            return name
    return spec.target


def _pick(rng: random.Random, options: tuple[str, ...], **kw) -> str:
    return rng.choice(options).format(**kw)


def _probes(b: _Builder, topic: backgrounds.Topic, op_type: str, variant: str, iid: str, rng: random.Random) -> list[ProbePlan]:
    kit, (v1, v2, v3, vn) = topic.kit, topic.main_values
    m, tmp, ctl, rf = kit.main, kit.temp, kit.control, topic.reflect
    probes: list[ProbePlan] = []

    def add(ptype, q, a, prov, req, forb=(), dis=(), ops=(), multi=False, sources=(), inf=()):
        probes.append(ProbePlan(f"{iid}-p{len(probes) + 1}", ptype, q, a, tuple(prov),
                                tuple(dict.fromkeys(key_value(x) for x in req)),
                                tuple(dict.fromkeys(key_value(x) for x in forb)),
                                tuple(dis), tuple(ops), multi, tuple(sources), tuple(inf)))

    nbv, claimed = topic.neighbour_value, topic.claimed_value
    ntg = ("neighbouring_target", nbv, f"the user's {kit.neighbour.target}, a different detail")
    claim = ("third_party", claimed, f"{possessive(topic.claimant)} mistaken belief")
    echo = ("assistant_echo", topic.echo_value, "a placeholder the assistant proposed, never confirmed")
    if op_type == "remember":
        rem, remc = _op(b, "remember", m.target), _op(b, "remember", ctl.target)
        nb = b.neighbour_event
        tent_ev = next(e.event_id for e in b.events if e.kind == "tentative")
        same = ("same_target", vn, f"{possessive(topic.owner)} {m.target}")
        recent = ("recency_top", v3, "tentative value mentioned after the fact")
        tent = ("tentative", v3, "a possibility the user raised, never decided")
        add("OperationTrace",
            _pick(rng, ("Which of my messages gave you something about {t} worth keeping, and what exactly should be kept?",
                        "Point me to where I told you {np}, and say what you should hold on to from it."),
                  t=m.target, np=m.np),
            f"The message where you said {yours(m.np)} is {v1}: keep {v1} as your {m.target}.",
            _spans(b, rem.op_id), (v1,), (vn, v3), (same, recent), (rem.op_id,))
        add("TargetBinding",
            _pick(rng, ("I mentioned {vn} at some point. Is that my {t}? If not, whose is it and what is mine?",
                        "Whose {t} is {vn}, and which one is mine?"), vn=vn, t=m.target),
            f"{vn} is {possessive(yours(topic.owner))} {m.target}; yours is {v1}.",
            (*_spans(b, rem.op_id), nb), (v1,), (nbv,), (same, ntg), (rem.op_id,))
        add("StateTransition",
            _pick(rng, ("After everything I told you, what should be on file as my {t}?",
                        "What do you now have stored for my {t}?"), t=m.target),
            f"Your {m.target} is {v1}; the later mention of {v3} was only a possibility.",
            (*_spans(b, rem.op_id), tent_ev), (v1,), (vn, v3, claimed, topic.echo_value, nbv),
            (recent, same, tent, claim, echo, ntg), (rem.op_id,))
        add("CandidateDisambiguation",
            f"I've brought up {vn}, {v1} and {v3} in our chats. Which of them is actually my {m.target}?",
            f"{v1}. {vn} belongs to {yours(topic.owner)} and {v3} was only a tentative idea.",
            (*_spans(b, rem.op_id), nb, tent_ev), (v1,), (vn, v3, claimed, nbv), (same, recent, tent, claim, ntg),
            (rem.op_id,))
        add("OperationApplication", f"Can you {kit.use}? Include my {m.target} and my {ctl.target}.",
            f"{m.target.capitalize()}: {v1}; {ctl.target}: {topic.control_value}.",
            _spans(b, rem.op_id, remc.op_id), (v1, topic.control_value), (vn, v3, topic.echo_value, claimed),
            (same, recent, echo, claim), (rem.op_id, remc.op_id), True, (rem.trigger, remc.trigger),
            (f"The {m.target} stated by the user is {v1}.",
             f"The {ctl.target} stated by the user is {topic.control_value}.",
             "Both facts are still current, so both go into the task output."))
    elif op_type == "forget":
        rem_t, rem_c, fg = _op(b, "remember", tmp.target), _op(b, "remember", ctl.target), _op(b, "forget")
        keep = ("retained_control", topic.control_value, f"{ctl.target} must survive the deletion")
        recent = ("recency_top", topic.temp_value, "the removed value was used shortly before the request")
        echo_t = ("assistant_echo", topic.temp_value, "the assistant repeated the value before it was deleted")
        add("OperationTrace",
            _pick(rng, ("Which of my messages asked you to drop something, and what exactly should be removed?",
                        "Where did I ask you to get rid of a detail, and which detail was it?")),
            f"Your request to delete {yours(tmp.np)}: the {tmp.target} is removed, while your {ctl.target} stays.",
            _spans(b, fg.op_id), (spoken_name(tmp),), (topic.temp_value,), (keep,), (fg.op_id,))
        add("TargetBinding",
            f"When I asked you to delete something, did that apply to my {ctl.target} or to the {tmp.target}?",
            f"Only the {tmp.target}; your {ctl.target} ({topic.control_value}) is kept.",
            (*_spans(b, fg.op_id), rem_c.trigger), (spoken_name(tmp), topic.control_value), (topic.temp_value,),
            (keep,), (fg.op_id, rem_c.op_id))
        add("StateTransition",
            f"What do you still have on file about the {tmp.target} and my {ctl.target}?",
            f"Nothing about the {tmp.target}, which you asked me to delete; your {ctl.target} is still {topic.control_value}.",
            _spans(b, fg.op_id, rem_c.op_id), (topic.control_value,), (topic.temp_value,), (keep, recent, echo_t),
            (fg.op_id, rem_c.op_id))
        add("CandidateDisambiguation",
            f"Someone helping me asks for the {tmp.aliases[0]} and my {ctl.aliases[0]}. What can you give them?",
            f"Only the {ctl.target}: {topic.control_value}. The {tmp.target} was deleted at your request.",
            _spans(b, fg.op_id, rem_c.op_id, rem_t.op_id), (topic.control_value,), (topic.temp_value,),
            (keep, recent, echo_t), (fg.op_id, rem_c.op_id))
        add("OperationApplication", f"Can you {kit.use}? Use whatever details you still have.",
            f"It includes your {ctl.target}, {topic.control_value}, and leaves out the deleted {tmp.target}.",
            _spans(b, fg.op_id, rem_c.op_id, rem_t.op_id), (topic.control_value,), (topic.temp_value,),
            (keep, recent), (fg.op_id, rem_c.op_id), True, (rem_t.trigger, fg.trigger, rem_c.trigger),
            (f"The user first gave the {tmp.target}.",
             f"The user later asked for the {tmp.target} to be deleted, so it must not be used.",
             f"The {ctl.target} ({topic.control_value}) was never withdrawn, so it is still usable."))
    elif op_type == "update":
        rem, up = _op(b, "remember", m.target), _op(b, "update")
        stale = ("stale_value", v1, "superseded value")
        same = ("same_target", vn, f"{possessive(topic.owner)} {m.target}")
        add("OperationTrace",
            _pick(rng, ("Which message changed one of my details, and from what to what?",
                        "Find the message where I corrected something, and tell me what changed.")),
            f"The correction where {yours(m.np)} went from {v1} to {v2}.",
            _spans(b, up.op_id), (v2,), (), (stale,), (up.op_id,))
        add("TargetBinding",
            f"The correction I made — which of my details did it apply to, and is {possessive(topic.owner)} affected?",
            f"It applied to your {m.target}, now {v2}; {possessive(yours(topic.owner))} ({vn}) is unaffected.",
            (*_spans(b, up.op_id), b.neighbour_event), (v2,), (v1,), (same, stale), (up.op_id,))
        add("StateTransition", f"What is my {m.target} now, and is {v1} still valid?",
            f"It is {v2}; {v1} is no longer valid.", _spans(b, rem.op_id, up.op_id), (v2,), (v1, claimed, nbv),
            (stale, claim, ntg), (rem.op_id, up.op_id))
        add("CandidateDisambiguation",
            f"Between {v1}, {v2} and {vn}, which is my current {m.target}?",
            f"{v2}. {v1} was replaced and {vn} belongs to {yours(topic.owner)}.",
            (*_spans(b, up.op_id), b.neighbour_event), (v2,), (v1, vn, claimed, nbv), (stale, same, claim, ntg),
            (up.op_id,))
        add("OperationApplication", f"Can you {kit.use}? It needs my {m.target}.",
            f"It uses {v2} as your {m.target}.", _spans(b, rem.op_id, up.op_id), (v2,), (v1, claimed),
            (stale, claim), (up.op_id,), True, (rem.trigger, up.trigger),
            (f"The {m.target} was first given as {v1}.",
             f"A later message replaced it with {v2}, so {v1} is stale.",
             f"The task must use {v2}."))
    elif op_type == "reflect":
        rfl = _op(b, "reflect")
        # Answers address the user, so an over-generalization is forbidden in either wording.
        unsup = tuple(dict.fromkeys([*rf.unsupported, *(as_person(u, "you") for u in rf.unsupported)]))
        # The over-generalization is voiced by a third party, so the candidate is in the dialogue.
        said = as_person(rf.unsupported[0], "I")
        over = ("same_target", said, "over-generalization of the same clues")
        recent = ("recency_top", rf.clues[2], "the last clue alone does not carry the conclusion")
        verdict = ("third_party", said, f"{possessive(topic.claimant)} verdict, broader than the clues")
        prov = _spans(b, rfl.op_id)
        add("OperationTrace",
            f"Which of my messages tell you something about my {rf.target}, and what can you conclude from them?",
            f"The three remarks about your {rf.target} together suggest: {as_person(rf.conclusion, 'you')}",
            prov, (rf.key,), unsup, (over,), (rfl.op_id,))
        add("TargetBinding",
            f"What you picked up from my remarks — is it about my {rf.target} in particular, or a broad claim about me?",
            f"It is about your {rf.target} only: {as_person(rf.conclusion, 'you')}", prov, (rf.key,), unsup,
            (over,), (rfl.op_id,))
        add("StateTransition", f"What, if anything, should you now keep in mind about my {rf.target}?",
            as_person(rf.conclusion, "you"), prov, (rf.key,), unsup, (over, recent, verdict), (rfl.op_id,))
        add("CandidateDisambiguation",
            f"Would it be fair to say that {as_person(rf.unsupported[0], 'I')}? Or is there a narrower conclusion?",
            f"No. The remarks only support a narrower point: {as_person(rf.conclusion, 'you')}", prov, (rf.key,),
            unsup, (over, verdict), (rfl.op_id,))
        add("OperationApplication",
            f"Given what you've noticed about me, what would you keep in mind if you {kit.items[0]} for me?",
            f"Keep in mind that {as_person(rf.conclusion[0].lower() + rf.conclusion[1:], 'you')}", prov, (rf.key,),
            unsup, (over, recent), (rfl.op_id,), True, (rfl.evidence[0], rfl.evidence[1], rfl.trigger),
            ("Each remark on its own is a single observation.",
             f"Together they point the same way: {rf.conclusion}",
             f"They do not justify broader claims such as '{rf.unsupported[0]}'."))
    else:
        _trajectory_probes(b, topic, variant, add, ntg)
    return probes


def _describe(o: OpPlan, forgotten: set[str]) -> str:
    if o.type == "remember":
        if o.target in forgotten:  # never repeat a value the user later asked to delete
            return f"you gave the {o.target}"
        return f"you gave your {o.target} ({o.new_value})"
    if o.type == "update":
        return f"you changed your {o.target} from {o.old_value} to {o.new_value}"
    if o.type == "forget":
        return f"you asked me to delete the {o.target}"
    return f"your remarks about your {o.target} added up to a conclusion"


def _trajectory_probes(b: _Builder, topic: backgrounds.Topic, variant: str, add, ntg) -> None:
    kit, (v1, v2, v3, _) = topic.kit, topic.main_values
    m, tmp = kit.main, kit.temp
    main_ops = [o for o in b.ops if o.target == m.target]
    chain = [v1] + [o.new_value for o in main_ops if o.type == "update"]
    final = chain[-1]
    forgot = [o for o in b.ops if o.type == "forget"]
    reflect = [o for o in b.ops if o.type == "reflect"]
    forb_forgot = tuple(o.old_value for o in forgot)
    all_ids = tuple(o.op_id for o in b.ops)
    every = _spans(b, *all_ids)
    dis = [("stale_value", chain[-2], "superseded value")]
    if len(chain) > 2:
        dis.append(("update_chain", " -> ".join(chain), "value changed more than once"))
    if forgot:
        dis.append(("recency_top", topic.temp_value, "removed value mentioned in the same sessions"))
    history = " -> ".join(chain)
    extra = ""
    if forgot:
        extra += f" The {tmp.target} was stored and later deleted at your request."
    if reflect:
        extra += f" From your remarks: {as_person(topic.reflect.conclusion, 'you')}"
    req_final = tuple(chain) + ((topic.reflect.key,) if reflect else ())
    add("StateTrajectory",
        f"Walk me through how my {m.target} changed over our conversations, and where things stand now. "
        f"Mention anything else you were asked to keep or drop.",
        f"Your {m.target} went {history}; it is {final} now.{extra}",
        every, req_final, forb_forgot, tuple(dis), all_ids)
    first_up = next(o for o in main_ops if o.type == "update")
    mid_q = f"Before my first correction, what was my {m.target}, and what did it become right after it?"
    add("StateTrajectory", mid_q, f"It was {v1} and became {first_up.new_value}.",
        _spans(b, main_ops[0].op_id, first_up.op_id), (v1, first_up.new_value), forb_forgot, tuple(dis[:1]),
        (main_ops[0].op_id, first_up.op_id), True, (main_ops[0].trigger, first_up.trigger),
        (f"The first statement set the {m.target} to {v1}.",
         f"The first correction replaced {v1} with {first_up.new_value}.",
         "That correction is the boundary the question asks about."))
    add("StateTransition", f"What is my {m.target} at this point?",
        f"{final}." + (" Earlier values are out of date." if len(chain) > 1 else ""),
        _spans(b, *(o.op_id for o in main_ops)), (final,), tuple(chain[:-1]) + forb_forgot + (topic.neighbour_value,),
        (*dis, ntg), tuple(o.op_id for o in main_ops))
    cands = list(dict.fromkeys(chain))
    add("CandidateDisambiguation",
        f"I've given you {', '.join(cands[:-1])} and {cands[-1]} for my {m.target} at different times. Which one counts?",
        f"{final}, the most recent correction; the others are superseded.",
        _spans(b, *(o.op_id for o in main_ops)), (final,), (*chain[:-1], topic.neighbour_value), (*dis, ntg),
        tuple(o.op_id for o in main_ops))
    gone = {o.target for o in forgot}
    ops_desc = "; ".join(_describe(o, gone) for o in b.ops)
    add("OperationTrace",
        "List, in order, the messages where I gave you a detail to keep, changed one, or asked you to drop one.",
        f"In order: {ops_desc}.",
        every, (final,), forb_forgot, tuple(dis), all_ids)


# ----------------------------------------------------------------------------- entry point


@dataclass(frozen=True)
class PlanParams:
    n_topics: int
    seed: int
    max_conversations: int | None = None  # None: all five per topic


def plan_conversation(topic: backgrounds.Topic, op_type: str, seed: int) -> ConversationPlan:
    iid = f"{topic.background.topic_id}-{op_type}"
    rng = backgrounds.seeded_rng(seed, "conversation", iid)
    variant = TRAJECTORY_VARIANTS[(topic.index + seed) % len(TRAJECTORY_VARIANTS)] if op_type == "trajectory" else "-"
    b = _events_for(topic, op_type, variant, rng)
    _check_slots(iid, b.events)
    probes = _probes(b, topic, op_type, variant, iid, rng)
    return ConversationPlan(iid, topic, op_type, variant, tuple(b.events), tuple(b.ops), tuple(probes))


def _check_slots(iid: str, events: list[Event]) -> None:
    seen: dict[tuple[int, int], str] = {}
    for e in events:
        if not (0 <= e.segment < 3 and 0 <= e.slot < USER_SLOTS):
            raise ValueError(f"{iid}: event {e.event_id} placed outside the dialogue ({e.segment}, {e.slot})")
        if e.speaker not in ("user", "assistant") or (e.speaker == "assistant") != e.kind.startswith("echo"):
            raise ValueError(f"{iid}: event {e.event_id} ({e.kind}) said by {e.speaker!r}")
        if (e.segment, e.turn) in seen:
            raise ValueError(f"{iid}: events {seen[(e.segment, e.turn)]} and {e.event_id} share a turn")
        seen[(e.segment, e.turn)] = e.event_id


def select_pairs(topics: list[backgrounds.Topic], max_conversations: int | None, seed: int) -> list[tuple[backgrounds.Topic, str]]:
    """All topic x operation pairs, or a seeded subset balanced over operation types.

    The paper kept 403 of its 500 topic-operation pairs after its gates; `max_conversations`
    lets a profile match that scale while keeping the five types in comparable proportions.
    """
    pairs = [(t, op) for t in topics for op in OP_TYPES]
    if max_conversations is None or max_conversations >= len(pairs):
        return pairs
    rng = backgrounds.seeded_rng(seed, "select")
    by_op = {op: [p for p in pairs if p[1] == op] for op in OP_TYPES}
    for op in OP_TYPES:
        rng.shuffle(by_op[op])
    keep: list[tuple[backgrounds.Topic, str]] = []
    i = 0
    while len(keep) < max_conversations:
        op = OP_TYPES[i % len(OP_TYPES)]
        j = i // len(OP_TYPES)
        if j < len(by_op[op]):
            keep.append(by_op[op][j])
        i += 1
    order = {(t.index, op): k for k, (t, op) in enumerate(pairs)}
    return sorted(keep, key=lambda p: order[(p[0].index, p[1])])


def plan(params: PlanParams) -> list[ConversationPlan]:
    topics = backgrounds.plan_topics(params.n_topics, params.seed)
    return [plan_conversation(t, op, params.seed) for t, op in select_pairs(topics, params.max_conversations, params.seed)]
