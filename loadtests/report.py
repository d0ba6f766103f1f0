#!/usr/bin/env python3
"""Writes docs/performance.md from the JSON lines a loadtests/run produced.

Usage: report.py FIGURES.jsonl OUTPUT.md "COMMAND"
The figures of this run replace those of the same groups kept in
loadtests/results/ (one file per group, kept in git, with the command and time that
measured it), so `loadtests/run captive` after `loadtests/run` updates the
captive rows and keeps the others; each group says when and how it was
measured. A figure and its reference always come from the same group, so from
the same run. A comparison whose reference is missing is shown as
"not measured", never filled in. Fleet scale comes from
loadtests/results/fleet-scale.tsv (`loadtests/run fleet`) when present.
"""
import json
import os
import platform
import statistics
import subprocess
import sys
from datetime import datetime, timezone

# (bench, what, ours, reference, higher_is_better, target)
COMPARISONS = [
    ("codec", "encode sync push (10 envelopes, 6 KB blobs)", "swift.encode.push.msg_per_s", "python.encode.push.msg_per_s", True, ">= 1x, aim 2x"),
    ("codec", "decode sync push", "swift.decode.push.msg_per_s", "python.decode.push.msg_per_s", True, ">= 1x, aim 2x"),
    ("codec", "encode heartbeat", "swift.encode.heartbeat.msg_per_s", "python.encode.heartbeat.msg_per_s", True, ">= 1x, aim 2x"),
    ("codec", "decode heartbeat", "swift.decode.heartbeat.msg_per_s", "python.decode.heartbeat.msg_per_s", True, ">= 1x, aim 2x"),
    ("codec", "encode ack (10 results)", "swift.encode.ack.msg_per_s", "python.encode.ack.msg_per_s", True, ">= 1x, aim 2x"),
    ("codec", "decode ack (10 results)", "swift.decode.ack.msg_per_s", "python.decode.ack.msg_per_s", True, ">= 1x, aim 2x"),
    ("transport", "request/reply round trip, 64 B", "swift.rtt.64B.per_s", "c.rtt.64B.per_s", True, "within 1.3x (ratio >= 0.77)"),
    ("transport", "request/reply round trip, 6 KB", "swift.rtt.6KB.per_s", "c.rtt.6KB.per_s", True, "within 1.3x (ratio >= 0.77)"),
    ("transport", "round trip 64 B, client task on the I/O thread", "swift.loop-executor.rtt.64B.per_s", "c.rtt.64B.per_s", True, "within 1.3x (ratio >= 0.77)"),
    ("transport", "round trip 6 KB, client task on the I/O thread", "swift.loop-executor.rtt.6KB.per_s", "c.rtt.6KB.per_s", True, "within 1.3x (ratio >= 0.77)"),
    ("transport", "round trip 64 B with 500 idle monitored sockets on the same I/O loop vs without them, same run", "swift.idle500.rtt.64B.per_s", "swift.rtt.64B.per_s", True, "idle sockets cost nothing (ratio >= 0.9)"),
    ("transport", "round trip 6 KB with 500 idle monitored sockets on the same I/O loop vs without them", "swift.idle500.rtt.6KB.per_s", "swift.rtt.6KB.per_s", True, "idle sockets cost nothing (ratio >= 0.9)"),
    ("ingest", "sync ingest (verify + commit), 1 device vs raw SQLite inserts of the same rows", "ingest.devices1.envelopes_per_s", "ref.sqlite_inserts_per_s", True, "(reference: the store's ceiling)"),
    ("ingest", "sync ingest, 10 devices vs raw SQLite inserts", "ingest.devices10.envelopes_per_s", "ref.sqlite_inserts_per_s", True, "(reference: the store's ceiling)"),
    ("ingest", "sync ingest, 100 devices vs raw SQLite inserts", "ingest.devices100.envelopes_per_s", "ref.sqlite_inserts_per_s", True, "(reference: the store's ceiling)"),
    ("ingest", "sync ingest, 100 devices vs raw Ed25519 verification (one core)", "ingest.devices100.envelopes_per_s", "ref.ed25519_verify_per_s", True, "(reference: one verification per core)"),
    ("ingest", "over ZeroMQ with CURVE (encrypted, ZAP-authenticated, keys bound at enrollment) vs plain TCP, 100 devices, closed loop, the coordinator alone on one core and its clients in a process of their own on the other", "ingest.zmq.split_curve.devices100.envelopes_per_s", "ingest.zmq.split.devices100.envelopes_per_s", True, "CURVE costs at most 15% (ratio >= 0.85)"),
    ("ingest", "the same with the clients in the coordinator's process, on the same 2 cores (both sides' encryption charged)", "ingest.zmq_curve.devices100.envelopes_per_s", "ingest.zmq.devices100.envelopes_per_s", True, "(informational)"),
    ("ingest", "sync-ack p99 at 3,000/s offered, 100 devices, with one peer (its own process) sending 1,000,000 heartbeats from 1 s in and never reading vs the same open loop without it, just before in the same process", "ingest.zmq.slow_reader.p99_ms_at3000", "ingest.zmq.slow_reader_reference.p99_ms_at3000", False, "within 2x (ratio >= 0.5)"),
    ("ingest", "achieved at 3,000/s offered with that peer vs without it", "ingest.zmq.slow_reader.achieved_envelopes_per_s_at3000", "ingest.zmq.slow_reader_reference.achieved_envelopes_per_s_at3000", True, "(1: the others keep up)"),
    ("ingest", "the same at 5,000/s offered (near saturation on this machine: the reference's own p99 climbs through the run)", "ingest.zmq.slow_reader.p99_ms_at5000", "ingest.zmq.slow_reader_reference.p99_ms_at5000", False, "(informational)"),
    ("ingest", "sync-ack p99 at 1,000/s offered, 20 devices over CURVE, server with 2 I/O threads (the coordinator's default), while 2,000 new keys (a process of its own) connect from 1 s in, each saying hello and trying auth.token, hold 2 s and leave, vs the same open loop without them", "ingest.zmq_curve.crowd2000.p99_ms_at1000", "ingest.zmq_curve.crowd_reference.p99_ms_at1000", False, "(informational: the handshakes' cost)"),
    ("ingest", "resident memory of the server's process 10 s after the 2,000 left vs before they came (the server returns freed memory)", "ingest.zmq_curve.crowd2000.rss_mb_after", "ingest.zmq_curve.crowd2000.rss_mb_before", False, "~1 (returned)"),
    ("ingest", "the same with the server's memory return off (--keep-memory)", "ingest.zmq_curve.crowd2000.keep_memory.rss_mb_after", "ingest.zmq_curve.crowd2000.keep_memory.rss_mb_before", False, "(informational: what stays without it)"),
    ("ingest", "CURVE vs plain TCP: achieved at 5,000 envelopes/s offered", "ingest.zmq_curve.achieved_envelopes_per_s_at5000", "ingest.zmq.achieved_envelopes_per_s_at5000", True, "(ratio >= 0.85)"),
    ("proxy", "ZeroMQ round trip 64 B through the fault proxy (no toxics) vs direct", "via_proxy.rtt.64B.per_s", "direct.rtt.64B.per_s", True, "(cost of the extra hop)"),
    ("proxy", "ZeroMQ round trip 6 KB through the fault proxy (no toxics) vs direct", "via_proxy.rtt.6KB.per_s", "direct.rtt.6KB.per_s", True, "(cost of the extra hop)"),
    ("store", "verified ingest into the PostgreSQL store vs the SQLite store, 100 devices, in process, one coordinator", "store.postgres.envelopes_per_s", "store.sqlite.envelopes_per_s", True, "(informational: PostgreSQL shares this machine's 2 cores)"),
    ("store", "two coordinators on one PostgreSQL schema vs one (same 2 cores: not a scale-out measure)", "store.postgres.coordinators2.envelopes_per_s", "store.postgres.envelopes_per_s", True, "(informational)"),
    ("captive", "captive ceremonies (issue URL, open page, finish, redirect), 8 concurrent signers vs GET /health, same server, client and concurrency", "ceremonies.k8.per_s", "health.k8.per_s", True, "(cost of the signing flow over the bare server)"),
    ("captive", "HTTP requests of those ceremonies (3 each) vs GET /health", "ceremonies.k8.requests_per_s", "health.k8.per_s", True, "(cost per request)"),
    ("captive", "ceremonies that also fetch their 2 page images, each drawn by pdftoppm on this first view, vs ceremonies without page images", "ceremonies.k8.render_first.per_s", "ceremonies.k8.per_s", True, "(cost of drawing pages)"),
    ("captive", "ceremonies that fetch their 2 page images from the cache (the signer came back) vs without page images", "ceremonies.k8.render_cached.per_s", "ceremonies.k8.per_s", True, "(cost of cached pages)"),
    ("rest", "full REST ceremonies (create envelope, recipient view, open page, sign, combined PDF with the certificate), 8 concurrent backends vs the captive-only ceremony (issue URL, open, finish), same server and run", "rest.ceremonies.k8.per_s", "rest.captive.k8.per_s", True, "(cost of REST create + drawing the completed PDF)"),
    ("rest", "full REST ceremonies vs GET /health, same server, clients and concurrency", "rest.ceremonies.k8.per_s", "rest.health.k8.per_s", True, "(cost over the bare server)"),
    ("connect", "ingest ack p99 at 1,000 envelopes/s with Connect delivering every event vs the same ingest without a configuration", "connect.ingest_p99_ms", "ref.ingest_p99_ms", False, "(cost of the outbox on ingest)"),
    ("connect", "Connect events delivered per second vs bare POSTs of a message-sized body to the same listener, same transport and concurrency (16), nothing else running", "connect.events_delivered_per_s", "ref.bare_posts_per_s", True, "(the publisher's own cost: claims, reads, message, outcome writes)"),
]

