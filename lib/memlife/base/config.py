"""Profiles: configs/<profile>.yaml holds the papermill parameters of every notebook.

A profile may extend another (`extends: quick`) and hold only what differs: sections merge
into the parent's key by key, and any other value (a list included) replaces the parent's.
Chains are followed; a cycle is refused. Every reader of a profile (the runner, the estimate,
`endpoints.configure`, the Makefile through `python -m memlife.base.config get`) sees the resolved one:

    python -m memlife.base.config show myexp                     # the profile after inheritance
    python -m memlife.base.config get myexp recorded_replies     # one value ('' for null)
    python -m memlife.base.config get myexp notebooks.21_eviction.seeds
"""
from __future__ import annotations

import argparse
import ast
import difflib
import json
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from memlife.base import paths

# What a profile may hold at its top level; anything else is a typo that would be dropped
# silently (a misspelled spend_cap_usd is a run without a cap).
PROFILE_FIELDS = ("extends", "common", "notebooks", "models", "tracks", "spend_cap_usd", "recorded_replies")

# The roles a profile's models: section may name, and the fields each may set: those of
# memlife.models.endpoints.Endpoint less the role (the section's name) and the key's variable (the
# key comes from the environment only). Written here, below model access, so that checking a
# profile needs no model client; a test holds ENDPOINT_FIELDS to Endpoint's fields.
ROLES = ("reader", "judge", "generator", "scorer", "verifier", "judge_audit")
ENDPOINT_FIELDS = ("model", "base_url", "structured_output", "timeout_s", "max_retries", "concurrency",
                   "context_window", "token_param", "send_temperature", "send_seed", "reasoning_tokens",
                   "extra_body", "price_per_mtok", "cached_price_per_mtok", "batch_price_factor",
                   "prompt_cache_key", "requests_per_minute", "tokens_per_minute")

# Parameters with one home: the notebook on the left reads the value the home notebook's section
# (or common) gives, and its own section may not set it. 21_eviction's budgets are fractions of the
# histories 20_longmem_data builds, and 20-22 must read one data set (restore.pipeline.params), so
# two copies of these values could only ever disagree.
LINKED = {
    "21_eviction": {"history_tokens": "20_longmem_data", "source": "20_longmem_data"},
    "22_read_restore": {"source": "20_longmem_data"},
}


def profile_file(profile: str, root: Path | None = None) -> Path:
    paths.layout(profile, root)  # validates the name
    return (Path(root) if root else paths.repo_root()) / "configs" / f"{profile}.yaml"


def _read(path: Path) -> dict[str, Any]:
    with open(path) as fh:
        cfg = yaml.safe_load(fh) or {}
    if not isinstance(cfg, dict):
        raise ValueError(f"{path}: a profile is a mapping of fields, not a {type(cfg).__name__}")
    return cfg


def merge(base: Any, over: Any) -> Any:
    """`over` on top of `base`: mappings merge key by key (recursively), anything else replaces —
    a list replaces a list. An empty entry (`21_eviction:` with nothing under it) changes nothing."""
    if isinstance(base, dict) and over is None:
        return base
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for key, value in over.items():
            out[key] = merge(base.get(key), value) if key in base else value
        return out
    return over


def chain(profile: str, root: Path | None = None) -> list[tuple[Path, dict[str, Any]]]:
    """The files `profile` is made of, each with its own fields, the profile's own first and the
    profile it finally extends last."""
    out: list[tuple[Path, dict[str, Any]]] = []
    names: list[str] = []
    name, path = profile, profile_file(profile, root)
    while True:
        names.append(name)
        raw = _read(path)
        out.append((path, raw))
        parent = raw.get("extends")
        if parent is None:
            return out
        if not isinstance(parent, str):
            raise ValueError(f"{path}: extends names one profile (a file in configs/), not {parent!r}")
        if parent in names:
            raise ValueError(f"{path}: extends {parent!r}, a cycle: {' -> '.join(names + [parent])}")
        try:
            next_path = profile_file(parent, root)
        except ValueError as exc:
            here = paths.profiles(root)
            raise ValueError(f"{path}: extends {parent!r}: {exc}"
                             + (did_you_mean(parent, here) if parent not in here else "")) from None
        name, path = parent, next_path


