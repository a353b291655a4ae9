"""docs/extending.md's worked example, run: its toy memory system and toy eviction policy, read
out of the document into a module of their own on sys.path (outside lib/), named the way a
profile names them, through notebook 12's evaluation core and notebook 21's grid, 22's reads and
23's decomposition and family of tests."""
import json
import re
import sys
from pathlib import Path

import pytest

from memlife.base import plugins
from memlife.memops.systems import answering, baselines, registry
from memlife.memops.scoring import labels
from memlife.memops.data.schema import Instance
from memlife.restore.eviction import evict
from memlife.restore.reading import arms
from memlife.restore.analyses import controls, decompose, paper_analyses

from conftest import completion

HERE = Path(__file__).parent
DOC = HERE.parent / "docs" / "extending.md"
INSTANCE = Instance.model_validate(json.loads((HERE / "data" / "memops_instance.json").read_text()))


def example_source() -> str:
    """The python block of docs/extending.md that is toy_memory.py."""
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)
    [block] = [b for b in blocks if b.startswith("# toy_memory.py")]
    return block


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """toy_memory importable from a folder of its own; the registries as they were afterwards."""
    (tmp_path / "toy_memory.py").write_text(example_source())
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    monkeypatch.setattr(evict, "_REGISTRY", dict(evict._REGISTRY))
    sys.modules.pop("toy_memory", None)
    yield tmp_path / "toy_memory.py"
    sys.modules.pop("toy_memory", None)


class _Client:
    """An embedded-looking reader that says how many context lines it was shown."""

    model = "lines"
    is_embedded = True

    def __init__(self):
        self.calls = 0

    def complete_json(self, messages, *, schema, max_tokens, **kw):
        self.calls += 1
        memory = messages[-1]["content"].split("## Question")[0]
        text = json.dumps({"answer": str(memory.count("\n[session")), "operations": [], "provenance": []})
        return schema.model_validate_json(text), completion(text, prompt_tokens=1, completion_tokens=1)


# ----------------------------------------------------------------------------- the registries


def test_the_papers_systems_and_policies_are_registered_with_their_declarations():
    specs = registry.registered_systems()
    assert set(baselines.SYSTEMS) <= set(specs)
    assert [n for n in baselines.SYSTEMS if specs[n].model_free] == ["long_context", "bm25_turn", "bm25_session", "mem0"]
    assert {n for n in baselines.SYSTEMS if specs[n].parallel} == set(answering.PARALLEL_SYSTEMS)
    assert not any(specs[n].version for n in baselines.SYSTEMS)  # their run keys are what they always were
    pol = evict.registered_policies()
    assert set(evict.POLICIES) <= set(pol)
    assert [n for n in evict.POLICIES if pol[n].seeded] == ["random", "control"]
    assert [n for n in evict.POLICIES if pol[n].needs_model] == ["importance"]
    assert {pol[n].role for n in evict.POLICIES} == set(evict.ROLES)
    assert evict.holm_family(evict.POLICIES) == list(evict.BASELINE_POLICIES)
    assert evict.is_paper_family(evict.holm_family(evict.POLICIES))


def test_a_wrong_name_fails_at_once_with_the_profile_key_and_the_nearest_name(toy):
    where = "profile 'myexp', notebooks.21_eviction.policies"
    with pytest.raises(ValueError,
                       match=r"notebooks\.21_eviction\.policies: unknown policy 'fifoo' \(did you mean fifo\?\)"):
        evict.resolve_policies(["random", "fifoo"], where)
    with pytest.raises(ValueError, match=r"cannot import module 'toy_memry'.*project root.*PYTHONPATH"):
        evict.resolve_policies(["toy_memry:longest_first"], where)
    with pytest.raises(ValueError,
                       match=r"toy_memory has no attribute 'longest_frist' \(did you mean longest_first\?\)"):
        evict.resolve_policies(["toy_memory:longest_frist"], where)
    with pytest.raises(ValueError,
                       match=r"12_memops_eval\.systems: unknown system 'bm25_turns' \(did you mean bm25_turn\?\)"):
        registry.resolve_systems(["bm25_turns"], "profile 'myexp', notebooks.12_memops_eval.systems")
    with pytest.raises(ValueError, match="listed twice"):
        evict.resolve_policies(["fifo", "fifo"], where)
    # the paper's names are the paper's
    (toy.parent / "clash.py").write_text("from memlife.restore.eviction.evict import PolicySpec\n"
                                         "fifo = PolicySpec('fifo', lambda units, budget, ctx: [])\n")
    with pytest.raises(ValueError, match="'fifo' is the paper's"):
        evict.resolve_policies(["clash:fifo"], where)
    assert evict.registered_policies()["fifo"].builtin