# Figures with an absolute target: (bench, what, metric, target text, passes(value)).
TARGETS = [
    ("capture", "full capture of a 3 s signature at 240 Hz, per core (CPU time)", "full_capture_rate_per_core_cpu", ">= 5,000 captures/s", lambda v: v >= 5000),
    ("device", "compose + sign + outbox commit, one device, fsync per commit (powerLoss)", "one_device_powerLoss_envelopes_per_second", "(no target yet)", None),
    ("device", "compose + sign + outbox commit, 100 devices in one process", "100_devices_envelopes_per_second", "(no target yet)", None),
    ("ingest", "sustained ingest, signed envelopes verified + committed, 1 device", "ingest.devices1.envelopes_per_s", ">= 10,000 envelopes/s", lambda v: v >= 10000),
    ("ingest", "sustained ingest, 10 devices", "ingest.devices10.envelopes_per_s", ">= 10,000 envelopes/s", lambda v: v >= 10000),
    ("ingest", "sustained ingest, 100 devices", "ingest.devices100.envelopes_per_s", ">= 10,000 envelopes/s", lambda v: v >= 10000),
    ("ingest", "sustained ingest, 100 devices, payload signature only", "ingest.payload_verify.devices100.envelopes_per_s", ">= 10,000 envelopes/s", lambda v: v >= 10000),
    ("ingest", "ack latency p99 at 5,000 envelopes/s offered, in process", "ingest.p99_ms_at5000", "<= 50 ms", lambda v: v <= 50),
    ("ingest", "over ZeroMQ: 100 DEALERs to the coordinator's ROUTER (clients in the same process), verified + committed", "ingest.zmq.devices100.envelopes_per_s", ">= 10,000 envelopes/s", lambda v: v >= 10000),
    ("ingest", "over ZeroMQ: pushes sharing one commit", "ingest.zmq.devices100.pushes_per_commit", "(> 1: concurrent pushes share commits)", None),
    ("ingest", "over ZeroMQ: achieved at 5,000 envelopes/s offered", "ingest.zmq.achieved_envelopes_per_s_at5000", "(5,000 when keeping up)", None),
    ("ingest", "over ZeroMQ: ack latency p99 at 5,000 envelopes/s offered", "ingest.zmq.p99_ms_at5000", "<= 50 ms", lambda v: v <= 50),
    ("ingest", "over ZeroMQ, payload signature only", "ingest.zmq.payload_verify.devices100.envelopes_per_s", ">= 10,000 envelopes/s", lambda v: v >= 10000),
    ("ingest", "over ZeroMQ, payload signature only: ack latency p99 at 5,000/s offered", "ingest.zmq.payload_verify.p99_ms_at5000", "<= 50 ms", lambda v: v <= 50),
    ("ingest", "ack latency p50 at 50% of the max rate", "ingest.p50_ms_at50pct", "(no target yet)", None),
    ("ingest", "ack latency p99 at 50% of the max rate", "ingest.p99_ms_at50pct", "(no target yet)", None),
    ("ingest", "ack latency p50 at 90% of the max rate", "ingest.p50_ms_at90pct", "(no target yet)", None),
    ("ingest", "ack latency p99 at 90% of the max rate", "ingest.p99_ms_at90pct", "(no target yet)", None),
    ("store", "coordinator CPU per envelope, SQLite store", "store.sqlite.coordinator_cpu_ms_per_envelope", "(model input)", None),
    ("store", "coordinator CPU per envelope, PostgreSQL store", "store.postgres.coordinator_cpu_ms_per_envelope", "(model input)", None),
    ("store", "PostgreSQL server CPU per envelope", "store.postgres.postgres_cpu_ms_per_envelope", "(model input)", None),
    ("store", "coordinator CPU per envelope, two coordinators on PostgreSQL", "store.postgres.coordinators2.coordinator_cpu_ms_per_envelope", "(model input)", None),
    ("store", "PostgreSQL server CPU per envelope, two coordinators", "store.postgres.coordinators2.postgres_cpu_ms_per_envelope", "(model input)", None),
    ("store", "modelled: envelopes/s per added coordinator core (1000 / coordinator CPU ms per envelope), PostgreSQL store", "store.postgres.envelopes_per_coordinator_core_s", "(model)", None),
    ("store", "modelled: envelopes/s per PostgreSQL core", "store.postgres.envelopes_per_postgres_core_s", "(model)", None),
    ("captive", "complete captive ceremonies per second, 8 concurrent signers", "ceremonies.k8.per_s", "(no target yet)", None),
    ("captive", "the same with page images drawn on first view (pdftoppm)", "ceremonies.k8.render_first.per_s", "(no target yet)", None),
    ("captive", "the same with page images from the cache", "ceremonies.k8.render_cached.per_s", "(no target yet)", None),
    ("rest", "full REST ceremonies per second, 8 concurrent backends", "rest.ceremonies.k8.per_s", ">= 100 ceremonies/s", lambda v: v >= 100),
    ("rest", "REST step create (POST envelopes, one-page PDF) p99", "rest.k8.create.p99_ms", "(no target)", None),
    ("rest", "REST step view (POST views/recipient) p99", "rest.k8.view.p99_ms", "(no target)", None),
    ("rest", "REST step open (GET the signing page) p99", "rest.k8.open.p99_ms", "(no target)", None),
    ("rest", "REST step sign (POST the page, typed signature) p99", "rest.k8.sign.p99_ms", "(no target)", None),
    ("rest", "REST step combined (GET documents/combined: qpdf draws the signature, adds the certificate) p99", "rest.k8.combined.p99_ms", "(no target)", None),
    ("connect", "Connect events delivered per second while ingesting 1,000 envelopes/s (5 events each)", "connect.events_delivered_per_s", "(keeps up: 5,000 events/s)", lambda v: v >= 4750),
    ("connect", "Connect lag from an envelope's commit to its events' 2xx, p99", "connect.lag_p99_ms", "<= 250 ms", lambda v: v <= 250),
]

