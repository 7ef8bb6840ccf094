#!/usr/bin/env bash
# Runs the real-client integration suite (tests/integration) against a release build of
# sluice. Creates .venv if needed, installs tests/requirements.txt, fetches and compiles the
# Java clients (scripts/java-deps.sh; needs java, javac and mvn), builds the binary and the
# franz-go driver (needs go), runs pytest. Extra arguments go to pytest (e.g. -k crash, -x);
# test files among them run alone (else the whole suite runs).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VENV="$ROOT/.venv"

if ! "$VENV/bin/python" -c 'import sys' >/dev/null 2>&1; then
    echo "test-integration: creating virtualenv $VENV" >&2
    rm -rf "$VENV"
    python3 -m venv "$VENV"
fi

echo "test-integration: installing tests/requirements.txt" >&2
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r tests/requirements.txt

# The Java client family (kafka-clients, kafka-consumer-groups): fetched from Maven Central
# once into target/java-deps/, compiled into target/java-classes/; cached after that.
echo "test-integration: fetching/building the Java clients (scripts/java-deps.sh)" >&2
if ! "$ROOT/scripts/java-deps.sh" >/dev/null; then
    echo "test-integration: the Java client family could not be set up (see above)" >&2
    exit 1
fi

# Installs Debian package $1 (which provides command $1) with apt-get when the command is
# missing; $2 says which test needs it. Needs root and apt-get, else stops with what to do.
apt_install_if_missing() {
    local package="$1" why="$2"
    command -v "$package" >/dev/null 2>&1 && return 0
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "test-integration: installing $package (apt-get) for $why" >&2
        if ! { apt-get update -qq >/dev/null && \
               DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$package" >/dev/null; }; then
            echo "test-integration: apt-get could not install $package (see above)" >&2
            exit 1
        fi
    else
        echo "test-integration: $package is required ($why) but is not on PATH;" \
             "install Debian's $package package, or run this script as root with apt-get available" >&2
        exit 1
    fi
}

# Headless Chromium renders the bench HTML report (tests/integration/test_bench_html.py).
apt_install_if_missing chromium "the bench HTML render test"
# kcat (librdkafka's command-line client) over SASL_SSL and mTLS (test_secured_clients.py).
apt_install_if_missing kcat "the secured-clients test"

# The broker and the bench are two binaries; the bench runs the broker beside it.
echo "test-integration: building sluice and sluice-bench (release)" >&2
cargo build --release -p sluice -p sluice-bench

# franz-go client driver (tests/integration/franz, test_franz.py): built from source every run;
# go.sum pins every module, and -mod=readonly refuses to change it.
GO="$(command -v go || true)"
if [ -z "$GO" ] && [ -x /usr/local/go/bin/go ]; then
    GO=/usr/local/go/bin/go
fi
if [ -z "$GO" ]; then
    echo "test-integration: the Go toolchain (go) is required to build the franz-go client driver" \
         "(tests/integration/franz) but is not on PATH nor at /usr/local/go/bin/go" >&2
    exit 1
fi
echo "test-integration: building tests/integration/franz with $("$GO" version)" >&2
(cd tests/integration/franz && "$GO" build -mod=readonly -buildvcs=false -o "$ROOT/target/franz-it" .)
export FRANZ_IT_BIN="$ROOT/target/franz-it"

export SLUICE_BIN="${SLUICE_BIN:-$ROOT/target/release/sluice}"
export SLUICE_BENCH_BIN="${SLUICE_BENCH_BIN:-$ROOT/target/release/sluice-bench}"
for bin in "$SLUICE_BIN" "$SLUICE_BENCH_BIN"; do
    if [ ! -x "$bin" ]; then
        echo "test-integration: $bin is missing or not executable" >&2
        exit 1
    fi
done

# Test files or directories among the arguments run alone (`test-integration.sh
# tests/integration/test_x.py -x`); without any, the whole suite runs.
TARGETS=(tests/integration)
for arg in "$@"; do
    case "$arg" in
        -*) ;;
        *) [ -e "${arg%%::*}" ] && TARGETS=() && break ;;
    esac
done
# --durations: the 25 slowest tests, so every run records where the suite's time goes.
# The test files run on two pytest-xdist worker processes, each taking whole files
# (`--dist loadfile`, so a module's fixture such as a Kafka cluster starts once): every test
# has its own broker, ports and directories, and two workers take the suite from 23 to 13
# minutes here. SLUICE_IT_WORKERS=N sets the number (0: one file at a time, in this
# process); a machine with one core gets 0.
if [ "$(nproc 2>/dev/null || echo 1)" -ge 2 ]; then
    WORKERS="${SLUICE_IT_WORKERS:-2}"
else
    WORKERS="${SLUICE_IT_WORKERS:-0}"
fi
# The broker takes SLUICE_* environment variables as its settings and refuses unknown ones,
# so this one must not reach the brokers the tests start.
unset SLUICE_IT_WORKERS
exec "$VENV/bin/python" -m pytest "${TARGETS[@]}" -v --durations=25 \
    -n "$WORKERS" --dist loadfile "$@"
