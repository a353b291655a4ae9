"""MemOps dataset commands.

    python -m memlife.memops build --profile quick --out data/quick/memops
    python -m memlife.memops build --profile paper --offline   # paper scale, no model calls
    python -m memlife.memops validate data/quick/memops/instances.jsonl
    python -m memlife.memops score data/quick/memops/instances.jsonl replies.jsonl --out labels.jsonl
    python -m memlife.memops describe data/paper/memops/instances.jsonl
    python -m memlife.memops evaluate --instances data/quick/memops/instances.jsonl --out DIR --systems bm25_turn

`build` plans, realizes, gates and embeds the profile's dataset (configs/<profile>.yaml,
section notebooks.10_memops_build) and writes instances.jsonl, gate_log.json, manifest.json.
`validate` exits 0 when every instance passes the deterministic gates, else 1, printing each
failing instance_id with each reason.
`score` labels raw replies with the deterministic scorer: RESPONSES holds one
{"id", "probe_id", "response"} per line (the reply's raw text), LABELS gets one line per id
with accuracy, op_f1, provenance, leakage, stale, reflect, malformed and operation (null where a
label does not apply, "undecided" where the scorer's rules cannot decide it; op_f1 is the
continuous Op-F1, operation the paper's binary label). Bad input exits 1 naming the file, line
and field.
`describe` prints Table 2's statistics of a built instances file as one JSON object
(tokens_adjacent_mean, tokens_long_context_mean, tokens_long_context_max, conversations,
probes, ...; the quality-control rows from the gate_log.json beside it, null without one).
`evaluate` answers the probes with the systems (`memlife.memops.systems.answering`) and labels the
replies with the scorer (`memlife.memops.scoring.labels`, no LLM judge), writing DIR/records.parquet
as notebook 12 does; for scripted runs and tests.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from memlife.base import paths
from memlife.memops.build import build, params_for, validate_file


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m memlife.memops", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="build a profile's dataset")
    b.add_argument("--profile", required=True, help="any configs/<name>.yaml")
    b.add_argument("--out", type=Path, help="output folder (default: data/<profile>/memops)")
    b.add_argument("--seed", type=int, help="override the profile's seed")
    b.add_argument("--realizer", choices=("auto", "template", "llm"),
                   help="override the profile's realizer (auto: the LLM when a generator endpoint is configured)")
    b.add_argument("--filler", type=Path,
                   help="UltraChat JSONL for the unrelated conversations (default: ShareGPT's task chat, memlife.sharegpt)")
    b.add_argument("--offline", action="store_true",
                   help="template realizer and no LLM verifier, whatever endpoints the profile names")
    v = sub.add_parser("validate", help="check a JSONL file against the deterministic gates")
    v.add_argument("file", type=Path)
    sc = sub.add_parser("score", help="label raw replies with the deterministic scorer")
    sc.add_argument("instances", type=Path, help="instances.jsonl the replies answer")
    sc.add_argument("responses", type=Path, help='JSONL, one {"id", "probe_id", "response"} per line')
    sc.add_argument("--out", type=Path, required=True, help="JSONL labels, one line per id")
    d = sub.add_parser("describe", help="print Table 2's statistics of a built file as one JSON object")
    d.add_argument("file", type=Path, help="instances.jsonl written by build")
    e = sub.add_parser("evaluate", help="answer probes with memory systems and score the replies")
    e.add_argument("--instances", required=True, type=Path)
    e.add_argument("--out", required=True, type=Path)
    e.add_argument("--systems", help="comma-separated (default: the paper's six)")
    e.add_argument("--settings", help="comma-separated (default: adjacent,long_context)")
    e.add_argument("--max-instances", type=int)
    e.add_argument("--max-probes", type=int)
    e.add_argument("--top-k-memories", type=int, default=10)
    e.add_argument("--mem0-infer", choices=("auto", "yes", "no"), default="auto")
    e.add_argument("--extract-max-tokens", type=int, default=384)
    e.add_argument("--reader-max-tokens", type=int, default=None,
                   help="the reader's token cap (default: the longest reply its grammar admits)")
    args = ap.parse_args(argv)

    if args.cmd == "evaluate":
        return _evaluate(args)

    if args.cmd == "score":
        return _score(args)
    if args.cmd == "describe":
        return _describe(args)

    if args.cmd == "build":
        from memlife.models import endpoints

        endpoints.configure(args.profile, track="memops")  # "generator"/"verifier" endpoints, as the profile sets them
        params = params_for(args.profile)
        from dataclasses import replace

        if args.seed is not None:
            params = replace(params, seed=args.seed)
        if args.realizer is not None:
            params = replace(params, realizer=args.realizer)
        if args.filler is not None:
            params = replace(params, filler_path=str(args.filler))
        if args.offline:
            params = replace(params, realizer="template", verifier="off")
        out = args.out or paths.layout(args.profile).data / "memops"
        t0 = time.perf_counter()
        res = build(params, out)
        m = res.manifest
        print(f"{out / 'instances.jsonl'}: {m['instances']} instances, {m['probes']} probes, "
              f"{m['topics']} topics; {m['generated_attempts']} generated -> {m['retained']} retained; "
              f"sha256 {m['sha256']} ({time.perf_counter() - t0:.1f} s)")
        return 0

    if not args.file.is_file():
        print(f"{args.file}: no such file", file=sys.stderr)
        return 2
    unreadable = _unreadable(args.file)
    if unreadable:
        print(unreadable, file=sys.stderr)
        return 1
    bad = validate_file(args.file)
    for iid, reasons in bad:
        for r in reasons:
            print(f"{iid}: {r}")
    if bad:
        print(f"{len(bad)} instance(s) fail the deterministic gates", file=sys.stderr)
        return 1
    print(f"{args.file}: every instance passes the deterministic gates")
    return 0


def _unreadable(path: Path) -> str | None:
    """Why a JSONL file cannot be checked at all (bytes that are not UTF-8, no line), else None:
    an empty file would otherwise pass every gate."""
    from memlife.memops.data.schema import InstanceFileError, jsonl_lines

    try:
        lines = jsonl_lines(path)
    except InstanceFileError as exc:
        return str(exc)
    return None if lines else f"{path}: no JSON lines: an empty file passes nothing"


def _describe(args) -> int:
    import json

    from memlife.memops.data.describe import describe_file
    from memlife.memops.data.schema import InstanceFileError

    if not args.file.is_file():
        print(f"{args.file}: no such file", file=sys.stderr)
        return 1
    try:
        stats = describe_file(args.file)
    except (InstanceFileError, ValueError) as exc:
        print(exc, file=sys.stderr)
        return 1
    print(json.dumps(stats, indent=2))
    return 0


def _score(args) -> int:
    from memlife.memops.scoring.metrics import ResponsesFileError, score_file
    from memlife.memops.data.schema import InstanceFileError

    for path in (args.instances, args.responses):
        if not path.is_file():
            print(f"{path}: no such file", file=sys.stderr)
            return 1
        unreadable = _unreadable(path)
        if unreadable:
            print(unreadable, file=sys.stderr)
            return 1
    try:
        rows = score_file(args.instances, args.responses, args.out)
    except (InstanceFileError, ResponsesFileError) as exc:
        print(exc, file=sys.stderr)
        return 1
    n = len(rows)
    decided = [r["accuracy"] for r in rows if isinstance(r["accuracy"], bool)]
    acc = sum(decided) / len(decided) if decided else float("nan")
    bad = sum(r["malformed"] for r in rows)
    print(f"{args.out}: {n} replies scored; accuracy {acc:.3f}; {bad} malformed; "
          f"{n - len(decided)} with accuracy undecided")
    return 0


def _evaluate(args) -> int:
    import json

    from memlife.memops.data.schema import load_instances
    from memlife.memops.scoring import labels
    from memlife.memops.systems import answering, baselines, reading

    cfg = answering.EvalConfig(
        systems=(args.systems or ",".join(baselines.SYSTEMS)).split(","),
        settings=(args.settings or ",".join(reading.SETTINGS)).split(","),
        max_instances=args.max_instances, max_probes=args.max_probes, top_k_memories=args.top_k_memories,
        judge=False, extract_max_tokens=args.extract_max_tokens, reader_max_tokens=args.reader_max_tokens,
        mem0_infer={"auto": None, "yes": True, "no": False}[args.mem0_infer])
    instances = load_instances(args.instances)
    replies = answering.run(instances, cfg, args.out, progress=False)
    records = labels.run(replies, instances, cfg, args.out, progress=False)
    print(json.dumps({"records": len(records)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
