"""Restore-audit reference subjects: what each one answers to a reader prompt (docs/design.md,
"Reference subjects"; names, draws and noise in `memlife.subjects`).

A subject stands where the model reader stands: the pipeline builds every prompt (Appendix D's
reader prompt around the injected snippets) and calls `complete_many`; the subject reads the
question and the snippets back out of the prompt and answers without a model. So it sees exactly
what a model reader would see, and its answers go through the same deterministic judge.

* gold: the question's gold answer, always;
* evidence-oracle: the gold answer exactly when every gold unit of the question is in the
  context (its rendered snippet line is in the prompt), else "I don't know" (the reader
  prompt's own abstention);
* noisy-oracle: the evidence-oracle with two planted, seeded errors where the evidence is there:
  a miss (it abstains) with probability `min(miss_cap, miss_base + miss_slope_per_1k x context
  k-tokens)`, and otherwise a wrong answer with probability `confusion`.

The noisy draws are keyed by (seed, question, context): a function of (seed, question, cell,
arm), but two arms that hand over the very same context answer alike, as a temperature-0 reader
does. Keying by arm instead would let the forced-gold policy arm and the restore arm, which are
one prompt when no gold was evicted (and read once), disagree — and plant recoverable errors that
the paper's construction rules out for every deterministic reader.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Mapping, Sequence

import numpy as np

from memlife import subjects as ref
from memlife.longmem import Question
from memlife.models import tokens
from memlife.restore.reading import prompts, read_context
from memlife.restore.data.units import Unit

ABSTENTION = "I don't know"
# The noisy oracle's planted wrong answer (outcome CONFUSE). A refusal: no fixed statement can
# contradict every answer a deterministic judge can check -- LongMemEval's preference answers are
# rubrics that only a reader's judgement can hold advice against, so any other fixed text is
# UNDECIDED there -- while a refusal answers none of them, and every judge (the deterministic one,
# `memlife.restore.judging.answer_judge`, and the paper's LLM judge) grades it INCORRECT on every question.
# Its outcome stays CONFUSE, apart from the abstentions' MISS, in `Answer.outcome`. (Tests check
# it over the real file's 470 questions.)
WRONG_ANSWER = "I'd rather not answer that."
GOLD_REPLY, ABSTAIN = "gold", "abstain"  # outcomes besides memlife.subjects' MISS / CONFUSE / ANSWER

_TODAY, _SNIPPETS, _QUESTION, _ANSWER = ("Today's date: ", "\n\nMemory snippets from earlier conversations:\n",
                                         "\n\nQuestion: ", "\nAnswer:")


def split_prompt(prompt: str) -> tuple[str, str, str]:
    """(today, snippets, question) of a reader prompt; ValueError for any other text. The prompt
    is rebuilt from the three and compared, so a change to the template cannot go unnoticed."""
    head, sep, tail = prompt.rpartition(_QUESTION)
    today, sep2, snippets = head.partition(_SNIPPETS)
    if not (sep and sep2 and today.startswith(_TODAY) and tail.endswith(_ANSWER)):
        raise ValueError("not a reader prompt (memlife.restore.reading.prompts.READER_USER)")
    parts = today[len(_TODAY):], snippets, tail[: -len(_ANSWER)]
    if prompts.READER_USER.format(today=parts[0], snippets=parts[1], question=parts[2]) != prompt:
        raise ValueError("not a reader prompt (memlife.restore.reading.prompts.READER_USER)")
    return parts


def prompt_digest(prompt: str) -> str:
    return hashlib.sha256(prompt.encode("utf-8")).hexdigest()[:16]


def item_key(question_id: str, prompt: str) -> tuple[str, str]:
    """What a noisy draw is keyed by: the question and the context it was handed (as the prompt)."""
    return (question_id, prompt_digest(prompt))


def key_hashes(question_ids: Sequence[str], prompts_: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """The two draws' hashes (miss, confuse) of each (question, prompt)."""
    keys = [item_key(q, p) for q, p in zip(question_ids, prompts_)]
    return (np.array([ref.key_hash("miss", *k) for k in keys], dtype=np.uint64),
            np.array([ref.key_hash("confuse", *k) for k in keys], dtype=np.uint64))


@dataclass(frozen=True)
class Answer:
    text: str
    outcome: str  # GOLD_REPLY, ABSTAIN (evidence missing), or memlife.subjects' ANSWER / MISS / CONFUSE
    available: bool  # every gold unit is in the context
    context_tokens: int | None  # counted only where the noise needs it (the noisy oracle, evidence there)


