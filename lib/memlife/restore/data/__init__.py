"""Restore, stage 1: the data (notebook 20).

`dataset` (which LongMemEval file a profile reads, building it, its statistics) and `units` (a
history as memory units with their gold).

Imports: `memlife.base`, `memlife.models`, the shared science; no other stage.
"""
