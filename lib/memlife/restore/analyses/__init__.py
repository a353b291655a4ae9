"""Restore, stage 5: the analyses of the records (notebooks 01, 23-25).

`decompose` (irreversible / recoverable / residual), `paper_analyses` (R1-R4, resolution,
ablations, small-sample marks), `paper_tables` (the paper's figures beside ours), `residuals`
(R4's causes), `figures`; `subjects`' grids checked by `controls` against the reference subjects'
known answers (notebook 25); `power` simulates runs at the paper's effect sizes for the power of
each claim (notebook 01).

Imports: every earlier restore stage, `memlife.base`, `memlife.models`, the shared science.
"""


def __getattr__(name: str):  # a name of the module that had this path: say where it went
    from memlife.base import moved

    raise moved.former_module_attribute(__name__, name)
