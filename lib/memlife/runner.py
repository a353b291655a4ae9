"""Execute one notebook for one profile: papermill with the profile's parameters, then usage.

    python -m memlife.runner 20_longmem_data --profile quick
    python -m memlife.runner summary --profile quick     # what `make reproduce` prints at the end

writes results/quick/notebooks/20_longmem_data.ipynb (the executed copy) and
results/quick/usage/20_longmem_data.json (calls, cached_calls, recorded_calls, live_calls, tokens,
usd_estimate, wall time, the tables and figures it wrote, its notices): calls = cached + live, and
recorded counts the cached ones answered from the profile's recording of replies (memlife.replies).

The executed copy appears only when every cell ran: papermill writes its output as it goes, so it
writes to a temporary name first. A failed run leaves results/<profile>/notebooks/NAME.FAILED.ipynb (with the
error, for debugging) and no NAME.ipynb, so make runs it again next time.

One run of a notebook per profile at a time: a second is refused, naming the process that holds
results/<profile>/logs/NAME.lock (two would pay for every request twice and delete each other's
calls log). A failed or interrupted run leaves no usage summary, not even an earlier run's.

From the command line the terminal shows one live line per notebook (its progress, model calls,
an ETA; `memlife.progress`) and whatever the project itself has to say; everything else the kernel,
its libraries and its subprocesses print or log goes to results/<profile>/logs/NAME.log.
``MEMLIFE_VERBOSE=1`` (`make reproduce V=1`) shows it all in the terminal instead.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import time
from pathlib import Path

from . import config, llm, paths, progress, replies, spending


def check_paper_profile(profile: str, notebook: str | None = None) -> None:
    """The paper profile spends real money: it needs a configured endpoint, a spending cap and a
    price for every model — unless the run is replayed from recorded replies
    (MEMLIFE_LLM_MODE=replay), which sends nothing and fails on the first request the recording
    lacks. `notebook` names the track whose models apply."""
    if profile != "paper" or llm.mode() in ("replay", "estimate"):
        return
    llm.configure(profile, track=config.track_of(notebook))
    embedded = [r for r in ("reader", "judge") if not llm.role_configured(r)]
    if embedded:
        raise SystemExit(f"profile 'paper' needs an API endpoint for {embedded}: set MEMLIFE_BASE_URL/"
                         f"OPENAI_API_KEY or configs/paper.yaml models (README, 'Backends')")
    if llm.spend_cap_usd() is None:
        raise SystemExit("profile 'paper' needs a spending cap: set MEMLIFE_SPEND_CAP_USD (US dollars); the run "
                         "stops before passing it, across all its notebooks")
    unpriced = [llm.unpriced_message(r, ep.model) for r in llm.ROLES
                if not (ep := llm.endpoint_for(r)).is_embedded and llm.get_client(r).price_usd(1, 1) is None]
    if unpriced:
        raise SystemExit("; ".join(unpriced))
    unknown = []
    for r in llm.ROLES:
        if llm.role_configured(r):
            try:
                llm.get_client(r).context_window()  # listed, configured, or asked of the server
            except llm.LLMError as exc:
                unknown.append(str(exc))
    if unknown:  # before the first paid call, not after hours of them
        raise SystemExit("; ".join(unknown))


def verbose() -> bool:
    return os.environ.get("MEMLIFE_VERBOSE", "").strip().lower() not in ("", "0", "false", "no")


@contextlib.contextmanager
def environ(**values: str):
    """These environment variables set for the block, and as they were after it."""
    before = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextlib.contextmanager
def _output_to(log_path: Path):
    """This process's standard output and error, file descriptors included, into `log_path`; the
    kernel papermill starts inherits them, and so do its subprocesses. Yields a stream on the
    terminal as it was."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    terminal = os.fdopen(os.dup(2), "w", buffering=1)
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        yield terminal
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for f in (*saved, fd):
            os.close(f)
        terminal.close()


class NotebookBusy(RuntimeError):
    """Another process is running this notebook under this profile."""


@contextlib.contextmanager
def notebook_lock(lay: paths.Layout, name: str):
    """One run of a notebook per profile at a time. Two would send every request twice (the
    in-flight ones are not shared), write one NAME.running.ipynb, and delete each other's calls
    log. The lock is flock on results/<profile>/logs/NAME.lock: the kernel releases it when its
    holder dies in any way, so a killed run never leaves a stale lock behind."""
    import fcntl

    path = lay.run_logs / f"{name}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "a process that has not said"
            raise NotebookBusy(f"{name} [{lay.profile}] is already running ({holder}; lock {path}): wait for it "
                               f"to finish or stop it, then run again (replies it received are cached)") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"process {os.getpid()} since {time.strftime('%Y-%m-%d %H:%M:%S')}".encode(), 0)
        yield
    finally:
        os.close(fd)  # closing releases the flock


