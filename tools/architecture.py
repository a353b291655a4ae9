"""The package's places and their imports, read from the code: the layering rule, and the diagram
in docs/architecture.md.

    python tools/architecture.py           # print the import problems (cycles, upward imports) and module sizes
    python tools/architecture.py --write   # regenerate the diagram between the markers in docs/architecture.md

Every import counts, a function's lazy one included: an import inside a function is still a
dependency, and the import that closes a cycle is usually a lazy one.
"""
from __future__ import annotations

import argparse
import ast
import sys
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIB = ROOT / "lib"
DOC = ROOT / "docs" / "architecture.md"
BEGIN, END = "<!-- diagram: made by tools/architecture.py --write -->", "<!-- end of diagram -->"

# The places, lowest first: a module may import its own place and the places below it. The two
# tracks share a layer and may not import each other. A module at the top of the package (not in
# a subpackage) is shared science.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("base",),
    ("models",),
    ("science",),
    ("memops", "restore"),
    ("running",),
)
SUBPACKAGES = {p for layer in LAYERS for p in layer} - {"science"}
PLACE_TEXT = {
    "base": "paths, profiles, progress, parallelism, tables and figures, plug-ins",
    "models": "model access: endpoints, client, cache, recordings, spending, Batch API, server, proxy, tokens",
    "science": "shared science: stats, reference subjects, BM25, the papers' values, LongMemEval files",
    "memops": "MemOps, by stage: data, systems, scoring, analyses",
    "restore": "restore audit, by stage: data, eviction, reading, judging, analyses",
    "running": "runner, estimate, pilot, batch, publish",
}
MAX_LINES = 650  # "about 600": a module past this is split by concern

# Inside each track, its stages in the order a record flows through them: a stage's module may
# import its own stage and the stages before it. A module at the top of a track (its command
# line, the whole run) runs the stages in order and may import every one; no stage imports it.
STAGES: dict[str, tuple[str, ...]] = {
    "memops": ("data", "systems", "scoring", "analyses"),
    "restore": ("data", "eviction", "reading", "judging", "analyses"),
}


