#!/usr/bin/env bash
# Runs franz-go's own kgo test suite (its unit tests and its integration tests against a live
# broker: produce, consume, regex, classic and KIP-848 groups, static members, transactions,
# share groups) against one broker on loopback, with KGO_TEST_RF=1, and prints one line per
# test (PASS/FAIL/SKIP, subtests indented under theirs) and a final count line.
#
# The suite is franz-go's module as the Go module proxy serves it (the zip holds the _test.go
# files), fetched with `go mod download` into a GOPATH of its own under
# .cache/kgo-suite/gopath (GOFLAGS=-mod=mod, GOTOOLCHAIN=local) and copied to
# .cache/kgo-suite/src/franz-go-$KGO_VERSION to run. Needs go (1.26+; the suite's go.mod says
# so) and python3 (the summary), plus java and mvn for --kafka (scripts/kafka-local.sh).
#
# The broker under test is started fresh and stopped at the end:
#   default  Sluice from $SLUICE_BIN (target/release/sluice; not built here), a new data dir,
#            `--override group.initial.rebalance.delay.ms=0` as the Kafka below has it, and
#            $KGO_SLUICE_ARGS (extra `serve` arguments, split on spaces).
#   --kafka  Apache Kafka $KAFKA_VERSION (4.4.0) as one KRaft node through scripts/kafka-local.sh,
#            with its own KAFKA_HOME (.cache/kgo-suite/kafka-$KAFKA_VERSION; its libs are a
#            symlink to .cache/kafka-$KAFKA_VERSION/libs when that is complete, else fetched),
#            its data wiped first, and share.coordinator.state.topic.replication.factor=1 and
#            share.coordinator.state.topic.min.isr=1 as Kafka's own one-node server.properties has
#            them (kafka-local.sh leaves them at 3 and 2; a copy of it adds them until it has them).
#
# Usage: scripts/kgo-suite.sh [--kafka] [-run REGEX] [other `go test` flags]
#   e.g. scripts/kgo-suite.sh; scripts/kgo-suite.sh --kafka; scripts/kgo-suite.sh -run 'TestTxnEtl'
# Environment: KGO_VERSION (v1.22.3), KGO_TIMEOUT (40m, go test -timeout),
#              KGO_SLUICE_PORT (19392), KGO_SLUICE_ARGS (empty), SLUICE_BIN (target/release/sluice),
#              KAFKA_VERSION (4.4.0), KAFKA_PORT (19492; its controller KAFKA_PORT + 1),
#              KGO_KAFKA_LOCAL (the script that starts and stops Kafka; default: scripts/kafka-local.sh,
#              or a copy of it with the share coordinator's settings, see below),
#              KGO_KAFKA_HOME (.cache/kgo-suite/kafka-$KAFKA_VERSION),
#              KGO_OUT (.cache/kgo-suite/runs/<sluice|kafka-VERSION>-<UTC time>), GO (go on PATH,
#              else /usr/local/go/bin/go); the suite's own KGO_TEST_RECORDS (500000),
#              KGO_LOG_LEVEL, KGO_TEST_MAX_TOPIC_PARTS, KGO_TEST_SCRAM[_SEEDS] pass through.
# The default ports lie below the ephemeral range (32768+) where the integration suite's
# brokers land (they listen on port 0), and apart from kafka-local.sh's 19092/19093 and
# perf-compare.sh's 19192; a port already taken stops the script before it starts anything.
# KGO_OUT keeps test.json (go test -json), test.log (its plain output), broker.log, summary.txt
# and failures.txt (the output of each failed test). Exit status: 0 when nothing failed.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
KGO_VERSION="${KGO_VERSION:-v1.22.3}"
KGO_TIMEOUT="${KGO_TIMEOUT:-40m}"
KGO_SLUICE_PORT="${KGO_SLUICE_PORT:-19392}"
KGO_SLUICE_ARGS="${KGO_SLUICE_ARGS:-}"
SLUICE_BIN="${SLUICE_BIN:-$ROOT/target/release/sluice}"
export KAFKA_VERSION="${KAFKA_VERSION:-4.4.0}"
export KAFKA_PORT="${KAFKA_PORT:-19492}"
CACHE="$ROOT/.cache/kgo-suite"

say() { echo "kgo-suite: $*" >&2; }

BROKER=sluice
GO_ARGS=()
for arg in "$@"; do
    case "$arg" in
        --kafka) BROKER=kafka ;;
        -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 0 ;;
        *) GO_ARGS+=("$arg") ;;
    esac
done

if [ -z "${GO:-}" ]; then
    GO="$(command -v go || echo /usr/local/go/bin/go)"
fi
[ -x "$GO" ] || { say "go is needed (set GO=/path/to/go)"; exit 1; }
command -v python3 >/dev/null || { say "python3 is needed for the summary"; exit 1; }

STAMP="$(date -u +%Y%m%dT%H%M%SZ)"
if [ "$BROKER" = kafka ]; then LABEL="kafka-$KAFKA_VERSION"; else LABEL=sluice; fi
OUT="${KGO_OUT:-$CACHE/runs/$LABEL-$STAMP}"
mkdir -p "$OUT"