def run_notebook(name: str, profile: str, *, root: Path | None = None, kernel: str = "python3",
                 quiet: bool = False) -> dict:
    """Execute notebook `name` under `profile`; returns its usage summary (also written to
    results/<profile>/usage/NAME.json). `quiet`: the terminal gets one live progress line, and everything the
    kernel prints or logs goes to its log file (the command line's default)."""
    check_paper_profile(profile, name)

    root = Path(root) if root else paths.repo_root()
    lay = paths.layout(profile, root)
    src = root / "notebooks" / f"{name}.ipynb"
    if not src.is_file():
        raise FileNotFoundError(f"{src}: no such notebook")
    params = config.notebook_params(profile, name, root)
    with notebook_lock(lay, name):
        return _run_locked(name, profile, root, lay, src, params, kernel, quiet)


def _run_locked(name: str, profile: str, root: Path, lay: paths.Layout, src: Path, params: dict,
                kernel: str, quiet: bool) -> dict:
    import papermill as pm

    out = lay.notebooks / f"{name}.ipynb"
    running = out.with_name(f"{name}.running.ipynb")
    failed = out.with_name(f"{name}.FAILED.ipynb")
    out.parent.mkdir(parents=True, exist_ok=True)
    lay.usage.mkdir(parents=True, exist_ok=True)
    lay.run_logs.mkdir(parents=True, exist_ok=True)
    calls_log = lay.usage / f"{name}.calls.jsonl"
    log_path = lay.run_logs / f"{name}.log"
    notices_path = lay.run_logs / f"{name}.notices.jsonl"
    progress_path = lay.run_logs / f"{name}.progress.json"
    outputs_path = lay.run_logs / f"{name}.outputs.jsonl"
    usage_path = lay.usage / f"{name}.json"
    # Each describes this run only: a failed run leaves no summary of an earlier one behind.
    for stale in (calls_log, usage_path, log_path, notices_path, progress_path, outputs_path):
        stale.unlink(missing_ok=True)
    channels = {"MEMLIFE_RUN": name, progress.NOTICES_ENV: str(notices_path),
                progress.OUTPUTS_ENV: str(outputs_path),  # the kernel inherits them
                # one spending ledger for every notebook of a `make` (which sets it), else this one's
                spending.RUN_ENV: os.environ.get(spending.RUN_ENV) or f"{profile}-{name}-{int(time.time())}"}
    if quiet:
        channels.update({progress.PROGRESS_ENV: str(progress_path), progress.LOG_ENV: str(log_path)})
    t0 = time.perf_counter()
    try:
        with contextlib.ExitStack() as stack:
            stack.enter_context(environ(**channels))
            if quiet:
                terminal = stack.enter_context(_output_to(log_path))
                stack.enter_context(progress.Watcher(name, progress_path, calls_log, terminal))
            pm.execute_notebook(str(src), str(running), parameters=params, kernel_name=kernel,
                                cwd=str(root), progress_bar=False, log_output=False)
    except BaseException:
        # A stale copy from an earlier success would describe outputs this run may have replaced.
        out.unlink(missing_ok=True)
        if running.exists():
            running.replace(failed)
        raise
    else:
        running.replace(out)
        failed.unlink(missing_ok=True)
    finally:
        progress_path.unlink(missing_ok=True)
    summary = {"notebook": name, "profile": profile, **llm.summarize_calls(calls_log),
               "wall_s": round(time.perf_counter() - t0, 1),
               "outputs": progress.read_outputs(outputs_path, root),
               "notices": progress.read_notices(notices_path),
               "log": str(log_path.relative_to(root)) if log_path.exists() else None}
    usage_path.write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    return summary


def _interrupted(exc: BaseException) -> bool:
    """Ctrl-C, in this process or (the terminal signals both) in the kernel's running cell."""
    return isinstance(exc, KeyboardInterrupt) or getattr(exc, "ename", None) == "KeyboardInterrupt"


def _run_command(args) -> int:
    quiet = not verbose()
    try:
        paths.layout(args.profile)
    except ValueError as exc:  # said once, here, not again from the failure report below
        print(f"{args.notebook}: {exc}", file=sys.stderr)
        return 2
    started = time.time()
    try:
        s = run_notebook(args.notebook, args.profile, quiet=quiet)
    except (Exception, KeyboardInterrupt) as exc:
        lay = paths.layout(args.profile)
        # Only this run's files: a run refused before its kernel started wrote neither, and an
        # earlier run's would describe another failure.
        log, failed = (p if p.exists() and p.stat().st_mtime >= started - 1 else None
                       for p in (lay.run_logs / f"{args.notebook}.log",
                                 lay.notebooks / f"{args.notebook}.FAILED.ipynb"))
        if isinstance(exc, NotebookBusy):  # the other run's files are its own: nothing here to point at
            print(exc, file=sys.stderr)
            return 1
        if _interrupted(exc):
            # The kernel's traceback says nothing the user needs: where the work stands does.
            print(f"{args.notebook} [{args.profile}] interrupted; replies already received are cached, so running "
                  f"it again resumes without paying for them twice"
                  + (f"; the cells executed so far: {failed.relative_to(lay.root)}" if failed else ""),
                  file=sys.stderr)
            return 130
        print(f"{args.notebook} [{args.profile}] FAILED: {type(exc).__name__}: {str(exc).strip()[-2000:]}",
              file=sys.stderr)
        print(f"  the executed cells: {failed.relative_to(lay.root) if failed else '(none)'}"
              + (f"; the kernel's log: {log.relative_to(lay.root)}" if quiet and log else ""),
              file=sys.stderr)
        return 1
    print(f"{args.notebook} [{args.profile}] {s['wall_s']:.0f} s: {s['calls']} calls "
          f"({s['recorded_calls']} recorded, {s['cached_calls'] - s['recorded_calls']} cached, "
          f"{s['live_calls']} live), {s['prompt_tokens']}+{s['completion_tokens']} tokens, "
          f"${s['usd_estimate']:.4f}")
    for message in s["notices"]:
        print(f"  notice: {message}" + (f" (log: {s['log']})" if s.get("log") else ""))
    llm.configure(args.profile)
    recording = replies.active_path()
    if recording is not None and s["live_calls"]:
        print(f"  {s['live_calls']} requests were not in the recorded replies ({recording}) and were "
              f"answered by the model here: numbers resting on them may differ from the recording's")
    return 0


