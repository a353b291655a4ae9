"""Where every profile reads and writes.

Outputs are scoped by profile so that a smoke run (what nbval and CI execute) never
overwrites the quick profile's records, nor the tables and figures committed from it.
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

PROFILES = ("smoke", "quick", "paper")
# The profile whose tables and figures are committed at results/tables and figures/.
COMMITTED_PROFILE = "quick"


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


@dataclass(frozen=True)
class Layout:
    profile: str
    root: Path

    @property
    def data(self) -> Path:
        return self.root / "data" / self.profile

    @property
    def run(self) -> Path:
        """Per-question records and other rebuilt outputs of this profile."""
        return self.root / "results" / self.profile

    @property
    def tables(self) -> Path:
        if self.profile == COMMITTED_PROFILE:
            return self.root / "results" / "tables"
        return self.run / "tables"

    @property
    def figures(self) -> Path:
        if self.profile == COMMITTED_PROFILE:
            return self.root / "figures"
        return self.run / "figures"

    @property
    def usage(self) -> Path:
        return self.root / "results" / "usage"

    @property
    def logs(self) -> Path:
        """Logs of what every profile shares: the llama-server build and server."""
        return self.root / "results" / "logs"

    @property
    def run_logs(self) -> Path:
        """This profile's notebook logs: what each kernel printed and logged, its notices."""
        return self.logs / self.profile

    @property
    def cache(self) -> Path:
        return Path(os.environ.get("MEMLIFE_CACHE_DIR", self.root / ".cache"))


def layout(profile: str, root: Path | None = None) -> Layout:
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; expected one of {PROFILES}")
    return Layout(profile=profile, root=Path(root) if root else repo_root())


def file_sha256(path: Path) -> str:
    """SHA-256 of a file's bytes, read in blocks (pinned data files and recordings run to GBs)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
