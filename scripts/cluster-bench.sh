#!/usr/bin/env bash
# Measures mcpx as a cluster on loopback (docs/performance.md, "Cluster"): the cost of a
# forwarded call (through a node that does not own the instance vs through its owner),
# of a relayed one (a 2025-11-25 session's call to a global instance another node owns,
# against the same call in a session on the owner), and calls/s through nginx to three
# nodes vs to one. Needs release binaries
# (cargo build --release -p mcpx -p fakemcp), redis-server, nginx and wrk
# (scripts/deps.sh; apt-get install wrk). Everything listens on 127.0.0.1 only.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release"
DUR="${DUR:-8s}"
WORK="$(mktemp -d)"
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done; echo "nothing on $1" >&2; exit 1; }

RP=$(port); redis-server --port "$RP" --bind 127.0.0.1 --save "" --appendonly no --dir "$WORK" >/dev/null & PIDS+=($!)
wait_port "$RP"
NODES=()
for i in 1 2 3; do
    p=$(port); mkdir -p "$WORK/n$i/state"; chmod 700 "$WORK/n$i/state"
    cat > "$WORK/n$i/config.json" <<JSON
{"mcpServers": {"notes": {"command": "$BIN/fakemcp", "args": ["--tag", "cluster-bench"], "scope": "session"},
                "shared": {"command": "$BIN/fakemcp", "args": ["--tag", "cluster-bench"], "scope": "global"}},
 "pool": {"maxInstancesPerServer": 256},
 "cluster": {"redis": "redis://127.0.0.1:$RP", "secret": "a benchmark cluster's secret, 32+ chars", "nodeId": "n$i"}}
JSON
    MCPX_STATE_DIR="$WORK/n$i/state" MCPX_LOG=warn "$BIN/mcpx" daemon --config "$WORK/n$i/config.json" --port "$p" >"$WORK/n$i/log" 2>&1 & PIDS+=($!)
    wait_port "$p"; NODES+=("127.0.0.1:$p")
done
# Starts an nginx in front of the servers given and sets NGINX_PORT. Not a $(...): its
# subshell would keep the PID to itself and wait for nginx, which holds its stdout.
nginx_for() { # name, servers...
    local name=$1; shift; local np; np=$(port); mkdir -p "$WORK/$name"
    { echo "user root; worker_processes 2; pid $WORK/$name/nginx.pid; error_log $WORK/$name/error.log warn;"
      echo "events { worker_connections 4096; } http { access_log off; client_body_temp_path $WORK/$name/b; proxy_temp_path $WORK/$name/p;"
      echo 'map $http_mcp_session_id $mcpx_affinity { "" $request_id; default $http_mcp_session_id; }'
      echo 'upstream mcpx { hash $mcpx_affinity consistent; keepalive 64;'
      for s in "$@"; do echo "server $s;"; done
      echo "} server { listen 127.0.0.1:$np; location / { proxy_pass http://mcpx; proxy_http_version 1.1;"
      echo 'proxy_set_header Connection ""; proxy_set_header Host $http_host; proxy_buffering off; } } }'
    } > "$WORK/$name/nginx.conf"
    nginx -c "$WORK/$name/nginx.conf" -p "$WORK/$name" -g 'daemon off;' >"$WORK/$name/stdout" 2>&1 & PIDS+=($!)
    wait_port "$np"; NGINX_PORT=$np
}
nginx_for three "${NODES[@]}"; N3=$NGINX_PORT
nginx_for one "${NODES[0]}"; N1=$NGINX_PORT

# One tools/call of fakemcp's echo in a named session; LABELS sessions, picked at random.
cat > "$WORK/call.lua" <<'LUA'
local labels = tonumber(os.getenv("LABELS") or "1")
local prefix = os.getenv("PREFIX") or "s"
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
wrk.headers["MCP-Protocol-Version"] = "2026-07-28"
wrk.headers["Mcp-Method"] = "tools/call"
wrk.headers["Mcp-Name"] = "mcpx_call"
request = function()
  local label = labels == 1 and "bench" or (prefix .. math.random(labels))
  return wrk.format(nil, "/mcp", nil, '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mcpx_call","arguments":{"server":"notes","tool":"echo","arguments":{"message":"hi"}},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"wrk","version":"0"},"dev.mcpx/session":"' .. label .. '"}}}')
