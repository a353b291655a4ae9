"""The reader's prompt is neutral about forgetting and updating; the hint the paper does not report
is a profile parameter, off by default, and a prompt change never reuses old answers."""
import pytest

from memlife.base import config
from memlife.memops.systems import answering, reading
from memlife.memops.data.response import RESPONSE_INSTRUCTIONS

HINTS = ("forget", "superseded", "current", "latest", "correction", "never", "gone", "stale", "old value")


def test_the_default_prompt_says_nothing_about_forgetting_or_updating():
    for text in (reading.SYSTEM_PROMPT, RESPONSE_INSTRUCTIONS):
        # the operation types' names ("forget") are the reply's format, not advice
        words = text.casefold().replace('"remember"|"forget"|"update"|"reflect"', "")
        assert not [h for h in HINTS if h in words], text
    # the hinted prompt is exactly what the reader was told before
    assert "Never state a value the user asked you to forget" in reading.HINTED_SYSTEM_PROMPT
    assert "corrections replace old values" in reading.HINTED_SYSTEM_PROMPT
    assert reading.system_prompt() == reading.SYSTEM_PROMPT
    assert reading.system_prompt(True) == reading.HINTED_SYSTEM_PROMPT


def test_the_reader_sends_the_prompt_its_hint_asks_for():
    plain = reading.Reader(client=None).messages("ctx", "q")[0]["content"]
    hinted = reading.Reader(client=None, memory_hint=True).messages("ctx", "q")[0]["content"]
    assert plain == reading.SYSTEM_PROMPT and hinted == reading.HINTED_SYSTEM_PROMPT


def test_the_hint_is_off_in_every_profile_and_changes_the_run_key():
    assert answering.EvalConfig().memory_hint is False
    for profile in ("smoke", "quick", "paper"):
        assert config.notebook_params(profile, "12_memops_eval")["memory_hint"] is False
    cfg = answering.EvalConfig()
    on = answering.EvalConfig(memory_hint=True)
    assert answering.run_key(cfg, "m") != answering.run_key(on, "m")  # other answers, never the old journal's
    assert answering.run_key(cfg, "m") == answering.run_key(answering.EvalConfig(), "m")


@pytest.mark.parametrize("subject", ["gold"])
def test_a_reference_subject_reads_no_prompt_so_its_key_ignores_it(subject):
    a = answering.EvalConfig(subject=subject)
    b = answering.EvalConfig(subject=subject, memory_hint=True)
    assert answering.run_key(a, "m") == answering.run_key(b, "m")
