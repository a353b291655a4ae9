"""The loopback Batch API stand-in (tests/batchserver.py) and StrictServer's prompt cache, driven by
the real openai SDK: what a client of the Batch API will meet, each failure included."""
import json
import urllib.error
from collections import Counter
import urllib.request

import openai
import pytest
from openai.types.chat import ChatCompletion

from memlife.models import tokens

from batchserver import BatchServer, parse_multipart
from strictserver import StrictServer, prompt_token_ids

CHAT = "/v1/chat/completions"


def line(cid, content="hello", model="gpt-4o-mini", **body):
    return {"custom_id": cid, "method": "POST", "url": CHAT,
            "body": {"model": model, "messages": [{"role": "user", "content": content}], **body}}


def jsonl(*rows) -> bytes:
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows).encode()


def client(s):
    return openai.OpenAI(base_url=s.base_url, api_key="sk-test", max_retries=0, timeout=10)


def upload(c, data: bytes, purpose="batch", name="input.jsonl"):
    return c.files.create(file=(name, data), purpose=purpose)


def submit(c, data: bytes, **kw):
    f = upload(c, data)
    return c.batches.create(input_file_id=f.id, endpoint=CHAT, completion_window="24h", **kw)


def poll(c, batch_id, limit=10):
    """Retrieve until the batch ends; the statuses seen, and the last batch."""
    seen = []
    for _ in range(limit):
        b = c.batches.retrieve(batch_id)
        seen.append(b.status)
        if b.status in ("completed", "failed", "expired", "cancelled"):
            return seen, b
    raise AssertionError(f"batch never ended: {seen}")


def read_lines(c, file_id):
    return [json.loads(x) for x in c.files.content(file_id).text.splitlines()]


# -- the whole round trip


def test_upload_create_poll_and_read_the_output(tmp_path):
    rows = [line(f"req-{i}", f"question {i}") for i in range(6)]
    path = tmp_path / "batch.jsonl"
    path.write_bytes(jsonl(*rows))
    with BatchServer() as s:
        c = client(s)
        with open(path, "rb") as fh:  # as the SDK's docs upload a file
            f = c.files.create(file=fh, purpose="batch")
        assert (f.object, f.purpose, f.bytes, f.filename) == ("file", "batch", path.stat().st_size, "batch.jsonl")
        assert f.id.startswith("file-") and s.uploads == [(f.id, 6)]
        assert c.files.retrieve(f.id).id == f.id
        assert c.files.content(f.id).read() == path.read_bytes()  # the raw bytes, unchanged

        b = c.batches.create(input_file_id=f.id, endpoint=CHAT, completion_window="24h",
                             metadata={"run": "pytest"})
        assert b.status == "validating" and b.request_counts.total == 0 and b.metadata == {"run": "pytest"}
        assert b.expires_at == b.created_at + 24 * 3600 and s.batches == [b.id]
        seen, b = poll(c, b.id)
        assert seen == ["in_progress", "finalizing", "completed"]  # one state per retrieve
        assert (b.request_counts.total, b.request_counts.completed, b.request_counts.failed) == (6, 6, 0)
        assert b.error_file_id is None and b.output_file_id and b.model == "gpt-4o-mini"
        assert b.completed_at and b.finalizing_at and b.in_progress_at
        assert b.usage.input_tokens > 0 and b.usage.input_tokens_details.cached_tokens == 0
        assert c.batches.retrieve(b.id).status == "completed"  # an ended batch stays ended

        out = read_lines(c, b.output_file_id)
        assert c.files.retrieve(b.output_file_id).purpose == "batch_output"
    assert sorted(o["custom_id"] for o in out) == sorted(r["custom_id"] for r in rows)
    assert [o["custom_id"] for o in out] != [r["custom_id"] for r in rows]  # order is not the input's
    for o in out:
        assert o["id"].startswith("batch_req_") and o["error"] is None
        assert o["response"]["status_code"] == 200 and o["response"]["request_id"]
        reply = ChatCompletion.model_validate(o["response"]["body"])
        assert reply.choices[0].message.content
        assert reply.usage.prompt_tokens_details.cached_tokens == 0
    assert s.batch_lines_processed == {r["custom_id"]: 1 for r in rows}
    assert sum(s.received.values()) == 6  # each line went through the chat endpoint's reply


def test_the_files_and_batches_apis_want_a_key():
    with BatchServer() as s:
        for path, data in (("/files", b"x"), ("/batches", b"{}")):
            req = urllib.request.Request(s.base_url + path, data=data, method="POST")
            with pytest.raises(urllib.error.HTTPError) as e:
                urllib.request.urlopen(req, timeout=5)
            assert e.value.code == 401
    assert s.uploads == [] and s.batches == []


