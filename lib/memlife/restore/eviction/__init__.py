"""Restore, stage 2: eviction under a token budget (notebook 21).

`evict` (the token-budgeted store, its policies and the grid of evictions) and `importance` (the
LLM-importance scorer's prompt, reconstructed from the paper's Appendix D and pinned).

Imports: `memlife.restore.data`, `memlife.base`, `memlife.models`, the shared science.
"""
