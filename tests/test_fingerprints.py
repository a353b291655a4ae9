"""Runs that notice what changed: each notebook's executed copy depends on its fingerprint
(results/<profile>/fingerprints/NAME.txt: parameters after inheritance, the models of the roles
it calls, the recording it replays), rewritten only when it changes. Read with `make -n` in a copy
of the project after a simulated run: executed copies present, fingerprints written before them."""
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memlife.base import config, plugins
from memlife.running import estimate, runner

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
OLD = 1_000_000_000  # 2001: older than any environment stamp, so make sees the environment as built


@pytest.fixture
def repo(tmp_path):
    """What make reads to decide: the Makefile, the environment's inputs, configs, notebooks, the
    library and the recording, every file dated 2001; the environments linked."""
    repo = tmp_path / "repo"
    for rel in ("Makefile", "pyproject.toml", "requirements.lock", "requirements-memos.lock", "requirements-llama.txt"):
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, repo / rel)
    for rel in ("configs", "notebooks", "lib", "results/replies"):
        shutil.copytree(ROOT / rel, repo / rel, ignore=shutil.ignore_patterns("__pycache__"))
    for p in repo.rglob("*"):
        os.utime(p, (OLD, OLD))
    for env_dir in (".venv", ".venv-memos"):
        (repo / env_dir).symlink_to(ROOT / env_dir)
    return repo


def _env(**extra: str) -> dict:
    # This copy's library (not the one the environment installed), none of the caller's model settings.
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("MEMLIFE_") and k not in ("CONDA_DEFAULT_ENV", "MAKEFLAGS", "MAKELEVEL",
                                                        "OPENAI_API_KEY")}
    return {**env, **extra}


def _python(repo: Path, *args: str, **extra: str) -> subprocess.CompletedProcess:
    lib = repo / "lib" if (repo / "lib").is_dir() else ROOT / "lib"  # the copy's library, else this one
    return subprocess.run([sys.executable, *args], cwd=repo, env=_env(PYTHONPATH=str(lib), **extra),
                          capture_output=True, text=True)


def make_n(repo: Path, *args: str, **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "-n", "reproduce", *args], cwd=repo,
                          env=_env(PYTHONPATH=str(repo / "lib"), **extra), capture_output=True, text=True)


def would_run(plan: subprocess.CompletedProcess, profile: str) -> set[str]:
    assert plan.returncode == 0, plan.stdout[-2000:] + plan.stderr[-2000:]
    return set(re.findall(rf"memlife\.running\.runner (\d\d_\w+) --profile {profile}\b", plan.stdout))


def simulate_run(repo: Path, profile: str) -> None:
    """What a finished `make reproduce` leaves: every fingerprint, the copy of it each run keeps
    (NAME.ran, dated as the fingerprint was), then every executed copy after them."""
    done = _python(repo, "-m", "memlife.running.runner", "fingerprint", "--profile", profile)
    assert done.returncode == 0, done.stderr
    now = time.time()
    for nb in NOTEBOOKS:
        fp = repo / "results" / profile / "fingerprints" / f"{nb}.txt"
        shutil.copy(fp, runner.ran_path(fp))
        for stamp in (fp, runner.ran_path(fp)):
            os.utime(stamp, (now - 2, now - 2))
        out = repo / "results" / profile / "notebooks" / f"{nb}.ipynb"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("{}")
        # after everything it rests on, the environment's stamps included (on a fresh machine
        # `make test` made them moments before this test)
        os.utime(out, (now - 1, now - 1))


# The notebooks that call a model and, through the DAG, those that read their outputs.
CALLING_AND_AFTER = {"00_backend", "10_memops_build", "11_memops_stats", "12_memops_eval", "13_memops_tables",
                     "21_eviction", "22_read_restore", "23_decomposition", "24_robustness"}


