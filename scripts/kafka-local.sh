#!/usr/bin/env bash
# Runs Apache Kafka as a single KRaft node (broker + controller) on loopback, as the reference
# broker for `sluice-bench --target embedded --target 127.0.0.1:$KAFKA_PORT`; or, with
# KAFKA_NODES=N (N > 1), a cluster of N combined KRaft nodes (each broker + controller, all N
# voters) on loopback, for `sluice-bench --bootstrap <list> --replication-factor 3`.
#
# The broker is fetched from Maven Central (org.apache.kafka:kafka_2.13 and its runtime
# dependencies, resolved by `mvn dependency:copy-dependencies`) into $KAFKA_HOME/libs, so only
# java (17+) and mvn are needed. Nothing listens beyond 127.0.0.1.
#
# Usage: scripts/kafka-local.sh start|stop|status|fetch|pids|ssl-bootstrap|wipe
#   start prints the bootstrap list (one address for one node) on stdout; pids prints the
#   broker pids, one per line (for `sluice-bench --broker-pid`); wipe stops the node(s) and
#   deletes their data.
# Environment: KAFKA_VERSION (4.4.0), KAFKA_PORT (19092), KAFKA_CONTROLLER_PORT (KAFKA_PORT + 1),
#              KAFKA_HOME (.cache/kafka-$KAFKA_VERSION), KAFKA_HEAP (1G; 512M per node when
#              KAFKA_NODES > 1), KAFKA_START_TIMEOUT_S (90), KAFKA_NODES (1),
#              KAFKA_CLEANER_LOG (0; 1: the log cleaner's pass statistics in
#              $KAFKA_HOME/log-cleaner.log, one node only)
#              KAFKA_SSL_DIR (unset: no TLS)
# With KAFKA_NODES=N > 1, node i (1..N) listens on KAFKA_PORT + 2(i-1) and its controller on
# KAFKA_CONTROLLER_PORT + 2(i-1) (19092/19093, 19094/19095, ...); its files live under
# $KAFKA_HOME/cluster-$KAFKA_PORT/node-i, so clusters on other ports do not share them. The
# cluster's default.replication.factor and internal topics' replication are min(N, 3),
# transaction.state.log.min.isr min(N, 2); node i has broker.rack=rack-i.
# With KAFKA_SSL_DIR=DIR (one node only), the node also listens with TLS on the same port at
# the IPv6 loopback address, SSL://[::1]:$KAFKA_PORT (Kafka lets an IPv4 and an IPv6 listener
# share a port, so TLS needs no port of its own), from a PEM key store
# (ssl.keystore.type=PEM): DIR/keystore.pem (unencrypted PKCS#8 key + certificate chain) and
# DIR/ca.pem, made with openssl when missing (a CA and a server certificate for 127.0.0.1, ::1
# and localhost). Clients trust DIR/ca.pem (librdkafka `ssl.ca.location`, Java
# `ssl.truststore.type=PEM` + `ssl.truststore.location`). `start` still prints the PLAINTEXT
# address; `ssl-bootstrap` prints the TLS one.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
KAFKA_VERSION="${KAFKA_VERSION:-4.4.0}"
KAFKA_PORT="${KAFKA_PORT:-19092}"
KAFKA_CONTROLLER_PORT="${KAFKA_CONTROLLER_PORT:-$((KAFKA_PORT + 1))}"
KAFKA_HOME="${KAFKA_HOME:-$ROOT/.cache/kafka-$KAFKA_VERSION}"
KAFKA_NODES="${KAFKA_NODES:-1}"
KAFKA_SSL_DIR="${KAFKA_SSL_DIR:-}"
case "$KAFKA_NODES" in
    '' | *[!0-9]* | 0) echo "kafka-local: KAFKA_NODES must be a whole number >= 1, not '$KAFKA_NODES'" >&2; exit 2 ;;
esac
if [ "$KAFKA_NODES" -gt 1 ]; then
    KAFKA_HEAP="${KAFKA_HEAP:-512M}"
