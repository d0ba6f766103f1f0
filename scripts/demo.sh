#!/usr/bin/env bash
# `make demo`: runs the `smoke` scenario with the fleet launcher — a coordinator, a
# fault proxy and 4 node processes hosting 20 simulated devices for about a minute,
# with a latency toxic, a node killed with SIGKILL, a paused node, a coordinator
# crash and a template edit — then heals, drains, checks and writes the report.
# It prints the seed (with the command that replays it), a progress line, the
# verdict, the scenario's thresholds and where the report is. Exit code: 0 valid and
# every threshold held, 1 invalid, 2 unknown, 3 a threshold failed (docs/fleet.md).
set -euo pipefail
BIN=${1:-.build/debug/signfleet}
SCENARIO=${DEMO_SCENARIO:-scenarios/smoke.yaml}
args=(fleet run "$SCENARIO")
if [ -n "${DEMO_SEED:-}" ]; then args+=(--seed "$DEMO_SEED"); fi
exec "$BIN" "${args[@]}"
