"""The MemOps track: building the benchmark, running memory systems on it, and scoring them.

Building (notebooks 10-11): `kits` (topic kits) -> `backgrounds` (stage 1) -> `plan` (gold
operation plans, probes) -> `realize` (dialogue, from the `phrase_banks`) -> `gates` (quality
gates, regeneration) -> `longctx` (long histories, with `corpus` dialogues as filler) -> `build`
(the whole pipeline) and `describe` (Table 2, Figures 4-5); `schema` is the instance format.

Running (notebook 12): `registry` names the systems; `systems` (long context, BM25 over turns
or sessions, stores), `managed` (Mem0, MemOS via `memos_worker`) and `temp_lora`; `reading` is
the reader they share and `response` the reply every system returns; `evaluate` makes the
resumable per-probe records.

Scoring (notebooks 12-14): `stance` reads a reply's values, `metrics` assigns the paper's labels,
`judging` is the LLM judge, `aggregate` builds the tables, `analyses` and `figures` the
statistics and plots, `paraphrase` the scorer's error rate on unseen wording; `subjects` and
`controls` are the reference subjects that check the instrument (notebook 14); `power` simulates
runs at the paper's rates for the power of each claim (notebook 01).

Imports: `memlife.base`, `memlife.models` and the shared science at the top of the package;
never `memlife.restore` or `memlife.running`.
"""