else
    KAFKA_HEAP="${KAFKA_HEAP:-1G}"
fi
KAFKA_START_TIMEOUT_S="${KAFKA_START_TIMEOUT_S:-90}"
KAFKA_CLEANER_LOG="${KAFKA_CLEANER_LOG:-0}"
CLUSTER_DIR="$KAFKA_HOME/cluster-$KAFKA_PORT"
PIDFILE="$KAFKA_HOME/kafka.pid"
CP="$KAFKA_HOME/libs/*"

say() { echo "kafka-local: $*" >&2; }

fetch() {
    if [ -f "$KAFKA_HOME/libs/.complete" ]; then
        return
    fi
    command -v mvn >/dev/null || { say "mvn is needed to fetch Kafka from Maven Central"; exit 1; }
    mkdir -p "$KAFKA_HOME/libs"
    # The broker's runtime classpath, plus the log4j 1 binding its distribution ships.
    cat >"$KAFKA_HOME/pom.xml" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.sluice</groupId>
  <artifactId>kafka-broker-fetch</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>$KAFKA_VERSION</version></dependency>
    <dependency><groupId>org.slf4j</groupId><artifactId>slf4j-reload4j</artifactId><version>1.7.36</version></dependency>
  </dependencies>
</project>
EOF
    say "fetching org.apache.kafka:kafka_2.13:$KAFKA_VERSION and dependencies from Maven Central"
    mvn -q -B -f "$KAFKA_HOME/pom.xml" dependency:copy-dependencies \
        -DoutputDirectory="$KAFKA_HOME/libs" -DincludeScope=runtime >&2
    touch "$KAFKA_HOME/libs/.complete"
}

# A CA and a server certificate (SAN 127.0.0.1, ::1, localhost) in $KAFKA_SSL_DIR, unless there.
ssl_store() {
    local d="$KAFKA_SSL_DIR"
    [ -f "$d/keystore.pem" ] && [ -f "$d/ca.pem" ] && return
    command -v openssl >/dev/null || { say "openssl is needed to make the TLS key store"; exit 1; }
    mkdir -p "$d"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout "$d/ca.key" -out "$d/ca.pem" -days 30 \
        -subj "/CN=kafka-local CA" -addext "basicConstraints=critical,CA:TRUE" \
        -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -keyout "$d/server.key" -out "$d/server.csr" \
        -subj "/CN=localhost" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n' \
        >"$d/server.ext"
    openssl x509 -req -in "$d/server.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" -CAcreateserial \
        -out "$d/server.pem" -days 30 -extfile "$d/server.ext" 2>/dev/null
    # Kafka's PEM key store: an unencrypted PKCS#8 key, then the chain, in one file.
    cat "$d/server.key" "$d/server.pem" "$d/ca.pem" >"$d/keystore.pem"
    chmod 600 "$d/keystore.pem" "$d/server.key" "$d/ca.key"
    say "made a TLS key store in $d (clients trust $d/ca.pem)"
}

