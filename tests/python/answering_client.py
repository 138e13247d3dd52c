#!/usr/bin/env python3
"""The real Python `mcp` SDK client (pinned 2.3.0), answering the questions a server asks.

Like `mcp_client.py`, but the client declares elicitation, sampling and roots and answers
them from the command line: an elicitation is accepted with `--elicit-content` (or answered
with `--elicit-action decline|cancel`), a sampling request gets `--sample-text` back as the
assistant's message, and `roots/list` gets the one root `--root`. It calls one tool and
prints ONE JSON object on stdout:

    {"protocolVersion": "...", "era": "legacy" | "modern",
     "asked": [{"method": "elicitation/create" | "sampling/createMessage" | "roots/list",
                "params": {...}}, ...],
     "result": {"content": [...], "structuredContent": ..., "isError": bool}}

`asked` lists every question the SDK handed to a callback, in order (on the 2026 wire the
SDK dispatches a result's `inputRequests` to the same callbacks before it retries).

    .deps/venv/bin/python tests/python/answering_client.py --url http://127.0.0.1:PORT/mcp \
        --mode legacy|2026-07-28 --tool NAME --args '{"k": "v"}' \
        --elicit-content '{"name": "Ada"}' --sample-text 'forty-two' --root file:///tmp/x \
        [--bearer TOKEN]

Exit status 0 on success; on any failure the error goes to stderr and the status is 1.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import traceback
from typing import Any

import anyio
from mcp import Client, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp_types.version import MODERN_PROTOCOL_VERSIONS


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", required=True, help="Streamable HTTP endpoint")
    p.add_argument("--mode", default="auto", help="auto | legacy | 2026-07-28 (default: auto)")
    p.add_argument("--tool", required=True, help="tool to call")
    p.add_argument("--args", default="{}", help="tool arguments as a JSON object")
    p.add_argument("--elicit-action", default="accept", choices=["accept", "decline", "cancel"])
    p.add_argument("--elicit-content", default="{}", help="the accepted form's content, a JSON object")
    p.add_argument("--sample-text", default="sampled text", help="the assistant's text for sampling")
    p.add_argument("--sample-model", default="answering-client-model", help="the model name reported")
    p.add_argument("--root", default=None, help="the one file:// root to list (none: no roots capability)")
    p.add_argument("--bearer", default=None, help="send Authorization: Bearer <this> on every request")
    p.add_argument("--timeout", type=float, default=30.0, help="hard limit for the whole run, seconds")
    return p.parse_args(argv)


def dump(model: Any) -> Any:
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


async def run(args: argparse.Namespace, tool_args: dict[str, Any], content: dict[str, Any]) -> dict[str, Any]:
    asked: list[dict[str, Any]] = []

    async def on_elicit(_context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append({"method": "elicitation/create", "params": dump(params)})
        if args.elicit_action == "accept":
            return types.ElicitResult(action="accept", content=content)
        return types.ElicitResult(action=args.elicit_action)

    async def on_sample(_context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        asked.append({"method": "sampling/createMessage", "params": dump(params)})
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=args.sample_text),
            model=args.sample_model,
            stop_reason="endTurn",
        )

    async def on_roots(_context: Any) -> types.ListRootsResult:
        asked.append({"method": "roots/list", "params": {}})
        return types.ListRootsResult(roots=[types.Root(uri=args.root, name="answering-client root")])

    target: Any = args.url
    if args.bearer:
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {args.bearer}"})
        target = streamable_http_client(args.url, http_client=http)
    async with Client(
        target,
        mode=args.mode,
        cache=None,
        read_timeout_seconds=args.timeout,
        elicitation_callback=on_elicit,
        sampling_callback=on_sample,
        list_roots_callback=on_roots if args.root else None,
    ) as client:
        version = client.protocol_version
        result = await client.call_tool(args.tool, tool_args)
        return {
            "protocolVersion": version,
            "era": "modern" if version in MODERN_PROTOCOL_VERSIONS else "legacy",
            "asked": asked,
            "result": {
                "content": [dump(c) for c in result.content],
                "structuredContent": result.structured_content,
                "isError": bool(result.is_error),
            },
        }


def start_watchdog(seconds: float) -> None:
    """Backstop for the in-loop timeout: a hung shutdown must not hang the test run."""

    def fire() -> None:
        print(f"answering_client: error: hard timeout after {seconds:.0f} s", file=sys.stderr)
        sys.stderr.flush()
        os._exit(1)

    timer = threading.Timer(seconds, fire)
    timer.daemon = True
    timer.start()


def describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(describe(e) for e in exc.exceptions)
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    start_watchdog(args.timeout + 5)
    try:
        tool_args = json.loads(args.args)
        content = json.loads(args.elicit_content)
        if not isinstance(tool_args, dict) or not isinstance(content, dict):
            raise ValueError("--args and --elicit-content must be JSON objects")

        async def bounded() -> dict[str, Any]:
            with anyio.fail_after(args.timeout):
                return await run(args, tool_args, content)

        out = anyio.run(bounded)
    except Exception as exc:  # noqa: BLE001 - report anything, including exception groups
        if os.environ.get("MCP_CLIENT_DEBUG"):
            traceback.print_exc()
        print(f"answering_client: error: {describe(exc)}", file=sys.stderr)
        return 1
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