# ---- the suite, from the Go module proxy ------------------------------------------------------
export GOPATH="$CACHE/gopath"
export GOMODCACHE="$GOPATH/pkg/mod"
export GOCACHE="$CACHE/gocache"
export GOFLAGS=-mod=mod
export GOTOOLCHAIN=local
SRC="$CACHE/src/franz-go-$KGO_VERSION"
if [ ! -f "$SRC/.complete" ]; then
    say "downloading github.com/twmb/franz-go@$KGO_VERSION through the Go module proxy"
    mkdir -p "$CACHE/dl"
    # Outside any module, so `go mod download` takes the module path itself.
    DIR="$(cd "$CACHE/dl" && "$GO" mod download -json "github.com/twmb/franz-go@$KGO_VERSION" |
        python3 -c 'import json,sys; d=json.load(sys.stdin); print(d.get("Dir") or sys.exit(d.get("Error","no Dir")))')"
    rm -rf "$SRC"
    mkdir -p "$(dirname "$SRC")"
    cp -r "$DIR" "$SRC"
    chmod -R u+w "$SRC" # the module cache is read-only; go test may update go.sum
    touch "$SRC/.complete"
fi
say "compiling the suite (once per version; cached in $GOCACHE)"
(cd "$SRC" && "$GO" test -count=1 -run '^$' ./pkg/kgo/... >/dev/null)

# ---- the broker under test ----------------------------------------------------------------------
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

SLUICE_PID=""
KAFKA_STARTED=0
cleanup() {
    if [ -n "$SLUICE_PID" ] && kill -0 "$SLUICE_PID" 2>/dev/null; then
        kill -TERM "$SLUICE_PID" 2>/dev/null || true
        for _ in $(seq 1 40); do kill -0 "$SLUICE_PID" 2>/dev/null || break; sleep 0.25; done
        kill -KILL "$SLUICE_PID" 2>/dev/null || true
        say "stopped sluice (pid $SLUICE_PID)"
    fi
    SLUICE_PID=""
    if [ "$KAFKA_STARTED" = 1 ]; then
        "$KAFKA_LOCAL" stop || true
        cat "$KAFKA_HOME/stdout.log" "$KAFKA_HOME/kafka.log" >"$OUT/broker.log" 2>/dev/null || true
        KAFKA_STARTED=0
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ "$BROKER" = kafka ]; then
    # Kafka's share coordinator creates __share_group_state with replication factor 3 and
    # min.isr 2 unless told otherwise (Kafka's own config/server.properties for one node sets
    # both to 1); scripts/kafka-local.sh does not write them yet, and one node then fails every
    # share-group test with INVALID_REPLICATION_FACTOR. Until it does, a copy of it with the two
    # lines added to its one-node server.properties starts Kafka.
    KAFKA_LOCAL="${KGO_KAFKA_LOCAL:-$ROOT/scripts/kafka-local.sh}"
    if [ -z "${KGO_KAFKA_LOCAL:-}" ] &&
        ! grep -q '^share.coordinator.state.topic.replication.factor=' "$KAFKA_LOCAL"; then
        mkdir -p "$CACHE"
        sed -e "s|^ROOT=.*|ROOT=\"$ROOT\"|" \
            -e '0,/^group.initial.rebalance.delay.ms=0$/s//&\nshare.coordinator.state.topic.replication.factor=1\nshare.coordinator.state.topic.min.isr=1/' \
            "$KAFKA_LOCAL" >"$CACHE/kafka-local.sh"
        chmod +x "$CACHE/kafka-local.sh"
        if [ "$(grep -c '^share.coordinator.state.topic' "$CACHE/kafka-local.sh")" = 2 ]; then
            KAFKA_LOCAL="$CACHE/kafka-local.sh"
        else
            say "could not add the share coordinator's settings to a copy of $KAFKA_LOCAL; share-group tests will fail on one Kafka node"
        fi
    fi
    if port_open "$KAFKA_PORT"; then
        say "127.0.0.1:$KAFKA_PORT is taken; set KAFKA_PORT"
        exit 1
    fi
    export KAFKA_HOME="${KGO_KAFKA_HOME:-$CACHE/kafka-$KAFKA_VERSION}"
    mkdir -p "$KAFKA_HOME"
    SHARED_LIBS="$ROOT/.cache/kafka-$KAFKA_VERSION/libs"
    if [ ! -e "$KAFKA_HOME/libs" ] && [ -f "$SHARED_LIBS/.complete" ]; then
        ln -s "$SHARED_LIBS" "$KAFKA_HOME/libs"
    fi
    "$KAFKA_LOCAL" wipe >/dev/null 2>&1 || true
    rm -f "$KAFKA_HOME/kafka.log" "$KAFKA_HOME/stdout.log"
    KAFKA_STARTED=1
    SEEDS="$("$KAFKA_LOCAL" start)"
    BROKER_DESC="Apache Kafka $KAFKA_VERSION at $SEEDS"