# Where loadtests/run keeps its outputs (kept figures by group, fleet scale).
OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "out")
# Kept in git, so that a fresh clone regenerating one group keeps the others' figures.
RESULTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")

GROUP_ORDER = ["codec", "transport", "capture", "device", "ingest", "store", "proxy", "captive", "rest"]


def sh(*args):
    try:
        return subprocess.run(args, capture_output=True, text=True, timeout=30).stdout.strip()
    except Exception:
        return "unknown"


def machine():
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = "unknown"
    try:
        with open("/proc/meminfo") as f:
            kb = int(f.readline().split()[1])
            mem = f"{kb / 1024 / 1024:.1f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    swift = sh("swift", "--version").splitlines()
    return {
        "CPU": f"{cpu}, {os.cpu_count()} cores",
        "Memory": mem,
        "Kernel": platform.release(),
        "Swift": swift[0] if swift else "unknown",
        "Python": platform.python_version(),
        "libzmq": sh("pkg-config", "--modversion", "libzmq"),
        "msgpack-c": sh("pkg-config", "--modversion", "msgpack"),
    }


def fmt(value):
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 1:
        return f"{value:,.2f}"
    return f"{value:.4g}"


def read_figures(lines):
    """(figures by (bench, metric), their order); each figure is the median of its runs."""
    figures = {}
    order = []
    for line in lines:
        line = line.strip()
        if not line.startswith("{"):
            continue
        item = json.loads(line)
        key = (item["bench"], item["metric"])
        if key not in figures:
            order.append(key)
            figures[key] = dict(item, runs=[])
        figures[key]["runs"].append(float(item["value"]))
    # loadtests/run alternates ours and the reference over rounds; the median is the figure.
    for item in figures.values():
        item["value"] = statistics.median(item["runs"])
    return figures, order