def test_a_profile_that_extends_quick_reruns_only_what_its_change_reaches(repo):
    (repo / "configs" / "myexp.yaml").write_text("extends: quick\n")
    assert would_run(make_n(repo, "PROFILE=myexp"), "myexp") == set(NOTEBOOKS)  # never run
    simulate_run(repo, "myexp")
    assert would_run(make_n(repo, "PROFILE=myexp"), "myexp") == set()
    (repo / "configs" / "myexp.yaml").write_text("extends: quick\nnotebooks:\n  21_eviction:\n    seeds: [0, 1]\n")
    plan = make_n(repo, "PROFILE=myexp")
    assert would_run(plan, "myexp") == {"21_eviction", "22_read_restore", "23_decomposition", "24_robustness"}
    assert "== [myexp] 21_eviction rests on changed settings: parameters.seeds" in plan.stdout
    # 20's history length is 21's too (one home): changing it there reaches 21 by its parameters
    (repo / "configs" / "myexp.yaml").write_text(
        "extends: quick\nnotebooks:\n  21_eviction:\n    seeds: [0, 1]\n  20_longmem_data:\n    history_tokens: 9000\n")
    plan = make_n(repo, "PROFILE=myexp")
    assert "21_eviction rests on changed settings: parameters.history_tokens" in plan.stdout
    assert would_run(plan, "myexp") == {"20_longmem_data", "21_eviction", "22_read_restore", "23_decomposition",
                                        "24_robustness"}


def test_a_profile_that_extends_one_with_a_recording_replays_it_without_building_llama_server(repo):
    """The Makefile chooses the environment from the resolved profile's recorded_replies."""
    (repo / "configs" / "myexp.yaml").write_text("extends: quick\nnotebooks:\n  21_eviction:\n    seeds: [0, 1]\n")
    probe = subprocess.run(["make", "--no-print-directory", "-s", "-f", "Makefile", "-f", "-", "print-var",
                            "PROFILE=myexp"], cwd=repo, env=_env(PYTHONPATH=str(repo / "lib")),
                           input="print-var:\n\t@echo $(RECORDING) $(RUN_ENV)\n", capture_output=True, text=True)
    assert probe.stdout.split() == ["results/replies/quick.jsonl.gz", "env-replay"], probe.stderr


@pytest.mark.parametrize("body, words", [
    ("extends: quick\nnotebooks:\n  21_eviction:\n    sedes: [0, 1]\n",
     r"configs/myexp.yaml: notebooks.21_eviction.sedes is not a parameter of notebooks/21_eviction.ipynb "
     r"\(did you mean seeds\?\)"),
    ("extends: quick\nnotebooks:\n  21_evicton:\n    seeds: [0, 1]\n",
     r"configs/myexp.yaml: notebooks.21_evicton is not a notebook in \S+ \(did you mean 21_eviction\?\)"),
    ("extends: quik\n", r"configs/myexp.yaml: extends 'quik': unknown profile 'quik'.*\(did you mean quick\?\)"),
    ("extends: quick\nspend_cap: 5\n", r"configs/myexp.yaml: spend_cap is not a profile field "
                                       r"\(did you mean spend_cap_usd\?\)"),
    ("extends: quick\nnotebooks:\n  21_eviction:\n    policies: [fifo, 'my_polcy:longest_first']\n",
     r"profile 'myexp', notebooks.21_eviction.policies: cannot find module 'my_polcy'.*PYTHONPATH"),
])
def test_a_misspelled_key_stops_the_run_at_once_naming_it(repo, body, words):
    (repo / "configs" / "myexp.yaml").write_text(body)
    plan = make_n(repo, "PROFILE=myexp")
    assert plan.returncode != 0
    assert re.search(words, plan.stderr), plan.stderr
    assert not re.search(r"memlife\.running\.runner \d\d_", plan.stdout)


