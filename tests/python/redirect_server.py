"""An HTTP server that answers every request with a redirect, for the tests of how mcpx
follows one: `redirect_server.py PORT STATUS LOCATION`. It reads each request's body, so
the connection stays usable, and logs each request to stderr."""

import sys
from http.server import ThreadingHTTPServer

from plain_http import JsonHandler


class Redirect(JsonHandler):
    name = "redirect_server"

    def answer(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(int(sys.argv[2]))
        self.send_header("Location", sys.argv[3])
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_POST = do_DELETE = answer


if __name__ == "__main__":
    ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Redirect).serve_forever()
