#!/usr/bin/env bash
# Cleaning under load (docs/compaction.md §3, issue 13): the same fixed-rate sluice-bench run
# against a compacted topic with the log cleaner cleaning during the run ("compact") and against
# the same topic with cleanup.policy=delete ("delete": nothing is old enough to delete, so the
# cleaner has nothing to do). Rounds are interleaved, the order flipped each round (C D, D C, ...),
# every run on a fresh `sluice serve` and a fresh data directory. Prints per-round and median ack
# p99 and e2e p99 for both, the ratios of the medians (compact / delete; the issue's goal is
# within 10 %), and the cleaner's work in each compact run from the broker's /metrics
# (sluice_log_cleaner_*): passes, bytes before cleaning, bytes read and written, pass time, MB/s.
#
# Usage: scripts/compaction-compare.sh [ROUNDS]      (default 3)
# Environment: SLUICE_BIN, SLUICE_BENCH_BIN (default target/release/ in this repo),
#              OUT_DIR (default target/compaction-compare), PORT_BASE (default 19400: each run
#              uses PORT_BASE+2i for Kafka and PORT_BASE+2i+1 for /metrics), DURATION (40s),
#              WARMUP (5s), RATE (5000), BACKOFF_MS (log.cleaner.backoff.ms: 1000, so a pass
#              starts within a second of a segment becoming cleanable, as in the Kafka
#              comparison of docs/compaction.md §3; 15000 is the broker's default),
#              OVERRIDES (more broker settings, space-separated key=value, for both kinds of
#              run; e.g. log.cleaner.io.max.bytes.per.second=20000000 to throttle the passes,
#              or log.cleaner.enable=false to see what the compact policy costs without any).
# Builds nothing.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SLUICE_BIN="${SLUICE_BIN:-$ROOT/target/release/sluice}"
SLUICE_BENCH_BIN="${SLUICE_BENCH_BIN:-$ROOT/target/release/sluice-bench}"
OUT_DIR="${OUT_DIR:-$ROOT/target/compaction-compare}"
PORT_BASE="${PORT_BASE:-19400}"
DURATION="${DURATION:-40s}"
WARMUP="${WARMUP:-5s}"
RATE="${RATE:-5000}"
BACKOFF_MS="${BACKOFF_MS:-1000}"
OVERRIDES="${OVERRIDES:-}"
ROUNDS="${1:-3}"

say() { echo "compaction-compare: $*" >&2; }
for b in "$SLUICE_BIN" "$SLUICE_BENCH_BIN"; do
    [ -x "$b" ] || { say "missing binary $b (set SLUICE_BIN / SLUICE_BENCH_BIN)"; exit 1; }
done
mkdir -p "$OUT_DIR"

BROKER_PID=""
cleanup() {
    if [ -n "$BROKER_PID" ]; then
        kill -TERM "$BROKER_PID" 2>/dev/null || true
        wait "$BROKER_PID" 2>/dev/null || true
    fi
}
trap cleanup EXIT

# run POLICY ROUND PORT_INDEX
run() {
    local policy="$1" round="$2" idx="$3"
    local port=$((PORT_BASE + 2 * idx)) mport=$((PORT_BASE + 2 * idx + 1))
    local tag="r${round}-${policy}" data="$OUT_DIR/data-r${round}-${policy}"
    rm -rf "$data"
    local extra=()
    for kv in $OVERRIDES; do extra+=(--override "$kv"); done
    "$SLUICE_BIN" serve --listen "127.0.0.1:$port" --data-dir "$data" \
        --metrics-listen "127.0.0.1:$mport" \
        --override "log.cleaner.backoff.ms=$BACKOFF_MS" \
        "${extra[@]}" \
        --override group.initial.rebalance.delay.ms=0 \
        >"$OUT_DIR/$tag.broker.out" 2>"$OUT_DIR/$tag.broker.err" &
    BROKER_PID=$!
    for _ in $(seq 1 100); do
        grep -q "sluice listening on" "$OUT_DIR/$tag.broker.out" 2>/dev/null && break
        sleep 0.1
    done
    grep -q "sluice listening on" "$OUT_DIR/$tag.broker.out" \
        || { say "sluice did not start"; cat "$OUT_DIR/$tag.broker.err" >&2; exit 1; }
    say "round $round $policy: broker pid $BROKER_PID on :$port, load $(cut -d' ' -f1-3 /proc/loadavg)"
    uptime >"$OUT_DIR/$tag.uptime-before"
    "$SLUICE_BENCH_BIN" --bootstrap "127.0.0.1:$port" --broker-pid "$BROKER_PID" \
        --rate "$RATE" --message-size 1024 --keys round-robin --key-count 1000 --partitions 1 \
        --warmup "$WARMUP" --duration "$DURATION" \
        --topic-config "cleanup.policy=$policy" --topic-config segment.bytes=4194304 \
        --topic-config segment.ms=5000 --topic-config min.cleanable.dirty.ratio=0.1 \
        --json "$OUT_DIR/$tag.json" >"$OUT_DIR/$tag.bench.out" 2>"$OUT_DIR/$tag.bench.err" \
        || { say "sluice-bench failed ($tag)"; tail -20 "$OUT_DIR/$tag.bench.err" >&2; exit 1; }
    uptime >"$OUT_DIR/$tag.uptime-after"
    curl -fsS "http://127.0.0.1:$mport/metrics" >"$OUT_DIR/$tag.metrics" \
        || say "could not read /metrics ($tag)"
    kill -TERM "$BROKER_PID" 2>/dev/null || true
    wait "$BROKER_PID" 2>/dev/null || true
    BROKER_PID=""
    rm -rf "$data"
}

