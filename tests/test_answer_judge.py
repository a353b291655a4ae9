"""The deterministic judge (memlife.restore.judging.answer_judge) on LongMemEval's real answers: every gold
answer is CORRECT and every abstention INCORRECT over the oracle file's 470 questions, hand-computed
units, and the error rates on the hand-graded cases (`pytest -s` prints the table)."""
from pathlib import Path

import pytest

from memlife import reconstruct
from memlife.restore import __main__ as cli
from memlife.restore.judging import answer_judge, answer_text
from memlife.restore.reading import subjects as rsub

CASES = Path(__file__).parent / "data" / "longmemeval_judge_cases.yaml"
ABSTENTIONS = ("I don't know.", "I do not know", "That is not mentioned in the snippets.",
               rsub.ABSTENTION, rsub.WRONG_ANSWER, "I can't tell from these notes.")
MAX_ERROR_RATE = 0.10


@pytest.fixture(scope="module")
def questions():
    """The oracle file's 470 non-abstention questions (ids ending _abs are left out)."""
    qs = [r for r in reconstruct.read_oracle() if not r["question_id"].endswith("_abs")]
    assert len(qs) == 470
    return qs


@pytest.fixture(scope="module")
def cases():
    return answer_judge.graded(answer_judge.load_cases(CASES))


def test_every_gold_answer_is_correct(questions):
    labels = {r["question_id"]: answer_judge.grade(r["question"], r["question_type"], r["answer"], r["answer"])
              for r in questions}
    assert {q: lab for q, lab in labels.items() if lab != answer_judge.CORRECT} == {}
    # int answers are read as their digits
    ints = [r for r in questions if isinstance(r["answer"], int)]
    assert ints and all(answer_judge.grade(r["question"], r["question_type"], r["answer"], str(r["answer"]))
                        == answer_judge.CORRECT for r in ints)


def test_the_gold_answers_key_facts_grade_it_correct_without_the_text_shortcut(questions):
    """Beyond the exact-text rule: the key facts read from each answer find themselves in it,
    except where an answer has nothing checkable (rubrics; a few sentences without a name or a
    number)."""
    facts = {r["question_id"]: answer_judge._grade_facts(r["question"], r["question_type"], str(r["answer"]), str(r["answer"]))
             for r in questions}
    rubrics = {r["question_id"] for r in questions if answer_judge.is_rubric(r["question_type"], r["answer"])}
    assert len(rubrics) == 30 and all(facts[q] == answer_judge.UNDECIDED for q in rubrics)
    assert answer_judge.INCORRECT not in facts.values()
    assert sum(lab != answer_judge.CORRECT for q, lab in facts.items() if q not in rubrics) <= 8


@pytest.mark.parametrize("abstention", ABSTENTIONS)
def test_an_abstention_or_refusal_is_incorrect_on_every_question(questions, abstention):
    got = {r["question_id"]: answer_judge.grade(r["question"], r["question_type"], r["answer"], abstention) for r in questions}
    assert {q: lab for q, lab in got.items() if lab != answer_judge.INCORRECT} == {}


def test_an_empty_reply_is_incorrect():
    assert answer_judge.grade("What is my cat's name?", "single-session-user", "Luna", "  ") == answer_judge.INCORRECT
    assert answer_judge.grade("What is my cat's name?", "single-session-user", "Luna", None) == answer_judge.INCORRECT


# ----------------------------------------------------------------------------- hand-computed units

DAYS = "How many days passed between the day I bought the tent and the day I used it?"
SEVEN_OR_EIGHT = "7 days. 8 days (including the last day) is also acceptable."
BEST_5K = "25 minutes and 50 seconds (or 25:50)"


