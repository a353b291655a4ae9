"""Modules and command lines that moved, and the error that says where they went.

The layout of 2026-12-03 (CHANGELOG.md, "layout") moved modules into places and left nothing at the
old paths. Without more, `python -m memlife.replies export` died with "No module named
memlife.replies", and `python -m memlife.longmem validate FILE` (the module stays, its command line
went) printed nothing and exited 0 on any file. :data:`MOVED` is the one table of what moved:

- a module that is gone: :func:`install` (called by ``import memlife``) puts a finder last on
  ``sys.meta_path`` that, for an old name and only after every other finder has missed it, raises
  ModuleNotFoundError naming where its code and its command line are now. ``python -m`` prints that
  and exits 1; ``import memlife.evict`` in a plug-in written before says the same. Nothing is
  re-exported: the finder never returns a module.
- a module that stays but lost its command line (``memlife.longmem``): its ``__main__`` guard calls
  :func:`refuse`, which prints the same message and returns 2.

tests/test_moved.py holds the table to CHANGELOG.md's table of moved paths, so a move written down
there and not here fails, and runs every old command line.

It imports nothing of memlife: ``import memlife`` loads it, and an import it is asked about costs a
dictionary lookup.
"""
from __future__ import annotations

import sys
from collections import namedtuple  # loaded by the interpreter already; dataclasses is not, and costs 6 ms

LAYOUT = "CHANGELOG.md, the layout of 2026-12-03"

# now: where its code is now (modules); command: the command line that does its job now ("" where
# it had none); was: its old command line, as one typed it.
Move = namedtuple("Move", "now command was", defaults=("", ""))


# Old module -> where it went. Every module of CHANGELOG.md's layout table that no longer exists,
# with the command line where it had one (from the modules' `main` before the move, c3a989e^), and
# memlife.longmem, which stays without its command line.
MOVED: dict[str, Move] = {
    "memlife.paths": Move("memlife.base.paths"),
    "memlife.config": Move("memlife.base.config", "python -m memlife.base.config show PROFILE",
                           "python -m memlife.config show quick"),
    "memlife.progress": Move("memlife.base.progress"),
    "memlife.parallel": Move("memlife.base.parallel"),
    "memlife.plugins": Move("memlife.base.plugins"),
    "memlife.report": Move("memlife.base.artifacts (save_table, save_figure) and memlife.running.publish (publish)",
                           "python -m memlife.running.publish publish --profile quick",
                           "python -m memlife.report publish --profile quick"),
    "memlife.serve": Move("memlife.models.serve", "python -m memlife.models.serve run",
                          "python -m memlife.serve run"),
    "memlife.proxy": Move("memlife.models.proxy"),
    "memlife.spending": Move("memlife.models.spending"),
    "memlife.api_rules": Move("memlife.models.api_rules"),
    "memlife.standin": Move("memlife.models.standin"),
    "memlife.tokens": Move("memlife.models.tokens"),
    "memlife.llm": Move("memlife.models.endpoints (configure, endpoint_for, the errors), memlife.models.llm "
                        "(get_client, Client, parse_json), memlife.models.reply_cache (memoized, request_key) and "
                        "memlife.models.accounting (Completion, usage, price_usd)"),
    "memlife.replies": Move("memlife.models.replies (reading) and memlife.models.replies_export (export)",
                            "python -m memlife.models.replies_export export",
                            "python -m memlife.replies export --profile quick"),
    "memlife.runner": Move("memlife.running.runner", "python -m memlife.running.runner",
                           "python -m memlife.runner 20_longmem_data --profile quick"),
    "memlife.estimate": Move("memlife.running.estimate", "python -m memlife.running.estimate",
                             "python -m memlife.estimate --profile quick"),
    "memlife.executed": Move("memlife.running.executed"),
    "memlife.evict": Move("memlife.restore.evict"),
    "memlife.units": Move("memlife.restore.units"),
    "memlife.corpus": Move("memlife.memops.corpus"),
    # The loader stays; the profile's data set and the command line went.
    "memlife.longmem": Move("memlife.restore.dataset (dataset_path, load_dataset, build_records, stats)",
                            "python -m memlife.restore.dataset validate FILE",
                            "python -m memlife.longmem validate FILE"),
}


def message(old: str) -> str:
    """What to say to someone who asked for `old` (a module of :data:`MOVED`)."""
    move = MOVED[old]
    if move.command:
        module = move.command.split()[2]  # "python -m <module> ..."
        return (f"the command line of {old} moved: use `{move.command}` (`python -m {module} --help` for its "
                f"other commands; its code: {move.now}; {LAYOUT})")
    return f"{old} moved to {move.now} ({LAYOUT})"


def refuse(old: str) -> int:
    """For a module that stays but lost its command line: say where it went, on stderr; exit 2."""
    print(f"python -m {old}: {message(old)}", file=sys.stderr)
    return 2


class _Finder:
    """Last on sys.meta_path: reached only for a name no other finder found."""

    memlife_moved = True  # how install() knows one is there, across a reload of this module

    @staticmethod
    def find_spec(fullname, path=None, target=None):
        if fullname in MOVED:
            raise ModuleNotFoundError(f"No module named {fullname!r}: {message(fullname)}", name=fullname)
        return None


def install() -> None:
    """Put the finder last on sys.meta_path, once: every existing module is found before it."""
    if not any(getattr(f, "memlife_moved", False) for f in sys.meta_path):
        sys.meta_path.append(_Finder())
