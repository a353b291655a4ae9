"""A loopback stand-in for OpenAI's Files and Batch APIs, on top of StrictServer's chat endpoint.

It behaves as the real service does, as far as its documentation and observed answers go (sources
in the comments): the Files API stores an upload and returns the file object; POST /v1/batches
returns a batch in "validating"; the input file is checked line by line and a bad one fails the
batch with OpenAI's error codes and line numbers; every line's body then goes through StrictServer's
rules (`_check`) and reply (`_answer`), so whatever the chat endpoint rejects lands in the error
file with the same status and error body. The output and error files are JSONL in OpenAI's shapes:

    output:  {"id": "batch_req_...", "custom_id": ..., "error": null,
              "response": {"status_code": 200, "request_id": ..., "body": <chat.completion>}}
    error:   the same with the line's status_code (400, 429, 500...) and body {"error": {...}}, or,
             for a line never run, {"response": null, "error": {"code": "batch_expired" |
             "batch_cancelled", "message": ...}}

The batch moves one state per retrieve (validating -> in_progress -> finalizing -> completed), so a
poller sees every state without waiting. Faults a test may set: `fail_custom_ids`,
`fail_next_batches`, `expire_next_batches`; `batch_api=False` answers these routes 404
{"detail": "Not Found"}, as vLLM's OpenAI-compatible server does (it implements neither API).

Run standalone (``python tests/batchserver.py --window 32768 --prompt-cache``) it prints its URL and
serves until killed.
"""
from __future__ import annotations

import hashlib
import json
import random
import re
import threading
import time
from collections import Counter

from strictserver import StrictServer

# The endpoints POST /v1/batches accepts (the openai SDK's BatchCreateParams); this stand-in serves
# only chat completions and answers the others 400 (its own choice: it has nothing to run them on).
OPENAI_BATCH_ENDPOINTS = ("/v1/responses", "/v1/chat/completions", "/v1/embeddings", "/v1/completions",
                          "/v1/moderations", "/v1/images/generations", "/v1/images/edits", "/v1/videos")
SERVED_ENDPOINT = "/v1/chat/completions"
FILE_PURPOSES = ("assistants", "batch", "fine-tune", "vision", "user_data", "evals")

# OpenAI's documented limits: "The file can contain up to 50,000 requests, and can be up to 200 MB in
# size" (batches.create), and "Individual files can be up to 512 MB" (files.create). Observed: the
# Files API refuses a file over 512 MB at upload (400 "File is too large."), while an upload between
# 200 and 512 MB is stored and the *batch* fails validation ("The batch input file is larger than
# the 209715200 maximum for the gpt-4o model..."), so 200 MB means 200 MiB and is checked there.
MAX_REQUESTS = 50_000
MAX_BATCH_FILE_BYTES = 200 * 1024 * 1024
MAX_UPLOAD_BYTES = 512 * 1024 * 1024

DAY_S = 24 * 3600

# What OpenAI answers a 500 (the chat endpoint's wording).
SERVER_ERROR = {"message": "The server had an error while processing your request. Sorry about that!",
                "type": "server_error", "param": None, "code": None}

# The best-known transient validation failure (openai/openai-python#2084 shows it verbatim):
# `fail_next_batches` fails a batch with it unless a test sets another `fail_batch_error`.
TOKEN_LIMIT_ERROR = {"code": "token_limit_exceeded", "line": None, "param": None,
                     "message": "Enqueued token limit reached for {model} in organization org-test. Limit: "
                                "2,000,000 enqueued tokens. Please try again once some in_progress batches "
                                "have been completed."}


def _api_error(message: str, param: str | None = None, code: str | None = None,
               type_: str = "invalid_request_error") -> dict:
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


def _batch_error(code: str, message: str, line: int | None = None, param: str | None = None) -> dict:
    return {"code": code, "message": message, "param": param, "line": line}


