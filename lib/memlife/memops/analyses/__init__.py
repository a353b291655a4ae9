"""MemOps, stage 4: the analyses of the per-probe records (notebooks 01, 13, 14).

`aggregate` builds the tables (scorer and judge labels resolved, agreement), `paper_analyses` the
statistics of Section 4 and what the paper leaves out, `figures` the plots; `controls`
checks the instrument against the reference subjects' known answers (notebook 14); `power` simulates
runs at the paper's rates for the power of each claim (notebook 01).

Imports: every earlier MemOps stage, `memlife.base`, `memlife.models`, the shared science.
"""


def __getattr__(name: str):  # a name of the module that had this path: say where it went
    from memlife.base import moved

    raise moved.former_module_attribute(__name__, name)
