#!/usr/bin/env bash
# The official MCP conformance suite's CLIENT leg, with mcpx as the client: for each scenario
# the suite starts its scenario server and runs scripts/conformance-client-adapter.py with
# that server's URL; the adapter starts an mcpx daemon of its own whose one HTTP upstream is
# that URL (exposed with its own names, "exposePrefix": "never") and drives the scenario's
# calls through mcpx's /mcp, so everything the scenario server sees was sent by mcpx.
#
# Runs every required client scenario of each requirement set, the auth/* ones included,
# one `conformance client --scenario S --spec-version REV` run each, plus
# json-schema-2020-12-preservation, which both sets run but do not score (reported, never
# counted against the exit status). Then, once, the authorization scenarios outside the
# two sets: the 2025-03-26 fallbacks (at 2025-03-26) and the client-credentials extension
# (no revision), counted under "extras" against the same baseline.
#
# In the auth/* scenarios the adapter also plays the person at the browser: it opens each
# login URL mcpx hands out (see the adapter), so the whole OAuth flow is mcpx's.
#
# Self-contained: installs the pinned suite and Node 22 (scripts/deps.sh) and builds mcpx.
# Prints each run's own output, then per revision the total over its checks in the suite's
# own format (`Total: N passed, M failed, W warnings`, summed from the runs' checks.json).
# Exits non-zero when a scenario fails that the `client:` list of
# conformance/expected-failures.yml does not name (or one it names now passes).
#
#   scripts/conformance-client.sh                 # both requirement sets
#   scripts/conformance-client.sh 2026-07-28      # one
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
revisions=("${@:-2025-11-25 2026-07-28}")
read -r -a revisions <<<"${revisions[*]}"

# Required client scenarios (`npx conformance list --requirements REV`).
auth_both="auth/metadata-default auth/metadata-var1 auth/metadata-var2 auth/metadata-var3 auth/basic-cimd auth/scope-from-www-authenticate auth/scope-from-scopes-supported auth/scope-omitted-when-undefined auth/scope-step-up auth/scope-retry-limit auth/token-endpoint-auth-basic auth/token-endpoint-auth-post auth/token-endpoint-auth-none auth/pre-registration"
auth_2026="auth/resource-mismatch auth/offline-access-scope auth/offline-access-not-supported auth/authorization-server-migration auth/iss-supported auth/iss-not-advertised auth/iss-supported-missing auth/iss-wrong-issuer auth/iss-unexpected auth/iss-normalized auth/metadata-issuer-mismatch"
scenarios_for() {
    case "$1" in
        2025-11-25) echo "initialize tools_call elicitation-sep1034-client-defaults sse-retry $auth_both" ;;
        2026-07-28) echo "tools_call request-metadata sep-2322-client-request-state http-standard-headers http-custom-headers http-invalid-tool-headers json-schema-ref-no-deref $auth_both $auth_2026" ;;
        *) echo "conformance-client: unknown revision $1" >&2; return 1 ;;
    esac
}
# Authorization scenarios outside both sets: "revision:scenario" ("-" for none).
extras="2025-03-26:auth/2025-03-26-oauth-metadata-backcompat 2025-03-26:auth/2025-03-26-oauth-endpoint-fallback -:auth/client-credentials-basic -:auth/client-credentials-jwt"
unscored="json-schema-2020-12-preservation"

scripts/deps.sh
cargo build --locked -p mcpx

work="$(mktemp -d "${TMPDIR:-/tmp}/mcpx-conformance-client.XXXXXX")"
trap 'rm -rf "$work"' EXIT
python="$(command -v python3)"
adapter="$python $root/scripts/conformance-client-adapter.py"
expected="$root/conformance/expected-failures.yml"

# One suite run; its output, colour stripped. Status 0 when the baseline holds.
run() { # revision ("-": none) scenario out-dir [baseline]
    local args=(client --command "$adapter" --scenario "$2" -o "$3")
    [[ "$1" != "-" ]] && args+=(--spec-version "$1")
    [[ -n "${4:-}" ]] && args+=(--expected-failures "$4")
    (cd .deps/node && MCPX_BIN="$root/target/debug/mcpx" npx conformance "${args[@]}") 2>&1 \
        | sed 's/\x1b\[[0-9;]*m//g'
}

# `Total:` over every checks.json under a directory, counted the way the suite counts.
total() {
    python3 - "$1" <<'PY'
import glob, json, os, re, sys
passed = failed = warnings = 0
# auth/* scenarios write under auth/: every checks.json at any depth counts.
for path in sorted(glob.glob(os.path.join(sys.argv[1], "**", "checks.json"), recursive=True)):
    checks = json.load(open(path))
    p = sum(c["status"] == "SUCCESS" for c in checks)
    f = sum(c["status"] == "FAILURE" for c in checks)
    w = sum(c["status"] == "WARNING" for c in checks)
    name = re.sub(r"-\d{4}-\d{2}-\d{2}T[\d-]+Z$", "", os.path.relpath(os.path.dirname(path), sys.argv[1]))
    passed, failed, warnings = passed + p, failed + f, warnings + w
    print(f"{'✓' if f == 0 and w == 0 else '✗'} {name}: {p} passed, {f} failed" + (f", {w} warnings" if w else ""))
print(f"\nTotal: {passed} passed, {failed} failed, {warnings} warnings")
PY
}

status=0
summary=()
for revision in "${revisions[@]}"; do
    read -r -a scenarios <<<"$(scenarios_for "$revision")"
    unexpected=()
    for scenario in "${scenarios[@]}"; do
        echo "=== conformance client --scenario $scenario --spec-version $revision ==="
        if ! run "$revision" "$scenario" "$work/client-$revision" "$expected"; then
            unexpected+=("$scenario")
        fi
    done
    for scenario in $unscored; do
        echo "=== conformance client --scenario $scenario --spec-version $revision (run, not scored) ==="
        run "$revision" "$scenario" "$work/unscored-$revision" || true
    done
    echo "=== client leg $revision: ${#scenarios[@]} required scenarios ==="
    total "$work/client-$revision"
    echo "not scored:"
    total "$work/unscored-$revision" | sed 's/^Total:/Total (not scored):/'
    if ((${#unexpected[@]})); then
        status=1
        summary+=("$revision: unexpected results (failures not in $expected, or entries now passing): ${unexpected[*]}")
    else
        summary+=("$revision: every failure is listed in conformance/expected-failures.yml")
    fi
done
unexpected=()
for extra in $extras; do
    echo "=== conformance client --scenario ${extra#*:} ${extra%%:*} ==="
    if ! run "${extra%%:*}" "${extra#*:}" "$work/extras" "$expected"; then
        unexpected+=("${extra#*:}")
    fi
done
echo "=== client leg extras: authorization scenarios outside the requirement sets ==="
total "$work/extras"
if ((${#unexpected[@]})); then
    status=1
    summary+=("extras: unexpected results: ${unexpected[*]}")
else
    summary+=("extras: every failure is listed in conformance/expected-failures.yml")
fi
echo "=== client leg summary ==="
printf '%s\n' "${summary[@]}"
exit $status