def modules() -> dict[str, Path]:
    out = {}
    for p in sorted((LIB / "memlife").rglob("*.py")):
        parts = list(p.relative_to(LIB).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def place(module: str) -> str | None:
    """The place of a module: its subpackage, 'science' for a module at the top of the package,
    None for the package itself."""
    parts = module.split(".")
    if len(parts) == 1:
        return None
    if parts[1] in SUBPACKAGES:
        return parts[1]
    return "science"


def stage(module: str) -> str | None:
    """The stage of a track's module ("memlife.memops.scoring.metrics" -> "scoring"); None for a
    module outside the tracks or at a track's top."""
    parts = module.split(".")
    if len(parts) >= 4 and parts[1] in STAGES and parts[2] in STAGES[parts[1]]:
        return parts[2]
    return None


def _stage_problem(mod: str, dep: str) -> str | None:
    """What is wrong with `mod` importing `dep` within one track, if anything."""
    track = mod.split(".")[1]
    a, b = stage(mod), stage(dep)
    if a is None:  # the track's top: its command line and the whole run import any stage
        return None
    if b is None:
        return f"{mod} (stage {a}) imports {dep}, the top of {track}: a stage never imports what runs it"
    order = STAGES[track]
    if order.index(b) > order.index(a):
        return f"{mod} (stage {a}) imports {dep} (stage {b}): a later stage"
    return None


def imports() -> dict[str, set[str]]:
    """Each memlife module and the memlife modules it imports (a package import is resolved to the
    module named, `from memlife.models import llm` to memlife.models.llm)."""
    mods = modules()
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        is_pkg = path.name == "__init__.py"
        here = name.split(".") if is_pkg else name.split(".")[:-1]
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(here[: len(here) - node.level + 1] + ([node.module] if node.module else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            for t in targets:
                while t and t not in mods:
                    t = t.rpartition(".")[0]
                if t and t != name:
                    found.add(t)
        graph[name] = found
    return graph


def _rank(p: str | None) -> int:
    for i, layer in enumerate(LAYERS):
        if p in layer:
            return i
    return len(LAYERS)  # the package itself sits above everything


def problems(graph: dict[str, set[str]] | None = None) -> list[str]:
    """Every import that goes up a layer or across the two tracks, and every cycle."""
    graph = imports() if graph is None else graph
    out = []
    for mod, deps in sorted(graph.items()):
        for dep in sorted(deps):
            a, b = place(mod), place(dep)
            if dep == "memlife" and mod != "memlife":
                out.append(f"{mod} imports the package itself (import the module it means)")
            elif a != b and _rank(b) >= _rank(a):
                out.append(f"{mod} ({a}) imports {dep} ({b}): "
                           + ("the two tracks do not import each other" if _rank(b) == _rank(a) else "an upward import"))
            elif a == b and a in STAGES and dep != f"memlife.{a}" and _stage_problem(mod, dep):
                out.append(_stage_problem(mod, dep))
    try:
        tuple(TopologicalSorter(graph).static_order())
    except CycleError as exc:
        out.append("import cycle: " + " -> ".join(exc.args[1]))
    return out


def sizes() -> dict[str, int]:
    return {m: len(p.read_text().splitlines()) for m, p in modules().items()}


def place_edges(graph: dict[str, set[str]] | None = None) -> dict[tuple[str, str], int]:
    """How many module imports go from each place to each other place."""
    graph = imports() if graph is None else graph
    out: dict[tuple[str, str], int] = {}
    for mod, deps in graph.items():
        for dep in deps:
            a, b = place(mod), place(dep)
            if a and b and a != b:
                out[(a, b)] = out.get((a, b), 0) + 1
    return out


def diagram(graph: dict[str, set[str]] | None = None) -> str:
    """A Mermaid flowchart of the places, their modules, and the imports between places (each edge
    labelled with how many module imports it stands for)."""
    graph = imports() if graph is None else graph
    by_place: dict[str, list[str]] = {}
    for m in graph:
        if place(m):
            by_place.setdefault(place(m), []).append(m.rpartition(".")[2] if place(m) != "science" else m[len("memlife."):])
    lines = ["```mermaid", "flowchart TD"]
    for layer in reversed(LAYERS):
        for p in layer:
            mods = ", ".join(sorted(x for x in by_place.get(p, []) if x not in SUBPACKAGES and x != "__main__"))
            if p in STAGES:  # a track: its stages in order, each with its modules
                in_stage = {s: sorted(m.rpartition(".")[2] for m in graph if stage(m) == s and m.startswith(f"memlife.{p}."))
                            for s in STAGES[p]}
                top = sorted(m.rpartition(".")[2] for m in graph if m.startswith(f"memlife.{p}.") and stage(m) is None
                             and m.rpartition(".")[2] not in STAGES[p] + ("__main__",))
                mods = "<br/>".join([f"{i}. {s}: {', '.join(x for x in in_stage[s] if x != s)}"
                                     for i, s in enumerate(STAGES[p], 1)] + ([f"top: {', '.join(top)}"] if top else []))
            title = "memlife (top level)" if p == "science" else f"memlife.{p}"
            lines.append(f'    {p}["<b>{title}</b><br/>{PLACE_TEXT[p]}<br/><small>{mods}</small>"]')
    for (a, b), n in sorted(place_edges(graph).items(), key=lambda e: (_rank(e[0][0]), e[0])):
        lines.append(f"    {a} -->|{n}| {b}")
    lines.append("```")
    return "\n".join(lines)


def document_with_diagram(text: str) -> str:
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{diagram()}\n{END}{tail}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--write", action="store_true", help="regenerate the diagram in docs/architecture.md")
    args = ap.parse_args(argv)
    if args.write:
        DOC.write_text(document_with_diagram(DOC.read_text()))
        return 0
    found = problems()
    print("\n".join(found) or "no cycle, no upward import")
    big = {m: n for m, n in sizes().items() if n > 500}
    for m, n in sorted(big.items(), key=lambda kv: -kv[1]):
        print(f"{n:6d}  {m}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
