"""Profiles: configs/<profile>.yaml holds the papermill parameters of every notebook."""
from __future__ import annotations

import ast
import difflib
import json
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from . import paths

# What a profile may hold at its top level; anything else is a typo that would be dropped
# silently (a misspelled spend_cap_usd is a run without a cap).
PROFILE_FIELDS = ("common", "notebooks", "models", "tracks", "spend_cap_usd", "recorded_replies")


def profile_file(profile: str, root: Path | None = None) -> Path:
    paths.layout(profile, root)  # validates the name
    return (Path(root) if root else paths.repo_root()) / "configs" / f"{profile}.yaml"


def load_profile(profile: str, root: Path | None = None) -> dict[str, Any]:
    path = profile_file(profile, root)
    with open(path) as fh:
        cfg = yaml.safe_load(fh) or {}
    if not isinstance(cfg, dict):
        raise ValueError(f"{path}: a profile is a mapping of fields, not a {type(cfg).__name__}")
    for key in ("common", "notebooks"):
        if not isinstance(cfg.get(key), dict):
            raise ValueError(f"{path}: top-level field {key!r} must be a mapping")
    problems = profile_problems(cfg, Path(root) if root else paths.repo_root())
    if problems:
        raise ValueError(f"{path}: " + "; ".join(problems))
    return cfg


def did_you_mean(name: str, valid) -> str:
    """' (did you mean X?)' for the nearest valid name, else the valid names."""
    valid = sorted(map(str, valid))
    near = difflib.get_close_matches(str(name), valid, n=1, cutoff=0.6)
    return f" (did you mean {near[0]}?)" if near else f" (expected one of: {', '.join(valid) or 'none'})"


@lru_cache(maxsize=64)
def _parameter_names(nb_path: str, mtime_ns: int) -> frozenset[str]:
    nb = json.loads(Path(nb_path).read_text(encoding="utf-8"))
    names: set[str] = set()
    for cell in nb.get("cells", []):
        if "parameters" in (cell.get("metadata", {}).get("tags") or []):
            for node in ast.parse("".join(cell.get("source", ""))).body:
                if isinstance(node, ast.Assign):
                    names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return frozenset(names)


def parameter_names(nb_path: Path) -> frozenset[str]:
    """The names a notebook's cell tagged 'parameters' assigns: all papermill may set in it."""
    return _parameter_names(str(nb_path), nb_path.stat().st_mtime_ns)


def _models_problems(models, where: str) -> list[str]:
    from . import llm

    if models is None:
        return []
    if not isinstance(models, dict):
        return [f"{where} must be a mapping of roles"]
    out = []
    for role, fields in models.items():
        if role not in llm.ROLES:
            out.append(f"{where}.{role} is not a role{did_you_mean(role, llm.ROLES)}")
        elif fields is not None and not isinstance(fields, dict):
            out.append(f"{where}.{role} must be a mapping of endpoint fields")
        else:
            out += [f"{where}.{role}.{f} is not an endpoint field{did_you_mean(f, llm.ENDPOINT_FIELDS)}"
                    for f in (fields or {}) if f not in llm.ENDPOINT_FIELDS]
    return out


def profile_problems(cfg: dict, root: Path) -> list[str]:
    """Every key of a profile that nothing reads: unknown top-level fields, roles and endpoint
    fields under models: and tracks:, notebook sections without a notebook, and notebook
    parameters (common's included) that the notebook's parameters cell does not declare —
    papermill would only log "Passed unknown parameter" and run the default."""
    out = [f"{k} is not a profile field{did_you_mean(k, PROFILE_FIELDS)}" for k in cfg if k not in PROFILE_FIELDS]
    out += _models_problems(cfg.get("models"), "models")
    tracks = cfg.get("tracks") or {}
    if not isinstance(tracks, dict):
        out.append("tracks must be a mapping")
        tracks = {}
    for track, body in tracks.items():
        if track not in TRACKS.values():
            out.append(f"tracks.{track} is not a track{did_you_mean(track, TRACKS.values())}")
        elif not isinstance(body, dict) or set(body) - {"models"}:
            out.append(f"tracks.{track} holds only models:")
        else:
            out += _models_problems(body.get("models"), f"tracks.{track}.models")
    notebooks = {p.stem: p for p in (root / "notebooks").glob("[0-9][0-9]_*.ipynb")}
    if not notebooks:  # a folder of profiles alone (no notebooks to check them against)
        return out
    for name, section in cfg["notebooks"].items():
        if name not in notebooks:  # a misspelled section: its notebook finds no section (notebook_params)
            continue
        if section is not None and not isinstance(section, dict):
            out.append(f"notebooks.{name} must be a mapping of parameters")
            continue
        declared = parameter_names(notebooks[name])
        out += [f"notebooks.{name}.{k} is not a parameter of notebooks/{name}.ipynb{did_you_mean(k, declared)}"
                for k in section or {} if k not in declared and k != "profile"]
    # common is merged into every section, and means "to each notebook that takes it": a key no
    # notebook declares is a typo.
    anywhere = frozenset().union(*(parameter_names(p) for p in notebooks.values()))
    out += [f"common.{k} is not a parameter of any notebook in {root / 'notebooks'}{did_you_mean(k, anywhere)}"
            for k in cfg["common"] if k not in anywhere and k != "profile"]
    return out


def notebook_params(profile: str, notebook: str, root: Path | None = None) -> dict[str, Any]:
    """The parameters papermill injects into `notebook` (a stem such as '20_longmem_data'). The
    `profile` parameter is the file's name: a copy of quick.yaml saved as myexp.yaml is myexp."""
    cfg = load_profile(profile, root)
    if notebook not in cfg["notebooks"]:
        raise KeyError(f"{profile_file(profile, root)}: no section notebooks.{notebook}"
                       + (did_you_mean(notebook, cfg["notebooks"]) if cfg["notebooks"] else ""))
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
