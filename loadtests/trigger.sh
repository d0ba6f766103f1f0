#!/usr/bin/env bash
# The trigger test (issue #30; Bronson et al., "Metastable Failures in Distributed Systems"): a
# fleet at steady load, always online, whose coordinator is stopped (SIGSTOP) for TRIGGER seconds
# at 60 s and then continued. A system that is only overloaded recovers once the trigger ends; a
# metastable one stays down, held there by its own clients' retries. For each device count it
# reports the goodput before the trigger (envelopes synced per second, 20 s to 60 s), how long after
# the trigger's end a 5-second window first syncs at least 90% of that again, the verdict, the worst
# sync-ack p99 the nodes reported in the 30 s after the trigger, and what the coordinator's log
# says: devices declared lost, and requests answered `busy` (shed; a lower bound: the coordinator's
# rate-limited log leaves out the last summary period). The fleet starts over one second
# per 500 devices (`start_ramp`), done before the 20 s at which goodput is first measured up to 10,000. It passes when the recovery
# takes at most 2 x TRIGGER and the run ends valid.
#
#   loadtests/trigger.sh [COUNTS...]        default: 5000 10000
#   SIGNFLEET_BIN=... SEED=... TRIGGER=10 RUNS=1 PER_PROCESS=250 loadtests/trigger.sh 2000
#
# Results: loadtests/out/trigger/results.tsv (and loadtests/results/trigger.tsv for the default
# output, which docs/performance.md quotes).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${SIGNFLEET_BIN:-.build/release/signfleet}
[ -x "$BIN" ] || BIN=.build/debug/signfleet
SEED=${SEED:-20261128}
TRIGGER=${TRIGGER:-10}
RUNS=${RUNS:-1}
OUT=${TRIGGER_OUT:-loadtests/out/trigger}
mkdir -p "$OUT"
COUNTS=("$@")
[ ${#COUNTS[@]} -gt 0 ] || COUNTS=(5000 10000)

scenario() {  # $1 = devices
    local per=${PER_PROCESS:-250}
    cat <<EOF
name: trigger-$1
duration: 150s
drain_timeout: 3m
drain_ramp: $(( ($1 + 199) / 200 ))s
start_ramp: $(( ($1 + 499) / 500 ))s
proxy: false
coordinator: {heartbeat: 1s, restart_budget: 3}
groups:
  - name: steady
    count: $1
    processes: $(( ($1 + per - 1) / per ))
    pens: {applePencil: 2, finger: 1}
    behaviour: {envelopes_per_minute: 1, in_person_signers: 1, signing_duration: 1s..4s, sync: when_online}
    connectivity: always_online
faults:
  - {at: 60s, for: ${TRIGGER}s, pause: coordinator}
checks: {verdict: valid}
EOF
}

printf 'devices\tverdict\tgoodput_before_per_s\trecovery_s\trecovered\tworst_p99_after_ms\tdevices_lost\trequests_shed\tseed\trun\n' >"$OUT/results.tsv"
for n in "${COUNTS[@]}"; do
    file="$OUT/trigger-$n.yaml"
    scenario "$n" >"$file"
    for r in $(seq 1 "$RUNS"); do
        seed=$((SEED + r - 1))
        runs="$OUT/runs-$n"
        echo "==> $n devices, run $r of $RUNS, seed $seed, coordinator stopped for ${TRIGGER}s at 60s"
        before=$(readlink -f "$runs/latest" 2>/dev/null || true)
        set +e
        "$BIN" fleet run "$file" --seed "$seed" --runs "$runs" >"$OUT/fleet-$n-$r.out" 2>"$OUT/fleet-$n-$r.err"
        code=$?
        set -e
        run=$(readlink -f "$runs/latest" 2>/dev/null || true)
        # No new run directory (the launcher failed before making one): report nothing as this run.
        [ "$run" != "$before" ] || run="$OUT/no-run-$n-$r"
        python3 - "$run" "$n" "$TRIGGER" "$seed" <<'PY' | tee -a "$OUT/results.tsv"
import glob, json, os, sys
run, n, trigger, seed = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
samples = []
try:
    with open(os.path.join(run, "timeline.jsonl")) as f:
        for line in f:
            try:
                samples.append(json.loads(line))
            except ValueError:
                pass
except OSError:
    pass
def synced_at(t):
    """Envelopes synced by time t (the last sample at or before it)."""
    before = [s["synced"] for s in samples if s["time"] <= t]
    return before[-1] if before else 0
start, end = 60.0, 60.0 + trigger
before = (synced_at(start) - synced_at(20.0)) / 40.0
recovery = None
t = end
while t + 5 <= max((s["time"] for s in samples), default=0):
    if (synced_at(t + 5) - synced_at(t)) / 5.0 >= 0.9 * before:
        recovery = t + 5 - end
        break
    t += 1
after = [s.get("syncAckP99") for s in samples if end <= s["time"] <= end + 30 and s.get("syncAckP99") is not None]
try:
    verdict = json.load(open(os.path.join(run, "summary.json")))["verdict"]
except (OSError, ValueError, KeyError):
    verdict = "no-summary"
lost = shed = 0
for log in glob.glob(os.path.join(run, "logs", "coordinator*.log")):
    with open(log, errors="replace") as f:
        for line in f:
            if "device lost" in line:
                lost += 1
            # FleetServer's RefusalLog: the first of a kind, then "N more since the last summary".
            if "request shed (busy)" in line:
                more = line.split("more since the last summary")[0].rsplit(":", 1)[-1].strip()
                shed += int(more) if more.isdigit() else 1
passed = verdict == "valid" and before > 0 and recovery is not None and recovery <= 2 * trigger
print("\t".join([n, verdict, "%.1f" % before, "-" if recovery is None else "%.0f" % recovery, "yes" if passed else "no",
                 "-" if not after else "%.0f" % (max(after) * 1000), str(lost), str(shed), seed, run]))
PY
        echo "    exit $code"
    done
done
echo
column -t -s $'\t' "$OUT/results.tsv"
if [ "$OUT" = loadtests/out/trigger ]; then
    cp "$OUT/results.tsv" loadtests/results/trigger.tsv
    date -u '+%Y-%m-%d %H:%M UTC' >loadtests/results/trigger.at
fi
