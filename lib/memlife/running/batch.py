"""A profile's model calls sent through a Batch API, in waves: `make batch PROFILE=P [NB=...]`.

    python -m memlife.running.batch --profile paper                         # every notebook that calls a model
    python -m memlife.running.batch --profile paper --notebook 22_read_restore
    python -m memlife.running.batch --profile paper --export requests.jsonl  # for vLLM's offline run_batch
    python -m memlife.running.batch --profile paper --import results.jsonl   # its output, into the cache

A wave runs the notebooks as the estimate runs them, in a scratch project of the batch's own
(.cache/batch/<profile>/), in the llm mode "collect" (`memlife.models.reply_cache`): every request
the recording and the cache lack is written down instead of sent, and answered with a stand-in
so that the notebook goes on. The requests are written as Batch API input files
(`memlife.models.batch_api`: custom_id the cache key, one model a file, split at the limits),
uploaded, submitted and polled; their replies go into the model-call cache, priced at the batch
price in the ledger (results/<profile>/usage/batch.calls.jsonl) and under the spending cap. The
next wave runs the notebooks again: what the last wave asked now comes from the cache, and the
requests that were built on its replies — the judge after the reader, the reads after the
importance scores — are asked. Waves repeat until a wave finds nothing to ask; then
`make reproduce PROFILE=P` answers every notebook from the cache.

Which requests wait: a stand-in reply carries a pending mark, and a request whose prompt holds
one is left to a later wave (deferred). A notebook that had to leave any request for later is
not done, and the notebooks that read its outputs (`config.UPSTREAM`) wait for a wave in which
it is. Memory ingestion (Mem0, MemOS: each call depends on the last) is sent at once, and the
embedded model's or Temp-LoRA's generations are made locally, as in a live run; the summary says
how many. What a wave built stays for the next: a notebook done in one wave is not run again,
and notebook 12's memory stores (built from replies received) are kept, and handed to the project
when the waves end, so that `make reproduce` does not ingest again; its journal, which a
collecting run fills with stand-in answers, is emptied before it runs again. (The estimate's own
stores cannot serve: they hold what stand-in replies extracted.)

An interrupt loses nothing: each batch is written to results/<profile>/batches/state.json the
moment it is created, and a rerun polls the open ones before it submits anything. Output lines
that name a request this run never sent refuse the whole file; lines in the error file, and the
requests of a batch that failed or expired, are asked again in the next wave (three times at most).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from memlife.base import config, paths
from memlife.models import accounting, batch_api, endpoints, reply_cache, spending
from memlife.models.llm import completion_of

MAX_ATTEMPTS = 3  # a request the service failed this often stops the run: it is not a transient fault
# What a notebook keeps across collecting runs that a stand-in answer would corrupt: emptied before
# it runs again (its memory stores, built from replies received, stay).
STAND_IN_STATE = {"12_memops_eval": ("memops/journal",)}
# Local work built from replies received (memory ingestion is sent at once, Temp-LoRA trains on the
# histories): handed to the project when the waves end, so `make reproduce` does not build it again.
LOCAL_WORK = ("memops/stores",)


def state_path(profile: str, root: Path | None = None) -> Path:
    return paths.layout(profile, root).run / "batches" / "state.json"


def load_state(profile: str, root: Path | None = None) -> dict:
    path = state_path(profile, root)
    if not path.is_file():
        return {"profile": profile, "open": [], "done": [], "attempts": {}, "exported": [], "waves": []}
    try:
        return json.loads(path.read_text())
    except ValueError as exc:
        raise batch_api.BatchError(f"{path}: not JSON ({exc}); it lists the batches submitted: repair it rather than "
                                   "delete it, or their replies are paid for again") from None


def save_state(state: dict, profile: str, root: Path | None = None) -> None:
    path = state_path(profile, root)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, path)  # atomic: an interrupt leaves the old state or the new, never half of one


# --------------------------------------------------------------------------- collecting


def _sources(usage_log: Path) -> dict[str, int]:
    counts: dict[str, int] = {}
    if usage_log.is_file():
        for line in usage_log.read_text().splitlines():
            if line.strip():
                src = json.loads(line).get("source", "?")
                counts[src] = counts.get(src, 0) + 1
    return counts


def collect(profile: str, notebooks: list[str], *, root: Path, scratch: Path, wave_dir: Path,
            done: set[str], quiet: bool = True, say=print) -> dict:
    """One collecting run of `notebooks` (DAG order) in `scratch`; the requests it would send,
    deduplicated and in the order asked, and per notebook what it asked, left, sent or made."""
    from memlife.running import runner

    cache = os.environ.get("MEMLIFE_CACHE_DIR") or str(paths.layout(profile, root).cache)
    per_nb: dict[str, dict] = {}
    blocked: set[str] = set()
    for nb in notebooks:
        if nb in done:
            continue
        waiting = [u for u in config.upstream(nb) if u in blocked]
        if waiting:
            blocked.add(nb)
            per_nb[nb] = {"waits_for": waiting}
            continue
        lay = paths.layout(profile, scratch)
        for rel in STAND_IN_STATE.get(nb, ()):
            _remove(lay.run / rel)
        out = wave_dir / "collected" / nb
        with runner.environ(MEMLIFE_ROOT=str(scratch), MEMLIFE_CACHE_DIR=cache, MEMLIFE_LLM_MODE="collect",
                            **{reply_cache.COLLECT_DIR_ENV: str(out)}):
            try:
                runner.run_notebook(nb, profile, root=scratch, quiet=quiet)
                failed = None
            except Exception as exc:  # said, and what depends on it waits; the run goes on
                failed = f"{type(exc).__name__}: {str(exc).strip()[-300:]}"
        src = _sources(lay.usage / f"{nb}.calls.jsonl")
        per_nb[nb] = {"pending": src.get("pending", 0), "deferred": src.get("deferred", 0),
                      "sent_at_once": src.get("live", 0), "answered": src.get("cache", 0) + src.get("recorded", 0)}
        if failed:
            per_nb[nb]["failed"] = failed
            say(f"   {nb} stopped while collecting ({failed}); the notebooks that read it wait")
        if failed or per_nb[nb]["pending"] or per_nb[nb]["deferred"]:
            blocked.add(nb)
    lines: dict[str, dict] = {}
    for f in sorted((wave_dir / "collected").glob("*/*.jsonl")):
        for n, raw in enumerate(f.read_text().splitlines(), 1):
            if raw.strip():
                line = json.loads(raw)
                lines.setdefault(line["key"], line)
    fresh = {k: v for k, v in lines.items() if reply_cache.cache_get(k) is None}
    return {"notebooks": per_nb, "blocked": sorted(blocked), "requests": list(fresh.values())}


def _remove(path: Path) -> None:
    import shutil

    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()


# --------------------------------------------------------------------------- submitting and reading back


def _reserve(lines: list[dict], what: str) -> int | None:
    """Reserve the worst case of `lines` at the batch price under the run's cap; None without a cap."""
    cap = endpoints.spend_cap_usd()
    if cap is None:
        return None
    unpriced = sorted({ln["model"] for ln in lines if ln.get("worst_usd") is None})
    if unpriced:
        raise endpoints.UnpricedModel(accounting.unpriced_message(lines[0]["role"], unpriced[0]))
    worst = sum(ln["worst_usd"] for ln in lines)
    try:
        return spending.reserve(worst, cap, role="batch", model=", ".join(sorted({ln["model"] for ln in lines})))
    except spending.CapReached as exc:
        raise endpoints.SpendingCapExceeded(
            f"spending cap ${cap:.2f}: {what} ({len(lines):,} requests) could cost up to ${worst:,.2f} at the batch price "
            f"(every completion at its whole budget), and ${exc.spent:,.2f} is spent or reserved; nothing was "
            "submitted. Raise MEMLIFE_SPEND_CAP_USD and run again: every reply received so far is in the cache, "
            "and no batch is submitted twice") from None


