"""Temp-LoRA, the parametric system: a temporary LoRA adapter trained on the history, then decoding.

The adapter is trained on every chunk of the history for the epochs its paper sets
(transformers + peft on CPU, SmolLM2-135M-Instruct loaded from the same GGUF the embedded server
runs), then the adapted model decodes greedily under the readers' grammar. Its replies are cached
in the same on-disk cache under the whole request (key "temp_lora:<digest>"), and its adapter is
saved per history, so a resumed run does not retrain it.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from memlife.memops.systems import baselines, reading
from memlife.memops.data.response import parse_response, reply_grammar

# ----------------------------------------------------------------------------- Temp-LoRA


@dataclass
class TempLoRAConfig:
    """Temp-LoRA's training, as its paper sets it (Wang, Ma and Cai 2024, "With Greater Text Comes
    Greater Necessity: Inference-Time Training Helps Long Text Generation"; the authors' trainer,
    github.com/TemporaryLoRA/Temp-LoRA, scripts for PG19 and GuoFeng): the text is cut into chunks
    of Δ = 1,024 tokens, taken in order; each chunk is trained on for 2 epochs (two gradient steps
    on it before the next chunk), its loss on the chunk's own tokens only, with up to
    `context_tokens` of the text before it in the input as unscored context; LoRA rank 64,
    alpha 64, dropout 0.05 on every linear layer but the output head; AdamW, learning rate 5e-5,
    no weight decay, eps 1e-7, constant after a warm-up of 2 steps.

    Two readings of ours. Context: the PG19 script gives each chunk 3,072 tokens before it, the
    GuoFeng (chat-model) script 1,024; 1,024 here, the chat-model setting, which also halves the
    cost of a step. Warm-up: the authors' scheduler steps once per chunk, so their first chunk
    trains at learning rate 0 — harmless on a book, but a MemOps adjacent history is one or two
    chunks, the evidence itself; here the warm-up counts optimizer steps and never reaches 0
    (step k at min(1, (k+1)/(warmup_steps+1)) of the rate).

    The base model is the embedded one, SmolLM2-135M-Instruct (the GGUF llama-server runs,
    dequantised to float32 by transformers) at every profile: the paper does not say which model
    it adapted, and no larger open model can be installed here (`base_model` names it in every
    record's variant and marker).
    """

    chunk_tokens: int = 1024
    context_tokens: int = 1024
    epochs: int = 2
    lr: float = 5e-5
    rank: int = 64
    alpha: int = 64
    dropout: float = 0.05
    warmup_steps: int = 2
    max_new_tokens: int = 160
    threads: int = 2


@dataclass(frozen=True)
class TrainStep:
    """One gradient step of Temp-LoRA: chunk `chunk` (tokens [middle, end)) in epoch `epoch`, with
    tokens [start, middle) before it as unscored context."""

    chunk: int
    epoch: int
    start: int
    middle: int
    end: int

    @property
    def tokens(self) -> int:
        return self.end - self.start


def temp_lora_schedule(n_tokens: int, cfg: TempLoRAConfig) -> list[TrainStep]:
    """Every gradient step of Temp-LoRA on a text of `n_tokens`, in the order taken: chunk by chunk
    from the oldest, each chunk `cfg.epochs` times before the next (the authors' trainer). Every
    token is in exactly one chunk, trained on `epochs` times."""
    if cfg.chunk_tokens <= 0 or cfg.epochs <= 0 or cfg.context_tokens < 0:
        raise ValueError(f"Temp-LoRA needs chunk_tokens > 0, epochs > 0, context_tokens >= 0: {cfg}")
    out = []
    for i, middle in enumerate(range(0, n_tokens, cfg.chunk_tokens)):
        end = min(middle + cfg.chunk_tokens, n_tokens)
        out += [TrainStep(i, e, max(0, middle - cfg.context_tokens), middle, end) for e in range(cfg.epochs)]
    return out


def _allowed_tokens(matcher, vocab: int):
    """The tokens `matcher` (an llguidance LLMatcher) allows next, as booleans over the model's
    vocabulary: its bitmask holds bit j of 32-bit word i for token 32i + j."""
    import numpy as np
    import torch

    bits = np.unpackbits(np.frombuffer(matcher.compute_bitmask(), dtype=np.uint8), bitorder="little")
    allowed = torch.zeros(vocab, dtype=torch.bool)
    n = min(vocab, bits.shape[0])
    allowed[:n] = torch.from_numpy(bits[:n].astype(bool))
    return allowed


def constrained_greedy(model, prompt_ids, matcher, max_new_tokens: int, eos_id: int):
    """Greedy decoding under a grammar: at each step only the tokens `matcher` (an llguidance
    LLMatcher) allows. Returns (new token ids, finish_reason): "stop" when the grammar is complete,
    "length" when `max_new_tokens` ran out first (the reply is cut, as an endpoint's would be)."""
    import torch

    vocab = model.get_output_embeddings().weight.shape[0]
    out, past, ids = [], None, prompt_ids
    with torch.no_grad():
        for _ in range(max_new_tokens):
            o = model(input_ids=ids, past_key_values=past, use_cache=True)
            past = o.past_key_values
            logits = o.logits[0, -1].float().masked_fill(~_allowed_tokens(matcher, vocab), float("-inf"))
            tok = int(logits.argmax())
            if tok == eos_id:
                return out, "stop"
            if not matcher.consume_token(tok):
                raise RuntimeError(f"the grammar refused token {tok} it had allowed: {matcher.get_error()}")
            out.append(tok)
            if matcher.is_stopped():
                return out, "stop"
            ids = torch.tensor([[tok]])
    return out, "length"


class TempLoRASystem:
    """Temp-LoRA: fold the whole history into a temporary LoRA adapter, then answer from the
    adapted weights (TempLoRAConfig: the method's settings and which model it adapts).

    Training: every chunk of the history, oldest first, `epochs` steps each (`temp_lora_schedule`).
    Answering: the readers' system prompt (its reply format) and the question, no memory text —
    the memory is in the weights — decoded greedily under the readers' grammar
    (`response.reply_grammar`, the same GBNF llama-server gets; llguidance enforces it here) and
    the readers' token cap; a reply that reaches the cap is reported truncated, as theirs are.

    Its generation is a model call like any other: it goes through `reply_cache.memoized`, cached on disk
    under the SHA-256 of everything that determines it (the GGUF, the library versions, the
    training and decoding settings, the grammar, the seed, the history text and the prompt),
    counted in the usage log, and obeying MEMLIFE_LLM_MODE. Training is lazy: a history is
    trained only when one of its answers is not cached. The adapter is temporary, as the method's
    is: kept under the store root while its history is being answered, and deleted when the system
    moves to another history or closes; its INGESTED marker keeps what the training did (steps,
    chunks, tokens, losses, seconds).
    """

    name = "temp_lora"

    def __init__(self, store_root: Path, config: TempLoRAConfig | None = None, seed: int = 0,
                 grammar_bounds: dict | None = None):
        self.store_root, self.cfg, self.seed = Path(store_root), config or TempLoRAConfig(), seed
        self.grammar = reply_grammar(grammar_bounds)
        c = self.cfg
        self.variant = (f"base={self.base_model()} chunk={c.chunk_tokens} context={c.context_tokens} "
                        f"epochs={c.epochs} lr={c.lr:g} rank={c.rank}")
        self._base = None
        self._tok = None
        self._ll = None
        self._active: tuple[str, object] | None = None
        self._key_base: dict | None = None

    @staticmethod
    def base_model() -> str:
        """The model Temp-LoRA adapts: the embedded GGUF's name (SmolLM2-135M-Instruct)."""
        from memlife.models import serve

        return Path(serve.GGUF_NAME).stem.split(".")[0]

    @property
    def model(self) -> str:
        """The name its calls are accounted under: the embedded model's (so priced at 0), adapted."""
        from memlife.models import serve

        return f"{serve.MODEL_ALIAS}@temp-lora"

    def _load_base(self):
        if self._base is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer

            from memlife.models import serve

            torch.set_num_threads(self.cfg.threads)
            g = serve.model_path()
            self._tok = AutoTokenizer.from_pretrained(g.parent, gguf_file=g.name)
            self._base = AutoModelForCausalLM.from_pretrained(g.parent, gguf_file=g.name, dtype=torch.float32)
            self._base.eval()
        return self._base, self._tok

    @staticmethod
    def history_text(history: reading.History) -> str:
        return "\n".join(reading.format_turns(history.turns()))

    def _token_ids(self, history: reading.History) -> list[int]:
        _, tok = self._load_base()
        return tok(self.history_text(history), add_special_tokens=False).input_ids

    def ingest(self, history: reading.History) -> None:
        """Nothing up front: `answer` trains the adapter the first time it needs the model."""

    def _adapter_dir(self, history: reading.History) -> Path:
        return baselines.store_dir(self.store_root, self.name, history.history_id) / "adapter"

    def _train(self, history: reading.History) -> None:
        import time

        import torch
        from peft import LoraConfig, get_peft_model

        d = baselines.store_dir(self.store_root, self.name, history.history_id)
        marker = baselines.IngestMarker(d)
        if marker.done() and (self._adapter_dir(history) / "adapter_config.json").is_file():
            return
        marker.reset()
        base, _ = self._load_base()
        ids = self._token_ids(history)
        schedule = temp_lora_schedule(len(ids), self.cfg)
        torch.manual_seed(self.seed)
        c = self.cfg
        model = get_peft_model(base, LoraConfig(r=c.rank, lora_alpha=c.alpha, lora_dropout=c.dropout,
                                                target_modules="all-linear"))
        opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=c.lr, weight_decay=0.0,
                                eps=1e-7)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda k: min(1.0, (k + 1) / (c.warmup_steps + 1)))
        model.train()
        losses = []
        t0, cpu0 = time.monotonic(), time.process_time()
        for step in schedule:
            x = torch.tensor([ids[step.start:step.end]])
            labels = x.clone()
            labels[:, : step.middle - step.start] = -100  # the context before the chunk is not scored
            loss = model(input_ids=x, labels=labels).loss
            loss.backward()
            opt.step()
            sched.step()
            opt.zero_grad()
            losses.append(round(loss.item(), 4))
        seconds, cpu = time.monotonic() - t0, time.process_time() - cpu0
        model.eval()
        model.save_pretrained(str(self._adapter_dir(history)))
        model.unload()  # detach the LoRA layers: the base stays clean for the next history
        self._active = None
        marker.mark({"system": self.name, "history_id": history.history_id, "base_model": self.base_model(),
                     "tokens": len(ids), "chunks": len({s.chunk for s in schedule}), "epochs": c.epochs,
                     "steps": len(schedule), "trained_tokens": sum(s.tokens for s in schedule),
                     "train_seconds": round(seconds, 2), "train_cpu_seconds": round(cpu, 2), "threads": c.threads,
                     "losses": losses, "variant": self.variant})

    def _adapted(self, history: reading.History):
        if self._active and self._active[0] == history.history_id:
            return self._active[1]
        from peft import PeftModel

        self.release()
        self._train(history)
        base, _ = self._load_base()
        model = PeftModel.from_pretrained(base, str(self._adapter_dir(history)))
        model.eval()
        self._active = (history.history_id, model)
        return model

    def release(self, history: reading.History | None = None) -> None:
        """Discard the active history's adapter (the method's module is temporary); its replies
        are cached, and a history asked again later is trained again. With `history`, only when
        the active adapter is that history's."""
        if self._active is None or (history is not None and self._active[0] != history.history_id):
            return
        hid, model = self._active
        model.unload()
        self._active = None
        shutil.rmtree(baselines.store_dir(self.store_root, self.name, hid) / "adapter", ignore_errors=True)

    def messages(self, question: str) -> list[dict]:
        """The readers' system prompt, but for the sentence pointing at a memory text it is not
        shown, and the question where the readers' prompt ends with it."""
        return [{"role": "system", "content": reading.SYSTEM_PROMPT.replace("Use only the memory below to answer. ", "")},
                {"role": "user", "content": f"## Question\n{question}"}]

    def request_key(self, history: reading.History, question: str) -> str:
        if self._key_base is None:  # once per system: the GGUF head hash and package versions
            from dataclasses import asdict
            from importlib.metadata import version

            from memlife.models import serve

            self._key_base = {"kind": "temp_lora_generate", "model": serve.model_fingerprint(),
                              "versions": {p: version(p) for p in ("torch", "transformers", "peft", "llguidance")},
                              "config": asdict(self.cfg), "seed": self.seed,
                              "grammar_sha256": hashlib.sha256(self.grammar.encode()).hexdigest()}
        req = {**self._key_base, "history_sha256": hashlib.sha256(self.history_text(history).encode()).hexdigest(),
               "messages": self.messages(question)}
        return "temp_lora:" + hashlib.sha256(json.dumps(req, sort_keys=True).encode()).hexdigest()

    def _matcher(self):
        import llguidance
        import llguidance.hf

        _, tok = self._load_base()
        if self._ll is None:
            self._ll = (llguidance.hf.from_tokenizer(tok), llguidance.grammar_from("gbnf", self.grammar))
        return llguidance.LLMatcher(*self._ll)

    def _generate(self, history: reading.History, question: str, key: str):
        import time

        from memlife.models import accounting

        model = self._adapted(history)
        _, tok = self._load_base()
        enc = tok.apply_chat_template(self.messages(question), add_generation_prompt=True,
                                      return_tensors="pt", return_dict=True)
        matcher = self._matcher()
        t0 = time.monotonic()
        new, finish = constrained_greedy(model, enc["input_ids"], matcher, self.cfg.max_new_tokens, tok.eos_token_id)
        return accounting.Completion(text=tok.decode(new, skip_special_tokens=True),
                              prompt_tokens=int(enc["input_ids"].shape[1]), completion_tokens=len(new),
                              cached=False, latency_s=time.monotonic() - t0, request_id=key, model=self.model,
                              finish_reason=finish)

    def answer(self, history: reading.History, question: str) -> reading.Answer:
        from memlife.models import reply_cache

        key = self.request_key(history, question)
        c = reply_cache.memoized(key, lambda: self._generate(history, question, key), role=self.name, model=self.model,
                         describe=f"Temp-LoRA, history {history.history_id}, question {question[:60]!r}")
        return reading.Answer(parsed=parse_response(c.text, c.finish_reason), context_tokens=0, prompt_tokens=c.prompt_tokens,
                      completion_tokens=c.completion_tokens, cached=c.cached, latency_s=c.latency_s,
                      request_id=key, finish_reason=c.finish_reason)

    def close(self) -> None:
        self.release()


def measure_temp_lora_step(cfg: TempLoRAConfig | None = None, repeats: int = 2) -> float:
    """Seconds one Temp-LoRA gradient step takes on this machine at its longest (a chunk and its
    whole context: chunk_tokens + context_tokens tokens), the best of `repeats` after one warm-up
    step: what `make estimate` multiplies by the steps a run would take."""
    import time

    import torch
    from peft import LoraConfig, get_peft_model

    s = TempLoRASystem(Path("."), cfg)
    c = s.cfg
    base, tok = s._load_base()
    model = get_peft_model(base, LoraConfig(r=c.rank, lora_alpha=c.alpha, lora_dropout=c.dropout,
                                            target_modules="all-linear"))
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=c.lr)
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, len(tok), (1, c.chunk_tokens + c.context_tokens), generator=g)
    labels = x.clone()
    labels[:, : c.context_tokens] = -100
    model.train()
    times = []
    for i in range(repeats + 1):
        t0 = time.monotonic()
        model(input_ids=x, labels=labels).loss.backward()
        opt.step()
        opt.zero_grad()
        if i:
            times.append(time.monotonic() - t0)
    model.unload()
    return min(times)
