"""Writing a recording of replies from a finished run, and the recordings' command line.

A run's calls logs name every request it rested on; ``export`` looks each one up where the run
got it (the cache, or the recording it replayed) and writes ``results/replies/<profile>.jsonl.gz``
with its manifest, byte for byte the same for the same run (``memlife.models.replies`` reads it).

    python -m memlife.models.replies_export export --profile quick     # what `make export-replies` runs
    python -m memlife.models.replies_export show results/replies/quick.jsonl.gz
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import sys
from pathlib import Path

from memlife.base import paths
from memlife.models import replies

# --------------------------------------------------------------------------- writing


def _calls(profile: str, root: Path) -> tuple[list[dict], dict[str, int]]:
    """Every call of the profile's last complete run, from results/<profile>/usage: each notebook must have
    finished (its summary written) under `profile`."""
    usage = paths.layout(profile, root).usage
    notebooks = sorted(p.stem for p in (root / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    if not notebooks:
        raise replies.RepliesError(f"{root / 'notebooks'}: no notebooks")
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
                    raise replies.RepliesError(f"{log}: line {n}: not a call record ({exc!r})") from exc
                n_calls += 1
        if n_calls != summary.get("calls"):
            problems.append(f"{nb}: {log} holds {n_calls} calls, its summary {summary_path} {summary.get('calls')}")
        per_notebook[nb] = n_calls
    if problems:
        raise replies.RepliesError(f"cannot export the {profile!r} profile's replies: "
                           + "; ".join(problems) + f". Run `make reproduce PROFILE={profile}` first.")
    return calls, per_notebook


def _check_not_resumed(per_notebook: dict[str, int], out: Path) -> None:
    """A notebook that resumed from its journals and stores (MemOps' answers, Mem0's and MemOS's
    extractions) makes no call for the work an earlier run did, so its calls log is not the
    whole of what its results rest on. Exporting it would drop those replies from the recording,
    and a fresh clone replaying it would then ask the model again. Where the recording being
    rewritten holds calls of a notebook that now logged none, refuse, naming the way out."""
    mpath = replies.manifest_path(out)
    if not (out.is_file() and mpath.is_file()):
        return
    before = json.loads(mpath.read_text()).get("calls_by_notebook") or {}
    lost = [f"{nb} ({before[nb]} calls recorded, none in this run)"
            for nb, n in per_notebook.items() if n == 0 and before.get(nb, 0) > 0]
    if lost:
        raise replies.RepliesError(f"{out}: the last run's calls logs would drop replies the recording holds: "
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
    from memlife.models import reply_cache

    root = Path(root) if root else paths.repo_root()
    out = Path(out) if out else replies.default_path(profile, root)
    calls, per_notebook = _calls(profile, root)
    _check_not_resumed(per_notebook, out)
    sources: list[replies.Recording] = []
    for candidate in (replies.active_path(), out):
        if candidate is not None and Path(candidate).is_file() and all(s.path != Path(candidate) for s in sources):
            sources.append(replies.load(candidate))
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
            hit = reply_cache.cache_get(key)
            if hit is None:
                missing.append(call)
                missing_keys.add(key)
                continue
            prov = hit.get("provenance") or replies.provenance(call["model"])
        reply = {k: hit.get(k) for k in ("text", "prompt_tokens", "completion_tokens", "finish_reason")}
        rec_id = replies.provenance_id(prov)
        recordings[rec_id] = prov
        lines[key] = {"key": key, "role": call["role"], "model": call["model"], "recording": rec_id, **reply}
    if missing:
        first = missing[0]
        raise replies.RepliesError(f"{len(missing)} replies of the {profile!r} run are missing from where the run got "
                           f"them (the cache {reply_cache.cache_dir()}, or the recording it replayed); the first: "
                           f"request {first['key'][:16]}, {first['source']} ({first['where']}). Was the cache "
                           f"cleared, or the recording replaced, after the run?")
    body = _serialize([lines[k] for k in sorted(lines)])
    for n, rec in enumerate(lines.values(), 1):
        replies._check_line(out, n, json.loads(_serialize([rec])))
    mpath = replies.manifest_path(out)
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
        "format": replies.FORMAT, "profile": profile, "file": out.name,
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
    ap = argparse.ArgumentParser(prog="python -m memlife.models.replies_export", description=__doc__,
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
            from memlife.models import endpoints

            endpoints.configure(args.profile)
            path, manifest = export(args.profile, args.out)
        else:
            path, manifest = args.path, replies.load(args.path).manifest
    except replies.RepliesError as exc:
        print(f"memlife.models.replies: {exc}", file=sys.stderr)
        return 1
    models = sorted({r["model"] for r in manifest["recordings"].values()})
    print(f"{path}: {manifest['replies']} replies for {manifest.get('calls', '?')} calls "
          f"({', '.join(f'{k} {v}' for k, v in manifest.get('replies_by_role', {}).items())}); "
          f"models {', '.join(models)}; sha256 {manifest['sha256'][:16]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
