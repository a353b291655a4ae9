"""Dataset statistics for Table 2 and Figures 4-5, and a readable rendering of one instance."""
from __future__ import annotations

import random
import re
from collections import Counter
from itertools import combinations

import pandas as pd

from memlife.memops.data.schema import CATEGORIES, DISTRACTOR_TAGS, FIGURE_5C_TAGS, OP_TYPES, PROBE_TYPES, Instance
from memlife.paper_reference import MEMOPS_TABLE2

# Table 2's rows by section, in the paper's order (its values: `paper_reference.MEMOPS_TABLE2`).
SECTIONS = {
    "Scale": ("Unique topics", "Evidence conversations", "Evidence-conversation segments", "Dialogue turns",
              "Unique QA pairs", "Evaluation instances (adj. + long)"),
    "Operations and probes": ("Operation types", "Probe types", "Avg. operations per trajectory"),
    "Length": ("Avg. approx. tokens (adjacent)", "Avg. approx. tokens (long-context)",
               "Max. approx. tokens (long-context)"),
    "Grounding and difficulty": ("Avg. evidence spans per probe", "Multi-hop probes (%)",
                                 "Avg. context-level distractors"),
    "Quality control": ("Generated attempts", "Retained", "Retention rate (%)"),
}


def adjacent_tokens(inst: Instance) -> int:
    from memlife.models import tokens

    return sum(tokens.count(t.text) for seg in inst.segments for t in seg)


# Each Table 2 statistic's key in `describe_file`'s JSON, in Table 2's order.
STAT_KEYS = {
    "Unique topics": "topics",
    "Evidence conversations": "conversations",
    "Evidence-conversation segments": "segments",
    "Dialogue turns": "dialogue_turns",
    "Unique QA pairs": "probes",
    "Evaluation instances (adj. + long)": "evaluation_instances",
    "Operation types": "operation_types",
    "Probe types": "probe_types",
    "Avg. operations per trajectory": "operations_per_trajectory_mean",
    "Avg. approx. tokens (adjacent)": "tokens_adjacent_mean",
    "Avg. approx. tokens (long-context)": "tokens_long_context_mean",
    "Max. approx. tokens (long-context)": "tokens_long_context_max",
    "Avg. evidence spans per probe": "evidence_spans_per_probe_mean",
    "Multi-hop probes (%)": "multi_hop_probes_pct",
    "Avg. context-level distractors": "context_distractors_mean",
    "Generated attempts": "generated_attempts",
    "Retained": "retained",
    "Retention rate (%)": "retention_rate_pct",
}


def table2_stats(instances: list[Instance], gate_log: dict | None) -> dict:
    """Table 2's statistics of a dataset, keyed by the paper's row names; the quality-control rows
    are None without the build's gate log."""
    probes = [p for i in instances for p in i.probes]
    traj = [i for i in instances if i.op_type == "trajectory"]
    adj = [adjacent_tokens(i) for i in instances]
    longs = [i.long_context.approx_tokens for i in instances if i.long_context]
    return {
        "Unique topics": len({i.topic_id for i in instances}),
        "Evidence conversations": len(instances),
        "Evidence-conversation segments": sum(len(i.segments) for i in instances),
        "Dialogue turns": sum(len(s) for i in instances for s in i.segments),
        "Unique QA pairs": len(probes),
        "Evaluation instances (adj. + long)": 2 * len(probes),
        "Operation types": len({i.op_type for i in instances}),
        "Probe types": len({p.probe_type for p in probes}),
        "Avg. operations per trajectory": round(sum(len(i.operations) for i in traj) / len(traj), 2) if traj else None,
        "Avg. approx. tokens (adjacent)": round(sum(adj) / len(adj)),
        "Avg. approx. tokens (long-context)": round(sum(longs) / len(longs)) if longs else None,
        "Max. approx. tokens (long-context)": max(longs) if longs else None,
        "Avg. evidence spans per probe": round(sum(len(p.provenance) for p in probes) / len(probes), 2),
        "Multi-hop probes (%)": round(100 * sum(chained(i, p) for i in instances for p in i.probes) / len(probes), 1),
        "Avg. context-level distractors": round(
            sum(len(i.long_context.context_distractors) for i in instances if i.long_context) / len(instances), 2),
        "Generated attempts": gate_log["generated"] if gate_log else None,
        "Retained": gate_log["retained"] if gate_log else None,
        "Retention rate (%)": round(100 * gate_log["retention_rate"], 1) if gate_log else None,
    }


