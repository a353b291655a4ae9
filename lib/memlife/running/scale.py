"""A profile at a fraction of its items, and a project root that runs it (a pilot, a dress rehearsal).

`scale_profile` keeps every per-item size as it is — history lengths, budgets, k, the restore cap,
seeds, models, token budgets — and scales only how many items the notebooks work through: MemOps
conversations (notebook 10) and the instances notebook 12 evaluates, the restore questions
(notebook 20, which 21 and 22 read) and the judge audit's sample (22). The restore questions are a
sample stratified by type, as any profile's smaller selection is (`memlife.reconstruct.select`).
`write_root` writes a project root whose configs/<profile>.yaml is such a profile, with every other
input linked to the project's own; `items` says how big a profile is, in the items scaled.
"""
from __future__ import annotations

import copy
import math
import shutil
from pathlib import Path

from memlife.base import config, paths

# The model-free controls (14, 25) check coverage over at least `min_clusters` clusters, which a
# small fraction does not have: a scaled run leaves them out (they make no model call).
CONTROLS = ("14_memops_controls", "25_restore_controls")
PAPER_TOPIC_OPERATIONS = 5  # conversations planned per topic (one per operation type)
# What a project root shares with the project: the notebooks and every input they read.
INPUTS = ("notebooks", "results/replies", "results/paper_reference", "data/raw", "tests/data", ".venv-memos")


def scale_profile(cfg: dict, fraction: float, *, without: tuple[str, ...] = ()) -> tuple[dict, list[str]]:
    """The profile `cfg` (resolved: config.load_profile) at `fraction` of its items, and a line per
    change saying what changed; `without`: MemOps systems left out of notebook 12."""
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    out, changes = copy.deepcopy(cfg), []
    nbs = out["notebooks"]

    def at(n: int) -> int:
        return max(1, math.ceil(n * fraction))

    def set_(nb: str, key: str, value) -> None:
        if nbs.get(nb, {}).get(key) != value:
            changes.append(f"{nb}.{key}: {nbs[nb].get(key)!r} -> {value!r}")
            nbs[nb][key] = value

    build = nbs.get("10_memops_build")
    if build is not None:
        planned = PAPER_TOPIC_OPERATIONS * build["n_topics"]
        # at least one conversation per operation type: notebook 11 checks that all five are there
        conversations = max(PAPER_TOPIC_OPERATIONS, at(min(planned, build.get("max_conversations") or planned)))
        if fraction < 1:
            set_("10_memops_build", "max_conversations", conversations)
        evaluation = nbs.get("12_memops_eval")
        if evaluation is not None and evaluation.get("max_instances") is None and fraction < 1:
            set_("12_memops_eval", "max_instances", conversations)
    if without and "12_memops_eval" in nbs:
        set_("12_memops_eval", "systems", [x for x in nbs["12_memops_eval"]["systems"] if x not in without])
    if "20_longmem_data" in nbs and fraction < 1:
        set_("20_longmem_data", "n_questions", at(nbs["20_longmem_data"]["n_questions"]))
        if "22_read_restore" in nbs:
            set_("22_read_restore", "judge_audit_items", at(nbs["22_read_restore"]["judge_audit_items"]))
    return out, changes


def items(cfg: dict, notebooks: list[str] | None = None) -> list[str]:
    """How big the profile `cfg` is, in the items `scale_profile` scales, for `notebooks` (default:
    all): a line per notebook, or per notebooks that share their items."""
    def n_of(n: int, what: str) -> str:
        return f"{n:,} {what}{'' if n == 1 else 's'}"

    nbs, out = cfg.get("notebooks") or {}, []
    wanted = set(notebooks or nbs)
    build = nbs.get("10_memops_build")
    if build is not None and wanted & {"10_memops_build", "12_memops_eval"}:
        planned = PAPER_TOPIC_OPERATIONS * build["n_topics"]
        conversations = min(planned, build.get("max_conversations") or planned)
        out.append(f"10_memops_build: {n_of(conversations, 'conversation')}")
        ev = nbs.get("12_memops_eval")
        if ev is not None and "12_memops_eval" in wanted:
            n = min(conversations, ev.get("max_instances") or conversations)
            out.append(f"12_memops_eval: {n_of(n, 'instance')} x {n_of(len(ev.get('systems') or []), 'system')} x "
                       f"{n_of(len(ev.get('settings') or []), 'setting')}")
    data = nbs.get("20_longmem_data")
    if data is not None and wanted & {"20_longmem_data", "21_eviction", "22_read_restore"}:
        n = data.get("n_questions")
        out.append(f"20_longmem_data, 21_eviction, 22_read_restore: "
                   f"{'every question' if n is None else n_of(n, 'question')} of ~{data.get('history_tokens', 0):,} "
                   f"tokens")
    return out


def write_root(dest: Path, profile: str, cfg: dict, *, note: str, root: Path | None = None) -> Path:
    """A fresh project root at `dest` whose configs/<profile>.yaml is `cfg` (with `note` as its
    first comment); the notebooks and every input (INPUTS) linked to `root`'s."""
    import yaml

    root = Path(root) if root else paths.repo_root()
    dest = Path(dest)
    shutil.rmtree(dest, ignore_errors=True)
    (dest / "configs").mkdir(parents=True)
    for rel in INPUTS:
        src = root / rel
        if src.exists():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            (dest / rel).symlink_to(src.resolve(), target_is_directory=src.is_dir())
    (dest / "configs" / f"{profile}.yaml").write_text(f"# {note}\n" + yaml.safe_dump(cfg, sort_keys=False))
    return dest


def scaled_root(profile: str, fraction: float, dest: Path, *, root: Path | None = None,
                without: tuple[str, ...] = (), purpose: str = "a scaled run") -> tuple[Path, list[str]]:
    """A project root at `dest` whose configs/<profile>.yaml is `profile` (resolved: a profile that
    extends another is whole there) at `fraction` of its items; and the lines saying what changed."""
    cfg = config.load_profile(profile, root)
    scaled, changes = scale_profile(cfg, fraction, without=without)
    return write_root(dest, profile, scaled, note=f"{profile} at fraction {fraction} for {purpose}", root=root), changes
