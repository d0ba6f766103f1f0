#!/usr/bin/env bash
# `make demo` (until the fleet launcher and its scenarios land): a coordinator and
# a node of simulated devices over real ZeroMQ sockets and real SQLite files.
# The devices sign envelopes offline and sync them. Midway the coordinator is
# killed with SIGKILL; the devices notice, keep signing offline, and when the
# coordinator restarts on the same store they sync the rest. At the end the
# coordinator's store is checked: every envelope once, in each device's order.
set -euo pipefail
BIN=${1:-.build/debug/signfleet}
DEVICES=${DEMO_DEVICES:-5}
ENVELOPES=${DEMO_ENVELOPES:-8}
SEED=${DEMO_SEED:-$RANDOM}
RUN_DIR="runs/demo-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$RUN_DIR"
ln -sfn "$(basename "$RUN_DIR")" runs/latest

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

# Waits (up to $4 seconds) until file $1 has at least $3 lines matching $2.
wait_for() {
    local deadline=$((SECONDS + $4))
    until [ "$(grep -c -- "$2" "$1" 2>/dev/null || true)" -ge "$3" ]; do
        if [ $SECONDS -ge $deadline ]; then echo "demo: timed out waiting for $3 x '$2' in $1" >&2; exit 1; fi
        sleep 0.1
    done
}
count() { grep -c -- "$2" "$1" 2>/dev/null || true; }

start_coordinator() {
    "$BIN" coordinator --bind "$1" --heartbeat-ms 500 --store "$RUN_DIR/coordinator.sqlite" --seed-demo \
        >>"$RUN_DIR/coordinator.out" 2>>"$RUN_DIR/coordinator.log" &
    coordinator=$!
    pids+=("$coordinator")
}

echo "==> seed $SEED (replay with DEMO_SEED=$SEED make demo)"
echo "==> starting the coordinator"
start_coordinator "tcp://127.0.0.1:*"
wait_for "$RUN_DIR/coordinator.out" "^listening" 1 60
endpoint=$(grep -m1 '^listening' "$RUN_DIR/coordinator.out" | awk '{print $2}')
echo "    listening on $endpoint"

echo "==> starting a node: $DEVICES devices, $ENVELOPES envelopes each"
"$BIN" node --connect "$endpoint" --devices "$DEVICES" --envelopes "$ENVELOPES" --interval-ms 400 \
    --request-timeout-ms 500 --data-dir "$RUN_DIR/devices" --seed "$SEED" \
    >"$RUN_DIR/node.out" 2>"$RUN_DIR/node.log" &
node=$!
pids+=("$node")
wait_for "$RUN_DIR/node.log" "\] synced" "$DEVICES" 60
echo "    signing and syncing: $(count "$RUN_DIR/node.log" "\] signed") signed, $(count "$RUN_DIR/node.log" "\] synced") syncs"

echo "==> killing the coordinator with SIGKILL"
{ kill -9 "$coordinator"; wait "$coordinator"; } 2>/dev/null || true
wait_for "$RUN_DIR/node.log" "sync deferred" 3 60
echo "    devices keep signing offline: $(count "$RUN_DIR/node.log" "sync deferred") syncs deferred"

echo "==> restarting the coordinator on $endpoint with the same store"
: >"$RUN_DIR/coordinator.out"
start_coordinator "$endpoint"
wait_for "$RUN_DIR/coordinator.out" "^listening" 1 60
wait_for "$RUN_DIR/coordinator.out" "^http " 1 60
http=$(grep -m1 '^http ' "$RUN_DIR/coordinator.out" | awk '{print $2}')
echo "    http on $http (GET /health, /metrics, /status)"
wait_for "$RUN_DIR/node.log" "\] drained" "$DEVICES" 120
wait "$node"
echo "    every device synced its outbox and stopped"

echo "==> checking the coordinator's store"
"$BIN" admin envelopes --store "$RUN_DIR/coordinator.sqlite" --expect-per-device "$ENVELOPES" --expect-devices "$DEVICES" \
    | tee "$RUN_DIR/verdict.txt" | sed 's/^/    /'
if command -v curl >/dev/null; then
    echo "==> the coordinator's status: curl http://$http/status"
    curl -fsS "http://$http/status" | tee "$RUN_DIR/status.json" | sed 's/^/    /'
    echo
fi
echo
echo "logs and stores: $RUN_DIR/"
echo "(the fleet launcher with scenarios, fault schedules and an HTML report comes with the fleet issue)"
