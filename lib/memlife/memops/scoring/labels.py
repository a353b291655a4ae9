"""The scoring step: replies -> the scorer's labels, then the LLM judge's, -> the per-probe records.

`memlife.memops.systems.answering.run` leaves one reply a probe, system and setting; `run` here
labels them:

1. the deterministic scorer (`metrics.score`) on every reply, from its raw text each time, so
   the labels are always the current scorer's, whenever the reply was asked;
2. the LLM judge (`judging`) on the replies with a label the scorer left undecided and on a fixed
   sample of the others (`wants_judge`), when a judge is configured (`endpoints.judge_available`)
   or the configuration asks for it. Each verdict is journalled under
   ``judge/<system>__<setting>.jsonl`` keyed by the reply (its run key and raw text): a rerun,
   or a run killed halfway, asks the judge only for what it has not judged;
3. the records, one row a reply with its labels, sorted and written to ``records.parquet``.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from memlife.memops.data.response import parse_response
from memlife.memops.data.schema import Instance
from memlife.memops.scoring import judging, metrics
from memlife.memops.systems.answering import REPLY_COLUMNS, EvalConfig, Journal, parsed_columns

LABEL_COLUMNS = ("accuracy", "operation", "provenance", "leakage", "stale", "reflect")  # True/False/None (boolean)
# A record: the reply's columns and the scorer's (op_f1 a number, `undecided` the labels it could not decide)
RECORD_COLUMNS = (*REPLY_COLUMNS, "accuracy", "op_f1", "provenance", "leakage", "stale", "reflect", "operation",
                  "undecided")


def scored(rec: dict, inst: Instance, probe) -> dict:
    """One reply record with its parsed columns and its labels recomputed from its raw reply by
    the current scorer."""
    parsed = parse_response(rec["raw"], rec.get("finish_reason"))
    return {**rec, **parsed_columns(parsed), **metrics.score(parsed, inst, probe).as_record()}


def rescore(records: list[dict], instances: list[Instance]) -> list[dict]:
    """Every record `scored` against its instance and probe (a record whose probe is not among
    `instances` is kept as it is)."""
    probes = {(i.instance_id, p.probe_id): (i, p) for i in instances for p in i.probes}
    out = []
    for rec in records:
        found = probes.get((rec["instance_id"], rec["probe_id"]))
        out.append(scored(rec, *found) if found else rec)
    return out


def judge_sampled(rec: dict, share: float, seed: int = 0) -> bool:
    """Whether a reply the scorer decided fully is in the judge's agreement sample: a fixed
    draw per (system, setting, instance, probe, seed), so a resumed run samples the same ones."""
    if share <= 0:
        return False
    key = json.dumps([rec["system"], rec["setting"], rec["instance_id"], rec["probe_id"], seed])
    return int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) / 0x100000000 < share


def wants_judge(rec: dict, share: float, seed: int = 0) -> bool:
    """The LLM judge labels a reply with a label the scorer left undecided, and the sample."""
    return bool(rec.get("undecided")) or judge_sampled(rec, share, seed)


def judge_reply(inst: Instance, probe, parsed, client) -> dict:
    """The judge's verdict on one reply, as record columns (judge_raw, judge_valid, judge_model,
    judge_error where it refused or did not parse, and one judge_<label> a label)."""
    from memlife.models import llm

    structured = getattr(getattr(client, "endpoint", None), "structured_output", False)
    fmt = llm.named_schema_format("MemOpsJudgement", judging.JUDGE_SCHEMA) if structured else None
    c = client.complete(judging.judge_messages(inst, probe, parsed), max_tokens=60, response_format=fmt)
    out = {"judge_raw": c.text, "judge_valid": True, "judge_model": getattr(client, "model", None)}
    if c.refusal is not None:
        out.update(judge_valid=False, judge_error=f"the judge refused: {c.refusal[:200]}")
        out.update({f"judge_{k}": None for k in judging.JUDGE_LABELS})
        return out
    try:
        labels = judging.parse_judge(c.text)
    except judging.JudgeParseError as exc:
        out.update(judge_valid=False, judge_error=str(exc))
        labels = {k: None for k in judging.JUDGE_LABELS}
    out.update({f"judge_{k}": v for k, v in labels.items()})
    return out


def _reply_key(rec: dict) -> str:
    """What a verdict is a verdict on: one reply (its system, setting, run key, probe and raw text)."""
    blob = json.dumps([rec["system"], rec["setting"], rec["run_key"], rec["instance_id"], rec["probe_id"], rec["raw"]])
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _judged(out_dir: Path, records: list[dict], instances: list[Instance], cfg: EvalConfig, client,
            progress: bool) -> list[dict]:
    """The records with the judge's columns on those it is asked about, from its journal where
    it judged them before."""
    from memlife.base.progress import bar as progress_bar

    probes = {(i.instance_id, p.probe_id): (i, p) for i in instances for p in i.probes}
    wanted = [r for r in records if wants_judge(r, cfg.judge_sample, cfg.seed)]
    journals: dict[tuple, Journal] = {}
    done: dict[str, dict] = {}
    for system, setting in sorted({(r["system"], r["setting"]) for r in wanted}):
        j = journals[(system, setting)] = Journal(out_dir / "judge" / f"{system}__{setting}.jsonl")
        done.update({v["reply_key"]: v for v in j.read()})
    out = []
    with progress_bar(total=len(wanted), desc="replies judged", disable=not progress) as bar:
        for rec in records:
            if not wants_judge(rec, cfg.judge_sample, cfg.seed):
                out.append(rec)
                continue
            key = _reply_key(rec)
            if key not in done:
                inst, probe = probes[(rec["instance_id"], rec["probe_id"])]
                parsed = parse_response(rec["raw"], rec.get("finish_reason"))
                done[key] = {"reply_key": key, **judge_reply(inst, probe, parsed, client)}
                journals[(rec["system"], rec["setting"])].append(done[key])
            out.append({**rec, **{k: v for k, v in done[key].items() if k != "reply_key"}})
            bar.update(1)
    return out

def run(replies, instances: list[Instance], cfg: EvalConfig, out_dir: Path, *, judge_client=None,
        progress: bool = True):
    """The records of `replies` (`answering.run`'s frame): scored, judged where the judge is on
    (`cfg.judge`, or when None `endpoints.judge_available()`), sorted, written to
    ``records.parquet`` and returned."""
    import pandas as pd

    from memlife.models import endpoints, llm

    out_dir = Path(out_dir)
    use_judge = cfg.judge if cfg.judge is not None else endpoints.judge_available()
    records = rescore(replies.to_dict("records"), instances)
    if use_judge and records:
        records = _judged(out_dir, records, instances, cfg, judge_client or llm.get_client("judge"), progress)
    config = out_dir / "config.json"
    if config.is_file():  # answering wrote it: what the labels came from goes beside what the replies did
        written = json.loads(config.read_text())
        config.write_text(json.dumps({**written, "judge_used": bool(use_judge)}, indent=1, sort_keys=True))
    df = pd.DataFrame([dict(sorted(r.items())) for r in records])
    if df.empty:
        df = pd.DataFrame(columns=list(RECORD_COLUMNS))
    df = df.sort_values(["system", "setting", "instance_id", "probe_id"], kind="stable").reset_index(drop=True)
    for col in LABEL_COLUMNS:
        if col in df.columns:  # None: not applicable, or left undecided (`undecided` names which)
            df[col] = df[col].astype("boolean")
    df.to_parquet(out_dir / "records.parquet", index=False)
    return df

