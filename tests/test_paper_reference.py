"""The paper's reported figures, checked against the paper text itself."""
from pathlib import Path

import pytest

from memlife import paper_reference as pr

ROOT = Path(__file__).resolve().parents[1]
# The papers sit in shared/ inside a checkout that has one, or next to the checkout.
CANDIDATES = [ROOT / "shared" / "papers" / pr.RESTORE_PAPER,
              ROOT.parent / "shared" / "papers" / pr.RESTORE_PAPER,
              Path("/work/shared/papers") / pr.RESTORE_PAPER]


def _paper_text() -> str:
    for p in CANDIDATES:
        if p.is_file():
            return " ".join(p.read_text(encoding="utf-8").split())
    pytest.skip("the restore paper text is not next to this checkout")


def test_every_quote_is_in_the_paper_and_prints_its_value():
    text = _paper_text()
    for f in pr.RESTORE_FIGURES:
        assert " ".join(f.quote.split()) in text, f"quote not in paper: {f.quote!r}"
        assert f.printed in f.quote, f"{f.key}: {f.printed!r} not in its quote"
        printed = f.printed.rstrip("%")
        value = float(printed) / (100 if f.printed.endswith("%") else 1)
        assert value == pytest.approx(f.value), f.key


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
