"""The results page a reader lands on: results/notebooks/index.html, and index.png, its picture.

It is built from what is committed, never from a run's own folder, so that it can be rebuilt at any
time without running anything (`make results-page`), and `make publish` builds it the same way right
after it has copied a run's outputs into place:

- the README's headline figures with their captions, read from README.md's "What it finds" (the
  captions have one home, the README);
- one line per executed notebook of results/notebooks/: its title, and its key number read from the
  committed tables (results/tables/) or the recording's manifest (results/replies/);
- the profile and the commit the published run was made from (results/notebooks/published.json,
  which `make publish` writes);
- links to each executed notebook's page and file.

The page needs nothing but the checkout: its CSS is inline, its links and images are relative, it
has no script. `render_png` photographs it with headless Chromium (Debian's `chromium`, which
`make chromium` installs), with every host name unresolvable, so a page that reached for the
network would show it.
"""
from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import nbformat

from memlife.running import executed

PAGE, PICTURE, RECORD = "index.html", "index.png", "published.json"
README_SECTION = "What it finds"
# What decides a published run's numbers: a change here that was not committed is named on the page.
CODE_PATHS = ("lib", "notebooks", "configs", "Makefile", "pyproject.toml", "requirements.lock",
              "requirements-memos.lock", "requirements-llama.txt")
# The page lives two folders down from the root: results/notebooks/.
_UP = "../../"
_TRACKS = {"0": "Before either track", "1": "MemOps (Track A)", "2": "The restore audit (Track B)"}


class PageError(RuntimeError):
    """The page cannot be built from what is committed; the message names the file and what is missing."""


# ----------------------------------------------------------------------------- where the run came from

def record(root: Path, profile: str) -> dict:
    """The profile and commit of the run `make publish` is publishing, and the code files that
    differed from that commit (a run made from uncommitted code says so on the page)."""
    commit = (_git(root, "rev-parse", "HEAD") or "").strip() or None
    changed = _git(root, "status", "--porcelain", "--untracked-files=all", "--", *CODE_PATHS) if commit else None
    # porcelain lines are "XY path", or "XY old -> new" for a rename
    paths = sorted(line[3:].split(" -> ")[-1] for line in (changed or "").splitlines() if line.strip())
    return {"profile": profile, "commit": commit, "uncommitted": paths}


def _git(root: Path, *args: str) -> str | None:
    """git's answer, or None where root is not a git checkout (a tarball): the page then says so."""
    if shutil.which("git") is None:
        return None
    done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True)
    return done.stdout if done.returncode == 0 else None


def write_record(root: Path, profile: str) -> bool:
    """Write results/notebooks/published.json; True when it changed."""
    path = Path(root).joinpath(*executed.FOLDER, RECORD)
    text = json.dumps(record(root, profile), indent=1, sort_keys=True) + "\n"
    if path.is_file() and path.read_text() == text:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return True


def read_record(root: Path) -> dict:
    path = Path(root).joinpath(*executed.FOLDER, RECORD)
    if not path.is_file():
        raise PageError(f"{path.relative_to(root)} is missing: `make publish` writes it, naming the run's profile "
                        "and commit")
    rec = json.loads(path.read_text())
    for key in ("profile", "commit", "uncommitted"):
        if key not in rec:
            raise PageError(f"{path.relative_to(root)} has no {key!r}: `make publish` writes it")
    return rec


# ----------------------------------------------------------------------------- the README's headline figures

@dataclass(frozen=True)
class Figure:
    path: str     # as the README names it, relative to the root (figures/NAME.png)
    alt: str
    caption: str  # the paragraph under it, markdown


_IMAGE = re.compile(r"^!\[(?P<alt>[^\]]*)\]\((?P<path>[^)\s]+)\)\s*$")


