"""Execute one notebook for one profile: papermill with the profile's parameters, then usage.

    python -m memlife.running.runner 20_longmem_data --profile quick
    python -m memlife.running.runner summary --profile quick     # what `make reproduce` prints at the end
    python -m memlife.running.runner fingerprint --profile quick # what each notebook's numbers rest on

writes results/quick/notebooks/20_longmem_data.ipynb (the executed copy) and
results/quick/usage/20_longmem_data.json (calls, cached_calls, recorded_calls, live_calls, tokens,
usd_estimate, wall time, the tables and figures it wrote, its notices): calls = cached + live, and
recorded counts the cached ones answered from the profile's recording of replies (memlife.models.replies).

The executed copy appears only when every cell ran: papermill writes its output as it goes, so it
writes to a temporary name first. A failed run leaves results/<profile>/notebooks/NAME.FAILED.ipynb (with the
error, for debugging) and no NAME.ipynb, so make runs it again next time.

One run of a notebook per profile at a time: a second is refused, naming the process that holds
results/<profile>/logs/NAME.lock (two would pay for every request twice and delete each other's
calls log). A failed or interrupted run leaves no usage summary, not even an earlier run's.

What a notebook's numbers rest on besides the library — its parameters after inheritance, the
model settings of every role it calls (base URL, model, structured output, sampling; never a
key), the SHA-256 of the recording it replays, and of the file of every module a profile names
for it as "module:attr" (a memory system or policy of one's own, `plugins.PARAMETERS`) — is its
fingerprint, results/<profile>/fingerprints/NAME.txt, rewritten only when it changes: make runs a
notebook again when its fingerprint is newer than its executed copy, so pointing a role at another
model reruns exactly the notebooks that call it, and editing one's policy exactly the notebooks
that use it (and, through the DAG, those that read them).

From the command line the terminal shows one live line per notebook (its progress, model calls,
an ETA; `memlife.base.progress`) and whatever the project itself has to say; everything else the kernel,
its libraries and its subprocesses print or log goes to results/<profile>/logs/NAME.log.
``MEMLIFE_VERBOSE=1`` (`make reproduce V=1`) shows it all in the terminal instead.
"""
from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import re
import signal
import sys
import time
from pathlib import Path

from memlife.base import config, paths, plugins, progress
from memlife.models import accounting, endpoints, llm, replies, spending

# --------------------------------------------------------------------------- fingerprints

# A query parameter whose name says it holds a credential (Azure's api-key, a signed URL's sig).
_CREDENTIAL = re.compile(r"key|token|secret|sig|pass|auth", re.I)


def _public_url(url: str) -> str:
    """A base URL as it may be written down: without a user and password, and without the query
    parameters that carry a credential; the rest of the query (an api-version) stays, as it
    changes what the endpoint answers."""
    from urllib.parse import parse_qsl, urlencode, urlsplit

    parts = urlsplit(url)
    port = f":{parts.port}" if parts.port else ""
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if not _CREDENTIAL.search(k)]
    return f"{parts.scheme}://{parts.hostname or ''}{port}{parts.path}" + (f"?{urlencode(query)}" if query else "")


def endpoint_fingerprint(ep: endpoints.Endpoint) -> dict:
    """What of an endpoint changes its replies: where it is, the model, structured output and how
    sampling and the token budget are sent. Not the key, timeouts, retries, concurrency, prices or
    rate limits, which change when and at what cost a reply comes, not what it says."""
    out = {"model": ep.model, "structured_output": ep.structured_output, "token_param": ep.token_param,
           "send_temperature": ep.send_temperature, "send_seed": ep.send_seed,
           "reasoning_tokens": ep.reasoning_tokens, "context_window": ep.context_window}
    out["base_url"] = "embedded" if ep.is_embedded else _public_url(ep.base_url)
    if ep.extra_body:
        out["extra_body_sha256"] = hashlib.sha256(ep.extra_body.encode()).hexdigest()[:16]
    return out


