"""Turn a conversation plan into dialogue: the offline template realizer and the LLM realizer.

Both realizers produce the same thing: 3 segments x 8 turns, user first, assistant last, and
for every planned user event one user sentence that becomes the verbatim quote of the spans
citing it (an assistant echo is a sentence of the assistant's, never cited). The template
realizer draws from paraphrase banks (`memlife.memops.data.phrase_banks`) with a per-conversation
seeded RNG and gives the assistant real task work (answers, a to-do list it keeps current, drafts). The LLM
realizer writes the turns around the same fixed sentences through role "generator"; the gates
then check both the same way.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

from memlife.memops.data import phrase_banks
from memlife.memops.data.plan import USER_SLOTS, ConversationPlan, Event, possessive, yours
from memlife.memops.data.schema import (
    OP_TYPES,
    AnswerKey,
    Distractor,
    Instance,
    Operation,
    Probe,
    ReasoningChain,
    Span,
    Turn,
)


def _fill(template: str, **kw) -> str:
    text = template.format(**kw)
    return text[0].upper() + text[1:]


def _slots(e: Event) -> dict[str, str]:
    poss = possessive(e.owner) if e.owner else ""
    return dict(np=e.np, NP=e.np[0].upper() + e.np[1:], v=e.value, old=e.old_value, target=e.target,
                owner=e.owner, OWNER=e.owner[:1].upper() + e.owner[1:], owner_poss=poss,
                OWNER_POSS=poss[:1].upper() + poss[1:], claim=e.clue,
                their=possessive(yours(e.owner)) if e.owner else "")


def _bank(e: Event) -> tuple[str, ...]:
    if e.kind == "third_party" and e.clue:
        return phrase_banks.THIRD_PARTY_VERDICT
    return {"state": phrase_banks.STATE, "reuse": phrase_banks.REUSE, "update": phrase_banks.UPDATE, "forget": phrase_banks.FORGET, "keep": phrase_banks.KEEP,
            "neighbour": phrase_banks.NEIGHBOUR, "tentative": phrase_banks.TENTATIVE, "neighbour_target": phrase_banks.NEIGHBOUR_TARGET,
            "third_party": phrase_banks.THIRD_PARTY, "echo_placeholder": phrase_banks.ECHO_PLACEHOLDER, "echo_repeat": phrase_banks.ECHO_REPEAT}[e.kind]


def render_event(e: Event, rng: random.Random) -> str:
    """One sentence for one planned event; a user event's sentence is the verbatim quote of the event."""
    if e.kind == "clue":
        return e.clue
    return _fill(rng.choice(_bank(e)), **_slots(e))


def _ack(e: Event, rng: random.Random) -> str:
    return _fill(rng.choice(phrase_banks.ACK[e.kind]), **_slots(e))


# ----------------------------------------------------------------------------- template realizer


@dataclass
class _TaskState:
    todo: list[str]
    open_tasks: list[tuple[str, str]]
    items_left: list[str]
    used: dict[int, int]
    used_items: set[tuple[int, str]]


def kit_opener(cp: ConversationPlan, attempt: int = 0) -> str:
    """The kit's opening line for this conversation: the five conversations of a topic never share one.

    Each topic draws a fixed order of its kit's openers; a conversation takes the one at its
    operation's position, so a topic's conversations open differently by construction.
    """
    openers = cp.topic.kit.openers
    order = random.Random(f"openers:{cp.topic.background.topic_id}:{cp.topic.kit.key}").sample(
        range(len(openers)), len(openers))
    return openers[order[(OP_TYPES.index(cp.op_type) + attempt * len(OP_TYPES)) % len(openers)]]


