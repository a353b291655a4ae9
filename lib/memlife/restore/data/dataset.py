"""The restore track's LongMemEval data set: which file a profile reads, building it, and its stats.

``source``: ``real`` (LongMemEval-S, where ``make longmemeval`` fetched it), ``reconstructed``
(S-like haystacks rebuilt offline from the oracle file, :mod:`memlife.reconstruct`) or ``auto``.
The loader and validator of the files themselves are :mod:`memlife.longmem`.

Commands (``python -m memlife.restore.data.dataset ...``):

- ``validate FILE`` exits 0 when FILE is usable and 1 otherwise, printing each problem with its
  ``question_id``;
- ``build --profile P --out FILE`` writes the profile's reconstructed dataset (notebook 20's);
- ``stats FILE`` prints one JSON object describing a file (:func:`stats`).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from memlife import longmem
from memlife.base.paths import file_sha256

if TYPE_CHECKING:
    import pandas as pd

    from memlife.restore.data.units import Unit


SOURCES = ("reconstructed", "real", "auto")
RECONSTRUCTED_FILENAME = "longmemeval_s_reconstructed.json"


def resolve_source(source: str) -> str:
    """``auto`` is ``real`` where the S file has been downloaded (``make longmemeval``), else
    ``reconstructed``; the others are themselves."""
    if source not in SOURCES:
        raise ValueError(f"unknown source {source!r}; expected one of {SOURCES}")
    if source != "auto":
        return source
    from memlife.base import paths

    return "real" if (paths.repo_root() / longmem.LONGMEMEVAL_S_RELPATH).is_file() else "reconstructed"


def dataset_path(profile: str, source: str) -> Path:
    """Where a profile's LongMemEval-format file lives: the real S file (shared by all profiles)
    or the reconstruction under the profile's data directory."""
    from memlife.base import paths

    lay = paths.layout(profile)
    source = resolve_source(source)
    if source == "real":
        return lay.root / longmem.LONGMEMEVAL_S_RELPATH
    if source == "reconstructed":
        return lay.data / "longmemeval" / RECONSTRUCTED_FILENAME
    raise ValueError(f"unknown source {source!r}; expected one of {SOURCES}")


def load_dataset(profile: str, source: str) -> list[longmem.Question]:
    """The profile's questions (abstention left out); the real file is hash-checked."""
    source = resolve_source(source)
    path = dataset_path(profile, source)
    if not path.is_file():
        how = (f"download it from {longmem.LONGMEMEVAL_S_URL} (make longmemeval)" if source == "real"
               else "run notebooks/20_longmem_data.ipynb (make data) first")
        raise FileNotFoundError(f"{path} is missing; {how}")
    return longmem.load(path, expected_sha256=longmem.LONGMEMEVAL_S_SHA256 if source == "real" else None)


def build_records(source: str, *, n_questions: int | None, history_tokens: int, seed: int,
                  task_chat_share: float | None = None) -> list[dict]:
    """A profile's records in memory: the reconstruction (:mod:`memlife.reconstruct`; task chat's
    share of its filler, S's where None), or the real S file's selected questions (the same
    stratified selection; its own haystacks, as published: ``task_chat_share`` is S's own)."""
    from memlife import reconstruct

    source = resolve_source(source)
    if source == "reconstructed":
        share = reconstruct.S_TASK_CHAT_SHARE if task_chat_share is None else float(task_chat_share)
        return reconstruct.reconstruct(reconstruct.read_oracle(), n_questions=n_questions,
                                       history_tokens=history_tokens, seed=seed, task_chat_share=share)
    if source == "real":
        from memlife.base import paths

        path = paths.repo_root() / longmem.LONGMEMEVAL_S_RELPATH
        longmem.check_sha256(path, longmem.LONGMEMEVAL_S_SHA256)
        return reconstruct.select(longmem.read_json(path), n_questions, seed)
    raise ValueError(f"unknown source {source!r}; expected one of {SOURCES}")


# ---------------------------------------------------------------------------------------------
# Statistics of a file
# ---------------------------------------------------------------------------------------------
def gold_positions(history: "list[Unit]") -> list[float]:
    """Each gold unit's position as a quantile of its history's tokens (``units.units_of``), oldest
    = 0: the tokens before it plus half its own, over the history's tokens."""
    total = sum(u.tokens for u in history) or 1
    out, before = [], 0
    for u in history:
        if u.is_gold:
            out.append((before + u.tokens / 2) / total)
        before += u.tokens
    return out


