"""bench/bench_llama_build.py --watch: what a build puts on the machine, counted under it alone."""
import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("bench_llama_build", ROOT / "bench" / "bench_llama_build.py")
B = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = B  # dataclasses look their module up while the class is made
_spec.loader.exec_module(B)


def _stat(proc: Path, pid: int, name: str, ppid: int) -> None:
    (proc / str(pid)).mkdir()
    (proc / str(pid) / "stat").write_text(f"{pid} ({name}) S {ppid} {pid} {pid} 0 -1 4194304 0 0\n")


def test_compilers_are_counted_in_the_build_tree_only(tmp_path):
    proc = tmp_path / "proc"
    proc.mkdir()
    _stat(proc, 10, "make", 1)
    _stat(proc, 11, "c++", 10)
    _stat(proc, 12, "cc1plus", 11)
    _stat(proc, 13, "cc", 10)
    _stat(proc, 14, "cc1", 13)
    _stat(proc, 15, "as", 13)
    _stat(proc, 16, "cc1plus", 15)  # a grandchild of a non-compiler still counts
    _stat(proc, 20, "cc1plus", 1)  # someone else's build on the same machine
    _stat(proc, 21, "cc1plus x (y)", 10)  # a name with spaces and parentheses is not a compiler
    (proc / "30").mkdir()  # exited between the listing and the read
    assert B.compilers_under(10, proc) == 3
    assert B.compilers_under(13, proc) == 2
    assert B.compilers_under(12, proc) == 0


def test_load_is_the_one_minute_average(tmp_path):
    (tmp_path / "loadavg").write_text("3.25 1.50 0.75 2/300 4242\n")
    assert B.load1(tmp_path) == 3.25


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_watch_sees_the_builds_own_compilers_at_once_and_keeps_its_exit_code(tmp_path):
    fake = tmp_path / "cc1plus"
    shutil.copy(shutil.which("sleep"), fake)
    outsider = subprocess.Popen([str(fake), "3"])  # not under the watched command
    try:
        samples = tmp_path / "load.tsv"
        r = B.watch(["sh", "-c", f"{fake} 1.5 & {fake} 1.5 & wait; exit 7"], interval_s=0.1,
                    samples_path=samples)
    finally:
        outsider.kill()
        outsider.wait()
    assert r.returncode == 7 and r.peak_compilers == 2 and r.seconds >= 1.5
    rows = samples.read_text().splitlines()
    assert rows[0] == "seconds\tload1\tcompilers" and len(rows) == r.samples + 1
    assert rows[-1].endswith("\t0")  # the last sample is taken after the command ended


def test_the_command_line_passes_the_builds_exit_code_through(capsys):
    assert B.main(["--watch", "--", sys.executable, "-c", "raise SystemExit(3)"]) == 3
    assert "exit 3" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        B.main(["--watch"])
    with pytest.raises(SystemExit):
        B.main(["--", "true"])


def test_samples_are_on_disk_while_the_build_runs(tmp_path):
    """A build stopped halfway (or watched from another shell) keeps the samples taken so far."""
    samples, seen = tmp_path / "load.tsv", tmp_path / "seen"
    r = B.watch(["sh", "-c", f"sleep 1; wc -l < {samples} > {seen}"], interval_s=0.1, samples_path=samples)
    assert r.returncode == 0
    assert int(seen.read_text()) >= 4  # the header and samples from the first second