def _task_exchange(state: _TaskState, rng: random.Random) -> tuple[str, str]:
    """A user request and a grounded assistant answer; the assistant keeps the to-do list current.

    Beats that were used least so far come first, so one conversation does not repeat itself.
    """
    if state.open_tasks and rng.random() < 0.45:
        return state.open_tasks.pop(0)
    kinds = list(range(len(phrase_banks.ITEM_REQUESTS)))
    rng.shuffle(kinds)
    kinds.sort(key=lambda k: state.used.get(k, 0))
    for k in kinds:
        got = _beat(k, state, rng)
        if got is not None:
            state.used[k] = state.used.get(k, 0) + 1
            return got
    if state.open_tasks:
        return state.open_tasks.pop(0)
    state.used[4] = state.used.get(4, 0) + 1
    u, a = phrase_banks.ITEM_REQUESTS[4]
    return u.format(item=state.todo[-1] if state.todo else "the rest"), a


def _beat(k: int, state: _TaskState, rng: random.Random) -> tuple[str, str] | None:
    u, a = rng.choice((phrase_banks.ITEM_REQUESTS[k], *phrase_banks.ITEM_VARIANTS.get(k, ())))
    todo = state.todo
    if k == 0 and state.items_left:
        item = state.items_left.pop(0)
        todo.append(item)
        return u.format(item=item), a.format(item=item, list=", ".join(todo))
    if k == 1 and len(todo) >= 2:
        return u, a.format(list=", ".join(todo), first=todo[0])
    if k == 2 and len(todo) >= 2:
        x, y = todo[-1], todo[0]
        return u.format(a=x, b=y), a.format(a=x, b=y)
    if k == 3 and len(todo) >= 2:
        days = ("Monday", "Wednesday", "Friday", "Saturday")
        return u, a.format(plan="; ".join(f"{d}: {i}" for d, i in zip(days, todo)))
    if k in (4, 6, 7, 8):
        fresh = [i for i in todo if (k, i) not in state.used_items]
        if not fresh:
            return None
        item = rng.choice(fresh)
        state.used_items.add((k, item))
        return u.format(item=item), a.format(item=item)
    if k == 5 and len(todo) >= 2:
        done = todo.pop(0)
        return u.format(done=done), a.format(done=done, list=", ".join(todo))
    return None


def _worked_detail(detail: list[str], state: _TaskState, items: tuple[str, ...], setting: str,
                  talked: dict[str, int], rng: random.Random) -> list[str]:
    """One or two paragraphs of worked detail (each paragraph once per conversation), each on the
    item of the user's list talked about least so far, and sometimes a line on what the assistant
    will do next."""
    out: list[str] = []
    for _ in range(2 if rng.random() < 0.4 else 1):
        if not detail:
            break
        pool = list(state.todo) if len(state.todo) >= 2 else list(items)
        rng.shuffle(pool)
        item = min(pool, key=lambda i: talked.get(i, 0))
        talked[item] = talked.get(item, 0) + 1
        out.append(detail.pop().format(item=item, setting=setting))
    if rng.random() < 0.6:
        out.append(rng.choice(phrase_banks.FOLLOW_THROUGH))
    return out


