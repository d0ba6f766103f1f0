#!/usr/bin/env bash
# Fleet scale (issue #7's benchmark): runs a 2-minute `offline-field-day` at growing
# device counts and reports, for each, the verdict, the sync-ack p50/p99 (from the
# devices' histories, summary.json) and the node processes' peak resident memory per
# device: proportional set size (Pss, shared library pages split among the processes that map
# them) and VmRSS (which counts each shared page in every process) of every node-* process in
# the run's pids file, summed, sampled every 2 s.
# It also reports the node processes' CPU time per device and minute of the run (run and drain), and
# the coordinator's CPU seconds and peak VmRSS. NODE_NICE is `fleet run --node-nice` (default 19).
# The answer is the largest count with a valid verdict and p99 < 1 s.
#
#   loadtests/fleet-scale.sh [COUNTS...]        default: 100 250 500 1000
#   SIGNFLEET_BIN=... SEED=... DURATION=2m NODE_NICE=19 loadtests/fleet-scale.sh 200
#
# The scenario is scenarios/offline-field-day.yaml scaled: 80% rural, 20% depot,
# PER_PROCESS devices per node process (default 250, and 500 from 20,000 devices: each node process
# brings a dozen threads, and at 80 of them the two cores spent 40% of their time in the kernel
# waking them, loadtests/NOTES.md), its faults moved into the 2 minutes (the rural
# outage from 30s to 75s, half the depot offline 40s-60s, a depot node killed at 90s
# for 10s). The devices come back for the drain over `drain_ramp`: DRAIN_RAMP seconds, default one
# second per 200 devices (10 s for 2,000), so that the drain is a fleet returning, not a burst of
# the launcher's making; DRAIN_RAMP=0 brings every device back at once (the burst). Likewise the
# outages' ends: each `offline` fault has `return_ramp` RETURN_RAMP seconds (default 10, whatever
# the count: how long phones take to notice a network that is back does not grow with the fleet);
# RETURN_RAMP=0 brings every device of an outage back in the same instant. The fleet starts over
# `start_ramp`: START_RAMP seconds, default one second per 500 devices (20 s for 10,000), each device
# at its seeded moment; START_RAMP=0 starts each node process's devices within 2 ms apiece.
# Each count runs RUNS times (default 5), run r with seed SEED + r - 1, so a verdict is k of N runs
# and a latency is a spread, not one lucky run: results.tsv has a row per run, spread.tsv one per
# count (valid runs k/N, median and worst p99, worst memory per device), and docs/performance.md
# quotes the worst run.
# Results: loadtests/out/fleet-scale/results.tsv, spread.tsv and each run's directory.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${SIGNFLEET_BIN:-.build/release/signfleet}
[ -x "$BIN" ] || BIN=.build/debug/signfleet
SEED=${SEED:-20261121}
RUNS=${RUNS:-5}
DURATION=${DURATION:-2m}
OUT=${FLEET_OUT:-loadtests/out/fleet-scale}
mkdir -p "$OUT"
COUNTS=("$@")
[ ${#COUNTS[@]} -gt 0 ] || COUNTS=(100 250 500 1000)

drain_ramp() {  # $1 = devices: DRAIN_RAMP, or one second per 200 devices (at least 1)
    if [ -n "${DRAIN_RAMP:-}" ]; then echo "$DRAIN_RAMP"; else echo $(( ($1 + 199) / 200 )); fi
}

return_ramp() { echo "${RETURN_RAMP:-10}"; }

start_ramp() {  # $1 = devices: START_RAMP, or one second per 500 devices (at least 1)
    if [ -n "${START_RAMP:-}" ]; then echo "$START_RAMP"; else echo $(( ($1 + 499) / 500 )); fi
}

per_process() {  # $1 = devices: PER_PROCESS, or 250 (500 from 20,000 devices)
    if [ -n "${PER_PROCESS:-}" ]; then echo "$PER_PROCESS"; elif [ "$1" -ge 20000 ]; then echo 500; else echo 250; fi
}

scenario() {  # $1 = devices
    local total=$1 rural=$(($1 * 4 / 5)) depot=$(($1 - $1 * 4 / 5)) per
    per=$(per_process "$1")
    local rp=$(((rural + per - 1) / per)) dp=$(((depot + per - 1) / per))
    cat <<EOF
name: offline-field-day-$total
duration: $DURATION
drain_timeout: 3m
drain_ramp: $(drain_ramp "$total")s
start_ramp: $(start_ramp "$total")s
proxy: false
coordinator: {heartbeat: 1s, restart_budget: 3}
groups:
  - name: rural
    count: $rural
    processes: $rp
    pens: {applePencil: 2, finger: 1}
    behaviour: {envelopes_per_minute: 1, template_fraction: 0.5, in_person_signers: 1..3, signing_duration: 2s..10s, cancel_rate: 0.05, decline_rate: 0.03, sync: when_online}
    connectivity: {model: gilbert_elliott, online_mean: 30s, offline_mean: 2m, start_offline: 0.8}
  - name: depot
    count: $depot
    processes: $dp
    pens: [signaturePad]
    behaviour: {envelopes_per_minute: 2, in_person_signers: 1, remote_signers: 0..1, embedded_fraction: 1, signing_duration: 1s..4s, sync: {every: 30s}}
    connectivity: {model: gilbert_elliott, online_mean: 5m, offline_mean: 20s}
faults:
  - {at: 30s, for: 45s, offline: {group: rural, return_ramp: $(return_ramp)s}}
  - {at: 40s, for: 20s, offline: {group: depot, fraction: 0.5, return_ramp: $(return_ramp)s}}
  - {at: 90s, for: 10s, kill: node, group: depot, count: 1}
checks: {verdict: valid}
EOF
}

# While $1 (the launcher) lives, samples every 2 s: the summed Pss and Rss (kB) of the run's node
# processes, the coordinator's VmRSS (kB), and the CPU time (clock ticks, utime + stime) each node
# process and the coordinator have used. Prints "PEAK_PSS PEAK_RSS NODE_TICKS COORDINATOR_TICKS
# PEAK_COORDINATOR_RSS": the peaks, and the CPU time summed over each process's last sample (a
# node restarted by a kill fault counts with both of its pids). One python3 process reads /proc:
# the earlier awk and sed per process and sample took 5% of the machine at 10,000 devices.
sample_run() {
    python3 - "$1" "$2" <<'PY'
import os, sys, time
launcher, runs = int(sys.argv[1]), sys.argv[2]
peak = peak_rss = coordinator_rss = 0
ticks = {}

def alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False

def fields(path, *keys):
    """The kB values of `keys` (`Pss:`, ...) in a /proc file; 0 for each when the process is gone."""
    found = dict.fromkeys(keys, 0)
    try:
        with open(path) as f:
            for line in f:
                key = line.split(None, 1)[0] if line.strip() else ""
                if key in found:
                    found[key] = int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return [found[key] for key in keys]

while alive(launcher):
    total = total_rss = 0
    try:
        with open(os.path.join(runs, "latest", "pids")) as f:
            processes = [line.split()[:2] for line in f if len(line.split()) >= 2]
    except OSError:
        processes = []
    for name, pid in processes:
        try:
            with open(f"/proc/{pid}/stat") as f:
                # Fields 14 and 15 of /proc/PID/stat (utime, stime), counted after the command's ")".
                after = f.read().rsplit(")", 1)[1].split()
            ticks[f"{name}/{pid}"] = int(after[11]) + int(after[12])
        except (OSError, ValueError, IndexError):
            continue
        if name.startswith("node-"):
            pss, rss = fields(f"/proc/{pid}/smaps_rollup", "Pss:", "Rss:")
            total, total_rss = total + pss, total_rss + rss
        elif name.startswith("coordinator"):
            coordinator_rss = max(coordinator_rss, *fields(f"/proc/{pid}/status", "VmRSS:"))
    peak, peak_rss = max(peak, total), max(peak_rss, total_rss)
    time.sleep(2)
node_ticks = sum(v for k, v in ticks.items() if k.startswith("node-"))
coordinator_ticks = sum(v for k, v in ticks.items() if k.startswith("coordinator"))
print(peak, peak_rss, node_ticks, coordinator_ticks, coordinator_rss)
PY
}

printf 'devices\tverdict\tp50_ms\tp99_ms\tsyncs\trun_p50_ms\trun_p99_ms\tdrain_p99_ms\tpeak_node_pss_mb\tpss_kb_per_device\tpeak_node_rss_mb\trss_kb_per_device\tdevices_per_process\tnode_cpu_ms_per_device_minute\tcoordinator_cpu_s\tpeak_coordinator_rss_mb\tdrain_ramp_s\treturn_ramp_s\tseed\trun\n' >"$OUT/results.tsv"
for n in "${COUNTS[@]}"; do
    file="$OUT/offline-field-day-$n.yaml"
    scenario "$n" >"$file"
    runs="$OUT/runs-$n"
    for r in $(seq 1 "$RUNS"); do
    seed=$((SEED + r - 1))
    echo "==> $n devices, run $r of $RUNS, seed $seed ($file)"
    before=$(readlink -f "$runs/latest" 2>/dev/null || true)
    set +e
    "$BIN" fleet run "$file" --seed "$seed" --runs "$runs" --node-nice "${NODE_NICE:-19}" >"$OUT/fleet-$n-$r.out" 2>"$OUT/fleet-$n-$r.err" &
    launcher=$!
    read -r peak peak_rss node_ticks coordinator_ticks coordinator_rss < <(sample_run "$launcher" "$runs")
    wait "$launcher"
    code=$?
    set -e
    summary="$runs/latest/summary.json"
    if [ ! -f "$summary" ] || [ "$(readlink -f "$runs/latest" 2>/dev/null || true)" = "$before" ]; then
        # The launcher failed before writing this run's summary: say so, go on.
        printf '%s\tno-summary\t-\t-\t0\t-\t-\t-\t%.1f\t%s\t%.1f\t%s\t%s\t-\t-\t-\t%s\t%s\t%s\t%s\n' "$n" "$(echo "$peak / 1024" | bc -l)" "$((peak / n))" \
            "$(echo "$peak_rss / 1024" | bc -l)" "$((peak_rss / n))" "$(per_process "$n")" "$(drain_ramp "$n")" "$(return_ramp)" "$seed" "$runs" | tee -a "$OUT/results.tsv"
        echo "    exit $code (see $OUT/fleet-$n-$r.err)"
        continue
    fi
    row=$(python3 - "$summary" "$n" "$peak" "$peak_rss" "$(per_process "$n")" "$node_ticks" "$coordinator_ticks" "$coordinator_rss" "$(getconf CLK_TCK)" "$(drain_ramp "$n")" "$(return_ramp)" "$seed" <<'PY'
import json, sys
s = json.load(open(sys.argv[1])); n = int(sys.argv[2]); peak = int(sys.argv[3]); peak_rss = int(sys.argv[4])
node_ticks, coordinator_ticks, coordinator_rss, hz = (int(v) for v in sys.argv[6:10])
ramp, return_ramp, seed = sys.argv[10], sys.argv[11], sys.argv[12]
ms = lambda v: "-" if v is None else "%.1f" % (v * 1000)
# Node CPU per device and minute of the whole run (run and drain: what a device costs while it exists).
minutes = max(s["durations"]["total"], 1) / 60
run, drain = s.get("syncAckRun") or {}, s.get("syncAckDrain") or {}
print("\t".join([str(n), s["verdict"], ms(s["syncAck"].get("p50")), ms(s["syncAck"].get("p99")), str(s["syncAck"]["samples"]),
                 ms(run.get("p50")), ms(run.get("p99")), ms(drain.get("p99")),
                 "%.1f" % (peak / 1024), "%.0f" % (peak / max(n, 1)), "%.1f" % (peak_rss / 1024), "%.0f" % (peak_rss / max(n, 1)),
                 sys.argv[5], "%.1f" % (node_ticks / hz * 1000 / max(n, 1) / minutes), "%.1f" % (coordinator_ticks / hz),
                 "%.1f" % (coordinator_rss / 1024), ramp, return_ramp, seed, s["runDirectory"]]))
PY
)
    echo "$row" | tee -a "$OUT/results.tsv"
    echo "    exit $code"
    done
done
echo
column -t -s $'\t' "$OUT/results.tsv"
# One row per count: how many runs were valid, and the spread of their p99 (median and worst).
python3 - "$OUT/results.tsv" >"$OUT/spread.tsv" <<'PY'
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
header, rows = rows[0], [dict(zip(rows[0], r)) for r in rows[1:]]
def num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None
print("\t".join(["devices", "runs", "valid", "median_p99_ms", "worst_p99_ms", "worst_run_p99_ms", "worst_pss_kb_per_device"]))
for devices in sorted({int(r["devices"]) for r in rows}):
    mine = [r for r in rows if int(r["devices"]) == devices]
    p99s = [num(r["p99_ms"]) for r in mine]
    known = [p for p in p99s if p is not None]
    # A run without a p99 (no summary, no syncs) is the worst there is.
    worst = "-" if len(known) < len(p99s) or not known else "%.1f" % max(known)
    run_p99s = [num(r["run_p99_ms"]) for r in mine]
    worst_run = "-" if None in run_p99s or not run_p99s else "%.1f" % max(run_p99s)
    pss = [num(r["pss_kb_per_device"]) for r in mine if num(r["pss_kb_per_device"]) is not None]
    print("\t".join([str(devices), str(len(mine)), "%d/%d" % (sum(r["verdict"] == "valid" for r in mine), len(mine)),
                     "%.1f" % statistics.median(known) if known else "-", worst, worst_run, "%.0f" % max(pss) if pss else "-"]))
PY
echo
column -t -s $'\t' "$OUT/spread.tsv"
# The default output feeds docs/performance.md (loadtests/report.py); keep it in git.
if [ "$OUT" = loadtests/out/fleet-scale ]; then
    cp "$OUT/results.tsv" loadtests/results/fleet-scale.tsv
    cp "$OUT/spread.tsv" loadtests/results/fleet-scale-spread.tsv
    date -u '+%Y-%m-%d %H:%M UTC' >loadtests/results/fleet-scale.at
fi