def update_groups(figures_path, command, at):
    """Stores this run's groups beside earlier ones; returns {group: (lines, command, at)}."""
    groups_dir = RESULTS_DIR
    os.makedirs(groups_dir, exist_ok=True)
    measured = {}
    with open(figures_path) as f:
        for line in f:
            if line.strip().startswith("{"):
                measured.setdefault(json.loads(line)["bench"], []).append(line.strip())
    for group, lines in measured.items():
        with open(os.path.join(groups_dir, f"{group}.jsonl"), "w") as f:
            f.write("\n".join(lines) + "\n")
        with open(os.path.join(groups_dir, f"{group}.meta.json"), "w") as f:
            json.dump({"command": command, "at": at}, f)
    groups = {}
    for name in sorted(os.listdir(groups_dir)):
        if not name.endswith(".jsonl"):
            continue
        group = name[: -len(".jsonl")]
        with open(os.path.join(groups_dir, name)) as f:
            lines = f.readlines()
        meta = {"command": "unknown", "at": "unknown", "note": ""}
        try:
            with open(os.path.join(groups_dir, f"{group}.meta.json")) as f:
                meta = json.load(f)
        except (OSError, ValueError):
            pass
        command_text = f"`{meta['command']}`" + (f" ({meta['note']})" if meta.get("note") else "")
        groups[group] = (lines, command_text, meta["at"])
    return groups


