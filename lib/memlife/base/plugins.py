"""Names in a profile that point outside the library: "module:attr".

A profile lists memory systems (notebook 12's ``systems``) and eviction policies (notebook 21's
``policies``) by name. A built-in name is looked up in its registry
(:func:`memlife.memops.systems.registry.registered_systems`, :func:`memlife.restore.eviction.evict.registered_policies`);
a name with a colon, ``mymodule:MyMemory``, is imported: ``mymodule`` from the project root or
anywhere on PYTHONPATH, then its attribute ``MyMemory``. Every failure names the profile key it
came from and, where one is near, the name that was probably meant (:func:`config.did_you_mean`),
so a typo stops the run before any work rather than after an hour of it.

What such a name points at is code outside the library, which make's dependency on lib/ does not
see: :data:`PARAMETERS` says which profile parameters take these names and which notebooks' numbers
rest on them, and :func:`source_digest` hashes the module's file without running it, for the
runner's fingerprints (editing the file reruns exactly those notebooks and the ones after them).
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Iterable

from memlife.base import config, paths


def is_reference(name: str) -> bool:
    """Whether `name` is a "module:attr" reference rather than a registered name."""
    return ":" in str(name)


def _import(module: str, where: str):
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name != module and not module.startswith(f"{e.name}."):
            raise  # the module exists but one of its own imports is missing: that error is the news
    for folder in _project_folders():
        if folder in sys.path:
            continue
        sys.path.append(folder)
        try:
            return importlib.import_module(module)
        except ModuleNotFoundError as e:
            if e.name != module and not module.startswith(f"{e.name}."):
                raise
    raise ValueError(f"{where}: cannot import module {module!r}: a module named in a profile must be importable "
                     f"from the project root ({paths.repo_root()}) or a folder on PYTHONPATH") from None


def _project_folders() -> list[str]:
    # A notebook's kernel starts in the project root, a test or a script maybe not: the project
    # root is where a researcher's module most likely sits, so it is tried before giving up. An
    # estimate or a rehearsal runs the notebooks in a scratch copy whose configs/ links to the
    # project's: the project root is then the folder that holds the real configs/.
    root = paths.repo_root()
    return list(dict.fromkeys([str(root), str((root / "configs").resolve().parent)]))


def load(ref: str, where: str):
    """The object `ref` ("module:attr", attr may be dotted) names; `where` is the profile key it
    came from, for the error."""
    module, _, attr = str(ref).partition(":")
    if not module or not attr:
        raise ValueError(f"{where}: {ref!r} is not 'module:attr'")
    obj = _import(module, where)
    for i, part in enumerate(attr.split(".")):
        if not hasattr(obj, part):
            have = [n for n in dir(obj) if not n.startswith("_")]
            owner = ".".join([module, *attr.split(".")[:i]])
            raise ValueError(f"{where}: {owner} has no attribute {part!r}{config.did_you_mean(part, have)}")
        obj = getattr(obj, part)
    return obj


def unknown(kind: str, name: str, where: str, known: Iterable[str]) -> ValueError:
    """The error for a plain name that no registry holds."""
    return ValueError(f"{where}: unknown {kind} {name!r}{config.did_you_mean(name, known)}; a {kind} of your own "
                      f"is named 'module:attr', the module importable from the project root or PYTHONPATH")


def register(registry: dict, spec, kind: str):
    """Put `spec` in `registry` under its name. The paper's names (specs marked `builtin`) cannot be
    taken; a name registered again is replaced (a module reloaded while it is being written)."""
    old = registry.get(spec.name)
    if old is not None and old.builtin and old != spec:
        raise ValueError(f"{kind} name {spec.name!r} is the paper's; give yours another name")
    registry[spec.name] = spec
    return spec


def resolve(names, where: str, kind: str, registry: dict, spec_type: type, from_callable, finish=None) -> list:
    """The specs a profile's list names: registered names, specs, or "module:attr" references to a
    `spec_type` or to a callable (`from_callable(obj, ref)` makes its spec; `finish(spec)` may complete
    one of either), registered on the way. Every error names `where` and comes before any work."""
    if isinstance(names, str):
        raise ValueError(f"{where}: a list of {kind} names, not the string {names!r}")
    out = []
    for ref in names:
        if isinstance(ref, spec_type):
            spec = ref
        elif is_reference(ref):
            obj = load(ref, where)
            if isinstance(obj, spec_type):
                spec = obj
            elif callable(obj):
                spec = from_callable(obj, ref)
            else:
                raise ValueError(f"{where}: {ref!r} is a {type(obj).__name__}, not a {spec_type.__name__} "
                                 f"or something to call")
            spec = finish(spec) if finish else spec
            try:
                register(registry, spec, kind)
            except ValueError as e:
                raise ValueError(f"{where}: {ref!r}: {e}") from None
        elif ref in registry:
            spec = registry[ref]
        else:
            raise unknown(kind, ref, where, registry)
        if spec.name in {s.name for s in out}:
            raise ValueError(f"{where}: {kind} {spec.name!r} is listed twice")
        out.append(spec)
    return out


# ----------------------------------------------------------------------------- fingerprints

# The profile parameters that take "module:attr" names: what they name, and the notebooks whose
# numbers rest on the named code (23 resolves 21's policies for their roles, which set R2's family
# of tests). The runner's fingerprints read this; tests/test_fingerprints.py holds it to every
# resolve_systems / resolve_policies call that names a profile key.
PARAMETERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "12_memops_eval.systems": ("system", ("12_memops_eval",)),
    "21_eviction.policies": ("policy", ("21_eviction", "23_decomposition")),
    "25_restore_controls.policies": ("policy", ("25_restore_controls",)),
}


def _spec(module: str):
    try:
        return importlib.util.find_spec(module)
    except ModuleNotFoundError as e:
        if e.name != module and not module.startswith(f"{e.name}."):
            raise  # a package above it is there but fails to import: that error is the news
        return None


def locate(module: str, where: str):
    """The import spec of `module` as :func:`load` would import it (sys.path, then the project
    root), without running it; a dotted name's packages are imported, as Python finds a submodule
    only through them. An error names `where` (the profile key) and the module."""
    spec = _spec(module)
    for folder in _project_folders():
        if spec is not None:
            break
        if folder not in sys.path:
            sys.path.append(folder)
            spec = _spec(module)
    if spec is None:
        raise ValueError(f"{where}: cannot find module {module!r}: a module named in a profile must be importable "
                         f"from the project root ({paths.repo_root()}) or a folder on PYTHONPATH")
    return spec


def source_digest(module: str, where: str, root: Path | None = None) -> dict:
    """{"file", "sha256"} of the source `module` is imported from: its file's SHA-256 (as sha256sum
    prints it), or for a package the digest of every .py file under it. The file is written relative
    to the project root when it lies inside it. memlife's own modules are hashed too: make's
    dependency on lib/ already reruns everything when they change, but one rule for every name a
    profile gives costs a file read and lets the fingerprint say which module changed. Only the
    module's own file(s): a helper module it imports is not followed."""
    spec = locate(module, where)
    origin = Path(spec.origin) if spec.origin and spec.origin not in ("built-in", "frozen") else None
    if spec.submodule_search_locations:
        folders = [Path(p) for p in spec.submodule_search_locations]
        files = [(f"{i}/{f.relative_to(d).as_posix()}", f)
                 for i, d in enumerate(folders) for f in sorted(d.rglob("*.py"))]
        shown = folders[0]
    elif origin is not None and origin.is_file():
        files, shown = [("", origin)], origin
    else:  # built into the interpreter: no file to edit
        return {"file": str(spec.origin), "sha256": None}
    digest = hashlib.sha256()
    for name, f in files:
        if spec.submodule_search_locations:
            digest.update(f"{name}\0".encode())
        digest.update(f.read_bytes())
    base = (Path(root) if root else paths.repo_root()).resolve()
    shown = shown.resolve()
    return {"file": shown.relative_to(base).as_posix() if shown.is_relative_to(base) else str(shown),
            "sha256": digest.hexdigest()}


def sources(names, where: str, root: Path | None = None) -> dict[str, dict]:
    """{module: source_digest} for the "module:attr" names in `names` (a profile's list; registered
    names name no file). A module that cannot be found fails here, naming `where` and the module:
    before any notebook runs, not in one's first cells."""
    out: dict[str, dict] = {}
    for ref in [names] if isinstance(names, str) else (names or []):
        if not isinstance(ref, str) or not is_reference(ref):
            continue
        module, _, attr = ref.partition(":")
        if not module or not attr:
            raise ValueError(f"{where}: {ref!r} is not 'module:attr'")
        if module not in out:
            out[module] = source_digest(module, where, root)
    return out