def realize_template(cp: ConversationPlan, attempt: int = 0) -> list[list[Turn]]:
    """3 segments of 8 turns. `attempt` reseeds the phrasing so a regeneration reads differently."""
    rng = random.Random(f"realize:{cp.instance_id}:{attempt}:{cp.topic.background.setting}")
    kit = cp.topic.kit
    tasks = [(t.user, t.assistant) for t in kit.tasks]
    rng.shuffle(tasks)
    items = list(kit.items)
    rng.shuffle(items)
    state = _TaskState(todo=[], open_tasks=tasks, items_left=items, used={}, used_items=set())
    by_turn = {(e.segment, e.turn): e for e in cp.events}
    colour = list(phrase_banks.USER_COLOUR)
    rng.shuffle(colour)
    offers = list(phrase_banks.ASSISTANT_OFFER)
    rng.shuffle(offers)
    beats = list(phrase_banks.SETTING_BEATS)
    rng.shuffle(beats)
    detail = list(phrase_banks.ELABORATION)
    rng.shuffle(detail)
    setting = cp.topic.background.setting
    talked: dict[str, int] = {}
    segments: list[list[Turn]] = []
    for seg in range(3):
        turns: list[Turn] = []
        for slot in range(USER_SLOTS):
            e = by_turn.get((seg, 2 * slot))
            echo = by_turn.get((seg, 2 * slot + 1))
            user_parts: list[str] = []
            asst_parts: list[str] = []
            if slot == 0 and seg == 0:
                user_parts += [kit_opener(cp, attempt),
                               _fill(rng.choice(phrase_banks.SETTING_LINE), setting=cp.topic.background.setting)]
            elif slot == 0:
                user_parts.append(rng.choice(phrase_banks.OPEN_AGAIN))
            elif rng.random() < 0.3:
                user_parts.append(colour.pop() if colour else rng.choice(phrase_banks.USER_COLOUR))
            if e is not None:
                user_parts.append(render_event(e, rng))
                asst_parts.append(_ack(e, rng))
            last = seg == 2 and slot == USER_SLOTS - 1
            if last and e is None:
                user_parts.append(rng.choice(phrase_banks.CLOSE_USER))
                asst_parts.append(rng.choice(phrase_banks.CLOSE_ASSISTANT))
            else:
                usable = [x for x in beats if state.todo or "{todo_summary}" not in x[1]]
                if usable and rng.random() < 0.25:
                    u, a = usable[0]
                    beats.remove(usable[0])
                    todo = ", ".join(state.todo) if state.todo else "nothing is on the list yet"
                    u, a = u.format(setting=cp.topic.background.setting), a.format(todo_summary=todo)
                else:
                    u, a = _task_exchange(state, rng)
                user_parts.append(u)
                asst_parts.append(a)
                asst_parts += _worked_detail(detail, state, kit.items, setting, talked, rng)
                if echo is not None:
                    asst_parts.append(render_event(echo, rng))
                    echo = None
                if offers and rng.random() < 0.35 and not a.endswith("?"):
                    asst_parts.append(offers.pop())
            if echo is not None:
                asst_parts.append(render_event(echo, rng))
            turns.append(Turn(role="user", text=" ".join(user_parts)))
            turns.append(Turn(role="assistant", text=" ".join(asst_parts)))
        segments.append(turns)
    return segments


# ----------------------------------------------------------------------------- LLM realizer

LLM_SYSTEM = (
    "You write realistic, task-oriented chat transcripts between a user and a helpful assistant. "
    "The user is a real person getting something done; the assistant does real work grounded in "
    "what the user just said (answers, lists, drafts, comparisons). Never mention memory, labels, "
    "operations, or that this is a benchmark."
)


def _llm_prompt(cp: ConversationPlan, seg: int, feedback: str) -> str:
    kit = cp.topic.kit
    fixed = fixed_sentences(cp)
    lines = [
        f"Situation: the user is {cp.topic.background.setting} ({kit.subtopic}).",
        "Write exactly 8 turns: user, assistant, user, assistant, user, assistant, user, assistant.",
        "Return JSON: {\"turns\": [8 strings]}.",
        "Each turn is 2-5 sentences. The assistant does concrete work (a plan, a list, a draft, a comparison) "
        "based on what the user just said.",
        "Each turn listed below MUST contain the given sentence exactly, character for character:",
    ]
    for e in cp.events:
        if e.segment == seg:
            lines.append(f"- {e.speaker} turn {e.slot + 1}: \"{fixed[e.event_id]}\"")
    if seg == 0:
        lines.append(f"The first user turn opens with: \"{kit_opener(cp)}\" and says that the user is "
                     f"{cp.topic.background.setting}.")
    if seg > 0:
        lines.append("This is a later session of the same conversation; the user greets briefly.")
    if feedback:
        lines.append(f"A previous attempt was rejected: {feedback}. Fix that.")
    return "\n".join(lines)


def fixed_sentences(cp: ConversationPlan) -> dict[str, str]:
    """The sentence each event must appear as, shared by the LLM realizer and its gate."""
    return {e.event_id: render_event(e, random.Random(f"{cp.instance_id}:{e.event_id}")) for e in cp.events}


class GeneratedSegment(BaseModel):
    """The generator's reply for one segment (strict structured output: no other field)."""

    model_config = ConfigDict(extra="forbid")

    turns: list[str]


