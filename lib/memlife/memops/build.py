"""The benchmark's build for one profile: plan -> realize -> gate (with regeneration) -> embed.

It runs the data stage's steps in order, with the scorer's check that every probe's gold reply
scores perfect among the gates (`memlife.memops.scoring.metrics.gold_failures`): the one module
of the track, besides its command line, that imports more than one stage.

Writes `instances.jsonl` (one canonical line per retained instance, in plan order),
`gate_log.json` (every failed attempt with its reasons; the retention statistics) and
`manifest.json` (parameters, counts, sha256 of the instances file). No timestamps anywhere, so
the same seed and profile give byte-identical files.
"""
from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

from memlife.base.progress import bar as progress_bar
from memlife.memops.data import gates, longctx, realize
from memlife.memops.data.plan import PlanParams, plan
from memlife.memops.data.schema import Instance, dumps
from memlife.memops.scoring.metrics import gold_failures

NOTEBOOK = "10_memops_build"


@dataclass(frozen=True)
class BuildParams:
    profile: str
    seed: int
    n_topics: int
    max_conversations: int | None
    longctx_tokens: int
    max_attempts: int = 3
    realizer: str = "auto"  # auto | template | llm
    verifier: str = "auto"  # auto (the LLM verifier when a verifier endpoint is configured) | off
    filler_path: str | None = None  # UltraChat JSONL for the long context; None: ShareGPT's task chat
    # Each history's length varies by up to this fraction around longctx_tokens (longctx.target_tokens)
    longctx_spread: float = 0.0


def params_for(profile: str) -> BuildParams:
    from memlife.base import config

    p = config.notebook_params(profile, NOTEBOOK)
    return BuildParams(profile=p["profile"], seed=int(p["seed"]), n_topics=int(p["n_topics"]),
                       max_conversations=p.get("max_conversations"),
                       longctx_tokens=int(p["longctx_tokens"]), max_attempts=int(p.get("max_attempts", 3)),
                       realizer=p.get("realizer", "auto"), verifier=p.get("verifier", "auto"),
                       filler_path=p.get("filler_path"), longctx_spread=float(p.get("longctx_spread", 0.0)))


def _use_llm(choice: str) -> bool:
    if choice == "template":
        return False
    if choice == "llm":
        return True
    if choice != "auto":
        raise ValueError(f"realizer must be auto, template or llm, got {choice!r}")
    from memlife.models import endpoints

    return endpoints.role_configured("generator")


def _verifier_on(choice: str) -> bool:
    if choice == "off":
        return False
    if choice != "auto":
        raise ValueError(f"verifier must be auto or off, got {choice!r}")
    from memlife.models import endpoints

    return endpoints.role_configured("verifier")


@dataclass
class BuildResult:
    instances: list[Instance]
    log: gates.GateLog
    manifest: dict


def build(params: BuildParams, out_dir: Path | None = None, progress: bool = True) -> BuildResult:
    cps = plan(PlanParams(params.n_topics, params.seed, params.max_conversations))
    use_llm, verify = _use_llm(params.realizer), _verifier_on(params.verifier)
    log = gates.GateLog()
    kept: list[Instance] = []

    def one(cp) -> tuple[Instance | None, gates.GateLog]:
        def attempt(k: int, feedback: str) -> Instance:
            inst = realize.llm_instance(cp, k, feedback) if use_llm else realize.template_instance(cp, k)
            target = longctx.target_tokens(params.longctx_tokens, params.longctx_spread, params.seed, inst.instance_id)
            return longctx.embed(inst, target, params.seed, filler_path=params.filler_path)
        own = gates.GateLog()  # merged in plan order below, so the log does not depend on timing
        return gates.generate_with_gates(attempt, cp.instance_id, own, params.max_attempts, verify,
                                         gold_failures=gold_failures), own

    # An LLM generator taking parallel calls writes several conversations at once; the dataset and
    # its gate log are the same as one at a time.
    workers = _generator_concurrency() if use_llm else 1
    bar = progress_bar(total=len(cps), desc="memops build", disable=not progress)
    with bar:
        for inst, own in _in_order(one, cps, workers, bar):
            log.attempts += own.attempts
            log.retained += own.retained
            log.dropped += own.dropped
            if inst is not None:
                kept.append(inst)
    lines = "".join(dumps(i) + "\n" for i in kept)
    manifest = {
        "params": asdict(params),
        "realizer": "llm" if use_llm else "template",
        "llm_verifier": verify,
        "planned_conversations": len(cps),
        "instances": len(kept),
        "probes": sum(len(i.probes) for i in kept),
        "op_types": dict(sorted(Counter(i.op_type for i in kept).items())),
        "categories": dict(sorted(Counter(i.category for i in kept).items())),
        "topics": len({i.topic_id for i in kept}),
        "generated_attempts": log.generated,
        "retained": len(log.retained),
        "sha256": hashlib.sha256(lines.encode("utf-8")).hexdigest(),
    }
    if out_dir is not None:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        (out / "instances.jsonl").write_text(lines, encoding="utf-8")
        (out / "gate_log.json").write_text(json.dumps(log.to_json(), indent=1, sort_keys=True) + "\n")
        (out / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return BuildResult(kept, log, manifest)


def _generator_concurrency() -> int:
    from memlife.models import endpoints

    return max(1, endpoints.endpoint_for("generator").concurrency)


def _in_order(fn, items, workers: int, bar):
    """fn(item) for every item, yielded in order, on `workers` threads; the first failure or an
    interrupt cancels the items not started (the replies of those done are cached)."""
    if workers <= 1:
        for item in items:
            yield fn(item)
            bar.update(1)
        return
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(max_workers=workers)
    try:
        for out in pool.map(fn, items):
            yield out
            bar.update(1)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def validate_file(path: Path) -> list[tuple[str, list[str]]]:
    """(instance_id, reasons) for every instance in a JSONL file that fails a deterministic gate."""
    bad: list[tuple[str, list[str]]] = []
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                bad.append((f"{path}:{lineno}", [f"[schema] not valid JSON: {exc.msg}"]))
                continue
            _, failures = gates.check_raw(obj, gold_failures)
            if failures:
                iid = obj.get("instance_id", f"{path}:{lineno}") if isinstance(obj, dict) else f"{path}:{lineno}"
                bad.append((str(iid), [str(f) for f in failures]))
    return bad


def load_or_build(params: BuildParams, out_dir: Path, progress: bool = True) -> list[Instance]:
    """The dataset `params` describes: read from `out_dir` when its manifest records these very
    parameters and its instances file still has the recorded SHA-256, else built there afresh.
    The build is deterministic, so reading is the same as rebuilding, minus the time."""
    from memlife.memops.data.schema import load_instances

    out = Path(out_dir)
    manifest, instances = out / "manifest.json", out / "instances.jsonl"
    if manifest.is_file() and instances.is_file():
        recorded = json.loads(manifest.read_text())
        if (recorded.get("params") == json.loads(json.dumps(asdict(params)))
                and recorded.get("sha256") == hashlib.sha256(instances.read_bytes()).hexdigest()):
            return load_instances(instances)
    return build(params, out, progress=progress).instances
