"""A handshake-era Streamable HTTP MCP server that asks its questions on the session's
standalone stream (the GET), naming no request, as servers that ask outside a request's
own stream do. Used by the question-routing tests.

    python standalone_question_server.py PORT

Speaks 2025-11-25 only (`server/discover` is a 400, like the TypeScript SDK's) and lists:

- `ask`: puts `elicitation/create` on the standalone stream and waits for the client's
  response (posted back in the session), then answers with the text
  `answered: <result JSON>` or `refused: <code> <message>`;
- `hold(seconds)`: answers on an event stream: a progress notification at once (when the
  call asked for progress), the result after `seconds`.

Plain Python (http.server), no dependencies. Logs each request to stderr.
"""

import json
import queue
import sys
import threading
import time
from http.server import ThreadingHTTPServer

from plain_http import JsonHandler

LEGACY = "2025-11-25"
SESSION = "standalone-question-session-1"
NO_ARGS = {"type": "object", "properties": {}}
TOOLS = [
    {"name": "ask", "description": "Asks on the standalone stream.", "inputSchema": NO_ARGS},
    {"name": "hold", "description": "Answers after `seconds`.",
     "inputSchema": {"type": "object", "properties": {"seconds": {"type": "number"}}}},
]

# Frames for the standalone stream, and the answers to our questions by id.
STANDALONE: "queue.Queue[dict]" = queue.Queue()
ANSWERS: "dict[str, queue.Queue]" = {}
NEXT = iter(range(1, 1 << 30))


def ask(method: str, params: dict, within: float = 20.0) -> dict:
    qid = f"q-{next(NEXT)}"
    ANSWERS[qid] = queue.Queue()
    STANDALONE.put({"jsonrpc": "2.0", "id": qid, "method": method, "params": params})
    try:
        return ANSWERS[qid].get(timeout=within)
    except queue.Empty:
        return {"error": {"code": 0, "message": "no answer"}}
    finally:
        ANSWERS.pop(qid, None)


def text(rid, body: str) -> dict:
    return {"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": body}]}}


class Handler(JsonHandler):
    name = "standalone_question_server"

    def open_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def event(self, frame: dict) -> None:
        self.wfile.write(b"event: message\ndata: " + json.dumps(frame).encode() + b"\n\n")
        self.wfile.flush()

    def do_GET(self):
        if self.headers.get("Mcp-Session-Id") != SESSION:
            return self.send_empty(400)
        self.open_stream()
        try:
            while True:
                try:
                    self.event(STANDALONE.get(timeout=1.0))
                except queue.Empty:
                    self.wfile.write(b": keep-alive\n\n")
                    self.wfile.flush()
        except OSError:
            pass

    def do_DELETE(self):
        self.send_empty(200)

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        frame = json.loads(self.rfile.read(length))
        method, rid = frame.get("method"), frame.get("id")
        if method is None and rid is not None:  # the client's answer to one of our questions
            waiting = ANSWERS.get(rid)
            if waiting is not None:
                waiting.put(frame)
            return self.send_empty(202)
        if rid is None:
            return self.send_empty(202)
        if method == "initialize":
            result = {"protocolVersion": LEGACY, "capabilities": {"tools": {}},
                      "serverInfo": {"name": "standalone-question", "version": "1.0.0"}}
            return self.send_json(200, {"jsonrpc": "2.0", "id": rid, "result": result},
                                  [("Mcp-Session-Id", SESSION)])
        if self.headers.get("Mcp-Session-Id") != SESSION:
            return self.send_json(400, {"jsonrpc": "2.0", "id": None, "error": {
                "code": -32000, "message": "Bad Request: No valid session ID provided"}})
        params = frame.get("params") or {}
        if method == "tools/list":
            return self.send_json(200, {"jsonrpc": "2.0", "id": rid, "result": {"tools": TOOLS}})
        if method == "tools/call" and params.get("name") == "ask":
            answer = ask("elicitation/create", {
                "message": "Asked on the standalone stream",
                "requestedSchema": {"type": "object", "properties": {"response": {"type": "string"}}}})
            if "error" in answer:
                error = answer["error"]
                return self.send_json(200, text(rid, f"refused: {error.get('code')} {error.get('message')}"))
            return self.send_json(200, text(rid, "answered: " + json.dumps(answer.get("result"))))
        if method == "tools/call" and params.get("name") == "hold":
            self.open_stream()
            token = (params.get("_meta") or {}).get("progressToken")
            if token is not None:
                self.event({"jsonrpc": "2.0", "method": "notifications/progress",
                            "params": {"progressToken": token, "progress": 0, "total": 1}})
            time.sleep(float((params.get("arguments") or {}).get("seconds", 1)))
            self.event(text(rid, "held"))
            return
        return self.send_json(200, {"jsonrpc": "2.0", "id": rid, "error": {
            "code": -32601, "message": f"method not found: {method}"}})


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler)
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    main()
