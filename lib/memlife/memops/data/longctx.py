"""Stage 4: embed an evidence conversation into a long history of unrelated conversations.

The unrelated conversations are real task-oriented user–assistant sessions: by default ShareGPT's
task chat, the conversations of the split LongMemEval-S draws its task chat from
(`memlife.sharegpt`, the restore track's filler too), standing in for the paper's UltraChat, which
no registry ships; an UltraChat JSONL where a profile's `filler_path` names one. Whole sessions are used where they fit; a filler session that states a value of the
instance's targets is never drawn (`gates.gate_filler_values` checks it). The three evidence
segments go into three different conversations, in order, each at an even turn index so that
user/assistant alternation is never broken; where each went is recorded. Context-level
distractors are short exchanges derived from the gold trace: they name an operation's target, so
they are semantically close to it, but they state no value of the user's and change nothing
(state-neutral).

The target length is a parameter, drawn per instance around a mean (`target_tokens`). The paper's
histories average 60,821 tokens (at most 68,309);
the embedded model has an 8k window, so the smoke and quick profiles use short histories on
purpose, and there a long session gives only its opening exchanges.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from functools import lru_cache

from memlife.memops.data.gates import target_values
from memlife.memops.data.schema import (
    ContextDistractor,
    Distractor,
    Insertion,
    Instance,
    LongContext,
    LongConversation,
    Turn,
    normalize_value,
)

# State-neutral exchanges about a target, one bank per operation type: each names the operation's
# target and fits what the operation does to it (keeping, deleting, changing, inferring), but
# states no value of the user's and changes nothing.
DISTRACTOR_TEMPLATES: dict[str, tuple[tuple[str, str], ...]] = {
    "remember": (
        ("Random question: how do people usually keep track of their {target}?",
         "Most people keep it in one place, such as a notes app, and check it there rather than from memory."),
        ("My friend was complaining about getting the {target} wrong on a form. Does that happen a lot?",
         "It's common. Forms rarely check it, so a small slip often only shows up when something goes missing."),
        ("Is it normal to be asked for a {target} this often?",
         "Fairly normal: many services ask again rather than store it, mostly for security or convenience."),
        ("What's the best way to double-check a {target} before sending it?",
         "Read it back once against the original source, and for anything with numbers compare it digit by digit."),
        ("Do you think a {target} is something you should write down or just keep in your head?",
         "For anything you'd be stuck without, keep a written copy somewhere safe; memory is not a great backup."),
        ("Who normally needs to know someone's {target}?",
         "Usually only the people or services acting on it; there's rarely a reason to share it more widely."),
    ),
    "forget": (
        ("Is it a bad idea to keep an old {target} saved in my phone?",
         "Once something has served its purpose it's safer to delete it; old codes and numbers are easy to misuse."),
        ("How long do companies usually keep a {target} after you stop using it?",
         "It varies; many keep records for a set period, and you can usually ask them to delete what they hold."),
        ("I read that people forget to clear out things like a {target}. Does that matter?",
         "It can: stale details in notes or password managers are a common source of mix-ups and leaks."),
        ("Can you ask a service to erase a {target} it has on file?",
         "In most places yes; a short written request naming the detail is usually enough."),
        ("What's a sensible habit for temporary details like a {target}?",
         "Note it somewhere temporary, use it, and delete it as soon as the thing it was for is done."),
        ("Should a {target} ever be shared over text message?",
         "Only when there's no better channel, and it's worth deleting the message afterwards."),
    ),
    "update": (
        ("How often do people end up changing their {target}?",
         "More often than they expect; plans shift, and the trouble is usually forgetting to tell everyone."),
        ("If a {target} changes, who usually needs to be told?",
         "Anyone who acts on it: the service itself, anyone you've shared it with, and any saved forms."),
        ("Is there a good way to make sure an old {target} doesn't get used by mistake?",
         "Replace it everywhere in one sitting and delete the old version from notes and autofill."),
        ("My colleague's {target} changed twice in a month. Is that unusual?",
         "Not really; it happens, and keeping one up-to-date copy is the simplest way to cope."),
        ("Do forms usually let you correct a {target} after submitting?",
         "Many do within a short window; after that you often have to contact them directly."),
        ("Why do services keep asking people to confirm their {target}?",
         "Because details go out of date; a quick confirmation prevents things going to the wrong place."),
    ),
    "reflect": (
        ("Do most people have a clear sense of their own {target}?",
         "Often not explicitly; people tend to notice it only when something doesn't suit them."),
        ("Is {target} something that changes much over the years?",
         "It can drift with circumstances, though most people have a fairly stable baseline."),
        ("How would you even describe someone's {target}?",
         "Usually by what they consistently choose when they have the option, rather than by what they say."),
        ("Is it worth thinking about {target} when planning things?",
         "A little: matching plans to how people actually behave usually saves friction later."),
        ("My brother says you can't really generalise about {target}. Is that fair?",
         "Partly; patterns exist, but they're best read from several observations rather than one."),
        ("Do people often misjudge their own {target}?",
         "Quite often; habits are easier to see from the outside than from the inside."),
    ),
}
DISTRACTORS_PER_OPERATION = 2

@dataclass(frozen=True)
class FillerSession:
    """One unrelated user–assistant session, cut to whole exchanges (user turn, assistant turn)."""

    source: str  # "sharegpt:<conversation id>" or "ultrachat:<id>"
    turns: tuple[Turn, ...]
    exchange_tokens: tuple[int, ...]  # tokens of each exchange, in order
    text: str  # the whole session, normalized as answer keys are (schema.normalize_value)

    @property
    def tokens(self) -> int:
        return sum(self.exchange_tokens)


def _session(source: str, pairs) -> FillerSession | None:
    """Whole exchanges from the start; None where roles do not alternate from a user turn (the
    alternation gate would fail on the host) or no exchange is left."""
    from memlife.models import tokens

    turns = [Turn(role=r, text=c) for r, c in pairs]
    turns = turns[: len(turns) - len(turns) % 2]
    if not turns or [t.role for t in turns] != ["user", "assistant"] * (len(turns) // 2):
        return None
    sizes = tuple(tokens.count(turns[i].text) + tokens.count(turns[i + 1].text) for i in range(0, len(turns), 2))
    return FillerSession(source, tuple(turns), sizes, normalize_value(" ".join(t.text for t in turns)))


@lru_cache(maxsize=2)
def filler_sessions(filler_path: str | None = None) -> tuple[FillerSession, ...]:
    """The unrelated sessions a history is built from, in a fixed order.

    Default: ShareGPT's task chat as LongMemEval-S draws it (`memlife.sharegpt.task_chat`: English,
    verbatim, ~1.5k tokens a conversation), the paper's UltraChat role; the pieces of the split that
    open with the assistant are left out, so that every host opens with the user. `filler_path`: an
    UltraChat JSONL (`load_ultrachat_jsonl`).
    """
    if filler_path is None:
        from memlife import sharegpt
        from memlife.base import derived
        from memlife.models import tokens

        # Tokenizing 10,901 conversations takes ~7 s a process: kept on disk beside the task chat
        key = [sharegpt.derivation_key(), derived.source_digest(__file__, tokens.__file__)]
        return derived.cached("memops_filler_sessions", key, lambda: _sessions(
            (f"sharegpt:{sid.removeprefix(sharegpt.ID_PREFIX)}", turns) for sid, turns in sharegpt.task_chat()))
    return _sessions((f"ultrachat:{d.dialogue_id}", tuple((t["role"], t["content"]) for t in d.turns))
                     for d in load_ultrachat_jsonl(filler_path))


def _sessions(raw) -> tuple[FillerSession, ...]:
    return tuple(s for s in (_session(src, pairs) for src, pairs in raw) if s is not None)


def load_ultrachat_jsonl(path: str):
    """UltraChat (the paper's filler) as Dialogues: one JSON object per line, {"id", "data": [u, a, ...]}.

    For users with internet access who fetched the release files (see the README); the offline
    default is ShareGPT's task chat (`filler_sessions`). A malformed line raises naming the
    file, line and field.
    """
    import json

    from memlife.memops.data.corpus import Dialogue

    out = []
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                data = rec["data"]
            except (json.JSONDecodeError, KeyError, TypeError) as exc:
                raise ValueError(f"{path}:{lineno}: expected a JSON object with a 'data' list ({exc})") from exc
            if not isinstance(data, list) or not all(isinstance(x, str) for x in data):
                raise ValueError(f"{path}:{lineno}: field 'data' must be a list of strings")
            turns = tuple({"role": "user" if i % 2 == 0 else "assistant", "content": x.strip()}
                          for i, x in enumerate(data) if x.strip())
            out.append(Dialogue(dialogue_id=str(rec.get("id", lineno)), date="", turns=turns))
    return tuple(sorted(out, key=lambda d: d.dialogue_id))


def target_tokens(mean: int, spread: float, seed: int, instance_id: str) -> int:
    """An instance's history length: `mean` x (1 + u), u uniform on [-spread, spread] and drawn per
    instance (seeded), so histories vary in length as the paper's do (60,821 on average, at most
    68,309: a spread of 0.12); `spread` 0 gives every history `mean`."""
    if not 0.0 <= spread < 1.0:
        raise ValueError(f"longctx_spread = {spread}: a fraction in [0, 1)")
    if spread == 0:
        return mean
    u = random.Random(f"{seed}:longctx-length:{instance_id}").uniform(-spread, spread)
    return round(mean * (1 + u))


def _cut(session: FillerSession, room: float) -> tuple[tuple[Turn, ...], int] | None:
    """The session whole when it fits `room`, else its opening exchanges that do (short profiles,
    whose histories must fit an 8k reader window); None when not even the first exchange fits."""
    if session.tokens <= room:
        return session.turns, session.tokens
    n, total = 0, 0
    for size in session.exchange_tokens:
        if total + size > room:
            break
        n, total = n + 1, total + size
    return (session.turns[: 2 * n], total) if n else None


def _tokens(turns) -> int:
    from memlife.models import tokens

    return sum(tokens.count(t.text) for t in turns)


def _even_positions(n_turns: int) -> list[int]:
    """Role-compatible insertion points: before a user turn, or after the last assistant turn."""
    return [p for p in range(0, n_turns + 1, 2)]


def _distractor_turns(op_type: str, target: str, rng: random.Random, n: int) -> list[list[Turn]]:
    """`n` different exchanges from the operation's bank, each naming the target."""
    return [[Turn(role="user", text=u.format(target=target)), Turn(role="assistant", text=a.format(target=target))]
            for u, a in rng.sample(DISTRACTOR_TEMPLATES[op_type], n)]