def headline_figures(readme: str) -> list[Figure]:
    """Each image of the README's "What it finds" section with the paragraph under it."""
    section = re.search(rf"^## {re.escape(README_SECTION)}\s*$(.*?)(?=^## |\Z)", readme, re.M | re.S)
    if section is None:
        raise PageError(f"README.md has no '## {README_SECTION}' section: the page takes its figures from there")
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", section.group(1)) if p.strip()]
    figures = []
    for i, para in enumerate(paragraphs):
        m = _IMAGE.match(para)
        if m is None:
            continue
        if i + 1 >= len(paragraphs) or _IMAGE.match(paragraphs[i + 1]):
            raise PageError(f"README.md: the figure {m['path']} has no caption paragraph under it")
        figures.append(Figure(m["path"], m["alt"], paragraphs[i + 1]))
    if not figures:
        raise PageError(f"README.md's '{README_SECTION}' shows no figure")
    return figures


def _markdown(text: str) -> str:
    """A README paragraph as HTML, its relative links pointing from results/notebooks/ to the root."""
    import mistune

    body = mistune.create_markdown(escape=True)(text)
    return re.sub(r'(href|src)="(?![a-z][a-z0-9+.-]*:|#|/)([^"]*)"', lambda m: f'{m[1]}="{_UP}{m[2]}"', body)


# ----------------------------------------------------------------------------- key numbers

class Committed:
    """The committed results, read once each: the tables and the recording's manifest."""

    def __init__(self, root: Path, profile: str):
        self.root, self.profile, self._tables = Path(root), profile, {}

    def table(self, name: str):
        import pandas as pd

        if name not in self._tables:
            path = self.root / "results" / "tables" / f"{name}.csv"
            if not path.is_file():
                raise PageError(f"results/tables/{name}.csv is missing: `make publish` copies it from the run")
            self._tables[name] = pd.read_csv(path)
        return self._tables[name]

    def manifest(self) -> dict:
        path = self.root / "results" / "replies" / f"{self.profile}.manifest.json"
        if not path.is_file():
            raise PageError(f"{path.relative_to(self.root)} is missing: `make publish` exports the recording")
        return json.loads(path.read_text())


def _one(src: Committed, name: str, **match):
    """The one row of table `name` whose columns have these values."""
    return _one_of(src.table(name), name, **match)


def _one_of(rows, name: str, **match):
    sel = rows
    for col, value in match.items():
        if col not in rows.columns:
            raise PageError(f"results/tables/{name}.csv has no column {col!r}")
        sel = sel[sel[col] == value]
    if len(sel) != 1:
        raise PageError(f"results/tables/{name}.csv: {len(sel)} rows where {match}, expected one")
    return sel.iloc[0]


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


@dataclass(frozen=True)
class Key:
    text: str
    source: str  # the file it is read from, relative to the root


def _backend(src: Committed) -> Key:
    m = src.manifest()
    models = sorted({r["model"] for r in m["recordings"].values() if r.get("runtime") == "llama-server"})
    return Key(f"{m['calls_by_notebook']['00_backend']} model calls to {', '.join(models)}; the whole run made "
               f"{m['calls']:,}, answered by {m['replies']:,} recorded replies",
               f"results/replies/{src.profile}.manifest.json")


def _build(src: Committed) -> Key:
    conv = _one(src, "table2_memops_dataset", statistic="Evidence conversations")
    probes = _one(src, "table2_memops_dataset", statistic="Unique QA pairs")
    return Key(f"{conv.ours:,.0f} evidence conversations with {probes.ours:,.0f} probes built "
               f"(the paper: {conv.paper:,.0f} and {probes.paper:,.0f})", "results/tables/table2_memops_dataset.md")


def _stats(src: Committed) -> Key:
    tokens = _one(src, "table2_memops_dataset", statistic="Avg. approx. tokens (adjacent)")
    hops = _one(src, "table2_memops_dataset", statistic="Multi-hop probes (%)")
    return Key(f"adjacent conversations of {tokens.ours:,.0f} tokens on average (the paper: {tokens.paper:,.0f}); "
               f"{hops.ours:.1f}% multi-hop probes ({hops.paper:.1f}%)", "results/tables/table2_memops_dataset.md")


def _ours(src: Committed):
    t = src.table("memops_table3")
    return t[t.source == "ours"]


