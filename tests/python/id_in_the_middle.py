"""Runs a stdio MCP server and rewrites every response it writes so that the id sits
between the result (or error) and "jsonrpc": written that way, an over-long answer shows
its id at neither end of its line. Everything else passes through as written. Stdin is
the program's own (inherited).

    python id_in_the_middle.py PROGRAM [ARG...]

Plain Python, no dependencies.
"""

import json
import subprocess
import sys


def main() -> int:
    child = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE)
    out = sys.stdout.buffer
    for line in iter(child.stdout.readline, b""):
        message = json.loads(line)
        outcome = "result" if "result" in message else "error" if "error" in message else None
        if outcome and "id" in message:
            message = {outcome: message[outcome], "id": message["id"], "jsonrpc": message["jsonrpc"]}
            line = json.dumps(message, separators=(",", ":")).encode() + b"\n"
        out.write(line)
        out.flush()
    return child.wait()


if __name__ == "__main__":
    sys.exit(main())
