#!/usr/bin/env python3
"""Reference for `signfleet-bench codec`: the same messages through python msgpack.

Builds the FleetProtocol messages that loadtests/Sources/signfleet-bench/
CodecBenchmark.swift encodes (a header frame and a body frame each, same keys,
values and key order) and prints the same JSON lines with a "python." prefix.
Before measuring it checks that its bytes equal the frames the Swift bench
wrote to $TMPDIR/signfleet-codec (or --bytes-dir DIR), and exits 1 if not.
"""
import json
import os
import sys
import tempfile
import time

import msgpack
from msgpack import Timestamp

MASK = (1 << 64) - 1


class BenchBytes:
    """64-bit LCG (Knuth's MMIX constants), as the Swift benchmark uses."""

    def __init__(self, state):
        self.state = state

    def bytes(self, count):
        out = bytearray(count)
        for i in range(count):
            self.state = (self.state * 6364136223846793005 + 1442695040888963407) & MASK
            out[i] = self.state >> 56
        return bytes(out)


def ts(seconds):
    whole = int(seconds // 1)
    return Timestamp(whole, int(round((seconds - whole) * 1e9)))


def header(type_, id_, sent_at, reply_to=None, rate_limit=None):
    """MessageHeader: keys v, t, id, re?, at, rl? in this order; nil fields omitted."""
    h = {"v": [1, 0], "t": type_, "id": id_}
    if reply_to is not None:
        h["re"] = reply_to
    h["at"] = sent_at
    if rate_limit is not None:
        h["rl"] = rate_limit
    return h


def messages():
    random = BenchBytes(42)
    base = 1700000000.0
    items = []
    for i in range(10):
        items.append({
            "seq": 5000 + i, "transactionID": "txn-%08d" % (1000 + i),
            "payload": random.bytes(6144), "signature": random.bytes(64),
        })
    push = (header("sync.push", 123456789, ts(base + 20.25)), {"deviceID": "device-00042", "items": items})
    heartbeat = (header("heartbeat", 987654321, ts(base + 30.5)), {})
    results = []
    for i in range(10):
        if i == 7:
            results.append({"seq": 5000 + i, "outcome": "duplicate", "envelopeID": "srv-%08d" % (70000 + i)})
        elif i == 9:
            results.append({"seq": 5000 + i, "outcome": "rejected", "reason": "signature does not verify"})
        else:
            results.append({"seq": 5000 + i, "outcome": "applied", "envelopeID": "srv-%08d" % (70000 + i)})
    ack = (header("sync.ack", 123456790, ts(base + 20.75), reply_to=123456789,
                  rate_limit={"remaining": 99, "resetAt": ts(base + 60)}),
           {"status": "ok", "lastApplied": 5009, "results": results})
    return {"push": push, "heartbeat": heartbeat, "ack": ack}


def check_bytes(directory, name, frames):
    """Compares our frames with the Swift bench's; True when identical or absent."""
    for part, data in zip(("header", "body"), frames):
        path = os.path.join(directory, "%s.%s.msgpack" % (name, part))
        if not os.path.exists(path):
            print("note: %s missing (run signfleet-bench codec first); bytes not compared" % path, file=sys.stderr)
            return True
        with open(path, "rb") as f:
            swift = f.read()
        if swift != data:
            print("error: %s %s frame differs from the Swift bench's (%d vs %d bytes)\n python %s\n swift  %s"
                  % (name, part, len(data), len(swift), data[:96].hex(), swift[:96].hex()), file=sys.stderr)
            return False
    return True


def measure_rate(seconds, body):
    """Mirrors Harness.swift's measureRate: 200 ms warm-up, then batches of 16."""
    end = time.perf_counter() + 0.2
    while time.perf_counter() < end:
        body()
    calls = 0
    start = time.perf_counter()
    end = start + seconds
    while time.perf_counter() < end:
        for _ in range(16):
            body()
        calls += 16
    return calls / (time.perf_counter() - start)


def measure_cpu_rate(seconds, body):
    """Like measure_rate, but divides by this thread's CPU time (the machine is shared)."""
    end = time.thread_time() + 0.1
    while time.thread_time() < end:
        body()
    calls = 0
    start = time.thread_time()
    while time.thread_time() - start < seconds:
        for _ in range(16):
            body()
        calls += 16
    return calls / (time.thread_time() - start)


def emit(metric, value, unit):
    print(json.dumps({"bench": "codec", "metric": metric, "value": value, "unit": unit}), flush=True)


def main():
    seconds = 2.0
    if "--seconds" in sys.argv:
        seconds = float(sys.argv[sys.argv.index("--seconds") + 1])
    directory = os.path.join(tempfile.gettempdir(), "signfleet-codec")
    if "--bytes-dir" in sys.argv:
        directory = sys.argv[sys.argv.index("--bytes-dir") + 1]
    packb, unpackb = msgpack.packb, msgpack.unpackb
    all_messages = messages()
    ok = True
    for name, (head, body) in all_messages.items():
        ok = check_bytes(directory, name, (packb(head), packb(body))) and ok
    if not ok:
        sys.exit(1)
    for name, (head, body) in all_messages.items():
        head_bytes, body_bytes = packb(head), packb(body)
        size = len(head_bytes) + len(body_bytes)

        # One message is two frames, as on the wire (and in the Swift bench).
        def encode():
            packb(head)
            packb(body)

        def decode():
            unpackb(head_bytes)
            unpackb(body_bytes)

        encode_rate = measure_rate(seconds, encode)
        decode_rate = measure_rate(seconds, decode)
        emit("python.%s.bytes" % name, size, "B")
        emit("python.encode.%s.msg_per_s" % name, encode_rate, "msg/s")
        emit("python.encode.%s.mb_per_s" % name, encode_rate * size / 1e6, "MB/s")
        emit("python.decode.%s.msg_per_s" % name, decode_rate, "msg/s")
        emit("python.decode.%s.mb_per_s" % name, decode_rate * size / 1e6, "MB/s")
        emit("python.encode.%s.cpu_msg_per_s" % name, measure_cpu_rate(seconds, encode), "msg/cpu-s")
        emit("python.decode.%s.cpu_msg_per_s" % name, measure_cpu_rate(seconds, decode), "msg/cpu-s")


if __name__ == "__main__":
    main()