SESSION_KINDS = ("other_users", "task_chat", "evidence")


def stats(records: list[dict]) -> dict:
    """What ``python -m memlife.restore.data.dataset stats`` prints: questions per type, history tokens,
    sessions and turns per history (median, min, max), the sessions by kind (other users',
    task chat, evidence: :func:`memlife.reconstruct.filler_kind`) as shares of all sessions and
    task chat's tokens a session, distinct sessions that are filler somewhere, and where the gold
    sits (each gold unit's token quantile: median, and the Kolmogorov–Smirnov statistic against
    the uniform distribution LongMemEval's placement implies)."""
    from scipy.stats import kstest

    from memlife.reconstruct import filler_kind
    from memlife.restore.data import units

    qs = [longmem.to_question(r) for r in records if not str(r["question_id"]).endswith("_abs")]
    per_type = {t: sum(q.question_type == t for q in qs) for t in longmem.QUESTION_TYPES}
    hist, sessions, turns, positions = [], [], [], []
    filler: set[str] = set()
    kinds = dict.fromkeys(SESSION_KINDS, 0)
    task_tokens: list[int] = []
    for q in qs:
        us = units.units_of(q)
        hist.append(sum(u.tokens for u in us))
        sessions.append(len(q.sessions))
        turns.append(len(us))
        evidence = set(q.answer_session_ids)
        filler.update(s.session_id for s in q.sessions if s.session_id not in evidence)
        positions.extend(gold_positions(us))
        by_session: dict[str, int] = {}
        for u in us:
            by_session[u.session_id] = by_session.get(u.session_id, 0) + u.tokens
        for s in q.sessions:
            kind = "evidence" if s.session_id in evidence else filler_kind(s.session_id)
            kinds[kind] += 1
            if kind == "task_chat":
                task_tokens.append(by_session.get(s.session_id, 0))

    def summary(v: list[float]) -> dict:
        return {"median": statistics.median(v), "min": min(v), "max": max(v)} if v else {}

    ks = kstest(positions, "uniform") if positions else None
    return {
        "questions": len(qs),
        "questions_per_type": per_type,
        "history_tokens": summary(hist),
        "sessions_per_history": summary(sessions),
        "turns_per_history": summary(turns),
        "session_share": {k: (n / sum(kinds.values()) if sum(kinds.values()) else None) for k, n in kinds.items()},
        "task_chat_tokens_per_session": statistics.mean(task_tokens) if task_tokens else None,
        "distinct_filler_sessions": len(filler),
        "gold_units": len(positions),
        "gold_position_quantile": {"median": statistics.median(positions) if positions else None,
                                   "ks_statistic": None if ks is None else float(ks.statistic),
                                   "ks_pvalue": None if ks is None else float(ks.pvalue)},
    }


