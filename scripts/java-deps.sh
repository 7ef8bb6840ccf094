#!/usr/bin/env bash
# Fetches and builds the Java client family of the integration suite:
#   target/java-deps/    kafka-clients, kafka-tools (kafka-consumer-groups, kafka-log-dirs, ...),
#                        kafka-streams and their runtime dependencies from Maven Central
#                        (versions pinned in tests/integration/java/pom.xml: Kafka 4.4), via
#                        `mvn dependency:copy-dependencies`
#   target/java-deps-connect/  a Kafka Connect worker (connect-runtime) and the FileStream
#                        connectors (connect-file), one release of their own
#                        (tests/integration/java/connect/pom.xml: connect-file stops at 4.3.1)
#   target/java-classes/ tests/integration/java/src/*.java compiled with javac
# All are cached: they are rebuilt only when a pom or the sources change (stamp files hold
# a hash of their inputs), so a rerun costs a few milliseconds and no network.
# Needs java, javac (17+) and mvn on PATH. Prints the classpath on stdout when done.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SRC="$ROOT/tests/integration/java"
DEPS="$ROOT/target/java-deps"
CLASSES="$ROOT/target/java-classes"

missing=()
for tool in java javac mvn; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if [ "${#missing[@]}" -gt 0 ]; then
    echo "java-deps: missing ${missing[*]} on PATH; the Java client tests need a JDK 17+ (java, javac)" \
         "and Maven 3.6+ (mvn), e.g. apt-get install openjdk-17-jdk-headless maven" >&2
    exit 1
fi

hash_of() { cat "$@" | sha256sum | cut -d' ' -f1; }

# Copies the runtime dependencies of POM into DIR, unless DIR's stamp says they are there.
fetch_deps() {
    local pom="$1" dir="$2" key
    key="$(hash_of "$pom")"
    if [ "$(cat "$dir/.stamp" 2>/dev/null || true)" = "$key" ]; then
        return
    fi
    echo "java-deps: fetching the dependencies of $pom from Maven Central into $dir" >&2
    local start log
    start=$(date +%s)
    rm -rf "$dir" "$dir.tmp"
    mkdir -p "$(dirname "$dir")"
    log="$dir-mvn.log"
    if ! nice -n 10 mvn -B -q -Dstyle.color=never -f "$pom" dependency:copy-dependencies \
            -DincludeScope=runtime -DoutputDirectory="$dir.tmp" >"$log" 2>&1; then
        cat "$log" >&2
        echo "java-deps: mvn dependency:copy-dependencies failed (is Maven Central reachable?)" >&2
        exit 1
    fi
    echo "$key" > "$dir.tmp/.stamp"
    mv "$dir.tmp" "$dir"
    echo "java-deps: $(ls "$dir" | grep -c '\.jar$') jars in $(( $(date +%s) - start ))s" >&2
}

fetch_deps "$SRC/pom.xml" "$DEPS"
fetch_deps "$SRC/connect/pom.xml" "$ROOT/target/java-deps-connect"

classes_key="$(hash_of "$DEPS/.stamp" "$SRC"/src/*.java)"
if [ "$(cat "$CLASSES/.stamp" 2>/dev/null || true)" != "$classes_key" ]; then
    echo "java-deps: compiling $SRC/src into $CLASSES" >&2
    rm -rf "$CLASSES" "$CLASSES.tmp"
    mkdir -p "$CLASSES.tmp"
    nice -n 10 javac --release 17 -Xlint:all,-processing -Werror -encoding UTF-8 \
        -cp "$DEPS/*" -d "$CLASSES.tmp" "$SRC"/src/*.java >&2
    echo "$classes_key" > "$CLASSES.tmp/.stamp"
    mv "$CLASSES.tmp" "$CLASSES"
fi

echo "$CLASSES:$DEPS/*"