def _sha256(path: Path) -> str | None:
    try:
        with open(path, "rb") as fh:
            return hashlib.file_digest(fh, "sha256").hexdigest()
    except FileNotFoundError:
        return None


def fingerprint(profile: str, notebook: str, root: Path | None = None) -> dict:
    """What `notebook`'s numbers rest on at `profile`, besides the library: its parameters (the profile
    resolved: inheritance, common, linked parameters) and, for a notebook that calls a model
    (config.NOTEBOOK_ROLES), each role's endpoint and the recording it replays (its SHA-256, or
    null when replay is off); for a notebook that uses a plug-in, the source of each module it names
    (:func:`plugin_sources`)."""
    out: dict = {"parameters": config.notebook_params(profile, notebook, root)}
    code = plugin_sources(profile, notebook, out["parameters"], root)
    if code:  # absent otherwise: a profile of the paper's names keeps the fingerprints it had
        out["plugins"] = code
    roles = config.roles_called(notebook)
    if roles:
        endpoints.configure(profile, track=config.track_of(notebook))
        out["models"] = {r: endpoint_fingerprint(endpoints.endpoint_for(r)) for r in roles}
        recording = replies.active_path()
        out["recording_sha256"] = None if recording is None else (_sha256(recording) or f"missing: {recording}")
    return out


def plugin_sources(profile: str, notebook: str, params: dict, root: Path | None = None) -> dict:
    """{kind: {module: {"file", "sha256"}}} for every "module:attr" name of the profile parameters
    `notebook` rests on (plugins.PARAMETERS; `params` are its own). Editing such a module changes
    exactly these notebooks' fingerprints; the DAG reruns those after them."""
    root = Path(root) if root else paths.repo_root()
    out: dict[str, dict] = {}
    for param, (kind, users) in plugins.PARAMETERS.items():
        home, _, key = param.partition(".")
        if notebook not in users:
            continue
        if home != notebook and not (root / "notebooks" / f"{home}.ipynb").is_file():
            continue  # a checkout without the notebook whose parameter it is
        values = (params if home == notebook else config.notebook_params(profile, home, root)).get(key)
        found = plugins.sources(values, f"profile {profile!r}, notebooks.{param}", root)
        if found:
            out.setdefault(kind, {}).update(found)
    return out


def rerun_reasons(changed: list[str], fp: dict) -> str:
    """What `write_fingerprints` found changed, said for a person: the settings by their keys, then
    each plug-in module whose source changed by kind, name and file ("policy module my_policy
    (my_policy.py)"). `fp` is the fingerprint as now written."""
    settings = [k for k in changed if not k.startswith("plugins.")]
    # plugins.<kind>.<module, maybe dotted>.<file|sha256>
    modules = dict.fromkeys((k.split(".")[1], k.split(".", 2)[2].rpartition(".")[0])
                            for k in changed if k.startswith("plugins."))
    code = []
    for kind, module in modules:
        now = fp.get("plugins", {}).get(kind, {}).get(module)
        code.append(f"{kind} module {module} ({now['file']})" if now else f"{kind} module {module} (no longer named)")
    parts = ([f"changed settings: {', '.join(settings)}"] if settings else []) + (
        [f"changed code: {', '.join(code)}"] if code else [])
    return "; ".join(parts) or "changed settings: its fingerprint"


def _flat(value, prefix: str = "") -> dict[str, object]:
    if isinstance(value, dict) and value:
        return {k: v for key, sub in value.items() for k, v in _flat(sub, f"{prefix}{key}.").items()}
    return {prefix.rstrip("."): value}


def fingerprint_path(profile: str, notebook: str, root: Path | None = None) -> Path:
    return paths.layout(profile, root).run / "fingerprints" / f"{notebook}.txt"


def ran_path(fingerprint_file: Path) -> Path:
    """The fingerprint the executed copy was made with, dated as it was then (written by a run)."""
    return fingerprint_file.with_suffix(".ran")


