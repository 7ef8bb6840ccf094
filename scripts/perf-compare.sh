#!/usr/bin/env bash
# One command for the side-by-side comparison of Apache Kafka and Sluice on this machine
# (docs/performance.md): builds Sluice (release), fetches Kafka's broker and tools from Maven
# Central, starts both on loopback (Kafka with scripts/kafka-local.sh, Sluice with fsync on and a
# fresh data dir), runs scripts/perf_compare.py (same Java tools and librdkafka probes against
# both, interleaved), and stops both.
#
# Usage: scripts/perf-compare.sh [perf_compare.py options, e.g. --rounds 3 --mb 512 --scenarios e2e]
# Environment: KAFKA_VERSION (4.4.0), KAFKA_PORT (19092), SLUICE_PERF_PORT (19192),
#              PERF_DIR (target/perf)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
export KAFKA_VERSION="${KAFKA_VERSION:-4.4.0}"
export KAFKA_PORT="${KAFKA_PORT:-19092}"
SLUICE_PORT="${SLUICE_PERF_PORT:-19192}"
PERF_DIR="${PERF_DIR:-$ROOT/target/perf}"
VENV="$ROOT/.venv"

say() { echo "perf-compare: $*" >&2; }

if ! "$VENV/bin/python" -c 'import confluent_kafka' >/dev/null 2>&1; then
    python3 -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r tests/requirements.txt
fi
scripts/java-deps.sh >/dev/null
CLASSPATH_TOOLS="$ROOT/target/java-deps/*"
say "building sluice (release)"
cargo build --release -p sluice >&2

mkdir -p "$PERF_DIR"
rm -rf "$PERF_DIR/sluice-data"
SLUICE_PID=""
cleanup() {
    [ -n "$SLUICE_PID" ] && kill -TERM "$SLUICE_PID" 2>/dev/null && wait "$SLUICE_PID" 2>/dev/null || true
    scripts/kafka-local.sh stop || true
}
trap cleanup EXIT

KAFKA_BOOTSTRAP="$(scripts/kafka-local.sh start)"
KAFKA_PID="$(cat "${KAFKA_HOME:-$ROOT/.cache/kafka-$KAFKA_VERSION}/kafka.pid")"

"$ROOT/target/release/sluice" serve --listen "127.0.0.1:$SLUICE_PORT" --data-dir "$PERF_DIR/sluice-data" \
    --override group.initial.rebalance.delay.ms=0 >"$PERF_DIR/sluice.out" 2>"$PERF_DIR/sluice.err" &
SLUICE_PID=$!
for _ in $(seq 1 100); do
    grep -q "sluice listening on" "$PERF_DIR/sluice.out" 2>/dev/null && break
    sleep 0.1
done
grep -q "sluice listening on" "$PERF_DIR/sluice.out" || { say "sluice did not start"; cat "$PERF_DIR/sluice.err" >&2; exit 1; }
say "kafka $KAFKA_VERSION at $KAFKA_BOOTSTRAP (pid $KAFKA_PID), sluice at 127.0.0.1:$SLUICE_PORT (pid $SLUICE_PID)"

"$VENV/bin/python" scripts/perf_compare.py \
    --kafka "$KAFKA_BOOTSTRAP,$KAFKA_PID" --sluice "127.0.0.1:$SLUICE_PORT,$SLUICE_PID" \
    --classpath "$CLASSPATH_TOOLS" --json "$PERF_DIR/results.json" --fsync-probe-dir "$PERF_DIR" "$@"