def parse_multipart(body: bytes, content_type: str) -> dict[str, tuple[str | None, bytes]] | None:
    """multipart/form-data fields as {name: (filename or None, bytes)}; None if not multipart.

    Written out rather than taken from `cgi` (gone in Python 3.13) or `email` (which may rewrite line
    endings): the uploaded bytes must come back exactly."""
    m = re.search(r'boundary="?([^";]+)"?', content_type or "")
    if not (content_type or "").lower().startswith("multipart/form-data") or not m:
        return None
    fields: dict[str, tuple[str | None, bytes]] = {}
    for part in body.split(b"--" + m.group(1).encode())[1:]:
        if part.startswith(b"--"):  # the closing delimiter
            break
        head, _, data = part.partition(b"\r\n\r\n")
        if data.endswith(b"\r\n"):  # the CRLF before the next delimiter belongs to it
            data = data[:-2]
        disposition = next((h for h in head.decode("utf-8", "replace").split("\r\n")
                            if h.lower().startswith("content-disposition")), "")
        name = re.search(r'\bname="([^"]*)"', disposition)
        filename = re.search(r'\bfilename="([^"]*)"', disposition)
        if name:
            fields[name.group(1)] = (filename.group(1) if filename else None, data)
    return fields


def _shuffled(items: list, seed: str) -> list:
    """`items` in a deterministic order that is never the input order (for two or more items): the
    real output file does not follow the input, and a client must match lines by custom_id."""
    order = list(range(len(items)))
    random.Random(seed).shuffle(order)
    if len(order) > 1 and order == sorted(order):
        order = order[1:] + order[:1]
    return [items[i] for i in order]