def load_profile(profile: str, root: Path | None = None) -> dict[str, Any]:
    """The profile after inheritance (without `extends`); refused, naming the file and the key, when
    any file of its chain holds a key nothing reads."""
    root_path = Path(root) if root else paths.repo_root()
    layers = chain(profile, root)
    cfg: dict[str, Any] = {}
    for path, raw in reversed(layers):  # from the profile extended first to this one
        problems = profile_problems(raw, root_path, inherited=cfg if "extends" in raw else None)
        if problems:
            raise ValueError(f"{path}: " + "; ".join(problems))
        cfg = merge(cfg, {k: v for k, v in raw.items() if k != "extends"})
    for key in ("common", "notebooks"):
        if not isinstance(cfg.get(key), dict):
            raise ValueError(f"{layers[0][0]}: top-level field {key!r} must be a mapping")
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
    if models is None:
        return []
    if not isinstance(models, dict):
        return [f"{where} must be a mapping of roles"]
    out = []
    for role, fields in models.items():
        if role not in ROLES:
            out.append(f"{where}.{role} is not a role{did_you_mean(role, ROLES)}")
        elif fields is not None and not isinstance(fields, dict):
            out.append(f"{where}.{role} must be a mapping of endpoint fields")
        else:
            out += [f"{where}.{role}.{f} is not an endpoint field{did_you_mean(f, ENDPOINT_FIELDS)}"
                    for f in (fields or {}) if f not in ENDPOINT_FIELDS]
    return out


def profile_problems(cfg: dict, root: Path, inherited: dict | None = None) -> list[str]:
    """Every key of a profile file that nothing reads: unknown top-level fields, roles and endpoint
    fields under models: and tracks:, notebook sections without a notebook, notebook parameters
    (common's included) that the notebook's parameters cell does not declare — papermill would only
    log "Passed unknown parameter" and run the default — and a linked parameter set outside its
    home (LINKED). `inherited`: the profile this file extends, resolved; a section of the file must
    then name a notebook here or a section of that profile (a misspelled one would change nothing)."""
    out = [f"{k} is not a profile field{did_you_mean(k, PROFILE_FIELDS)}" for k in cfg if k not in PROFILE_FIELDS]
    for key in ("common", "notebooks"):
        if key in cfg and cfg[key] is not None and not isinstance(cfg[key], dict):
            out.append(f"top-level field {key!r} must be a mapping")
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
    sections = cfg.get("notebooks") if isinstance(cfg.get("notebooks"), dict) else {}
    common = cfg.get("common") if isinstance(cfg.get("common"), dict) else {}
    notebooks = {p.stem: p for p in (root / "notebooks").glob("[0-9][0-9]_*.ipynb")}
    if not notebooks:  # a folder of profiles alone (no notebooks to check them against)
        return out
    known = set(notebooks) | set((inherited or {}).get("notebooks") or {})
    for name, section in sections.items():
        if name not in notebooks:
            # In a profile of its own, a section without a notebook is named when a notebook asks
            # for its section (notebook_params): a copy of the project may hold fewer notebooks.
            if inherited is not None and name not in known:
                out.append(f"notebooks.{name} is not a notebook in {root / 'notebooks'}{did_you_mean(name, known)}")
            continue
        if section is not None and not isinstance(section, dict):
            out.append(f"notebooks.{name} must be a mapping of parameters")
            continue
        declared = parameter_names(notebooks[name])
        for k in section or {}:
            if k not in declared and k != "profile":
                out.append(f"notebooks.{name}.{k} is not a parameter of notebooks/{name}.ipynb"
                           + did_you_mean(k, declared))
            elif k in LINKED.get(name, {}):
                home = LINKED[name][k]
                out.append(f"notebooks.{name}.{k} has one home, notebooks.{home}.{k}: {name} reads {home}'s "
                           f"value; set it there (or in common)")
    # common is merged into every section, and means "to each notebook that takes it": a key no
    # notebook declares is a typo.
    anywhere = frozenset().union(*(parameter_names(p) for p in notebooks.values()))
    out += [f"common.{k} is not a parameter of any notebook in {root / 'notebooks'}{did_you_mean(k, anywhere)}"
            for k in common if k not in anywhere and k != "profile"]
    return out


