#!/usr/bin/env bash
# Installs and builds everything the real-client integration suite needs besides the Sluice
# binaries: the Python clients (tests/requirements.txt into .venv), the Java client family
# (scripts/java-deps.sh), Apache Kafka's broker for the tests that run beside one
# (scripts/kafka-local.sh fetch), Debian's chromium and kcat when missing (apt-get, as root),
# and the franz-go driver (target/franz-it). Each step is cached or idempotent, so a rerun is
# quick. It touches neither cargo nor target/release, so scripts/test.sh runs it in the
# background while the Rust build and tests run (network and disk waits overlap with the
# compiler), and scripts/test-integration.sh runs it first when run alone.
# Usage: scripts/it-setup.sh
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VENV="$ROOT/.venv"

if ! "$VENV/bin/python" -c 'import sys' >/dev/null 2>&1; then
    echo "it-setup: creating virtualenv $VENV" >&2
    rm -rf "$VENV"
    python3 -m venv "$VENV"
fi

echo "it-setup: installing tests/requirements.txt" >&2
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r tests/requirements.txt

# The Java client family (kafka-clients, kafka-consumer-groups): fetched from Maven Central
# once into target/java-deps/, compiled into target/java-classes/; cached after that.
echo "it-setup: fetching/building the Java clients (scripts/java-deps.sh)" >&2
if ! "$ROOT/scripts/java-deps.sh" >/dev/null; then
    echo "it-setup: the Java client family could not be set up (see above)" >&2
    exit 1
fi

# Apache Kafka's broker and tools, the versions test_bench_cluster.py,
# test_kafka_configs_tool.py and test_kafka44_parity.py run: fetched from Maven Central once, so no test waits for it.
# Kafka 4.4 is the reference broker (issue 33).
echo "it-setup: fetching Apache Kafka 4.4.0 (scripts/kafka-local.sh fetch)" >&2
KAFKA_VERSION=4.4.0 "$ROOT/scripts/kafka-local.sh" fetch

# Installs Debian package $1 (which provides command $1) with apt-get when the command is
# missing; $2 says which test needs it. Needs root and apt-get, else stops with what to do.
apt_install_if_missing() {
    local package="$1" why="$2"
    command -v "$package" >/dev/null 2>&1 && return 0
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "it-setup: installing $package (apt-get) for $why" >&2
        if ! { apt-get update -qq >/dev/null && \
               DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$package" >/dev/null; }; then
            echo "it-setup: apt-get could not install $package (see above)" >&2
            exit 1
        fi
    else
        echo "it-setup: $package is required ($why) but is not on PATH;" \
             "install Debian's $package package, or run this script as root with apt-get available" >&2
        exit 1
    fi
}

# Headless Chromium renders the bench HTML report (tests/integration/test_bench_html.py).
apt_install_if_missing chromium "the bench HTML render test"
# kcat (librdkafka's command-line client) over SASL_SSL and mTLS (test_secured_clients.py).
apt_install_if_missing kcat "the secured-clients test"

# franz-go client driver (tests/integration/franz, test_franz.py): built from source every run;
# go.sum pins every module, and -mod=readonly refuses to change it.
GO="$(command -v go || true)"
if [ -z "$GO" ] && [ -x /usr/local/go/bin/go ]; then
    GO=/usr/local/go/bin/go
fi
if [ -z "$GO" ]; then
    echo "it-setup: the Go toolchain (go) is required to build the franz-go client driver" \
         "(tests/integration/franz) but is not on PATH nor at /usr/local/go/bin/go" >&2
    exit 1
fi
echo "it-setup: building tests/integration/franz with $("$GO" version)" >&2
mkdir -p "$ROOT/target"
(cd tests/integration/franz && "$GO" build -mod=readonly -buildvcs=false -o "$ROOT/target/franz-it" .)
echo "it-setup: done" >&2
