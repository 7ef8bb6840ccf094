#!/usr/bin/env bash
# Runs the real-client integration suite (tests/integration) against the `ci` profile's build
# of sluice (Cargo.toml: release code generation with debug assertions and overflow checks:
# the build scripts/test.sh makes for the Rust tests, so CI compiles the workspace once and
# the broker checks its invariants under real clients). Sets up the clients and drivers
# first (scripts/it-setup.sh: .venv, the Java clients, Kafka's tools, the franz-go driver;
# needs python3, java, javac, mvn and go), builds the binaries, runs pytest. Extra arguments
# go to pytest (e.g. -k crash, -x); test files among them run alone (else the whole suite
# runs).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VENV="$ROOT/.venv"

# Clients, drivers and tools (scripts/it-setup.sh); scripts/test.sh has run it already, in
# the background, and says so with IT_SETUP_DONE=1.
if [ "${IT_SETUP_DONE:-}" != 1 ]; then
    "$ROOT/scripts/it-setup.sh"
fi
unset IT_SETUP_DONE

# The broker and the bench are two binaries; the bench runs the broker beside it. Built as
# `--workspace --bins`, the workspace's feature set, so they link the libraries the test
# build (scripts/test.sh) compiled: `-p sluice -p sluice-bench` resolves features for those
# two packages alone and compiled 33 crates again (2 minutes on this machine).
echo "test-integration: building sluice and sluice-bench (profile ci)" >&2
cargo build --profile ci --workspace --bins

export FRANZ_IT_BIN="$ROOT/target/franz-it"

export SLUICE_BIN="${SLUICE_BIN:-$ROOT/target/ci/sluice}"
export SLUICE_BENCH_BIN="${SLUICE_BENCH_BIN:-$ROOT/target/ci/sluice-bench}"
for bin in "$SLUICE_BIN" "$SLUICE_BENCH_BIN" "$FRANZ_IT_BIN"; do
    if [ ! -x "$bin" ]; then
        echo "test-integration: $bin is missing or not executable" >&2
        exit 1
    fi
done

# Test files or directories among the arguments run alone (`test-integration.sh
# tests/integration/test_x.py -x`); without any, the whole suite runs.
TARGETS=(tests/integration)
for arg in "$@"; do
    case "$arg" in
        -*) ;;
        *) [ -e "${arg%%::*}" ] && TARGETS=() && break ;;
    esac
done
# --durations: the 25 slowest tests, so every run records where the suite's time goes.
# The test files run on two pytest-xdist worker processes, each taking whole files
# (`--dist loadfile`, so a module's fixture such as a Kafka cluster starts once): every test
# has its own broker, ports and directories, and two workers take the suite from 23 to 13
# minutes here. SLUICE_IT_WORKERS=N sets the number (0: one file at a time, in this
# process); a machine with one core gets 0.
if [ "$(nproc 2>/dev/null || echo 1)" -ge 2 ]; then
    WORKERS="${SLUICE_IT_WORKERS:-2}"
else
    WORKERS="${SLUICE_IT_WORKERS:-0}"
fi
# The broker takes SLUICE_* environment variables as its settings and refuses unknown ones,
# so this one must not reach the brokers the tests start.
unset SLUICE_IT_WORKERS
exec "$VENV/bin/python" -m pytest "${TARGETS[@]}" -v --durations=25 \
    -n "$WORKERS" --dist loadfile "$@"