def _eval(src: Committed) -> Key:
    ours = _ours(src)
    return Key(f"{ours.n.sum():,.0f} replies in {len(ours)} system × setting runs; "
               f"{ours.n_truncated.sum():,.0f} cut off at the token cap, {ours.n_malformed.sum():,.0f} malformed",
               "results/tables/memops_table3.md")


def _tables(src: Committed) -> Key:
    t = src.table("memops_table3")
    ours, paper = _ours(src), t[t.source == "paper"]
    right = (ours.Accuracy * ours.n_accuracy).round().sum()
    best = ours.loc[ours.Accuracy.idxmax()]
    return Key(f"{right:.0f} of {ours.n_accuracy.sum():,.0f} decided replies right, the best run "
               f"{best.Method.removeprefix('ours: ')} at accuracy {best.Accuracy:.3f}; the paper's rows "
               f"{paper.Accuracy.min():.3f} to {paper.Accuracy.max():.3f}", "results/tables/memops_table3.md")


def _controls(src: Committed) -> Key:
    t = src.table("memops_evidence_availability_overall")
    rows = t[(t.setting == "long_context") & (t.configured == True) & (t.reader_window == t.reader_window.max())]  # noqa: E712
    turn = _one_of(rows, "memops_evidence_availability_overall", system="bm25_turn")
    session = _one_of(rows, "memops_evidence_availability_overall", system="bm25_session")
    return Key(f"long context, {session.retrieval_tokens:,.0f}-token budget: sessions hand over all the evidence for "
               f"{session.available:.3f} of {session.probes:,.0f} probes, turns for {turn.available:.3f}",
               "results/tables/memops_evidence_availability_overall.md")


def _longmem(src: Committed) -> Key:
    t = src.table("restore_data_summary")
    mean = (t.history_tokens * t.questions).sum() / t.questions.sum()
    return Key(f"{t.questions.sum():,.0f} LongMemEval questions in {len(t)} types, histories of "
               f"{mean:,.0f} tokens on average", "results/tables/restore_data_summary.md")


def _eviction(src: Committed) -> Key:
    t = src.table("restore_gold_retention")
    fifo = t[t.policy == "fifo"].sort_values("budget")
    if fifo.empty:
        raise PageError("results/tables/restore_gold_retention.csv has no fifo rows")
    low, high = fifo.iloc[0], fifo.iloc[-1]
    return Key(f"FIFO keeps {_pct(low.gold_retention)} of the gold evidence at a {low.budget:,.0f}-token budget, "
               f"{_pct(high.gold_retention)} at {high.budget:,.0f}", "results/tables/restore_gold_retention.md")


def _reads(src: Committed) -> Key:
    calls = src.table("restore_read_calls")
    acc = src.table("restore_accuracy_by_cell")
    clean = acc.clean_gold.unique()
    if len(calls) != 1 or len(clean) != 1:
        raise PageError("results/tables/restore_read_calls.csv and restore_accuracy_by_cell.csv: expected one reader")
    c = calls.iloc[0]
    return Key(f"{c.naive_reads:,.0f} reads asked as {c.distinct_reads:,.0f} distinct prompts; with all the gold "
               f"evidence and nothing else the reader's accuracy is {clean[0]:.2f} ({c.questions:,.0f} questions)",
               "results/tables/restore_accuracy_by_cell.md")


def _decomposition(src: Committed) -> Key:
    t = src.table("restore_table1_topk")
    return Key(f"top-k errors over {len(t)} cells: {t.irreversible.sum():,.0f} irreversible, "
               f"{t.recoverable.sum():,.0f} recoverable, {t.residual.sum():,.0f} residual",
               "results/tables/restore_table1_topk.md")


def _robustness(src: Committed) -> Key:
    r = _one(src, "restore_paper_vs_ours_robustness", quantity="R4 residual, primary reader")
    return Key(f"R4: {r.ours:,.0f} residual error with all the gold restored, at {str(r.our_cell).split(': ')[-1]} "
               f"(the paper: {r.paper:,.0f})", "results/tables/restore_paper_vs_ours_robustness.md")