def test_a_policy_that_overfills_the_store_or_invents_units_fails_by_name(toy):
    from memlife.restore.data.units import Unit

    us = [Unit(unit_id=f"s:{i}", session_id="s", turn_index=i, date="d", role="user", text=f"t{i}", tokens=10,
               order=i, is_gold=False) for i in range(4)]
    keep_all = evict.PolicySpec("keeps_all", lambda units, budget, ctx: [])
    with pytest.raises(ValueError, match="'keeps_all' kept 40 tokens over a budget of 25"):
        evict.evict(us, keep_all, 25)
    bad = evict.PolicySpec("bad", lambda units, budget, ctx: [0, 0, 9])
    with pytest.raises(ValueError, match="'bad' must return distinct unit indices"):
        evict.evict(us, bad, 25)
    assert evict.evict(us, evict.PolicySpec("ok", lambda units, budget, ctx: [0, 1]), 25).evicted == ("s:0", "s:1")


# ----------------------------------------------------------------------------- the memory system


def test_the_toy_system_runs_through_notebook_12s_evaluation_beside_a_papers_system(toy, tmp_path):
    client = _Client()
    cfg = answering.EvalConfig(profile="myexp", systems=["long_context", "toy_memory:RecentTurns"],
                              settings=["adjacent"], max_probes=2, judge=False)
    replies = answering.run([INSTANCE], cfg, tmp_path / "run", reader_client=client, progress=False)
    records = labels.run(replies, [INSTANCE], cfg, tmp_path / "run", progress=False)
    assert set(records["system"]) == {"long_context", "toy"}
    toy_rows, lc_rows = records[records.system == "toy"], records[records.system == "long_context"]
    assert list(toy_rows["probe_id"]) == list(lc_rows["probe_id"]) and len(toy_rows) == 2
    # the toy shows the reader its last 12 turns, long-context all 24 of the adjacent history
    assert set(toy_rows["answer"]) == {"12"} and set(lc_rows["answer"]) == {"24"}
    assert (toy_rows["context_tokens"].values < lc_rows["context_tokens"].values).all()
    assert (tmp_path / "run" / "journal" / "toy__adjacent.jsonl").is_file()
    # notebook 13's tables take it like any system
    from memlife.memops.analyses import aggregate
    from memlife.memops.analyses import paper_analyses as memops_analyses

    records["Method"] = memops_analyses.method_labels(records)
    assert any("toy" in m for m in aggregate.table3_rows(records, ["Method"])["Method"])
    # resumed: nothing asked again; the toy edited: its probes asked afresh, long-context's kept
    assert client.calls == 4
    answering.run([INSTANCE], cfg, tmp_path / "run", reader_client=client, progress=False)
    assert client.calls == 4
    toy.write_text(example_source().replace("keep = 12", "keep = 6"))
    sys.modules.pop("toy_memory", None)
    again = answering.run([INSTANCE], cfg, tmp_path / "run", reader_client=client, progress=False)
    assert client.calls == 6 and set(again.loc[again.system == "toy", "answer"]) == {"6"}
    assert len(again) == 4 and again.loc[again.system == "long_context", "run_key"].nunique() == 1


def test_a_reference_subject_reads_through_a_model_free_system_of_ones_own(toy, tmp_path):
    cfg = answering.EvalConfig(systems=["toy_memory:RecentTurns"], settings=["adjacent"], max_probes=1,
                              judge=False, subject="gold")
    replies = answering.run([INSTANCE], cfg, tmp_path, reader_client=_Client(), progress=False)
    records = labels.run(replies, [INSTANCE], cfg, tmp_path, progress=False)
    assert set(records["system"]) == {"toy"} and records["accuracy"].all()


# ----------------------------------------------------------------------------- the eviction policy


def longest_first_by_hand(units, budget):
    kept, total, out = [], 0, []
    for u in units:
        kept.append(u)
        total += u.tokens
        while total > budget:
            victim = max(kept, key=lambda k: (k.tokens, -k.order))
            kept.remove(victim)
            total -= victim.tokens
            out.append(victim.unit_id)
    return tuple(out)