def realize_llm(cp: ConversationPlan, attempt: int = 0, feedback: str = "") -> list[list[Turn]]:
    """Segments written by the configured generator; raises when the reply is not 8 turns."""
    from memlife.models import llm

    client = llm.get_client("generator")
    segments = []
    for seg in range(3):
        obj, c = client.complete_json(
            [{"role": "system", "content": LLM_SYSTEM},
             {"role": "user", "content": _llm_prompt(cp, seg, feedback)}],
            schema=GeneratedSegment, max_tokens=2400, temperature=0.7, seed=attempt,
        )
        if obj is None or len(obj.turns) != 8:
            raise ValueError(f"{cp.instance_id} segment {seg}: generator reply is not 8 turns ({c.error if obj is None else len(obj.turns)})")
        roles = ["user", "assistant"] * 4
        segments.append([Turn(role=r, text=t.strip() or "...") for r, t in zip(roles, obj.turns)])
    return segments


# ----------------------------------------------------------------------------- assembly


def _locate(cp: ConversationPlan, segments: list[list[Turn]], sentences: dict[str, str]) -> dict[str, Span]:
    return {e.event_id: Span(segment=e.segment, turn=e.turn, quote=sentences[e.event_id])
            for e in cp.events if e.speaker == "user"}


def assemble(cp: ConversationPlan, segments: list[list[Turn]], sentences: dict[str, str],
             realizer: str) -> Instance:
    """Join plan and dialogue into a schema instance; quotes are the realized event sentences."""
    spans = _locate(cp, segments, sentences)
    ops = [
        Operation(op_id=o.op_id, type=o.type, target=o.target, target_aliases=list(o.aliases),
                  old_value=o.old_value, new_value=o.new_value, trigger=spans[o.trigger],
                  evidence=[spans[e] for e in o.evidence], unsupported=list(o.unsupported))
        for o in cp.ops
    ]
    probes = []
    for p in cp.probes:
        chain = None
        if p.multi_hop:
            chain = ReasoningChain(source_facts=[spans[e] for e in p.chain_sources],
                                   inferences=list(p.chain_inferences), answer=p.expected_answer)
        probes.append(Probe(
            probe_id=p.probe_id, probe_type=p.probe_type, question=p.question,
            expected_answer=p.expected_answer, provenance=[spans[e] for e in p.provenance],
            reasoning_chain=chain,
            distractors=[Distractor(tag=t, value=v, note=n) for t, v, n in p.distractors],
            multi_hop=p.multi_hop,
            answer_key=AnswerKey(required=list(p.required), forbidden=list(p.forbidden)),
            op_ids=list(p.op_ids)))
    t = cp.topic
    return Instance(instance_id=cp.instance_id, topic_id=t.background.topic_id, category=t.kit.category,
                    subtopic=t.kit.subtopic, op_type=cp.op_type, background=t.background,
                    segments=segments, operations=ops, probes=probes, realizer=realizer)


def template_instance(cp: ConversationPlan, attempt: int = 0) -> Instance:
    segments = realize_template(cp, attempt)
    # The realizer rendered each event inside its user turn; recover that exact sentence.
    sentences = {e.event_id: _sentence_in(segments[e.segment][e.turn].text, e) for e in cp.events}
    return assemble(cp, segments, sentences, "template")


def _sentence_in(turn_text: str, e: Event) -> str:
    """The event's sentence inside a rendered user turn (the one carrying its value or clue)."""
    if e.kind == "clue":
        return e.clue
    # Rendering is deterministic given the turn's RNG draws, so re-rendering is not possible here;
    # instead find the rendered sentence by the bank it came from.
    kw = _slots(e)
    for tpl in _bank(e):
        s = _fill(tpl, **kw)
        if s in turn_text:
            return s
    raise ValueError(f"event {e.event_id} ({e.kind}) not found in its user turn: {turn_text!r}")


def llm_instance(cp: ConversationPlan, attempt: int = 0, feedback: str = "") -> Instance:
    segments = realize_llm(cp, attempt, feedback)
    return assemble(cp, segments, fixed_sentences(cp), "llm")
