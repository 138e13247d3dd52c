"""A real Python-SDK MCP server over Streamable HTTP (both eras on one endpoint), used by the
end-to-end tests as an HTTP upstream of mcpx.

    .deps/venv/bin/python tests/python/http_server.py PORT [json|sse]

Tools reveal what reached the server: `whoami` (this process and a call counter),
`headers` (the HTTP headers of the request), `meta` (the request's _meta), `progress`
(reports progress three times, then answers), `touch` (announces a tools list change and
an update of the resource to `subscriptions/listen` streams). One resource and one prompt.
"""

import itertools
import os
import sys
import uuid

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("pyhttp")
INSTANCE = uuid.uuid4().hex[:16]
CALLS = itertools.count(1)


@server.tool()
def echo(text: str) -> str:
    """Echo the text back."""
    return f"echo: {text}"


@server.tool()
def whoami() -> dict:
    """Which server process answered, and how many calls it has served."""
    return {"instance": INSTANCE, "pid": os.getpid(), "calls": next(CALLS)}


@server.tool()
def headers(ctx: Context) -> dict:
    """The HTTP headers this request arrived with (names lowercased)."""
    request = ctx.request_context.request
    return {k.lower(): v for k, v in request.headers.items()} if request is not None else {}


@server.tool()
def meta(ctx: Context) -> dict:
    """The request's params._meta as it arrived ({} when there was none)."""
    params = ctx.request_context.params or {}
    return {"meta": dict(params.get("_meta") or {})}


@server.tool()
async def progress(ctx: Context) -> str:
    """Report progress three times, then answer."""
    for step in (1, 2, 3):
        await ctx.report_progress(step, 3, f"step {step}")
    return "done"


@server.tool()
async def touch(ctx: Context) -> str:
    """Announce a tools list change and an update of the greeting resource."""
    await ctx.notify_tools_changed()
    await ctx.notify_resource_updated(GREETING)
    return "touched"


GREETING = "note://greeting/hello world"


@server.resource(GREETING, mime_type="text/plain")
def greeting() -> str:
    """A text resource whose URI has a space in it."""
    return "hello from pyhttp"


@server.prompt()
def review(code: str) -> str:
    """Ask for a review of some code."""
    return f"Please review: {code}"


if __name__ == "__main__":
    json_response = len(sys.argv) > 2 and sys.argv[2] == "json"
    server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]), json_response=json_response)
