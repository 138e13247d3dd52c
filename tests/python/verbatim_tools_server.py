"""A tiny MCP server over stdio (newline-delimited JSON-RPC, no SDK) that lists tool
definitions exactly as a test wrote them, so the end-to-end tests can check that mcpx
relays fields it does not know (`execution`, `x-…` keys, `_meta`, …) unchanged.

    python verbatim_tools_server.py TOOLS.json legacy|modern [--tag TAG]

TOOLS.json holds {"tools": [...], "result": {...}}: `tools` is the tools/list answer (sent
byte for byte as parsed), `result` what every tools/call returns (a CallToolResult body).
In `legacy` mode it speaks the handshake era (`initialize`; `server/discover` is -32601);
in `modern` mode the 2026-07-28 era (`server/discover`; `initialize` is refused). `--tag`
is ignored: tests find their processes by it. Plain Python, no dependencies.
"""

import json
import sys

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
SERVER_INFO = {"name": "verbatim-tools", "version": "1.0.0"}


def main() -> None:
    path, era = sys.argv[1], sys.argv[2]
    with open(path, encoding="utf-8") as f:
        fixture = json.load(f)
    tools, call_result = fixture["tools"], fixture["result"]

    def send(frame: dict) -> None:
        sys.stdout.write(json.dumps(frame, ensure_ascii=False) + "\n")
        sys.stdout.flush()

    def modern_body(body: dict) -> dict:
        out = {"resultType": "complete"}
        out.update(body)
        meta = dict(out.get("_meta") or {})
        meta["io.modelcontextprotocol/serverInfo"] = SERVER_INFO
        out["_meta"] = meta
        return out

    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            frame = json.loads(line)
        except ValueError:
            send({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "parse error"}})
            continue
        if "id" not in frame or "method" not in frame:
            continue  # notifications and responses: nothing to do
        rid, method = frame["id"], frame["method"]
        params = frame.get("params") or {}
        is_modern = "io.modelcontextprotocol/protocolVersion" in (params.get("_meta") or {})

        def reply(result: dict) -> None:
            send({"jsonrpc": "2.0", "id": rid, "result": result})

        def error(code: int, message: str) -> None:
            send({"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}})

        if era == "legacy":
            if method == "initialize":
                reply({"protocolVersion": LEGACY, "capabilities": {"tools": {}},
                       "serverInfo": SERVER_INFO})
            elif method == "ping":
                reply({})
            elif method == "tools/list" and not is_modern:
                reply({"tools": tools})
            elif method == "tools/call" and not is_modern:
                reply(call_result)
            else:
                error(-32601, f"method not found: {method}")
        else:
            if method == "server/discover":
                reply(modern_body({"supportedVersions": [MODERN], "capabilities": {"tools": {}},
                                   "ttlMs": 0, "cacheScope": "public"}))
            elif method == "initialize":
                error(-32022, "this server speaks 2026-07-28 only")
            elif method == "ping":
                reply({})
            elif method == "tools/list":
                reply(modern_body({"tools": tools, "ttlMs": 0, "cacheScope": "public"}))
            elif method == "tools/call":
                reply(modern_body(call_result))
            else:
                error(-32601, f"method not found: {method}")


if __name__ == "__main__":
    main()