def _section_params(cfg: dict, profile: str, notebook: str, root: Path | None) -> dict[str, Any]:
    if notebook not in cfg["notebooks"]:
        raise KeyError(f"{profile_file(profile, root)}: no section notebooks.{notebook}"
                       + (did_you_mean(notebook, cfg["notebooks"]) if cfg["notebooks"] else ""))
    params = {**cfg["common"], **(cfg["notebooks"][notebook] or {})}
    for name, home in LINKED.get(notebook, {}).items():
        if home in cfg["notebooks"]:
            home_params = _section_params(cfg, profile, home, root)
            if name in home_params:
                params[name] = home_params[name]
    return params


def notebook_params(profile: str, notebook: str, root: Path | None = None) -> dict[str, Any]:
    """The parameters papermill injects into `notebook` (a stem such as '20_longmem_data'): common,
    then its section, then the linked parameters from their home (LINKED). The `profile`
    parameter is the file's name: a copy of quick.yaml saved as myexp.yaml is myexp."""
    cfg = load_profile(profile, root)
    params = _section_params(cfg, profile, notebook, root)
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


# The roles whose model each notebook's numbers rest on (ROLES); a notebook not listed calls no
# model. 00_backend calls the reader and reports every role's endpoint; 10 generates with the
# generator and checks with the verifier when they are configured (memops.build); 12 reads with the
# reader (Mem0's and MemOS's own calls go through it: memlife.models.proxy) and judges with the judge;
# 21 scores with the scorer; 22 reads, judges, and audits a sample with judge_audit.
# The runner's fingerprints (what makes make rerun a notebook) and the estimate read this table.
NOTEBOOK_ROLES = {
    "00_backend": ("reader", "judge", "generator", "scorer", "verifier", "judge_audit"),
    "10_memops_build": ("generator", "verifier"),
    "12_memops_eval": ("reader", "judge"),
    "21_eviction": ("scorer",),
    "22_read_restore": ("reader", "judge", "judge_audit"),
}

# What each notebook reads from another's outputs: the Makefile's DAG section, which
# tests/test_fingerprints.py holds equal to this.
UPSTREAM = {
    "11_memops_stats": ("10_memops_build",),
    "12_memops_eval": ("10_memops_build",),
    "13_memops_tables": ("12_memops_eval",),
    "21_eviction": ("20_longmem_data",),
    "22_read_restore": ("21_eviction",),
    "23_decomposition": ("22_read_restore",),
    "24_robustness": ("22_read_restore",),
}


def roles_called(notebook: str) -> tuple[str, ...]:
    return NOTEBOOK_ROLES.get(notebook, ())


def upstream(notebook: str) -> list[str]:
    """Every notebook whose outputs `notebook` reads, directly or through another, nearest first."""
    out: list[str] = []
    todo = list(UPSTREAM.get(notebook, ()))
    while todo:
        nb = todo.pop(0)
        if nb not in out:
            out.append(nb)
            todo += UPSTREAM.get(nb, ())
    return out


def _get(cfg: dict, dotted: str):
    value: Any = cfg
    for i, part in enumerate(dotted.split(".")):
        if not isinstance(value, dict) or part not in value:
            where = ".".join(dotted.split(".")[:i]) or "the profile"
            raise KeyError(f"{dotted}: {where} has no {part!r}"
                           + (did_you_mean(part, value) if isinstance(value, dict) and value else ""))
        value = value[part]
    return value


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m memlife.base.config", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    get = sub.add_parser("get", help="one value of the resolved profile: '' for null, JSON for a list or mapping")
    get.add_argument("profile")
    get.add_argument("key", help="a field, or a dotted path such as notebooks.21_eviction.seeds")
    show = sub.add_parser("show", help="the resolved profile, as YAML")
    show.add_argument("profile")
    args = ap.parse_args(argv)
    try:
        cfg = load_profile(args.profile)
        if args.command == "show":
            print(yaml.safe_dump(cfg, sort_keys=False), end="")
            return 0
        value = _get(cfg, args.key)
    except (ValueError, KeyError) as exc:
        print(f"memlife.base.config: {exc.args[0] if isinstance(exc, KeyError) else exc}", file=sys.stderr)
        return 2
    print("" if value is None else json.dumps(value) if isinstance(value, (dict, list)) else value)
    return 0


if __name__ == "__main__":
    sys.exit(main())
