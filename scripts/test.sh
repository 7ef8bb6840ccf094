#!/usr/bin/env bash
# Runs every Sluice test: Rust unit and crate tests, then the real-client integration suite
# against a real `sluice serve` process. Installs what it needs (Python packages into .venv).
# Usage: ./scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== cargo test (workspace)"
cargo test --workspace --release 2>&1

echo "== integration tests (real clients, real broker process)"
./scripts/test-integration.sh
