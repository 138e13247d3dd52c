#!/usr/bin/env bash
# The official MCP conformance suite against mcpx: the suite's server scenarios, for both
# the 2025-11-25 and the 2026-07-28 requirement sets, pointed at mcpx's /mcp with the
# fakemcp conformance fixture as its one upstream, exposed with its own names
# ("exposePrefix": "never"), so the suite sees the fixture through mcpx.
#
# Self-contained: installs the pinned suite and Node 22 (scripts/deps.sh), builds mcpx and
# fakemcp, starts and stops the daemon itself. Prints each run's own output. Exits non-zero
# when a scored scenario fails that conformance/expected-failures.yml does not list.
#
#   scripts/conformance.sh                 # both requirement sets
#   scripts/conformance.sh 2026-07-28      # one
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
revisions=("${@:-2025-11-25 2026-07-28}")
read -r -a revisions <<<"${revisions[*]}"

scripts/deps.sh
cargo build --locked -p mcpx -p fakemcp

work="$(mktemp -d "${TMPDIR:-/tmp}/mcpx-conformance.XXXXXX")"
daemon_pid=""
cleanup() {
    if [[ -n "$daemon_pid" ]] && kill -0 "$daemon_pid" 2>/dev/null; then
        kill -TERM "$daemon_pid" 2>/dev/null || true
        wait "$daemon_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

cat >"$work/mcpx.json" <<JSON
{
  "mcpServers": {
    "fixture": { "command": "$root/target/debug/fakemcp", "args": ["--fixture", "conformance"] }
  },
  "expose": ["fixture"],
  "exposePrefix": "never"
}
JSON

MCPX_STATE_DIR="$work/state" MCPX_LOG="${MCPX_LOG:-warn}" \
    target/debug/mcpx daemon --config "$work/mcpx.json" --port 0 2>"$work/daemon.log" &
daemon_pid=$!
for _ in $(seq 1 100); do
    [[ -f "$work/state/daemon.json" ]] && break
    sleep 0.1
done
url="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["url"])' "$work/state/daemon.json")"

# The suite reports a server that is down as failing checks: make sure it is up first.
discover='{"jsonrpc":"2.0","id":0,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}'
if ! curl -sf "$url" -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
    -H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: server/discover' -d "$discover" >/dev/null; then
    echo "conformance: mcpx at $url does not answer server/discover; daemon log:" >&2
    cat "$work/daemon.log" >&2
    exit 1
fi
echo "conformance: mcpx at $url, fixture behind it"

status=0
for revision in "${revisions[@]}"; do
    echo "=== conformance server --requirements $revision ==="
    if ! (cd .deps/node && npx conformance server --url "$url" --requirements "$revision" \
        --expected-failures "$root/conformance/expected-failures.yml" -o "$work/results-$revision") 2>&1 \
        | sed 's/\x1b\[[0-9;]*m//g'; then
        status=1 # pipefail: the suite's own status, not sed's
    fi
done
if [[ $status -ne 0 ]]; then
    echo "conformance: failures beyond conformance/expected-failures.yml; mcpx log:" >&2
    tail -n 40 "$work/daemon.log" >&2
fi
scripts/conformance-client.sh "${revisions[@]}" || status=1 # the client leg: mcpx as the client
exit $status