def write(records: list[dict], path: Path | str) -> Path:
    """Write records as one JSON list (the real file's layout), byte-stable."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(records, ensure_ascii=False, indent=1) + "\n")
    return path


def stats_table(columns: dict[str, dict], oracle_types: dict[str, int]) -> "pd.DataFrame":
    """:func:`stats` of one or more files (``columns``: label -> stats), one column each, beside
    what the restore paper states of LongMemEval-S (470 questions, ~102k-token histories) and the
    questions per type of LongMemEval's own file (``oracle_types``, the same 470 questions as S's);
    gold placement beside the uniform law LongMemEval places it by, and the sessions a history and
    their kinds beside S's (:data:`memlife.reconstruct.S_SHAPE`). One row per statistic, then
    ``reference`` and ``reference_source``."""
    import pandas as pd

    from memlife import paper_reference as pr
    from memlife.reconstruct import S_SHAPE

    paper = f"restore paper, {pr.figures('data_questions')['section'].iloc[0]}"
    rows: list[tuple] = [("questions", lambda s: s["questions"], pr.figure("data_questions"), paper)]
    rows += [(f"questions: {t}", lambda s, t=t: s["questions_per_type"][t], oracle_types.get(t, 0),
              "LongMemEval oracle file") for t in longmem.QUESTION_TYPES]
    rows += [("history tokens: median", lambda s: s["history_tokens"].get("median"),
              pr.figure("data_history_tokens"), paper + " (~102k)")]
    for what, key in (("history tokens", "history_tokens"), ("turns per history", "turns_per_history")):
        for stat in (("min", "max") if key == "history_tokens" else ("median", "min", "max")):
            rows.append((f"{what}: {stat}", lambda s, key=key, stat=stat: s[key].get(stat), None, ""))
    s_shape = ("LongMemEval-S, counted on the session ids of a public sample of its histories "
               "(memlife.reconstruct.S_SHAPE)")
    rows += [(f"sessions per history: {stat}", lambda s, stat=stat: s["sessions_per_history"].get(stat),
              S_SHAPE["sessions_per_history"][stat], s_shape) for stat in ("median", "min", "max")]
    rows += [(f"sessions: {kind.replace('_', ' ')} (share)", lambda s, kind=kind: s["session_share"][kind],
              S_SHAPE["session_share"][kind], s_shape) for kind in SESSION_KINDS]
    rows += [("task chat: tokens a session (mean)", lambda s: s["task_chat_tokens_per_session"],
              S_SHAPE["task_chat_tokens_per_session"], s_shape + " (~1.5k)")]
    rows += [("distinct filler sessions", lambda s: s["distinct_filler_sessions"], None, ""),
             ("gold units", lambda s: s["gold_units"], None, ""),
             ("gold position (token quantile): median", lambda s: s["gold_position_quantile"]["median"], 0.5,
              "uniform placement"),
             ("gold position: KS statistic against uniform", lambda s: s["gold_position_quantile"]["ks_statistic"],
              0.0, "uniform placement")]
    return pd.DataFrame([{"statistic": name, **{label: get(st) for label, st in columns.items()},
                          "reference": ref, "reference_source": src} for name, get, ref, src in rows])


def _validate_command(path: Path) -> int:
    try:
        records = longmem.read_json(path)
    except longmem.LongMemEvalError as e:  # names the file itself
        print(e)
        return 1
    except OSError as e:
        print(f"{path}: {e}")
        return 1
    problems = longmem.validate(records)
    for p in problems:
        print(f"{path}: {p}")
    n_err = sum(p.severity == "error" for p in problems)
    if n_err:
        print(f"{path}: unusable, {n_err} error(s)")
        return 1
    n = len(records)
    n_abs = sum(str(r.get("question_id", "")).endswith("_abs") for r in records)
    sha = file_sha256(path)
    pin = {longmem.LONGMEMEVAL_S_SHA256: " (matches the pinned LongMemEval-S cleaned file)",
           longmem.ORACLE_SHA256: " (matches the pinned LongMemEval oracle file)"}.get(sha, "")
    print(f"{path}: usable, {n} questions ({n_abs} abstention, left out by the loader); sha256 {sha}{pin}")
    return 0


def _build_command(profile: str, out: Path) -> int:
    """The profile's dataset as notebook 20 builds it (its parameters, ``common`` merged in)."""
    from memlife.base import config

    p = config.notebook_params(profile, "20_longmem_data")
    records = build_records(p["source"], n_questions=p["n_questions"], history_tokens=int(p["history_tokens"]),
                            seed=int(p["seed"]), task_chat_share=p.get("task_chat_share"))
    write(records, out)
    print(f"{out}: {len(records)} questions ({p['source']}, history_tokens {p['history_tokens']}, "
          f"task_chat_share {p.get('task_chat_share')}, seed {p['seed']}); sha256 {file_sha256(out)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m memlife.restore.data.dataset", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    sub.add_parser("validate", help="check a LongMemEval-format file").add_argument("file", type=Path)
    b = sub.add_parser("build", help="write a profile's reconstructed dataset (notebook 20's)")
    b.add_argument("--profile", required=True)
    b.add_argument("--out", type=Path, required=True)
    sub.add_parser("stats", help="one JSON object describing a file").add_argument("file", type=Path)
    args = ap.parse_args(argv)
    if args.command == "validate":
        return _validate_command(args.file)
    if args.command == "build":
        return _build_command(args.profile, args.out)
    try:
        records = longmem.read_json(args.file)
    except (OSError, longmem.LongMemEvalError) as e:
        print(f"{args.file}: {e}", file=sys.stderr)
        return 1
    errors = [p for p in longmem.validate(records) if p.severity == "error"]
    if errors:
        print(f"{args.file}: unusable, {len(errors)} error(s); first: {errors[0]}", file=sys.stderr)
        return 1
    print(json.dumps(stats(records), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