def test_pointing_every_role_at_another_endpoint_reruns_the_notebooks_that_call_a_model(repo):
    simulate_run(repo, "quick")
    assert would_run(make_n(repo, "PROFILE=quick"), "quick") == set()
    stand_in = dict(MEMLIFE_BASE_URL="http://127.0.0.1:9/v1", MEMLIFE_MODEL="stand-in-model",
                    MEMLIFE_API_KEY="sk-never-written-down")
    plan = make_n(repo, "PROFILE=quick", **stand_in)
    assert would_run(plan, "quick") == CALLING_AND_AFTER
    assert "12_memops_eval rests on changed settings: models.judge.base_url, models.judge.model" in plan.stdout
    written = "".join(p.read_text() for p in (repo / "results" / "quick" / "fingerprints").glob("*.txt"))
    assert "stand-in-model" in written and "sk-never-written-down" not in written
    # the dry run rewrote the fingerprints; back on the executed copies' settings, nothing is redone
    back = make_n(repo, "PROFILE=quick")
    assert would_run(back, "quick") == set() and "rests on changed settings" not in back.stdout


def test_pointing_one_role_elsewhere_reruns_exactly_the_notebooks_that_call_it(repo):
    simulate_run(repo, "quick")
    plan = make_n(repo, "PROFILE=quick", MEMLIFE_SCORER_BASE_URL="http://127.0.0.1:9/v1",
                  MEMLIFE_SCORER_MODEL="stand-in-scorer")
    # 21 scores; 00 reports every role's endpoint; 22-24 read 21's outputs
    assert would_run(plan, "quick") == {"00_backend", "21_eviction", "22_read_restore", "23_decomposition",
                                        "24_robustness"}


def test_another_recording_or_none_reruns_the_notebooks_that_call_a_model(repo):
    simulate_run(repo, "quick")
    assert would_run(make_n(repo, "PROFILE=quick", "LIVE=1"), "quick") == CALLING_AND_AFTER
    simulate_run(repo, "quick")
    with open(repo / "results" / "replies" / "quick.jsonl.gz", "ab") as fh:  # another recording, same name
        fh.write(b"\0")
    assert would_run(make_n(repo, "PROFILE=quick"), "quick") == CALLING_AND_AFTER


def test_a_fingerprint_is_rewritten_only_when_it_changes(repo):
    simulate_run(repo, "quick")
    fp = repo / "results" / "quick" / "fingerprints" / "21_eviction.txt"
    before = fp.stat().st_mtime_ns
    assert _python(repo, "-m", "memlife.running.runner", "fingerprint", "--profile", "quick").stdout == ""
    assert fp.stat().st_mtime_ns == before
    body = json.loads(fp.read_text().split("\n", 1)[1])
    assert body["parameters"]["history_tokens"] == 12000 and set(body["models"]) == {"scorer"}
    assert body["recording_sha256"] == json.loads(
        (repo / "results" / "replies" / "quick.manifest.json").read_text())["sha256"]
    assert "models" not in json.loads((fp.parent / "25_restore_controls.txt").read_text().split("\n", 1)[1])


def test_a_base_url_with_credentials_is_written_without_them():
    from memlife.models import endpoints

    def written(url: str) -> dict:
        return runner.endpoint_fingerprint(endpoints.Endpoint(role="reader", model="m", base_url=url))

    fp = written("https://user:hunter2@gw.example/v1?api-version=2024-10-21&api-key=s3cret&sig=abc")
    assert fp["base_url"] == "https://gw.example/v1?api-version=2024-10-21"
    assert "hunter2" not in json.dumps(fp) and "s3cret" not in json.dumps(fp)
    assert written("https://gw.example/v1?api-version=2025-01-01") != fp  # what the endpoint answers changed
    assert written("http://127.0.0.1:8080/v1")["base_url"] == "http://127.0.0.1:8080/v1"


# --------------------------------------------------------------------------- code a profile brings in

MY_POLICY = ("from memlife.restore.eviction.evict import by_priority\n\n\n"
             "def longest_first(units, budget, ctx):\n"
             "    return by_priority(units, budget, key=lambda u: -u.tokens)\n")
