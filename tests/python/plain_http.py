"""What the hand-written HTTP test servers (cut_stream_server, standalone_question_server)
share: a request handler that answers JSON or nothing, and logs to stderr under its
server's name. Imported from beside them (a script's own folder is on sys.path)."""

import json
import sys
from http.server import BaseHTTPRequestHandler


class JsonHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # The name each log line starts with; set by the subclass.
    name = "plain_http"

    def log_message(self, fmt, *args):  # to stderr, one line each
        sys.stderr.write(f"{self.name}: " + (fmt % args) + "\n")

    def send_json(self, status: int, frame, headers=()) -> None:
        body = json.dumps(frame).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def send_empty(self, status: int) -> None:
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()
