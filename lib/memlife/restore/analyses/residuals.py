"""R4's residual causes (the paper's Appendix C residual analysis), deterministically.

A residual error stays wrong after the full gold is restored (`decompose`). The paper reads its
1,922 residual records as mostly reader arithmetic failures — cross-session counting and
summation — with at most 20% possibly judge strictness and gold insufficiency negligible. Here
each residual observation gets one cause, from its restore arm's reply, the question and its
answer, checked in this order (the first that applies):

- ``judge_strictness``: an LLM judge marked the restore reply wrong, yet the deterministic scorer
  (:func:`memlife.restore.judging.answer_judge.grade`) finds the answer's key facts in it: a right value
  in other words. Like the paper's, an upper bound on strictness: the scorer can be lenient too.
  Never assigned where the deterministic scorer is the cell's judge (it cannot disagree with
  itself).
- ``gold_insufficient``: the reply abstains (:func:`answer_judge.abstains`): the reader says the
  restored gold does not hold the answer. The observation is oracle-answerable (the same reader
  answered from the gold alone), so this is the reader's reading of the gold, the only sign of
  insufficient gold the records carry.
- ``cross_session_aggregation``: the answer is a number (:func:`answer_judge.numeric_kind`: a
  count, a sum of money, a duration, ...) and the question is multi-session: counting or summing
  over several sessions.
- ``arithmetic``: the answer is a number, within one session or over dates (temporal reasoning).
- ``other``: a wrong non-numeric fact with the gold in front of the reader.
"""
from __future__ import annotations

from typing import Mapping

import pandas as pd

from memlife.longmem import Question
from memlife.restore.judging import answer_judge
from memlife.restore.analyses.paper_analyses import MIN_CLUSTERS
from memlife.restore.analyses.decompose import OBSERVATION_KEY
from memlife.restore.judging.grading import DETERMINISTIC_JUDGE

CAUSES = ("judge_strictness", "gold_insufficient", "cross_session_aggregation", "arithmetic", "other")
MULTI_SESSION = "multi-session"


def classify(question: str, question_type: str, answer, hypothesis, judge: str) -> str:
    """The cause of one residual error (module docstring): `hypothesis` is the restore arm's reply,
    `judge` the judge of the cell that called it wrong."""
    hyp = "" if hypothesis is None or pd.isna(hypothesis) else str(hypothesis)
    if (judge != DETERMINISTIC_JUDGE
            and answer_judge.grade(question, question_type, answer, hyp) == answer_judge.CORRECT):
        return "judge_strictness"
    if answer_judge.abstains(hyp):
        return "gold_insufficient"
    if answer_judge.numeric_kind(question, answer) is not None:
        return "cross_session_aggregation" if question_type == MULTI_SESSION else "arithmetic"
    return "other"


def classify_residuals(records: pd.DataFrame, obs: pd.DataFrame,
                       questions: Mapping[str, Question]) -> pd.DataFrame:
    """One row per residual observation (`obs`, from `decompose.observations(records)`) with its
    restore reply and `cause`. A residual whose question is not in `questions` is an error naming
    it: the records and the data must be the same run's."""
    key = list(OBSERVATION_KEY)
    res = obs[obs["residual"] == 1][key + ["question_type"]]
    restore = records[records["arm"] == "restore"][key + ["hypothesis"]]
    res = res.merge(restore, on=key, how="left", validate="one_to_one")
    missing = sorted(set(res["question_id"]) - set(questions))
    if missing:
        raise KeyError(f"residual records of {len(missing)} question(s) not in the data, e.g. "
                       f"question_id={missing[0]!r}: load the questions of the run that wrote the records")
    res["cause"] = [classify(questions[q].question, t, questions[q].answer, h, j)
                    for q, t, h, j in zip(res["question_id"], res["question_type"], res["hypothesis"], res["judge"])]
    return res.reset_index(drop=True)


def cause_table(classified: pd.DataFrame, min_clusters: int = MIN_CLUSTERS) -> pd.DataFrame:
    """Per reader and judge: each cause's count and share of the residual observations
    (`n_residual`, from `n_residual_questions` questions), and the distinct questions the cause's
    come from (`n_questions`); every cause is a row, a zero count included, so two readers'
    tables line up. Shares are left empty where the residuals come from fewer than `min_clusters`
    questions."""
    rows = []
    for (reader, judge), g in classified.groupby(["reader", "judge"], sort=True):
        nq = g["question_id"].nunique()
        for cause in CAUSES:
            c = g[g["cause"] == cause]
            rows.append(dict(reader=reader, judge=judge, cause=cause, n=len(c), n_residual=len(g),
                             n_residual_questions=nq,
                             share=len(c) / len(g) if nq >= min_clusters else float("nan"),
                             n_questions=c["question_id"].nunique()))
    return pd.DataFrame(rows, columns=["reader", "judge", "cause", "n", "n_residual", "n_residual_questions",
                                       "share", "n_questions"])
