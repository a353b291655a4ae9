"""The registry of MemOps systems: the paper's six and any of one's own, by name.

Each system is a `SystemSpec` that declares whether it needs a model besides the reader and
whether it may answer histories in parallel. A system of one's own is a class in one's own
module, named "module:Class" in notebook 12's `systems` (`resolve_systems`; docs/extending.md);
`make_system` builds any of them for a run.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from memlife.memops.systems import baselines, managed, reading, temp_lora

# ----------------------------------------------------------------------------- registry


@dataclass(frozen=True)
class SystemContext:
    """What building a memory system may use: the reader, a folder of its own for stores, and the
    evaluation's settings (notebook 12's parameters)."""

    reader: reading.Reader
    store_root: Path
    seed: int = 0
    top_k_turns: int | None = None
    top_k_sessions: int | None = None
    retrieval_tokens: int | None = baselines.RETRIEVAL_TOKENS
    top_k_memories: int = 10
    temp_lora: "temp_lora.TempLoRAConfig | None" = None
    mem0_infer: bool | None = None
    extract_max_tokens: int = 384


@dataclass(frozen=True)
class SystemSpec:
    """A memory system and what it needs. ``build(ctx)`` returns a :class:`MemorySystem` from a
    :class:`SystemContext`; records carry ``name``.

    ``model_free``: it calls no model besides the reader, so a reference subject can read through
    it (notebook 14, ``subject``). ``parallel``: its state is kept per history, so an endpoint
    taking parallel calls may answer several instances at once. ``version``: part of its answers'
    run key, so that answers journalled by an earlier version of a system of one's own are not
    reused (set from its module's source when empty; the paper's systems have none, and their keys
    are what they always were)."""

    name: str
    build: "Callable[[SystemContext], baselines.MemorySystem]"
    model_free: bool = False
    parallel: bool = False
    version: str = ""
    builtin: bool = False

    def __post_init__(self):
        if not self.name or ":" in self.name or "/" in self.name:
            raise ValueError(f"system name {self.name!r}: records and journal files carry it, so it is a plain name")


_PAPER_SYSTEMS = (
    SystemSpec("long_context", lambda c: baselines.LongContextSystem(c.reader), model_free=True, parallel=True, builtin=True),
    SystemSpec("bm25_turn", lambda c: baselines.BM25System(c.reader, "turn", c.top_k_turns, c.retrieval_tokens),
               model_free=True, parallel=True, builtin=True),
    SystemSpec("bm25_session", lambda c: baselines.BM25System(c.reader, "session", c.top_k_sessions, c.retrieval_tokens),
               model_free=True, parallel=True, builtin=True),
    # model-free only with infer=False (raw messages, no LLM extraction): answering.run refuses mem0_infer then
    SystemSpec("mem0", lambda c: managed.Mem0System(c.reader, c.store_root, c.top_k_memories, infer=c.mem0_infer,
                                            extract_max_tokens=c.extract_max_tokens), model_free=True, builtin=True),
    SystemSpec("memos", lambda c: managed.MemOSSystem(c.reader, c.store_root, c.top_k_memories,
                                              extract_max_tokens=c.extract_max_tokens), builtin=True),
    SystemSpec("temp_lora", lambda c: temp_lora.TempLoRASystem(c.store_root, c.temp_lora, seed=c.seed,
                                                     grammar_bounds=c.reader.grammar_bounds), builtin=True),
)
assert tuple(s.name for s in _PAPER_SYSTEMS) == baselines.SYSTEMS
_REGISTRY: dict[str, SystemSpec] = {s.name: s for s in _PAPER_SYSTEMS}


def register_system(spec: SystemSpec) -> SystemSpec:
    """Make ``spec`` known by its name. The paper's names cannot be taken; a name registered again
    replaces the earlier spec (a module reloaded while its system is being written)."""
    from memlife.base import plugins

    return plugins.register(_REGISTRY, spec, "system")


def registered_systems() -> dict[str, SystemSpec]:
    """Every memory system known in this process, by name: the paper's first, then those registered."""
    return dict(_REGISTRY)


def system_spec(name: "str | SystemSpec") -> SystemSpec:
    if isinstance(name, SystemSpec):
        return name
    try:
        return _REGISTRY[name]
    except KeyError:
        from memlife.base import plugins

        raise plugins.unknown("system", name, "make_system", _REGISTRY) from None


def _source_version(obj) -> str:
    """A digest of the source file that defines `obj` ("" when there is none to read)."""
    import inspect

    try:
        path = inspect.getsourcefile(obj)
    except TypeError:
        return ""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:12] if path and Path(path).is_file() else ""


def _from_class(obj, ref: str) -> SystemSpec:
    return SystemSpec(str(getattr(obj, "name", "") or ref.rpartition(":")[2]), obj,
                      model_free=bool(getattr(obj, "model_free", False)),
                      parallel=bool(getattr(obj, "parallel", False)))


def _versioned(spec: SystemSpec) -> SystemSpec:
    from dataclasses import replace

    return spec if spec.builtin or spec.version else replace(spec, version=_source_version(spec.build))


def resolve_systems(names, where: str = "systems") -> list[SystemSpec]:
    """The specs a profile's list names: registered names, or "module:attr" references to a
    :class:`SystemSpec` or to a class (or function) called with a :class:`SystemContext`, whose
    ``name``, ``model_free`` and ``parallel`` attributes, where it has them, fill the spec (the
    name defaults to the attribute's). Registered on the way, versioned by their module's source;
    ``where`` (the profile key) is named in every error, which comes before any work is done."""
    from memlife.base import plugins

    return plugins.resolve(names, where, "system", _REGISTRY, SystemSpec, _from_class, _versioned)


def make_system(name: "str | SystemSpec", *, reader: reading.Reader, store_root: Path, top_k_turns: int | None = None,
                top_k_sessions: int | None = None, retrieval_tokens: int | None = baselines.RETRIEVAL_TOKENS,
                top_k_memories: int = 10, seed: int = 0,
                temp_lora: temp_lora.TempLoRAConfig | None = None, mem0_infer: bool | None = None,
                extract_max_tokens: int = 384) -> baselines.MemorySystem:
    """The registered system `name`, built. `retrieval_tokens`: the token budget both BM25
    granularities share; `top_k_turns` / `top_k_sessions`: a cap on their units besides it (None:
    none; with `retrieval_tokens=None` the cap alone, the classic top-k)."""
    spec = system_spec(name)
    return spec.build(SystemContext(reader=reader, store_root=Path(store_root), seed=seed, top_k_turns=top_k_turns,
                                    top_k_sessions=top_k_sessions, retrieval_tokens=retrieval_tokens,
                                    top_k_memories=top_k_memories, temp_lora=temp_lora, mem0_infer=mem0_infer,
                                    extract_max_tokens=extract_max_tokens))
