#!/usr/bin/env bash
# Disk use under mixed retention and the journal cleaner's cost (issue 32's goals):
# builds Sluice, fetches Kafka's tools (ProducerPerformance, for the cost part) and runs
# scripts/disk_use.py, which says what each part measures. Extra arguments go to it, e.g.
#   scripts/disk-use.sh --parts space --mb 1400
#   scripts/disk-use.sh --parts long --long-s 600 --rate 20
#   scripts/disk-use.sh --parts cost --rounds 4 --mb 1024
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VENV="$ROOT/.venv"
if ! "$VENV/bin/python" -c 'import confluent_kafka' >/dev/null 2>&1; then
    python3 -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r tests/requirements.txt
fi
scripts/java-deps.sh >/dev/null
cargo build --release -p sluice >&2
exec "$VENV/bin/python" scripts/disk_use.py "$@"