def embed(inst: Instance, target_tokens: int, seed: int, per_operation: int = DISTRACTORS_PER_OPERATION,
          filler_path: str | None = None) -> Instance:
    """A copy of `inst` with `long_context` filled and probes tagged with their context distractors.

    Filler sessions that state a value of the instance's targets (`gates.target_values`) are never
    drawn, so the only place a value occurs in the history is the evidence; `gates.gate_filler_values`
    checks the result.
    """
    rng = random.Random(f"{seed}:longctx:{inst.instance_id}")
    values = target_values(inst)
    sessions = filler_sessions(filler_path)
    evidence_tokens = _tokens([t for seg in inst.segments for t in seg])
    # A fixed number per gold operation, so how many an instance gets follows from its trace (the
    # paper reports 5.7 per sample on average without giving its rule).
    snippets = [(op, turns) for op in inst.operations
                for turns in _distractor_turns(op.type, op.target, rng, per_operation)]
    budget = target_tokens - evidence_tokens - sum(_tokens(t) for _, t in snippets)

    chosen: list[tuple[FillerSession, tuple[Turn, ...]]] = []
    total = 0
    order = list(range(len(sessions)))
    rng.shuffle(order)
    # No single host may take more than a third of the budget, so three hosts always fit and a
    # short target (the embedded model's 8k window) is not blown by one very long session; a
    # longer one gives its opening exchanges.
    cap = max(budget / 3, 200)
    for idx in order:
        if any(f" {v} " in f" {sessions[idx].text} " for v in values):
            continue
        cut = _cut(sessions[idx], cap)
        if cut is None:
            continue
        turns, size = cut
        if len(chosen) >= 3 and total + size > budget:
            if total >= budget * 0.99:
                break
            continue  # too long for what is left: try a shorter one
        chosen.append((sessions[idx], turns))
        total += size
        if len(chosen) >= 3 and total >= budget * 0.99:
            break
    if len(chosen) < 3:
        raise ValueError(f"{inst.instance_id}: filler too small for three host conversations")

    # Evidence segments go, in order, into three different conversations.
    hosts = sorted(rng.sample(range(len(chosen)), 3))
    plan: dict[int, list[tuple[int, str, object]]] = {c: [] for c in range(len(chosen))}
    for seg, c in enumerate(hosts):
        plan[c].append((rng.choice(_even_positions(len(chosen[c][1]))), "segment", seg))
    for k, (op, turns) in enumerate(snippets):
        c = rng.randrange(len(chosen))
        plan[c].append((rng.choice(_even_positions(len(chosen[c][1]))), "distractor", k))

    conversations, insertions, cdistractors = [], [], []
    for c, (session, base) in enumerate(chosen):
        # Stable order at one position: segments before distractors, then by index.
        blocks = sorted(plan[c], key=lambda x: (x[0], x[1] != "segment", x[2]))
        out: list[Turn] = []
        bi = 0
        for pos in range(len(base) + 1):
            while bi < len(blocks) and blocks[bi][0] == pos:
                _, kind, ref = blocks[bi]
                if kind == "segment":
                    insertions.append(Insertion(conversation=c, segment=ref, position=len(out), messages=len(inst.segments[ref])))
                    out.extend(inst.segments[ref])
                else:
                    op, turns = snippets[ref]
                    cdistractors.append(ContextDistractor(conversation=c, position=len(out), messages=len(turns),
                                                          op_id=op.op_id, target=op.target, turns=turns))
                    out.extend(turns)
                bi += 1
            if pos < len(base):
                out.append(base[pos])
        conversations.append(LongConversation(conversation_id=f"{inst.instance_id}-c{c}",
                                              source=session.source, turns=out))
    insertions.sort(key=lambda i: i.segment)
    # Counted from the cached per-exchange sizes, so paper-scale histories are not re-tokenized.
    approx = total + evidence_tokens + sum(_tokens(t) for _, t in snippets)
    lc = LongContext(conversations=conversations, insertions=insertions, context_distractors=cdistractors,
                     approx_tokens=approx)
    new = inst.model_copy(deep=True)
    new.long_context = lc
    by_op: dict[str, list[int]] = {}
    for i, cd in enumerate(cdistractors):
        by_op.setdefault(cd.op_id, []).append(i)
    for p in new.probes:
        hit = sorted({i for oid in p.op_ids for i in by_op.get(oid, [])})
        for i in hit:
            cd = cdistractors[i]
            p.distractors.append(Distractor(tag="context_level", value=cd.target,
                                            note=f"conversation {cd.conversation} position {cd.position}"))
    return new
