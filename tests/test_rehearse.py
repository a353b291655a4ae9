"""The dress rehearsal's scaled profile: a fraction of the items, every per-item size as it is."""
from pathlib import Path

import pytest

from memlife.base import config
from memlife.running import scale

ROOT = Path(__file__).resolve().parents[1]


def paper() -> dict:
    return config.load_profile("paper", ROOT)


def test_a_fraction_of_the_paper_profile_scales_items_and_keeps_every_per_item_size():
    cfg = paper()
    scaled, changes = scale.scale_profile(cfg, 0.01)
    nbs, before = scaled["notebooks"], cfg["notebooks"]
    assert nbs["10_memops_build"]["max_conversations"] == 5  # ceil(403 / 100)
    assert nbs["12_memops_eval"]["max_instances"] == 5
    assert nbs["20_longmem_data"]["n_questions"] == 5  # ceil(470 / 100)
    assert nbs["22_read_restore"]["judge_audit_items"] == 4  # ceil(396 / 100)
    assert nbs["20_longmem_data"]["source"] == "auto"  # 21 and 22 read 20's (config.LINKED)
    assert not {"source", "history_tokens"} & set(nbs["21_eviction"]) | {"source"} & set(nbs["22_read_restore"])
    for nb, key in [("10_memops_build", "n_topics"), ("10_memops_build", "longctx_tokens"),
                    ("20_longmem_data", "history_tokens"), ("21_eviction", "budgets"), ("21_eviction", "seeds"),
                    ("22_read_restore", "k"), ("22_read_restore", "restore_cap"),
                    ("12_memops_eval", "reader_max_tokens"), ("12_memops_eval", "systems")]:
        assert nbs[nb][key] == before[nb][key], (nb, key)
    assert scaled["models"] == cfg["models"] and scaled["tracks"] == cfg["tracks"]
    assert cfg["notebooks"]["10_memops_build"]["max_conversations"] == 403  # the input is not changed
    assert "10_memops_build.max_conversations: 403 -> 5" in changes
    assert not any("source" in c for c in changes)  # a stratified sample of whichever file is there


def test_the_whole_profile_is_unchanged():
    cfg = paper()
    assert scale.scale_profile(cfg, 1.0) == (cfg, [])


@pytest.mark.parametrize("fraction", [0, -0.5, 1.5])
def test_a_fraction_outside_zero_to_one_is_refused(fraction):
    with pytest.raises(ValueError, match="fraction"):
        scale.scale_profile(paper(), fraction)


def test_a_system_left_out_is_said():
    scaled, changes = scale.scale_profile(paper(), 0.01, without=("temp_lora",))
    assert scaled["notebooks"]["12_memops_eval"]["systems"] == ["long_context", "bm25_turn", "bm25_session", "mem0",
                                                                "memos"]
    assert any(c.startswith("12_memops_eval.systems:") for c in changes)


def test_a_small_fraction_keeps_one_conversation_per_operation_type():
    scaled, _ = scale.scale_profile(paper(), 0.005)
    assert scaled["notebooks"]["10_memops_build"]["max_conversations"] == 5  # not ceil(403 / 200) = 3
    assert scaled["notebooks"]["20_longmem_data"]["n_questions"] == 3


def test_a_scaled_root_holds_the_resolved_profile_at_the_fraction_and_links_every_input(tmp_path):
    root, changes = scale.scaled_root("quick", 0.5, tmp_path / "root", root=ROOT, purpose="a test")
    scaled = config.load_profile("quick", root)
    whole = config.load_profile("quick", ROOT)
    assert scaled == scale.scale_profile(whole, 0.5)[0] and changes == scale.scale_profile(whole, 0.5)[1]
    assert "extends" not in (root / "configs" / "quick.yaml").read_text()
    assert (root / "notebooks").resolve() == (ROOT / "notebooks").resolve()
    assert (root / "configs" / "quick.yaml").read_text().startswith("# quick at fraction 0.5 for a test")
    assert scale.items(whole) != scale.items(scaled)


def test_the_standalone_emulator_stops_and_reports_when_started_with_sigint_ignored():
    """As from a background shell, which leaves SIGINT ignored in the processes it starts: the
    emulator must still stop on SIGTERM and print its counts, or a rehearsal loses them."""
    import json
    import os
    import signal
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "strictserver.py")], stdout=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONPATH": str(ROOT / "lib")},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        assert proc.stdout.readline().startswith("http://127.0.0.1:")
        proc.send_signal(signal.SIGTERM)
        out = proc.communicate(timeout=30)[0]
    finally:
        proc.kill()
    assert json.loads(out.strip().splitlines()[-1]) == {"accepted": 0, "rejected": []}
