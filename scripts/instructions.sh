#!/usr/bin/env bash
# Instructions the mcpx daemon executes per relayed `tools/call`, counted by valgrind's
# callgrind: a figure that, unlike time, does not move with the load on the machine, so it
# shows what a change to the request path costs or saves (see docs/performance.md).
#
# For each path (stdio: a 2026-07-28 caller, fakemcp over stdio, mcpx's usual path; http:
# the same caller, fakemcp --http upstream; legacy: a 2025-11-25 caller in an HTTP session,
# fakemcp over stdio; relay: a 2026-07-28 caller on the stdin of `mcpx serve`, which relays
# to the daemon over its unix socket, as an agent host runs it), the daemon runs under
# callgrind twice, answering WARM calls and then WARM + CALLS calls of the same `mcpx_call`
# → fakemcp `echo`, one at a time (over one keep-alive HTTP connection, or one serve); the
# difference divided by CALLS is the cost of one call, start-up and shutdown excluded. For
# relay the figure is the daemon's and serve's together. User-space instructions only
# (callgrind does not see the kernel).
#
#   scripts/instructions.sh              # 1000 calls on each path
#   scripts/instructions.sh 3000 stdio   # CALLS, then which paths
#   TRACES=export scripts/instructions.sh # the same, the daemon exporting its spans over
#                                         # OTLP/HTTP to a local sink that drops them
#
# MEASURE=cpu runs the daemon without valgrind and prints its user + system CPU time per
# call instead (kernel included; it moves with the load on the machine, so alternate the
# builds or settings being compared, several rounds each; relay is not measured this way).
#
# MCPX=path measures another mcpx build (an older commit's, for a side-by-side figure);
# SETTINGS='"journal": {"enabled": false}' adds top-level keys to the daemon's config.
#
# Needs valgrind and python3. The callgrind files stay in the directory it prints, for
# `callgrind_annotate --inclusive=yes FILE`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

CALLS="${1:-1000}"
shift || true
TRANSPORTS=("${@:-stdio http legacy relay}")
WARM=200

[[ ${MEASURE:-} == cpu ]] || command -v valgrind >/dev/null || { echo "instructions.sh: valgrind is needed" >&2; exit 1; }
cargo build --locked --release -p mcpx -p fakemcp >&2
TARGET="${CARGO_TARGET_DIR:-$PWD/target}"
MCPX="${MCPX:-$TARGET/release/mcpx}"
SETTINGS="${SETTINGS:+, $SETTINGS}"
FAKEMCP="$TARGET/release/fakemcp"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/mcpx-instructions.XXXXXX")
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

# The client: CALLS sequential calls on one connection, each answer checked; a 2025-11-25
# caller ("legacy") opens its session first.
cat > "$WORK/client.py" <<'PY'
import http.client, json, sys
port, calls, era = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
arguments = {"text": "mcpx-bench", "n": 42, "nested": {"ok": True, "list": [1, 2, 3]}}
params = {"name": "mcpx_call", "arguments": {"server": "upstream", "tool": "echo", "arguments": arguments}}
headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
connection = http.client.HTTPConnection("127.0.0.1", port)
def post(message):
    connection.request("POST", "/mcp", json.dumps(message), headers)
    reply = connection.getresponse()
    return reply, reply.read()
if era == "legacy":
    reply, _ = post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "instructions", "version": "1"}}})
    headers.update({"mcp-session-id": reply.getheader("mcp-session-id"), "mcp-protocol-version": "2025-11-25"})
    post({"jsonrpc": "2.0", "method": "notifications/initialized"})
