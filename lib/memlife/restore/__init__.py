"""The restore track: what eviction under a token budget destroys, versus what retrieval misses,
versus what the reader fails to use (the restore-counterfactual audit).

Data (notebook 20): `dataset` (which LongMemEval file a profile reads, building it) and `units`
(a history as memory units with their gold).
Eviction and reading (notebooks 21-22): `evict` (the token-budgeted store and its policies),
`read_context` (ranking what survived, the regimes, the contexts), `prompts` (reader, judge and
importance prompts reconstructed from the paper's Appendix D), `arms` (policy, restore and clean
full-gold arms, the ablation arms, the records), `answer_judge` with `answer_text` (the offline
grader of LongMemEval answers), `pipeline` (notebooks 20-22 as library calls, the ``run`` command).
Analysis (notebooks 23-25): `decompose` (irreversible / recoverable / residual), `analyses`
(R1-R4, resolution, ablations, small-sample marks), `paper_tables` (the paper's figures beside
ours), `residuals` (R4's causes), `figures`; `subjects` and `controls` are the reference subjects
that check the instrument (notebook 25); `power` simulates runs at the paper's effect sizes for the
power of each claim (notebook 01).

Imports: `memlife.base`, `memlife.models` and the shared science at the top of the package;
never `memlife.memops` or `memlife.running`.
"""
