#!/usr/bin/env bash
# Runs every Sluice test: the format and lint gates, Rust unit and crate tests, then the
# real-client integration suite against a real `sluice serve` process. Installs what it
# needs (Python packages into .venv).
# Usage: ./scripts/test.sh
#
# Everything is built once, with the `ci` profile (Cargo.toml): release code generation with
# debug assertions and overflow checks on, so the invariants the code states are checked
# while the tests run. The integration suite's broker and bench are that build too.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each phase's heading says when it started, so a CI log shows where the time went.
phase() { echo "== $* (at $(date -u +%H:%M:%S), ${SECONDS} s in)"; }

# The integration suite's clients, drivers and tools (scripts/it-setup.sh: pip, Maven, apt-get,
# go build) are set up in the background while the Rust gates and tests run: most of that
# time is spent waiting on the network and the disk, which overlaps with the compiler.
mkdir -p target
SETUP_LOG="target/it-setup.log"
scripts/it-setup.sh >"$SETUP_LOG" 2>&1 &
SETUP_PID=$!
trap 'kill "$SETUP_PID" 2>/dev/null || true' EXIT

# The object backend's stores (PostgreSQL, SeaweedFS's S3 server), started on loopback for
# the Rust tests that talk to them and the integration tests of the object backend; stopped
# when this script exits. SLUICE_TEST_STORES=required: those tests fail instead of skipping.
phase "test stores for the object backend (scripts/stores.sh)"
STORES_DIR="$(mktemp -d /tmp/sluice-stores.XXXXXX)"
stop_stores() { scripts/stores.sh stop "$STORES_DIR" >/dev/null 2>&1 || true; }
trap 'stop_stores; kill "$SETUP_PID" 2>/dev/null || true' EXIT
# Assigned first: a failed start stops the script here (an `eval "$(...)"` would hide it).
STORES_ENV="$(scripts/stores.sh start "$STORES_DIR")"
eval "$STORES_ENV"
export SLUICE_TEST_STORES=required

phase "format and lint gates (cargo fmt --check, clippy -D warnings)"
# rustup's default profile has both; a minimal one may not (a no-op when present).
if command -v rustup >/dev/null 2>&1; then
    rustup component add rustfmt clippy >/dev/null 2>&1 || true
fi
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --profile ci -- -D warnings 2>&1

phase "cargo test (workspace, profile ci: debug assertions and overflow checks on)"
cargo test --workspace --profile ci 2>&1

# The journal is written with O_DIRECT by default; the log suite (crash models included)
# runs once more with it written through the page cache, the other setting. It runs the
# test executables the workspace build just made: `cargo test -p sluice-log` would compile
# the crate again, with the feature set of that one package (two minutes on CI).
phase "sluice-log tests, journal through the page cache (sluice.journal.direct.io=false)"
LOG_TESTS="$(cargo test --workspace --profile ci --no-run --message-format=json 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"] \
            and m["target"]["src_path"].split("/crates/")[-1].startswith("sluice-log/"):
        print(m["executable"])
')"
[ -n "$LOG_TESTS" ] || { echo "test.sh: no sluice-log test executables found" >&2; exit 1; }
for exe in $LOG_TESTS; do
    echo "-- $(basename "$exe")"
    (cd crates/sluice-log && SLUICE_TEST_JOURNAL_DIRECT_IO=0 "$exe" 2>&1)
done

phase "integration test setup (scripts/it-setup.sh, started in the background at 0 s)"
if ! wait "$SETUP_PID"; then
    cat "$SETUP_LOG"
    echo "test.sh: the integration test setup failed (log above)" >&2
    exit 1
fi
# Reaped: its pid may belong to another process from now on, so the trap must not kill it.
trap stop_stores EXIT
cat "$SETUP_LOG"

phase "integration tests (real clients, real broker process)"
IT_SETUP_DONE=1 ./scripts/test-integration.sh
phase "every test passed"
