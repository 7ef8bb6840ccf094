#!/usr/bin/env bash
# Runs every Sluice test: the format and lint gates, Rust unit and crate tests, then the
# real-client integration suite against a real `sluice serve` process. Installs what it
# needs (Python packages into .venv).
# Usage: ./scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== format and lint gates (cargo fmt --check, clippy -D warnings)"
# rustup's default profile has both; a minimal one may not (a no-op when present).
if command -v rustup >/dev/null 2>&1; then
    rustup component add rustfmt clippy >/dev/null 2>&1 || true
fi
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --release -- -D warnings 2>&1

echo "== cargo test (workspace)"
cargo test --workspace --release 2>&1

# The journal is written with O_DIRECT by default; the log suite (crash models included)
# runs once more with it written through the page cache, the other setting.
echo "== cargo test -p sluice-log, journal through the page cache (sluice.journal.direct.io=false)"
SLUICE_TEST_JOURNAL_DIRECT_IO=0 cargo test -p sluice-log --release 2>&1

echo "== integration tests (real clients, real broker process)"
./scripts/test-integration.sh
