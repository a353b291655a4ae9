"""The answering step: systems x settings x probes -> one reply each, journalled and resumable.

Layout under `paths.layout(profile).run / "memops"`:

  journal/<system>__<setting>.jsonl       one line per answered probe (the reply, no label), appended and fsynced
  stores/<run key>/<system>/<hash>/       Mem0 / MemOS / Temp-LoRA stores, one per history
  config.json                             what the replies were made with (reader, run key, grammar, caps)

The run key is a hash of every parameter that changes an answer or a store (reader model,
seed, top-k, token caps, Temp-LoRA epochs, Mem0 mode); each journal line carries it. Resuming: a
probe already journalled under the current key is not asked again; a history whose probes are
all journalled is not ingested again; a store without its INGESTED marker is rebuilt from
scratch (see baselines.IngestMarker). Changing such a parameter starts a fresh set of answers and
stores instead of silently reusing the old ones, and `run` returns only the current key's
replies to the current selection of probes. Every model call is cached by
`memlife.models.reply_cache`, so a killed run that restarts repeats no call — at most the one that
was in flight when it died.

The replies go on to `memlife.memops.scoring.labels.run`, which labels them (scorer, then judge)
and writes records.parquet.
"""
from __future__ import annotations

import hashlib
import json
import os
import threading
from dataclasses import asdict, dataclass, field, replace
from functools import lru_cache
from pathlib import Path

from memlife.memops.data.response import applicable_labels, gold_response
from memlife.memops.systems import baselines, reading, registry, temp_lora
from memlife.memops.data.response import grammar_longest_reply
from memlife.memops.data.schema import Instance, load_instances
from memlife.memops.systems.baselines import RETRIEVAL_TOKENS

REPLY_COLUMNS = (
    "system", "setting", "instance_id", "topic_id", "op_type", "probe_id", "probe_type", "multi_hop",
    "malformed", "truncated", "finish_reason", "parse_error", "answer", "pred_operations", "pred_provenance", "raw",
    "context_tokens", "truncated_tokens", "retrieved", "prompt_tokens", "completion_tokens",
    "request_id", "reader", "variant", "run_key",
)


@dataclass
class EvalConfig:
    profile: str = "smoke"
    seed: int = 0
    systems: list[str] = field(default_factory=lambda: list(baselines.SYSTEMS))
    settings: list[str] = field(default_factory=lambda: list(reading.SETTINGS))
    max_instances: int | None = None  # a deterministic subset, balanced over op types
    max_probes: int | None = None     # the first probes of each instance
    # BM25: both granularities get the same context budget in tokens (baselines.RETRIEVAL_TOKENS);
    # top_k_turns / top_k_sessions cap their units besides it (None: no cap)
    top_k_turns: int | None = None
    top_k_sessions: int | None = None
    retrieval_tokens: int | None = RETRIEVAL_TOKENS  # (`systems` is a field name here)
    top_k_memories: int = 10
    # The reader's token cap. None: the longest reply the reply grammar admits (resolve_reply_cap),
    # so that no grammatical reply can be cut; a number below it is refused for the embedded reader.
    reader_max_tokens: int | None = None
    temp_lora_epochs: int = 2  # per chunk, every chunk of the history (temp_lora.TempLoRAConfig: the paper's 2)
    temp_lora_settings: list[str] = field(default_factory=lambda: ["adjacent"])
    mem0_infer: bool | None = None  # None: LLM extraction only when the reader's window holds its prompt
    extract_max_tokens: int = 384   # the cap on Mem0's and MemOS's own extraction calls
    judge: bool | None = None  # None: run the LLM judge exactly when endpoints.judge_available()
    # Tell the reader how to treat forgotten and superseded values (reading.system_prompt); the
    # paper reports no such hint, so off unless a profile turns it on.
    memory_hint: bool = False
    # The judge labels every reply the scorer left a label of undecided, and this share of the
    # others (a fixed sample, `judge_sampled`), whose labels it is compared with (agreement, kappa).
    judge_sample: float = 0.2
    # "": the configured reader model reads. A reference subject's name (memlife.subjects: gold,
    # evidence-oracle, noisy-oracle): it reads instead, with no model, through the model-free systems.
    subject: str = ""


