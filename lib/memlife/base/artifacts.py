"""Saving tables and figures the same way everywhere, byte-stable across runs."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless: notebooks run under papermill and nbval
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from memlife.base import progress  # noqa: E402

# A fixed hash salt and no timestamps keep SVG/PDF/PNG bytes identical between runs.
matplotlib.rcParams["svg.hashsalt"] = "memlife"
matplotlib.rcParams["pdf.compression"] = 6

_PNG_META = {"Software": None}
_PDF_META = {"CreationDate": None, "ModDate": None, "Producer": None, "Creator": None}


def _integral_counts(df: pd.DataFrame) -> pd.DataFrame:
    """Count columns (`n`, `n_*`) that became float only because some rows are empty (e.g. the
    paper's rows beside ours) are written as integers: `5`, not `5.000`."""
    out = df.copy()
    for col in out.columns:
        if not (col == "n" or str(col).startswith("n_")) or not pd.api.types.is_float_dtype(out[col]):
            continue
        vals = out[col].dropna()
        if len(vals) and (vals == vals.round()).all():
            out[col] = out[col].astype("Int64")
    return out


def save_table(df: pd.DataFrame, name: str, directory: Path, *, floatfmt: str = ".3f") -> Path:
    """Write `name`.csv and `name`.md under `directory`; returns the CSV path."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    df = _integral_counts(df)
    csv_path = directory / f"{name}.csv"
    df.to_csv(csv_path, index=False, lineterminator="\n")
    # tabulate prints None as an empty cell and right-aligns the column's integers
    md = df.copy()
    for c in md.columns:
        if str(md[c].dtype) == "Int64":
            md[c] = pd.Series([None if pd.isna(v) else int(v) for v in md[c]], index=md.index, dtype=object)
    (directory / f"{name}.md").write_text(md.to_markdown(index=False, floatfmt=floatfmt) + "\n")
    progress.record_output(csv_path)
    return csv_path


def save_figure(fig: plt.Figure, name: str, directory: Path, *, dpi: int = 150) -> Path:
    """Write `name`.png and `name`.pdf under `directory`; returns the PNG path."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    png = directory / f"{name}.png"
    fig.savefig(png, dpi=dpi, bbox_inches="tight", metadata=_PNG_META)
    fig.savefig(directory / f"{name}.pdf", bbox_inches="tight", metadata=_PDF_META)
    progress.record_output(png)
    _show_inline(png)
    return png


def _show_inline(png: Path) -> None:
    """In a notebook's kernel, show the saved PNG in the cell's output, so that the executed
    notebooks (and their committed copies, `memlife.running.executed`) carry every figure; elsewhere, nothing."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None or not hasattr(shell, "kernel"):
        return
    from IPython.display import Image, display

    display(Image(data=png.read_bytes(), format="png"))
