"""MemOps reference subjects: what each one replies to a probe, from the context a memory system
handed its reader (docs/design.md, "Reference subjects"; names, draws and noise in `memlife.subjects`).

The seam is the reader. Every memory system builds its context and calls `Reader.read(lines,
question, retrieved)`; `SubjectReader` is a Reader whose `read` fits the lines to the window with
the Reader's own code (`Reader.context`) — so a subject sees exactly what a model reader would
see — and then replies without a model:

* gold: the probe's gold response (`response.gold_response`);
* evidence-oracle: the gold response exactly when every user turn the probe's provenance and
  reasoning chain cite is in the context (for long-context: what survives the window fit; for
  BM25: the retrieved turns or sessions; for Mem0: the retrieved memories), else an abstention;
* noisy-oracle: the evidence-oracle, with a seeded miss whose rate grows with the context length
  and a seeded confusion toward one of the probe's forbidden values.

Every reply is serialised as the JSON a model would send and parsed by `parse_response`, so the
scorer reads a subject's reply exactly as it reads a model's.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from memlife.memops.data.response import gold_response
from memlife import subjects as ref
from memlife.memops.systems import baselines, reading, registry
from memlife.memops.data.response import MemOpsResponse, ParsedResponse, parse_response
from memlife.memops.data.schema import Instance, Probe, Span, user_turn_text

# The paper's systems whose reader is the only model (SystemSpec.model_free): a subject in the
# reader's place runs them with no model at all. Mem0 only with infer=False (its LLM extraction is
# a model); MemOS extracts with an LLM; Temp-LoRA answers from trained weights and hands no context over.
MODEL_FREE_SYSTEMS = tuple(n for n in baselines.SYSTEMS if registry.registered_systems()[n].model_free)

GOLD_REPLY, ABSTAIN = "gold", "abstain"  # outcomes besides memlife.subjects' MISS / CONFUSE / ANSWER

# Asserts nothing: no value, no operation, no quote. It must never be scored accurate.
ABSTENTION_ANSWER = "I have nothing in my memory that answers this."


# ----------------------------------------------------------------------------- evidence


def evidence_spans(probe: Probe) -> list[Span]:
    """Every span the probe needs: its provenance and its reasoning chain's source facts."""
    chain = list(probe.reasoning_chain.source_facts) if probe.reasoning_chain else []
    return [*probe.provenance, *chain]


def evidence_turns(instance: Instance, probe: Probe) -> list[str]:
    """The texts of the user turns those spans cite, each once, in order. A whole turn, not only
    the quote: the evidence is the user's message as the memory system stored it."""
    out: list[str] = []
    for span in evidence_spans(probe):
        text = user_turn_text(instance, span)
        if text is None:
            raise ValueError(f"{probe.probe_id}: span ({span.segment}, {span.turn}) does not cite a user turn")
        if text not in out:
            out.append(text)
    return out


def missing_evidence(instance: Instance, probe: Probe, context: str) -> list[str]:
    """The evidence turns that are not in the context (verbatim)."""
    return [t for t in evidence_turns(instance, probe) if t not in context]


def evidence_available(instance: Instance, probe: Probe, context: str) -> bool:
    return not missing_evidence(instance, probe, context)


def any_evidence(instance: Instance, probe: Probe, context: str) -> bool:
    """At least one evidence turn is in the context: a looser ceiling, reported beside the strict one."""
    return any(t in context for t in evidence_turns(instance, probe))


# ----------------------------------------------------------------------------- replies


def _as_reply(r: MemOpsResponse) -> ParsedResponse:
    return parse_response(r.model_dump_json())


def gold_reply(instance: Instance, probe: Probe) -> ParsedResponse:
    return _as_reply(gold_response(instance, probe).response)


def abstention() -> ParsedResponse:
    return _as_reply(MemOpsResponse(answer=ABSTENTION_ANSWER, operations=[], provenance=[]))


def confusable(probe: Probe) -> bool:
    """The probe lists a value a confused reader could give instead (its answer key's forbidden)."""
    return bool(probe.answer_key.forbidden)