configure() {
    mkdir -p "$KAFKA_HOME/data"
    local listeners="PLAINTEXT://127.0.0.1:$KAFKA_PORT" protocols="PLAINTEXT:PLAINTEXT"
    if [ -n "$KAFKA_SSL_DIR" ]; then
        ssl_store
        listeners="$listeners,SSL://[::1]:$KAFKA_PORT"
        protocols="$protocols,SSL:SSL"
    fi
    cat >"$KAFKA_HOME/server.properties" <<EOF
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$KAFKA_CONTROLLER_PORT
listeners=$listeners,CONTROLLER://127.0.0.1:$KAFKA_CONTROLLER_PORT
advertised.listeners=$listeners
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=$protocols,CONTROLLER:PLAINTEXT
log.dirs=$KAFKA_HOME/data
num.partitions=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
group.initial.rebalance.delay.ms=0
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
EOF
    if [ -n "$KAFKA_SSL_DIR" ]; then
        cat >>"$KAFKA_HOME/server.properties" <<EOF
ssl.keystore.type=PEM
ssl.keystore.location=$KAFKA_SSL_DIR/keystore.pem
ssl.truststore.type=PEM
ssl.truststore.location=$KAFKA_SSL_DIR/ca.pem
EOF
    fi
    cat >"$KAFKA_HOME/log4j.properties" <<EOF
log4j.rootLogger=WARN, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File=$KAFKA_HOME/kafka.log
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
EOF
    if [ "$KAFKA_CLEANER_LOG" = 1 ]; then
        # The log cleaner's per-pass statistics (INFO) into log-cleaner.log, as Kafka's own
        # distribution configures it (the logger's name changed when the cleaner moved to Java).
        cat >>"$KAFKA_HOME/log4j.properties" <<EOF
log4j.appender.cleaner=org.apache.log4j.FileAppender
log4j.appender.cleaner.File=$KAFKA_HOME/log-cleaner.log
log4j.appender.cleaner.layout=org.apache.log4j.PatternLayout
log4j.appender.cleaner.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.log.LogCleaner=INFO, cleaner
log4j.additivity.kafka.log.LogCleaner=false
log4j.logger.org.apache.kafka.storage.internals.log.LogCleaner=INFO, cleaner
log4j.additivity.org.apache.kafka.storage.internals.log.LogCleaner=false
log4j.logger.org.apache.kafka.storage.internals.log.LogCleaner\$CleanerThread=INFO, cleaner
log4j.additivity.org.apache.kafka.storage.internals.log.LogCleaner\$CleanerThread=false
EOF
    fi
    if [ ! -f "$KAFKA_HOME/data/meta.properties" ]; then
        local id
        id="$(java -Dlog4j.configuration="file:$KAFKA_HOME/log4j.properties" -cp "$CP" \
            kafka.tools.StorageTool random-uuid | tail -n 1)"
        java -Dlog4j.configuration="file:$KAFKA_HOME/log4j.properties" -cp "$CP" \
            kafka.tools.StorageTool format -t "$id" -c "$KAFKA_HOME/server.properties" >/dev/null
    fi
}

