"""The committed executed notebooks: stable across replays, figures inline (their index: test_results_page)."""
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from memlife.running import executed

ROOT = Path(__file__).resolve().parents[1]
PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000"
                    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082")


def _run(root: Path, seconds: float, stamp: str) -> nbformat.NotebookNode:
    """An executed notebook as papermill leaves it, with this run's timings."""
    import base64

    code = new_code_cell("save_figure(fig, 'f', out)", execution_count=3,
                         metadata={"tags": ["figure"], "execution": {"iopub.status.busy": stamp},
                                   "papermill": {"duration": seconds}})
    code.outputs = [
        new_output("stream", name="stderr", text=f"UserWarning at {root}/lib/x.py: slow ({seconds} s)\n"),
        new_output("stream", name="stdout", text=f"wrote {root}/results/quick/tables/t.csv\n"),
        new_output("display_data", data={"image/png": base64.b64encode(PNG).decode(), "text/plain": "<Image>"}),
        new_output("execute_result", data={"text/plain": f"PosixPath('{root}/results/quick/figures/f.png')"},
                   execution_count=3),
    ]
    code.id = "figure-cell"  # papermill keeps the source notebook's cell ids
    head = new_markdown_cell("# 99 A notebook\n\nWhat it shows.")
    head.id = "intro"
    nb = new_notebook(cells=[head, code],
                      metadata={"papermill": {"duration": seconds, "start_time": stamp, "input_path": str(root)}})
    return nb


def test_normalize_takes_out_what_a_replay_changes_and_keeps_what_the_run_showed(tmp_path):
    a = executed.normalize(_run(tmp_path, 1.5, "2026-12-03T01:00:00"), tmp_path)
    b = executed.normalize(_run(tmp_path, 9.25, "2026-12-04T07:30:00"), tmp_path)
    assert nbformat.writes(a) == nbformat.writes(b)
    assert "papermill" not in a.metadata
    (cell,) = [c for c in a.cells if c.cell_type == "code"]
    assert cell.metadata == {"tags": ["figure"]} and cell.execution_count is None
    kinds = [o.output_type for o in cell.outputs]
    assert kinds == ["stream", "display_data", "execute_result"]  # stderr gone, the rest kept in order
    assert cell.outputs[0].text == "wrote results/quick/tables/t.csv\n"
    assert cell.outputs[1].data["image/png"]
    assert cell.outputs[2].data["text/plain"] == "PosixPath('results/quick/figures/f.png')"
    assert str(tmp_path) not in nbformat.writes(a)


def test_publish_writes_each_notebook_and_its_html_keeps_the_results_page_and_a_replay_changes_nothing(tmp_path):
    run = tmp_path / "results" / "quick" / "notebooks"
    run.mkdir(parents=True)
    for name in ("10_first", "20_second"):
        nbformat.write(_run(tmp_path, 2.0, "2026-12-03T01:00:00"), run / f"{name}.ipynb")
    (run / "20_second.FAILED.ipynb").write_text("{}")  # not an executed notebook: never published
    dest = tmp_path / "results" / "notebooks"
    dest.mkdir(parents=True)
    page = ("index.html", "index.png", "published.json")  # results_page's, written after these
    for name in page:
        (dest / name).write_text("the results page")
    changed = executed.publish(run, tmp_path)
    assert sorted(changed) == ["10_first.html", "10_first.ipynb", "20_second.html", "20_second.ipynb"]
    assert sorted(p.name for p in dest.iterdir()) == sorted(changed + list(page))
    assert all((dest / name).read_text() == "the results page" for name in page)
    html_page = (dest / "10_first.html").read_text()
    assert "data:image/png;base64," in html_page and str(tmp_path) not in html_page and "99 A notebook" in html_page
    assert executed.title(nbformat.read(dest / "10_first.ipynb", as_version=4), "x") == "99 A notebook"
    assert executed.inline_images(dest / "10_first.ipynb") == 1

    # The same run replayed later: other timings, same outputs: nothing changes.
    for name in ("10_first", "20_second"):
        nbformat.write(_run(tmp_path, 7.0, "2026-12-09T11:11:11"), run / f"{name}.ipynb")
    assert executed.publish(run, tmp_path) == []
    # A notebook the run no longer has is removed with its page; the results page stays.
    (run / "20_second.ipynb").unlink()
    assert sorted(executed.publish(run, tmp_path)) == ["20_second.html (removed)", "20_second.ipynb (removed)"]
    assert all((dest / name).is_file() for name in page)


@pytest.mark.slow
def test_save_figure_shows_the_figure_in_the_cell_output_of_a_kernel(tmp_path):
    from nbclient import NotebookClient

    nb = new_notebook(cells=[new_code_cell(
        "import matplotlib.pyplot as plt\nfrom memlife.base import artifacts\n"
        "fig, ax = plt.subplots()\nax.plot([0, 1], [1, 0])\n"
        f"png = artifacts.save_figure(fig, 'f', {str(tmp_path)!r})")])
    NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    images = [o for o in nb.cells[0].outputs if "image/png" in o.get("data", {})]
    assert len(images) == 1
    import base64
    assert base64.b64decode(images[0].data["image/png"]) == (tmp_path / "f.png").read_bytes()


def test_the_committed_executed_notebooks_show_every_figure_their_sources_save():
    dest = ROOT.joinpath(*executed.FOLDER)
    if not (dest / "index.html").is_file():
        pytest.skip("results/notebooks/ is written by the next `make publish`")
    sources = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    for source in sources:
        copy = dest / source.name
        assert copy.is_file(), f"{copy}: missing; run make publish"
        assert executed.inline_images(copy) >= executed.figure_calls(source), copy
        assert (dest / f"{source.stem}.html").is_file()


def test_normalize_drops_what_differs_on_every_run_papermill_ids_widgets_and_timing_cells(tmp_path):
    def run(seed: int) -> nbformat.NotebookNode:
        params = new_code_cell("profile = 'quick'", metadata={"tags": ["injected-parameters"]})
        params.id = f"random{seed}"
        bars = new_code_cell("reader.complete_many(requests)")
        bars.outputs = [new_output("display_data", data={"application/vnd.jupyter.widget-view+json":
                                                         {"model_id": f"m{seed}", "version_major": 2},
                                                         "text/plain": f"first pass: {seed}%"}),
                        new_output("stream", name="stdout", text="6 answers\n")]
        timed = new_code_cell("throughput", metadata={"tags": [executed.TIMING_TAG]})
        timed.outputs = [new_output("execute_result", data={"text/plain": f"{seed * 1.7} requests/s"})]
        bars.id, timed.id = "bars", "timed"  # the source notebook's ids, which papermill keeps
        return new_notebook(cells=[params, bars, timed])

    a, b = (executed.normalize(run(s), tmp_path) for s in (3, 8))
    assert nbformat.writes(a) == nbformat.writes(b)
    params, bars, timed = a.cells
    assert params.id == "injected-parameters"
    assert [o.output_type for o in bars.outputs] == ["stream"]  # the count stays, the frozen bar goes
    assert "times the run itself" in timed.outputs[0].text