MY_MEMORY = ("class RecentTurns:\n    name = 'recent'\n    model_free = True\n\n"
             "    def __init__(self, ctx):\n        self.reader = ctx.reader\n")


def test_editing_a_plug_in_reruns_exactly_the_notebooks_that_use_it(repo):
    """A policy and a memory system of one's own in the project root (docs/extending.md), named by
    a profile that extends smoke. After a run, editing the policy's file reruns 21 (and 23, which
    resolves 21's policies) and through the DAG 22 and 24, and MemOps nothing; the system's file,
    12 and 13 only. A file edited back is current again."""
    (repo / "my_policy.py").write_text(MY_POLICY)
    (repo / "my_memory.py").write_text(MY_MEMORY)
    (repo / "configs" / "myexp.yaml").write_text(
        "extends: smoke\nnotebooks:\n  12_memops_eval: {systems: [long_context, 'my_memory:RecentTurns']}\n"
        "  21_eviction: {policies: [fifo, random, no_evict, control, 'my_policy:longest_first']}\n")
    simulate_run(repo, "myexp")
    stamps = repo / "results" / "myexp" / "fingerprints"

    def plugins_of(nb: str) -> dict | None:
        return json.loads((stamps / f"{nb}.txt").read_text().split("\n", 1)[1]).get("plugins")

    policy = {"my_policy": {"file": "my_policy.py", "sha256": hashlib.sha256(MY_POLICY.encode()).hexdigest()}}
    assert plugins_of("21_eviction") == plugins_of("23_decomposition") == {"policy": policy}
    assert plugins_of("12_memops_eval")["system"]["my_memory"]["file"] == "my_memory.py"
    assert all(plugins_of(nb) is None for nb in NOTEBOOKS
               if nb not in ("12_memops_eval", "21_eviction", "23_decomposition"))
    assert would_run(make_n(repo, "PROFILE=myexp"), "myexp") == set()

    (repo / "my_policy.py").write_text(MY_POLICY + "# ties: the oldest first\n")
    plan = make_n(repo, "PROFILE=myexp")
    assert would_run(plan, "myexp") == {"21_eviction", "22_read_restore", "23_decomposition", "24_robustness"}
    assert "== [myexp] 21_eviction rests on changed code: policy module my_policy (my_policy.py)" in plan.stdout
    assert "== [myexp] 23_decomposition rests on changed code: policy module my_policy" in plan.stdout

    (repo / "my_policy.py").write_text(MY_POLICY)
    (repo / "my_memory.py").write_text(MY_MEMORY + "    keep = 12\n")
    plan = make_n(repo, "PROFILE=myexp")
    assert would_run(plan, "myexp") == {"12_memops_eval", "13_memops_tables"}
    assert "12_memops_eval rests on changed code: system module my_memory (my_memory.py)" in plan.stdout


