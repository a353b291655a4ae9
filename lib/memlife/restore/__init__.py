"""The restore counterfactual: reader arms (policy, restore, clean full-gold), their prompts,
per-question records, and the error decomposition (irreversible / recoverable / residual).

Modules: :mod:`prompts` (reader, judge and importance prompts reconstructed from the paper's
summary of its Appendix D), :mod:`arms` (the
three arms' contexts and the ablation arms, the reads, judging and the judge audit, the records
in the records contract, `decompose.CONTRACT_COLUMNS`), :mod:`answer_judge` (the deterministic judge of LongMemEval answers:
CORRECT, INCORRECT or UNDECIDED), :mod:`decompose` (the three-bin decomposition and its command),
:mod:`analyses` (R1–R4, R3's resolution, robustness, ablations, small-sample marks), :mod:`residuals`
(R4's residual causes), :mod:`pipeline` (notebooks 20–22 as library calls, and the ``run``
command).
"""
