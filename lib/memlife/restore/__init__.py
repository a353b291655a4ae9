"""The restore track (the restore-counterfactual audit: what eviction under a token budget
destroys, versus what retrieval misses, versus what the reader fails to use), in the order a
record flows through it:

- `memlife.restore.data` — which LongMemEval file a profile reads, histories as units (notebook 20).
- `memlife.restore.eviction` — the token-budgeted store and its policies (notebook 21).
- `memlife.restore.reading` — ranking what survived, the arms' contexts, the readers (notebook 22).
- `memlife.restore.judging` — the replies graded, the per-question records (notebook 22).
- `memlife.restore.analyses` — decomposition, the paper's analyses, controls, power (notebooks 01, 23-25).

`pipeline` runs the stages in order (notebooks 20-22 as library calls, the ``run`` command) and
`__main__` is the track's command line.

Imports: `memlife.base`, `memlife.models` and the shared science at the top of the package; never
`memlife.memops` or `memlife.running`. Each stage imports only the stages before it; only
`pipeline` and `__main__` import every stage (tests/test_layout.py holds this).
"""
