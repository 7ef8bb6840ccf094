#!/usr/bin/env bash
# The sync-order mutation check (docs/storage.md §11a): builds sluice-log's `log` test
# binary once with the `mutation` feature, then runs it once per mutation point of
# crates/sluice-log/src/mutation.rs with SLUICE_MUTATE=<point> (that one sync skipped, or
# moved after the step that depends on it) and prints a table: which tests caught it, or
# SURVIVED (reached, and every test passed), or NOT REACHED.
#
# Usage: scripts/mutation-check.sh [--list] [POINT...]
#   --list   print the mutation points and exit (tests/log/mutation_points.rs compares it
#            with the points in the source)
#   POINT    run only these (default: all)
# Environment: MUTATION_LOCK=<file> runs each test run under `flock <file>` (a shared
# machine); MUTATION_TIMEOUT_S (default 600) bounds one run; MUTATION_TEST_THREADS
# (default: the test harness's) is passed as --test-threads.
# The table also goes to target/mutation-check.md. Takes about 20 s per point here.
set -euo pipefail
cd "$(dirname "$0")/.."

points() {
    # The names of `POINTS` in src/mutation.rs: lines `    ("name", "what it breaks"),`.
    sed -n '/^pub const POINTS/,/^];/p' crates/sluice-log/src/mutation.rs |
        sed -n 's/^    ("\([a-z_.]*\)",.*/\1/p'
}

if [ "${1:-}" = "--list" ]; then
    points
    exit 0
fi

selected=("$@")
if [ ${#selected[@]} -eq 0 ]; then
    mapfile -t selected < <(points)
fi
for point in "${selected[@]}"; do
    points | grep -qx "$point" || { echo "mutation-check: unknown point $point" >&2; exit 2; }
done

locked() {
    if [ -n "${MUTATION_LOCK:-}" ]; then flock "$MUTATION_LOCK" "$@"; else "$@"; fi
}

# The test command's profile (scripts/test.sh): assertions and overflow checks on.
exe="$(locked cargo test --profile ci -p sluice-log --features mutation --test log --no-run \
    --message-format=json 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "log":
        print(m["executable"])
')"
[ -n "$exe" ] || { echo "mutation-check: the log test binary did not build" >&2; exit 1; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# The tests that crash or fail the file system, or check what a reopen finds (the damage
# fuzzers and read-path tests damage files by hand, so no sync order can change them).
args=(model:: txn_model:: cleaner:: journal_cleaner:: journal_files:: full_disk:: recovery::
    faults:: transactions:: retention:: idempotence:: round_store::)
[ -n "${MUTATION_TEST_THREADS:-}" ] && args+=(--test-threads "$MUTATION_TEST_THREADS")

# One run of the tests; prints the failed tests, one per line.
run() {
    local out="$work/out" status=0
    (cd crates/sluice-log && locked timeout "${MUTATION_TIMEOUT_S:-600}" "$exe" "${args[@]}") \
        >"$out" 2>&1 || status=$?
    if [ "$status" -eq 124 ]; then
        echo "(timed out)"
    fi
    # libtest lists failures after "failures:" as "    name".
    sed -n '/^failures:$/,/^test result/p' "$out" | sed -n 's/^    \([a-z_0-9]*::[a-z_:0-9]*\)$/\1/p' | sort -u
    if [ "$status" -ne 0 ] && [ "$status" -ne 124 ] && ! grep -q '^failures:$' "$out"; then
        echo "(exit $status: $(tail -1 "$out"))"
    fi
}

echo "mutation-check: baseline (no mutation)" >&2
baseline="$(SLUICE_MUTATE= run)"
if [ -n "$baseline" ]; then
    echo "mutation-check: the tests fail without a mutation: $baseline" >&2
    exit 1
fi

table="target/mutation-check.md"
mkdir -p target
{
    echo "| mutation point | caught by |"
    echo "|---|---|"
} >"$table"
survived=0
for point in "${selected[@]}"; do
    started=$SECONDS
    reached="$work/reached"
    rm -f "$reached"
    failed="$(SLUICE_MUTATE="$point" SLUICE_MUTATE_REACHED="$reached" run)"
    if [ -n "$failed" ]; then
        # The seeded crash models first, then the others; at most four names.
        count=$(echo "$failed" | wc -l)
        result="$( (echo "$failed" | grep -E '^(model|txn_model)::crash_model|^txn_model::' || true;
            echo "$failed" | grep -vE '^(model|txn_model)::crash_model|^txn_model::' || true) |
            head -4 | paste -sd, - | sed 's/,/, /g')"
        [ "$count" -gt 4 ] && result="$result (+$((count - 4)) more)"
    elif [ -e "$reached" ]; then
        result="SURVIVED"
        survived=$((survived + 1))
    else
        result="NOT REACHED"
        survived=$((survived + 1))
    fi
    echo "| \`$point\` | $result |" | tee -a "$table"
    echo "mutation-check: $point done in $((SECONDS - started)) s" >&2
done
echo "mutation-check: ${#selected[@]} points, $survived not caught; table in $table" >&2
[ "$survived" -eq 0 ]