def write_fingerprints(profile: str, notebooks: list[str] | None = None,
                       root: Path | None = None) -> dict[str, list[str]]:
    """Each notebook's fingerprint file, rewritten only where its content changed (make compares
    its time with the executed copy's). Content that is again what the executed copy was made
    with takes back that run's date: `make -n` with another model rewrites the fingerprints (so
    that it can list what a run would redo), and without it they would otherwise stay newer than
    the executed copies they describe. Returns, per notebook with an executed copy whose
    fingerprint changed, the settings that differ from its run's (else from the last written)."""
    root = Path(root) if root else paths.repo_root()
    names = notebooks or sorted(p.stem for p in (root / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    changed: dict[str, list[str]] = {}
    for nb in names:
        fp = fingerprint(profile, nb, root)
        text = (f"# What {nb}'s numbers rest on at profile {profile}, besides the library "
                f"(python -m memlife.running.runner fingerprint); make runs it again when this changes.\n"
                + json.dumps(fp, indent=1, sort_keys=True) + "\n")
        path = fingerprint_path(profile, nb, root)
        old = path.read_text() if path.is_file() else None
        if old == text:
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")  # two makes of one profile: no shared name
        tmp.write_text(text)
        ran = ran_path(path)
        last_run = ran.read_text() if ran.is_file() else None
        if last_run == text:
            when = ran.stat().st_mtime_ns
            os.utime(tmp, ns=(when, when))
            tmp.replace(path)
            continue
        tmp.replace(path)
        before_text = last_run or old  # said against what the executed copy rests on, where known
        if before_text is not None and (paths.layout(profile, root).notebooks / f"{nb}.ipynb").exists():
            try:
                before = _flat(json.loads(before_text.split("\n", 1)[1]))
            except (ValueError, IndexError):
                before = {}
            after = _flat(fp)
            changed[nb] = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    return changed


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
    llm.check_paper_profile(profile, name)

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
    summary = {"notebook": name, "profile": profile, **accounting.summarize_calls(calls_log),
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
    try:
        # Run by hand rather than by make: the fingerprint still says what this run rests on.
        write_fingerprints(args.profile, [args.notebook])
    except (ValueError, KeyError, endpoints.LLMError) as exc:
        print(f"{args.notebook} [{args.profile}]: {exc.args[0] if isinstance(exc, KeyError) else exc}", file=sys.stderr)
        return 2
    fp = fingerprint_path(args.profile, args.notebook)
    rests_on, dated = fp.read_text(), fp.stat().st_mtime_ns
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
    ran = ran_path(fp)
    ran.write_text(rests_on)
    os.utime(ran, ns=(dated, dated))
    print(f"{args.notebook} [{args.profile}] {s['wall_s']:.0f} s: {s['calls']} calls "
          f"({s['recorded_calls']} recorded, {s['cached_calls'] - s['recorded_calls']} cached, "
          f"{s['live_calls']} live), {s['prompt_tokens']}+{s['completion_tokens']} tokens, "
          f"${s['usd_estimate']:.4f}")
    for message in s["notices"]:
        print(f"  notice: {message}" + (f" (log: {s['log']})" if s.get("log") else ""))
    endpoints.configure(args.profile)
    recording = replies.active_path()
    if recording is not None and s["live_calls"]:
        print(f"  {s['live_calls']} requests were not in the recorded replies ({recording}) and were "
              f"answered by the model here: numbers resting on them may differ from the recording's")
    return 0


def _models_of(usage: dict) -> list[str]:
    return [f"{role} {', '.join(r['models'])}" for role, r in sorted((usage.get("by_role") or {}).items())]


def models_behind(rows: list[dict], lay: paths.Layout) -> list[str]:
    """Per notebook that wrote tables or figures, the models whose replies they rest on: its own
    calls' and, through config.UPSTREAM, those of the notebooks whose outputs it reads (their last
    run's usage summaries)."""
    lines = []
    for s in rows:
        if not s.get("outputs"):
            continue
        parts = _models_of(s)
        for up in config.upstream(s["notebook"]):
            p = lay.usage / f"{up}.json"
            theirs = _models_of(json.loads(p.read_text())) if p.is_file() else ["(no usage summary)"]
            if theirs:
                parts.append(f"{'; '.join(theirs)} (through {up})")
        lines.append(f"models behind {s['notebook']}'s tables and figures: {'; '.join(parts) or 'none (model-free)'}")
    return lines


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
    lines += models_behind(rows, lay)
    flagged = [s for s in rows if s.get("notices")]
    for s in flagged:
        for message in s["notices"]:
            lines.append(f"notice from {s['notebook']}: {message}" + (f" (log: {s['log']})" if s.get("log") else ""))
    cached = sum(s.get("cached_prompt_tokens", 0) for s in rows)
    if cached:
        lines.append(f"of the prompt tokens sent, {cached:,} came from the provider's prompt cache; it and the Batch API "
                     f"took ${sum(s.get('usd_saved', 0.0) for s in rows):.4f} off the list price")
    batch_log = lay.usage / "batch.calls.jsonl"
    if batch_log.is_file() and (since is None or batch_log.stat().st_mtime >= since):
        b = accounting.summarize_calls(batch_log)
        lines.append(f"sent through the Batch API (make batch): {b['batch_calls']:,} replies, ${b['usd_estimate']:.4f} at "
                     f"the batch price, ${b['usd_saved']:.4f} below the list price ({batch_log.relative_to(root)})")
    run = os.environ.get(spending.RUN_ENV)
    if run and spending.ledger_path().exists() and endpoints.spend_cap_usd() is not None:
        lines.append(f"spent ${spending.spent(run):.4f} of the ${endpoints.spend_cap_usd():.2f} cap in this run "
                     f"({spending.RUN_ENV}={run}; ledger {spending.ledger_path()})")
    logs = sorted({str(Path(s["log"]).parent) for s in rows if s.get("log")})
    if logs:
        lines.append(f"everything else the notebooks printed or logged: {', '.join(l + '/' for l in logs)}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["fingerprint"]:
        ap = argparse.ArgumentParser(prog="python -m memlife.running.runner fingerprint",
                                     description="Write results/<profile>/fingerprints/NAME.txt where it changed.")
        ap.add_argument("--profile", default="quick", help="any configs/<name>.yaml")
        ap.add_argument("--notebook", action="append", help="only this notebook (repeatable); default: all")
        args = ap.parse_args(argv[1:])
        try:
            changed = write_fingerprints(args.profile, args.notebook)
        except (ValueError, KeyError, endpoints.LLMError) as exc:  # a profile or endpoint setting to fix first
            print(f"[{args.profile}] {exc.args[0] if isinstance(exc, KeyError) else exc}", file=sys.stderr)
            return 2
        for nb, keys in changed.items():
            fp = json.loads(fingerprint_path(args.profile, nb).read_text().split("\n", 1)[1])
            print(f"== [{args.profile}] {nb} rests on {rerun_reasons(keys, fp)}")
        return 0
    if argv[:1] == ["summary"]:
        ap = argparse.ArgumentParser(prog="python -m memlife.running.runner summary")
        ap.add_argument("--profile", default="quick", help="any configs/<name>.yaml")
        ap.add_argument("--since", type=float, help="only notebooks run after this Unix time")
        args = ap.parse_args(argv[1:])
        try:
            endpoints.configure(args.profile)  # the cap the run held
        except (ValueError, endpoints.LLMError) as exc:
            print(f"summary: {exc}", file=sys.stderr)
            return 2
        print(summary(args.profile, since=args.since))
        return 0
    ap = argparse.ArgumentParser(prog="python -m memlife.running.runner", description=__doc__,
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