def test_a_named_module_is_hashed_where_python_finds_it_without_being_run(tmp_path, monkeypatch):
    """Outside the project on sys.path; a package by all its files; a missing one by profile key."""
    (tmp_path / "lab_policy.py").write_text("raise SystemExit('never run')\n")
    (tmp_path / "labpkg").mkdir()
    (tmp_path / "labpkg" / "__init__.py").write_text("")
    (tmp_path / "labpkg" / "helpers.py").write_text("K = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    where = "profile 'myexp', notebooks.21_eviction.policies"
    found = plugins.sources(["fifo", "lab_policy:f", "lab_policy:g", "labpkg:P"], where)
    assert found["lab_policy"] == {"file": str((tmp_path / "lab_policy.py").resolve()),
                                   "sha256": hashlib.sha256(b"raise SystemExit('never run')\n").hexdigest()}
    assert set(found) == {"lab_policy", "labpkg"} and "lab_policy" not in sys.modules
    (tmp_path / "labpkg" / "helpers.py").write_text("K = 2\n")
    assert plugins.source_digest("labpkg", where)["sha256"] != found["labpkg"]["sha256"]
    with pytest.raises(ValueError, match=r"notebooks\.21_eviction\.policies: cannot find module 'lab_polcy'"):
        plugins.sources(["lab_polcy:f"], where)


def test_the_rerun_message_names_settings_and_each_changed_module_with_its_file():
    fp = {"plugins": {"policy": {"lab.policies": {"file": "lab/policies.py", "sha256": "ab"}}}}
    said = runner.rerun_reasons(["parameters.seeds", "plugins.policy.lab.policies.sha256",
                                 "plugins.system.gone.file", "plugins.system.gone.sha256"], fp)
    assert said == ("changed settings: parameters.seeds; changed code: policy module lab.policies "
                    "(lab/policies.py), system module gone (no longer named)")


def _resolve_calls() -> list[tuple[str, str]]:
    """(where the call runs: a notebook's name or a library module's path, the profile key it names)
    for every resolve_systems / resolve_policies call that names one."""
    cells = {nb: json.loads((ROOT / "notebooks" / f"{nb}.ipynb").read_text())["cells"] for nb in NOTEBOOKS}
    texts = {nb: "".join("".join(c["source"]) for c in cs if c["cell_type"] == "code") for nb, cs in cells.items()}
    texts.update({str(p.relative_to(ROOT)): p.read_text() for p in (ROOT / "lib" / "memlife").rglob("*.py")})
    out = []
    for where, text in texts.items():
        for call in re.finditer(r"resolve_(?:systems|policies)\(", text):
            key = re.search(r"notebooks\.(\d\d_\w+\.\w+)", text[call.end():call.end() + 300])
            if key:
                out.append((where, key.group(1)))
    return out


def test_every_parameter_that_takes_a_plug_in_is_in_the_table_with_the_notebooks_that_resolve_it():
    calls = _resolve_calls()
    assert {"12_memops_eval.systems", "21_eviction.policies", "25_restore_controls.policies"} <= {k for _, k in calls}
    for where, key in calls:
        assert key in plugins.PARAMETERS, f"{where} resolves {key}, which plugins.PARAMETERS does not name"
        if where in NOTEBOOKS:
            assert where in plugins.PARAMETERS[key][1], f"{where} resolves {key}: not among its notebooks"


# --------------------------------------------------------------------------- one source of truth

def _makefile_dag() -> dict[str, set[str]]:
    dag: dict[str, set[str]] = {}
    for line in (ROOT / "Makefile").read_text().splitlines():
        m = re.match(r"\$\(NB_DIR\)/(\w+)\.ipynb:(.*)$", line)
        if m:
            dag[m.group(1)] = set(re.findall(r"\$\(NB_DIR\)/(\w+)\.ipynb", m.group(2)))
    return dag


def test_the_makefile_dag_is_the_one_the_library_knows():
    assert _makefile_dag() == {nb: set(ups) for nb, ups in config.UPSTREAM.items()}


@pytest.mark.parametrize("nb", NOTEBOOKS)
def test_every_role_a_notebook_names_is_in_its_roles(nb):
    source = "".join("".join(c["source"]) for c in json.loads((ROOT / "notebooks" / f"{nb}.ipynb").read_text())["cells"]
                     if c["cell_type"] == "code")
    named = set(re.findall(r"(?:get_client|role_configured)\(\"(\w+)\"\)", source))
    assert named <= set(config.roles_called(nb))


def test_the_estimate_runs_the_calling_notebooks_and_what_they_read():
    assert estimate.CALLING == ("10_memops_build", "12_memops_eval", "20_longmem_data", "21_eviction",
                                "22_read_restore")


def test_the_summary_names_the_models_behind_each_notebooks_tables(tmp_path):
    from memlife.base import paths

    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "quick.yaml").write_text("common: {}\nnotebooks: {}\n")
    (tmp_path / "notebooks").mkdir()
    for nb in ("22_read_restore", "23_decomposition", "25_restore_controls"):
        (tmp_path / "notebooks" / f"{nb}.ipynb").write_text("{}")
    usage = paths.layout("quick", tmp_path).usage
    usage.mkdir(parents=True)
    zero = dict(wall_s=1.0, calls=0, cached_calls=0, live_calls=0, prompt_tokens=0, completion_tokens=0,
                usd_estimate=0.0, by_role={}, profile="quick")
    (usage / "22_read_restore.json").write_text(json.dumps({**zero, "notebook": "22_read_restore", "calls": 3,
        "by_role": {"reader": {"models": ["stand-in-reader"]}, "judge": {"models": ["stand-in-judge"]}},
        "outputs": ["results/quick/tables/restore_records.csv"]}))
    (usage / "23_decomposition.json").write_text(json.dumps({**zero, "notebook": "23_decomposition",
                                                             "outputs": ["results/quick/tables/r1.csv"]}))
    (usage / "25_restore_controls.json").write_text(json.dumps({**zero, "notebook": "25_restore_controls",
                                                                "outputs": ["results/quick/tables/c.csv"]}))
    text = runner.summary("quick", tmp_path)
    assert ("models behind 22_read_restore's tables and figures: judge stand-in-judge; reader stand-in-reader"
            in text)
    assert ("models behind 23_decomposition's tables and figures: judge stand-in-judge; reader stand-in-reader "
            "(through 22_read_restore)" in text)
    assert "models behind 25_restore_controls's tables and figures: none (model-free)" in text