end
LUA
# One 2025-11-25 tools/call of the global server's echo in the session SESSION names.
cat > "$WORK/legacy.lua" <<'LUA'
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
wrk.headers["MCP-Protocol-Version"] = "2025-11-25"
wrk.headers["Mcp-Session-Id"] = os.getenv("SESSION")
wrk.body = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mcpx_call","arguments":{"server":"shared","tool":"echo","arguments":{"message":"hi"}}}}'
LUA
# A 2025-11-25 session opened on the node at $1: its Mcp-Session-Id.
legacy_session() {
    local id
    id=$(curl -s -D - -o /dev/null -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
        -d '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"0"}}}' \
        "http://$1/mcp" | awk 'tolower($1) == "mcp-session-id:" {print $2}' | tr -d '\r')
    curl -s -o /dev/null -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
        -H 'MCP-Protocol-Version: 2025-11-25' -H "Mcp-Session-Id: $id" \
        -d '{"jsonrpc":"2.0","method":"notifications/initialized"}' "http://$1/mcp"
    echo "$id"
}
run() { # label, url, connections, labels[, script]
    local out; out=$(LABELS=$4 wrk -t1 -c"$3" -d"$DUR" --latency -s "$WORK/${5:-call}.lua" "http://$2/mcp")
    local rps lat p99 errs
    rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out"); lat=$(awk '/^    Latency/ {print $2}' <<<"$out")
    p99=$(awk '/ 99%/ {print $2}' <<<"$out"); errs=$(awk '/Non-2xx|Socket errors/ {print}' <<<"$out")
    printf '%-44s %10s req/s  mean %-9s p99 %-9s %s\n' "$1" "$rps" "$lat" "$p99" "$errs"
}
# Warm: the session's instance starts on node 1 (it takes the lease), then each node once.
LABELS=1 wrk -t1 -c1 -d1s -s "$WORK/call.lua" "http://${NODES[0]}/mcp" >/dev/null
for n in "${NODES[@]}"; do LABELS=1 wrk -t1 -c1 -d1s -s "$WORK/call.lua" "http://$n/mcp" >/dev/null; done
echo "one caller, one session (owner: node 1)"
run "  through the owner (node 1)" "${NODES[0]}" 1 1
run "  through another node (node 2, forwarded)" "${NODES[1]}" 1 1
echo "one 2025-11-25 session calling a global server (owner: node 1)"
curl -s -o /dev/null -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
    -H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: tools/call' -H 'Mcp-Name: mcpx_call' \
    -d '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mcpx_call","arguments":{"server":"shared","tool":"echo","arguments":{}},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}' \
    "http://${NODES[0]}/mcp"
for n in 0 1; do
    SESSION=$(legacy_session "${NODES[$n]}") wrk -t1 -c1 -d1s -s "$WORK/legacy.lua" "http://${NODES[$n]}/mcp" >/dev/null
done
SESSION=$(legacy_session "${NODES[0]}") run "  in a session on the owner (node 1)" "${NODES[0]}" 1 1 legacy
SESSION=$(legacy_session "${NODES[1]}") run "  in a session on node 2 (relayed)" "${NODES[1]}" 1 1 legacy
echo "16 connections, 64 sessions (their instances where their first call landed)"
export PREFIX=one; LABELS=64 wrk -t1 -c16 -d2s -s "$WORK/call.lua" "http://127.0.0.1:$N1/mcp" >/dev/null
run "  nginx -> one node" "127.0.0.1:$N1" 16 64
export PREFIX=three; LABELS=64 wrk -t1 -c16 -d2s -s "$WORK/call.lua" "http://127.0.0.1:$N3/mcp" >/dev/null
run "  nginx -> three nodes" "127.0.0.1:$N3" 16 64
