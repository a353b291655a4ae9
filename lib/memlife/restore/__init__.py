"""The restore counterfactual: reader arms (policy, restore, clean full-gold), their prompts,
per-question records, and the error decomposition (irreversible / recoverable / residual).

Modules: :mod:`prompts` (Appendix D reader, judge and importance prompts), :mod:`arms` (the
three arms' contexts, the reads and judging, the records in the DESIGN.md contract), :mod:`decompose` (the three-bin decomposition and its command), :mod:`analyses` (R1–R4, robustness, ablations).
"""