@pytest.mark.parametrize("question, qtype, answer, hyp, label", [
    # alternatives: "X. Y is also acceptable", "X (or Y)", a range, an acronym
    (DAYS, "temporal-reasoning", SEVEN_OR_EIGHT, "8 days", answer_judge.CORRECT),
    (DAYS, "temporal-reasoning", SEVEN_OR_EIGHT, "one week", answer_judge.CORRECT),
    (DAYS, "temporal-reasoning", SEVEN_OR_EIGHT, "7 or 8 days", answer_judge.CORRECT),
    (DAYS, "temporal-reasoning", SEVEN_OR_EIGHT, "9 days", answer_judge.INCORRECT),
    ("What was my best 5K time?", "knowledge-update", BEST_5K, "25:50", answer_judge.CORRECT),
    ("What was my best 5K time?", "knowledge-update", BEST_5K, "26 minutes", answer_judge.INCORRECT),
    ("How long had I used the rug?", "temporal-reasoning",
     "One week. Answers ranging from 7 days to 10 days are also acceptable.", "9 days", answer_judge.CORRECT),
    ("Where did I study?", "single-session-user", "University of California, Los Angeles (UCLA)", "UCLA.", answer_judge.CORRECT),
    # number words and digits
    ("How many bikes do I own?", "single-session-user", "three", "You own 3 bikes.", answer_judge.CORRECT),
    ("How many items do I need to return?", "multi-session", "3", "three", answer_judge.CORRECT),
    ("How many items do I need to return?", "multi-session", "3", "You have 4 items", answer_judge.INCORRECT),
    ("How many comments were there?", "multi-session", "25", "twenty-five comments", answer_judge.CORRECT),
    ("How many weeks ago did I start?", "temporal-reasoning", "4", "Four weeks ago.", answer_judge.CORRECT),
    ("How many weeks ago did I start?", "temporal-reasoning", "4", "28 days ago.", answer_judge.CORRECT),
    ("How long is my commute?", "multi-session", "an hour and a half", "90 minutes", answer_judge.CORRECT),
    ("How long did I work there?", "multi-session", "1 year and 5 months", "17 months", answer_judge.CORRECT),
    # money and thousands separators
    ("How much did I spend?", "multi-session", "$1,250", "about $1250", answer_judge.CORRECT),
    ("How much did I spend?", "multi-session", "$383", "You spent $3830.", answer_judge.INCORRECT),
    ("How much was I pre-approved for?", "knowledge-update", "$400,000", "$400k", answer_judge.CORRECT),
    ("How much was I pre-approved for?", "knowledge-update", "$400,000", "four hundred thousand dollars", answer_judge.CORRECT),
    ("How much cashback did I earn?", "multi-session", "$0.75", "75 cents", answer_judge.CORRECT),
    # the gold value among other values
    ("How much have I spent on my bike?", "multi-session", "$185",
     "$40 for a chain, $120 for a helmet and $25 for lights: $185.", answer_judge.CORRECT),  # a breakdown
    ("How much have I spent on my bike?", "multi-session", "$185", "$40 + $120 = $160 in total", answer_judge.INCORRECT),
    ("How much have I spent on my bike?", "multi-session", "$185", "Either $185 or $200.", answer_judge.INCORRECT),  # hedge
    ("How many bikes do I own?", "knowledge-update", "4", "You used to have 3 bikes, but now you have 4.", answer_judge.CORRECT),
    ("How many bikes do I own?", "knowledge-update", "4", "You had 4 bikes before; now you have 3.", answer_judge.INCORRECT),
    ("How many plants did I buy?", "multi-session", "3", "You bought 3 plants on 2 trips.", answer_judge.UNDECIDED),
    # negation
    ("What is my cat's name?", "single-session-user", "Luna", "Your cat is not Luna anymore.", answer_judge.INCORRECT),
    ("What is my cat's name?", "single-session-user", "Luna", "It's no longer Luna; she is Mochi now.", answer_judge.INCORRECT),
    ("What is my cat's name?", "single-session-user", "Luna", "No, it's Luna.", answer_judge.CORRECT),
    ("Which gym am I a member of now?", "knowledge-update", "FitHub", "FitHub, instead of Iron Temple.", answer_judge.CORRECT),
    ("Which gym am I in now?", "knowledge-update", "Iron Temple", "FitHub instead of Iron Temple.", answer_judge.INCORRECT),
    ("How many bikes do I own?", "knowledge-update", "3", "You don't have 4 bikes any more; you have 3.", answer_judge.CORRECT),
    # choices, yes/no, order, rubrics
    ("Which came first, the bike or the car?", "temporal-reasoning", "bike", "The bike, then the car.", answer_judge.CORRECT),
    ("Which came first, the bike or the car?", "temporal-reasoning", "bike", "Before the bike, the car.", answer_judge.INCORRECT),
    ("Did I finish the book?", "knowledge-update", "Yes", "Yes, last week.", answer_judge.CORRECT),
    ("Did I finish the book?", "knowledge-update", "Yes", "No, not yet.", answer_judge.INCORRECT),
    ("What is the order of the airlines I flew?", "temporal-reasoning", "JetBlue, Delta, United",
     "Delta, then JetBlue, then United.", answer_judge.INCORRECT),
    ("Any tips?", answer_judge.PREFERENCE, "The user would prefer tips about their granite counters.", "Wipe granite daily.",
     answer_judge.UNDECIDED),
    ("Any tips?", answer_judge.PREFERENCE, "The user would prefer tips about their granite counters.", "I don't know.",
     answer_judge.INCORRECT),
    # an abstention that still states the answer is graded on the answer
    ("What is my cat's name?", "single-session-user", "Luna", "I'm not sure, but I think it's Luna.", answer_judge.CORRECT),
])
def test_hand_computed_units(question, qtype, answer, hyp, label):
    assert answer_judge.grade(question, qtype, answer, hyp) == label