def submit(state: dict, profile: str, requests: list[dict], wave: int, wave_dir: Path, *, root: Path,
           max_lines: int = batch_api.MAX_LINES, max_bytes: int = batch_api.MAX_BYTES, say=print) -> None:
    """Write, upload and create a batch per input file; each recorded in the state as it is created."""
    groups: dict[tuple, list[dict]] = {}
    for r in requests:
        groups.setdefault((r["base_url"], r.get("api_key_env")), []).append(r)
    for (base_url, key_env), rows in groups.items():
        client = batch_api.BatchClient(base_url, key_env)
        by_key = {r["key"]: r for r in rows}
        files = batch_api.input_files((batch_api.input_line(r["key"], r["body"]) for r in rows),
                                      wave_dir / "input", stem=f"wave{wave:02d}", max_lines=max_lines,
                                      max_bytes=max_bytes)
        for f in files:
            keys = [json.loads(raw)["custom_id"] for raw in f.read_text().splitlines()]
            meta = [{k2: by_key[k][k2] for k2 in ("role", "model", "price", "notebook")} | {"key": k} for k in keys]
            reservation = _reserve([by_key[k] for k in keys], f"wave {wave}'s batch {f.name}")
            try:
                file_id = client.upload(f)
                batch = client.create(file_id, {"memlife_profile": profile, "memlife_wave": str(wave)})
            except BaseException:
                if reservation is not None:
                    spending.settle(reservation, 0.0)  # nothing was created: nothing can be billed
                raise
            (f.with_suffix(".meta.json")).write_text(json.dumps(meta, sort_keys=True) + "\n")
            state["open"].append({"id": batch["id"], "base_url": base_url, "api_key_env": key_env, "wave": wave,
                                  "file": str(f.relative_to(root)), "lines": len(keys), "reservation": reservation,
                                  "submitted_at": time.time()})
            save_state(state, profile, root)
            say(f"   submitted batch {batch['id']}: {len(keys):,} requests ({f.name})")


