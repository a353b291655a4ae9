"""A module or command line that moved fails where it used to be, naming where it went: one table
(memlife.base.moved.MOVED), held to CHANGELOG.md's table of moved paths and to every
`python -m memlife...` the changelog mentions, and every old command line run as one types it."""
import importlib
import importlib.util
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from memlife.base.moved import FORMER_MODULES, MOVED

ROOT = Path(__file__).resolve().parents[1]
LIB = ROOT / "lib"
CHANGELOG = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")


def exists(module: str) -> bool:
    """Whether `module` is a file of this checkout's library (not whether it imports)."""
    base = LIB.joinpath(*module.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def has_command_line(module: str) -> bool:
    base = LIB.joinpath(*module.split("."))
    if (base / "__main__.py").is_file():
        return True
    return base.with_suffix(".py").is_file() and '__name__ == "__main__"' in base.with_suffix(".py").read_text()


def moved_rows() -> list[tuple[list[str], str, str]]:
    """(the modules a row says were there before, the row, its `python -m` now or "") for every row
    of CHANGELOG.md's tables headed `| before | now |`. A bare name in a row (`config` after
    `memlife.paths`) lives beside the first full name; names in parentheses are what a module held."""
    rows, in_table = [], False
    for line in CHANGELOG.splitlines():
        if re.match(r"\|\s*before\s*\|\s*now\s*\|", line):
            in_table = True
            continue
        if not in_table or not line.startswith("|"):
            in_table = False
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if set(cells[0]) <= set("-: "):
            continue
        names = re.findall(r"`([\w.]+)`", re.sub(r"\([^)]*\)", "", cells[0]))
        parent = names[0].rpartition(".")[0]
        modules = [n if n.startswith("memlife.") else f"{parent}.{n}" for n in names]
        now = re.search(r"`(python -m memlife[^`]*)`", cells[1])
        rows.append((modules, line, now.group(1) if now else ""))
    return rows


def test_the_changelog_has_a_table_of_moved_paths_that_this_test_reads():
    rows = moved_rows()
    assert len(rows) >= 10
    assert any(mods == ["memlife.replies"] for mods, _, _ in rows)
    assert any("memlife.units" in mods for mods, _, _ in rows)  # a bare name beside a full one


def test_every_module_the_changelog_moved_away_is_in_the_table():
    for modules, row, _ in moved_rows():
        for m in modules:
            assert exists(m) or m in MOVED, f"CHANGELOG.md moved {m} ({row[:80]}...): not in memlife.base.moved.MOVED"


def test_every_command_line_the_changelog_moved_is_in_the_table_with_the_command_it_names():
    commands = [(mods, row, now) for mods, row, now in moved_rows() if now or "command line" in row]
    assert len(commands) >= 2  # memlife.replies and memlife.longmem
    for modules, row, now in commands:
        for m in modules:
            assert m in MOVED and MOVED[m].command, f"{m}'s command line moved ({row[:80]}...): not in the table"
            if now:  # a command that moved again since that entry: the table names where it is now
                module = shlex.split(now)[2]
                while module in MOVED and MOVED[module].command and MOVED[module].command != now:
                    now = MOVED[module].command
                    module = shlex.split(now)[2]
                assert MOVED[m].command == now, f"{m}: the changelog says {now!r}, the table {MOVED[m].command!r}"


def test_every_python_m_of_a_module_that_is_gone_is_in_the_table():
    mentioned = set(re.findall(r"python -m (memlife[\w.]*\w)", CHANGELOG))
    assert {"memlife.serve", "memlife.report"} <= mentioned  # what the changelog itself says was typed once
    for module in mentioned:
        assert exists(module) or (module in MOVED and MOVED[module].command), (
            f"CHANGELOG.md mentions `python -m {module}`, which is gone: memlife.base.moved.MOVED must say "
            f"where its command line went")


@pytest.mark.parametrize("old", sorted(MOVED))
def test_the_table_points_at_what_exists(old):
    move = MOVED[old]
    for now in re.findall(r"memlife(?:\.\w+)+", move.now):
        assert exists(now), f"{old}: {now} does not exist"
    if move.command:
        module = shlex.split(move.command)[2]
        assert has_command_line(module), f"{old}: `{move.command}`: {module} has no command line"
        assert move.was.startswith(f"python -m {old}"), move.was
    if exists(old):  # it stays: its command line must refuse, by the table, not exit 0
        text = LIB.joinpath(*old.split(".")).with_suffix(".py").read_text()
        assert f'moved.refuse("{old}")' in text and move.command


@pytest.mark.parametrize("old", sorted(m for m in MOVED if not exists(m)))
def test_importing_a_module_that_is_gone_names_where_it_went(old):
    with pytest.raises(ModuleNotFoundError) as caught:
        importlib.import_module(old)
    assert caught.value.name == old
    assert MOVED[old].now in str(caught.value)


def test_the_finder_leaves_every_other_name_as_it_was():
    assert importlib.util.find_spec("memlife.no_such_module") is None
    assert importlib.util.find_spec("memlife.restore.eviction.evict").origin.endswith("evict.py")
    assert importlib.util.find_spec("memlife.memops.systems").origin.endswith("__init__.py")  # a stage now
    assert importlib.util.find_spec("memlife.longmem").origin.endswith("longmem.py")  # stays, found first


def test_every_old_command_line_fails_naming_the_command_that_does_its_job_now(tmp_path):
    """Run as one typed them (`python -m memlife.longmem validate FILE` on an empty list, which
    used to print nothing and exit 0), all at once: each exits non-zero and says the new command
    on stderr. `import memlife` loads nothing of the library but the table."""
    (tmp_path / "empty.json").write_text("[]")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("MEMLIFE_")}, "PYTHONPATH": str(LIB)}
    olds = {old: move for old, move in MOVED.items() if move.command}
    assert "memlife.longmem" in olds and "memlife.replies" in olds

    def start(args: list[str]) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, *args], cwd=tmp_path, env=env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    runs = {old: start(["-m", *[a.replace("FILE", "empty.json") for a in shlex.split(move.was)[2:]]])
            for old, move in olds.items()}
    loaded = start(["-c", "import sys, memlife; print(sorted(m for m in sys.modules if 'memlife' in m))"])
    for old, proc in runs.items():
        out, err = proc.communicate(timeout=60)
        assert proc.returncode != 0, f"`{olds[old].was}` exited 0: {out!r} {err!r}"
        assert f"`{olds[old].command}`" in err, f"`{olds[old].was}`: {err!r}"
    assert loaded.communicate(timeout=60)[0].split("\n")[0] == "['memlife', 'memlife.base', 'memlife.base.moved']"


@pytest.mark.parametrize("package", sorted(FORMER_MODULES))
def test_a_stage_that_was_a_module_names_where_that_module_went(package):
    stage = importlib.import_module(package)
    with pytest.raises(AttributeError, match=FORMER_MODULES[package].replace(".", r"\.")):
        stage.SYSTEMS  # noqa: B018  (a name of the old module)
    assert importlib.import_module(FORMER_MODULES[package])  # the module itself is where the error says
