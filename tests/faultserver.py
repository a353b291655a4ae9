"""A real OpenAI-compatible HTTP server on loopback that injects faults on request.

Each request's behaviour is taken from a per-prompt script (keyed by the last message's
content); when the script is exhausted the server answers normally with ``echo: <content>``.
Every request received is counted per prompt, so tests can assert what was (re)sent.
"""
from __future__ import annotations

import json
import threading
import time
from collections import Counter, defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class JSONHandler(BaseHTTPRequestHandler):
    """An HTTP/1.1 handler that answers JSON and keeps test output clean."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def _json(self, status, obj, headers=None):
        payload = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(payload)


class Loopback:
    """A threaded HTTP server on 127.0.0.1 (a free port) for the duration of a `with` block."""

    def __init__(self, handler):
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


class FaultServer(Loopback):
    def __init__(self, delay_s: float = 0.0, window: int = 32768):
        self.window = window
        self.scripts: dict[str, list] = defaultdict(list)
        self.received: Counter = Counter()
        self.auth_headers: list[str] = []
        self.delay_s = delay_s
        self._lock = threading.Lock()
        outer = self

        class Handler(JSONHandler):
            def do_GET(self):
                # Like vLLM, the server reports its context window (max_model_len); it serves any
                # model name a test asks for.
                if self.path.endswith("/models"):
                    self._json(200, {"object": "list", "data": [{"id": "fake", "object": "model",
                                                                 "max_model_len": outer.window}]})
                elif "/models/" in self.path:
                    self._json(200, {"id": self.path.rsplit("/", 1)[1], "object": "model",
                                     "max_model_len": outer.window})
                else:
                    self._json(404, {"error": {"message": "not found"}})

            def do_POST(self):
                n = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(n) or b"{}")
                prompt = body["messages"][-1]["content"]
                with outer._lock:
                    outer.received[prompt] += 1
                    outer.auth_headers.append(self.headers.get("Authorization", ""))
                    step = outer.scripts[prompt].pop(0) if outer.scripts[prompt] else "ok"
                kind, arg = (step, None) if isinstance(step, str) else step
                if kind == "429":
                    self._json(429, {"error": {"message": "rate limited"}}, {"Retry-After": str(arg)})
                elif kind in ("500", "503"):
                    self._json(int(kind), {"error": {"message": "server error"}})
                elif kind == "400":
                    self._json(400, {"error": {"message": "bad request"}})
                elif kind == "sleep":
                    time.sleep(arg)
                    self._reply(body, "echo: " + prompt)
                elif kind == "truncated":
                    payload = json.dumps(self._completion(body, "echo: " + prompt)).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload[: len(payload) // 3])
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(2)
                elif kind == "text":
                    self._reply(body, arg)
                else:
                    if outer.delay_s:
                        time.sleep(outer.delay_s)
                    self._reply(body, "echo: " + prompt)

            def _completion(self, body, text):
                return {"id": "chatcmpl-test", "object": "chat.completion", "created": 0,
                        "model": body.get("model", "fake"),
                        "choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": text}}],
                        "usage": {"prompt_tokens": sum(len(m["content"].split()) for m in body["messages"]),
                                  "completion_tokens": len(text.split()), "total_tokens": 0}}

            def _reply(self, body, text):
                self._json(200, self._completion(body, text))

        Loopback.__init__(self, Handler)

    def script(self, prompt: str, *steps) -> None:
        self.scripts[prompt].extend(steps)


if __name__ == "__main__":  # run standalone for a subprocess test: prints the URL, serves until killed
    import sys

    with FaultServer(delay_s=float(sys.argv[1]) if len(sys.argv) > 1 else 0.0) as s:
        print(s.base_url, flush=True)
        while True:
            time.sleep(3600)
