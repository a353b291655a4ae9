"""Write a notebook from a list of (kind, source) cells — how the committed notebooks are authored.

    from nbwrite import write
    write("notebooks/00_backend.ipynb", [("md", "# Title"), ("params", "profile = 'smoke'"), ("code", "...")])

Cells of kind "params" are tagged `parameters` for papermill. Outputs are never written.
"""
from __future__ import annotations

import nbformat


def write(path: str, cells: list[tuple[str, str]]) -> None:
    nb = nbformat.v4.new_notebook()
    nb.metadata = {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
                   "language_info": {"name": "python"}}
    for i, (kind, src) in enumerate(cells):
        src = src.strip("\n")
        if kind == "md":
            cell = nbformat.v4.new_markdown_cell(src)
        else:
            cell = nbformat.v4.new_code_cell(src)
            if kind == "params":
                cell.metadata["tags"] = ["parameters"]
        cell.id = f"cell-{i:02d}"  # stable ids: rewriting a notebook does not churn its diff
        nb.cells.append(cell)
    nbformat.validate(nb)
    nbformat.write(nb, path)
