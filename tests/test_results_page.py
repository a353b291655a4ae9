"""The results page a reader lands on: the README's findings, a key number per notebook, where the run
came from, links that resolve, nothing fetched from the network; drawn by a real browser."""
import json
import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from memlife.running import executed, results_page

ROOT = Path(__file__).resolve().parents[1]
FOLDER = ROOT.joinpath(*executed.FOLDER)


class _Page(HTMLParser):
    """What a browser would fetch or follow, the table's rows, and the text a reader sees."""

    def __init__(self):
        super().__init__()
        self.fetched, self.links, self.tags, self.text = [], [], [], []
        self.rows: dict[str, list[str]] = {}
        self._row, self._cell, self._in_style = None, None, False
        self.styles = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append(tag)
        if tag in ("img", "script", "iframe", "source", "video", "audio", "embed") and a.get("src"):
            self.fetched.append(a["src"])
        if tag == "link" and a.get("href"):
            self.fetched.append(a["href"])
        if tag == "a":
            self.links.append(a["href"])
        if tag == "tr" and a.get("id"):
            self._row = a["id"]
            self.rows[self._row] = []
        if tag == "td" and self._row:
            self._cell = a.get("class", "")
            self.rows[self._row].append("")
        self._in_style = tag == "style"
        if a.get("style"):
            self.styles.append(a["style"])

    def handle_endtag(self, tag):
        if tag == "tr":
            self._row = None
        if tag == "style":
            self._in_style = False

    def handle_data(self, data):
        if self._in_style:
            self.styles.append(data)
            return
        self.text.append(data)
        if self._row:
            self.rows[self._row][-1] += data


