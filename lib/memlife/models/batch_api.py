"""The Batch API: input files, the Files and Batches calls, and output files read back.

OpenAI's Batch API (also Azure OpenAI's and Together's) answers chat requests within 24 hours at
half the price, in a rate-limit pool of its own. A batch is a JSONL file, one request a line:
``{"custom_id": KEY, "method": "POST", "url": "/v1/chat/completions", "body": BODY}``, where
KEY is the request's cache key (``memlife.models.reply_cache.request_key``), so every output line
goes straight into the cache under the key the notebooks will ask for. One model per file, at
most ``MAX_LINES`` lines and ``MAX_BYTES`` bytes (the service's limits); ``input_files`` splits.
The file is uploaded (Files API, purpose ``batch``), a batch is created on it
(``completion_window`` 24h) and polled; its output file holds the replies, its error file the
requests that failed. vLLM's offline ``run_batch`` reads the same input format and writes the
same output format, so the files serve a self-hosted model too.

Every line read back is checked: a line that is not JSON, lacks its custom_id or its response,
or names a custom_id that was never sent is an error naming the file, the line and the field.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

from memlife.models import endpoints

URL = "/v1/chat/completions"
COMPLETION_WINDOW = "24h"
MAX_LINES = 50_000
MAX_BYTES = 200 * 1024 * 1024
TERMINAL = ("completed", "failed", "expired", "cancelled")


class BatchError(endpoints.LLMError):
    """A Batch API call or file that cannot be used as it is."""


class BatchUnsupported(BatchError):
    """The endpoint has no Files or Batches API (vLLM's and Ollama's servers, llama.cpp's)."""


def input_line(key: str, body: dict) -> dict:
    return {"custom_id": key, "method": "POST", "url": URL, "body": body}


def input_files(lines: Iterable[dict], out_dir: Path, *, stem: str = "batch", max_lines: int = MAX_LINES,
                max_bytes: int = MAX_BYTES) -> list[Path]:
    """Write input lines (``input_line``) as JSONL files under `out_dir`: one model per file, a new
    file before one would pass `max_lines` lines or `max_bytes` bytes. The given order is kept
    within a model, so requests sharing a prompt prefix stay next to each other (the provider's
    prompt cache can serve them). Returns the files in the order written."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    by_model: dict[str, list[bytes]] = {}
    seen: set[str] = set()
    for line in lines:
        if line["custom_id"] in seen:
            raise BatchError(f"custom_id {line['custom_id']} twice in one batch: the service refuses the file")
        seen.add(line["custom_id"])
        data = (json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")
        if len(data) > max_bytes:
            raise BatchError(f"request {line['custom_id'][:16]} alone is {len(data):,} bytes, over a batch file's "
                             f"{max_bytes:,}: send it live")
        by_model.setdefault(line["body"]["model"], []).append(data)
    written = []
    for model, rows in by_model.items():
        safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in model)
        part, size, count, fh = 0, 0, 0, None
        for data in rows:
            if fh is None or count >= max_lines or size + len(data) > max_bytes:
                if fh is not None:
                    fh.close()
                part += 1
                path = out_dir / f"{stem}-{safe}-{part:03d}.jsonl"
                fh, size, count = open(path, "wb"), 0, 0
                written.append(path)
            fh.write(data)
            size += len(data)
            count += 1
        if fh is not None:
            fh.close()
    return written


@dataclass
class Result:
    """One line of an output or error file."""
    custom_id: str
    status: int | None  # the HTTP status of the request; None when the service gave none (expired)
    body: dict | None  # the chat completion (status 200) or the error body
    error: dict | None  # the line's own error, e.g. {"code": "batch_expired", ...}

    @property
    def ok(self) -> bool:
        return self.status == 200 and isinstance(self.body, dict) and self.error is None

    def why(self) -> str:
        err = self.error or ((self.body or {}).get("error") if isinstance(self.body, dict) else None) or {}
        return f"{err.get('code') or self.status}: {str(err.get('message') or '')[:160]}"


def read_results(data: bytes | str, where: str, known: set[str] | None = None) -> Iterator[Result]:
    """The lines of an output or error file (`where` names it in errors). With `known`, a
    custom_id outside it is an error: the file is not this run's answer."""
    text = data.decode("utf-8") if isinstance(data, bytes) else data
    for n, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            line = json.loads(raw)
        except ValueError as exc:
            raise BatchError(f"{where}, line {n}: not JSON ({exc})") from None
        if not isinstance(line, dict) or not isinstance(line.get("custom_id"), str):
            raise BatchError(f"{where}, line {n}: no custom_id (a string) in {raw[:120]!r}")
        key = line["custom_id"]
        if known is not None and key not in known:
            raise BatchError(f"{where}, line {n}: custom_id {key[:40]!r} is no request this run sent; the file "
                             "belongs to another run (nothing of it was read into the cache)")
        resp, error = line.get("response"), line.get("error")
        if resp is None and error is None:
            raise BatchError(f"{where}, line {n} (custom_id {key[:16]}): neither a response nor an error")
        if resp is not None and not isinstance(resp, dict):
            raise BatchError(f"{where}, line {n} (custom_id {key[:16]}): response is not an object")
        status = (resp or {}).get("status_code")
        yield Result(custom_id=key, status=int(status) if isinstance(status, int) else None,
                     body=(resp or {}).get("body"), error=error if isinstance(error, dict) else None)


def check_known(data: bytes | str, where: str, known: set[str]) -> list[Result]:
    """Every line of a file, read whole before any is used: a file naming a request this run never
    sent is refused as a whole, so nothing of another run's answers enters the cache."""
    return list(read_results(data, where, known))


class BatchClient:
    """The Files and Batches calls against one endpoint (base URL and the variable holding its key)."""

    def __init__(self, base_url: str, api_key_env: str | None, *, timeout_s: float = 600.0):
        import os

        import openai

        self.base_url = base_url
        key = os.environ.get(api_key_env or "", "") or "not-needed"
        self._openai = openai.OpenAI(base_url=base_url, api_key=key, max_retries=3, timeout=timeout_s)

    def _call(self, what: str, fn):
        import openai

        try:
            return fn()
        except openai.NotFoundError as exc:
            if what in ("upload", "create"):
                raise BatchUnsupported(
                    f"{self.base_url} has no Batch API ({what}: HTTP 404 {str(exc)[:120]}); vLLM's, Ollama's and "
                    "llama.cpp's servers have none: run the notebooks live (make reproduce PROFILE=...), or export "
                    "the requests for vLLM's offline run_batch (python -m memlife.running.batch --export FILE)"
                ) from None
            raise BatchError(f"{self.base_url}: {what}: HTTP 404 {str(exc)[:200]}") from None
        except openai.APIStatusError as exc:
            raise BatchError(f"{self.base_url}: {what}: HTTP {exc.status_code} {str(exc)[:300]}") from None
        except openai.APIConnectionError as exc:
            raise BatchError(f"{self.base_url}: {what}: cannot reach the endpoint ({exc})") from None

    def upload(self, path: Path) -> str:
        with open(path, "rb") as fh:
            return self._call("upload", lambda: self._openai.files.create(file=fh, purpose="batch")).id

    def create(self, file_id: str, metadata: dict | None = None) -> dict:
        return self._call("create", lambda: self._openai.batches.create(
            input_file_id=file_id, endpoint=URL, completion_window=COMPLETION_WINDOW,
            metadata=metadata or None)).model_dump()

    def retrieve(self, batch_id: str) -> dict:
        return self._call("retrieve", lambda: self._openai.batches.retrieve(batch_id)).model_dump()

    def content(self, file_id: str) -> bytes:
        return self._call("download", lambda: self._openai.files.content(file_id)).read()

    def wait(self, batch_id: str, *, poll_s: float = 30.0, say=print) -> dict:
        """Poll until the batch ends, saying each change of state or count once."""
        last = None
        while True:
            b = self.retrieve(batch_id)
            counts = b.get("request_counts") or {}
            now = (b["status"], counts.get("completed"), counts.get("failed"))
            if now != last:
                say(f"   batch {batch_id}: {b['status']}, {counts.get('completed') or 0:,} of "
                    f"{counts.get('total') or 0:,} done, {counts.get('failed') or 0:,} failed")
                last = now
            if b["status"] in TERMINAL:
                return b
            time.sleep(poll_s)
