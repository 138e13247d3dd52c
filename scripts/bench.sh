#!/usr/bin/env bash
# The mcpx benchmark, from a fresh clone: builds mcpx, fakemcp and mcpx-bench in release
# mode, runs every scenario (stdio relay in both eras, HTTP at 1, 8 and 32 clients),
# prints the tables and writes bench/results.json. mcpx-bench starts and stops every
# process it measures; nothing is left running. See docs/performance.md.
#
#   scripts/bench.sh                          # everything, default load
#   scripts/bench.sh --requests 50000         # extra arguments go to `mcpx-bench all`
#   scripts/bench.sh --clients 1,8,32,128 --threads 2
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

cargo build --locked --release -p mcpx -p fakemcp -p mcpx-bench

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
    "$@"
# Only a complete run replaces the committed figures.
chmod 644 "$partial"
mv "$partial" bench/results.json
trap - EXIT
echo "wrote bench/results.json"