class BatchServer(StrictServer):
    def __init__(self, *, batch_api: bool = True, max_requests: int = MAX_REQUESTS,
                 max_file_bytes: int = MAX_BATCH_FILE_BYTES, max_upload_bytes: int = MAX_UPLOAD_BYTES,
                 **chat_options):
        StrictServer.__init__(self, **chat_options)
        self.batch_api = batch_api
        self.max_requests = max_requests  # lines per batch input file (checked in "validating")
        self.max_file_bytes = max_file_bytes  # bytes per batch input file (checked in "validating")
        self.max_upload_bytes = max_upload_bytes  # bytes per upload (the Files API refuses more)
        # Faults a test sets.
        self.fail_custom_ids: set[str] = set()  # these lines: 500 server_error in the error file
        self.fail_next_batches = 0  # the next N batches fail validation with `fail_batch_error`
        self.fail_batch_error = dict(TOKEN_LIMIT_ERROR)
        self.expire_next_batches = 0  # the next N batches expire with half their lines run
        # What happened, for tests.
        self.uploads: list[tuple[str, int]] = []  # (file id, non-blank lines) of every upload
        self.batches: list[str] = []  # ids of the batches created, in order
        self.batch_lines_processed: Counter = Counter()  # custom_id -> times a batch ran that line
        # State.
        self.files: dict[str, dict] = {}  # file id -> file object
        self.file_bytes: dict[str, bytes] = {}
        self.batch_objects: dict[str, dict] = {}  # batch id -> batch object (as GET returns it)
        self._jobs: dict[str, dict] = {}  # batch id -> what the client does not see
        self._serial = 0
        self._batch_lock = threading.RLock()  # not StrictServer's _lock: running lines takes that one
        outer = self
        chat_handler = self.httpd.RequestHandlerClass  # StrictServer's handler, built in its __init__

        class Handler(chat_handler):
            """StrictServer's handler, with /v1/files and /v1/batches routed here."""

            def _route(self, method: str) -> bool:
                path = self.path.split("?", 1)[0].rstrip("/")
                parts = path.split("/")
                if len(parts) < 3 or parts[1] != "v1" or parts[2] not in ("files", "batches"):
                    return False
                # Read the whole body first, whatever the answer: the connection is kept alive and
                # unread bytes would be taken for the client's next request.
                body = self._read_body()
                if not self._authorized():
                    return True
                if not outer.batch_api:  # vLLM (FastAPI): an unknown route is 404 {"detail": "Not Found"}
                    self._json(404, {"detail": "Not Found"})
                    return True
                status, payload = outer._serve(method, parts[2:], self.headers, body)
                if isinstance(payload, bytes):
                    self.send_response(status)
                    self.send_header("Content-Type", "application/octet-stream")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                else:
                    if status == 404 and payload is None:
                        payload = _api_error(f"Invalid URL ({method} {path})")  # OpenAI's unknown route
                    self._json(status, payload)
                return True

            def _read_body(self) -> bytes:
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    out = bytearray()
                    while True:
                        size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                        if size == 0:
                            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                                pass  # trailers
                            return bytes(out)
                        out += self.rfile.read(size)
                        self.rfile.readline()
                return self.rfile.read(int(self.headers.get("Content-Length", 0) or 0))

            def do_GET(self):
                if not self._route("GET"):
                    super().do_GET()

            def do_POST(self):
                if not self._route("POST"):
                    super().do_POST()

            def do_DELETE(self):
                if not self._route("DELETE"):
                    self._json(404, _api_error(f"Invalid URL (DELETE {self.path})"))

        # Loopback built the server with StrictServer's handler; it looks the class up per request.
        self.httpd.RequestHandlerClass = Handler

    # -- routing

    def _serve(self, method: str, parts: list[str], headers, body: bytes):
        """(status, JSON payload | raw bytes | None for an unknown route) for /v1/files... and
        /v1/batches...; `parts` is the path after /v1, split on '/'."""
        kind, rest = parts[0], parts[1:]
        with self._batch_lock:
            if kind == "files":
                if method == "POST" and not rest:
                    return self._upload(headers.get("Content-Type", ""), body)
                if method == "GET" and not rest:
                    return 200, {"object": "list", "data": list(self.files.values()), "has_more": False}
                if not rest or rest[0] not in self.files:
                    return (404, _api_error(f"No such File object: {rest[0]}", "id")) if rest else (404, None)
                fid = rest[0]
                if method == "GET" and len(rest) == 1:
                    return 200, self.files[fid]
                if method == "GET" and rest[1:] == ["content"]:
                    return 200, self.file_bytes[fid]
                if method == "DELETE" and len(rest) == 1:
                    del self.files[fid], self.file_bytes[fid]
                    return 200, {"id": fid, "object": "file", "deleted": True}
                return 404, None
            if method == "POST" and not rest:
                return self._create(body)
            if method == "GET" and not rest:
                data = sorted(self.batch_objects.values(), key=lambda b: -self._jobs[b["id"]]["serial"])
                return 200, {"object": "list", "data": data, "first_id": data[0]["id"] if data else None,
                             "last_id": data[-1]["id"] if data else None, "has_more": False}
            if not rest or rest[0] not in self.batch_objects:
                return (404, _api_error(f"No batch found with id '{rest[0]}'.")) if rest else (404, None)
            if method == "GET" and len(rest) == 1:
                self._advance(rest[0])
                return 200, self.batch_objects[rest[0]]
            if method == "POST" and rest[1:] == ["cancel"]:
                return self._cancel(rest[0])
            return 404, None

    def _new_id(self, prefix: str, length: int) -> str:
        # Deterministic per server (so the output order, seeded by the batch id, is reproducible).
        self._serial += 1
        return prefix + hashlib.sha256(f"{prefix}{self._serial}".encode()).hexdigest()[:length]

    # -- Files API

    def _store(self, data: bytes, filename: str, purpose: str) -> dict:
        fid = self._new_id("file-", 22)
        now = int(time.time())
        obj = {"id": fid, "object": "file", "bytes": len(data), "created_at": now, "filename": filename,
               "purpose": purpose, "status": "processed", "status_details": None,
               # "files with purpose=batch expire after 30 days" (files.create); others do not.
               "expires_at": now + 30 * DAY_S if purpose in ("batch", "batch_output") else None}
        self.files[fid] = obj
        self.file_bytes[fid] = data
        return obj

    def _upload(self, content_type: str, body: bytes):
        fields = parse_multipart(body, content_type)
        if fields is None:
            return 400, _api_error("Invalid request: the body must be multipart/form-data with 'file' and "
                                   "'purpose'.")
        for name in ("purpose", "file"):
            if name not in fields:
                return 400, _api_error(f"Missing required parameter: '{name}'.", name,
                                       "missing_required_parameter")
        purpose = fields["purpose"][1].decode("utf-8", "replace")
        filename, data = fields["file"]
        if purpose not in FILE_PURPOSES:
            return 400, _api_error(f"'{purpose}' is not one of {list(FILE_PURPOSES)} - 'purpose'", "purpose",
                                   "invalid_value")
        if len(data) > self.max_upload_bytes:
            return 400, _api_error("File is too large.")  # observed wording, no param or code
        lines = [line for line in data.split(b"\n") if line.strip()]
        if purpose == "batch":
            # Observed (llama-stack's tests against OpenAI): an empty or unparseable file is refused
            # at upload, while one whose first line parses is stored and its later lines are left to
            # the batch's validation. The exact wording is not documented.
            try:
                json.loads(lines[0]) if lines else None
                ok = bool(lines)
            except ValueError:
                ok = False
            if not ok:
                return 400, _api_error("Invalid file format for Batch API. Must be .jsonl")
        obj = self._store(data, filename or "upload", purpose)
        self.uploads.append((obj["id"], len(lines)))
        return 200, obj

    # -- Batches API

    def _create(self, body: bytes):
        try:
            req = json.loads(body or b"{}")
        except ValueError:
            return 400, _api_error("We could not parse the JSON body of your request.")
        for name in ("input_file_id", "endpoint", "completion_window"):
            if not req.get(name):
                return 400, _api_error(f"Missing required parameter: '{name}'.", name, "missing_required_parameter")
        endpoint, window = req["endpoint"], req["completion_window"]
        if endpoint not in OPENAI_BATCH_ENDPOINTS:
            supported = ", ".join(f"'{e}'" for e in OPENAI_BATCH_ENDPOINTS)
            return 400, _api_error(f"Invalid value: '{endpoint}'. Supported values are: {supported}.", "endpoint",
                                   "invalid_value")
        if endpoint != SERVED_ENDPOINT:
            return 400, _api_error(f"This stand-in serves only '{SERVED_ENDPOINT}' batches, not '{endpoint}'.",
                                   "endpoint", "invalid_value")
        if window != "24h":  # "Currently only 24h is supported."
            return 400, _api_error(f"Invalid value: '{window}'. Supported values are: '24h'.", "completion_window",
                                   "invalid_value")
        metadata = req.get("metadata")
        if metadata is not None:  # 16 pairs at most, keys <= 64 chars, string values <= 512 chars
            if not isinstance(metadata, dict) or len(metadata) > 16:
                return 400, _api_error("Invalid 'metadata': expected an object with at most 16 keys.", "metadata",
                                       "invalid_value")
            for k, v in metadata.items():
                if not isinstance(v, str):
                    return 400, _api_error(f"Invalid type for 'metadata.{k}': expected a string, but got "
                                           f"{type(v).__name__} instead.", f"metadata.{k}", "invalid_type")
                if len(k) > 64 or len(v) > 512:
                    return 400, _api_error(f"Invalid 'metadata.{k}': keys are at most 64 characters and values "
                                           "at most 512.", f"metadata.{k}", "string_above_max_length")
        bid = self._new_id("batch_", 32)
        now = int(time.time())
        batch = {"id": bid, "object": "batch", "endpoint": endpoint, "errors": None,
                 "input_file_id": req["input_file_id"], "completion_window": window, "status": "validating",
                 "output_file_id": None, "error_file_id": None, "created_at": now, "in_progress_at": None,
                 "expires_at": now + DAY_S, "finalizing_at": None, "completed_at": None, "failed_at": None,
                 "expired_at": None, "cancelling_at": None, "cancelled_at": None,
                 "request_counts": {"total": 0, "completed": 0, "failed": 0}, "metadata": metadata,
                 "model": None, "usage": None}
        # The faults are drawn when the batch is created, so "the next N batches" means creation order.
        fail = self.fail_next_batches > 0
        expire = not fail and self.expire_next_batches > 0
        self.fail_next_batches -= fail
        self.expire_next_batches -= expire
        job = {"serial": self._serial, "requests": None, "output": [], "errors": [], "fail": fail, "expire": expire}
        self.batch_objects[bid], self._jobs[bid] = batch, job
        self.batches.append(bid)
        return 200, batch

    def _cancel(self, bid: str):
        batch = self.batch_objects[bid]
        if batch["status"] in ("completed", "failed", "expired"):
            # Observed: 409 "Cannot cancel a batch with status 'completed'." (same for failed);
            # cancelling a cancelling or cancelled batch is allowed and changes nothing.
            return 409, _api_error(f"Cannot cancel a batch with status '{batch['status']}'.")
        if batch["status"] not in ("cancelling", "cancelled"):
            batch.update(status="cancelling", cancelling_at=int(time.time()))
        return 200, batch

    def _advance(self, bid: str) -> None:
        """One state further, as one retrieve of the batch sees it."""
        batch, job = self.batch_objects[bid], self._jobs[bid]
        now = int(time.time())
        status = batch["status"]
        if status == "validating":
            errors, requests, model = self._validate(batch)
            if job["fail"] and not errors:
                e = dict(self.fail_batch_error)
                e["message"] = e["message"].replace("{model}", model or "the model")
                errors = [e]
            if errors:
                batch.update(status="failed", failed_at=now, errors={"object": "list", "data": errors})
                return
            job["requests"] = requests
            batch.update(status="in_progress", in_progress_at=now, model=model,
                         request_counts={"total": len(requests), "completed": 0, "failed": 0})
        elif status == "in_progress":
            requests = job["requests"]
            # An expiring batch runs half its lines (in input order) before the window ends.
            ran = requests[: len(requests) // 2] if job["expire"] else requests
            for req in ran:
                ok, line = self._run_line(bid, req)
                job["output" if ok else "errors"].append(line)
            if job["expire"]:
                for req in requests[len(ran):]:
                    job["errors"].append(self._unrun_line(bid, req, "batch_expired", "This request could not be "
                                                          "executed before the completion window expired."))
                self._finish(batch, job, status="expired", expired_at=now)
                return
            batch.update(status="finalizing", finalizing_at=now, request_counts=self._counts(job))
        elif status == "finalizing":
            self._finish(batch, job, status="completed", completed_at=now)
        elif status == "cancelling":
            # Lines not run yet end in the error file with the spec's "batch_cancelled" code. In this
            # stand-in lines run on the in_progress -> finalizing step, so a batch cancelled before
            # that has none run (one cancelled while validating has none parsed either).
            done = {line["custom_id"] for line in job["output"] + job["errors"]}
            for req in job["requests"] or []:
                if req["custom_id"] not in done:
                    job["errors"].append(self._unrun_line(bid, req, "batch_cancelled", "This request was not "
                                                          "executed because the batch was cancelled."))
            self._finish(batch, job, status="cancelled", cancelled_at=now)

    @staticmethod
    def _counts(job: dict) -> dict:
        # Documentation is silent on how expired and cancelled lines count; here every line in the
        # error file counts as failed, so completed + failed == total once the batch has ended.
        total = len(job["requests"] or [])
        return {"total": total, "completed": len(job["output"]), "failed": len(job["errors"])}

    def _finish(self, batch: dict, job: dict, **update) -> None:
        """Write the output and error files (shuffled; a file only where it has lines) and end the batch."""
        bid = batch["id"]
        for key, lines, suffix in (("output_file_id", job["output"], "output"),
                                   ("error_file_id", job["errors"], "error")):
            if lines:
                data = "".join(json.dumps(line) + "\n" for line in _shuffled(lines, f"{bid}/{suffix}")).encode()
                update[key] = self._store(data, f"{bid}_{suffix}.jsonl", "batch_output")["id"]
        usage = [line["response"]["body"]["usage"] for line in job["output"]]
        if usage:
            update["usage"] = {
                "input_tokens": sum(u["prompt_tokens"] for u in usage),
                "input_tokens_details": {"cached_tokens": sum(u["prompt_tokens_details"]["cached_tokens"]
                                                              for u in usage)},
                "output_tokens": sum(u["completion_tokens"] for u in usage),
                "output_tokens_details": {"reasoning_tokens": sum(u["completion_tokens_details"]["reasoning_tokens"]
                                                                  for u in usage)},
                "total_tokens": sum(u["prompt_tokens"] + u["completion_tokens"] for u in usage)}
        batch.update(request_counts=self._counts(job), **update)

    # -- validation of the input file, as in "validating"

    def _validate(self, batch: dict) -> tuple[list[dict], list[dict], str | None]:
        """(errors, requests, model). Codes and wording are OpenAI's where observed (quoted in
        llama-stack's integration tests against OpenAI, and by providers that copy its Batch API);
        the rest are this stand-in's choices, marked so."""
        fid = batch["input_file_id"]
        if fid not in self.files:
            return [_batch_error("invalid_request", f"Cannot find file {fid}, or organization org-test does not "
                                 "have access to it.", param="file_id")], [], None
        if self.files[fid]["purpose"] != "batch":  # wording and code: this stand-in's choice
            return [_batch_error("invalid_request", f"File {fid} was not uploaded with purpose 'batch'.",
                                 param="input_file_id")], [], None
        data = self.file_bytes[fid]
        rows = [(n, raw) for n, raw in enumerate(data.decode("utf-8", "replace").split("\n"), 1) if raw.strip()]
        model = None
        if rows:
            try:
                model = json.loads(rows[0][1])["body"]["model"]
            except (ValueError, KeyError, TypeError):
                pass
        if len(data) > self.max_file_bytes:  # observed wording; the code is this stand-in's choice
            return [_batch_error("file_too_large", f"The batch input file is larger than the {self.max_file_bytes} "
                                 f"maximum for the {model} model. Please try again with a smaller batch.")], [], model
        if not rows:  # code and wording: this stand-in's choice
            return [_batch_error("empty_file", "The batch input file is empty.")], [], None
        if len(rows) > self.max_requests:  # code and wording: this stand-in's choice
            return [_batch_error("too_many_tasks", f"The batch input file has {len(rows)} requests; a batch may have "
                                 f"at most {self.max_requests}.")], [], model
        errors: list[dict] = []
        requests: list[dict] = []
        seen: set[str] = set()
        first_model = None
        for n, raw in rows:  # blank lines are skipped but keep their number (this stand-in's choice)
            try:
                req = json.loads(raw)
            except ValueError:
                errors.append(_batch_error("invalid_json_line", "This line is not parseable as valid JSON.", n))
                continue
            if not isinstance(req, dict):
                errors.append(_batch_error("invalid_request", "This line is not a JSON object.", n))
                continue
            before = len(errors)
            for name in ("custom_id", "method", "url", "body"):
                if name not in req:
                    errors.append(_batch_error("missing_required_parameter", f"Missing required parameter: '{name}'.",
                                               n, name))
            cid, body = req.get("custom_id"), req.get("body")
            if "custom_id" in req and not isinstance(cid, str):
                errors.append(_batch_error("invalid_request", "Invalid type for 'custom_id': expected a string.", n,
                                           "custom_id"))
            elif isinstance(cid, str):
                if cid in seen:
                    errors.append(_batch_error("duplicate_custom_id", f"The custom_id '{cid}' for this request is a "
                                               "duplicate of another request. The custom_id parameter must be "
                                               "unique for each request in a batch.", n, "custom_id"))
                seen.add(cid)
            if "method" in req and req["method"] != "POST":  # "Currently only POST is supported."
                errors.append(_batch_error("invalid_request", "Invalid value for 'method': only 'POST' is "
                                           "supported.", n, "method"))
            if "url" in req and req["url"] != batch["endpoint"]:
                errors.append(_batch_error("invalid_url", "The URL provided for this request does not match the "
                                           "batch endpoint.", n, "url"))
            if "body" in req and not isinstance(body, dict):
                errors.append(_batch_error("invalid_request", "Invalid type for 'body': expected an object.", n,
                                           "body"))
            elif isinstance(body, dict):
                if body.get("stream"):
                    errors.append(_batch_error("streaming_unsupported", "Chat Completions: Streaming is not "
                                               "supported in the Batch API.", n, "body.stream"))
                if not body.get("model"):
                    errors.append(_batch_error("invalid_request", "Model parameter is required.", n, "body.model"))
                elif first_model is None:
                    first_model = body["model"]
                elif body["model"] != first_model:
                    errors.append(_batch_error("mismatched_model", f"The model '{body['model']}' for this request "
                                               "does not match the rest of the batch. Each batch must contain "
                                               "requests for a single model.", n, "body.model"))
                if "messages" not in body:
                    errors.append(_batch_error("invalid_request", "Messages parameter is required.", n,
                                               "body.messages"))
            if len(errors) == before:
                requests.append({"line": n, "custom_id": cid, "body": body})
        return errors, ([] if errors else requests), first_model

    # -- running lines

    def _request_id(self, bid: str, cid: str) -> tuple[str, str]:
        digest = hashlib.sha256(f"{bid}/{cid}".encode()).hexdigest()
        return "batch_req_" + digest[:24], digest[24:56]

    def _run_line(self, bid: str, req: dict) -> tuple[bool, dict]:
        """One line through the chat endpoint's rules: (accepted, its output or error-file line)."""
        cid, body = req["custom_id"], req["body"]
        with self._lock:
            self.batch_lines_processed[cid] += 1
        if cid in self.fail_custom_ids:
            status, payload = 500, {"error": dict(SERVER_ERROR)}
        else:
            # Everything the chat endpoint rejects is rejected here too, with its status and body
            # (observed: a rejected line has response.status_code 400 and the error in response.body,
            # with "error": null). rpm, if set, counts batch lines too.
            status, error, _headers = self._check(body)
            status, payload = (status, {"error": error}) if status else (200, self._answer(body))
        line_id, request_id = self._request_id(bid, cid)
        return status == 200, {"id": line_id, "custom_id": cid, "error": None,
                               "response": {"status_code": status, "request_id": request_id, "body": payload}}

    def _unrun_line(self, bid: str, req: dict, code: str, message: str) -> dict:
        line_id, _ = self._request_id(bid, req["custom_id"])
        return {"id": line_id, "custom_id": req["custom_id"], "response": None,
                "error": {"code": code, "message": message}}


if __name__ == "__main__":  # standalone, for a dress rehearsal: prints its URL, serves until killed
    import argparse
    import signal

    ap = argparse.ArgumentParser()
    ap.add_argument("--window", type=int, default=128_000)
    ap.add_argument("--prompt-cache", action="store_true")
    ap.add_argument("--no-batch-api", action="store_true", help="answer /v1/files and /v1/batches 404, as vLLM")
    a = ap.parse_args()

    def _stop(signum, frame):  # started in the background of a shell, SIGINT may be ignored
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGTERM, _stop)
    with BatchServer(window=a.window, prompt_cache=a.prompt_cache, batch_api=not a.no_batch_api) as srv:
        try:
            print(srv.base_url, flush=True)
            while True:
                time.sleep(3600)
        finally:
            print(json.dumps({"accepted": sum(srv.received.values()), "rejected": srv.rejected[:20],
                              "uploads": len(srv.uploads), "batches": len(srv.batches),
                              "batch_lines": sum(srv.batch_lines_processed.values())}), flush=True)
