"""The package's places import downward only, have no cycle, stay small, and say what they hold."""
import ast
import dataclasses
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("architecture", ROOT / "tools" / "architecture.py")
architecture = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(architecture)


def test_no_cycle_and_no_upward_import_in_the_package():
    assert architecture.problems() == []


@pytest.mark.parametrize("graph, expected", [
    ({"memlife.base.paths": {"memlife.models.llm"}, "memlife.models.llm": set()},
     "memlife.base.paths (base) imports memlife.models.llm (models): an upward import"),
    ({"memlife.memops.systems.baselines": {"memlife.restore.eviction.evict"}, "memlife.restore.eviction.evict": set()},
     "the two tracks do not import each other"),
    ({"memlife.stats": {"memlife.restore.eviction.evict"}, "memlife.restore.eviction.evict": set()},
     "memlife.stats (science) imports memlife.restore.eviction.evict (restore): an upward import"),
    ({"memlife.models.llm": {"memlife.models.replies"}, "memlife.models.replies": {"memlife.models.llm"}},
     "import cycle"),
    ({"memlife.restore.reading.arms": {"memlife"}, "memlife": set()}, "imports the package itself"),
])
def test_the_check_names_a_cycle_an_upward_import_and_a_track_importing_the_other(graph, expected):
    found = architecture.problems(graph)
    assert any(expected in p for p in found), found


def test_a_downward_import_one_within_a_place_and_one_to_an_earlier_stage_are_allowed():
    graph = {"memlife.running.runner": {"memlife.models.llm", "memlife.memops.scoring.labels"},
             "memlife.memops.scoring.labels": {"memlife.memops.systems.answering", "memlife.memops.scoring.metrics",
                                               "memlife.stats", "memlife.base.paths"},
             "memlife.memops.systems.answering": {"memlife.memops.data.schema"},
             "memlife.memops.build": {"memlife.memops.scoring.metrics", "memlife.memops.data.gates"},
             "memlife.memops.data.gates": {"memlife.memops.data.schema"}, "memlife.memops.data.schema": set(),
             "memlife.memops.scoring.metrics": set(), "memlife.stats": set(), "memlife.base.paths": set(),
             "memlife.models.llm": {"memlife.base.paths"}}
    assert architecture.problems(graph) == []


def test_a_lazy_import_inside_a_function_counts(tmp_path, monkeypatch):
    pkg = tmp_path / "memlife"
    (pkg / "base").mkdir(parents=True)
    (pkg / "models").mkdir()
    for p in (pkg / "__init__.py", pkg / "base" / "__init__.py", pkg / "models" / "__init__.py", pkg / "models" / "llm.py"):
        p.write_text("")
    (pkg / "base" / "config.py").write_text("def f():\n    from memlife.models import llm\n    return llm\n")
    monkeypatch.setattr(architecture, "LIB", tmp_path)
    assert architecture.imports()["memlife.base.config"] == {"memlife.models.llm"}
    assert any("an upward import" in p for p in architecture.problems())


def test_no_module_is_longer_than_the_limit():
    long = {m: n for m, n in architecture.sizes().items() if n > architecture.MAX_LINES}
    assert long == {}


def _docstring(path: Path) -> str:
    return ast.get_docstring(ast.parse(path.read_text())) or ""


def test_every_place_and_stage_says_what_lives_there_and_what_it_may_import():
    mods = architecture.modules()
    packages = sorted(architecture.SUBPACKAGES) + [f"{t}.{s}" for t, ss in architecture.STAGES.items() for s in ss]
    for pkg in packages:
        doc = _docstring(mods[f"memlife.{pkg}"])
        assert "Imports:" in doc, f"memlife/{pkg.replace('.', '/')}/__init__.py says nothing of what it may import"
        for m in mods:
            if m.startswith(f"memlife.{pkg}.") and not m.endswith("__main__") and m.count(".") == pkg.count(".") + 2:
                assert f"`{m.rpartition('.')[2]}`" in doc or f"`{m}`" in doc, \
                    f"memlife/{pkg.replace('.', '/')}/__init__.py does not name {m}"
    for track, stages in architecture.STAGES.items():  # a track names its stages, in order
        doc = _docstring(mods[f"memlife.{track}"])
        where = [doc.index(f"`memlife.{track}.{s}`") for s in stages]
        assert where == sorted(where), f"memlife/{track}/__init__.py names its stages out of order"
    top = _docstring(mods["memlife"])
    for m in mods:
        if architecture.place(m) == "science":
            assert f"`{m.rpartition('.')[2]}`" in top, f"memlife/__init__.py does not name {m}"


def test_every_module_has_a_docstring_that_is_not_its_name():
    for m, path in architecture.modules().items():
        doc = _docstring(path)
        assert len(doc.split()) > 5, f"{m}: {doc!r}"


def test_the_architecture_documents_diagram_is_the_one_the_code_makes():
    text = architecture.DOC.read_text()
    assert architecture.document_with_diagram(text) == text, "run `python tools/architecture.py --write`"


def test_the_profile_vocabulary_is_the_endpoint_dataclass():
    from memlife.base import config
    from memlife.models import endpoints

    fields = [f.name for f in dataclasses.fields(endpoints.Endpoint) if f.name not in ("role", "api_key_env")]
    assert tuple(fields) == config.ENDPOINT_FIELDS


def test_the_papers_policy_names_are_the_eviction_policies():
    from memlife import paper_reference
    from memlife.restore.eviction import evict

    assert paper_reference.PAPER_EVICTING_POLICIES == evict.BASELINE_POLICIES
    assert paper_reference.NO_EVICT == evict.NO_EVICT
