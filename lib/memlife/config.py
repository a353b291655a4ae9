"""Profiles: configs/<profile>.yaml holds the papermill parameters of every notebook."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from . import paths


def profile_file(profile: str, root: Path | None = None) -> Path:
    paths.layout(profile, root)  # validates the name
    return (Path(root) if root else paths.repo_root()) / "configs" / f"{profile}.yaml"


def load_profile(profile: str, root: Path | None = None) -> dict[str, Any]:
    path = profile_file(profile, root)
    with open(path) as fh:
        cfg = yaml.safe_load(fh) or {}
    for key in ("common", "notebooks"):
        if not isinstance(cfg.get(key), dict):
            raise ValueError(f"{path}: top-level field {key!r} must be a mapping")
    return cfg


def notebook_params(profile: str, notebook: str, root: Path | None = None) -> dict[str, Any]:
    """The parameters papermill injects into `notebook` (a stem such as '20_longmem_data'). The
    `profile` parameter is the file's name: a copy of quick.yaml saved as myexp.yaml is myexp."""
    cfg = load_profile(profile, root)
    if notebook not in cfg["notebooks"]:
        raise KeyError(f"{profile_file(profile, root)}: no section notebooks.{notebook}")
    params = {**cfg["common"], **(cfg["notebooks"][notebook] or {})}
    if params.get("profile", profile) != profile:
        raise ValueError(f"{profile_file(profile, root)}: field 'profile' is {params['profile']!r}, but a profile is "
                         f"named by its file: remove the field (or make it {profile!r})")
    return {**params, "profile": profile}


# The notebooks' numbers say their track: 1x MemOps, 2x the restore audit (00 is neither).
TRACKS = {"1": "memops", "2": "restore"}


def track_of(notebook: str | None) -> str | None:
    """'memops' for '12_memops_eval', 'restore' for '22_read_restore', None for anything else."""
    if not notebook or len(notebook) < 3 or not notebook[:2].isdigit() or notebook[2] != "_":
        return None
    return TRACKS.get(notebook[0])
