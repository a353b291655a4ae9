"""Restore, stage 3: reading (notebook 22).

`read_context` (ranking what survived, the regimes, the contexts), `prompts` (the reader and judge
prompts reconstructed from the paper's Appendix D, pinned), `arms` (the policy, restore and clean
full-gold arms, the ablation arms, the reads planned and checked, the readers' answers) and
`subjects` (the reference subjects that read in a model's place).

Imports: `memlife.restore.data`, `memlife.restore.eviction`, `memlife.base`, `memlife.models`,
the shared science.
"""
