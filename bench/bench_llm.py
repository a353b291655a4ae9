"""Model layer benchmark: cache-hit latency, client overhead against raw HTTP, throughput.

Prints figures only; ratios measured in one run are what to compare on a shared machine.
"""
from __future__ import annotations

import os
import statistics
import tempfile
import time

import httpx


def main() -> None:
    os.environ.setdefault("MEMLIFE_CACHE_DIR", tempfile.mkdtemp(prefix="memlife-bench-"))
    from memlife.models import llm, serve

    server = serve.ensure_server()
    client = llm.get_client("reader")
    msgs = lambda i: [{"role": "user", "content": f"Reply with the word ok. ({i})"}]  # noqa: E731

    # 1. cache-hit latency
    client.complete(msgs("hit"), max_tokens=2)
    n = 500
    t0 = time.perf_counter()
    for _ in range(n):
        assert client.complete(msgs("hit"), max_tokens=2).cached
    hit_ms = (time.perf_counter() - t0) / n * 1e3
    print(f"cache-hit latency: {hit_ms:.3f} ms per call ({n} calls)")

    # 2. client overhead per uncached call against a raw HTTP request to the same server
    raw, ours = [], []
    with httpx.Client(timeout=60, headers=serve.auth_headers(server.api_key)) as http:
        for i in range(12):
            body = {"model": serve.MODEL_ALIAS, "messages": msgs(f"raw{i}"), "max_tokens": 1,
                    "temperature": 0.0, "seed": 0}
            t0 = time.perf_counter()
            http.post(f"{server.base_url}/chat/completions", json=body).raise_for_status()
            raw.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            client.complete(msgs(f"ours{i}"), max_tokens=1)
            ours.append(time.perf_counter() - t0)
    r, o = statistics.median(raw[2:]), statistics.median(ours[2:])
    print(f"uncached 1-token call: raw HTTP {r * 1e3:.1f} ms, memlife.models.llm {o * 1e3:.1f} ms "
          f"(median of 10): overhead {(o - r) * 1e3:+.1f} ms, ratio {o / r:.2f}x")

    # 3. throughput at concurrency 1, 2 and 4 (distinct prompts, so no cache hits)
    for level in (1, 2, 4):
        reqs = [dict(messages=[{"role": "user", "content": f"Write one sentence about the number {level * 100 + i}."}],
                     max_tokens=32) for i in range(8)]
        t0 = time.perf_counter()
        out = client.complete_many(reqs, concurrency=level, progress=False)
        wall = time.perf_counter() - t0
        toks = sum(c.completion_tokens for c in out)
        print(f"concurrency {level}: {len(out) / wall:.2f} requests/s, {toks / wall:.1f} generated tokens/s "
              f"({len(out)} requests, {wall:.1f} s)")


if __name__ == "__main__":
    main()
