"""Profiles and notebooks agree: smoke.yaml is exactly the notebooks' own defaults, and no profile
sets a parameter a notebook does not declare (papermill would inject a typo silently)."""
import ast
import json
from pathlib import Path

import pytest

from memlife.base import config, paths

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def parameters_cell(nb_path: Path) -> dict:
    nb = json.loads(nb_path.read_text())
    cells = [c for c in nb["cells"] if "parameters" in (c.get("metadata", {}).get("tags") or [])]
    assert len(cells) == 1, f"{nb_path.name}: expected exactly one cell tagged 'parameters'"
    out = {}
    for node in ast.parse("".join(cells[0]["source"])).body:
        assert isinstance(node, ast.Assign) and len(node.targets) == 1, (
            f"{nb_path.name}: the parameters cell holds only `name = literal` lines")
        out[node.targets[0].id] = ast.literal_eval(node.value)
    return out


def test_there_are_notebooks():
    assert NOTEBOOKS


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_smoke_profile_equals_notebook_defaults(nb):
    assert config.notebook_params("smoke", nb.stem, ROOT) == parameters_cell(nb)


@pytest.mark.parametrize("profile", ["quick", "paper"])
@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_profiles_set_only_declared_parameters(nb, profile):
    declared = parameters_cell(nb)
    params = config.notebook_params(profile, nb.stem, ROOT)
    assert set(params) <= set(declared), f"{profile}: unknown parameters {set(params) - set(declared)}"
    assert params["profile"] == profile


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebooks_are_committed_without_outputs(nb):
    cells = json.loads(nb.read_text())["cells"]
    assert not any(c.get("outputs") or c.get("execution_count") for c in cells if c["cell_type"] == "code")



@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_cell_has_a_fixed_id_so_an_executed_copy_is_the_same_on_every_run(nb):
    """A cell without an id gets a random one from nbformat each time papermill runs the notebook,
    and the committed executed copy would change on every replay."""
    cells = json.loads(nb.read_text())["cells"]
    ids = [c.get("id") for c in cells]
    assert all(ids) and len(set(ids)) == len(ids), f"{nb.name}: cells without a unique id"

# The notebooks that analyse (rather than build data or ask models): each ends with exercises.
ANALYSIS_NOTEBOOKS = {"11_memops_stats", "13_memops_tables", "14_memops_controls", "21_eviction", "22_read_restore",
                      "23_decomposition", "24_robustness", "25_restore_controls"}


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebooks_say_what_to_look_for_and_analyses_end_with_checked_exercises(nb):
    cells = json.loads(nb.read_text())["cells"]
    assert "**What to look for**" in "".join(cells[0]["source"]), f"{nb.name}: the opening cell says what to look for"
    if nb.stem not in ANALYSIS_NOTEBOOKS:
        return
    heads = [i for i, c in enumerate(cells) if "".join(c["source"]).startswith("### Exercise")]
    assert len(heads) >= 2, f"{nb.name}: at least two exercises"
    for i in heads:  # each exercise's prediction is checked by the code cell after it
        code = next(c for c in cells[i + 1:] if c["cell_type"] == "code")
        assert "assert " in "".join(code["source"]), f"{nb.name}: exercise at cell {i} asserts its prediction"

def test_unknown_profile_and_section_are_named(tmp_path):
    with pytest.raises(ValueError, match=r"unknown profile 'huge': no .*configs/huge.yaml \(profiles here: paper, paper-lite, quick, smoke\)"):
        paths.layout("huge", ROOT)
    with pytest.raises(ValueError, match="profile name '../quick'"):
        paths.layout("../quick", ROOT)
    with pytest.raises(ValueError, match="profile name 'raw'.*none of raw, tables"):
        paths.layout("raw", ROOT)  # data/raw/ holds the downloads
    with pytest.raises(KeyError, match="notebooks.99_missing"):
        config.notebook_params("smoke", "99_missing", ROOT)


def test_any_profile_file_is_a_profile_and_every_output_is_scoped_under_its_name(tmp_path):
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "myexp.yaml").write_text((ROOT / "configs" / "quick.yaml").read_text())
    assert paths.profiles(tmp_path) == ["myexp"]
    lay = paths.layout("myexp", tmp_path)
    run = tmp_path / "results" / "myexp"
    assert (lay.tables, lay.figures, lay.notebooks, lay.usage, lay.run_logs) == (
        run / "tables", run / "figures", run / "notebooks", run / "usage", run / "logs")
    assert lay.data == tmp_path / "data" / "myexp"
    assert config.notebook_params("myexp", "21_eviction", tmp_path)["budgets"]


def test_no_profile_writes_the_committed_outputs():
    tables, figures = paths.published(ROOT)
    for name in paths.profiles(ROOT):
        lay = paths.layout(name, ROOT)
        assert not {lay.tables, lay.figures, lay.run} & {tables, figures}
        assert lay.run.is_relative_to(ROOT / "results" / name)


def test_a_profile_is_named_by_its_file_and_a_contradicting_field_is_refused(tmp_path):
    (tmp_path / "configs").mkdir()
    quick = (ROOT / "configs" / "quick.yaml").read_text()
    (tmp_path / "configs" / "myexp.yaml").write_text(quick)
    assert config.notebook_params("myexp", "23_decomposition", tmp_path)["profile"] == "myexp"
    (tmp_path / "configs" / "other.yaml").write_text(quick.replace("common:\n", "common:\n  profile: quick\n"))
    with pytest.raises(ValueError, match=r"other.yaml: field 'profile' is 'quick', but a profile is named by its file"):
        config.notebook_params("other", "23_decomposition", tmp_path)


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_notebook_cell_defines_a_function_or_class(nb):
    """The library does the work: what a notebook would define belongs in lib/memlife, tested."""
    import ast

    cells = json.loads(nb.read_text())["cells"]
    for i, cell in enumerate(c for c in cells if c["cell_type"] == "code"):
        tree = ast.parse("".join(cell["source"]))
        definitions = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
        defined = [n.name for n in ast.walk(tree) if isinstance(n, definitions)]
        assert not defined, f"{nb.name}: code cell {i + 1} defines {defined}"
