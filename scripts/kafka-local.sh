#!/usr/bin/env bash
# Runs Apache Kafka as a single KRaft node (broker + controller) on loopback, as the reference
# broker for `sluice bench --target embedded --target 127.0.0.1:$KAFKA_PORT`.
#
# The broker is fetched from Maven Central (org.apache.kafka:kafka_2.13 and its runtime
# dependencies, resolved by `mvn dependency:copy-dependencies`) into $KAFKA_HOME/libs, so only
# java (17+) and mvn are needed. Nothing listens beyond 127.0.0.1.
#
# Usage: scripts/kafka-local.sh start|stop|status|fetch
# Environment: KAFKA_VERSION (3.9.1), KAFKA_PORT (19092), KAFKA_CONTROLLER_PORT (19093),
#              KAFKA_HOME (.cache/kafka-$KAFKA_VERSION), KAFKA_HEAP (1G),
#              KAFKA_START_TIMEOUT_S (90)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
KAFKA_VERSION="${KAFKA_VERSION:-3.9.1}"
KAFKA_PORT="${KAFKA_PORT:-19092}"
KAFKA_CONTROLLER_PORT="${KAFKA_CONTROLLER_PORT:-19093}"
KAFKA_HOME="${KAFKA_HOME:-$ROOT/.cache/kafka-$KAFKA_VERSION}"
KAFKA_HEAP="${KAFKA_HEAP:-1G}"
KAFKA_START_TIMEOUT_S="${KAFKA_START_TIMEOUT_S:-90}"
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
        -DoutputDirectory="$KAFKA_HOME/libs" -DincludeScope=runtime
    touch "$KAFKA_HOME/libs/.complete"
}

configure() {
    mkdir -p "$KAFKA_HOME/data"
    cat >"$KAFKA_HOME/server.properties" <<EOF
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$KAFKA_CONTROLLER_PORT
listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT,CONTROLLER://127.0.0.1:$KAFKA_CONTROLLER_PORT
advertised.listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$KAFKA_HOME/data
num.partitions=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
group.initial.rebalance.delay.ms=0
EOF
    cat >"$KAFKA_HOME/log4j.properties" <<EOF
log4j.rootLogger=WARN, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File=$KAFKA_HOME/kafka.log
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
EOF
    if [ ! -f "$KAFKA_HOME/data/meta.properties" ]; then
        local id
        id="$(java -Dlog4j.configuration="file:$KAFKA_HOME/log4j.properties" -cp "$CP" \
            kafka.tools.StorageTool random-uuid)"
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
    say "Kafka $KAFKA_VERSION listening on 127.0.0.1:$KAFKA_PORT (pid $(cat "$PIDFILE"), data $KAFKA_HOME/data)"
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

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    status) if running; then echo "running pid $(cat "$PIDFILE") on 127.0.0.1:$KAFKA_PORT"; else echo "not running"; exit 1; fi ;;
    fetch) fetch ;;
    *) echo "usage: $0 start|stop|status|fetch" >&2; exit 2 ;;
esac