def import_lines(results: list[batch_api.Result], meta: dict[str, dict], state: dict, *, batch: bool = True) -> dict:
    """Put the replies of `results` in the cache and the ledger; count the failures per request."""
    usd, ok, failed, why = 0.0, 0, 0, []
    for r in results:
        m = meta[r.custom_id]
        if r.ok:
            try:
                c = completion_of(r.body, r.custom_id, m["model"], batch=batch)
            except ValueError as exc:
                r = batch_api.Result(r.custom_id, r.status, None, {"code": "not_a_completion", "message": str(exc)})
            else:
                reply_cache.store(r.custom_id, c, m["model"])
                c.source = "batch"
                price = accounting.Price(*m["price"]) if m.get("price") else None
                accounting._account(m["role"], c, (lambda p, o, **kw: price.usd(p, o, **kw)) if price else None)
                usd += price.usd(c.prompt_tokens, c.completion_tokens, cached_tokens=c.cached_tokens,
                                 batch=batch) if price else 0.0
                ok += 1
                continue
        failed += 1
        state["attempts"][r.custom_id] = state["attempts"].get(r.custom_id, 0) + 1
        if len(why) < 3:
            why.append(f"{r.custom_id[:16]} {r.why()}")
    return {"imported": ok, "failed": failed, "usd": usd, "why": why}


def finish_open(state: dict, profile: str, *, root: Path, poll_s: float, say=print) -> list[dict]:
    """Poll every open batch to its end and read its output and error files into the cache."""
    finished = []
    for entry in list(state["open"]):
        client = batch_api.BatchClient(entry["base_url"], entry.get("api_key_env"))
        b = client.wait(entry["id"], poll_s=poll_s, say=say)
        meta_path = (root / entry["file"]).with_suffix(".meta.json")
        meta = {m["key"]: m for m in json.loads(meta_path.read_text())}
        results: list[batch_api.Result] = []
        for kind in ("output_file_id", "error_file_id"):
            if b.get(kind):
                where = f"batch {entry['id']}'s {kind.split('_')[0]} file {b[kind]}"
                results += batch_api.check_known(client.content(b[kind]), where, set(meta))
        got = import_lines(results, meta, state)
        missing = len(meta) - len({r.custom_id for r in results})
        if entry.get("reservation") is not None:
            spending.settle(entry["reservation"], got["usd"])
        record = {**entry, "status": b["status"], "imported": got["imported"], "failed": got["failed"] + missing,
                  "usd": round(got["usd"], 9), "errors": (b.get("errors") or {}).get("data") or [],
                  "why": got["why"]}
        state["open"].remove(entry)
        state["done"].append(record)
        save_state(state, profile, root)
        note = f"; {got['failed'] + missing:,} to ask again ({'; '.join(got['why']) or b['status']})" \
            if got["failed"] + missing else ""
        say(f"   batch {entry['id']} {b['status']}: {got['imported']:,} replies into the cache, "
            f"${got['usd']:.4f} at the batch price{note}")
        finished.append(record)
    return finished


# --------------------------------------------------------------------------- the waves


