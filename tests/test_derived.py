"""Derived data kept on disk: the same key loads what was derived, any other key derives afresh."""
import os

import pytest

from memlife.base import derived


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMLIFE_DERIVED_DIR", str(tmp_path / "derived"))
    return tmp_path / "derived"


def test_the_same_key_loads_instead_of_deriving_and_another_key_derives_and_replaces_it(store):
    calls = []

    def derive(v):
        return lambda: calls.append(v) or {"value": v}

    assert derived.cached("pool", ["a", 1], derive("first")) == {"value": "first"}
    assert derived.cached("pool", ["a", 1], derive("second")) == {"value": "first"}
    assert calls == ["first"]
    assert derived.cached("pool", ["a", 2], derive("third")) == {"value": "third"}
    assert [p.name for p in store.iterdir()] == [derived.path_for("pool", ["a", 2]).name]  # the old key's file went


def test_a_torn_file_is_derived_again(store):
    path = derived.path_for("pool", ["k"])
    path.parent.mkdir(parents=True)
    path.write_bytes(b"\x80\x05not a whole pickle")
    assert derived.cached("pool", ["k"], lambda: (1, 2)) == (1, 2)
    assert derived.cached("pool", ["k"], lambda: (3, 4)) == (1, 2)


def test_a_directory_that_cannot_be_written_leaves_the_result_uncached(tmp_path, monkeypatch):
    blocked = tmp_path / "file"
    blocked.write_text("")
    monkeypatch.setenv("MEMLIFE_DERIVED_DIR", str(blocked / "derived"))  # below a file: mkdir fails
    assert derived.cached("pool", ["k"], lambda: "fresh") == "fresh"


def test_a_changed_data_file_or_source_changes_the_key(tmp_path):
    data = tmp_path / "split.json"
    data.write_text("[1]")
    before = derived.path_for("pool", [derived.file_stamp(data)])
    data.write_text("[1, 2]")
    rewritten = derived.path_for("pool", [derived.file_stamp(data)])
    assert rewritten != before
    src = tmp_path / "code.py"
    src.write_text("x = 1\n")
    digest = derived.source_digest(src)
    src.write_text("x = 2\n")
    assert derived.source_digest(src) != digest
    os.utime(data, ns=(0, 0))  # the same size, another time: a new key too
    assert derived.path_for("pool", [derived.file_stamp(data)]) != rewritten
