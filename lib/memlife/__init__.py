import os as _os
from importlib.metadata import version as _v

__all__ = ["__version__"]
try:
    __version__ = _v("memlife")
except Exception:  # running from a source tree without install
    __version__ = "0+src"

if _os.environ.get("MEMLIFE_LOG"):  # a kernel the runner started: logs and warnings go to its log file
    from .progress import install_kernel_log as _install

    _install()
