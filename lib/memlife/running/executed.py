"""The quick run's executed notebooks as committed documents a reader opens without running anything.

`make publish` writes, from the run it just made, every executed notebook with its outputs (figures
inline) into `results/notebooks/` and an HTML rendering of each beside it; the page that links them,
`index.html`, is `memlife.running.results_page`'s. The source notebooks in `notebooks/` stay
output-free.

What a replay of the same run changes is taken out, so that a replayed publish leaves git clean:
papermill's and the kernel's timings and paths (notebook and cell metadata), what went to stderr
(warnings name files and versions of this machine), execution counts, and the checkout's absolute
path wherever an output prints one (a figure cell ends in the path `save_figure` returned), the
random id papermill gives the parameters cell it injects, progress-bar widgets (a frozen frame
and a random model id), and the outputs of cells tagged `timing`, which measure the run itself
(wall times, requests per second) and so differ on every run. A notebook prints any other
duration to stderr. `make publish` publishes a replay of the run it made, as a reader's
`make reproduce` runs it.
"""
from __future__ import annotations

import copy
import json
from pathlib import Path

import nbformat

FOLDER = ("results", "notebooks")
_CELL_METADATA_KEPT = ("tags",)
TIMING_TAG = "timing"
_WIDGET = "application/vnd.jupyter.widget-view+json"
_TIMING_NOTE = ("(This cell times the run itself; its figures differ on every run and are left out of the "
                "committed copy. Run the notebook to see this machine's.)\n")


def normalize(nb: nbformat.NotebookNode, root: Path) -> nbformat.NotebookNode:
    """`nb` without what differs between two runs of the same notebook on the same replies."""
    out = copy.deepcopy(nb)
    out.metadata.pop("papermill", None)
    out.metadata.pop("widgets", None)
    prefix = str(Path(root).resolve()) + "/"
    for cell in out.cells:
        cell.metadata = nbformat.NotebookNode({k: v for k, v in cell.metadata.items() if k in _CELL_METADATA_KEPT})
        if cell.cell_type != "code":
            continue
        cell.execution_count = None
        tags = cell.metadata.get("tags", [])
        if "injected-parameters" in tags:
            cell.id = "injected-parameters"
        if TIMING_TAG in tags:
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=_TIMING_NOTE)]
            continue
        outputs = []
        for o in cell.outputs:
            if o.output_type == "stream" and o.name == "stderr":
                continue
            if _WIDGET in o.get("data", {}):
                continue
            if "execution_count" in o:
                o.execution_count = None
            outputs.append(_relative(o, prefix))
        cell.outputs = outputs
    return out


def _relative(output: nbformat.NotebookNode, prefix: str) -> nbformat.NotebookNode:
    """Text of `output` with the checkout's absolute path made relative (images are left alone)."""
    def fix(text):
        if isinstance(text, list):
            return [t.replace(prefix, "") for t in text]
        return text.replace(prefix, "") if isinstance(text, str) else text

    if "text" in output:
        output.text = fix(output.text)
    for mime in ("text/plain", "text/html", "text/markdown"):
        if mime in output.get("data", {}):
            output.data[mime] = fix(output.data[mime])
    return output


def title(nb: nbformat.NotebookNode, fallback: str) -> str:
    """The notebook's first markdown heading, else `fallback`."""
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("#"):
                    return line.lstrip("#").strip()
    return fallback


def render_html(nb: nbformat.NotebookNode) -> str:
    from nbconvert import HTMLExporter

    body, _ = HTMLExporter(template_name="classic").from_notebook_node(nb)
    return body


def publish(executed_dir: Path, root: Path) -> list[str]:
    """Write every executed notebook of `executed_dir` (NN_name.ipynb), normalized, with its HTML,
    into root/results/notebooks/; a file whose bytes would not change is left alone and a notebook
    (or its page) no longer made is removed. The results page and its record beside them are
    results_page's, and stay. Returns the files that changed."""
    dest = Path(root).joinpath(*FOLDER)
    dest.mkdir(parents=True, exist_ok=True)
    made: dict[str, str] = {}
    for path in sorted(p for p in Path(executed_dir).glob("[0-9][0-9]_*.ipynb") if "." not in p.stem):
        nb = normalize(nbformat.read(path, as_version=4), root)
        made[path.name] = nbformat.writes(nb) + "\n"
        made[f"{path.stem}.html"] = render_html(nb)
    changed = []
    for name, text in made.items():
        target = dest / name
        if not target.is_file() or target.read_text() != text:
            target.write_text(text)
            changed.append(name)
    for stale in sorted(p for p in dest.glob("[0-9][0-9]_*") if p.is_file() and p.name not in made):
        stale.unlink()
        changed.append(f"{stale.name} (removed)")
    return changed


def figure_calls(source: Path) -> int:
    """How many `save_figure(` calls the source notebook's code cells make: each shows one figure."""
    nb = json.loads(Path(source).read_text())
    return sum("".join(c["source"]).count("save_figure(") for c in nb["cells"] if c["cell_type"] == "code")


def inline_images(executed: Path) -> int:
    """How many PNG images the executed notebook shows in its outputs."""
    nb = json.loads(Path(executed).read_text())
    return sum(1 for c in nb["cells"] if c["cell_type"] == "code"
               for o in c.get("outputs", []) if "image/png" in o.get("data", {}))