idx=0
for r in $(seq 1 "$ROUNDS"); do
    if [ $((r % 2)) -eq 1 ]; then order="compact delete"; else order="delete compact"; fi
    for p in $order; do
        run "$p" "$r" "$idx"
        idx=$((idx + 1))
    done
done

python3 - "$OUT_DIR" "$ROUNDS" <<'EOF'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])

def metrics(path):
    m = {}
    try:
        for line in open(path):
            if line.startswith("sluice_log_cleaner_"):
                k, v = line.split()[:2]
                m[k.removesuffix("_total")] = float(v)  # counters end in _total
    except OSError:
        pass
    return m

rows = {"compact": [], "delete": []}
print(f"{'round':>5} {'policy':>8} {'ack p99':>9} {'e2e p99':>9} {'ack p50':>8} {'passes':>6} "
      f"{'before MB':>9} {'read MB':>8} {'written MB':>10} {'pass s':>7} {'MB/s clean':>10} {'MB/s read':>9} {'CPU ms/MiB':>9} {'lost':>5}  load (1/5/15) after")
for r in range(1, rounds + 1):
    for p in ("compact", "delete"):
        tag = f"r{r}-{p}"
        rep = json.load(open(f"{out}/{tag}.json"))
        lat, bp, n = rep["latency"], rep.get("broker_process") or {}, rep["counts"]
        ack99, e2e99, ack50 = lat["ack"]["p99_ms"], lat["e2e"]["p99_ms"], lat["ack"]["p50_ms"]
        cpu = bp.get("cpu_ms_per_mib") or float("nan")
        lost = n["produced"] - n["received"]
        m = metrics(f"{out}/{tag}.metrics")
        secs = m.get("sluice_log_cleaner_pass_seconds", 0.0)
        before, read = m.get("sluice_log_cleaner_before_bytes", 0) / 1e6, m.get("sluice_log_cleaner_read_bytes", 0) / 1e6
        written = m.get("sluice_log_cleaner_written_bytes", 0) / 1e6
        mbs = f"{before / secs:.0f}" if secs else "-"
        mbr = f"{read / secs:.0f}" if secs else "-"
        load = " ".join(open(f"{out}/{tag}.uptime-after").read().split("load average:")[1].split())
        rows[p].append((ack99, e2e99))
        print(f"{r:>5} {p:>8} {ack99:>9.1f} {e2e99:>9.1f} {ack50:>8.2f} "
              f"{int(m.get('sluice_log_cleaner_passes', 0)):>6} {before:>9.1f} {read:>8.1f} {written:>10.1f} "
              f"{secs:>7.2f} {mbs:>10} {mbr:>9} {cpu:>9.1f} {lost:>5}  {load}")
med = {p: (statistics.median(a for a, _ in v), statistics.median(e for _, e in v)) for p, v in rows.items()}
for p in ("compact", "delete"):
    print(f"median {p:>8}: ack p99 {med[p][0]:.1f} ms, e2e p99 {med[p][1]:.1f} ms")
ra, re_ = med["compact"][0] / med["delete"][0], med["compact"][1] / med["delete"][1]
print(f"ratio compact/delete of medians: ack p99 {ra:.2f}, e2e p99 {re_:.2f} "
      f"(goal <= 1.10: {'met' if ra <= 1.10 and re_ <= 1.10 else 'NOT met'} by the medians)")
EOF
