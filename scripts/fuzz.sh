#!/usr/bin/env bash
# Fuzzes the parts of mcpx that read what others send, each target for a bounded time.
# Not part of scripts/test: it needs the nightly toolchain and cargo-fuzz, and takes
# minutes. A crash leaves its input in fuzz/artifacts/<target>/; turn it into a unit test
# beside the code it broke (see docs/reliability.md) and fix the bug.
#
#   scripts/fuzz.sh                    # every target, 60 s each
#   FUZZ_SECONDS=300 scripts/fuzz.sh   # longer
#   scripts/fuzz.sh lines config       # some targets
#
# The seeds in fuzz/seeds/<target>/ are kept in git; what libFuzzer learns goes to
# fuzz/corpus/<target>/ (not kept).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../fuzz"

CARGO_FUZZ_VERSION=0.13.1
seconds="${FUZZ_SECONDS:-60}"
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(frame identity uri config lines)

rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
if ! cargo fuzz --version 2>/dev/null | grep -q " $CARGO_FUZZ_VERSION"; then
    cargo install cargo-fuzz --version "$CARGO_FUZZ_VERSION" --locked
fi

# -a: debug assertions and overflow checks, so arithmetic overflow is a crash too.
cargo +nightly fuzz build -O -a
failed=()
for target in "${targets[@]}"; do
    mkdir -p "corpus/$target"
    echo "== $target: ${seconds}s"
    # -timeout: one input taking over 10 s is a hang, reported as a crash.
    if ! cargo +nightly fuzz run -O -a "$target" "corpus/$target" "seeds/$target" -- \
        -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1; then
        failed+=("$target")
    fi
done
if [ ${#failed[@]} -gt 0 ]; then
    echo "fuzz: crashes in ${failed[*]}; inputs in fuzz/artifacts/" >&2
    exit 1
fi
echo "fuzz: ${#targets[@]} targets, ${seconds}s each, no crash"
