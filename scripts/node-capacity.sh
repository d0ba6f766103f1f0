#!/usr/bin/env bash
# Measures how many simulated devices one `signfleet node --plan` process hosts:
# starts a coordinator, runs one node with N devices (idle: no envelopes; active: the
# given rate), waits until every device is online and logged in, then samples the
# node's resident memory, open files, threads and CPU over a window, and drains it.
#
#   scripts/node-capacity.sh [devices] [envelopes-per-minute] [window-seconds] [binary]
#   scripts/node-capacity.sh 1000 0        # idle
#   scripts/node-capacity.sh 1000 2 20     # active: 2 envelopes per device per minute
#   REQUEST_TIMEOUT=5 KEEP=1 scripts/...   # the plan's requestTimeout; keep the work directory
set -euo pipefail
devices=${1:-1000}
rate=${2:-0}
window=${3:-20}
bin=${4:-.build/debug/signfleet}
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; [ -n "${KEEP:-}" ] && echo "kept $work" || rm -rf "$work"' EXIT
trap 'exit 1' TERM INT

"$bin" coordinator --bind 'tcp://127.0.0.1:*' --store "$work/coordinator.sqlite" --seed-demo --log-level warning \
    >"$work/coordinator.out" 2>"$work/coordinator.err" &
coordinator=$!
for _ in $(seq 300); do grep -q '^listening ' "$work/coordinator.out" && break; sleep 0.1; done
endpoint=$(sed -n 's/^listening //p' "$work/coordinator.out" | head -1)
[ -n "$endpoint" ] || { echo "coordinator did not start"; cat "$work/coordinator.err"; exit 1; }

{
    printf '{"process":"node-cap-1","group":"cap","endpoint":"%s","dataDirectory":"%s/devices",' "$endpoint" "$work"
    printf '"historyFile":"%s/history/node-cap-1.jsonl","runStart":%s,"duration":3600,' "$work" "$(date +%s)"
    printf '"email":"user1@demo.example","secret":"demo-secret","devices":['
    for i in $(seq 1 "$devices"); do
        [ "$i" -gt 1 ] && printf ','
        printf '{"id":"cap-%d","seed":%d}' "$i" "$i"
    done
    printf '],"behaviour":{"envelopesPerMinute":%s,"templateFraction":0,"inPersonSigners":{"lower":1,"upper":1},' "$rate"
    printf '"remoteSigners":{"lower":0,"upper":0},"embeddedFraction":0,"signingDuration":{"lower":1,"upper":3},'
    printf '"cancelRate":0,"declineRate":0,"sync":{"whenOnline":{}}},'
    printf '"connectivity":{"model":{"alwaysOnline":{}},"startOffline":0},"pens":{"applePencil":1},"outages":[],'
    printf '"statsInterval":1,"requestTimeout":%s}\n' "${REQUEST_TIMEOUT:-2}"
} >"$work/plan.json"

start=$(date +%s.%N)
"$bin" node --plan "$work/plan.json" --log-level warning >"$work/node.out" 2>"$work/node.err" &
node=$!
# Ready: every device online (its link open) and the first envelope counted when active.
for _ in $(seq 1200); do
    last=$(grep '^stats ' "$work/node.out" | tail -1 || true)
    if echo "$last" | grep -q "\"online\":$devices[,}]"; then break; fi
    kill -0 $node 2>/dev/null || { echo "node exited"; tail -20 "$work/node.err"; exit 1; }
    sleep 0.5
done
ready=$(date +%s.%N)
ticks=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' /proc/$1/stat; }
c0=$(cpu $node); k0=$(cpu $coordinator)
sleep "$window"
c1=$(cpu $node); k1=$(cpu $coordinator)
rss=$(awk '/VmRSS/ {print $2}' /proc/$node/status)
hwm=$(awk '/VmHWM/ {print $2}' /proc/$node/status)
threads=$(awk '/Threads/ {print $2}' /proc/$node/status)
fds=$(ls /proc/$node/fd | wc -l)
stats=$(grep '^stats ' "$work/node.out" | tail -1)
echo "devices=$devices rate=$rate/min window=${window}s startup=$(echo "$ready - $start" | bc)s"
echo "node: rss=${rss}kB peak=${hwm}kB per-device=$((rss / devices))kB threads=$threads fds=$fds cpu=$(echo "scale=1; 100 * ($c1 - $c0) / $ticks / $window" | bc)%"
echo "coordinator: cpu=$(echo "scale=1; 100 * ($k1 - $k0) / $ticks / $window" | bc)%"
echo "last $stats"
d0=$(date +%s.%N)
kill -USR1 $node
for _ in $(seq 1200); do grep -q '^drained$' "$work/node.out" && break; sleep 0.25; done
if grep -q '^drained$' "$work/node.out"; then
    wait $node && echo "drained in $(echo "$(date +%s.%N) - $d0" | bc)s, exit 0" || echo "node exited $?"
else
    echo "not drained after 300 s"
    kill $node
fi
grep '^stats ' "$work/node.out" | tail -1