def test_normalize_is_the_one_normalizer():
    from memlife.restore.reading import arms

    assert not hasattr(arms, "normalize") and not hasattr(arms, "deterministic_correct")
    assert answer_text.normalize("I don't know: Twenty-Five $1,250 for the cats.") == "i do not know 25 $ 1250 for cats"


def test_alternatives_split_only_where_safe():
    alts = lambda a: [(x.text, x.is_range) for x in answer_judge.alternatives(a)]  # noqa: E731
    assert alts(SEVEN_OR_EIGHT) == [("7 days.", False), ("8 days", False)]
    assert alts("11 days (or 12 days, if April 15th to 22nd is considered as 8 days)") == [
        ("11 days", False), ("12 days", False)]
    assert alts("One week. Answers ranging from 7 days to 10 days are also acceptable.") == [
        ("One week.", False), ("7 days to 10 days", True)]
    assert alts("Mod Podge or another sealant") == [("Mod Podge", False), ("another sealant", False)]
    one = "I recommended learning Ruby, Python, or PHP as a back-end programming language."
    assert alts(one) == [(one, False)]


# ----------------------------------------------------------------------------- the hand-graded cases


def test_the_cases_cover_every_type(cases):
    counts = cases.groupby("question_type").size()
    assert len(counts) == 6 and (counts >= 15).all() and len(cases) >= 100
    assert set(cases["expected"]) <= set(answer_judge.LABELS)


def test_error_rates_per_type(cases):
    table = answer_judge.error_rates(cases)
    print("\n" + table.to_markdown(index=False, floatfmt=".3f"))
    per_type = table[table["question_type"] != "all"]
    assert (per_type["error_rate"].fillna(0) <= MAX_ERROR_RATE).all(), per_type
    # an abstention or a wrong number is never graded CORRECT
    strict = cases[cases["kind"].isin(["abstention", "wrong_number"]) & (cases["expected"] == answer_judge.INCORRECT)]
    assert len(strict) >= 30 and (strict["label"] != answer_judge.CORRECT).all(), strict[strict["label"] == answer_judge.CORRECT]
    assert (cases.loc[cases["kind"] == "abstention", "label"] == answer_judge.INCORRECT).all()
    assert table.loc[table["question_type"] == "all", "n_cases"].item() == len(cases)


def test_error_rates_count_undecided_apart_from_errors():
    import pandas as pd

    df = pd.DataFrame({"question_type": ["t"] * 4, "expected": [answer_judge.CORRECT, answer_judge.CORRECT, answer_judge.INCORRECT, answer_judge.INCORRECT],
                       "label": [answer_judge.CORRECT, answer_judge.UNDECIDED, answer_judge.CORRECT, answer_judge.INCORRECT]})
    row = answer_judge.error_rates(df).iloc[0]
    assert (row.n_cases, row.n_decided, row.n_wrong, row.n_undecided_decidable, row.n_false_correct) == (4, 3, 1, 1, 1)
    assert row.error_rate == pytest.approx(1 / 3) and row.undecided_share == pytest.approx(0.25)


def test_the_command_prints_the_table(capsys, tmp_path):
    assert cli.main(["judge-cases", str(CASES)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("| question_type") and "| single-session-preference " in out and "| all " in out
    bad = tmp_path / "cases.yaml"
    bad.write_text("single-session-user:\n  - {id: nope, expected: CORRECT, hypothesis: x}\n")
    assert cli.main(["judge-cases", str(bad)]) == 2
    assert "question 'nope' is not in the oracle file" in capsys.readouterr().err