def fleet_scale(out_dir):
    """Rows of loadtests/results/fleet-scale.tsv (copied there by fleet-scale.sh) and when
    they were measured (its .at file), or None."""
    path = os.path.join(RESULTS_DIR, "fleet-scale.tsv")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        lines = [l.rstrip("\n").split("\t") for l in f if l.strip()]
    if len(lines) < 2:
        return None
    header, rows = lines[0], [dict(zip(lines[0], r)) for r in lines[1:]]
    try:
        with open(os.path.join(RESULTS_DIR, "fleet-scale.at")) as f:
            at = f.read().strip()
    except OSError:
        at = "unknown time"
    return header, rows, at


def number(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def fleet_section(out_dir):
    found = fleet_scale(out_dir)
    if found is None:
        return ["## Fleet scale\n", "Not measured in this report: run `loadtests/run fleet` (over 10 minutes, so not in `all`).", ""]
    header, rows, at = found
    out = ["## Fleet scale\n"]
    out.append(
        f"`loadtests/run fleet` (loadtests/fleet-scale.sh) at {at}: a 2-minute scaled `offline-field-day` per device count "
        "(real coordinator, node processes of the devices per process shown, ZeroMQ, SQLite, faults), checked by the history checker. "
        "Sync-ack p50/p99 come from the devices' histories; memory is the peak summed Pss of the node processes (shared library pages "
        "split among the processes that map them) and, beside it, their summed VmRSS (which counts each shared page once per process); "
        "node CPU is the node processes' CPU time (user + system) per device and minute of the whole run (run and drain); the "
        "coordinator's CPU seconds and peak VmRSS cover the same span.\n")
    def largest_under_a_second(column):
        """The count with the most devices whose every run was valid with `column` under 1,000 ms
        (the worst run decides), as the worst run's row, or None."""
        counts = {}
        for r in rows:
            counts.setdefault(int(r["devices"]), []).append(r)
        met = []
        for devices, runs in counts.items():
            if all(r.get("verdict") == "valid" and number(r.get(column)) is not None and number(r[column]) < 1000 for r in runs):
                met.append(max(runs, key=lambda r: number(r[column])))
        return max(met, key=lambda r: int(r["devices"])) if met else None

    runs_per_count = {}
    for r in rows:
        runs_per_count[int(r["devices"])] = runs_per_count.get(int(r["devices"]), 0) + 1
    if max(runs_per_count.values()) > 1:
        out.append("Each count ran several times (`RUNS`, one seed each); the headline and the spread below quote the worst run.\n")

    best = largest_under_a_second("p99_ms")
    if best:
        out.append(
            f"**Largest device count with a valid verdict and p99 sync-ack < 1 s: {best['devices']}** "
            f"(p99 {best['p99_ms']} ms, {best.get('pss_kb_per_device', best.get('rss_kb_per_device'))} kB resident per device).\n")
    else:
        out.append("**No device count met both a valid verdict and p99 sync-ack < 1 s.**\n")
    best = largest_under_a_second("run_p99_ms")
    if best:
        out.append(
            f"Counting only the syncs that started before the drain (when the launcher brings the devices back online, all at once or over the drain ramp shown): "
            f"**{best['devices']}** (p99 {best['run_p99_ms']} ms before the drain, {best.get('drain_p99_ms', '-')} ms in it).\n")
    out.append("| devices | devices per node process | verdict | sync-ack p50 (ms) | p99 (ms) | syncs | before the drain: p50 (ms) | p99 (ms) | in the drain: p99 (ms) | drain ramp (s) | outages' return ramp (s) | peak node Pss (MB) | Pss kB per device | peak node RSS (MB) | RSS kB per device | node CPU ms per device-minute | coordinator CPU (s) | coordinator peak RSS (MB) |")
    out.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        out.append(
            f"| {r.get('devices', '')} | {r.get('devices_per_process', '~50')} | {r.get('verdict', '')} | {r.get('p50_ms', '')} | {r.get('p99_ms', '')} | "
            f"{r.get('syncs', '')} | {r.get('run_p50_ms', '-')} | {r.get('run_p99_ms', '-')} | {r.get('drain_p99_ms', '-')} | {r.get('drain_ramp_s', '0')} | {r.get('return_ramp_s', '0')} | {r.get('peak_node_pss_mb', '-')} | {r.get('pss_kb_per_device', '-')} | {r.get('peak_node_rss_mb', '')} | {r.get('rss_kb_per_device', '')} | "
            f"{r.get('node_cpu_ms_per_device_minute', '-')} | {r.get('coordinator_cpu_s', '-')} | {r.get('peak_coordinator_rss_mb', '-')} |")
    out.append("")
    spread = os.path.join(RESULTS_DIR, "fleet-scale-spread.tsv")
    if os.path.exists(spread):
        with open(spread) as f:
            lines = [l.rstrip("\n").split("\t") for l in f if l.strip()]
        if len(lines) > 1:
            out.append("Spread over the runs of each count (fleet-scale-spread.tsv):\n")
            out.append("| devices | runs | valid | median p99 (ms) | worst p99 (ms) | worst p99 before the drain (ms) | worst Pss kB per device |")
            out.append("|---|---|---|---|---|---|---|")
            for r in (dict(zip(lines[0], l)) for l in lines[1:]):
                out.append(f"| {r['devices']} | {r['runs']} | {r['valid']} | {r['median_p99_ms']} | {r['worst_p99_ms']} | {r['worst_run_p99_ms']} | {r['worst_pss_kb_per_device']} |")
            out.append("")
    return out


def trigger_section():
    """loadtests/results/trigger.tsv (`loadtests/run trigger`): the metastability trigger test."""
    path = os.path.join(RESULTS_DIR, "trigger.tsv")
    out = ["## Overload: the trigger test\n"]
    if not os.path.exists(path):
        out += ["Not measured in this report: run `loadtests/run trigger` (loadtests/trigger.sh; several minutes per count, so not in `all`).", ""]
        return out
    with open(path) as f:
        lines = [l.rstrip("\n").split("\t") for l in f if l.strip()]
    at = "unknown time"
    try:
        with open(os.path.join(RESULTS_DIR, "trigger.at")) as f:
            at = f.read().strip()
    except OSError:
        pass
    out.append(
        f"`loadtests/run trigger` (loadtests/trigger.sh) at {at}: an always-online fleet at steady load whose coordinator is "
        "stopped (SIGSTOP) for 10 s at 60 s. Goodput is envelopes synced per second (20 s to 60 s); recovery is the time from the "
        "trigger's end to the first 5-second window that syncs 90% of it again; it passes within 2x the trigger and a valid verdict. "
        "Devices lost and requests shed are counted in the coordinator's log.\n")
    out.append("| devices | verdict | goodput before (/s) | recovery (s) | passed | worst p99 after (ms) | devices lost | requests shed | seed |")
    out.append("|---|---|---|---|---|---|---|---|---|")
    for r in (dict(zip(lines[0], l)) for l in lines[1:]):
        out.append(f"| {r['devices']} | {r['verdict']} | {r['goodput_before_per_s']} | {r['recovery_s']} | {r['recovered']} | "
                   f"{r['worst_p99_after_ms']} | {r['devices_lost']} | {r['requests_shed']} | {r['seed']} |")
    out.append("")
    return out


def load_section():
    """`signfleet load`'s last kept summary (loadtests/results/load-summary.json, copied there
    by `loadtests/run load` with load-summary.at holding the command and time)."""
    path = os.path.join(RESULTS_DIR, "load-summary.json")
    if not os.path.exists(path):
        return ["## Signing ceremonies under load\n", "Not measured in this report: run `loadtests/run load`.", ""]
    with open(path) as f:
        summary = json.load(f)
    at = ""
    at_path = os.path.join(RESULTS_DIR, "load-summary.at")
    if os.path.exists(at_path):
        with open(at_path) as f:
            at = f.read().strip()
    out = ["## Signing ceremonies under load\n"]
    out.append(
        f"{at}: `signfleet load` against a coordinator it starts (release build): open-loop ceremonies (compose, capture, "
        "sign + outbox commit, sync ack) from virtual devices, each with its own SQLite store, key and DEALER; latency from "
        "each ceremony's intended start (corrected for coordinated omission) beside the uncorrected figure; then the "
        "end-of-run audit of every device's outbox against the coordinator's records.\n")
    out.append(
        f"Seed {summary.get('seed')}, {summary.get('devices')} devices, offered {fmt(summary.get('offeredRate', 0))}/s "
        f"for {fmt(summary.get('seconds', 0))} s: {summary.get('arrivals')} arrivals, {summary.get('completed')} completed, "
        f"throughput {fmt(summary.get('throughput', 0))}/s, errors {summary.get('errorCount')}, dropped {summary.get('dropped')}, "
        f"unfinished {summary.get('unfinished')}.\n")
    out.append("| latency (ms) | p50 | p90 | p99 | p99.9 | max |")
    out.append("|---|---|---|---|---|---|")
    rows = [("ceremony, corrected", summary.get("corrected")), ("ceremony, uncorrected", summary.get("uncorrected"))]
    steps = summary.get("steps") or {}
    rows += [(name, steps.get(name)) for name in summary.get("stepOrder") or sorted(steps)]
    for name, stats in rows:
        if stats:
            out.append(f"| {name} | {fmt(stats['p50'])} | {fmt(stats['p90'])} | {fmt(stats['p99'])} | {fmt(stats['p999'])} | {fmt(stats['max'])} |")
    out.append("")
    audit = summary.get("audit")
    if audit:
        counts = audit.get("counts", {})
        verdict = "PASS" if audit.get("passed") else "**FAIL**"
        out.append(
            f"Audit {verdict}: {audit.get('devicesAudited')} devices, {audit.get('itemsChecked')} items checked "
            f"({audit.get('acknowledged')} acknowledged): " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) + ".\n")
    return out


