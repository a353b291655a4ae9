"""A loopback stand-in for an OpenAI-compatible model server, for tests that must not need the
embedded model: deterministic replies, and a log of every request it received."""
import hashlib
import json
import os
import signal
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def reply_for(messages: list[dict], response_format) -> str:
    """Mem0 / MemOS extraction prompts get one memory per user line; the reader gets a response."""
    text = "\n".join(str(m.get("content", "")) for m in messages)
    h = hashlib.sha256(text.encode()).hexdigest()[:6]
    if "memory list" in text or '"memory list"' in text:  # MemOS SIMPLE_STRUCT_MEM_READER_PROMPT
        return json.dumps({"memory list": [{"key": f"fact {h}", "memory_type": "UserMemory",
                                            "value": f"user fact {h}", "tags": ["t"]}], "summary": "s"})
    if response_format and response_format.get("type") == "json_object":  # Mem0 extraction
        return json.dumps({"memory": [{"text": f"User fact {h}"}]})
    return json.dumps({"answer": f"answer {h}", "operations": [], "provenance": []})


class FakeServer:
    def __init__(self, kill_pid_after: int | None = None):
        self.requests: list[str] = []
        self.max_tokens: list[int | None] = []
        self.kill_after = kill_pid_after
        self.kill_pid: int | None = None
        self.killed = False
        srv = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                return

            def do_GET(self):
                if "/models/" in self.path:  # any model name, with a vLLM-style context window
                    body = json.dumps({"id": self.path.rsplit("/", 1)[1], "object": "model",
                                       "max_model_len": 131072}).encode()
                else:
                    body = json.dumps({"data": [{"id": "fake", "object": "model", "max_model_len": 131072}],
                                       "status": "ok"}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self):
                req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                key = hashlib.sha256(json.dumps(req, sort_keys=True).encode()).hexdigest()
                srv.requests.append(key)
                srv.max_tokens.append(req.get("max_tokens"))
                if srv.kill_after is not None and srv.kill_pid and len(srv.requests) == srv.kill_after:
                    srv.killed = True
                    os.kill(srv.kill_pid, signal.SIGKILL)  # dies mid-call: this one is never answered
                    return
                text = reply_for(req["messages"], req.get("response_format"))
                body = json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": "fake",
                                   "choices": [{"index": 0, "finish_reason": "stop",
                                                "message": {"role": "assistant", "content": text}}],
                                   "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()