def table2(instances: list[Instance], gate_log: dict) -> pd.DataFrame:
    ours = table2_stats(instances, gate_log)
    rows = [{"section": sec, "statistic": k, "paper": MEMOPS_TABLE2[k], "ours": ours[k]}
            for sec, keys in SECTIONS.items() for k in keys]
    return pd.DataFrame(rows)


def describe_file(path) -> dict:
    """Table 2's statistics of a built instances file, as `python -m memlife.memops describe`
    prints them: `STAT_KEYS`' keys, and the file's SHA-256. The quality-control rows come from the
    gate_log.json the build wrote beside it, and are null where there is none."""
    import hashlib
    import json
    from pathlib import Path

    from memlife.memops.data.schema import load_instances

    path = Path(path)
    instances = load_instances(path)
    if not instances:
        raise ValueError(f"{path}: no instances")
    log_path = path.with_name("gate_log.json")
    gate_log = json.loads(log_path.read_text()) if log_path.is_file() else None
    stats = table2_stats(instances, gate_log)
    out = {STAT_KEYS[k]: v for k, v in stats.items()}
    out["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def chained(inst: Instance, probe) -> bool:
    """Whether a probe's answer is derived through a chain: its reasoning chain cites two or more
    different user turns, each quote found verbatim where it points. Read from the instance, so a
    flag without a chain behind it does not count."""
    chain = probe.reasoning_chain
    if chain is None:
        return False
    turns = {(s.segment, s.turn) for s in chain.source_facts}
    found = all(s.quote in inst.segments[s.segment][s.turn].text for s in chain.source_facts)
    return len(turns) >= 2 and found and len(chain.inferences) >= 2


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def opening_line(inst: Instance) -> str:
    """The first sentence of the conversation's first user turn, run on while it is under six words,
    so that a bare greeting ("Hi!") is read together with what follows it."""
    out: list[str] = []
    for sentence in _SENTENCE_END.split(inst.segments[0][0].text.strip()):
        out.append(sentence)
        if len(" ".join(out).split()) >= 6:
            break
    return " ".join(out)


def shared_openings(instances: list[Instance]) -> float:
    """Share of conversations whose opening line is also another conversation's."""
    lines = [opening_line(i) for i in instances]
    counts = Counter(lines)
    return sum(counts[line] > 1 for line in lines) / len(lines) if lines else 0.0


def _trigrams(inst: Instance) -> frozenset[tuple[str, str, str]]:
    words = re.findall(r"[a-z0-9']+", " ".join(t.text for seg in inst.segments for t in seg).lower())
    return frozenset(zip(words, words[1:], words[2:]))


def lexical_overlap(instances: list[Instance], seed: int = 0) -> pd.DataFrame:
    """Word-trigram Jaccard overlap between two conversations' dialogue, for every pair of one
    topic and for as many pairs of the same operation type from different topics (the baseline).

    Two conversations of one topic share a setting and a kit, so they overlap more than unrelated
    ones; how much more says whether the paraphrase banks keep a topic's conversations apart.
    """
    grams = {i.instance_id: _trigrams(i) for i in instances}

    def jaccard(a: Instance, b: Instance) -> float:
        x, y = grams[a.instance_id], grams[b.instance_id]
        return len(x & y) / len(x | y) if x | y else 0.0

    by_topic: dict[str, list[Instance]] = {}
    for i in instances:
        by_topic.setdefault(i.topic_id, []).append(i)
    rows = [{"pair": "same topic", "a": a.instance_id, "b": b.instance_id, "jaccard": jaccard(a, b)}
            for group in by_topic.values() for a, b in combinations(group, 2)]
    rng = random.Random(f"{seed}:lexical-overlap")
    by_op: dict[str, list[Instance]] = {}
    for i in instances:
        by_op.setdefault(i.op_type, []).append(i)
    pool = [(a, b) for group in by_op.values() for a, b in combinations(group, 2) if a.topic_id != b.topic_id]
    for a, b in rng.sample(pool, min(len(rows), len(pool))):
        rows.append({"pair": "different topics", "a": a.instance_id, "b": b.instance_id, "jaccard": jaccard(a, b)})
    return pd.DataFrame(rows, columns=["pair", "a", "b", "jaccard"])


def category_breakdown(instances: list[Instance]) -> pd.DataFrame:
    """Topics per category and sub-topic (Figure 4, left)."""
    seen = {}
    for i in instances:
        seen[i.topic_id] = (i.category, i.subtopic)
    df = pd.DataFrame(sorted(seen.values()), columns=["category", "subtopic"])
    out = df.groupby(["category", "subtopic"]).size().reset_index(name="topics")
    out["category"] = pd.Categorical(out["category"], categories=list(CATEGORIES), ordered=True)
    return out.sort_values(["category", "subtopic"]).reset_index(drop=True)


def token_lengths(instances: list[Instance]) -> pd.DataFrame:
    """Per evidence conversation: adjacent tokens and long-context tokens (Figure 4, right)."""
    return pd.DataFrame([
        {"instance_id": i.instance_id, "op_type": i.op_type, "adjacent_tokens": adjacent_tokens(i),
         "long_context_tokens": i.long_context.approx_tokens if i.long_context else None}
        for i in instances
    ])


def composition(instances: list[Instance]) -> dict[str, pd.DataFrame]:
    """Figure 5: operation types (conversations), probe types, and probes equipped with each distractor tag."""
    ops = Counter(i.op_type for i in instances)
    probes = Counter(p.probe_type for i in instances for p in i.probes)
    tags = Counter(t for i in instances for p in i.probes for t in {d.tag for d in p.distractors})
    return {
        "operations": pd.DataFrame({"op_type": list(OP_TYPES), "conversations": [ops[o] for o in OP_TYPES]}),
        "probes": pd.DataFrame({"probe_type": list(PROBE_TYPES), "probes": [probes[p] for p in PROBE_TYPES]}),
        "distractors": pd.DataFrame({"tag": list(DISTRACTOR_TAGS), "probes": [tags[t] for t in DISTRACTOR_TAGS],
                                     "in_figure_5c": [t in FIGURE_5C_TAGS for t in DISTRACTOR_TAGS]}),
    }


def render(inst: Instance, with_long_context: bool = False) -> str:
    """The whole instance as a reader would want to see it: dialogue, gold trace, probes."""
    out = [f"=== {inst.instance_id} [{inst.op_type}] {inst.category} / {inst.subtopic}: {inst.background.title}"]
    for s, seg in enumerate(inst.segments):
        out.append(f"--- session {s + 1}")
        out += [f"{t.role.upper():>9}: {t.text}" for t in seg]
    out.append("--- gold operation trace")
    for o in inst.operations:
        change = f"{o.old_value!r} -> {o.new_value!r}"
        out.append(f"  {o.op_id} {o.type:<8} {o.target}: {change}")
        out.append(f"       trigger (s{o.trigger.segment + 1} t{o.trigger.turn}): \"{o.trigger.quote}\"")
        for e in o.evidence:
            out.append(f"       evidence (s{e.segment + 1} t{e.turn}): \"{e.quote}\"")
        if o.unsupported:
            out.append(f"       not supported: {o.unsupported}")
    out.append("--- probes")
    for p in inst.probes:
        tags = sorted({d.tag for d in p.distractors})
        out.append(f"  [{p.probe_type}{' multi-hop' if p.multi_hop else ''}] {p.question}")
        out.append(f"      expected: {p.expected_answer}")
        out.append(f"      key: required={p.answer_key.required} forbidden={p.answer_key.forbidden}; distractors={tags}")
        if p.reasoning_chain:
            out.append(f"      chain: {' | '.join(p.reasoning_chain.inferences)}")
    if inst.long_context and with_long_context:
        lc = inst.long_context
        out.append(f"--- long context: {len(lc.conversations)} conversations, ~{lc.approx_tokens} tokens")
        for ins in lc.insertions:
            out.append(f"  session {ins.segment + 1} -> conversation {ins.conversation} at turn {ins.position}")
    return "\n".join(out)
