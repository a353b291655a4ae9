"""Turn a conversation plan into dialogue: the offline template realizer and the LLM realizer.

Both realizers produce the same thing: 3 segments x 8 turns, user first, assistant last, and
for every planned user event one user sentence that becomes the verbatim quote of the spans
citing it (an assistant echo is a sentence of the assistant's, never cited). The template realizer draws from paraphrase banks with a per-conversation seeded RNG and
gives the assistant real task work (answers, a to-do list it keeps current, drafts). The LLM
realizer writes the turns around the same fixed sentences through role "generator"; the gates
then check both the same way.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

from .plan import USER_SLOTS, ConversationPlan, Event, possessive, yours
from .schema import (
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

# ----------------------------------------------------------------------------- banks

STATE = (
    "Just so you have it, {np} is {v}.",
    "For reference, {np} is {v}.",
    "Quick note before I forget: {np} is {v}.",
    "Oh, and {np} is {v}, in case you need it.",
    "You'll need this later: {np} is {v}.",
    "Can you note that {np} is {v}?",
    "One detail for you: {np} is {v}.",
    "Write this down somewhere: {np} is {v}.",
)
REUSE = (
    "Let's go with {v} for {np}, like I said.",
    "Use {v} for {np}, same as before.",
    "Make sure {v} is what goes in for {np}.",
    "And yes, it's still {v} for {np}.",
    "Put {v} in for {np} when you get to it.",
    "{NP} is {v}, no change there.",
)
UPDATE = (
    "Actually, {np} changed: it's {v} now, not {old}.",
    "Correction: {np} is {v}. The {old} one is out of date.",
    "Sorry, I got that wrong earlier: {np} is {v}, not {old}.",
    "Change of plan: {np} is now {v} instead of {old}.",
    "Scratch {old}; {np} is {v} from now on.",
    "Heads up, {np} is now {v}; it used to be {old}.",
)
FORGET = (
    "Please forget {np} I gave you; I don't want it kept anywhere.",
    "Can you delete {np} from your notes? It was only ever temporary.",
    "Don't keep {np} on file any more, please erase it.",
    "That was a one-off, so please wipe {np} from what you've saved.",
    "I'd rather you didn't hold on to {np}, so please drop it completely.",
)
KEEP = (
    "{NP} stays as it is, though: {v}.",
    "Keep {np} ({v}), that one's still needed.",
    "{NP} hasn't changed, it's still {v}, so leave that.",
    "But hang on to {np}, {v}, I still need it.",
)
NEIGHBOUR = (
    "{OWNER_POSS} {target} is {v}, by the way, so don't mix them up.",
    "Don't mix it up with {owner_poss} {target}, which is {v}.",
    "{OWNER_POSS} {target} is {v}, if that comes up.",
    "Separate thing: {owner_poss} {target} is {v}.",
)
TENTATIVE = (
    "{NP} might change to {v} at some point, but nothing's decided.",
    "There's a chance {np} ends up as {v}, but don't count on that.",
    "Maybe {np} becomes {v} later on, I'm honestly not sure yet.",
)
NEIGHBOUR_TARGET = (
    "Not to be confused with {np}, which is {v}.",
    "Separate detail: {np} is {v}.",
    "{NP} is {v}, which is a different thing.",
    "And in case it comes up, {np} is {v}.",
)
THIRD_PARTY = (
    "{OWNER} thinks {np} is {v}, but that's not right.",
    "{OWNER} keeps saying {np} is {v}; ignore that, it's a mix-up.",
    "If {owner} tells you {np} is {v}, don't go by that.",
)
THIRD_PARTY_VERDICT = (
    "{OWNER} is convinced that {claim}, which isn't really it.",
    "{OWNER} says {claim}, but I wouldn't go that far.",
)
# The assistant's own sentences: a placeholder it offers before the user gives the value, and a
# repetition of a value that the user later withdraws. Neither is evidence; both are candidates.
ECHO_PLACEHOLDER = (
    "Until you confirm, I'll put {v} in as a placeholder for the {target}.",
    "If it helps, I can pencil in {v} for the {target} for now; just tell me the real one.",
    "I've drafted it with {v} standing in for the {target}; swap it for the right one.",
)
ECHO_REPEAT = (
    "I'll keep {v} handy as the {target} for now.",
    "So {v} is the {target} we're using for the moment.",
)

# Said after the kit's own opening line, so the situation is on record from the first turn.
SETTING_LINE = (
    "For context, I'm {setting}.",
    "I'm {setting}, for context.",
    "Background: I'm {setting}.",
    "Some context: I'm {setting}.",
)
OPEN_AGAIN = (
    "Hi again, picking this back up.",
    "Back again with a few more things.",
    "Hey, me again.",
    "Okay, continuing from last time.",
    "Hi, quick follow-up session.",
)
CLOSE_USER = (
    "Great, that's all for now, thanks!",
    "Perfect, thank you. I'll come back later.",
    "Thanks, that helps a lot.",
    "Brilliant, talk soon.",
)
CLOSE_ASSISTANT = (
    "You're welcome! Everything's noted; come back whenever you want to pick this up.",
    "Happy to help. The list is up to date for next time.",
    "Anytime. Good luck with it, and ping me when you're ready for the next step.",
    "Glad it helped. I'll keep the plan as it stands until you tell me otherwise.",
)

# Small talk that makes a user turn sound like a person in the middle of something.
USER_COLOUR = (
    "Work has been hectic, so I'm trying to get ahead of this.",
    "I've been putting this off for a week, honestly.",
    "I only have twenty minutes before my next call.",
    "It's been one of those days.",
    "I'm on my phone, so excuse the typos.",
    "Slowly getting there.",
    "I want to get this sorted before the weekend.",
    "My head is full of other things today.",
)
# Offers that close an assistant turn the way a helpful person would.
ASSISTANT_OFFER = (
    "Want me to turn that into a checklist?",
    "I can draft the message for you if that helps.",
    "Shall I put a date next to it?",
    "Let me know if you'd like a shorter version.",
    "Happy to go into more detail on any of that.",
)
SETTING_BEATS = (
    ("Any general advice while I'm {setting}?",
     "Keep one running list (I'm keeping it here), deal first with anything that needs other people, and batch the "
     "small admin into one evening. Most of the stress comes from surprises, so a quick weekly check-in helps."),
    ("I'm a bit overwhelmed with everything. Where do I even start?",
     "Start with the one thing that has a fixed deadline, then anything that depends on someone else replying. "
     "Everything else can wait until those are moving; ten minutes a day is enough to keep on top of it."),
    ("Can you summarise where we are so far?",
     "So far: {todo_summary}. Nothing is urgent today, and the next step is whatever you can finish in one sitting."),
)

ACK = {
    "state": ("Got it, I've noted {v} as your {target}.", "Noted: your {target} is {v}.",
              "Thanks, {v} for the {target}.", "Okay, {target}: {v}."),
    "reuse": ("Yes, {v} it is.", "Sure, I'll use {v}.", "Understood, {v}."),
    "update": ("Thanks for the correction: {v} replaces {old} for your {target}.",
               "Updated. Your {target} is {v} now, and I won't use {old}.",
               "Got it, {v} instead of {old}."),
    "forget": ("Understood. I've removed the {target} and won't use it again.",
               "Done, the {target} is deleted from my notes.",
               "Okay, I no longer have the {target}."),
    "keep": ("Of course, your {target} stays as it is.", "Yes, I'll keep your {target} unchanged."),
    "neighbour": ("Thanks, I'll keep {their} separate from yours.", "Good to know, I won't confuse the two."),
    "neighbour_target": ("Noted, and I'll keep your {target} apart from the other one.",
                         "Got it, that one is filed separately."),
    "third_party": ("Understood, I'll go by what you tell me.", "Fair enough, I won't read more into it than that.",
                    "Okay, your word is what counts here."),
    "tentative": ("Okay, I'll treat that as a maybe and keep the current one for now.",
                  "Noted as a possibility only; nothing changes yet."),
    "clue": ("That's useful to know.", "Makes sense.", "Good to know, I'll keep that in mind.",
             "Thanks for mentioning it."),
}

ITEM_REQUESTS = (
    ("Can you add '{item}' to my to-do list?",
     "Added '{item}'. Your list now: {list}. Want me to put a rough date next to each?"),
    ("What's still open on my list?",
     "Still open: {list}. I'd tackle '{first}' next, since the rest partly waits on it."),
    ("Which should I do first: {a} or {b}?",
     "I'd do '{a}' first, since it's quick and unblocks the rest; '{b}' can wait a few days."),
    ("Can you turn my list into a plan for this week?",
     "Here's a simple plan: {plan}. I've left the weekend free as a buffer in case something slips."),
    ("Roughly how long will '{item}' take?",
     "Usually under an hour of actual work; block 45 minutes and leave room for waiting on replies."),
    ("I've done '{done}'. Can you cross it off?", "Done, '{done}' is ticked off. Remaining: {list}."),
    ("Could you draft a quick message asking a friend to help with '{item}'?",
     "Sure: 'Hi! Would you be free to help me {item} this week? Any evening works for me, and dinner's on me. Thanks!'"),
    ("Can you remind me about '{item}' tomorrow?",
     "Reminder set for '{item}' tomorrow at 9 am. If it's still open in the evening I'll bring it up again."),
    ("What usually goes wrong with '{item}'?",
     "The usual snag is timing: it often depends on someone else replying. Start early and keep any confirmation emails together."),
)


# Other wordings of the same beats (same slots), so the stock requests vary between conversations.
ITEM_VARIANTS = {
    0: (("Put '{item}' on the list, please.", "Done. The list so far: {list}."),
        ("Don't let me forget to {item}.", "It's on the list now: {list}. I'll bring it up when we next go through it.")),
    1: (("Where are we with the list?", "Open items: {list}. '{first}' is the one I'd move on next."),),
    2: (("Should I start with {a} or {b}?",
         "Go with '{a}' first; it takes the least time, and '{b}' is easier once that's done."),),
    3: (("Can you spread the list over the next few days?", "Sure: {plan}. That keeps each day light."),),
    4: (("Is '{item}' a big job?",
         "Not really. Most of it is waiting on someone else; the hands-on part is maybe half an hour."),),
    5: (("'{done}' is done!", "Nice work, ticked off. Still to go: {list}."),),
    6: (("Can you write a short text asking my neighbour for help to {item}?",
         "Here you go: 'Hi, sorry to bother you! Any chance you could help me {item} one evening this week? Happy to return the favour.'"),),
    7: (("Nudge me about '{item}' on Thursday?", "Will do: a reminder for '{item}' on Thursday morning."),),
    8: (("Anything I should watch out for with '{item}'?",
         "Mostly deadlines and paperwork: check whether it needs a reference number or an appointment, and keep the confirmation."),),
}


# Worked detail the assistant adds to a task answer, as a capable assistant does in a real
# task-oriented session (the paper's evidence conversations average 2,557 tokens, most of it the
# assistant's). Slots are the kit's own to-do items and the user's setting, never a value of the
# user's: these paragraphs carry no digits and name no target, so they add length and realism
# without adding a candidate answer.
ELABORATION = (
    "Here's how I'd break '{item}' down. First, gather what it needs before you start: any account login, the "
    "letter or email that prompted it, and a note of who you dealt with last time. Second, do the part that only "
    "you can do (signing, choosing, paying) in one sitting, so nothing is left half-finished. Third, write down "
    "what happens next and when, because the waiting stage is where these things usually stall. If anything "
    "needs another person, send that message first so their part runs while you get on with yours.",
    "A few practical points on '{item}'. Check whether it can be done online; it is almost always faster than "
    "phoning, and you get a written confirmation you can keep. If you do have to call, go early in the morning "
    "or mid-afternoon, when queues are shortest, and have a pen ready for the name of whoever helps you. Keep "
    "every confirmation email in one folder, so if something goes wrong later you can show exactly what was "
    "agreed and when.",
    "While you're {setting}, it helps to treat '{item}' as a small project rather than a chore. Decide what "
    "'done' looks like, for example a confirmation in your inbox or a form sent off, so you know when to stop. "
    "Then pick one realistic slot for it this week and protect that slot like an appointment. Most people find "
    "that the job itself is quick; what eats the time is starting, switching between tabs, and hunting for "
    "details they should have had to hand.",
    "On '{item}': the common pitfalls are small. People fill in a form, close the tab before the last page "
    "saves, and assume it went through; or they reply to an old email thread that nobody reads any more. To "
    "avoid both, finish each step in one go, look for an explicit confirmation, and start a fresh message with "
    "a clear subject line when you contact someone. If you have not heard back within a week, a short, polite "
    "follow-up usually gets things moving again.",
    "If it were me, I'd pair '{item}' with something else on your list that needs the same things open, such "
    "as the same website, the same paperwork or the same trip out. Batching like that cuts the set-up time "
    "in half. I'd also leave a little slack: things that depend on other people rarely run to the day, and a "
    "buffer stops one delay from knocking the rest of the week over. A short note of where you got to makes "
    "it easy to pick up again after an interruption.",
    "Some context that might help with '{item}': the people on the other side deal with the same requests all "
    "day, so a short, specific message gets a faster answer than a long explanation. Say what you need, what you "
    "have already done, and what you would like them to do next. Attach anything they are likely to ask for, "
    "so they do not have to come back to you with questions. If there is a form, use it rather than free text; "
    "it usually lands in the right queue straight away.",
    "For '{item}', I'd set it up so the next step is always obvious. Write the next physical action at the top "
    "of your notes: not 'sort it out', but something like 'open the website and find the contact form'. Small, "
    "concrete steps are much easier to start on a tired evening. When one step is done, write the next one "
    "straight away. That way, even if you only have ten minutes between other things, you can still move it "
    "forward instead of spending the time working out where you were.",
    "A quick reality check on '{item}': it is worth doing properly once rather than quickly twice. Read any "
    "instructions all the way through before you start, because the one requirement that trips people up is "
    "usually near the end. Check spellings and reference details against the original paperwork rather than "
    "typing them from memory. And if a step asks for something you do not have, stop there and note it, rather "
    "than guessing and having to undo it later.",
    "Thinking about '{item}' alongside everything else you've got on while you're {setting}: I'd rank tasks by "
    "what happens if they slip. Anything with a penalty, a queue or another person waiting goes first; anything "
    "that only affects you can move. It also helps to notice which jobs you keep avoiding, because those are "
    "usually the ones with an unclear first step. Give those a concrete starting point and they tend to take "
    "far less time than the dread suggests.",
    "One more thing on '{item}': keep a tiny log as you go, just the date, who you spoke to, and what they said. "
    "It feels like overkill, but it saves a lot of trouble if a promise slips or a payment goes astray, "
    "and it means you never have to rely on anyone's recollection of a phone call. A running note on your phone is "
    "enough. If someone tells you it will be sorted within a few days, put a reminder in for the day after "
    "that, so you check rather than wait.",
    "If '{item}' turns out to be more involved than expected, don't worry: that is common. Usually it means "
    "there is an extra check on their side, or a second form hidden behind the first one. Ask them directly "
    "what else they need and how long each part normally takes; most people will tell you if you ask plainly. "
    "Then split it into the part you can finish today and the part you are waiting on, and tick off the first "
    "so you can see progress.",
    "Here's a simple routine that works well for jobs like '{item}'. Set aside a short block, put your phone "
    "on silent, and open only what the task needs. Work through it in order, and when you hit something you "
    "cannot answer, park it in a list at the bottom instead of going off to research it. At the end of the "
    "block, deal with the parked questions in one go. You'll be surprised how much gets done when the small "
    "interruptions are batched rather than chased one at a time.",
    "As for '{item}', I'd check a couple of things before committing. Is there a cheaper or simpler option "
    "that does the same job? Is there a deadline you have not been told about, such as a cut-off before a "
    "holiday or the end of a month? And does anyone else need to agree first? Getting those answers up front "
    "usually saves a second round of calls. If the answers are all straightforward, go ahead and do it while "
    "it is fresh in your mind.",
    "To make '{item}' less of a slog: split the thinking from the doing. Spend five minutes deciding exactly "
    "what you want the outcome to be and jot it down. Then do the admin part mechanically, without reopening "
    "the decision every few minutes. Most of the tiredness in tasks like this comes from deciding the same "
    "thing over and over. If new information comes up that really changes things, fine, revisit it, but only "
    "then.",
    "On the timing of '{item}': mornings are usually better for anything that needs a reply the same day, "
    "and the start of the week is better than the end, when offices are clearing their desks. If it involves "
    "a visit in person, check opening hours on the day rather than trusting an old listing, and bring a "
    "printed copy of anything important in case their system is down. None of this is complicated, but it "
    "removes most of the reasons a trip or a call ends up wasted.",
    "About '{item}', a word on cost: before paying for anything, check whether it is already covered by "
    "something you have, such as an existing account, a membership, or a service your employer or bank "
    "offers. People often pay twice for the same thing simply because they forgot what they signed up for "
    "years ago. If there is a fee, ask whether there is a cheaper route that takes a little longer; when "
    "you're not in a rush, the slower option is often fine.",
    "With '{item}', it's worth thinking about who else is affected. If a change on your side means someone "
    "else has to do something, tell them early and plainly, and give them what they need in the same "
    "message. A short heads-up now avoids a confused phone call later. And if you share a calendar or a "
    "household list with anyone, add it there too, so the plan lives somewhere both of you can see it.",
    "If '{item}' keeps sliding down the list, that's a signal, not a failing. Ask what is actually blocking "
    "it: a missing piece of information, a decision you have not made, or simply that it is boring. Each has "
    "a different fix. Missing information means one email; an open decision means ten minutes with a pen; "
    "boredom means pairing it with something pleasant, like doing it with a coffee or a podcast on.",
    "For '{item}', a template message often helps. Keep it to three parts: one line on who you are and why "
    "you're writing, one line on exactly what you're asking for, and one line on how and when to reach you. "
    "Avoid attaching things they have not asked for, and put the most important point first, because many "
    "people only read the opening of a message before deciding what to do with it.",
    "One last suggestion on '{item}': once it is done, take a minute to note what you would do differently "
    "next time, and where you found the details you needed. These jobs come round again, often a year later "
    "when you have lost track of how you did it, and a short note turns a stressful afternoon into a quick "
    "repeat. Keep those notes together with the rest of your household paperwork.",
)
# How a task answer is closed off: the assistant states what it will do next.
FOLLOW_THROUGH = (
    "I'll keep an eye on the rest of the list while you do that, and we can go through whatever is left next "
    "time you check in.",
    "When you're back, tell me how it went and I'll adjust the plan around whatever you learned.",
    "If you'd like, I can also write out the exact steps as a checklist you can tick off as you go.",
    "Once that's moving, the remaining items should be much quicker, since most of them share the same "
    "paperwork.",
    "None of this is urgent enough to stress about; steady progress over the week is plenty.",
    "Let me know which part feels hardest and I'll break that piece down further.",
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
        return THIRD_PARTY_VERDICT
    return {"state": STATE, "reuse": REUSE, "update": UPDATE, "forget": FORGET, "keep": KEEP,
            "neighbour": NEIGHBOUR, "tentative": TENTATIVE, "neighbour_target": NEIGHBOUR_TARGET,
            "third_party": THIRD_PARTY, "echo_placeholder": ECHO_PLACEHOLDER, "echo_repeat": ECHO_REPEAT}[e.kind]


def render_event(e: Event, rng: random.Random) -> str:
    """One sentence for one planned event; a user event's sentence is the verbatim quote of the event."""
    if e.kind == "clue":
        return e.clue
    return _fill(rng.choice(_bank(e)), **_slots(e))


