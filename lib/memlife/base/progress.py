"""What a run is doing, told to the person who started it: progress bars, notices, kernel logs.

A notebook runs in a Jupyter kernel, a process of its own whose output lands in the executed
notebook; the terminal that runs `make` sees none of it. Three channels carry what matters there,
each a file the runner (`memlife.running.runner`) names in the kernel's environment:

- ``MEMLIFE_PROGRESS``: `bar` is tqdm (a widget in Jupyter), and while the runner watches, each
  bar also writes its state to this file (at most a few times a second); the runner draws one
  live line from it, with the notebook's model calls and an ETA (`Watcher`).
- ``MEMLIFE_NOTICES``: `notice` records, one JSON line each, a warning that matters to the user
  (most replies malformed, a memory store left empty, a prompt cut short); the runner prints each
  once, with the log's path, and `make reproduce`'s closing summary lists them.
- ``MEMLIFE_OUTPUTS``: `record_output` notes each table and figure `memlife.base.artifacts` writes, so the
  usage summary and the closing summary can say what a run produced and where.
- ``MEMLIFE_LOG``: `memlife` installs, on import in a kernel the runner started, a handler that
  sends every log record and every Python warning to this file instead of the notebook's output.
  What the kernel's subprocesses and native libraries write to their stderr goes there too: the
  runner hands the kernel the log as its standard output and error.
"""
from __future__ import annotations

import json
import logging
import os
import threading
import time
from pathlib import Path

from tqdm.auto import tqdm as _tqdm
from tqdm.std import tqdm as _std_tqdm

PROGRESS_ENV = "MEMLIFE_PROGRESS"
NOTICES_ENV = "MEMLIFE_NOTICES"
LOG_ENV = "MEMLIFE_LOG"
OUTPUTS_ENV = "MEMLIFE_OUTPUTS"
_PUBLISH_EVERY_S = 0.25

_logger = logging.getLogger("memlife")


# --------------------------------------------------------------------------- in the kernel


class _Bar(_tqdm):
    """tqdm that also publishes its state for the runner's terminal line."""

    def __init__(self, *args, **kwargs):
        self._published_at = 0.0
        self._closed_published = False
        super().__init__(*args, **kwargs)
        self._publish(force=True)

    def __iter__(self):
        # tqdm's own iteration counts items without update() and sets `n` only when it redraws;
        # the bars here run over few, slow items, so each goes through update() and is published.
        if self.disable:
            yield from self.iterable
            return
        try:
            for item in self.iterable:
                yield item
                self.update(1)
        finally:
            self.close()

    def update(self, n=1):
        out = super().update(n)
        self._publish()
        return out

    def reset(self, total=None):
        super().reset(total)
        self._publish(force=True)

    def set_postfix_str(self, s="", refresh=True):
        super().set_postfix_str(s, refresh)
        self._publish()

    def close(self):
        if not self._closed_published:
            self._closed_published = True
            self._publish(force=True, closed=True)
        super().close()

    def _publish(self, *, force: bool = False, closed: bool = False) -> None:
        path = os.environ.get(PROGRESS_ENV)
        if not path or self.disable:
            return
        now = time.monotonic()
        if not force and now - self._published_at < _PUBLISH_EVERY_S:
            return
        self._published_at = now
        d = self.format_dict
        state = {"desc": self.desc or "", "n": self.n, "total": self.total, "elapsed_s": round(d["elapsed"], 3),
                 "postfix": self.postfix or "", "closed": closed, "time": round(time.time(), 3)}
        _write_json(Path(path), state)


def bar(iterable=None, *, total: int | None = None, desc: str | None = None, disable: bool = False, **kw):
    """A progress bar over the work that matters (answers given, reads done): tqdm in the notebook,
    and the runner's live line in the terminal. Use plain tqdm for bars nobody outside needs."""
    return _Bar(iterable, total=total, desc=desc, disable=disable, **kw)


def _append(env: str, rec: dict) -> None:
    path = os.environ.get(env)
    if not path:
        return
    # One write() on an O_APPEND descriptor: lines from concurrent processes never interleave.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, (json.dumps(rec, sort_keys=True) + "\n").encode())
    finally:
        os.close(fd)


def notice(message: str) -> None:
    """A warning the user should see in the terminal, not only in the log: one line, said once
    by the runner after the notebook, and again in `make reproduce`'s closing summary."""
    _logger.warning(message)
    print(f"notice: {message}")
    _append(NOTICES_ENV, {"message": message})


def record_output(path: Path) -> None:
    """Note a table or figure this run wrote (memlife.base.artifacts calls it)."""
    _append(OUTPUTS_ENV, {"path": str(Path(path).resolve())})


class _LogHandler(logging.FileHandler):
    """The run's log file, told apart from any other handler so it is installed once."""


def install_kernel_log() -> Path | None:
    """Send log records and warnings to the run's log file (MEMLIFE_LOG), once per process.

    Libraries that attach their own handlers (MemOS, Qdrant) keep them, but a kernel's stream
    handlers write to the notebook, so records reaching the root logger are what the log holds;
    warnings are captured into logging (`py.warnings`)."""
    path = os.environ.get(LOG_ENV)
    if not path:
        return None
    root = logging.getLogger()
    if any(isinstance(h, _LogHandler) for h in root.handlers):
        return Path(path)
    handler = _LogHandler(path, mode="a", encoding="utf-8", delay=True)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.setLevel(logging.INFO)
    root.addHandler(handler)
    if root.level > logging.INFO or root.level == logging.NOTSET:
        root.setLevel(logging.INFO)
    logging.captureWarnings(True)
    return Path(path)