else
    [ -x "$SLUICE_BIN" ] || { say "$SLUICE_BIN is missing (cargo build --release -p sluice)"; exit 1; }
    if port_open "$KGO_SLUICE_PORT"; then
        say "127.0.0.1:$KGO_SLUICE_PORT is taken; set KGO_SLUICE_PORT"
        exit 1
    fi
    DATA="$OUT/sluice-data"
    rm -rf "$DATA"
    # shellcheck disable=SC2086 # KGO_SLUICE_ARGS is a list of arguments
    "$SLUICE_BIN" serve --listen "127.0.0.1:$KGO_SLUICE_PORT" --data-dir "$DATA" \
        --override group.initial.rebalance.delay.ms=0 $KGO_SLUICE_ARGS \
        >"$OUT/broker.log" 2>&1 &
    SLUICE_PID=$!
    for _ in $(seq 1 120); do
        port_open "$KGO_SLUICE_PORT" && break
        kill -0 "$SLUICE_PID" 2>/dev/null || { say "sluice exited; see $OUT/broker.log"; tail -20 "$OUT/broker.log" >&2; exit 1; }
        sleep 0.5
    done
    port_open "$KGO_SLUICE_PORT" || { say "sluice did not listen within 60s"; exit 1; }
    SEEDS="127.0.0.1:$KGO_SLUICE_PORT"
    BROKER_DESC="Sluice $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?') ($SLUICE_BIN) at $SEEDS"
fi
say "running franz-go $KGO_VERSION pkg/kgo against $BROKER_DESC; output in $OUT"

# ---- the suite ----------------------------------------------------------------------------------
export KGO_SEEDS="$SEEDS"
export KGO_TEST_RF=1
START=$(date +%s)
set +e
(cd "$SRC" && "$GO" test -count=1 -timeout "$KGO_TIMEOUT" -json ${GO_ARGS[@]+"${GO_ARGS[@]}"} ./pkg/kgo/...) \
    >"$OUT/test.json" 2>"$OUT/test.stderr"
GO_RC=$?
set -e
ELAPSED=$(($(date +%s) - START))
cleanup
trap - EXIT

# ---- the summary ----------------------------------------------------------------------------------
python3 - "$OUT" "$BROKER_DESC" "$KGO_VERSION" "$ELAPSED" "$GO_RC" <<'PY'
import json, sys, os
out, desc, version, elapsed, rc = sys.argv[1:6]
results = {}  # (package, test) -> [action, seconds]
outputs = {}  # (package, test) -> output lines
order = []
plain = []
pkg_fail = []
with open(os.path.join(out, "test.json"), errors="replace") as f:
    for line in f:
        try:
            ev = json.loads(line)
        except ValueError:
            plain.append(line)
            continue
        pkg, test, action = ev.get("Package", ""), ev.get("Test"), ev.get("Action")
        if action == "output":
            plain.append(ev.get("Output", ""))
        if not test:
            if action == "fail":
                pkg_fail.append(pkg)
            continue
        key = (pkg, test)
        if key not in results:
            results[key] = [None, 0.0]
            order.append(key)
        if action == "output":
            outputs.setdefault(key, []).append(ev.get("Output", ""))
        elif action in ("pass", "fail", "skip"):
            results[key] = [action, ev.get("Elapsed", 0.0)]
with open(os.path.join(out, "test.log"), "w") as f:
    f.writelines(plain)
# Tests by package, parents before their subtests; a test without an end (the package
# timed out or panicked while it ran) counts as a failure.
first = {k: i for i, k in enumerate(order)}
order.sort(key=lambda k: (k[0], k[1].split("/")[0], first[k]))
count = {"pass": 0, "fail": 0, "skip": 0}
subcount = {"pass": 0, "fail": 0, "skip": 0}
lines, failures = [], []
short = lambda p: p.replace("github.com/twmb/franz-go/", "")
for key in order:
    action, secs = results[key]
    pkg, test = key
    if action is None:
        action = "fail"
        outputs.setdefault(key, []).append("(no result: the test binary ended while this test ran)\n")
    sub = "/" in test  # a subtest's own name may hold a slash too, so one level of indent
    (subcount if sub else count)[action] += 1
    lines.append(f"{action.upper():4} {'  ' if sub else ''}{test} ({secs:.2f}s) [{short(pkg)}]")
    if action == "fail":
        failures.append(f"=== {test} [{short(pkg)}]\n" + "".join(outputs.get(key, [])))
total = sum(count.values())
final = (f"kgo-suite: franz-go {version} against {desc}: {total} tests, {count['pass']} passed, "
         f"{count['fail']} failed, {count['skip']} skipped; subtests {subcount['pass']} passed, "
         f"{subcount['fail']} failed, {subcount['skip']} skipped; {elapsed}s, go test exit {rc}")
if pkg_fail:
    final += "; failed packages: " + ", ".join(short(p) for p in sorted(set(pkg_fail)))
with open(os.path.join(out, "summary.txt"), "w") as f:
    f.write("\n".join(lines + [final]) + "\n")
with open(os.path.join(out, "failures.txt"), "w") as f:
    f.write("\n".join(failures))
print("\n".join(lines))
print(final)
PY
say "results in $OUT (summary.txt, failures.txt, test.json, test.log, broker.log)"
exit "$GO_RC"
