import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from nbwrite import write  # noqa: E402

cells = [
("md", r"""
# 00 · The model backend

Every model call in memlife — readers, judges, generators, importance scorers — goes through one
client, `memlife.llm`. This notebook shows what that client does for you:

1. **which endpoint and model** each role uses (by default the *embedded* SmolLM2-135M served by
   `llama-server` on loopback; any OpenAI-compatible endpoint through environment variables);
2. **the on-disk cache**: every reply is stored under the SHA-256 of the whole request, so running a
   notebook again repeats no call — the second pass below is all cache hits (under the quick
   profile both passes come from its recording of replies, `results/replies/quick.jsonl.gz`,
   which answers first so that the committed numbers are the same on every CPU; see the README);
3. **throughput** at one versus several concurrent requests;
4. **token and cost accounting**, the numbers that end up in `results/usage/<notebook>.json`.

The embedded model is a real but *weak* subject: it answers simple recall questions, gets sums
wrong and cannot judge. The papers use GPT-4o-mini / GPT-4o; point the roles at such an endpoint
to reproduce them at scale (see the README).
"""),
("params", r"""
profile = "smoke"
seed = 0
n_prompts = 4
concurrency_levels = [1, 2]
max_tokens = 24
"""),
("code", r"""
import time

import pandas as pd

from memlife import llm, paths, serve, tokens

llm.configure(profile)
lay = paths.layout(profile)
reader = llm.get_client("reader")
"""),
("md", r"""
## 1 · Endpoints

Each role resolves to an endpoint: `MEMLIFE_<ROLE>_BASE_URL` / `MEMLIFE_<ROLE>_MODEL` (or
`MEMLIFE_BASE_URL` / `MEMLIFE_MODEL` for every role) win over the profile's `models:` section.
The key is read from the environment when a call is made and is never written anywhere. The
embedded model is never used as a judge: `judge_available()` is false until a capable judge is
configured, and the projects' deterministic scorers judge instead.
"""),
("code", r"""
roles = pd.DataFrame([
    {"role": r, "model": (ep := llm.endpoint_for(r)).model,
     "endpoint": "embedded llama-server" if ep.is_embedded else ep.base_url.split("?")[0],
     "structured output": ep.structured_output}
    for r in llm.ROLES
])
print("LLM judge available:", llm.judge_available())
roles
"""),
("md", r"""
## 2 · A few calls, then the same calls again

The prompts put the stable system message first and the question last, the order that lets
`llama-server` reuse the KV cache of a shared prefix.
"""),
("code", r"""
facts = [
    ("My gym moved its spin class from Tuesday to Thursday.", "Which day is my spin class now?"),
    ("I switched my phone plan to the 20 GB one last week.", "Which phone plan am I on?"),
    ("My sister Maya lives in Lisbon now, she left Porto in May.", "Where does Maya live?"),
    ("Please remember my locker number is 417.", "What is my locker number?"),
    ("I stopped drinking coffee, I only have green tea now.", "What do I drink in the morning?"),
    ("My dentist appointment got pushed to the 14th.", "When is my dentist appointment?"),
]
system = {"role": "system", "content": "You are a helpful assistant. Answer in one short sentence."}
requests = [
    dict(messages=[system, {"role": "user", "content": f"{fact} {question}"}],
         max_tokens=max_tokens, seed=seed)
    for fact, question in facts[:n_prompts]
]
t0 = time.perf_counter()
first = reader.complete_many(requests, desc="first pass")
first_s = time.perf_counter() - t0
t0 = time.perf_counter()
second = reader.complete_many(requests, desc="second pass")
second_s = time.perf_counter() - t0
pd.DataFrame({
    "question": [q for _, q in facts[:n_prompts]],
    "answer": [c.text for c in first],
    "request id": [c.request_id[:12] for c in first],
    "first pass cached": [c.cached for c in first],
    "second pass cached": [c.cached for c in second],
})
"""),
("code", r"""
print(f"first pass {first_s:.2f} s, second pass {second_s:.3f} s")
assert all(c.cached for c in second), "the second pass must be answered from the cache"
assert [c.text for c in first] == [c.text for c in second]
"""),
("md", r"""
## 3 · Throughput at 1 versus N concurrent requests

Each level sends its own prompts (so the cache does not hide the model on a first run). On a
second run of this notebook these are cache hits too — which is the point of the cache; `make
bench` measures the server itself. On two CPU cores one server slot is already saturated, so
concurrency mainly helps remote endpoints.
"""),
("code", r"""
rows = []
for level in concurrency_levels:
    reqs = [dict(messages=[system, {"role": "user", "content": f"Request {i} at concurrency {level}: {q}"}],
                 max_tokens=max_tokens, seed=seed) for i, (_, q) in enumerate(facts[:n_prompts])]
    t0 = time.perf_counter()
    out = reader.complete_many(reqs, concurrency=level, desc=f"concurrency {level}")
    wall = time.perf_counter() - t0
    rows.append({"concurrency": level, "requests": len(out), "cached": sum(c.cached for c in out),
                 "wall_s": round(wall, 3), "requests_per_s": round(len(out) / wall, 2),
                 "completion_tokens_per_s": round(sum(c.completion_tokens for c in out) / wall, 1)})
throughput = pd.DataFrame(rows)
throughput
"""),
("md", r"""
## 4 · Tokens and cost

Token counts come from the server's own usage report; `memlife.tokens` counts offline with
tiktoken (`o200k_base`), which is what budgets and context caps use. Cost is estimated from the
list prices of named API models; the embedded model costs nothing, and a cached call costs nothing.
"""),
("code", r"""
u = llm.usage()
print(u)
example = "Please remember my locker number is 417."
print(f"{tokens.count(example)} o200k_base tokens in {example!r}")
# What the same prompts would cost on the papers' reader at list price (uncached):
pt = sum(c.prompt_tokens for c in first)
ct = sum(c.completion_tokens for c in first)
print(f"gpt-4o-mini: ${llm.price_usd('gpt-4o-mini', pt, ct):.6f} for {pt}+{ct} tokens")
"""),
("code", r"""
assert u.calls >= 2 * n_prompts and u.cached_calls >= n_prompts
assert u.prompt_tokens > 0 and u.completion_tokens > 0
assert reader.is_embedded or llm.role_configured("reader")
assert tokens.count(example) == 9
"""),
]
write(str(Path(__file__).resolve().parents[2] / "notebooks" / "00_backend.ipynb"), cells)