def _restore_controls(src: Committed) -> Key:
    t = src.table("restore_reference_decomposition")
    fifo = t[(t.policy == "fifo") & (t.regime == "topk")].sort_values("budget")
    if fifo.empty:
        raise PageError("results/tables/restore_reference_decomposition.csv has no fifo top-k rows")
    shares = ", ".join(f"{_pct(r.irreversible_rate)} at {r.budget / 1000:,.0f}k" for r in fifo.itertuples())
    return Key(f"evidence oracle, FIFO: the gold is evicted for {shares} tokens "
               f"({fifo.n_questions.iloc[0]:,.0f} questions)", "results/tables/restore_reference_decomposition.md")


def _power(src: Committed) -> Key:
    t = src.table("power_claims")
    ok = t[t.power_at_paper_n >= 0.8]
    return Key(f"{len(ok)} of {len(t)} claims the notebooks test reach 80% power at the papers' sizes "
               f"({t[t.track == 'memops'].paper_n.iloc[0]:,.0f} topics, {t[t.track == 'restore'].paper_n.iloc[0]:,.0f} "
               f"questions), simulated {t.runs.min():,.0f} runs a size", "results/tables/power_claims.md")


# Each notebook's key number, read from what it (or the notebook that tabulates its records) wrote.
KEY_NUMBERS: dict[str, Callable[[Committed], Key]] = {
    "00_backend": _backend,
    "01_power": _power,
    "10_memops_build": _build,
    "11_memops_stats": _stats,
    "12_memops_eval": _eval,
    "13_memops_tables": _tables,
    "14_memops_controls": _controls,
    "20_longmem_data": _longmem,
    "21_eviction": _eviction,
    "22_read_restore": _reads,
    "23_decomposition": _decomposition,
    "24_robustness": _robustness,
    "25_restore_controls": _restore_controls,
}


# ----------------------------------------------------------------------------- the page

@dataclass(frozen=True)
class Line:
    stem: str
    title: str
    key: Key


def notebook_lines(root: Path, src: Committed) -> list[Line]:
    folder = Path(root).joinpath(*executed.FOLDER)
    stems = sorted(p.stem for p in folder.glob("[0-9][0-9]_*.ipynb") if "." not in p.stem)
    if not stems:
        raise PageError(f"{folder.relative_to(root)} holds no executed notebook: `make publish` writes them")
    lines = []
    for stem in stems:
        if stem not in KEY_NUMBERS:
            raise PageError(f"no key number for {stem}: add one to memlife.running.results_page.KEY_NUMBERS")
        nb = nbformat.read(folder / f"{stem}.ipynb", as_version=4)
        lines.append(Line(stem, executed.title(nb, stem), KEY_NUMBERS[stem](src)))
    return lines


_CSS = """
body { margin: 0; background: #eef1f5; color: #1d2330;
  font: 16px/1.55 "DejaVu Sans", "Liberation Sans", Arial, Helvetica, sans-serif; }
main { box-sizing: border-box; max-width: 1000px; margin: 0 auto; padding: 34px 44px 40px; background: #fff; }
h1 { font-size: 27px; margin: 0 0 8px; line-height: 1.25; }
h2 { font-size: 20px; margin: 34px 0 14px; padding-bottom: 6px; border-bottom: 2px solid #e1e6ee; }
p.lead { margin: 0 0 10px; color: #333c4d; }
p.meta { margin: 0; font-size: 14.5px; color: #4a5568; }
code { font-family: "DejaVu Sans Mono", "Liberation Mono", monospace; font-size: 0.9em;
  background: #f0f3f7; padding: 1px 4px; border-radius: 3px; }
a { color: #1f55a8; }
figure { margin: 18px 0 30px; }
figure img { display: block; width: 100%; height: auto; border: 1px solid #e1e6ee; border-radius: 6px; }
figcaption { margin-top: 10px; font-size: 14.5px; color: #333c4d; }
figcaption p { margin: 0; }
table { width: 100%; border-collapse: collapse; font-size: 15px; }
td { padding: 8px 10px; vertical-align: top; border-top: 1px solid #e6eaf0; }
tr.track td { border-top: none; padding: 18px 10px 6px; font-weight: bold; color: #4a5568;
  font-size: 13px; letter-spacing: 0.06em; text-transform: uppercase; }
td.title { width: 34%; }
td.title a { font-weight: bold; text-decoration: none; }
td.key b { color: #0f1a2e; }
td.key .source { color: #6b7585; font-size: 13px; }
td.files { white-space: nowrap; font-size: 13.5px; text-align: right; }
td.files a { color: #4a5568; }
footer { margin-top: 34px; padding-top: 12px; border-top: 1px solid #e1e6ee; font-size: 13.5px; color: #5a6475; }
"""


