#!/usr/bin/env python3
"""Drive the real Python `mcp` SDK client (pinned 2.3.0) against one MCP endpoint.

Used by the Rust end-to-end tests as an independent, third-party client. It
connects in the requested mode, lists the tools, calls one tool and prints ONE
JSON object on stdout:

    {"protocolVersion": "...", "era": "legacy" | "modern", "serverInfo": {...} | null,
     "tools": ["name", ...], "result": {"content": [...], "structuredContent": ..., "isError": bool}}

Exit status 0 on success; on any failure the error goes to stderr and the exit
status is 1 (2 for bad command-line usage).

    .deps/venv/bin/python tests/python/mcp_client.py --url http://127.0.0.1:PORT/mcp \
        --mode auto|legacy|2026-07-28 --tool NAME --args '{"k": "v"}'
    .deps/venv/bin/python tests/python/mcp_client.py --command 'prog arg arg' ...

`--trace` logs every HTTP request/response head the SDK exchanges (method,
headers, JSON body; status, content-type) to stderr; it has no effect on stdio.

`--oauth-client ID:SECRET --oauth-issuer URL` authenticates with the SDK's own
`ClientCredentialsOAuthProvider`: on mcpx's 401 it reads the protected resource
metadata, discovers the authorization server and gets a token for the resource.
`--bearer TOKEN` sends a token the caller already has instead.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import threading
import traceback
from typing import Any

import anyio
import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp_types.version import MODERN_PROTOCOL_VERSIONS


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--url", help="Streamable HTTP endpoint, e.g. http://127.0.0.1:8080/mcp")
    target.add_argument("--command", help="stdio server command line (split with shlex)")
    p.add_argument("--mode", default="auto", help="auto | legacy | 2026-07-28 (default: auto)")
    p.add_argument("--tool", required=True, help="tool to call")
    p.add_argument("--args", default="{}", help="tool arguments as a JSON object (default: {})")
    p.add_argument("--timeout", type=float, default=30.0, help="hard limit for the whole run, seconds")
    p.add_argument("--trace", action="store_true", help="log HTTP exchanges to stderr")
    p.add_argument("--oauth-client", help="ID:SECRET for the SDK's client_credentials provider")
    p.add_argument("--oauth-issuer", help="the authorization server those credentials belong to")
    p.add_argument("--bearer", help="an access token to send as Authorization: Bearer")
    return p.parse_args(argv)


def _trace_hooks() -> dict[str, list[Any]]:
    async def on_request(request: httpx2.Request) -> None:
        body = request.content.decode("utf-8", "replace") if request.content else ""
        headers = {k: v for k, v in request.headers.items()}
        print(f"trace> {request.method} {request.url} {json.dumps(headers)} {body}", file=sys.stderr)

    async def on_response(response: httpx2.Response) -> None:
        print(
            f"trace< {response.status_code} {response.request.method} "
            f"content-type={response.headers.get('content-type')!r} "
            f"mcp-session-id={response.headers.get('mcp-session-id')!r}",
            file=sys.stderr,
        )

    return {"request": [on_request], "response": [on_response]}


class _MemoryTokens:
    """Where the SDK's OAuth provider keeps its token: this run's memory."""

    def __init__(self) -> None:
        self.tokens: Any = None
        self.client_info: Any = None

    async def get_tokens(self) -> Any:
        return self.tokens

    async def set_tokens(self, tokens: Any) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> Any:
        return self.client_info

    async def set_client_info(self, client_info: Any) -> None:
        self.client_info = client_info


def _auth(args: argparse.Namespace) -> tuple[Any, dict[str, str] | None]:
    if args.bearer:
        return None, {"Authorization": f"Bearer {args.bearer}"}
    if args.oauth_client:
        from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider

        client_id, _, secret = args.oauth_client.partition(":")
        provider = ClientCredentialsOAuthProvider(
            server_url=args.url,
            storage=_MemoryTokens(),
            client_id=client_id,
            client_secret=secret,
            issuer=args.oauth_issuer,
        )
        return provider, None
    return None, None


def build_target(args: argparse.Namespace) -> Any:
    if args.url:
        auth, headers = _auth(args)
        if not args.trace and auth is None and headers is None:
            return args.url  # the SDK builds its own streamable HTTP transport
        http = create_mcp_http_client(headers=headers, auth=auth)
        if args.trace:
            http.event_hooks = _trace_hooks()
        return streamable_http_client(args.url, http_client=http)
    argv = shlex.split(args.command)
    if not argv:
        raise ValueError("--command is empty")
    # The SDK passes only a safe subset of the environment by default; tests
    # launch a gateway that reads its config from the environment, so pass it all.
    return StdioServerParameters(command=argv[0], args=argv[1:], env=dict(os.environ))


def dump_result(result: Any) -> dict[str, Any]:
    return {
        "content": [c.model_dump(by_alias=True, mode="json", exclude_none=True) for c in result.content],
        "structuredContent": result.structured_content,
        "isError": bool(result.is_error),
    }


async def run(args: argparse.Namespace, tool_args: dict[str, Any]) -> dict[str, Any]:
    # cache=None: every list/call really goes to the server.
    async with Client(build_target(args), mode=args.mode, cache=None, read_timeout_seconds=args.timeout) as client:
        version = client.protocol_version
        era = "modern" if version in MODERN_PROTOCOL_VERSIONS else "legacy"
        server_info = client.server_info
        tools: list[str] = []
        cursor: str | None = None
        for _ in range(100):  # page cap: a cursor that never ends must not loop forever
            page = await client.list_tools(cursor=cursor)
            tools.extend(t.name for t in page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        else:
            raise RuntimeError("tools/list still paginating after 100 pages")
        result = await client.call_tool(args.tool, tool_args)
        return {
            "protocolVersion": version,
            "era": era,
            "serverInfo": server_info.model_dump(by_alias=True, mode="json", exclude_none=True)
            if server_info
            else None,
            "tools": tools,
            "result": dump_result(result),
        }


def start_watchdog(seconds: float) -> None:
    """Backstop for the in-loop timeout: a hung shutdown must not hang the test run."""

    def fire() -> None:
        print(f"mcp_client: error: hard timeout after {seconds:.0f} s", file=sys.stderr)
        sys.stderr.flush()
        os._exit(1)

    timer = threading.Timer(seconds, fire)
    timer.daemon = True
    timer.start()


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    start_watchdog(args.timeout + 5)
    try:
        tool_args = json.loads(args.args)
        if not isinstance(tool_args, dict):
            raise ValueError("--args must be a JSON object")

        async def bounded() -> dict[str, Any]:
            with anyio.fail_after(args.timeout):
                return await run(args, tool_args)

        out = anyio.run(bounded)
    except Exception as exc:  # noqa: BLE001 - report anything, including exception groups and timeouts
        if os.environ.get("MCP_CLIENT_DEBUG"):
            traceback.print_exc()
        print(f"mcp_client: error: {describe(exc)}", file=sys.stderr)
        return 1
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")
    sys.stdout.flush()
    return 0


def describe(exc: BaseException) -> str:
    """Flatten anyio exception groups into one readable line."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(describe(e) for e in exc.exceptions)
    if isinstance(exc, TimeoutError):
        return f"timed out ({type(exc).__name__})"
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
