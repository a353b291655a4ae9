"""The paper's reported figures, checked against the paper text itself (a pinned excerpt)."""
import pytest

from memlife import paper_reference as pr

from paper_text import excerpt, lines_missing_from_full_text

# tests/data/papers/001_27ccb21e463f18b5.excerpt.txt: the restore paper's lines that hold the quotes.
EXCERPT_SHA256 = "411656e3d22b426d4890882549c8cb7cac4b1b5dd6689e59ecddfcf27f4db3d2"


def _excerpt() -> list[str]:
    return excerpt(pr.RESTORE_PAPER, EXCERPT_SHA256)


def _normalized(text: str) -> str:
    return " ".join(text.split())


def test_every_quote_is_in_the_paper_and_prints_its_value():
    text = _normalized(" ".join(_excerpt()))
    for f in pr.RESTORE_FIGURES:
        assert _normalized(f.quote) in text, f"quote not in paper: {f.quote!r}"
        assert f.printed in f.quote, f"{f.key}: {f.printed!r} not in its quote"
        printed = f.printed.rstrip("%k")
        value = float(printed) / (100 if f.printed.endswith("%") else 1) * (1000 if f.printed.endswith("k") else 1)
        assert value == pytest.approx(f.value), f.key


def test_the_excerpt_is_the_papers_text_and_only_what_the_quotes_need():
    lines = _excerpt()
    # every line holds a quote: the excerpt copies no more of the paper than the tests read
    quotes = [_normalized(f.quote) for f in pr.RESTORE_FIGURES]
    assert lines and all(any(q in _normalized(line) for q in quotes) for line in lines)
    # and is the paper's text, line for line, wherever the full text sits beside the repository
    assert lines_missing_from_full_text(pr.RESTORE_PAPER, lines) in (None, [])


def test_headline_values():
    assert [pr.figure("two_bin_share", policy=p, budget=80000, regime="topk")
            for p in ("fifo", "random", "redundancy", "importance")] == [0.71, 0.73, 0.67, 0.60]
    assert pr.figure("r2_holm_rejections") == 4 and pr.figure("r2_family_size") == 12
    assert pr.figure("r3_dissociating_pairs") == 0 and pr.figure("r3_matched_pairs") == 9
    assert (pr.figure("r4_residual_primary_reader"), pr.figure("r4_residual_stronger_reader")) == (59, 28)
    assert (pr.figure("judge_percent_agreement"), pr.figure("judge_cohen_kappa")) == (0.957, 0.90)
    assert pr.figure("oracle_answerable_n") == 336
    with pytest.raises(KeyError):
        pr.figure("two_bin_share", policy="fifo")  # ambiguous: three budgets


def test_paper_budget_by_rank():
    assert [pr.paper_budget(b, [2000, 500, 1000]) for b in (500, 1000, 2000)] == [8000, 30000, 80000]
    assert [pr.paper_budget(b, [1, 2, 3, 4]) for b in (1, 2, 4)] == [8000, None, 80000]
    with pytest.raises(ValueError):
        pr.paper_budget(7, [1, 2, 3])
