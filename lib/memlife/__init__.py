from importlib.metadata import version as _v

__all__ = ["__version__"]
try:
    __version__ = _v("memlife")
except Exception:  # running from a source tree without install
    __version__ = "0+src"