def run(profile: str, notebooks: list[str] | None = None, *, root: Path | None = None, poll_s: float = 30.0,
        max_waves: int = 20, max_lines: int = batch_api.MAX_LINES, max_bytes: int = batch_api.MAX_BYTES,
        quiet: bool = True, say=print) -> dict:
    """Waves until nothing is left to ask; the state (results/<profile>/batches/state.json)."""
    from memlife.running import estimate

    root = Path(root) if root else paths.repo_root()
    chosen = _chosen(notebooks, root)
    endpoints.configure(profile, run="batch")
    state = load_state(profile, root)
    if state["open"]:
        say(f"== [{profile}] {len(state['open'])} batch(es) submitted before: polling them, submitting nothing new")
        finish_open(state, profile, root=root, poll_s=poll_s, say=say)
    scratch = estimate.scratch_root(profile, root, kind="batch")
    if not scratch.exists():
        estimate.prepare(profile, root, kind="batch")
    done: set[str] = set()
    for wave in range(len(state["waves"]) + 1, len(state["waves"]) + max_waves + 1):
        t0 = time.perf_counter()
        wave_dir = paths.layout(profile, root).run / "batches" / f"wave-{wave:02d}"
        say(f"== [{profile}] wave {wave}: collecting what {', '.join(n for n in chosen if n not in done)} would ask")
        got = collect(profile, chosen, root=root, scratch=scratch, wave_dir=wave_dir, done=done, quiet=quiet, say=say)
        for nb, r in got["notebooks"].items():
            if "waits_for" in r:
                say(f"   {nb}: waits for {', '.join(r['waits_for'])}")
            else:
                say(f"   {nb}: {r['pending']:,} to batch, {r['deferred']:,} left for a later wave, "
                    f"{r['sent_at_once']:,} sent at once or made locally, {r['answered']:,} answered from the cache")
        done |= {nb for nb in got["notebooks"] if nb not in got["blocked"]}
        requests = got["requests"]
        stuck = [r["key"][:16] for r in requests if state["attempts"].get(r["key"], 0) >= MAX_ATTEMPTS]
        if stuck:
            raise batch_api.BatchError(f"{len(stuck)} request(s) failed {MAX_ATTEMPTS} times in a batch ({', '.join(stuck[:3])}; "
                                       f"the reasons: results/{profile}/batches/state.json, 'done'); send them live "
                                       f"(make reproduce PROFILE={profile}) to see the endpoint's answer")
        summary = {"wave": wave, "notebooks": got["notebooks"], "requests": len(requests)}
        if not requests:
            if got["blocked"]:
                raise batch_api.BatchError(f"wave {wave} found nothing to ask, yet {got['blocked']} are not done: "
                                           f"{json.dumps(got['notebooks'])[:400]}")
            state["waves"].append({**summary, "wall_s": round(time.perf_counter() - t0, 1)})
            save_state(state, profile, root)
            kept = adopt_local_work(profile, scratch, root)
            say(f"== [{profile}] every request of {', '.join(chosen)} is answered: make reproduce PROFILE={profile} "
                "answers them from the cache" + (f" (and finds {', '.join(kept)} built)" if kept else ""))
            return state
        submit(state, profile, requests, wave, wave_dir, root=root, max_lines=max_lines, max_bytes=max_bytes, say=say)
        finished = finish_open(state, profile, root=root, poll_s=poll_s, say=say)
        summary |= {"imported": sum(f["imported"] for f in finished), "failed": sum(f["failed"] for f in finished),
                    "usd": round(sum(f["usd"] for f in finished), 6), "wall_s": round(time.perf_counter() - t0, 1)}
        state["waves"].append(summary)
        save_state(state, profile, root)
    raise batch_api.BatchError(f"{max_waves} waves and still requests to ask; run again to go on (nothing is lost)")


def adopt_local_work(profile: str, scratch: Path, root: Path) -> list[str]:
    """Move what the waves built from received replies (LOCAL_WORK) into the project, entry by
    entry, leaving a link behind; an entry the project already has stays the project's."""
    import shutil

    kept = []
    for rel in LOCAL_WORK:
        src, dst = paths.layout(profile, scratch).run / rel, paths.layout(profile, root).run / rel
        if not src.is_dir() or src.is_symlink():
            continue
        for entry in sorted(src.iterdir()):  # one folder per run key
            target = dst / entry.name
            if entry.is_symlink() or target.exists():
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(entry), str(target))
            entry.symlink_to(target.resolve(), target_is_directory=True)
            kept.append(str(target.relative_to(root)))
    return kept