class SubjectReader:
    """A reader for `memlife.restore.pipeline` that answers as a reference subject.

    `answers` keeps the last call's Answer per prompt, so a notebook can check what the subject
    did (outcome, availability) against what the records say."""

    def __init__(self, subject: str, questions: Sequence[Question], histories: Mapping[str, Sequence[Unit]], *,
                 seed: int = 0, noise: ref.Noise | None = None):
        self.subject = ref.canonical(subject)
        self.seed = int(seed)
        self.noise = noise or ref.Noise()
        self._by_text = {}
        for q in questions:
            if (q.question_date, q.question) in self._by_text:
                raise ValueError(f"questions {self._by_text[q.question_date, q.question].question_id} and "
                                 f"{q.question_id} share their date and text: a prompt could not name one")
            self._by_text[q.question_date, q.question] = q
        self._gold_lines = {q.question_id: [read_context.render([u]) for u in histories[q.question_id] if u.is_gold]
                            for q in questions}
        self.answers: dict[str, Answer] = {}

    @property
    def model(self) -> str:
        return ref.label(self.subject)

    def question_of(self, prompt: str) -> Question:
        today, _, question = split_prompt(prompt)
        try:
            return self._by_text[today, question]
        except KeyError:
            raise ValueError(f"no question {question!r} dated {today!r} was given to the subject") from None

    def available(self, question_id: str, snippets: str) -> bool:
        text = f"\n{snippets}\n"
        return all(f"\n{line}\n" in text for line in self._gold_lines[question_id])

    def answer_many(self, prompt_list: Sequence[str]) -> list[Answer]:
        parsed = [(self.question_of(p), split_prompt(p)[1]) for p in prompt_list]
        if self.subject == ref.GOLD:
            return [Answer(q.answer, GOLD_REPLY, self.available(q.question_id, s), None) for q, s in parsed]
        avail = [self.available(q.question_id, s) for q, s in parsed]
        if self.subject == ref.EVIDENCE_ORACLE:
            return [Answer(q.answer if a else ABSTENTION, ref.ANSWER if a else ABSTAIN, a, None)
                    for (q, _), a in zip(parsed, avail)]
        at = [i for i, a in enumerate(avail) if a]
        ctx = np.array([tokens.count_lines(parsed[i][1].split("\n")) for i in at], dtype=np.float64)
        miss_h, conf_h = key_hashes([parsed[i][0].question_id for i in at], [prompt_list[i] for i in at])
        missed, confused = ref.planted_masks(self.noise, np.array([self.seed]), miss_h, conf_h, ctx,
                                             np.ones(len(at), dtype=bool))
        out = [Answer(ABSTENTION, ABSTAIN, False, None) for _ in prompt_list]
        for j, i in enumerate(at):
            if missed[j]:
                out[i] = Answer(ABSTENTION, ref.MISS, True, int(ctx[j]))
            elif confused[j]:
                out[i] = Answer(WRONG_ANSWER, ref.CONFUSE, True, int(ctx[j]))
            else:
                out[i] = Answer(parsed[i][0].answer, ref.ANSWER, True, int(ctx[j]))
        return out

    def complete_many(self, reqs, desc: str | None = None):
        prompt_list = [r["messages"][-1]["content"] for r in reqs]
        answers = self.answer_many(prompt_list)
        self.answers = dict(zip(prompt_list, answers))
        return [SimpleNamespace(text=a.text) for a in answers]


def profile_noise(profile: str) -> ref.Noise:
    """The planted rates of the profile's 25_restore_controls section (`memlife.subjects.Noise()`'s
    defaults where the profile has no such section)."""
    from memlife.base import config

    try:
        p = config.notebook_params(profile, "25_restore_controls")
    except KeyError:
        return ref.Noise()
    return ref.Noise(miss_base=float(p["miss_base"]), miss_slope_per_1k=float(p["miss_slope_per_1k"]),
                     miss_cap=float(p["miss_cap"]), confusion=float(p["confusion"]))


def factory(subject: str):
    """A `memlife.restore.pipeline.READERS` entry: (questions, histories, seed[, noise]) -> reader
    (`pipeline.make_reader` passes the noisy oracle its profile's noise)."""
    subject = ref.canonical(subject)

    def make(questions, histories, seed, noise: ref.Noise | None = None) -> SubjectReader:
        return SubjectReader(subject, questions, histories, seed=seed, noise=noise)

    make.__name__ = f"{subject.replace('-', '_')}_reader"
    return make