def _numbers_bold(text: str) -> str:
    """Escaped text with its numbers in bold, so that a reader's eye finds them."""
    return re.sub(r"(?<![\w@.])(\d(?:[\d,]*\d)?(?:\.\d+)?(?:%|k)?)(?![\w@])", r"<b>\1</b>", text)


def _made_from(rec: dict) -> str:
    if rec["commit"] is None:
        return "made outside a git checkout (no commit recorded)"
    made = f"made from commit <code>{html.escape(rec['commit'][:7])}</code>"
    if rec["uncommitted"]:
        shown = ", ".join(f"<code>{html.escape(p)}</code>" for p in rec["uncommitted"][:5])
        more = f" and {len(rec['uncommitted']) - 5} more" if len(rec["uncommitted"]) > 5 else ""
        made += f" with uncommitted changes to {shown}{more}"
    return made


def build(root: Path) -> str:
    """The page, from the committed results under `root`."""
    root = Path(root)
    rec = read_record(root)
    src = Committed(root, rec["profile"])
    figures = headline_figures((root / "README.md").read_text())
    lines = notebook_lines(root, src)
    esc = html.escape
    out = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           f"<title>memlife: what the {esc(rec['profile'])} run shows</title>", f"<style>{_CSS}</style>",
           "</head>", "<body>", "<main>", "<header>",
           f"<h1>memlife: what the {esc(rec['profile'])} run shows</h1>",
           '<p class="lead">A reproduction of MemOps (Track A) and the restore-counterfactual audit of '
           "forgetting (Track B). Every notebook below was executed and committed with its outputs: open it "
           "without running anything.</p>",
           f'<p class="meta">Profile <b>{esc(rec["profile"])}</b>, {_made_from(rec)}; '
           f"{len(lines)} executed notebooks. The key numbers are read from the committed tables.</p>",
           "</header>", f"<h2>{esc(README_SECTION)}</h2>"]
    for fig in figures:
        path = root / fig.path
        if not path.is_file():
            raise PageError(f"README.md shows {fig.path}, which does not exist")
        out += ["<figure>", f'<img src="{esc(_UP + fig.path)}" alt="{esc(fig.alt)}">',
                f"<figcaption>{_markdown(fig.caption)}</figcaption>", "</figure>"]
    out += ["<h2>The notebooks</h2>", "<table>"]
    track = None
    for line in lines:
        if line.stem[0] != track:
            track = line.stem[0]
            out.append(f'<tr class="track"><td colspan="3">{esc(_TRACKS.get(track, "Other notebooks"))}</td></tr>')
        source = Path(line.key.source).name.removesuffix(".md")
        out.append(
            f'<tr id="{esc(line.stem)}"><td class="title"><a href="{esc(line.stem)}.html">{esc(line.title)}</a></td>'
            f'<td class="key">{_numbers_bold(esc(line.key.text))} <a class="source" '
            f'href="{esc(_UP + line.key.source)}">({esc(source)})</a></td>'
            f'<td class="files"><a href="{esc(line.stem)}.html">page</a> · '
            f'<a href="{esc(line.stem)}.ipynb">.ipynb</a></td></tr>')
    out += ["</table>",
            "<footer>Written by <code>make publish</code> after it copies the run's tables, figures and executed "
            "notebooks; <code>make results-page</code> writes it again from what is committed "
            f"(<code>memlife.running.results_page</code>). The figures and their captions are the README's. "
            f'<a href="{_UP}README.md">README</a> · <a href="{_UP}docs/running.md">running memlife</a></footer>',
            "</main>", "</body>", "</html>", ""]
    return "\n".join(out)


