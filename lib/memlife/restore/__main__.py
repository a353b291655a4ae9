"""Command line: `python -m memlife.restore decompose RECORDS --out CSV`."""
from __future__ import annotations

import argparse
import sys

from .decompose import RecordsError, decompose_file


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m memlife.restore")
    sub = parser.add_subparsers(dest="command", required=True)
    dec = sub.add_parser(
        "decompose",
        help="per policy x budget x regime x reader x judge: irreversible / recoverable / residual",
    )
    dec.add_argument("records", help="restore records, .parquet or .csv (DESIGN.md contract)")
    dec.add_argument("--out", required=True, help="CSV to write")
    args = parser.parse_args(argv)
    try:
        table = decompose_file(args.records, args.out)
    except (RecordsError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {len(table)} cells to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