# --------------------------------------------------------------------------- in the runner


def _write_json(path: Path, obj: dict) -> None:
    tmp = path.with_name(f"{path.name}.{os.getpid()}.part")
    try:
        tmp.write_text(json.dumps(obj))
        os.replace(tmp, path)
    except OSError:  # the runner removed its folder, or a full disk: progress is never worth a failure
        tmp.unlink(missing_ok=True)


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _read_lines(path: Path, field: str) -> list[str]:
    try:
        lines = Path(path).read_text().splitlines()
    except OSError:
        return []
    out = []
    for n, line in enumerate(lines, 1):
        try:
            out.append(str(json.loads(line)[field]))
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{path}: line {n}: field {field!r} cannot be read ({exc!r})") from exc
    return out


def read_notices(path: Path) -> list[str]:
    """The notices a run recorded, each once, in the order they came."""
    return list(dict.fromkeys(_read_lines(path, "message")))


def read_outputs(path: Path, root: Path) -> list[str]:
    """The files a run wrote, relative to `root` where they lie under it, sorted, each once."""
    out = set()
    for p in _read_lines(path, "path"):
        try:
            out.add(str(Path(p).relative_to(Path(root).resolve())))
        except ValueError:
            out.add(p)
    return sorted(out)


class _CallCounter:
    """Counts a calls log's lines as they are appended (model calls, and those answered without one)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.offset = 0
        self.calls = 0
        self.cached = 0
        self._rest = b""

    def poll(self) -> None:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                chunk = fh.read()
        except OSError:
            return
        self.offset += len(chunk)
        data = self._rest + chunk
        *lines, self._rest = data.split(b"\n")
        for line in lines:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            self.calls += 1
            self.cached += bool(rec.get("cached"))


def clock(seconds: float | None) -> str:
    if seconds is None or seconds != seconds or seconds == float("inf"):
        return "?"
    return _std_tqdm.format_interval(seconds)


def format_line(name: str, state: dict | None, calls: int, cached: int, elapsed_s: float,
                now: float | None = None) -> str:
    """The runner's one line: notebook, the current bar (done/total, ETA), model calls, wall time.

    The ETA assumes the bar's average pace so far holds, counted up to `now` (a Unix time; the
    bar's state says when it was written), so it keeps falling between two updates."""
    parts = [name]
    if state and not state.get("closed"):
        n, total = state.get("n") or 0, state.get("total")
        desc = state.get("desc") or ""
        if total:
            spent = (state.get("elapsed_s") or 0.0) + max(0.0, (now or state.get("time") or 0.0) - (state.get("time") or 0.0))
            eta = spent * (total - n) / n if n else None
            parts.append(f"{desc} {n}/{total} ({100 * n / total:.0f}%, ETA {clock(eta)})".strip())
        else:
            parts.append(f"{desc} {n}".strip())
        if state.get("postfix"):
            parts.append(str(state["postfix"]))
    parts.append(f"{calls} model calls ({cached} cached)")
    parts.append(clock(elapsed_s))
    return " | ".join(parts)


def _parallel_make() -> bool:
    """Whether a `make -j` started this process (GNU make passes -jN and its jobserver on)."""
    flags = os.environ.get("MAKEFLAGS", "").split()
    return any(f.startswith(("-j", "--jobserver")) for f in flags)


class Watcher:
    """The runner's live line while a notebook runs: a thread that polls the kernel's progress file
    and calls log. On a terminal the line is redrawn in place; elsewhere (CI, a file) a line is
    written when a bar starts and at most every 30 s otherwise."""

    def __init__(self, name: str, progress_file: Path, calls_log: Path, stream, *, interval_s: float = 0.5):
        self.name = name
        self.progress_file = Path(progress_file)
        self.counter = _CallCounter(calls_log)
        self.stream = stream
        self.interval_s = interval_s
        # Under `make -j`, runners share the terminal: plain lines, or they would redraw each other's.
        self.tty = bool(getattr(stream, "isatty", lambda: False)()) and not _parallel_make()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="memlife-progress", daemon=True)
        self._t0 = time.monotonic()
        self._last_plain: tuple[str | None, float] = (None, time.monotonic())
        self._width = 0

    def __enter__(self) -> "Watcher":
        self._t0 = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        if self.tty and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()

    def line(self, state: dict | None) -> str:
        self.counter.poll()
        return format_line(self.name, state, self.counter.calls, self.counter.cached,
                           time.monotonic() - self._t0, time.time())

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self._draw()
            except (OSError, ValueError):  # the terminal went away: the run goes on without its line
                return

    def _draw(self) -> None:
        state = _read_json(self.progress_file)
        text = self.line(state)
        if self.tty:
            try:  # the terminal's own width: this process's stdout is the log while a notebook runs
                cols = os.get_terminal_size(self.stream.fileno()).columns
            except (OSError, ValueError, AttributeError):
                cols = 0
            if cols >= 20:  # a terminal that reports no size (0) gets the whole line
                text = text[: cols - 1]
            self.stream.write("\r" + text.ljust(self._width))
            self._width = len(text)
            self.stream.flush()
            return
        # Not a terminal (CI, a file): a line when a bar starts, and then at most every 30 s.
        state = state or {}
        started = state.get("desc") if state and not state.get("closed") else None
        now = time.monotonic()
        if (started and started != self._last_plain[0]) or now - self._last_plain[1] >= 30:
            self.stream.write(text + "\n")
            self.stream.flush()
            self._last_plain = (started or self._last_plain[0], now)