def test_multipart_bytes_come_back_exactly():
    body = (b"--XyZ\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n"
            b"--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.jsonl\"\r\n"
            b"Content-Type: application/octet-stream\r\n\r\n{\"a\": 1}\r\n{\"b\": 2}\n\r\n--XyZ--\r\n")
    fields = parse_multipart(body, "multipart/form-data; boundary=XyZ")
    assert fields == {"purpose": (None, b"batch"), "file": ("a.jsonl", b"{\"a\": 1}\r\n{\"b\": 2}\n")}
    assert parse_multipart(b"{}", "application/json") is None


# -- the Files API's refusals


def test_upload_refusals():
    with BatchServer(max_upload_bytes=1000) as s:
        c = client(s)
        with pytest.raises(openai.BadRequestError, match="File is too large"):
            upload(c, jsonl(line("a", "x" * 2000)))
        with pytest.raises(openai.BadRequestError, match="purpose"):
            upload(c, jsonl(line("a")), purpose="nonsense")
        for bad in (b"", b"\n\n", b"{not json\n"):  # the Batch API wants JSONL
            with pytest.raises(openai.BadRequestError, match="jsonl"):
                upload(c, bad)
        with pytest.raises(openai.NotFoundError, match="No such File"):
            c.files.retrieve("file-nope")
    assert s.uploads == []


# -- validation: a bad input file fails the batch, naming the line and OpenAI's code


def _validation_case(data: bytes, **limits):
    with BatchServer(**limits) as s:
        c = client(s)
        b = submit(c, data)
        seen, b = poll(c, b.id)
        assert seen == ["failed"] and b.failed_at and b.output_file_id is None and b.error_file_id is None
        assert b.errors.object == "list"
        assert s.batch_lines_processed == Counter() and sum(s.received.values()) == 0  # nothing ran
        return [(e.code, e.line, e.param) for e in b.errors.data], b


@pytest.mark.parametrize("rows,expected", [
    ([line("a"), "{invalid json here"], [("invalid_json_line", 2, None)]),
    ([line("a"), line("a", "again")], [("duplicate_custom_id", 2, "custom_id")]),
    ([{**line("a"), "url": "/v1/embeddings"}], [("invalid_url", 1, "url")]),
    ([line("a"), line("b", model="gpt-4o")], [("mismatched_model", 2, "body.model")]),
    ([{**line("a"), "method": "GET"}], [("invalid_request", 1, "method")]),
    ([line("a", stream=True)], [("streaming_unsupported", 1, "body.stream")]),
    ([{k: v for k, v in line("a").items() if k != "custom_id"}, {k: v for k, v in line("b").items() if k != "url"}],
     [("missing_required_parameter", 1, "custom_id"), ("missing_required_parameter", 2, "url")]),
    ([{**line("a"), "custom_id": 7}], [("invalid_request", 1, "custom_id")]),
    ([{**line("a"), "body": {"messages": [{"role": "user", "content": "hi"}]}}],
     [("invalid_request", 1, "body.model")]),
    ([{**line("a"), "body": {"model": "gpt-4o-mini"}}], [("invalid_request", 1, "body.messages")]),
], ids=["json", "duplicate", "url", "model", "method", "stream", "missing", "custom_id_type", "no_model",
        "no_messages"])
def test_a_bad_line_fails_the_batch(rows, expected):
    errors, _ = _validation_case(jsonl(*rows))
    assert errors == expected


def test_blank_lines_are_skipped_but_keep_their_numbers():
    errors, _ = _validation_case(jsonl(line("a"), "", line("a")))
    assert errors == [("duplicate_custom_id", 3, "custom_id")]


def test_too_many_requests_and_too_many_bytes():
    errors, _ = _validation_case(jsonl(*(line(f"r{i}") for i in range(3))), max_requests=2)
    assert errors == [("too_many_tasks", None, None)]
    data = jsonl(*(line(f"r{i}") for i in range(3)))
    errors, b = _validation_case(data, max_file_bytes=len(data) - 1)
    assert errors == [("file_too_large", None, None)]
    assert f"larger than the {len(data) - 1} maximum" in b.errors.data[0].message


def test_a_missing_or_non_batch_input_file_fails_the_batch():
    with BatchServer() as s:
        c = client(s)
        b = c.batches.create(input_file_id="file-nope", endpoint=CHAT, completion_window="24h")
        _, b = poll(c, b.id)
        assert b.status == "failed" and b.errors.data[0].code == "invalid_request"
        assert "Cannot find file" in b.errors.data[0].message
        f = upload(c, jsonl(line("a")), purpose="user_data")
        b = c.batches.create(input_file_id=f.id, endpoint=CHAT, completion_window="24h")
        _, b = poll(c, b.id)
        assert b.status == "failed" and b.errors.data[0].param == "input_file_id"


