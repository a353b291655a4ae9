"""tokens.count_line / count_lines: sums of parts that must equal the whole text's count."""
from hypothesis import given, settings
from hypothesis import strategies as st

from memlife.models import tokens

# Characters that stress the pre-tokenizer: spaces and newlines of several kinds, punctuation that
# pieces absorb ("/", "'s"), digits, capitals, a Greek final sigma, an ideograph and an emoji.
ALPHABET = st.sampled_from(list("ab Z9:;./'s\n\r\t\u00a0\u3000ΣσЖ字😀-[]") + [": ", "\n[", " \n", "'s", "//"])
TEXT = st.lists(ALPHABET, max_size=30).map("".join)

LINES = ["[session 1] user: I moved to Lisbon in 2019.", "[session 1] assistant: Noted: Lisbon!",
         "[session 12] user:   spaced out  ", "[session 12] user: ends with a newline\n",
         "- a memory: with a colon", "(no memory)", "[session 2] user: ΟΔΟΣ Σ: 字😀 it's 12345"]


def test_known_lines_count_as_wholes():
    for line in LINES:
        assert tokens.count_line(line) == tokens.count(line), line
    for k in range(len(LINES) + 1):
        assert tokens.count_lines(LINES[:k]) == tokens.count("\n".join(LINES[:k]))


@settings(max_examples=300, deadline=None)
@given(st.lists(TEXT, max_size=6))
def test_any_lines_count_as_their_join(lines):
    # Lines that start with whitespace or "/" (where the parts would not add up) are counted whole:
    # the result is the join's count either way.
    assert tokens.count_lines(lines) == tokens.count("\n".join(lines))
    for line in lines:
        assert tokens.count_line(line) == tokens.count(line)



def test_a_content_is_encoded_once_across_histories():
    # The same turn at another session number: only its new head is encoded. The cache is this
    # process's, which earlier tests in the same worker have filled: start from an empty one.
    tokens._count_part.cache_clear()
    tokens.count_lines(["[session 3] user: a turn that recurs", "[session 3] assistant: its reply"])
    before = tokens._count_part.cache_info().misses
    tokens.count_lines(["[session 7] user: a turn that recurs", "[session 7] assistant: its reply"])
    assert tokens._count_part.cache_info().misses - before == 2  # "[session 7] user:", "[session 7] assistant:"