running() {
    [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null
}

port_open() {
    (exec 3<>"/dev/tcp/127.0.0.1/$KAFKA_PORT") 2>/dev/null
}

start() {
    if running; then
        say "already running (pid $(cat "$PIDFILE"))"
        echo "127.0.0.1:$KAFKA_PORT"
        return
    fi
    command -v java >/dev/null || { say "java (17+) is needed"; exit 1; }
    fetch
    configure
    nohup java -Xms"$KAFKA_HEAP" -Xmx"$KAFKA_HEAP" -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
        -Dlog4j.configuration="file:$KAFKA_HOME/log4j.properties" \
        -cp "$CP" kafka.Kafka "$KAFKA_HOME/server.properties" \
        >"$KAFKA_HOME/stdout.log" 2>&1 &
    echo $! >"$PIDFILE"
    local waited=0
    until port_open; do
        if ! running; then
            say "Kafka exited during startup; see $KAFKA_HOME/stdout.log and kafka.log"
            tail -20 "$KAFKA_HOME/stdout.log" >&2 || true
            exit 1
        fi
        if [ "$waited" -ge "$KAFKA_START_TIMEOUT_S" ]; then
            say "Kafka did not listen within ${KAFKA_START_TIMEOUT_S}s; stopping it"
            stop
            exit 1
        fi
        sleep 1
        waited=$((waited + 1))
    done
    say "Kafka $KAFKA_VERSION listening on 127.0.0.1:$KAFKA_PORT${KAFKA_SSL_DIR:+ and with TLS on [::1]:$KAFKA_PORT} (pid $(cat "$PIDFILE"), data $KAFKA_HOME/data)"
    echo "127.0.0.1:$KAFKA_PORT"
}

stop() {
    if ! running; then
        say "not running"
        rm -f "$PIDFILE"
        return
    fi
    local pid
    pid="$(cat "$PIDFILE")"
    kill -TERM "$pid"
    for _ in $(seq 1 60); do
        kill -0 "$pid" 2>/dev/null || { rm -f "$PIDFILE"; say "stopped"; return; }
        sleep 0.5
    done
    say "pid $pid did not stop within 30s; killing it"
    kill -KILL "$pid" 2>/dev/null || true
    rm -f "$PIDFILE"
}

# ---- KAFKA_NODES > 1: a cluster of combined nodes -------------------------------------------

node_dir() { echo "$CLUSTER_DIR/node-$1"; }
node_port() { echo $((KAFKA_PORT + 2 * ($1 - 1))); }
node_controller_port() { echo $((KAFKA_CONTROLLER_PORT + 2 * ($1 - 1))); }
node_running() {
    local f
    f="$(node_dir "$1")/kafka.pid"
    [ -f "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null
}
node_port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$(node_port "$1")") 2>/dev/null; }

cluster_bootstrap() {
    local i list=""
    for i in $(seq 1 "$KAFKA_NODES"); do
        list="${list:+$list,}127.0.0.1:$(node_port "$i")"
    done
    echo "$list"
}

cluster_configure() {
    local i dir voters="" cluster_id=""
    local rf=$((KAFKA_NODES < 3 ? KAFKA_NODES : 3))
    local min_isr=$((KAFKA_NODES < 2 ? KAFKA_NODES : 2))
    for i in $(seq 1 "$KAFKA_NODES"); do
        voters="${voters:+$voters,}$i@127.0.0.1:$(node_controller_port "$i")"
    done
    mkdir -p "$CLUSTER_DIR"
    [ -f "$CLUSTER_DIR/cluster.id" ] && cluster_id="$(cat "$CLUSTER_DIR/cluster.id")"
    for i in $(seq 1 "$KAFKA_NODES"); do
        dir="$(node_dir "$i")"
        mkdir -p "$dir/data"
        cat >"$dir/server.properties" <<PROPS
process.roles=broker,controller
node.id=$i
broker.rack=rack-$i
controller.quorum.voters=$voters
listeners=PLAINTEXT://127.0.0.1:$(node_port "$i"),CONTROLLER://127.0.0.1:$(node_controller_port "$i")
advertised.listeners=PLAINTEXT://127.0.0.1:$(node_port "$i")
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$dir/data
num.partitions=1
num.network.threads=2
num.io.threads=2
default.replication.factor=$rf
offsets.topic.replication.factor=$rf
transaction.state.log.replication.factor=$rf
transaction.state.log.min.isr=$min_isr
group.initial.rebalance.delay.ms=0
PROPS
        cat >"$dir/log4j.properties" <<PROPS
log4j.rootLogger=WARN, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File=$dir/kafka.log
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
PROPS
        if [ ! -f "$dir/data/meta.properties" ]; then
            # Every node of the cluster is formatted with the same cluster id.
            if [ -z "$cluster_id" ]; then
                cluster_id="$(java -Dlog4j.configuration="file:$dir/log4j.properties" -cp "$CP" \
                    kafka.tools.StorageTool random-uuid | tail -n 1)"
                echo "$cluster_id" >"$CLUSTER_DIR/cluster.id"
            fi
            java -Dlog4j.configuration="file:$dir/log4j.properties" -cp "$CP" \
                kafka.tools.StorageTool format -t "$cluster_id" -c "$dir/server.properties" >/dev/null
        fi
    done
}

cluster_pids() {
    local i
    for i in $(seq 1 "$KAFKA_NODES"); do
        if node_running "$i"; then cat "$(node_dir "$i")/kafka.pid"; fi
    done
}

cluster_stop() {
    local i pid pids=""
    for i in $(seq 1 "$KAFKA_NODES"); do
        if node_running "$i"; then
            pid="$(cat "$(node_dir "$i")/kafka.pid")"
            kill -TERM "$pid"
            pids="$pids $pid"
        fi
    done
    for pid in $pids; do
        for _ in $(seq 1 60); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.5
        done
        if kill -0 "$pid" 2>/dev/null; then
            say "pid $pid did not stop within 30s; killing it"
            kill -KILL "$pid" 2>/dev/null || true
        fi
    done
    for i in $(seq 1 "$KAFKA_NODES"); do rm -f "$(node_dir "$i")/kafka.pid"; done
    if [ -n "$pids" ]; then say "stopped (pids$pids)"; else say "not running"; fi
}

cluster_start() {
    local i dir waited=0
    command -v java >/dev/null || { say "java (17+) is needed"; exit 1; }
    fetch
    cluster_configure
    for i in $(seq 1 "$KAFKA_NODES"); do
        dir="$(node_dir "$i")"
        if node_running "$i"; then
            say "node $i already running (pid $(cat "$dir/kafka.pid"))"
            continue
        fi
        nohup java -Xms"$KAFKA_HEAP" -Xmx"$KAFKA_HEAP" -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
            -Dlog4j.configuration="file:$dir/log4j.properties" \
            -cp "$CP" kafka.Kafka "$dir/server.properties" \
            >"$dir/stdout.log" 2>&1 &
        echo $! >"$dir/kafka.pid"
    done
    # The controllers need a quorum, so every node is started before any is waited for.
    for i in $(seq 1 "$KAFKA_NODES"); do
        until node_port_open "$i"; do
            if ! node_running "$i"; then
                say "node $i exited during startup; see $(node_dir "$i")/stdout.log and kafka.log"
                tail -20 "$(node_dir "$i")/stdout.log" >&2 || true
                cluster_stop
                exit 1
            fi
            if [ "$waited" -ge "$KAFKA_START_TIMEOUT_S" ]; then
                say "node $i did not listen within ${KAFKA_START_TIMEOUT_S}s; stopping the cluster"
                cluster_stop
                exit 1
            fi
            sleep 1
            waited=$((waited + 1))
        done
    done
    say "Kafka $KAFKA_VERSION: $KAFKA_NODES nodes listening on $(cluster_bootstrap) (pids $(cluster_pids | xargs); data under $CLUSTER_DIR)"
    cluster_bootstrap
}

cluster_status() {
    local i down=0
    for i in $(seq 1 "$KAFKA_NODES"); do
        if node_running "$i"; then
            echo "node $i running pid $(cat "$(node_dir "$i")/kafka.pid") on 127.0.0.1:$(node_port "$i")"
        else
            echo "node $i not running"
            down=1
        fi
    done
    return "$down"
}

if [ "$KAFKA_NODES" -gt 1 ]; then
    [ -z "$KAFKA_SSL_DIR" ] || { say "KAFKA_SSL_DIR is for one node only"; exit 2; }
    case "${1:-}" in
        start) cluster_start ;;
        stop) cluster_stop ;;
        status) cluster_status ;;
        fetch) fetch ;;
        pids) cluster_pids ;;
        wipe) cluster_stop; rm -rf "$CLUSTER_DIR"; say "deleted $CLUSTER_DIR" ;;
        *) echo "usage: $0 start|stop|status|fetch|pids|wipe" >&2; exit 2 ;;
    esac
    exit 0
fi

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    status) if running; then echo "running pid $(cat "$PIDFILE") on 127.0.0.1:$KAFKA_PORT"; else echo "not running"; exit 1; fi ;;
    fetch) fetch ;;
    pids) if running; then cat "$PIDFILE"; fi ;;
    ssl-bootstrap) [ -n "$KAFKA_SSL_DIR" ] || { say "KAFKA_SSL_DIR is not set"; exit 2; }; echo "[::1]:$KAFKA_PORT" ;;
    wipe) stop; rm -rf "$KAFKA_HOME/data"; say "deleted $KAFKA_HOME/data" ;;
    *) echo "usage: $0 start|stop|status|fetch|pids|ssl-bootstrap|wipe" >&2; exit 2 ;;
esac