def test_create_refusals():
    with BatchServer() as s:
        c = client(s)
        f = upload(c, jsonl(line("a")))
        for kw, match in (({"completion_window": "1h"}, "24h"),
                          ({"endpoint": "/v1/invalid/endpoint"}, "Supported values"),
                          ({"endpoint": "/v1/embeddings"}, "serves only"),
                          ({"metadata": {"tags": ["a", "b"]}}, "metadata.tags")):
            args = {"input_file_id": f.id, "endpoint": CHAT, "completion_window": "24h", **kw}
            with pytest.raises(openai.BadRequestError, match=match):
                c.batches.create(**args)
        with pytest.raises(openai.NotFoundError, match="No batch found"):
            c.batches.retrieve("batch_nope")
        with pytest.raises(openai.NotFoundError):
            c.batches.cancel("batch_nope")
    assert s.batches == []


# -- processing: the chat endpoint's rules apply to every line


def test_lines_the_chat_endpoint_rejects_land_in_the_error_file():
    long = "word " * 400
    with BatchServer(window=300) as s:  # the long prompt does not fit: 400 context_length_exceeded
        c = client(s)
        b = submit(c, jsonl(line("short"), line("long", long), line("short2")))
        _, b = poll(c, b.id)
        assert b.status == "completed"
        assert (b.request_counts.completed, b.request_counts.failed) == (2, 1)
        (err,) = read_lines(c, b.error_file_id)
        assert {o["custom_id"] for o in read_lines(c, b.output_file_id)} == {"short", "short2"}
    assert err["custom_id"] == "long" and err["error"] is None
    assert err["response"]["status_code"] == 400
    assert err["response"]["body"]["error"]["code"] == "context_length_exceeded"


def test_fail_custom_ids_give_a_500_line():
    with BatchServer() as s:
        s.fail_custom_ids = {"b"}
        c = client(s)
        b = submit(c, jsonl(line("a"), line("b"), line("c")))
        _, b = poll(c, b.id)
        assert (b.status, b.request_counts.completed, b.request_counts.failed) == ("completed", 2, 1)
        (err,) = read_lines(c, b.error_file_id)
        assert len(read_lines(c, b.output_file_id)) == 2
    assert err["custom_id"] == "b" and err["error"] is None and err["id"].startswith("batch_req_")
    assert err["response"]["status_code"] == 500
    assert err["response"]["body"]["error"]["type"] == "server_error"
    assert s.batch_lines_processed == {"a": 1, "b": 1, "c": 1}


def test_all_lines_failing_leave_no_output_file():
    with BatchServer() as s:
        s.fail_custom_ids = {"a"}
        c = client(s)
        _, b = poll(c, submit(c, jsonl(line("a"))).id)
        assert b.status == "completed" and b.output_file_id is None and b.error_file_id


def test_fail_next_batches():
    with BatchServer() as s:
        s.fail_next_batches = 1
        c = client(s)
        first = submit(c, jsonl(line("a")))
        second = submit(c, jsonl(line("a")))
        _, b1 = poll(c, first.id)
        _, b2 = poll(c, second.id)
    assert b1.status == "failed" and b2.status == "completed" and s.fail_next_batches == 0
    (e,) = b1.errors.data
    assert e.code == "token_limit_exceeded" and e.line is None and "gpt-4o-mini" in e.message
    assert s.batch_lines_processed == {"a": 1}  # only the second batch ran


def test_expire_next_batches():
    rows = [line(f"r{i}") for i in range(4)]
    with BatchServer() as s:
        s.expire_next_batches = 1
        c = client(s)
        seen, b = poll(c, submit(c, jsonl(*rows)).id)
        assert seen == ["in_progress", "expired"] and b.expired_at
        assert (b.request_counts.total, b.request_counts.completed, b.request_counts.failed) == (4, 2, 2)
        done = read_lines(c, b.output_file_id)
        expired = read_lines(c, b.error_file_id)
        _, again = poll(c, submit(c, jsonl(*rows)).id)  # only the next one expires
    assert again.status == "completed"
    assert {o["custom_id"] for o in done} == {"r0", "r1"}
    assert {o["custom_id"] for o in expired} == {"r2", "r3"}
    for o in expired:
        assert o["response"] is None and o["error"]["code"] == "batch_expired" and o["error"]["message"]


