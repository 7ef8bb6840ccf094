#!/usr/bin/env bash
# Runs the real-client integration suite (tests/integration) against a release build of
# sluice. Creates .venv if needed, installs tests/requirements.txt, builds the binary, runs
# pytest. Extra arguments go to pytest (e.g. -k crash, -x).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VENV="$ROOT/.venv"

if ! "$VENV/bin/python" -c 'import sys' >/dev/null 2>&1; then
    echo "test-integration: creating virtualenv $VENV" >&2
    rm -rf "$VENV"
    python3 -m venv "$VENV"
fi

echo "test-integration: installing tests/requirements.txt" >&2
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r tests/requirements.txt

echo "test-integration: building sluice (release)" >&2
cargo build --release -p sluice

export SLUICE_BIN="${SLUICE_BIN:-$ROOT/target/release/sluice}"
if [ ! -x "$SLUICE_BIN" ]; then
    echo "test-integration: $SLUICE_BIN is missing or not executable" >&2
    exit 1
fi

exec "$VENV/bin/python" -m pytest tests/integration -v "$@"
