"""Tiny synthetic LongMemEval-format data for tests that need many small, fast histories.

Not the project's data: every profile reads real LongMemEval questions (`memlife.reconstruct`).
These six templates (one per question type) state a fact in `has_answer` turns and pad the history
with Chit-Chat dialogues, so a test can make 90 histories of 1,500 tokens in a second and know
exactly what the gold says. Their gold sits in the newest part of a history by construction
(evidence 3–90 days before the question, filler 1–400), so no finding rests on them.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import random

from memlife.longmem import DATE_FORMAT, QUESTION_TYPES
from memlife.memops.data import corpus
from memlife.models import tokens

# ---------------------------------------------------------------------------------------------
# Evidence templates. Each yields the evidence sessions (list of turns with has_answer flags and
# a session offset in days before the question date), the question, and its short gold answer.
# Preference answers are short key phrases (LongMemEval's are rubric sentences) so that the
# deterministic scorer can check them.
_NAMES = ["Luna", "Biscuit", "Mochi", "Pepper", "Ziggy", "Olive", "Nacho", "Juniper", "Waffles", "Clover"]
_PETS = ["cat", "dog", "rabbit", "parrot", "hamster", "turtle"]
_CITIES = ["Lisbon", "Kyoto", "Denver", "Tallinn", "Oaxaca", "Porto", "Hanoi", "Valencia", "Quebec City"]
_BOOKS = ["The Left Hand of Darkness", "Piranesi", "Station Eleven", "The Overstory", "Circe",
          "Project Hail Mary", "A Gentleman in Moscow", "The Remains of the Day"]
_PREFS = [("vegan", "snack for my movie night", "I went fully vegan last month, so no dairy or meat for me anymore."),
          ("gluten-free", "dessert to bring to a party", "I found out I'm gluten intolerant, so I avoid anything with wheat now."),
          ("spicy", "dinner recipe for tonight", "I absolutely love spicy food, the hotter the better."),
          ("hiking", "weekend activity", "My favourite way to relax is hiking on mountain trails."),
          ("jazz", "playlist for a road trip", "Jazz is my favourite music, especially old bebop records."),
          ("mystery", "novel to read on holiday", "I can't get enough of mystery novels, I love a good whodunit.")]
_GYMS = ["Iron Temple", "FitHub", "Peak Performance", "CoreZone", "Urban Strength", "Pulse Studio"]
_ITEMS = [("a new lamp", "home"), ("hiking boots", "outdoors"), ("a blender", "kitchen"),
          ("a bike helmet", "cycling"), ("a yoga mat", "fitness"), ("a coffee grinder", "kitchen"),
          ("a desk chair", "home"), ("a rain jacket", "outdoors")]
_HOBBIES = ["pottery class", "salsa lessons", "guitar lessons", "rock climbing course",
            "sourdough baking class", "Spanish course", "chess club", "watercolor workshop"]


def _ack(rng: random.Random) -> str:
    return rng.choice(["That's great to hear!", "Thanks for sharing that with me.",
                       "Nice, I'll keep that in mind.", "Sounds lovely, tell me more anytime."])


def _evidence(qtype: str, rng: random.Random) -> tuple[list[tuple[int, list[dict]]], str, str]:
    """([(days_before_question, turns)], question, answer) for one question of ``qtype``."""
    U = lambda text, gold=False: {"role": "user", "content": text, "has_answer": gold}  # noqa: E731
    A = lambda text, gold=False: {"role": "assistant", "content": text, "has_answer": gold}  # noqa: E731
    if qtype == "single-session-user":
        name, pet = rng.choice(_NAMES), rng.choice(_PETS)
        turns = [U(f"Guess what, I just adopted a {pet} and named it {name}!", True), A(_ack(rng)),
                 U("It's been a fun first week together."), A("I'm glad it's going well.")]
        return [(rng.randint(5, 60), turns)], f"What is the name of the {pet} I adopted?", name
    if qtype == "single-session-assistant":
        book, city = rng.choice(_BOOKS), rng.choice(_CITIES)
        turns = [U(f"I'm flying to {city} next month. Can you recommend one novel for the flight?"),
                 A(f"For a long flight I'd recommend '{book}'; it is absorbing and easy to pick up again.", True),
                 U("Thanks, I'll get it."), A("Enjoy the trip!")]
        q = f"Which novel did you recommend for my flight to {city}?"
        return [(rng.randint(5, 60), turns)], q, book
    if qtype == "single-session-preference":
        key, ask, statement = rng.choice(_PREFS)
        turns = [U(statement, True), A(_ack(rng)), U("Anyway, just wanted you to know."), A("Noted!")]
        return [(rng.randint(5, 60), turns)], f"Can you suggest a {ask}?", key
    if qtype == "multi-session":
        picks = rng.sample(_ITEMS, 3)
        prices = [rng.randint(12, 180) for _ in picks]
        sessions = []
        for (item, _), price, days in zip(picks, prices, sorted(rng.sample(range(3, 90), 3), reverse=True)):
            sessions.append((days, [U(f"I bought {item} today for ${price}.", True), A(_ack(rng)),
                                    U("I've been meaning to get one for a while."), A("Makes sense.")]))
        q = f"How much did I spend in total on {picks[0][0]}, {picks[1][0]} and {picks[2][0]}?"
        return sessions, q, f"${sum(prices)}"
    if qtype == "knowledge-update":
        old, new = rng.sample(_GYMS, 2)
        d1, d2 = sorted(rng.sample(range(3, 90), 2), reverse=True)
        s1 = [U(f"I signed up at a gym called {old} near my office.", True), A(_ack(rng)),
              U("Hoping to go three times a week."), A("Good plan.")]
        s2 = [U(f"I cancelled {old} and joined {new} instead, it's closer to home.", True), A(_ack(rng)),
              U("The classes there are better too."), A("Great choice.")]
        return [(d1, s1), (d2, s2)], "Which gym am I a member of now?", new
    if qtype == "temporal-reasoning":
        hobby, days = rng.choice(_HOBBIES), rng.randint(4, 80)
        turns = [U(f"Today I went to the first session of my {hobby}!", True), A(_ack(rng)),
                 U("I was nervous but it was fun."), A("That's how it starts.")]
        q = f"How many days ago did I attend the first session of my {hobby}?"
        return [(days, turns)], q, f"{days} days"
    raise ValueError(f"unknown question type {qtype!r}")


def _fmt(d: dt.datetime) -> str:
    return d.strftime(DATE_FORMAT)


def _session_tokens(turns: list[dict]) -> int:
    return sum(tokens.count(t["content"]) for t in turns)


def build(n_questions: int, history_tokens: int, seed: int) -> list[dict]:
    """Question records in the LongMemEval-S format, deterministic for (n_questions, history_tokens, seed).

    Question types cycle through :data:`QUESTION_TYPES`. Each history holds the evidence sessions
    plus real chit-chat dialogues (distinct within a history) until it reaches ``history_tokens``;
    sessions are dated on distinct days before the question date and listed chronologically.
    """
    if n_questions < 1 or history_tokens < 1:
        raise ValueError("n_questions and history_tokens must be positive")
    dialogues = corpus.load_dialogues()
    dialogue_tokens: dict[int, list[int]] = {}
    records = []
    for qi in range(n_questions):
        rng = random.Random(f"longmem-build:{seed}:{qi}")
        qtype = QUESTION_TYPES[qi % len(QUESTION_TYPES)]
        qid = hashlib.sha256(f"{seed}:{qi}:{qtype}".encode()).hexdigest()[:8]
        question_date = dt.datetime(2023, 1, 1, 12, 0) + dt.timedelta(days=rng.randint(0, 300),
                                                                      minutes=rng.randint(0, 600))
        evidence, question, answer = _evidence(qtype, rng)
        sessions: list[tuple[dt.datetime, str, list[dict]]] = []
        answer_ids = []
        for ei, (days_before, turns) in enumerate(evidence):
            sid = f"answer_{qid}_{ei + 1}"
            answer_ids.append(sid)
            when = question_date - dt.timedelta(days=days_before, hours=rng.randint(1, 9))
            sessions.append((when, sid, turns))
        total = sum(_session_tokens(t) for _, _, t in sessions)
        order = rng.sample(range(len(dialogues)), len(dialogues))
        used_days = {(question_date.date() - w.date()).days for w, _, _ in sessions}
        for di in order:
            if total >= history_tokens:
                break
            if di not in dialogue_tokens:
                dialogue_tokens[di] = [tokens.count(t["content"]) for t in dialogues[di].turns]
            days = rng.randint(1, 400)
            while days in used_days:
                days = rng.randint(1, 400)
            used_days.add(days)
            when = question_date - dt.timedelta(days=days, minutes=rng.randint(0, 600))
            # The last dialogue is cut after the turn that reaches the target length (whole
            # turns, at least two), so short histories do not overshoot by a whole dialogue.
            turns = []
            for t, n_tok in zip(dialogues[di].turns, dialogue_tokens[di]):
                if total >= history_tokens and len(turns) >= 2:
                    break
                turns.append({"role": t["role"], "content": t["content"]})
                total += n_tok
            sessions.append((when, f"chitchat_{dialogues[di].dialogue_id}", turns))
        sessions.sort(key=lambda s: (s[0], s[1]))
        records.append({
            "question_id": qid,
            "question_type": qtype,
            "question": question,
            "answer": answer,
            "question_date": _fmt(question_date),
            "haystack_session_ids": [s[1] for s in sessions],
            "haystack_dates": [_fmt(s[0]) for s in sessions],
            "haystack_sessions": [s[2] for s in sessions],
            "answer_session_ids": answer_ids,
        })
    return records


