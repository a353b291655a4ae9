"""Per-question work over a process pool, in order.

The restore grid's work is independent per question (a question's evictions, rankings and
contexts never look at another question), so it spreads over processes with no change to what it
computes: :func:`map_ordered` returns exactly ``[fn(x) for x in items]``, in the items' order,
whatever the number of workers. Workers are started with ``spawn`` (a fresh interpreter each, safe
under a notebook kernel's threads, the same on every platform); each imports the library once.
``fn`` must be a module-level function and items and results picklable; send a question's own
data and have the worker rebuild what is cheap to rebuild, rather than shipping large shared
objects.
"""
from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from typing import Callable, Iterable, Iterator, TypeVar

T = TypeVar("T")
R = TypeVar("R")
Mapper = Callable[..., "list[R]"]  # (fn, items, desc=None) -> [fn(x) for x in items]


def n_workers(workers: int | None) -> int:
    """``workers`` as a count: None or 0 = every core of the machine (``os.cpu_count()``)."""
    if workers is None or workers == 0:
        return max(1, os.cpu_count() or 1)
    if workers < 0:
        raise ValueError(f"workers must be None, 0 or positive, got {workers}")
    return int(workers)


def _collect(results: Iterable[R], n: int, desc: str | None) -> list[R]:
    """The results, in order; with `desc`, counted on a progress bar (memlife.base.progress)."""
    if desc is None:
        return list(results)
    from memlife.base import progress

    with progress.bar(total=n, desc=desc) as bar:
        out = []
        for r in results:
            out.append(r)
            bar.update(1)
    return out


@contextmanager
def pool(workers: int | None = 1) -> Iterator[Mapper]:
    """A map, ``m(fn, items, desc=None) -> [fn(x) for x in items]``, over ``workers`` processes
    (1: this process), started once for every map made with it (a worker's start-up, importing the
    library, costs about a second); `desc` names a progress bar over the items."""
    n = n_workers(workers)
    if n <= 1:
        def serial(fn, items, desc=None):
            items = list(items)
            return _collect((fn(x) for x in items), len(items), desc)

        yield serial
        return
    with ProcessPoolExecutor(max_workers=n, mp_context=multiprocessing.get_context("spawn")) as ex:
        def parallel(fn, items, desc=None):
            items = list(items)
            return _collect(ex.map(fn, items), len(items), desc)

        yield parallel


def map_ordered(fn: Callable[[T], R], items: Iterable[T], *, workers: int | None = 1,
                desc: str | None = None) -> list[R]:
    """``[fn(x) for x in items]``, computed by ``workers`` processes (1: in this process)."""
    items = list(items)
    with pool(min(n_workers(workers), len(items)) or 1) as m:
        return m(fn, items, desc)
