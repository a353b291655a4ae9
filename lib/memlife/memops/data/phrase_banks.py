"""The template realizer's phrase banks: how a planned event is said, and the talk around it.

Each bank holds interchangeable sentence templates for one kind of event (stating, updating,
forgetting, keeping, tentative and third-party values, echoes) or one beat of the task talk a
segment wraps them in (openers, acknowledgements, item requests, elaborations, closings). The
realizer (`memlife.memops.data.realize`) picks among them with a seeded draw and fills the slots.
"""
from __future__ import annotations

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
