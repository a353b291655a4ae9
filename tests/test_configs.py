"""Profiles and notebooks agree: smoke.yaml is exactly the notebooks' own defaults, and no profile
sets a parameter a notebook does not declare (papermill would inject a typo silently)."""
import ast
import json
from pathlib import Path

import pytest

from memlife import config, paths

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


def test_unknown_profile_and_section_are_named(tmp_path):
    with pytest.raises(ValueError, match="unknown profile 'huge'"):
        paths.layout("huge")
    with pytest.raises(KeyError, match="notebooks.99_missing"):
        config.notebook_params("smoke", "99_missing", ROOT)


def test_profile_outputs_are_scoped():
    q, s = paths.layout("quick", ROOT), paths.layout("smoke", ROOT)
    assert q.tables == ROOT / "results" / "tables" and q.figures == ROOT / "figures"
    assert s.tables == ROOT / "results" / "smoke" / "tables"
    assert q.data != s.data and q.run != s.run
