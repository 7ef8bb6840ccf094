#!/usr/bin/env bash
# Fetches and builds the Java client family of the integration suite:
#   target/java-deps/    kafka-clients, kafka-tools (kafka-consumer-groups), connect-file (with
#                        connect-runtime: a Connect worker), kafka-streams and their runtime
#                        dependencies from Maven Central (versions pinned in
#                        tests/integration/java/pom.xml), via `mvn dependency:copy-dependencies`
#   target/java-classes/ tests/integration/java/src/*.java compiled with javac
# Both are cached: they are rebuilt only when the pom or the sources change (stamp files hold
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

deps_key="$(hash_of "$SRC/pom.xml")"
if [ "$(cat "$DEPS/.stamp" 2>/dev/null || true)" != "$deps_key" ]; then
    echo "java-deps: fetching kafka-clients, kafka-tools, connect-file and kafka-streams from Maven Central into $DEPS" >&2
    start=$(date +%s)
    rm -rf "$DEPS" "$DEPS.tmp"
    mkdir -p "$(dirname "$DEPS")"
    log="$(dirname "$DEPS")/java-deps-mvn.log"
    if ! nice -n 10 mvn -B -q -Dstyle.color=never -f "$SRC/pom.xml" dependency:copy-dependencies \
            -DincludeScope=runtime -DoutputDirectory="$DEPS.tmp" >"$log" 2>&1; then
        cat "$log" >&2
        echo "java-deps: mvn dependency:copy-dependencies failed (is Maven Central reachable?)" >&2
        exit 1
    fi
    echo "$deps_key" > "$DEPS.tmp/.stamp"
    mv "$DEPS.tmp" "$DEPS"
    echo "java-deps: $(ls "$DEPS" | grep -c '\.jar$') jars in $(( $(date +%s) - start ))s" >&2
fi

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