def _ack(e: Event, rng: random.Random) -> str:
    return _fill(rng.choice(ACK[e.kind]), **_slots(e))


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
    kinds = list(range(len(ITEM_REQUESTS)))
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
    u, a = ITEM_REQUESTS[4]
    return u.format(item=state.todo[-1] if state.todo else "the rest"), a


def _beat(k: int, state: _TaskState, rng: random.Random) -> tuple[str, str] | None:
    u, a = rng.choice((ITEM_REQUESTS[k], *ITEM_VARIANTS.get(k, ())))
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
        out.append(rng.choice(FOLLOW_THROUGH))
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
    colour = list(USER_COLOUR)
    rng.shuffle(colour)
    offers = list(ASSISTANT_OFFER)
    rng.shuffle(offers)
    beats = list(SETTING_BEATS)
    rng.shuffle(beats)
    detail = list(ELABORATION)
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
                               _fill(rng.choice(SETTING_LINE), setting=cp.topic.background.setting)]
            elif slot == 0:
                user_parts.append(rng.choice(OPEN_AGAIN))
            elif rng.random() < 0.3:
                user_parts.append(colour.pop() if colour else rng.choice(USER_COLOUR))
            if e is not None:
                user_parts.append(render_event(e, rng))
                asst_parts.append(_ack(e, rng))
            last = seg == 2 and slot == USER_SLOTS - 1
            if last and e is None:
                user_parts.append(rng.choice(CLOSE_USER))
                asst_parts.append(rng.choice(CLOSE_ASSISTANT))
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
    from memlife import llm

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