# ----------------------------------------------------------------------------- its picture

_BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
WIDTH = 1100


def chromium() -> str:
    """The headless browser: MEMLIFE_CHROMIUM, else the first of chromium, chromium-browser, google-chrome."""
    named = os.environ.get("MEMLIFE_CHROMIUM")
    if named:
        if shutil.which(named) is None:
            raise PageError(f"MEMLIFE_CHROMIUM={named} is not an executable")
        return shutil.which(named)
    for name in _BROWSERS:
        if shutil.which(name):
            return shutil.which(name)
    raise PageError("no Chromium to render results/notebooks/index.png: `make chromium` installs Debian's "
                    "package (as root, with apt); elsewhere install chromium or chromium-browser, or set "
                    "MEMLIFE_CHROMIUM to the browser")


def render_png(page: Path, out: Path, *, height: int = 4000, timeout: float = 90) -> Path:
    """A screenshot of `page` as Chromium draws it, `WIDTH` pixels wide and as tall as the page:
    Chromium shoots its window, so the window is made taller than the page (doubled until the page
    ends inside it) and the picture is cut below the page's last drawn row."""
    from PIL import Image

    while True:
        img = _screenshot(page, height, timeout)
        bottom = _last_drawn_row(img)
        if bottom < img.height:
            break
        if height >= 32000:
            raise PageError(f"{page} is taller than {height} pixels: too long a page to picture")
        height *= 2
    # 256 colours, no dithering: the page looks the same at a third of the bytes it would commit
    picture = img.crop((0, 0, img.width, bottom)).quantize(256, method=Image.Quantize.FASTOCTREE,
                                                          dither=Image.Dither.NONE)
    out = Path(out)
    if out.is_file():
        with Image.open(out) as old:
            if old.size == picture.size and old.convert("RGB").tobytes() == picture.convert("RGB").tobytes():
                return out  # the same picture: its bytes stay as committed
    picture.save(out, optimize=True)
    return out


def _screenshot(page: Path, height: int, timeout: float):
    from PIL import Image

    with tempfile.TemporaryDirectory(prefix="memlife-chromium-") as tmp:
        shot = Path(tmp) / "shot.png"
        cmd = [chromium(), "--headless", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
               "--force-device-scale-factor=1", f"--window-size={WIDTH},{height}",
               # a page that reached for the network would show its holes: no host name resolves
               "--host-resolver-rules=MAP * ~NOTFOUND", f"--user-data-dir={tmp}/profile",
               f"--screenshot={shot}", Path(page).resolve().as_uri()]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            cmd.insert(1, "--no-sandbox")  # Chromium refuses to start as root with its sandbox
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0 or not shot.is_file():
            raise PageError(f"{cmd[0]} could not render {page} (exit {done.returncode}): {done.stderr[-1500:]}")
        with Image.open(shot) as img:
            return img.convert("RGB")


def _last_drawn_row(img) -> int:
    """One past the last row that differs from the background (the bottom-left pixel), with a
    margin; the image's height when the page reaches its bottom."""
    from PIL import Image, ImageChops

    background = img.getpixel((0, img.height - 1))
    box = ImageChops.difference(img, Image.new(img.mode, img.size, background)).getbbox()
    if box is None:
        raise PageError("Chromium drew an empty page")
    return img.height if box[3] >= img.height else min(img.height - 1, box[3] + 24)


def write(root: Path, *, png: bool = True) -> list[str]:
    """Write index.html (and index.png) into results/notebooks/ from the committed results; a file
    whose content would not change is left alone. Returns the files that changed."""
    folder = Path(root).joinpath(*executed.FOLDER)
    text = build(root)
    changed = []
    page = folder / PAGE
    if not page.is_file() or page.read_text() != text:
        page.write_text(text)
        changed.append(PAGE)
    if png:
        picture = folder / PICTURE
        before = picture.read_bytes() if picture.is_file() else None
        render_png(page, picture)
        if picture.read_bytes() != before:
            changed.append(PICTURE)
    return changed
