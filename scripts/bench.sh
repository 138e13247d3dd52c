#!/usr/bin/env bash
# The mcpx benchmark, from a fresh clone: installs the pinned peer gateways, builds mcpx,
# fakemcp and mcpx-bench in release mode, runs every scenario (stdio relay in both eras;
# HTTP throughput at 1, 8, 32 and 128 clients against a direct fakemcp, mcpx (mcpx_call and
# exposed tools, in both eras), mcp-proxy and fastmcp; 1,000 sessions; cold start; mcpx_exec against mcpx_call), prints the tables, writes bench/results.json and
# draws bench/results.png from it. mcpx-bench starts and stops every process it measures;
# nothing is left running. See docs/performance.md.
#
#   scripts/bench.sh                          # everything, default load
#   scripts/bench.sh --requests 50000         # extra arguments go to `mcpx-bench all`
#   scripts/bench.sh --clients 1,8,32 --no-peers
#   scripts/bench.sh --peers-only             # just install the peers
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# --- The peer gateways, each in its own venv (mcp-proxy pins mcp<2, fastmcp needs mcp>=2),
# under the git-ignored .deps/bench. Idempotent: a venv whose stamp matches its pins is kept.
PEERS=.deps/bench
PYTHON="${PYTHON:-python3}"
MCP_PROXY_PIN="mcp-proxy==0.13.0"
FASTMCP_PIN="fastmcp==4.2.3"

log() { printf 'bench.sh: %s\n' "$*" >&2; }

# peer_venv DIR PIN: a venv at DIR holding exactly PIN (and what it depends on).
peer_venv() {
    local venv="$1" pin="$2" stamp="$1/.mcpx-bench-pin"
    if [[ -f "$stamp" && "$(cat "$stamp")" == "$pin" ]] && "$venv/bin/python" -c '' 2>/dev/null; then
        log "$pin present in $venv"
        return 0
    fi
    rm -rf "$venv"
    "$PYTHON" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input "$pin" >&2
    local name="${pin%%==*}" want="${pin#*==}" have
    have="$("$venv/bin/python" -c "from importlib.metadata import version; print(version('$name'))")"
    if [[ "$have" != "$want" ]]; then
        log "$name: wanted $want, got $have"
        return 1
    fi
    printf '%s' "$pin" > "$stamp"
    log "$pin installed in $venv"
}

peers=1
args=()
for arg in "$@"; do
    case "$arg" in
        --no-peers) peers=0 ;;
        --peers-only) peers=only ;;
        *) args+=("$arg") ;;
    esac
done

peer_args=()
if [[ "$peers" != 0 ]]; then
    mkdir -p "$PEERS"
    peer_venv "$PEERS/mcp-proxy" "$MCP_PROXY_PIN"
    peer_venv "$PEERS/fastmcp" "$FASTMCP_PIN"
    [[ "$peers" == only ]] && exit 0
    peer_args=(--mcp-proxy "$PEERS/mcp-proxy/bin/mcp-proxy" --fastmcp "$PEERS/fastmcp/bin/fastmcp")
fi

cargo build --locked --release -p mcpx -p fakemcp -p mcpx-bench --features mcpx-bench/plot

commit=$(git rev-parse --short HEAD)
# The binaries come from the working tree, which may differ from the commit.
if ! git diff --quiet HEAD -- crates Cargo.toml Cargo.lock; then
    commit="$commit-dirty"
fi

mkdir -p bench
partial=$(mktemp bench/.results.XXXXXX)
trap 'rm -f "$partial"' EXIT
target/release/mcpx-bench all \
    --json "$partial" \
    --meta "date=$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
    --meta "commit=$commit" \
    --meta "rustc=$(rustc --version)" \
    ${peer_args[@]+"${peer_args[@]}"} \
    ${args[@]+"${args[@]}"}
# Only a complete run replaces the committed figures.
chmod 644 "$partial"
mv "$partial" bench/results.json
trap - EXIT
echo "wrote bench/results.json"
target/release/mcpx-bench plot bench/results.json bench/results.png
echo "wrote bench/results.png"
