"""The MemOps track, in the order a record flows through it: the benchmark's data, the memory
systems that answer its probes, the scoring of their replies, the analyses of the labels.

- `memlife.memops.data` — building the benchmark (notebooks 10-11): instances, their probes and gold.
- `memlife.memops.systems` — the memory systems and the answering step: instances -> replies (notebook 12).
- `memlife.memops.scoring` — the scorer and the judge: replies -> labels (notebook 12).
- `memlife.memops.analyses` — labels -> the paper's tables and figures, the reference subjects'
  checks of the instrument, power (notebooks 01, 13, 14).

`build` runs the data stage's steps in order with the scorer's gold check among the gates (the
benchmark's build, notebooks 10-11); `__main__` is the track's command line (build, validate,
describe, score a responses file, evaluate).

Imports: `memlife.base`, `memlife.models` and the shared science at the top of the package; never
`memlife.restore` or `memlife.running`. Each stage imports only the stages before it; only
`build` and `__main__` import more than one stage (tests/test_layout.py holds this).
"""
