"""memlife: reproductions of MemOps and of the restore-counterfactual audit, as notebooks over a library.

The package is arranged in places, each importing only the places below it
(tests/test_layout.py holds this; docs/architecture.md draws it):

- `memlife.running` — running notebooks as a DAG, estimates, publishing.
- `memlife.memops`, `memlife.restore` — the two tracks; neither imports the other.
- the shared science, here at the top of the package: `stats` (clustered bootstrap, agreement,
  multiple testing), `power` (power by simulation, checked against closed forms), `subjects`
  (reference subjects' shared machinery), `retrieve` (BM25), `paper_reference` (the papers'
  values), `longmem` and `reconstruct` (LongMemEval files, read by both tracks), `sharegpt`
  (ShareGPT's split: LongMemEval-S's task chat, the filler of both tracks).
- `memlife.models` — model access: every call to a language model.
- `memlife.base` — paths, profiles, progress, parallelism, saving tables and figures, plug-ins.
"""
import os as _os
from importlib.metadata import version as _v

__all__ = ["__version__"]
try:
    __version__ = _v("memlife")
except Exception:  # running from a source tree without install
    __version__ = "0+src"

# An old module name (the layout of 2026-12-03) fails naming where it went, after every real
# module has been looked for: memlife.base.moved.
from memlife.base import moved as _moved

_moved.install()

if _os.environ.get("MEMLIFE_LOG"):  # a kernel the runner started: logs and warnings go to its log file
    from memlife.base.progress import install_kernel_log as _install

    _install()
