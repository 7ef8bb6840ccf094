#!/usr/bin/env bash
# TLS cost, Apache Kafka against Sluice, same clients (docs/operations.md, "TLS cost against
# Kafka"): starts Kafka with a PLAINTEXT and an SSL listener (scripts/kafka-local.sh with
# KAFKA_SSL_DIR: a PEM key store made with openssl) and Sluice with the same two listeners and
# the same key store, runs scripts/tls_compare.py (Kafka's ProducerPerformance and
# ConsumerPerformance against all four endpoints, interleaved), and stops both. Sluice must be
# built (target/release/sluice); Kafka and its tools are fetched by kafka-local.sh and
# java-deps.sh when missing.
#
# Usage: scripts/tls-compare.sh [tls_compare.py options, e.g. --mb 256 --rounds 3]
# Environment: KAFKA_VERSION (4.4.0), KAFKA_PORT (19092; its SSL listener is [::1] on the same
#              port), PERF_DIR (target/tls-compare), SLUICE_BIN (target/release/sluice)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
export KAFKA_VERSION="${KAFKA_VERSION:-4.4.0}"
export KAFKA_PORT="${KAFKA_PORT:-19092}"
PERF_DIR="${PERF_DIR:-$ROOT/target/tls-compare}"
export KAFKA_SSL_DIR="$PERF_DIR/pki"
SLUICE_BIN="${SLUICE_BIN:-$ROOT/target/release/sluice}"
PY="${PYTHON:-$ROOT/.venv/bin/python}"

say() { echo "tls-compare: $*" >&2; }

[ -x "$SLUICE_BIN" ] || { say "no sluice binary at $SLUICE_BIN (cargo build --release -p sluice)"; exit 1; }
scripts/java-deps.sh >/dev/null
mkdir -p "$PERF_DIR"
rm -rf "$PERF_DIR/sluice-data"
SLUICE_PID=""
cleanup() {
    [ -n "$SLUICE_PID" ] && kill -TERM "$SLUICE_PID" 2>/dev/null && wait "$SLUICE_PID" 2>/dev/null || true
    scripts/kafka-local.sh stop || true
    rm -rf "$PERF_DIR/sluice-data"  # a GiB or more of journal; the results stay
}
trap cleanup EXIT

KAFKA_PLAIN="$(scripts/kafka-local.sh start)"
KAFKA_TLS="$(scripts/kafka-local.sh ssl-bootstrap)"
KAFKA_PID="$(scripts/kafka-local.sh pids)"

cat >"$PERF_DIR/sluice.properties" <<EOF
ssl.keystore.type=PEM
ssl.keystore.location=$KAFKA_SSL_DIR/keystore.pem
group.initial.rebalance.delay.ms=0
EOF
"$SLUICE_BIN" serve --listen "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0" --data-dir "$PERF_DIR/sluice-data" \
    --config "$PERF_DIR/sluice.properties" >"$PERF_DIR/sluice.out" 2>"$PERF_DIR/sluice.err" &
SLUICE_PID=$!
for _ in $(seq 1 100); do
    grep -q "sluice listener SSL listening on" "$PERF_DIR/sluice.out" 2>/dev/null && break
    sleep 0.1
done
SLUICE_PLAIN="$(sed -n 's/^sluice listening on \([^ ]*\).*/\1/p' "$PERF_DIR/sluice.out" | head -1)"
SLUICE_TLS="$(sed -n 's/^sluice listener SSL listening on \([^ ]*\).*/\1/p' "$PERF_DIR/sluice.out" | head -1)"
[ -n "$SLUICE_PLAIN" ] && [ -n "$SLUICE_TLS" ] || { say "sluice did not start"; cat "$PERF_DIR/sluice.err" >&2; exit 1; }
say "kafka $KAFKA_VERSION at $KAFKA_PLAIN / SSL $KAFKA_TLS (pid $KAFKA_PID), sluice at $SLUICE_PLAIN / SSL $SLUICE_TLS (pid $SLUICE_PID)"

"$PY" scripts/tls_compare.py --kafka "$KAFKA_PLAIN,$KAFKA_TLS,$KAFKA_PID" \
    --sluice "$SLUICE_PLAIN,$SLUICE_TLS,$SLUICE_PID" --ca "$KAFKA_SSL_DIR/ca.pem" \
    --classpath "$ROOT/target/java-deps/*" --json "$PERF_DIR/results.json" "$@"