def main():
    figures_path, output_path, command = sys.argv[1], sys.argv[2], sys.argv[3].strip()
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    groups = update_groups(figures_path, command, now)
    lines = []
    for group in sorted(groups, key=lambda g: (GROUP_ORDER.index(g) if g in GROUP_ORDER else len(GROUP_ORDER), g)):
        lines += groups[group][0]
    figures, order = read_figures(lines)

    out = []
    out.append("# Performance\n")
    out.append("Generated by `loadtests/run` (loadtests/report.py); do not edit by hand: hand-written notes live in loadtests/NOTES.md.")
    out.append("Each figure stands beside a reference measured in the same run of its group; ratios above 1 mean ours is faster.")
    out.append("Ours and the reference alternate over several rounds; each figure is the median of its rounds.\n")
    out.append(f"Reproduce everything: `loadtests/run` (all groups), then `loadtests/run fleet`. Last regenerated by `{command}` at {now}.\n")
    out.append("| group | measured by | at |")
    out.append("|---|---|---|")
    for group in sorted(groups, key=lambda g: (GROUP_ORDER.index(g) if g in GROUP_ORDER else len(GROUP_ORDER), g)):
        out.append(f"| {group} | {groups[group][1]} | {groups[group][2]} |")
    out.append("")
    out.append("## Machine\n")
    out.append(f"The machine `{command}` ran on at {now}; each group's own date is in the table above, and a group measured on another machine says so in its notes.\n")
    for key, value in machine().items():
        out.append(f"- {key}: {value}")
    out.append("")

    benches = []
    for bench, _ in order:
        if bench not in benches:
            benches.append(bench)

    out.append("## Against the references\n")
    out.append("| group | what | ours | reference | ratio | target |")
    out.append("|---|---|---|---|---|---|")
    for bench, what, ours, ref, higher, target in COMPARISONS:
        a = figures.get((bench, ours))
        b = figures.get((bench, ref))
        if a is None and b is None:
            continue
        ours_text = f"{fmt(a['value'])} {a['unit']}" if a else "not measured"
        ref_text = f"{fmt(b['value'])} {b['unit']}" if b else "not measured"
        ratio = "n/a"
        if a and b and a["value"] > 0 and b["value"] > 0:
            r = a["value"] / b["value"] if higher else b["value"] / a["value"]
            ratio = f"{r:.2f}x"
        out.append(f"| {bench} | {what} | {ours_text} | {ref_text} | {ratio} | {target} |")
    out.append("")

    rows = [t for t in TARGETS if (t[0], t[2]) in figures]
    if rows:
        out.append("## Against absolute targets\n")
        out.append("| group | what | measured | target | met |")
        out.append("|---|---|---|---|---|")
        for bench, what, metric, target, passes in rows:
            item = figures[(bench, metric)]
            met = "n/a" if passes is None else ("yes" if passes(item["value"]) else "**no**")
            out.append(f"| {bench} | {what} | {fmt(item['value'])} {item['unit']} | {target} | {met} |")
        out.append("")

    out += fleet_section(OUT_DIR)
    out += trigger_section()
    out += load_section()

    out.append("## Every figure\n")
    for bench in benches:
        out.append(f"### {bench}\n")
        out.append("| metric | median | range | rounds | unit |")
        out.append("|---|---|---|---|---|")
        for b, metric in order:
            if b == bench:
                item = figures[(b, metric)]
                runs = item["runs"]
                spread = f"{fmt(min(runs))} - {fmt(max(runs))}" if len(runs) > 1 else ""
                out.append(f"| `{metric}` | {fmt(item['value'])} | {spread} | {len(runs)} | {item['unit']} |")
        out.append("")

    notes = os.path.join(os.path.dirname(os.path.abspath(__file__)), "NOTES.md")
    if os.path.exists(notes):
        with open(notes) as f:
            out.append(f.read().rstrip() + "\n")

    with open(output_path, "w") as f:
        f.write("\n".join(out))


if __name__ == "__main__":
    main()