def confused_reply(instance: Instance, probe: Probe, seed: int, key: tuple) -> ParsedResponse:
    """The gold response with its answer replaced by one forbidden value (chosen by a seeded draw):
    the operations and quotes are right, the value is the distractor's."""
    forbidden = probe.answer_key.forbidden
    pick = forbidden[min(len(forbidden) - 1, int(ref.draw(seed, "which", *key) * len(forbidden)))]
    r = gold_response(instance, probe).response.model_copy(update={"answer": pick})
    return _as_reply(r)


def item_key(instance: Instance, probe: Probe, system: str, setting: str) -> tuple:
    """What a noisy draw is keyed by: the same probe through the same system in the same setting
    draws the same, whatever else is in the run and whatever the reader's window."""
    return (instance.instance_id, probe.probe_id, system, setting)


@dataclass(frozen=True)
class Reply:
    parsed: ParsedResponse
    available: bool  # every evidence turn is in the context
    outcome: str     # GOLD_REPLY, ABSTAIN (no evidence), or memlife.subjects' ANSWER / MISS / CONFUSE


def reply(subject: str, instance: Instance, probe: Probe, context: str, context_tokens: int, *, system: str,
          setting: str, seed: int = 0, noise: ref.Noise | None = None, available: bool | None = None) -> Reply:
    """A reference subject's reply to one probe, given the context its reader was handed.
    `available`: `evidence_available(instance, probe, context)` when the caller has it already."""
    subject = ref.canonical(subject)
    if available is None:
        available = evidence_available(instance, probe, context)
    if subject == ref.GOLD:
        return Reply(gold_reply(instance, probe), available, GOLD_REPLY)
    if not available:
        return Reply(abstention(), available, ABSTAIN)
    if subject == ref.EVIDENCE_ORACLE:
        return Reply(gold_reply(instance, probe), available, ref.ANSWER)
    key = item_key(instance, probe, system, setting)
    what = ref.outcome(noise or ref.Noise(), seed, key, context_tokens, confusable(probe))
    if what == ref.MISS:
        return Reply(abstention(), available, ref.MISS)
    if what == ref.CONFUSE:
        return Reply(confused_reply(instance, probe, seed, key), available, ref.CONFUSE)
    return Reply(gold_reply(instance, probe), available, ref.ANSWER)


# ----------------------------------------------------------------------------- the reader seam


@dataclass(frozen=True)
class Handover:
    """What a memory system handed its reader for one probe, as the reader sees it."""

    context: str
    context_tokens: int
    truncated_tokens: int
    retrieved: tuple[str, ...]
    handed_tokens: int = 0  # the lines the system handed over, before the window fit (as `Reader.fit` counts)


@dataclass
class SubjectReader(reading.Reader):
    """A Reader that replies as a reference subject: same window fit, no model call.

    `client` may be None (the window is then the embedded model's, 8k, unless `context_window`
    is set); given the configured reader's client, the subject sees that reader's window. Call
    `bind` with the probe before each `system.answer`: the question alone does not identify it.
    """

    subject: str = ref.GOLD
    seed: int = 0
    noise: ref.Noise = field(default_factory=ref.Noise)
    system: str = ""
    setting: str = ""
    last: Handover | None = None
    last_reply: Reply | None = None
    _item: tuple | None = None

    def __post_init__(self):
        self.subject = ref.canonical(self.subject)

    @property
    def model(self) -> str:
        return ref.label(self.subject)

    def bind(self, instance: Instance, probe: Probe, system: str, setting: str) -> None:
        self._item = (instance, probe)
        self.system, self.setting = system, setting

    def read(self, lines: list[str], question: str, retrieved: list[str] | None = None) -> reading.Answer:
        if self._item is None or self._item[1].question != question:
            raise RuntimeError("SubjectReader: bind(instance, probe, system, setting) before asking its question")
        instance, probe = self._item
        kept, dropped, handed = self.measure(lines, question)
        context = "\n".join(kept) if kept else reading.NO_MEMORY  # what `handover` hands over
        tokens = baselines.context_tokens(kept)
        self.last = Handover(context, tokens, dropped, tuple(retrieved or ()), handed)
        self.last_reply = reply(self.subject, instance, probe, context, tokens, system=self.system,
                                setting=self.setting, seed=self.seed, noise=self.noise)
        return reading.Answer(parsed=self.last_reply.parsed, context_tokens=tokens, truncated_tokens=dropped,
                              retrieved=list(retrieved or []), request_id=f"{self.model}:{probe.probe_id}")