def test_the_toy_policy_runs_through_the_grid_the_reads_and_the_decomposition(toy):
    names = ["fifo", "no_evict", "toy_memory:longest_first"]
    specs = evict.resolve_policies(names, "notebooks.21_eviction.policies")
    assert [s.name for s in specs] == ["fifo", "no_evict", "toy"]
    assert not specs[2].seeded and not specs[2].needs_model and specs[2].role == evict.EVICTING
    history_tokens = 6000
    # two worker processes: the policy crosses to them as its spec, imported from toy_memory there
    cfg = controls.GridConfig(n_questions=6, history_tokens=history_tokens, budgets=arms.scaled_budgets(history_tokens),
                              seeds=[0, 1], k=12, restore_cap=1000, policies=names, workers=2)
    grid = controls.build_grid(cfg)
    toy_ev = [e for e in grid.evictions if e.policy == "toy"]
    assert {e.seed for e in toy_ev} == {0}  # not seeded: the first seed only
    assert len(toy_ev) == 6 * len(cfg.budgets)
    for e in toy_ev:  # what the docs say it does: over budget, the longest retained unit goes (ties: the oldest)
        assert e.evicted == longest_first_by_hand(grid.histories[e.question_id], e.budget)
        assert e.retained_tokens <= e.budget
    assert any(e.evicted for e in toy_ev)
    # the same grid in this process (notebook 21's evict_grid) gives the same evictions
    same = evict.evict_grid(grid.histories, specs, list(cfg.budgets), [0, 1])
    assert sorted(same, key=repr) == sorted(grid.evictions, key=repr)

    records, _ = controls.read(grid, "evidence-oracle")
    obs = decompose.observations(records)
    dec = decompose.decompose(obs)
    assert set(dec["policy"]) == {"fifo", "no_evict", "toy"}
    assert list(dict.fromkeys(dec["policy"])) == ["fifo", "no_evict", "toy"]  # the paper's order, then others
    # notebook 23's family: the evicting policies run, the toy among them, no_evict not
    family = evict.holm_family(obs["policy"].dropna().unique())
    assert family == ["fifo", "toy"] and not evict.is_paper_family(family)
    r2 = paper_analyses.regime_gap(paper_analyses.cell_bootstrap(obs, n_boot=50, seed=0), policies=family)
    assert set(r2["policy"]) == {"fifo", "toy"}
    assert (r2["family_size"] == 2 * len(cfg.budgets)).all()


def test_a_control_of_ones_own_stays_out_of_the_family(toy):
    (toy.parent / "my_control.py").write_text(
        "from memlife.restore.eviction.evict import PolicySpec, by_priority\n\n\n"
        "def gold_first(units, budget, ctx):\n"
        "    return by_priority(units, budget, key=lambda u: (not u.is_gold, u.order))\n\n\n"
        "spec = PolicySpec('gold_first', gold_first, role='control')\n")
    evict.resolve_policies(["my_control:spec"], "notebooks.21_eviction.policies")
    assert evict.holm_family(["fifo", "gold_first", "toy", "importance", "random", "redundancy"]) == \
        ["fifo", "random", "redundancy", "importance", "toy"]  # a name not registered here counts as evicting
    assert plugins.is_reference("my_control:spec") and not plugins.is_reference("fifo")


# ----------------------------------------------------------------------------- the notebooks