def _chosen(notebooks: list[str] | None, root: Path) -> list[str]:
    from memlife.running import estimate

    chosen = list(notebooks) if notebooks else list(estimate.CALLING)
    unknown = [n for n in chosen if not (root / "notebooks" / f"{n}.ipynb").is_file()]
    if unknown:
        raise SystemExit(f"no such notebook: {unknown}")
    # With a notebook named, the ones it reads come first: their outputs are its inputs.
    every = sorted({u for n in chosen for u in (n, *config.upstream(n))})
    return [n for n in every if n in estimate.CALLING or n in chosen]


# --------------------------------------------------------------------------- vLLM's run_batch


def export(profile: str, dest: Path, notebooks: list[str] | None = None, *, root: Path | None = None,
           quiet: bool = True, say=print) -> list[Path]:
    """One collecting wave, its requests written as batch input files for vLLM's offline run_batch
    (one model a file: `dest`, or DEST-<model>.jsonl when there are several)."""
    from memlife.running import estimate

    root = Path(root) if root else paths.repo_root()
    chosen = _chosen(notebooks, root)
    endpoints.configure(profile, run="batch")
    state = load_state(profile, root)
    scratch = estimate.scratch_root(profile, root, kind="batch")
    if not scratch.exists():
        estimate.prepare(profile, root, kind="batch")
    wave_dir = paths.layout(profile, root).run / "batches" / f"export-{len(state['exported']) + 1:02d}"
    got = collect(profile, chosen, root=root, scratch=scratch, wave_dir=wave_dir, done=set(), quiet=quiet, say=say)
    requests = got["requests"]
    if not requests:
        say(f"== [{profile}] nothing left to ask: make reproduce PROFILE={profile} answers every notebook from the cache")
        return []
    files = batch_api.input_files((batch_api.input_line(r["key"], r["body"]) for r in requests), wave_dir / "input")
    dest = Path(dest)
    out = []
    for f in files:
        target = dest if len(files) == 1 else dest.with_name(f"{dest.stem}-{f.stem.split('-', 1)[1]}{dest.suffix}")
        target.write_bytes(f.read_bytes())
        out.append(target)
    state["exported"].append({"files": [str(p) for p in out],
                              "requests": [{k: r[k] for k in ("key", "role", "model", "price", "notebook")}
                                           for r in requests]})
    save_state(state, profile, root)
    say(f"== [{profile}] {len(requests):,} requests in {', '.join(map(str, out))}; run them with vLLM "
        f"(python -m vllm.entrypoints.openai.run_batch -i FILE -o OUT --model MODEL), then --import OUT, "
        "and export again until nothing is left")
    return out


def import_file(profile: str, path: Path, *, root: Path | None = None, say=print) -> dict:
    """Read an output file of vLLM's run_batch (OpenAI's output format) into the cache: every line
    must answer a request an export of this profile wrote."""
    root = Path(root) if root else paths.repo_root()
    endpoints.configure(profile, run="batch")
    state = load_state(profile, root)
    meta = {r["key"]: r for e in state["exported"] for r in e["requests"]}
    if not meta:
        raise batch_api.BatchError(f"profile {profile} has exported no requests (results/{profile}/batches/state.json): "
                                   f"run --export first")
    results = batch_api.check_known(Path(path).read_bytes(), str(path), set(meta))
    got = import_lines(results, meta, state)
    save_state(state, profile, root)
    say(f"== [{profile}] {got['imported']:,} replies into the cache from {path}; {got['failed']:,} failed"
        + (f" ({'; '.join(got['why'])})" if got["why"] else ""))
    return got


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m memlife.running.batch", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default="quick", help="any configs/<name>.yaml")
    ap.add_argument("--notebook", action="append", help="only this notebook (and what it reads; repeatable)")
    ap.add_argument("--poll-s", type=float, default=30.0, help="seconds between polls of a batch")
    ap.add_argument("--max-waves", type=int, default=20)
    how = ap.add_mutually_exclusive_group()
    how.add_argument("--export", type=Path, metavar="FILE", help="write the requests for vLLM's run_batch instead")
    how.add_argument("--import", dest="import_", type=Path, metavar="FILE", help="read run_batch's output into the cache")
    a = ap.parse_args(argv)
    try:
        if a.export:
            export(a.profile, a.export, a.notebook)
        elif a.import_:
            import_file(a.profile, a.import_)
        else:
            run(a.profile, a.notebook, poll_s=a.poll_s, max_waves=a.max_waves)
    except (endpoints.LLMError, batch_api.BatchError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
