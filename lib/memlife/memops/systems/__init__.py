"""MemOps, stage 2: the memory systems that answer (notebook 12).

`registry` names the systems; `baselines` (long context, BM25 over turns or sessions, stores),
`managed` (Mem0, MemOS via `memos_worker`) and `temp_lora`; `reading` is the reader they share;
`subjects` are the reference subjects that read in a model's place (their replies known, the
instrument's check). `answering` is the step: every system over every selected probe -> one reply
each, journalled per system and setting, resumable without a repeated call.

Imports: `memlife.memops.data`, `memlife.base`, `memlife.models`, the shared science.
"""


def __getattr__(name: str):  # a name of the module that had this path: say where it went
    from memlife.base import moved

    raise moved.former_module_attribute(__name__, name)