def summary(profile: str, root: Path | None = None, *, since: float | None = None) -> str:
    """`make reproduce`'s closing summary: per notebook its wall time, calls (cached / live),
    tokens and cost; the tables and figures written, with their paths; the notebooks with notices.
    `since` (a Unix time): only notebooks that ran after it, i.e. in this `make`."""
    root = Path(root) if root else paths.repo_root()
    lay = paths.layout(profile, root)
    rows = []
    for nb in sorted(p.stem for p in (root / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        p = lay.usage / f"{nb}.json"
        if not p.is_file() or (since is not None and p.stat().st_mtime < since):
            continue
        s = json.loads(p.read_text())
        if s.get("profile") == profile:
            rows.append(s)
    if not rows:
        return f"== [{profile}] nothing ran: every executed notebook is up to date ({lay.notebooks.relative_to(root)}/)"
    head = f"{'notebook':<22} {'wall':>8} {'calls':>6} {'cached':>6} {'live':>5} {'tokens':>10} {'USD':>8}"
    lines = [f"== [{profile}] {len(rows)} notebooks run", head]
    for s in rows:
        lines.append(f"{s['notebook']:<22} {progress.clock(s['wall_s']):>8} {s['calls']:>6} {s['cached_calls']:>6} "
                     f"{s['live_calls']:>5} {s['prompt_tokens'] + s['completion_tokens']:>10,} "
                     f"{s['usd_estimate']:>8.4f}")
    tot = {k: sum(s[k] for s in rows) for k in ("wall_s", "calls", "cached_calls", "live_calls",
                                                 "prompt_tokens", "completion_tokens", "usd_estimate")}
    lines.append(f"{'total':<22} {progress.clock(tot['wall_s']):>8} {tot['calls']:>6} {tot['cached_calls']:>6} "
                 f"{tot['live_calls']:>5} {tot['prompt_tokens'] + tot['completion_tokens']:>10,} "
                 f"{tot['usd_estimate']:>8.4f}")
    written: dict[str, set[str]] = {}
    for s in rows:
        for path in s.get("outputs", []):
            folder, _, file = path.rpartition("/")
            written.setdefault(folder + "/", set()).add(file)
    for folder, files in sorted(written.items()):
        lines.append(f"written to {folder} ({len(files)}): " + ", ".join(sorted(files)))
    flagged = [s for s in rows if s.get("notices")]
    for s in flagged:
        for message in s["notices"]:
            lines.append(f"notice from {s['notebook']}: {message}" + (f" (log: {s['log']})" if s.get("log") else ""))
    run = os.environ.get(spending.RUN_ENV)
    if run and spending.ledger_path().exists() and llm.spend_cap_usd() is not None:
        lines.append(f"spent ${spending.spent(run):.4f} of the ${llm.spend_cap_usd():.2f} cap in this run "
                     f"({spending.RUN_ENV}={run}; ledger {spending.ledger_path()})")
    logs = sorted({str(Path(s["log"]).parent) for s in rows if s.get("log")})
    if logs:
        lines.append(f"everything else the notebooks printed or logged: {', '.join(l + '/' for l in logs)}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["summary"]:
        ap = argparse.ArgumentParser(prog="python -m memlife.runner summary")
        ap.add_argument("--profile", default="quick", help="any configs/<name>.yaml")
        ap.add_argument("--since", type=float, help="only notebooks run after this Unix time")
        args = ap.parse_args(argv[1:])
        try:
            llm.configure(args.profile)  # the cap the run held
        except (ValueError, llm.LLMError) as exc:
            print(f"summary: {exc}", file=sys.stderr)
            return 2
        print(summary(args.profile, since=args.since))
        return 0
    ap = argparse.ArgumentParser(prog="python -m memlife.runner", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("notebook", help="notebook stem, e.g. 00_backend")
    ap.add_argument("--profile", default="quick", help="any configs/<name>.yaml")
    args = ap.parse_args(argv)
    # make (or a user) stopping the run with SIGTERM: unwind through run_notebook, so the partial
    # copy is kept as NAME.FAILED.ipynb like any other failed run.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    return _run_command(args)


if __name__ == "__main__":
    sys.exit(main())