@pytest.mark.slow
def test_notebooks_20_to_23_run_the_toy_policy_named_in_a_profile(tmp_path, monkeypatch):
    """The restore track at smoke, model-free (the evidence-oracle reads, the deterministic scorer
    judges), with docs/extending.md's policy named in a profile of one's own and LLM-importance
    left out: no scorer call, toy rows in every table, and notebook 23's family of tests is the
    evicting policies that ran. (Notebook 12's side runs in-process above: at smoke its dataset
    needs the model to realize conversations.)"""
    import shutil

    import pandas as pd

    from memlife.running import runner

    root = tmp_path / "repo"
    (root / "notebooks").mkdir(parents=True)
    for nb in ("20_longmem_data", "21_eviction", "22_read_restore", "23_decomposition"):
        shutil.copy(HERE.parent / "notebooks" / f"{nb}.ipynb", root / "notebooks")
    (root / "configs").mkdir()
    (root / "toy_memory.py").write_text(example_source())  # in the project root, as the docs say
    shutil.copy(HERE.parent / "configs" / "smoke.yaml", root / "configs")
    # The experiment is a profile that extends smoke and says only what changes.
    (root / "configs" / "toyexp.yaml").write_text(
        "extends: smoke\nnotebooks:\n  21_eviction:\n"
        "    policies: [fifo, random, no_evict, control, 'toy_memory:longest_first']\n"
        "  22_read_restore:\n    reader_name: evidence-oracle\n")
    for name in ("MEMLIFE_REPLIES", "MEMLIFE_LLM_MODE", "MEMLIFE_BASE_URL", "MEMLIFE_MODEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MEMLIFE_ROOT", str(root))
    monkeypatch.setenv("MEMLIFE_CACHE_DIR", str(root / ".cache"))
    monkeypatch.setenv("PYTHONPATH", str(HERE.parent / "lib"))  # the kernel imports this checkout's library
    usage = {nb: runner.run_notebook(nb, "toyexp", root=root, quiet=True)
             for nb in ("20_longmem_data", "21_eviction", "22_read_restore", "23_decomposition")}
    assert usage["21_eviction"]["calls"] == 0  # no policy listed needs the scorer
    run = root / "results" / "toyexp"
    assert not (run / "restore" / "importance.parquet").exists()
    ev = pd.read_parquet(run / "restore" / "evictions.parquet")
    assert set(ev["policy"]) == {"fifo", "random", "no_evict", "control", "toy"}
    tables = run / "tables"
    for t in ("restore_gold_retention", "restore_accuracy_by_cell", "restore_decomposition", "restore_r1_shares"):
        assert "toy" in set(pd.read_csv(tables / f"{t}.csv")["policy"]), t
    r2 = pd.read_csv(tables / "restore_r2_regime_gap.csv")
    assert set(r2["policy"]) == {"fifo", "random", "toy"}  # the evicting policies run; not no_evict, not control
    executed = json.loads((run / "notebooks" / "23_decomposition.ipynb").read_text())
    printed = "".join("".join(o.get("text", "")) for c in executed["cells"] for o in c.get("outputs", []))
    assert "evicting cells reject after Holm (family: fifo, random, toy)" in printed
    assert "paper: 4 of 12" not in printed  # the paper's count is over another family


@pytest.mark.slow
def test_a_profile_that_extends_smoke_runs_the_toy_system_and_policy_through_make(tmp_path):
    """What a new user does: toy_memory.py in the project root, a five-line profile that extends
    smoke, `make` for Table 3 and the decomposition. Reference subjects read (no model call: replay
    mode with an empty cache makes any call an error), and the toy rows reach the tables."""
    import os
    import shutil
    import subprocess

    import pandas as pd

    root, repo = HERE.parent, tmp_path / "repo"
    keep = ("10_", "11_", "12_", "13_", "20_", "21_", "22_", "23_")
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=root, capture_output=True,
                            text=True, check=True).stdout.splitlines()
    for rel in listed:
        notebook = rel.startswith("notebooks/") and not rel.startswith("notebooks/.")
        if (root / rel).is_file() and not (notebook and not rel[len("notebooks/"):].startswith(keep)):
            (repo / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(root / rel, repo / rel)  # mtimes kept: the environment's stamps stay current
    for env_dir in (".venv", ".venv-memos"):
        (repo / env_dir).symlink_to(root / env_dir)
    (repo / "toy_memory.py").write_text(example_source())
    (repo / "configs" / "toyexp.yaml").write_text(
        "extends: smoke\nnotebooks:\n"
        "  12_memops_eval: {systems: [long_context, 'toy_memory:RecentTurns'], subject: evidence-oracle}\n"
        "  21_eviction: {policies: [fifo, random, no_evict, control, 'toy_memory:longest_first']}\n"
        "  22_read_restore: {reader_name: evidence-oracle}\n")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("MEMLIFE_") and k not in ("MAKEFLAGS", "MAKELEVEL", "CONDA_DEFAULT_ENV")}
    env.update(MEMLIFE_LLM_MODE="replay", MEMLIFE_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=str(repo / "lib"))
    targets = [f"results/toyexp/notebooks/{nb}.ipynb" for nb in ("13_memops_tables", "23_decomposition")]
    # The copy shares this checkout's environments: a make that would reinstall them must not run
    plan = subprocess.run(["make", "-n", *targets, "PROFILE=toyexp"], cwd=repo, env=env, capture_output=True, text=True)
    assert "pip install" not in plan.stdout, "the environment is out of date: run `make env` first"
    done = subprocess.run(["make", *targets, "PROFILE=toyexp"], cwd=repo, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    tables = repo / "results" / "toyexp" / "tables"
    table3 = pd.read_csv(tables / "memops_table3.csv")
    ours = table3[table3["source"] != "paper"]
    assert any("toy" in str(m) for m in ours["Method"]), ours["Method"].tolist()
    decomposition = pd.read_csv(tables / "restore_decomposition.csv")
    assert "toy" in set(decomposition["policy"])
    assert set(pd.read_csv(tables / "restore_r2_regime_gap.csv")["policy"]) == {"fifo", "random", "toy"}