else:
    params["_meta"] = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                       "io.modelcontextprotocol/clientCapabilities": {}}
    headers.update({"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "mcpx_call"})
body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
for _ in range(calls):
    connection.request("POST", "/mcp", body, headers)
    reply = connection.getresponse()
    answer = json.loads(reply.read())
    if reply.status != 200 or answer.get("result", {}).get("structuredContent") != arguments:
        sys.exit(f"a wrong answer: HTTP {reply.status} {answer}")
PY

# The relay client: CALLS sequential calls on the stdin of the command it is given.
cat > "$WORK/serve_client.py" <<'PY'
import json, os, subprocess, sys
calls, command = int(sys.argv[1]), sys.argv[2:]
arguments = {"text": "mcpx-bench", "n": 42, "nested": {"ok": True, "list": [1, 2, 3]}}
params = {"name": "mcpx_call", "arguments": {"server": "upstream", "tool": "echo", "arguments": arguments},
          "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {}}}
serve = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
for n in range(calls):
    serve.stdin.write((json.dumps({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": params}) + "\n").encode())
    serve.stdin.flush()
    while True:
        answer = json.loads(serve.stdout.readline() or sys.exit("mcpx serve closed its stdout"))
        if answer.get("id") == n and "method" not in answer:
            break
    if answer.get("result", {}).get("structuredContent") != arguments:
        sys.exit(f"a wrong answer: {answer}")
serve.stdin.close()
serve.wait()
PY

# The user + system CPU time of process PID so far, in microseconds.
cpu_us() { awk -v hz="$(getconf CLK_TCK)" '{ print int(($14 + $15) * 1000000 / hz) }' "/proc/$1/stat"; }

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# count TRANSPORT CALLS: the daemon's instruction total for CALLS calls (plus start and stop).
count() {
    local transport=$1 calls=$2 dir="$WORK/$1-$2" port upstream
    mkdir -p "$dir/state"
    if [[ $transport == http ]]; then
        "$FAKEMCP" --http 127.0.0.1:0 > "$dir/url" 2>/dev/null &
        pids+=($!)
        for _ in $(seq 50); do [[ -s "$dir/url" ]] && break; sleep 0.1; done
        upstream="{\"url\": \"$(head -1 "$dir/url")\"}"
    else
        upstream="{\"command\": \"$FAKEMCP\"}"
    fi
    echo "{\"mcpServers\": {\"upstream\": $upstream}$SETTINGS}" > "$dir/config.json"
    port=$(free_port)
    local under=(valgrind --tool=callgrind --callgrind-out-file="$dir/callgrind.out")
    [[ ${MEASURE:-} == cpu ]] && under=()
    MCPX_STATE_DIR="$dir/state" "${under[@]}" \
        "$MCPX" daemon --config "$dir/config.json" --port "$port" > /dev/null 2> "$dir/daemon.log" &
    local daemon=$!
    pids+=("$daemon")
    for _ in $(seq 300); do
        curl -s -o /dev/null "http://127.0.0.1:$port/mcp" && break
        sleep 0.1
    done
    local serve=0
    if [[ ${MEASURE:-} == cpu ]]; then
        # Warm, then the daemon's user + system CPU over CALLS calls, in microseconds.
        local era before after
        era=$([[ $transport == legacy ]] && echo legacy || echo modern)
        python3 "$WORK/client.py" "$port" "$WARM" "$era"
        before=$(cpu_us "$daemon")
        python3 "$WORK/client.py" "$port" "$calls" "$era"
        after=$(cpu_us "$daemon")
        kill -TERM "$daemon"
        wait "$daemon" || true
        if [[ $transport == http ]]; then kill "${pids[-2]}" 2>/dev/null; wait "${pids[-2]}" 2>/dev/null || true; fi
        echo $((after - before))
        return
    fi
    if [[ $transport == relay ]]; then
        MCPX_STATE_DIR="$dir/state" python3 "$WORK/serve_client.py" "$calls" valgrind --tool=callgrind \
            --callgrind-out-file="$dir/serve-callgrind.out" "$MCPX" serve 2> "$dir/serve.log"
        serve=$(sed -n 's/^summary: //p' "$dir/serve-callgrind.out")
    else
        python3 "$WORK/client.py" "$port" "$calls" "$([[ $transport == legacy ]] && echo legacy || echo modern)"
    fi
    kill -TERM "$daemon"
    wait "$daemon" || true
    if [[ $transport == http ]]; then kill "${pids[-2]}" 2>/dev/null; wait "${pids[-2]}" 2>/dev/null || true; fi
    echo $(( $(sed -n 's/^summary: //p' "$dir/callgrind.out") + serve ))
}

# With TRACES=export the daemon exports spans (OTEL_EXPORTER_OTLP_ENDPOINT) to a sink that
# reads each export, counts it and answers 200.
if [[ ${TRACES:-} == export ]]; then
    sink_port=$(free_port)
    python3 - "$sink_port" "$WORK/otlp-exports" <<'PY' &
import http.server, sys
class Sink(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        with open(sys.argv[2], "a") as exports:
            exports.write(f"{self.path} {len(body)}\n")
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Sink).serve_forever()
PY
    pids+=($!)
    export OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$sink_port"
fi

printf '%-10s %18s\n' path "instructions/call${TRACES:+ (traces: $TRACES)}" >&2
for transport in ${TRANSPORTS[*]}; do
    if [[ ${MEASURE:-} == cpu ]]; then
        awk -v t="$transport" -v us="$(count "$transport" "$CALLS")" -v n="$CALLS" \
            'BEGIN { printf "%-10s %15.1f µs\n", t, us / n }'
        continue
    fi
    base=$(count "$transport" "$WARM")
    total=$(count "$transport" $((WARM + CALLS)))
    printf '%-10s %18d\n' "$transport" $(((total - base) / CALLS))
done
if [[ ${TRACES:-} == export ]]; then
    echo "OTLP exports received: $(wc -l < "$WORK/otlp-exports" 2>/dev/null || echo 0)" >&2
fi
echo "callgrind files: $WORK/<path>-<calls>/callgrind.out" >&2
