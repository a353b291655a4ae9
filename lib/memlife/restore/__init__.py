"""The restore counterfactual: reader arms (policy, restore, clean full-gold), their prompts,
per-question records, and the error decomposition (irreversible / recoverable / residual).

Modules: :mod:`prompts` (Appendix D reader, judge and importance prompts), :mod:`arms` (the
three arms' contexts and the ablation arms, the reads, judging and the judge audit, the records
in the records contract, `decompose.CONTRACT_COLUMNS`), :mod:`answer_judge` (the deterministic judge of LongMemEval answers:
CORRECT, INCORRECT or UNDECIDED), :mod:`decompose` (the three-bin decomposition and its command),
:mod:`analyses` (R1–R4, robustness, ablations), :mod:`pipeline` (notebooks 20–22 as library
calls, and the ``run`` command).
"""
