"""Publishing: a finished run's tables and figures become the committed ones.

``python -m memlife.running.publish publish --profile quick`` (the last step of ``make publish``)
copies them to results/tables/ and figures/, writes the executed notebooks' HTML
(``memlife.running.executed``), records the run's profile and commit, and writes the results page
from what is now committed (``memlife.running.results_page``); a committed file the run no longer
writes is removed. ``python -m memlife.running.publish page`` (``make results-page``) writes the
results page alone, from the committed results, without any run.
"""
from __future__ import annotations

from pathlib import Path

# ----------------------------------------------------------------------------- the committed outputs

_PUBLISHED_SUFFIXES = {".csv", ".md", ".png", ".pdf"}


def publish(profile: str, root: Path | None = None) -> dict[str, list[str]]:
    """Make `profile`'s tables and figures the committed ones (results/tables/, figures/): copied
    from a run in which every notebook executed; a committed file that run no longer writes is
    removed. Returns, per destination, the files that changed."""
    import filecmp
    import shutil

    from memlife.base import paths

    lay = paths.layout(profile, root)
    missing = sorted(p.stem for p in (lay.root / "notebooks").glob("[0-9][0-9]_*.ipynb")
                     if not (lay.notebooks / p.name).is_file())
    if missing:
        raise SystemExit(f"publish: the {profile} run is incomplete, {missing} did not execute "
                         f"(no {lay.notebooks.relative_to(lay.root)}/NAME.ipynb): run `make reproduce PROFILE={profile}`")
    changed: dict[str, list[str]] = {}
    for src, dst in zip((lay.tables, lay.figures), paths.published(lay.root)):
        dst.mkdir(parents=True, exist_ok=True)
        made = {p.name for p in src.iterdir() if p.suffix in _PUBLISHED_SUFFIXES} if src.is_dir() else set()
        diff = []
        for name in sorted(made):
            if not (dst / name).is_file() or not filecmp.cmp(src / name, dst / name, shallow=False):
                shutil.copyfile(src / name, dst / name)
                diff.append(name)
        for stale in sorted(p for p in dst.iterdir() if p.suffix in _PUBLISHED_SUFFIXES and p.name not in made):
            stale.unlink()
            diff.append(f"{stale.name} (removed)")
        changed[str(dst.relative_to(lay.root))] = diff
    return changed


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m memlife.running.publish")
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("publish", help="a profile's tables, figures and executed notebooks become the committed ones")
    p.add_argument("--profile", default=None, help="default: the committed profile (quick)")
    sub.add_parser("page", help="results/notebooks/index.html and index.png written again from the committed results")
    args = ap.parse_args(argv)
    from memlife.base import paths
    from memlife.running import executed, results_page

    root = paths.repo_root()
    folder = "/".join(executed.FOLDER)
    try:
        if args.command == "page":
            changed = {folder: results_page.write(root)}
        else:
            results_page.chromium()  # before anything is copied: the page's picture needs it
            profile = args.profile or paths.COMMITTED_PROFILE
            changed = publish(profile)
            lay = paths.layout(profile)
            changed[folder] = executed.publish(lay.notebooks, lay.root)
            if results_page.write_record(lay.root, profile):
                changed[folder].append(results_page.RECORD)
            changed[folder] += results_page.write(lay.root)
    except results_page.PageError as e:
        raise SystemExit(f"publish: {e}") from None
    for where, files in changed.items():
        print(f"== published {where}/: " + (f"{len(files)} changed: {', '.join(files)}" if files else "unchanged"))
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main())
