#!/usr/bin/env bash
# The test suite on an oversubscribed machine: `stress-ng --cpu 4` (four busy workers on this
# project's 2-core machines) runs beside it for the whole run. The suite must pass here too: its
# tests wait on events and on clocks they move themselves, never on the machine's speed
# (docs/testing.md). A check to run by hand (`make test-loaded`), not part of CI.
set -uo pipefail
cd "$(dirname "$0")/.."

WORKERS=${STRESS_WORKERS:-4}
if ! command -v stress-ng >/dev/null 2>&1; then
    echo "==> installing stress-ng"
    if [ "$(id -u)" -eq 0 ]; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq stress-ng
    else
        sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq stress-ng
    fi
fi

stress-ng --cpu "$WORKERS" --timeout 3h --quiet &
STRESS=$!
trap 'kill "$STRESS" 2>/dev/null; wait "$STRESS" 2>/dev/null' EXIT
echo "==> stress-ng --cpu $WORKERS beside the suite (pid $STRESS); load average: $(cut -d' ' -f1-3 /proc/loadavg)"
scripts/test.sh "$@"
status=$?
echo "==> suite under load exited $status; load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
exit "$status"
