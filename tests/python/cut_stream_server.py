"""A Streamable HTTP MCP server that breaks its reply streams, for the fault tests.

    python cut_stream_server.py PORT legacy|modern

It speaks one era properly (`legacy`: `initialize` and a session, `server/discover` is a
400 like the TypeScript SDK's; `modern`: 2026-07-28 `server/discover`, `initialize` is a
400) and lists three tools:

- `ok`: answers at once (JSON) with the text "ok": the server itself still works;
- `cut`: answers 200 `text/event-stream`, then closes the connection without an event;
- `half`: answers 200 `text/event-stream`, writes half of the response event (no end of
  line), then closes the connection.

Replies without a `Content-Length` are delimited by the close (`Connection: close`).
Plain Python (http.server), no dependencies. Logs each request to stderr.
"""

import json
import socket
import sys
from http.server import ThreadingHTTPServer

from plain_http import JsonHandler

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
SESSION = "cut-stream-session-1"
SERVER_INFO = {"name": "cut-stream", "version": "1.0.0"}
NO_ARGS = {"type": "object", "properties": {}}
TOOLS = [
    {"name": "ok", "description": "Answers at once.", "inputSchema": NO_ARGS},
    {"name": "cut", "description": "Opens an event stream, then closes it.", "inputSchema": NO_ARGS},
    {"name": "half", "description": "Writes half an event, then closes.", "inputSchema": NO_ARGS},
]

ERA = "legacy"


def modern(body: dict) -> dict:
    out = {"resultType": "complete"}
    out.update(body)
    out["_meta"] = {"io.modelcontextprotocol/serverInfo": SERVER_INFO}
    return out


class Handler(JsonHandler):
    name = "cut_stream_server"

    def break_stream(self, partial: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(partial)
        self.wfile.flush()
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def do_GET(self):
        self.send_empty(405)

    def do_DELETE(self):
        self.send_empty(200)

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        try:
            frame = json.loads(self.rfile.read(length))
        except ValueError:
            return self.send_json(400, {"jsonrpc": "2.0", "id": None,
                                        "error": {"code": -32700, "message": "parse error"}})
        method, rid = frame.get("method"), frame.get("id")
        if rid is None:  # a notification or a response
            return self.send_empty(202)

        def result(body: dict, headers=()):
            if ERA == "modern":
                body = modern(body)
            self.send_json(200, {"jsonrpc": "2.0", "id": rid, "result": body}, headers)

        if ERA == "legacy":
            if method == "initialize":
                return result({"protocolVersion": LEGACY, "capabilities": {"tools": {}},
                               "serverInfo": SERVER_INFO}, [("Mcp-Session-Id", SESSION)])
            if self.headers.get("Mcp-Session-Id") != SESSION:
                return self.send_json(400, {"jsonrpc": "2.0", "id": None, "error": {
                    "code": -32000, "message": "Bad Request: No valid session ID provided"}})
        elif method == "initialize":
            return self.send_json(400, {"jsonrpc": "2.0", "id": rid, "error": {
                "code": -32022, "message": "2026-07-28 only",
                "data": {"supported": [MODERN], "requested": LEGACY}}})

        if method == "server/discover":
            return result({"supportedVersions": [MODERN], "capabilities": {"tools": {}},
                           "ttlMs": 0, "cacheScope": "public"})
        if method == "ping":
            return result({})
        if method == "tools/list":
            body = {"tools": TOOLS}
            if ERA == "modern":
                body.update({"ttlMs": 0, "cacheScope": "public"})
            return result(body)
        if method == "tools/call":
            name = (frame.get("params") or {}).get("name")
            if name == "ok":
                return result({"content": [{"type": "text", "text": "ok"}]})
            if name == "cut":
                return self.break_stream(b"")
            if name == "half":
                start = json.dumps({"jsonrpc": "2.0", "id": rid, "result": {
                    "content": [{"type": "text", "text": "never finished"}]}})
                return self.break_stream(b"event: message\ndata: " + start[: len(start) // 2].encode())
        return self.send_json(200, {"jsonrpc": "2.0", "id": rid, "error": {
            "code": -32601, "message": f"method not found: {method}"}})


def main() -> None:
    global ERA
    port, ERA = int(sys.argv[1]), sys.argv[2]
    assert ERA in ("legacy", "modern"), ERA
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    main()
