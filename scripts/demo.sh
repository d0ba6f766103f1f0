#!/usr/bin/env bash
# `make demo` (interim, until the fleet launcher lands): a coordinator and a
# node hosting 5 devices over real ZeroMQ sockets. Midway the coordinator is
# killed with SIGKILL and restarted on the same port; the devices notice the
# silence (heartbeats), reconnect with back-off, and say hello again.
set -euo pipefail
BIN=${1:-.build/debug/signfleet}
DEVICES=${DEMO_DEVICES:-5}
RUN_DIR="runs/demo-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$RUN_DIR"
ln -sfn "$(basename "$RUN_DIR")" runs/latest

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

# Waits (up to $3 seconds) until file $1 contains a line matching $2.
wait_for() {
    local deadline=$((SECONDS + $3))
    until grep -q -- "$2" "$1" 2>/dev/null; do
        if [ $SECONDS -ge $deadline ]; then echo "demo: timed out waiting for '$2' in $1" >&2; exit 1; fi
        sleep 0.1
    done
}
count() { grep -c -- "$2" "$1" 2>/dev/null || true; }

start_coordinator() {
    "$BIN" coordinator --bind "$1" --heartbeat-ms 500 --store "$RUN_DIR/coordinator.sqlite" --seed-demo >>"$RUN_DIR/coordinator.out" 2>>"$RUN_DIR/coordinator.log" &
    coordinator=$!
    pids+=("$coordinator")
}

echo "==> starting the coordinator"
start_coordinator "tcp://127.0.0.1:*"
wait_for "$RUN_DIR/coordinator.out" "^listening" 30
endpoint=$(grep -m1 '^listening' "$RUN_DIR/coordinator.out" | awk '{print $2}')
echo "    listening on $endpoint"

echo "==> starting a node with $DEVICES devices"
"$BIN" node --connect "$endpoint" --devices "$DEVICES" --request-timeout-ms 500 \
    >"$RUN_DIR/node.out" 2>"$RUN_DIR/node.log" &
pids+=("$!")
wait_for "$RUN_DIR/node.out" "node started" 30
deadline=$((SECONDS + 30))
until [ "$(count "$RUN_DIR/coordinator.log" "device alive")" -ge "$DEVICES" ]; do
    [ $SECONDS -lt $deadline ] || { echo "demo: devices did not all connect" >&2; exit 1; }
    sleep 0.1
done
echo "    coordinator sees $(count "$RUN_DIR/coordinator.log" "device alive") devices alive"

echo "==> killing the coordinator with SIGKILL"
kill -9 "$coordinator"
wait "$coordinator" 2>/dev/null || true
deadline=$((SECONDS + 30))
until [ "$(count "$RUN_DIR/node.log" "server lost")" -ge "$DEVICES" ]; do
    [ $SECONDS -lt $deadline ] || { echo "demo: devices did not notice the coordinator was gone" >&2; exit 1; }
    sleep 0.1
done
echo "    all $DEVICES devices report: server lost (no heartbeat replies)"

echo "==> restarting the coordinator on $endpoint"
: >"$RUN_DIR/coordinator.out"
start_coordinator "$endpoint"
wait_for "$RUN_DIR/coordinator.out" "^listening" 30
deadline=$((SECONDS + 60))
until [ "$(count "$RUN_DIR/node.log" "connected")" -ge $((DEVICES * 2)) ]; do
    [ $SECONDS -lt $deadline ] || { echo "demo: devices did not reconnect" >&2; exit 1; }
    sleep 0.1
done
echo "    all $DEVICES devices reconnected and said hello to the new coordinator instance"

echo
echo "demo finished: $DEVICES devices survived a coordinator crash."
echo "logs: $RUN_DIR/ (coordinator.log, node.log)"
echo "(the full fleet run with signing, sync, faults and a verdict comes with the fleet issue)"
