"""One spending ledger per run, on disk, shared by every process of the run.

A spending cap held in one process's memory is a cap per notebook kernel: `make -j2` doubles it,
and a resumed run forgets what it spent. Here every uncached call reserves its worst case (the
prompt at its price, plus the whole completion budget) in a SQLite file before it is sent, and
settles the reservation with what the endpoint reported after. A reservation that would take the
run past its cap is refused before anything is sent; reservations still open count at their
worst case, so a process killed mid-call never makes the ledger look cheaper than it was.

A run is named by ``MEMLIFE_SPEND_RUN``: `make` sets it once per invocation (every notebook of
one `make reproduce`, under -j too, shares it), the runner sets it when it is started alone, and
a bare Python session gets one per process. The file is results/spending.sqlite, one for every
profile (a cap may span several makes: set MEMLIFE_SPEND_RUN yourself); `make clean` removes it.
"""
from __future__ import annotations

import math
import os
import sqlite3
import time
from contextlib import closing
from pathlib import Path

from memlife.base import paths

RUN_ENV = "MEMLIFE_SPEND_RUN"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS spend (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run TEXT NOT NULL,
    role TEXT NOT NULL,
    model TEXT NOT NULL,
    reserved_usd REAL NOT NULL,
    settled_usd REAL,          -- NULL while the call is in flight
    opened REAL NOT NULL,
    pid INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS spend_run ON spend (run);
"""


class CapReached(RuntimeError):
    """The reservation would take the run past its cap (llm raises SpendingCapExceeded)."""

    def __init__(self, spent: float, worst: float, cap: float):
        super().__init__(f"${spent:.4f} spent or reserved, the next call could cost up to ${worst:.4f}, cap ${cap:.2f}")
        self.spent, self.worst, self.cap = spent, worst, cap


def ledger_path() -> Path:
    """One ledger for every run, keyed by run id: a cap can span several makes and profiles
    (MEMLIFE_SPEND_RUN set by hand), so the file belongs to no single profile."""
    return paths.repo_root() / "results" / "spending.sqlite"


def run_id() -> str:
    run = os.environ.get(RUN_ENV)
    if not run:
        run = os.environ[RUN_ENV] = f"process-{os.getpid()}-{int(time.time())}"
    return run


def _connect() -> sqlite3.Connection:
    path = ledger_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(path, timeout=60, isolation_level=None)
    con.executescript(_SCHEMA)
    return con


def _spent(con: sqlite3.Connection, run: str) -> float:
    (total,) = con.execute("SELECT COALESCE(SUM(COALESCE(settled_usd, reserved_usd)), 0) FROM spend WHERE run = ?",
                           (run,)).fetchone()
    return float(total)


def reserve(worst_usd: float, cap_usd: float, *, role: str, model: str) -> int:
    """Reserve `worst_usd` against the run's cap; the reservation's id, or CapReached."""
    if not (math.isfinite(cap_usd) and cap_usd >= 0 and math.isfinite(worst_usd) and worst_usd >= 0):
        # nan compares false with everything: `spent + worst > nan` would never refuse a call
        raise ValueError(f"spending cap ${cap_usd} / reservation ${worst_usd}: both must be finite numbers >= 0")
    run = run_id()
    with closing(_connect()) as con:
        # BEGIN IMMEDIATE takes the write lock first: two processes cannot both read the same
        # total and both squeeze under the cap.
        con.execute("BEGIN IMMEDIATE")
        try:
            spent = _spent(con, run)
            if spent + worst_usd > cap_usd:
                raise CapReached(spent, worst_usd, cap_usd)
            cur = con.execute("INSERT INTO spend (run, role, model, reserved_usd, opened, pid) VALUES (?, ?, ?, ?, ?, ?)",
                              (run, role, model, float(worst_usd), time.time(), os.getpid()))
            con.execute("COMMIT")
            return int(cur.lastrowid)
        except BaseException:
            con.execute("ROLLBACK")
            raise


def settle(reservation: int, usd: float) -> None:
    with closing(_connect()) as con:
        con.execute("UPDATE spend SET settled_usd = ? WHERE id = ?", (float(usd), reservation))


def spent(run: str | None = None) -> float:
    """US dollars the run has spent, reservations still open counted at their worst case."""
    if not ledger_path().exists():
        return 0.0
    with closing(_connect()) as con:
        return _spent(con, run or run_id())
