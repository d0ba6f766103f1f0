#!/usr/bin/env python3
"""Writes docs/performance.md from the JSON lines a loadtests/run produced.

Usage: report.py FIGURES.jsonl OUTPUT.md "COMMAND"
Only figures measured in this run appear; a comparison whose reference is
missing is shown as "not measured", never filled in.
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
    ("ingest", "sync ingest (verify + commit), 1 device vs raw SQLite inserts of the same rows", "ingest.devices1.envelopes_per_s", "ref.sqlite_inserts_per_s", True, "(reference: the store's ceiling)"),
    ("ingest", "sync ingest, 10 devices vs raw SQLite inserts", "ingest.devices10.envelopes_per_s", "ref.sqlite_inserts_per_s", True, "(reference: the store's ceiling)"),
    ("ingest", "sync ingest, 100 devices vs raw SQLite inserts", "ingest.devices100.envelopes_per_s", "ref.sqlite_inserts_per_s", True, "(reference: the store's ceiling)"),
    ("ingest", "sync ingest, 100 devices vs raw Ed25519 verification (one core)", "ingest.devices100.envelopes_per_s", "ref.ed25519_verify_per_s", True, "(reference: one verification per core)"),
    ("proxy", "ZeroMQ round trip 64 B through the fault proxy (no toxics) vs direct", "via_proxy.rtt.64B.per_s", "direct.rtt.64B.per_s", True, "(cost of the extra hop)"),
    ("proxy", "ZeroMQ round trip 6 KB through the fault proxy (no toxics) vs direct", "via_proxy.rtt.6KB.per_s", "direct.rtt.6KB.per_s", True, "(cost of the extra hop)"),
]

# Figures with an absolute target: (bench, what, metric, target text, passes(value)).
TARGETS = [
    ("capture", "full capture of a 3 s signature at 240 Hz, per core (CPU time)", "full_capture_rate_per_core_cpu", ">= 5,000 captures/s", lambda v: v >= 5000),
    ("device", "compose + sign + outbox commit, one device, fsync per commit (powerLoss)", "one_device_powerLoss_envelopes_per_second", "(no target yet)", None),
    ("device", "compose + sign + outbox commit, 100 devices in one process", "100_devices_envelopes_per_second", "(no target yet)", None),
    ("ingest", "sustained ingest, signed envelopes verified + committed, 1 device", "ingest.devices1.envelopes_per_s", ">= 10,000 envelopes/s", lambda v: v >= 10000),
    ("ingest", "sustained ingest, 10 devices", "ingest.devices10.envelopes_per_s", ">= 10,000 envelopes/s", lambda v: v >= 10000),
    ("ingest", "sustained ingest, 100 devices", "ingest.devices100.envelopes_per_s", ">= 10,000 envelopes/s", lambda v: v >= 10000),
    ("ingest", "ack latency p50 at 50% of the max rate", "ingest.p50_ms_at50pct", "(no target yet)", None),
    ("ingest", "ack latency p99 at 50% of the max rate", "ingest.p99_ms_at50pct", "(no target yet)", None),
    ("ingest", "ack latency p50 at 90% of the max rate", "ingest.p50_ms_at90pct", "(no target yet)", None),
    ("ingest", "ack latency p99 at 90% of the max rate", "ingest.p99_ms_at90pct", "(no target yet)", None),
]


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


def main():
    figures_path, output_path, command = sys.argv[1], sys.argv[2], sys.argv[3].strip()
    figures = {}
    order = []
    with open(figures_path) as f:
        for line in f:
            line = line.strip()
            if not line.startswith("{"):
                continue
            item = json.loads(line)
            key = (item["bench"], item["metric"])
            if key not in figures:
                order.append(key)
                figures[key] = dict(item, runs=[])
            figures[key]["runs"].append(float(item["value"]))
    # Each figure is the median of its runs (loadtests/run alternates ours and the reference).
    for item in figures.values():
        item["value"] = statistics.median(item["runs"])

    out = []
    out.append("# Performance\n")
    out.append("Generated by `loadtests/run` from figures measured in one run; do not edit by hand.")
    out.append("Each figure stands beside a reference measured in the same run; ratios above 1 mean ours is faster.")
    out.append("Ours and the reference alternate over several rounds; each figure is the median of its rounds.\n")
    out.append(f"Reproduce: `{command}` (run on {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}).\n")
    out.append("## Machine\n")
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

    out.append("## Every figure of this run\n")
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
