#!/usr/bin/env bash
# Runs the Swift Testing suite (after `swift build --build-tests`; the fuzz suites in a second
# phase of their own, arguments run one `swift test` with them) and, when it
# fails, repeats every failed test's issue lines at the very end: a CI log is
# often read from its tail, and with 100 suites running in parallel the line
# that says *why* a test failed can be far above the final summary.
# The whole output is kept in .build/test-output.log.
set -uo pipefail
cd "$(dirname "$0")/.."

SWIFT=${SWIFT:-swift}
LOG=.build/test-output.log
mkdir -p .build

export SIGNFLEET_BIN=${SIGNFLEET_BIN:-$PWD/.build/debug/signfleet}
# A crash prints the crashed thread's backtrace only: with every thread (the default) the backtracer
# was seen to hang for 20 minutes over a test process with hundreds of threads, holding the run.
export SWIFT_BACKTRACE=${SWIFT_BACKTRACE:-enable=yes,threads=crashed,timeout=30s}

# One throwaway PostgreSQL for the run (the PostgreSQL store's tests; docs/storage.md), stopped
# on exit. Tests started by hand without it start their own.
if [ -z "${SIGNFLEET_POSTGRES_URL:-}" ]; then
    PG_DIR=$(mktemp -d /tmp/signfleet-pg-run.XXXXXX)
    trap 'scripts/postgres-cluster.sh stop "$PG_DIR"' EXIT
    if SIGNFLEET_POSTGRES_URL=$(scripts/postgres-cluster.sh start "$PG_DIR"); then
        export SIGNFLEET_POSTGRES_URL
        echo "test PostgreSQL: $SIGNFLEET_POSTGRES_URL"
    else
        echo "warning: no test PostgreSQL could be started; the PostgreSQL store's tests will fail (scripts/install-deps.sh installs it)" >&2
        unset SIGNFLEET_POSTGRES_URL
    fi
fi
if [ "$#" -gt 0 ]; then
    "$SWIFT" test --skip-build --disable-xctest "$@" 2>&1 | tee "$LOG"
    status=${PIPESTATUS[0]}
else
    # Two phases: the fuzz suites (docs/fuzzing.md) keep both cores busy for a few seconds, and
    # beside them tests with short timeouts and reused ports (fault proxy, wire) starved or collided.
    "$SWIFT" test --skip-build --disable-xctest --skip 'FuzzTests' 2>&1 | tee "$LOG"
    status=${PIPESTATUS[0]}
    echo "==== fuzz suites ====" | tee -a "$LOG"
    "$SWIFT" test --skip-build --disable-xctest --filter 'FuzzTests' 2>&1 | tee -a "$LOG"
    fuzz=${PIPESTATUS[0]}
    [ "$status" -eq 0 ] && status=$fuzz
fi

if [ "$status" -ne 0 ]; then
    echo
    echo "==== swift test exited $status; what failed (whole output: $LOG) ===="
    # Issue lines name the file:line and the reason; the ✘ lines name the test.
    grep -E "✘|recorded an issue|^error:|Fatal error|unexpected signal" "$LOG" | grep -v "^✘ Test run with" | head -60
    grep -E "^✘ Test run with" "$LOG" | tail -1
fi
exit "$status"