# The EvalConfig fields that change an answer or a store; the others only choose what is asked.
ANSWER_FIELDS = ("seed", "top_k_turns", "top_k_sessions", "retrieval_tokens", "top_k_memories",
                 "reader_max_tokens", "temp_lora_epochs", "mem0_infer", "extract_max_tokens")


def run_key(cfg: "EvalConfig", reader_model: str, grammar_bounds: dict | None = None,
            grammar: str | None = None) -> str:
    fields = {f: getattr(cfg, f) for f in ANSWER_FIELDS}
    if grammar_bounds is not None:  # the embedded reader's sampling grammar changes its answers
        fields["grammar_bounds"] = grammar_bounds
    if not cfg.subject:  # the reader's prompt: a new prompt asks afresh, never reuses old answers
        fields["reader_prompt"] = hashlib.sha256(reading.system_prompt(cfg.memory_hint).encode()).hexdigest()[:12]
    if grammar is not None:  # and so does the grammar's form (its separators), not only its bounds
        fields["grammar_sha256"] = hashlib.sha256(grammar.encode()).hexdigest()
    if cfg.subject:  # only then: a model run keeps the key (and the journal) it always had
        from memlife import subjects as ref

        fields["subject"] = ref.canonical(cfg.subject)
        fields["noise"] = asdict(ref.Noise())
    blob = json.dumps({"reader": reader_model, **fields}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def system_run_key(key: str, spec: "registry.SystemSpec") -> str:
    """The run key of one system's answers: `key`, or for a system with a version (one's own,
    versioned by its source) a key of both, so that editing the system asks its probes afresh."""
    if not spec.version:
        return key
    return hashlib.sha256(f"{key}:{spec.name}:{spec.version}".encode()).hexdigest()[:12]


OP_ORDER = ("remember", "forget", "update", "reflect", "trajectory")  # the paper's order


def gold_grammar_bounds(instances: list[Instance]) -> dict[str, int]:
    """Grammar bounds that every gold response of the dataset fits: the embedded reader's
    grammar never rules out a perfect reply. From the whole dataset, so the grammar does not
    change with the selection asked."""
    from memlife.memops.data.response import bounds_covering

    return bounds_covering(gold_response(i, p).response for i in instances for p in i.probes)


class ReplyRoomError(ValueError):
    """The reader's token cap is below a gold response it could be asked to give, or below the
    longest reply its grammar admits."""


def resolve_reply_cap(configured: int | None, bounds: dict, *, bounded: bool) -> int:
    """The reader's token cap: `configured`, or when None the longest reply the grammar of
    `bounds` admits, which is also the most tokens such a reply can take (one ASCII byte a
    character, `response.grammar_longest_reply`). A reader sampling under that grammar (the
    embedded one) with a configured cap below it is refused: a reply within every bound could be
    cut off, which is a truncation the cap caused, not the model."""
    longest = grammar_longest_reply(bounds)
    if configured is None:
        return longest
    if bounded and int(configured) < longest:
        raise ReplyRoomError(f"reader_max_tokens={configured} is below the longest reply the reader's grammar admits "
                             f"({longest} tokens at most, bounds {bounds}): a reply within every bound could be cut "
                             f"off; raise it to at least {longest}, or leave it null to take exactly that")
    return int(configured)


def check_reply_room(reader: "reading.Reader", asked: list[tuple[Instance, list]]) -> int:
    """The longest gold response of the probes asked, in the reader's tokens, written as the
    reader's grammar writes it (pydantic's compact JSON: `response.reply_grammar` fixes every
    separator, so no reply spends tokens on whitespace); raises ReplyRoomError when it does not
    fit `reader.max_tokens` (a perfect reply would be cut off and reported truncated), or when the
    grammar does not admit it."""
    worst, where = 0, ""
    grammar = reader.grammar() if hasattr(reader, "grammar") else None
    for inst, probes in asked:
        for p in probes:
            raw = gold_response(inst, p).raw
            if grammar is not None and not grammar_admits(grammar, raw):
                raise ReplyRoomError(f"the reader's grammar rejects the gold response of probe {p.probe_id}: {raw[:200]}")
            n = reader.reply_tokens(raw)
            if n > worst:
                worst, where = n, p.probe_id
    if worst > reader.max_tokens:
        raise ReplyRoomError(f"reader_max_tokens={reader.max_tokens} is below the gold response of probe {where} "
                             f"({worst} tokens): a perfect reply could not fit; raise reader_max_tokens to at least {worst}")
    return worst


def grammar_admits(grammar: str, text: str) -> bool:
    """Whether the GBNF `grammar` admits `text` whole, checked by llguidance over its bytes (the
    embedded model's tokenizer is byte-level: any text it could write is a token sequence)."""
    import llguidance

    from memlife.models import tokens

    m = llguidance.LLMatcher(_ll_tokenizer(), llguidance.grammar_from("gbnf", grammar))
    return m.consume_tokens(tokens.embedded_ids(text)) and m.is_accepting()


@lru_cache(maxsize=1)
def _ll_tokenizer():
    import llguidance.hf

    from memlife.models import tokens

    return llguidance.hf.from_tokenizer(tokens.embedded_tokenizer())


def select_instances(instances: list[Instance], max_instances: int | None) -> list[Instance]:
    """Round-robin over op types (paper order) in instance-id order: any cut keeps them balanced."""
    ordered = sorted(instances, key=lambda i: i.instance_id)
    if max_instances is None or max_instances >= len(ordered):
        return ordered
    by_type: dict[str, list[Instance]] = {}
    for inst in ordered:
        by_type.setdefault(inst.op_type, []).append(inst)
    picked: list[Instance] = []
    while len(picked) < max_instances:
        for t in sorted(by_type, key=lambda t: (OP_ORDER.index(t) if t in OP_ORDER else 99, t)):
            if by_type[t] and len(picked) < max_instances:
                picked.append(by_type[t].pop(0))
    return sorted(picked, key=lambda i: i.instance_id)


def select_probes(chosen: list[Instance], max_probes: int | None) -> list[list]:
    """The probes to ask of each chosen instance: all of them, or `max_probes` each.

    A cut covers every label (a metric applies only to some probes: leakage to probes about a
    forgotten value, stale to superseded ones, reflect to reflections) and every probe type that
    the chosen instances offer, as far as the slots allow. Greedy set cover, rarest first: while
    something is uncovered, take the uncovered label or probe type with the fewest candidate
    probes left (StateTrajectory exists only on trajectory instances, a stale value only where an
    update or trajectory superseded one) and ask the candidate that covers most of what is still
    uncovered (ties: earlier instance, then an order that rotates with the instance's position).
    Free slots are then filled in that rotating order, probe types not yet asked first. Only the
    selection decides, so the same dataset and parameters always ask the same probes.
    """
    if max_probes is None:
        return [list(inst.probes) for inst in chosen]
    feats = {(pos, p.probe_id): {f"type:{p.probe_type}"} | {f"label:{k}" for k in applicable_labels(inst, p)}
             for pos, inst in enumerate(chosen) for p in inst.probes}
    rotation = {(pos, p.probe_id): (i - pos) % len(inst.probes)
                for pos, inst in enumerate(chosen) for i, p in enumerate(inst.probes)}
    picked: list[list] = [[] for _ in chosen]
    room = [min(max_probes, len(inst.probes)) for inst in chosen]
    asked_types: set[str] = set()

    def take(pos: int, probe) -> None:
        picked[pos].append(probe)
        room[pos] -= 1
        asked_types.add(probe.probe_type)

    def candidates() -> list[tuple[int, object]]:
        return [(pos, p) for pos, inst in enumerate(chosen) if room[pos] > 0
                for p in inst.probes if p not in picked[pos]]

    uncovered = set().union(*feats.values()) if feats else set()
    while uncovered:
        cands = candidates()
        offer = {f: sum(f in feats[(pos, p.probe_id)] for pos, p in cands) for f in uncovered}
        offer = {f: n for f, n in offer.items() if n}
        if not offer:
            break
        rarest = min(offer, key=lambda f: (offer[f], f))
        pos, probe = min(((pos, p) for pos, p in cands if rarest in feats[(pos, p.probe_id)]),
                         key=lambda c: (-len(feats[(c[0], c[1].probe_id)] & uncovered), c[0],
                                        rotation[(c[0], c[1].probe_id)]))
        take(pos, probe)
        uncovered -= feats[(pos, probe.probe_id)]
    for pos, inst in enumerate(chosen):
        while room[pos] > 0:
            rest = [p for p in inst.probes if p not in picked[pos]]
            take(pos, min(rest, key=lambda p: (p.probe_type in asked_types, rotation[(pos, p.probe_id)])))
    # asked in the instance's own probe order
    return [sorted(ps, key=lambda p: inst.probes.index(p)) for inst, ps in zip(chosen, picked)]


class Journal:
    """Append-only JSONL; a torn last line (killed mid-write) is ignored and overwritten."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()  # instances answered in parallel append to one journal

    def read(self) -> list[dict]:
        if not self.path.is_file():
            return []
        out, good_bytes = [], 0
        with open(self.path, "rb") as fh:
            for line in fh:
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:
                    break
                if not line.endswith(b"\n"):
                    out.pop()
                    break
                good_bytes += len(line)
        if good_bytes != self.path.stat().st_size:
            with open(self.path, "r+b") as fh:
                fh.truncate(good_bytes)
        return out

    def append(self, rec: dict) -> None:
        with self._lock, open(self.path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(rec, sort_keys=True, ensure_ascii=False) + "\n")
            fh.flush()
            os.fsync(fh.fileno())


def parsed_columns(parsed) -> dict:
    """The record columns read off a parsed reply: whether it parsed, why not, and its parts."""
    r = parsed.response
    return {
        "malformed": parsed.malformed, "parse_error": parsed.error,
        "answer": r.answer if r else None,
        "pred_operations": json.dumps([o.model_dump() for o in r.operations]) if r else None,
        "pred_provenance": json.dumps(r.provenance) if r else None,
    }


def _record(system: str, setting: str, inst: Instance, probe, ans: reading.Answer, reader_model: str) -> dict:
    parsed = ans.parsed
    return {
        "system": system, "setting": setting, "instance_id": inst.instance_id, "topic_id": inst.topic_id,
        "op_type": inst.op_type, "probe_id": probe.probe_id, "probe_type": probe.probe_type,
        "multi_hop": bool(probe.multi_hop),
        # truncated: the reply hit the token cap (finish_reason "length"), whether or not it parsed;
        # malformed: it did not parse. A malformed reply that is not truncated is the model failing
        # the format; one that is, the cap cutting it off.
        "truncated": ans.finish_reason == "length", "finish_reason": ans.finish_reason,
        **parsed_columns(parsed),
        "raw": parsed.raw, "context_tokens": ans.context_tokens, "truncated_tokens": ans.truncated_tokens,
        "retrieved": json.dumps(ans.retrieved), "prompt_tokens": ans.prompt_tokens,
        "completion_tokens": ans.completion_tokens, "request_id": ans.request_id, "reader": reader_model,
    }


def run(instances: list[Instance], cfg: EvalConfig, out_dir: Path, *, reader_client=None,
        progress: bool = True) -> "pd.DataFrame":  # noqa: F821
    """Answer every selected probe with every system in every setting; returns the replies (one
    row a probe, system and setting, sorted), for `memlife.memops.scoring.labels.run` to label."""
    from memlife.base.progress import bar as progress_bar
    from memlife.base.progress import notice
    from memlife.models import llm

    out_dir = Path(out_dir)
    reader_client = reader_client or llm.get_client("reader")
    # Every name resolved before any work: a typo or a module that does not import costs nothing.
    specs = registry.resolve_systems(cfg.systems, f"profile {cfg.profile!r}, notebooks.12_memops_eval.systems")
    if cfg.subject:
        from memlife.memops.systems.subjects import SubjectReader

        needs_model = [s.name for s in specs if not s.model_free]
        if needs_model or cfg.mem0_infer:
            model_free = [n for n, s in registry.registered_systems().items() if s.model_free]
            raise ValueError(f"reference subject {cfg.subject!r} reads without a model: systems {needs_model} "
                             f"and Mem0's LLM extraction need one (model-free: {model_free}, mem0_infer=False)")
        # The configured reader's client sets the window, so the subject sees what that model would.
        cap = resolve_reply_cap(cfg.reader_max_tokens, gold_grammar_bounds(instances), bounded=False)
        reader = SubjectReader(reader_client, max_tokens=cap, subject=cfg.subject, seed=cfg.seed)
        reader_model = reader.model
    else:
        bounds = gold_grammar_bounds(instances)
        reader = reading.Reader(reader_client, memory_hint=cfg.memory_hint, grammar_bounds=bounds)
        reader.max_tokens = resolve_reply_cap(cfg.reader_max_tokens, bounds, bounded=reader.is_bounded())
        reader_model = str(getattr(reader_client, "model", "?"))
    chosen = select_instances(instances, cfg.max_instances)
    asked = select_probes(chosen, cfg.max_probes)
    gold_tokens = None if cfg.subject else check_reply_room(reader, list(zip(chosen, asked)))
    grammar = reader.grammar_bounds if reader.is_bounded() else None
    # the cap as resolved is what changes an answer (None and the number it resolves to: one key)
    key = run_key(replace(cfg, reader_max_tokens=reader.max_tokens), reader_model, grammar,
                  reader.grammar() if grammar is not None else None)
    keys = {s.name: system_run_key(key, s) for s in specs}  # the paper's systems: `key` itself
    # The longest reply the grammar admits (characters, and so tokens at most): the embedded
    # reader's cap is never below it (resolve_reply_cap), so no reply within the grammar is cut.
    longest = grammar_longest_reply(grammar) if grammar is not None else None
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "config.json").write_text(json.dumps({**asdict(cfg), "reader": reader_model, "run_key": key,
                                                     "grammar_bounds": grammar,
                                                     "longest_gold_reply_tokens": gold_tokens,
                                                     "grammar_longest_reply_chars": longest,
                                                     "reader_cap_tokens": reader.max_tokens},
                                                    indent=1, sort_keys=True))
    # Temp-LoRA's generation gets the reader's token cap (and grammar): no grammatical reply is cut
    lora_cfg = temp_lora.TempLoRAConfig(epochs=cfg.temp_lora_epochs, max_new_tokens=reader.max_tokens)
    selection = set()
    work = []  # per system, per setting: the journal and the probes it still lacks
    for name in (s.name for s in specs):
        settings = [s for s in cfg.settings if name != "temp_lora" or s in cfg.temp_lora_settings]
        for setting in settings:
            journal = Journal(out_dir / "journal" / f"{name}__{setting}.jsonl")
            done = {(r["instance_id"], r["probe_id"]) for r in journal.read() if r.get("run_key") == keys[name]}
            selection |= {(name, setting, inst.instance_id, p.probe_id)
                          for inst, probes in zip(chosen, asked) for p in probes}
            todo = [(inst, [p for p in probes if (inst.instance_id, p.probe_id) not in done])
                    for inst, probes in zip(chosen, asked)]
            work.append((name, setting, journal, [(i, ps) for i, ps in todo if ps]))
    bar = progress_bar(total=sum(len(ps) for *_, todo in work for _, ps in todo), desc="probes answered",
                       disable=not progress)
    # An endpoint taking parallel calls answers several instances at once, for the systems whose
    # per-history state is their own (the embedded model, with one slot, keeps the given order,
    # which shares prompt prefixes); the records are the same, sorted by collect().
    workers = 1 if cfg.subject else max(1, int(getattr(getattr(reader_client, "endpoint", None), "concurrency", 1)))
    with bar:
        for spec in specs:
            name, system = spec.name, None
            try:
                for setting, journal, todo in ((st, j, t) for n, st, j, t in work if n == name):
                    bar.set_postfix_str(f"{name} / {setting}")
                    if todo and system is None:
                        system = registry.make_system(
                            name, reader=reader, store_root=out_dir / "stores" / keys[name],
                            top_k_turns=cfg.top_k_turns,
                            top_k_sessions=cfg.top_k_sessions, retrieval_tokens=cfg.retrieval_tokens,
                            top_k_memories=cfg.top_k_memories, seed=cfg.seed, temp_lora=lora_cfg,
                            mem0_infer=False if cfg.subject else cfg.mem0_infer,
                            extract_max_tokens=cfg.extract_max_tokens)

                    def answer_instance(inst, probes, system=system, setting=setting, journal=journal):
                        history = reading.history_for(inst, setting)
                        system.ingest(history)
                        for probe in probes:
                            if cfg.subject:
                                reader.bind(inst, probe, name, setting)
                            ans = system.answer(history, probe.question)
                            rec = _record(name, setting, inst, probe, ans, reader_model)
                            rec["variant"] = getattr(system, "variant", "")
                            rec["run_key"] = keys[name]
                            journal.append(rec)
                            bar.update(1)
                        # Each open Mem0 store holds its own embedder and Qdrant client: kept open,
                        # the paper's 403 histories x 2 settings outgrow any machine's memory.
                        release = getattr(system, "release", None)
                        if release is not None:
                            release(history)

                    if workers > 1 and spec.parallel:
                        parallel_instances(answer_instance, todo, workers)
                    else:
                        for inst, probes in todo:
                            answer_instance(inst, probes)
            finally:
                if system is not None:
                    system.close()
    replies = collect(out_dir, key=set(keys.values()), selection=selection)
    for message in run_notices(replies, ingest_summary(out_dir, key)):
        notice(message)
    return replies


# Systems whose state is kept per history, so that several instances can be answered at once
# (SystemSpec.parallel). Mem0 and MemOS share one store process and proxy; Temp-LoRA trains one
# adapter at a time.
PARALLEL_SYSTEMS = tuple(n for n, s in registry.registered_systems().items() if s.parallel)


def parallel_instances(answer_instance, todo, workers: int) -> None:
    """`answer_instance(inst, probes)` for every item of `todo` on `workers` threads. The first
    failure (the spending cap, a call failed for good) or an interrupt cancels what has not
    started; what finished is journalled, and a rerun asks only for the rest."""
    from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait

    pool = ThreadPoolExecutor(max_workers=workers)
    try:
        futures = [pool.submit(answer_instance, inst, probes) for inst, probes in todo]
        done, _ = wait(futures, return_when=FIRST_EXCEPTION)
        for f in futures:
            if f.done() and f.exception() is not None:
                raise f.exception()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


MALFORMED_NOTICE = 0.5  # a system x setting whose replies are mostly malformed is worth a line


def reply_counts(records):
    """Per system x setting: replies, those cut at the token cap (`truncated`), and those that
    ended on their own and did not parse (`malformed`: the model failing the format). Records
    without finish_reason (answered before it was recorded) count as not truncated."""
    import pandas as pd

    trunc = (records["truncated"].fillna(False).astype(bool) if "truncated" in records
             else pd.Series(False, index=records.index))
    df = records.assign(_t=trunc, _m=records["malformed"].astype(bool) & ~trunc)
    g = df.groupby(["system", "setting"], sort=True)
    return pd.DataFrame({"replies": g.size(), "truncated": g["_t"].sum().astype(int),
                         "malformed": g["_m"].sum().astype(int)})


def run_notices(records, ingested) -> list[str]:
    """What a run's user should hear about, in a line each: system x setting runs with replies
    cut at the token cap (truncated: every one is said), runs whose replies mostly failed the
    format on their own (malformed, not counting the truncated), contexts cut to fit the reader's
    window, and memory stores that were given sessions and stored nothing."""
    out = []
    if len(records) and "truncated_tokens" in records:
        cut = records[records["truncated_tokens"] > 0].groupby(["system", "setting"], sort=True)["truncated_tokens"]
        if len(cut):
            out.append("contexts cut to fit the reader's window (oldest turns dropped): " + ", ".join(
                f"{s}/{st} {len(g)} of {int(((records.system == s) & (records.setting == st)).sum())}, "
                f"{g.mean():,.0f} tokens on average" for (s, st), g in cut))
    if len(records):
        counts = reply_counts(records)
        cut = counts[counts["truncated"] > 0]
        if len(cut):
            out.append("replies cut off at the token cap (kept, labelled truncated, scored as failures; "
                       "raise reader_max_tokens to give them room): " + ", ".join(
                           f"{s}/{st} {int(r['truncated'])} of {int(r['replies'])}" for (s, st), r in cut.iterrows()))
        high = counts[counts["malformed"] > MALFORMED_NOTICE * counts["replies"]]
        if len(high):
            out.append("most replies malformed (ended on their own and did not parse; kept and labelled "
                       "malformed): " + ", ".join(
                           f"{s}/{st} {int(r['malformed'])} of {int(r['replies'])}" for (s, st), r in high.iterrows()))
    if len(ingested) and "memories_added" in ingested:
        empty = ingested[ingested["memories_added"].map(lambda v: sum(json.loads(v)) == 0 if isinstance(v, str) else False)]
        for system, group in empty.groupby("system", sort=True):
            errors = sum(len(json.loads(v)) for v in group.get("extract_errors", []) if isinstance(v, str))
            out.append(f"{system} stored no memory for {len(group)} of {int((ingested['system'] == system).sum())} "
                       f"histories ({errors} extraction replies did not parse); its answers read an empty store")
    return out


def collect(out_dir: Path, *, key: "str | set[str] | None" = None, selection: set | None = None):
    """The journals' replies as one sorted DataFrame: the lines of run key `key` (or of any key in
    a set of them) whose (system, setting, instance_id, probe_id) is in `selection` (None: all)."""
    import pandas as pd

    out_dir = Path(out_dir)
    keys = {key} if isinstance(key, str) else key
    recs = []
    for path in sorted((out_dir / "journal").glob("*.jsonl")):
        recs.extend(r for r in Journal(path).read()
                    if (keys is None or r.get("run_key") in keys)
                    and (selection is None or (r["system"], r["setting"], r["instance_id"], r["probe_id"]) in selection))
    df = pd.DataFrame(recs)
    if df.empty:
        df = pd.DataFrame(columns=list(REPLY_COLUMNS))
    return df.sort_values(["system", "setting", "instance_id", "probe_id"], kind="stable").reset_index(drop=True)


def ingest_summary(out_dir: Path, key: str | None = None):
    """One row per ingested (system, history) of run key `key` (default: the last run's, from
    config.json): what its INGESTED marker recorded."""
    import pandas as pd

    out_dir = Path(out_dir)
    if key is None and (out_dir / "config.json").is_file():
        key = json.loads((out_dir / "config.json").read_text()).get("run_key")
    rows = []
    for marker in sorted((out_dir / "stores").glob(f"{key or '*'}/*/*/INGESTED")):
        info = json.loads(marker.read_text())
        rows.append({k: (json.dumps(v) if isinstance(v, (list, dict)) else v) for k, v in info.items()})
    return pd.DataFrame(rows)


def load_dataset(profile: str) -> list[Instance]:
    from memlife.base import paths

    path = paths.layout(profile).data / "memops" / "instances.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: build the dataset first (notebook 10_memops_build)")
    return load_instances(path)
