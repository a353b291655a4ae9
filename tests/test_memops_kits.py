"""Topic kits as data: the shipped set, and the checks that keep a bad file from reaching a build."""
from __future__ import annotations

import shutil
from collections import Counter

import pytest
import yaml

from memlife.memops.data import kits as K
from memlife.memops.data.backgrounds import category_counts
from memlife.paper_reference import MEMOPS_CATEGORY_COUNTS


def test_the_shipped_kits_are_one_hundred_topics_in_the_papers_proportions():
    kits = K.load_kits()
    assert len(kits) == 100
    assert len({k.subtopic for k in kits}) == 100
    assert dict(Counter(k.category for k in kits)) == MEMOPS_CATEGORY_COUNTS == category_counts(100)


def test_the_command_line_check_passes_on_the_shipped_kits(capsys):
    assert K.main([]) == 0
    assert "100 kit(s) valid of 100" in capsys.readouterr().out


def _copy(tmp_path, *keys):
    for key in keys:
        shutil.copy(K.TOPICS_DIR / f"{key}.yaml", tmp_path / f"{key}.yaml")


def _edit(path, change):
    data = yaml.safe_load(path.read_text())
    change(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def test_a_bad_field_is_named_with_its_file(tmp_path):
    _copy(tmp_path, "trip")
    _edit(tmp_path / "trip.yaml", lambda d: d["main"].update(values=d["main"]["values"][:3]))
    with pytest.raises(K.KitError, match=r"trip\.yaml: .*main\.values: at least 6 needed, got 3"):
        K.load_kits(str(tmp_path))


@pytest.mark.parametrize("change, message", [
    (lambda d: d["main"].update(np="the thing we booked"), "names the target by neither"),
    (lambda d: d["reflect"][0].update(clues=[d["reflect"][0]["key"] + " matters to me.", *d["reflect"][0]["clues"][1:]]),
     "clue states the key"),
    (lambda d: d["temp"].update(values=[d["main"]["values"][0], *d["temp"]["values"][1:]]), "share"),
    (lambda d: d.update(openers=["Hi {name}", *d["openers"][1:]]), "braces"),
    (lambda d: d["main"].update(values=["the caf\u00e9 on Mill Lane", *d["main"]["values"][1:]]), "printable ASCII"),
    (lambda d: d.update(openers=['I said "hello"', *d["openers"][1:]]), "without quotes"),
    (lambda d: d.update(owners=["sister", *d["owners"][1:]]), "starting 'my '"),
    (lambda d: d.update(key="other"), "differs from the file name"),
    (lambda d: d["reflect"][0].update(conclusion="The user likes their free time.", key="their free time"),
     "third person"),
    (lambda d: d["main"].update(values=["the hall at St Aldric's", *d["main"]["values"][1:]]), "possessive"),
])
def test_each_rule_refuses_its_mistake(tmp_path, change, message):
    _copy(tmp_path, "trip")
    _edit(tmp_path / "trip.yaml", change)
    with pytest.raises(K.KitError, match=message):
        K.load_kit(tmp_path / "trip.yaml")


def test_a_value_shared_by_two_topics_names_both_files(tmp_path):
    _copy(tmp_path, "trip", "dinner")
    shared = yaml.safe_load((tmp_path / "trip.yaml").read_text())["control"]["values"][0]
    _edit(tmp_path / "dinner.yaml", lambda d: d["control"].update(values=[shared, *d["control"]["values"][1:]]))
    with pytest.raises(K.KitError, match=r"trip\.yaml: control\.values .* is also in .*dinner\.yaml"):
        K.load_kits(str(tmp_path))


def test_an_empty_folder_is_refused(tmp_path):
    with pytest.raises(K.KitError, match="no topic kits"):
        K.load_kits(str(tmp_path))
