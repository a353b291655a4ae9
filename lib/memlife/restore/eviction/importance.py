"""The LLM-importance scorer's prompt, reconstructed from the restore paper's Appendix D.

As the reader's and the judge's (`memlife.restore.reading.prompts`, which says how they were
rebuilt from the paper's description), the text is ours and pinned by SHA-256 in
tests/test_restore_arms.py: any edit is deliberate and changes every importance score's cache key.

Decoding (Appendix D): temperature 0; max tokens 4.
"""
from __future__ import annotations

IMPORTANCE_MAX_TOKENS = 4

# "The LLM-importance scorer rates a single snippet from 1 for trivial small talk to 10 for a
# durable user fact, preference, or commitment. It never sees the question or gold labels."
IMPORTANCE_SYSTEM = (
    "You rate how important a single snippet of a conversation is to remember long-term. "
    "Reply with one integer from 1 to 10: 1 means trivial small talk, 10 means a durable fact "
    "about the user, a preference, or a commitment."
)
IMPORTANCE_USER = "Snippet: {snippet}\nImportance (1-10):"

PROMPTS = {
    "importance_system": IMPORTANCE_SYSTEM,
    "importance_user": IMPORTANCE_USER,
}


def importance_messages(snippet: str) -> list[dict]:
    return [{"role": "system", "content": IMPORTANCE_SYSTEM},
            {"role": "user", "content": IMPORTANCE_USER.format(snippet=snippet)}]
