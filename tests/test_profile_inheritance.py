"""Profiles that inherit: `extends: NAME` plus only what differs; sections merge key by key, any
other value (a list included) replaces; chains are followed, cycles refused; every key of every
file in the chain is checked; a linked parameter has one home."""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from memlife.base import config

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


@pytest.fixture
def root(tmp_path):
    shutil.copytree(ROOT / "configs", tmp_path / "configs")
    shutil.copytree(ROOT / "notebooks", tmp_path / "notebooks")
    return tmp_path


def write(root: Path, name: str, text: str) -> None:
    (root / "configs" / f"{name}.yaml").write_text(text)


def test_a_profile_that_only_extends_resolves_to_its_parent_under_its_own_name(root):
    write(root, "myexp", "extends: quick\n")
    for nb in NOTEBOOKS:
        assert config.notebook_params("myexp", nb, root) == {**config.notebook_params("quick", nb, root),
                                                             "profile": "myexp"}
    assert config.load_profile("myexp", root) == config.load_profile("quick", root)


def test_sections_merge_and_a_list_replaces_a_list(root):
    write(root, "myexp", "extends: quick\nnotebooks:\n  12_memops_eval:\n    systems: [bm25_turn]\n"
                         "  21_eviction:\n  00_backend: {}\nmodels:\n  judge: {model: gpt-4o}\n")
    p12 = config.notebook_params("myexp", "12_memops_eval", root)
    quick12 = config.notebook_params("quick", "12_memops_eval", root)
    assert p12["systems"] == ["bm25_turn"]  # not quick's six with bm25_turn added
    assert {k: v for k, v in p12.items() if k not in ("systems", "profile")} == \
        {k: v for k, v in quick12.items() if k not in ("systems", "profile")}
    # an empty section changes nothing
    assert config.notebook_params("myexp", "21_eviction", root)["budgets"] == "paper"
    assert config.notebook_params("myexp", "00_backend", root)["n_prompts"] == 6
    cfg = config.load_profile("myexp", root)
    assert cfg["models"]["judge"] == {"model": "gpt-4o"} and cfg["recorded_replies"] == "results/replies/quick.jsonl.gz"


def test_a_chain_is_followed_and_the_nearest_file_wins(root):
    write(root, "mid", "extends: paper\nnotebooks:\n  21_eviction:\n    seeds: [5]\n  22_read_restore:\n    k: 7\n")
    write(root, "leaf", "extends: mid\nnotebooks:\n  22_read_restore:\n    k: 9\nspend_cap_usd: 3\n")
    cfg = config.load_profile("leaf", root)
    assert cfg["notebooks"]["21_eviction"]["seeds"] == [5]
    assert cfg["notebooks"]["22_read_restore"]["k"] == 9
    assert cfg["notebooks"]["22_read_restore"]["restore_cap"] == 2000  # paper's
    assert cfg["spend_cap_usd"] == 3 and cfg["models"] == config.load_profile("paper", root)["models"]


def test_a_cycle_is_refused_naming_it(root):
    write(root, "a", "extends: b\n")
    write(root, "b", "extends: a\n")
    with pytest.raises(ValueError, match=r"b.yaml: extends 'a', a cycle: a -> b -> a"):
        config.load_profile("a", root)
    write(root, "self", "extends: self\n")
    with pytest.raises(ValueError, match="a cycle: self -> self"):
        config.load_profile("self", root)


@pytest.mark.parametrize("text, words", [
    ("extends: quick\nnotebooks:\n  22_read_restore:\n    restore_cpa: 5\n",
     r"notebooks.22_read_restore.restore_cpa is not a parameter of notebooks/22_read_restore.ipynb "
     r"\(did you mean restore_cap\?\)"),
    ("extends: quick\nnotebooks:\n  22_read_restor:\n    k: 5\n",
     r"notebooks.22_read_restor is not a notebook in \S+ \(did you mean 22_read_restore\?\)"),
    ("extends: quick\ncommon:\n  sed: 3\n", r"common.sed is not a parameter of any notebook .*\(did you mean seed\?\)"),
    ("extends: quick\nextend: paper\n", r"extend is not a profile field \(did you mean extends\?\)"),
    ("extends: [quick]\n", r"extends names one profile"),
    ("extends: quick\ntracks:\n  restore:\n    models:\n      scorr: {model: x}\n",
     r"tracks.restore.models.scorr is not a role \(did you mean scorer\?\)"),
])
def test_a_misspelled_key_in_a_profile_that_extends_is_refused_naming_the_file(root, text, words):
    write(root, "myexp", text)
    with pytest.raises(ValueError, match=r"configs/myexp.yaml: .*" + words):
        config.load_profile("myexp", root)


def test_a_typo_in_the_parent_is_named_in_the_parent(root):
    write(root, "base", (root / "configs" / "quick.yaml").read_text().replace("    n_boot: 2000\n    level",
                                                                             "    n_bot: 2000\n    level", 1))
    write(root, "myexp", "extends: base\n")
    with pytest.raises(ValueError, match=r"configs/base.yaml: notebooks.23_decomposition.n_bot"):
        config.load_profile("myexp", root)


def test_a_linked_parameter_has_one_home(root):
    write(root, "myexp", "extends: quick\nnotebooks:\n  20_longmem_data:\n    history_tokens: 20000\n"
                         "    source: auto\n")
    assert config.notebook_params("myexp", "21_eviction", root)["history_tokens"] == 20000
    assert config.notebook_params("myexp", "21_eviction", root)["source"] == "auto"
    assert config.notebook_params("myexp", "22_read_restore", root)["source"] == "auto"
    assert config.notebook_params("myexp", "25_restore_controls", root)["history_tokens"] == 102000  # its own data
    write(root, "other", "extends: quick\nnotebooks:\n  21_eviction:\n    history_tokens: 5000\n")
    with pytest.raises(ValueError, match=r"other.yaml: notebooks.21_eviction.history_tokens has one home, "
                                         r"notebooks.20_longmem_data.history_tokens"):
        config.load_profile("other", root)


@pytest.mark.parametrize("profile", ["smoke", "quick", "paper"])
def test_the_restore_notebooks_read_one_data_set_in_every_shipped_profile(profile):
    p20, p21, p22 = (config.notebook_params(profile, nb, ROOT)
                     for nb in ("20_longmem_data", "21_eviction", "22_read_restore"))
    assert p21["history_tokens"] == p20["history_tokens"]
    assert p20["source"] == p21["source"] == p22["source"]


def test_the_command_line_gets_resolved_values(root):
    write(root, "myexp", "extends: quick\nnotebooks:\n  21_eviction:\n    seeds: [0, 1]\n")
    env = {"PYTHONPATH": str(ROOT / "lib"), "MEMLIFE_ROOT": str(root), "PATH": "/usr/bin:/bin"}

    def get(*args):
        return subprocess.run([sys.executable, "-m", "memlife.base.config", *args], env=env, capture_output=True, text=True)

    assert get("get", "myexp", "recorded_replies").stdout == "results/replies/quick.jsonl.gz\n"
    assert get("get", "paper", "recorded_replies").stdout == "\n"  # null
    assert get("get", "myexp", "notebooks.21_eviction.seeds").stdout == "[0, 1]\n"
    assert "seeds:\n    - 0\n    - 1\n" in get("show", "myexp").stdout
    missing = get("get", "myexp", "notebooks.21_eviction.sedes")
    assert missing.returncode == 2 and "did you mean seeds?" in missing.stderr
