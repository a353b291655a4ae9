"""MemOps, stage 3: scoring the replies (notebook 12).

`stance` reads a reply's values, `metrics` assigns the paper's labels, `judging` is the LLM
judge's prompt and parsing, `paraphrase` the scorer's error rate on unseen wording; `labels` is
the step: replies -> the scorer's labels, then the judge's on the replies it is asked about
(journalled, resumable), -> the per-probe records.

Imports: `memlife.memops.data`, `memlife.memops.systems`, `memlife.base`, `memlife.models`, the
shared science.
"""