def test_a_run_keeps_the_fingerprint_it_was_made_with_and_a_return_to_it_takes_back_its_date(tmp_path):
    """The runner's command line (what make calls) writes the notebook's fingerprint before it runs
    and keeps a copy, NAME.ran, dated as the fingerprint was: settings changed and changed back (as
    a `make -n` with another model does) leave the executed copy current."""
    import nbformat

    root = tmp_path / "repo"
    (root / "notebooks").mkdir(parents=True)
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell("size = 1")
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_code_cell("assert size > 0")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, root / "notebooks" / "98_tiny.ipynb")
    (root / "configs").mkdir()
    (root / "configs" / "mine.yaml").write_text("common: {}\nnotebooks:\n  98_tiny: {size: 1}\n")
    env = dict(MEMLIFE_ROOT=str(root), MEMLIFE_CACHE_DIR=str(tmp_path / "cache"))
    done = _python(root, "-m", "memlife.running.runner", "98_tiny", "--profile", "mine", **env)
    assert done.returncode == 0, done.stderr
    fp = root / "results" / "mine" / "fingerprints" / "98_tiny.txt"
    executed = root / "results" / "mine" / "notebooks" / "98_tiny.ipynb"
    ran = runner.ran_path(fp)
    assert ran.read_text() == fp.read_text() and ran.stat().st_mtime_ns == fp.stat().st_mtime_ns
    assert '"size": 1' in fp.read_text() and fp.stat().st_mtime_ns < executed.stat().st_mtime_ns

    def fingerprint_now() -> subprocess.CompletedProcess:
        return _python(root, "-m", "memlife.running.runner", "fingerprint", "--profile", "mine", **env)

    (root / "configs" / "mine.yaml").write_text("common: {}\nnotebooks:\n  98_tiny: {size: 2}\n")
    time.sleep(0.01)
    assert "98_tiny rests on changed settings: parameters.size" in fingerprint_now().stdout
    assert fp.stat().st_mtime_ns > executed.stat().st_mtime_ns  # make would run it again
    (root / "configs" / "mine.yaml").write_text("common: {}\nnotebooks:\n  98_tiny: {size: 1}\n")
    assert fingerprint_now().stdout == ""
    assert fp.stat().st_mtime_ns == ran.stat().st_mtime_ns < executed.stat().st_mtime_ns  # current again
