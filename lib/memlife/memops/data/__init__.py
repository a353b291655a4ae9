"""MemOps, stage 1: the benchmark's data (notebooks 10-11).

`kits` (the topic kits under `topics/`) -> `backgrounds` (stage 1) -> `plan` (gold operation
plans, probes) -> `realize` (dialogue, from the `phrase_banks`) -> `gates` (quality gates,
regeneration) -> `longctx` (long histories, ShareGPT's task chat or `corpus` dialogues as filler);
`describe` gives Table 2 and Figures 4-5. `schema` is the instance format; `response` is the reply
format every system returns, and each probe's gold reply and the labels that apply to it (the
answer key, which the systems and the scorer both read).

The scorer reads the data, so the data does not import the scorer: the gate that every probe's gold
reply scores perfect is handed the scorer's check (`gates.check(inst, gold_failures)`), which
`memlife.memops.build` passes when it runs these steps in order.

Imports: `memlife.base`, `memlife.models`, the shared science; no other stage.
"""