def test_cancel():
    with BatchServer() as s:
        c = client(s)
        b = submit(c, jsonl(line("a"), line("b")))
        assert c.batches.retrieve(b.id).status == "in_progress"
        assert c.batches.cancel(b.id).status == "cancelling"
        assert c.batches.cancel(b.id).status == "cancelling"  # cancelling twice is allowed
        b = c.batches.retrieve(b.id)
        assert b.status == "cancelled" and b.cancelled_at and b.cancelling_at and b.output_file_id is None
        unrun = read_lines(c, b.error_file_id)
        assert {o["custom_id"] for o in unrun} == {"a", "b"}
        assert all(o["error"]["code"] == "batch_cancelled" and o["response"] is None for o in unrun)
        assert s.batch_lines_processed == Counter()

        done = submit(c, jsonl(line("a")))
        poll(c, done.id)
        with pytest.raises(openai.ConflictError, match="Cannot cancel a batch with status 'completed'"):
            c.batches.cancel(done.id)


def test_without_the_batch_api_the_routes_are_404_as_in_vllm():
    with BatchServer(batch_api=False) as s:
        c = client(s)
        with pytest.raises(openai.NotFoundError) as e:
            upload(c, jsonl(line("a")))
        assert e.value.body == {"detail": "Not Found"} or e.value.response.json() == {"detail": "Not Found"}
        with pytest.raises(openai.NotFoundError):
            c.batches.create(input_file_id="file-x", endpoint=CHAT, completion_window="24h")
        with pytest.raises(openai.NotFoundError):
            c.batches.retrieve("batch_x")
        # The chat endpoint still answers.
        r = c.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
        assert r.choices[0].message.content and r.usage.prompt_tokens_details.cached_tokens == 0
    assert s.uploads == [] and s.batches == []


# -- the prompt cache


def _prefix(n_tokens: int) -> str:
    text = " ".join(f"fact{i} is {i * 7 % 101}." for i in range(n_tokens))
    return tokens.truncate(text, n_tokens)


def _shared(a: list[dict], b: list[dict]) -> int:
    x, y = prompt_token_ids(a), prompt_token_ids(b)
    n = 0
    while n < min(len(x), len(y)) and x[n] == y[n]:
        n += 1
    return n


def test_prompt_cache_counts_a_shared_prefix_as_openai_does():
    system = {"role": "system", "content": _prefix(3000)}
    first = [system, {"role": "user", "content": "What is fact 12?"}]
    second = [system, {"role": "user", "content": "Which fact is 44?"}]
    with StrictServer(prompt_cache=True) as s:
        c = client(s)
        r1 = c.chat.completions.create(model="gpt-4o-mini", messages=first)
        r2 = c.chat.completions.create(model="gpt-4o-mini", messages=second)
        other_model = c.chat.completions.create(model="gpt-4o", messages=second)
        short = c.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
        short_again = c.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
    shared = _shared(first, second)
    assert shared >= 3000
    assert r1.usage.prompt_tokens_details.cached_tokens == 0  # nothing before it
    cached = r2.usage.prompt_tokens_details.cached_tokens
    assert cached % 128 == 0 and 1024 <= cached <= shared and cached <= r2.usage.prompt_tokens
    assert cached == shared // 128 * 128  # the whole shared prefix, in 128-token steps
    assert other_model.usage.prompt_tokens_details.cached_tokens == 0  # the cache is per model
    assert short.usage.prompt_tokens_details.cached_tokens == 0
    assert short_again.usage.prompt_tokens_details.cached_tokens == 0  # under 1,024 tokens: never cached


def test_prompt_cache_only_remembers_accepted_requests():
    messages = [{"role": "user", "content": _prefix(2000)}]
    with StrictServer(prompt_cache=True, window=1500) as s:  # too long for this window: refused
        c = client(s)
        with pytest.raises(openai.BadRequestError):
            c.chat.completions.create(model="m", messages=messages)
    assert s._cache_index == set()


def test_without_the_option_cached_tokens_is_reported_as_zero():
    messages = [{"role": "user", "content": _prefix(1500)}]
    with StrictServer() as s:
        c = client(s)
        r = [c.chat.completions.create(model="m", messages=messages) for _ in range(2)]
    assert [x.usage.prompt_tokens_details.cached_tokens for x in r] == [0, 0]


def test_batch_lines_share_the_prompt_cache():
    system = {"role": "system", "content": _prefix(1400)}
    rows = [{"custom_id": f"q{i}", "method": "POST", "url": CHAT,
             "body": {"model": "gpt-4o-mini", "messages": [system, {"role": "user", "content": f"question {i}"}]}}
            for i in range(3)]
    with BatchServer(prompt_cache=True) as s:
        c = client(s)
        _, b = poll(c, submit(c, jsonl(*rows)).id)
        out = read_lines(c, b.output_file_id)
    cached = sorted(o["response"]["body"]["usage"]["prompt_tokens_details"]["cached_tokens"] for o in out)
    assert cached[0] == 0 and cached[1] == cached[2] >= 1024  # the first line run warms the cache
    assert b.usage.input_tokens_details.cached_tokens == sum(cached)
