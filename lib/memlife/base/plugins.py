"""Names in a profile that point outside the library: "module:attr".

A profile lists memory systems (notebook 12's ``systems``) and eviction policies (notebook 21's
``policies``) by name. A built-in name is looked up in its registry
(:func:`memlife.memops.registry.registered_systems`, :func:`memlife.restore.evict.registered_policies`);
a name with a colon, ``mymodule:MyMemory``, is imported: ``mymodule`` from the project root or
anywhere on PYTHONPATH, then its attribute ``MyMemory``. Every failure names the profile key it
came from and, where one is near, the name that was probably meant (:func:`config.did_you_mean`),
so a typo stops the run before any work rather than after an hour of it.
"""
from __future__ import annotations

import importlib
import sys
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
    # A notebook's kernel starts in the project root, a test or a script maybe not: the project
    # root is where a researcher's module most likely sits, so it is tried before giving up. An
    # estimate or a rehearsal runs the notebooks in a scratch copy whose configs/ links to the
    # project's: the project root is then the folder that holds the real configs/.
    root = paths.repo_root()
    for folder in dict.fromkeys([str(root), str((root / "configs").resolve().parent)]):
        if folder in sys.path:
            continue
        sys.path.append(folder)
        try:
            return importlib.import_module(module)
        except ModuleNotFoundError as e:
            if e.name != module and not module.startswith(f"{e.name}."):
                raise
    raise ValueError(f"{where}: cannot import module {module!r}: a module named in a profile must be importable "
                     f"from the project root ({root}) or a folder on PYTHONPATH") from None


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
