"""Runs a stdio MCP server with garbage mixed into its stdout, as a badly behaved server
(or a chatty library it loads) does: some junk lines before anything else, then one junk
line before every line the program writes. Stdin is the program's own (inherited).

    python junk_stdout.py [--non-utf8] PROGRAM [ARG...]

The junk: plain text, an unterminated JSON object, JSON that is not JSON-RPC, a JSON-RPC
response to a request nobody sent, a line of NUL and control bytes, an empty line; with
`--non-utf8`, also a line that is not UTF-8. The program's exit status is this
process's. Plain Python, no dependencies.
"""

import subprocess
import sys

STARTUP_JUNK = [
    b"Starting server... (this line is not JSON)\n",
    b'{"jsonrpc": "2.0", "id": 1, "result": {"tr\n',
    b'{"hello": "not json-rpc", "list": [1, 2, 3]}\n',
    b"[1, 2, 3]\n",
    b'{"jsonrpc": "2.0", "id": "nobody-asked", "result": {"tools": []}}\n',
    b"\x00\x01\x02 control bytes \x1b[31mred\x1b[0m\n",
    b"\n",
]
NON_UTF8 = b"\xff\xfe invalid utf-8 \xc3\x28\n"


def main() -> int:
    argv = sys.argv[1:]
    junk = list(STARTUP_JUNK)
    if argv[:1] == ["--non-utf8"]:
        argv = argv[1:]
        junk.insert(3, NON_UTF8)
    child = subprocess.Popen(argv, stdout=subprocess.PIPE)
    out = sys.stdout.buffer
    for line in junk:
        out.write(line)
    out.flush()
    for n, line in enumerate(iter(child.stdout.readline, b"")):
        out.write(b"DEBUG: frame %d follows\n" % n)
        out.write(line)
        out.flush()
    return child.wait()


if __name__ == "__main__":
    sys.exit(main())
