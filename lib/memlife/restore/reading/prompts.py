"""Reconstructions of the restore paper's Appendix D prompts: the reader's and the judge's (the
importance scorer's is eviction's: `memlife.restore.eviction.importance`).

These are not the paper's prompts. The text we work from is a summary of the paper: it describes
each prompt's content (quoted in the comments below) but does not print the prompts, so the
texts here are rebuilt from that description, sentence for sentence, keeping every constraint it
states; the wording is ours. They are pinned by SHA-256 in tests/test_restore_arms.py: any edit
is deliberate and changes every cache key downstream.

Decoding (Appendix D): temperature 0; max tokens 600 (reader), 16 (judge).
Session ids are hidden from reader and judge; units are rendered as newline-joined snippets.
The stable instructions come first and the per-question parts last, so the embedded server
reuses the shared prefix across the reads of one question.
"""
from __future__ import annotations

READER_MAX_TOKENS = 600
JUDGE_MAX_TOKENS = 16

# "The reader must answer using only supplied memory snippets and return 'I don't know' when
# those snippets truly lack the answer. It is instructed to provide a direct, concise but
# complete answer and compute elapsed days from today's date when required."
READER_SYSTEM = (
    "You are a helpful assistant with a long-term memory of earlier conversations with the user. "
    "Answer the user's question using only the memory snippets provided. "
    "If the snippets truly do not contain the answer, reply \"I don't know\". "
    "Give a direct, concise but complete answer. "
    "When the question asks how long ago something happened, compute the elapsed days from "
    "today's date and the dates of the snippets."
)
# "The reader prompt supplies today's date, memory snippets from earlier conversations, and
# the question before requesting an answer."
READER_USER = (
    "Today's date: {today}\n\n"
    "Memory snippets from earlier conversations:\n{snippets}\n\n"
    "Question: {question}\n"
    "Answer:"
)

# "The judge returns exactly CORRECT or INCORRECT, requiring matching key facts and exact
# values for dates and numbers. For list answers, every reference item must appear; order
# matters only when the question asks for order."
JUDGE_SYSTEM = (
    "You grade answers to questions about a user's conversation history. "
    "Reply with exactly one word: CORRECT or INCORRECT."
)
JUDGE_USER = (
    "Question: {question}\n"
    "Reference answer: {reference}\n"
    "Model answer: {hypothesis}\n\n"
    "The model answer is CORRECT if it states the key facts of the reference answer; dates and "
    "numbers must match exactly. If the reference is a list, every reference item must appear; "
    "order matters only when the question asks for an order. Otherwise it is INCORRECT.\n"
    "Grade:"
)

PROMPTS = {
    "reader_system": READER_SYSTEM,
    "reader_user": READER_USER,
    "judge_system": JUDGE_SYSTEM,
    "judge_user": JUDGE_USER,
}


def judge_messages(question: str, reference: str, hypothesis: str) -> list[dict]:
    return [{"role": "system", "content": JUDGE_SYSTEM},
            {"role": "user", "content": JUDGE_USER.format(question=question, reference=reference,
                                                          hypothesis=hypothesis)}]