def _plain(markdown: str) -> str:
    """A README paragraph as the text a reader sees: no emphasis marks, code ticks or link targets."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", markdown)
    return " ".join(text.replace("*", "").replace("`", "").split())


@pytest.fixture(scope="module")
def built():
    page = results_page.build(ROOT)
    parsed = _Page()
    parsed.feed(page)
    return page, parsed


def test_the_page_opens_on_the_readmes_findings_with_their_captions(built):
    page, parsed = built
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## What it finds", 1)[1].split("\n## ", 1)[0]
    shown = re.findall(r"^!\[[^\]]*\]\((figures/[^)]+)\)", section, re.M)
    assert len(shown) == 2
    text = " ".join(" ".join(parsed.text).split())
    for fig, path in zip(results_page.headline_figures(readme), shown):
        assert fig.path == path
        assert f"../../{path}" in parsed.fetched and (ROOT / path).is_file()
        caption = _plain(fig.caption)
        assert caption[:120] in text and caption[-60:] in text  # the whole paragraph, from the README
    # the figures come first: before the notebooks
    assert page.index(shown[-1]) < page.index('id="00_backend"')


def test_one_line_per_executed_notebook_with_its_key_number(built):
    _, parsed = built
    notebooks = sorted(p.stem for p in FOLDER.glob("[0-9][0-9]_*.ipynb"))
    assert len(notebooks) >= 12 and sorted(parsed.rows) == notebooks
    for stem, (title, key, files) in parsed.rows.items():
        assert title.startswith(stem[:2]), (stem, title)
        assert re.search(r"\d", key.split("(")[0]), (stem, key)  # a number of its own, not the source's name
        assert "page" in files and ".ipynb" in files
    # the numbers are read from the committed tables, as the README states them
    assert "0.911" in parsed.rows["14_memops_controls"][1] and "0.643" in parsed.rows["14_memops_controls"][1]
    assert "96%" in parsed.rows["25_restore_controls"][1] and "35%" in parsed.rows["25_restore_controls"][1]


def test_the_page_names_the_profile_and_the_commit_the_run_was_made_from(built):
    page, _ = built
    rec = json.loads((FOLDER / results_page.RECORD).read_text())
    assert rec["profile"] == "quick" and re.fullmatch(r"[0-9a-f]{40}", rec["commit"])
    assert "Profile <b>quick</b>" in page and f"<code>{rec['commit'][:7]}</code>" in page
    if (ROOT / ".git").exists() and shutil.which("git"):
        subprocess.run(["git", "cat-file", "-e", f"{rec['commit']}^{{commit}}"], cwd=ROOT, check=True)


def test_every_link_resolves_and_nothing_is_fetched_from_the_network(built):
    page, parsed = built
    assert "script" not in parsed.tags and "link" not in parsed.tags and "iframe" not in parsed.tags
    for ref in parsed.fetched + parsed.links:
        assert not re.match(r"[a-z][a-z0-9+.-]*:|//", ref), ref  # relative: no http(s), no file://
        target = (FOLDER / ref.split("#")[0]).resolve()
        assert target.is_file(), ref
    assert not any("url(" in s or "@import" in s for s in parsed.styles)
    assert "http://" not in page and "https://" not in page
    for stem in parsed.rows:
        assert f"{stem}.html" in parsed.links and f"{stem}.ipynb" in parsed.links


def test_the_committed_page_is_the_one_the_committed_results_make(built):
    page, _ = built
    assert (FOLDER / results_page.PAGE).read_text() == page, "run `make results-page` and commit the page"
    assert (FOLDER / results_page.PICTURE).is_file()


def test_a_missing_table_or_record_is_named(tmp_path):
    shutil.copytree(FOLDER, tmp_path / "results" / "notebooks")
    shutil.copy(ROOT / "README.md", tmp_path)
    (tmp_path / "figures").mkdir()
    for fig in results_page.headline_figures((ROOT / "README.md").read_text()):
        shutil.copy(ROOT / fig.path, tmp_path / fig.path)
    with pytest.raises(results_page.PageError, match=r"results/replies/quick.manifest.json is missing"):
        results_page.build(tmp_path)
    shutil.copytree(ROOT / "results" / "replies", tmp_path / "results" / "replies")
    # the first notebook whose key number reads a table: 01_power
    with pytest.raises(results_page.PageError, match=r"results/tables/power_claims.csv is missing"):
        results_page.build(tmp_path)
    (tmp_path / "results" / "notebooks" / results_page.RECORD).unlink()
    with pytest.raises(results_page.PageError, match="published.json is missing"):
        results_page.build(tmp_path)


def test_a_readme_without_its_findings_or_a_caption_is_refused():
    with pytest.raises(results_page.PageError, match="no '## What it finds' section"):
        results_page.headline_figures("# x\n\n## Elsewhere\n\n![a](figures/a.png)\n\ncaption\n")
    with pytest.raises(results_page.PageError, match="figures/a.png has no caption"):
        results_page.headline_figures("## What it finds\n\ntext\n\n![a](figures/a.png)\n\n![b](figures/b.png)\n\nc\n")


def test_the_record_names_the_commit_and_the_uncommitted_code(tmp_path):
    if shutil.which("git") is None:
        pytest.skip("no git")
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "a.py").write_text("x = 1\n")
    (tmp_path / "results").mkdir()
    for cmd in (["init", "-q"], ["add", "."], ["commit", "-qm", "first"]):
        subprocess.run(["git", *cmd], cwd=tmp_path, env=env, check=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True).stdout.strip()
    (tmp_path / "results" / "t.csv").write_text("a\n")  # the run's outputs are not code
    assert results_page.record(tmp_path, "quick") == {"profile": "quick", "commit": head, "uncommitted": []}
    (tmp_path / "lib" / "a.py").write_text("x = 2\n")
    (tmp_path / "lib" / "b.py").write_text("y = 1\n")
    assert results_page.record(tmp_path, "quick")["uncommitted"] == ["lib/a.py", "lib/b.py"]
    assert "<code>lib/a.py</code>" in results_page._made_from(results_page.record(tmp_path, "quick"))
    assert results_page.record(tmp_path / "results", "quick")["commit"] == head  # any folder of the checkout
    outside = tmp_path.parent / f"{tmp_path.name}-plain"
    outside.mkdir()
    assert results_page.record(outside, "quick")["commit"] is None
    assert "no commit recorded" in results_page._made_from(results_page.record(outside, "quick"))


def _fake(bin_dir: Path, name: str, script: str) -> None:
    path = bin_dir / name
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(0o755)


@pytest.mark.parametrize("as_root", [True, False])
def test_make_chromium_installs_debians_package_as_root_and_otherwise_says_what_to_install(tmp_path, as_root):
    shutil.copy(ROOT / "Makefile", tmp_path)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tools = ("sh", "bash", "mkdir", "chmod", "cat", "tail", "env", "sed", "sha256sum", "cut", "date", "find", "nproc")
    for tool in tools:
        if shutil.which(tool):
            (bin_dir / tool).symlink_to(shutil.which(tool))
    log = tmp_path / "apt.log"
    # apt-get installs a chromium command; id says who we are
    chromium = bin_dir / "chromium"
    _fake(bin_dir, "apt-get", f'echo "$@" >> {log}\n'
          f'case "$*" in *install*) printf "#!/bin/sh\\n" > {chromium}; chmod 755 {chromium};; esac\n')
    _fake(bin_dir, "id", f"echo {0 if as_root else 1000}\n")
    env = {"PATH": str(bin_dir), "HOME": str(tmp_path)}
    done = subprocess.run([shutil.which("make"), "--no-print-directory", "chromium"], cwd=tmp_path, env=env,
                          capture_output=True, text=True)
    if as_root:
        assert done.returncode == 0, done.stderr
        assert log.read_text().splitlines() == ["update -q", "install -y -q chromium"]
        again = subprocess.run([shutil.which("make"), "--no-print-directory", "chromium"], cwd=tmp_path, env=env,
                               capture_output=True, text=True)
        assert again.returncode == 0 and log.read_text().count("install") == 1  # present: nothing installed
    else:
        assert done.returncode != 0 and not log.exists()
        assert "no Chromium here" in done.stderr and "apt-get install chromium" in done.stderr


@pytest.mark.skipif(results_page.shutil.which("chromium") is None and not os.environ.get("MEMLIFE_CHROMIUM"),
                    reason="no chromium: `make chromium` installs Debian's package")
def test_chromium_draws_the_page_with_its_figures_and_no_network(tmp_path, built):
    from PIL import Image

    page, _ = built
    # at the page's place in a copy of the layout, so that its relative image links reach the figures
    folder = tmp_path.joinpath(*executed.FOLDER)
    folder.mkdir(parents=True)
    (tmp_path / "figures").symlink_to(ROOT / "figures")
    (folder / "index.html").write_text(page)
    png = results_page.render_png(folder / "index.html", tmp_path / "page.png")
    with Image.open(png) as img:
        width, height = img.size
        rgb = img.convert("RGB")
    assert width == results_page.WIDTH
    # the two figures alone are ~1,000 px tall at the page's width: a page whose images did not load is short
    assert 2000 < height < 8000, height
    # cut below the page: the last rows are the page's background (#eef1f5, to the 256 colours' rounding)
    assert all(abs(a - b) <= 3 for a, b in zip(rgb.getpixel((width // 2, height - 5)), (0xEE, 0xF1, 0xF5)))
