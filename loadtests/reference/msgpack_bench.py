#!/usr/bin/env python3
"""Reference for `signfleet-bench codec`: the same messages through python msgpack.

Same field names, sizes and seeded content as loadtests/Sources/signfleet-bench/
CodecBenchmark.swift; prints the same JSON lines with a "python." prefix.
"""
import json
import sys
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


def messages():
    random = BenchBytes(42)
    base = 1700000000.0
    items = []
    for i in range(10):
        items.append({
            "envelopeId": "env-%08d" % (1000 + i), "seq": 5000 + i, "status": "signed",
            "signerName": "Signer Number %d" % i,
            "createdAt": ts(base + i), "signedAt": ts(base + i + 0.5),
            "documentHash": random.bytes(32), "biometricHash": random.bytes(32), "signature": random.bytes(6144),
            "pageCount": 3 + i,
        })
    push = {"type": "sync.push", "requestId": 123456789, "deviceId": "device-00042", "sentAt": ts(base + 20.25), "items": items}
    heartbeat = {"type": "heartbeat", "requestId": 987654321, "sentAt": ts(base + 30.5)}
    ack = {"type": "sync.ack", "requestId": 123456789, "lastApplied": 5009,
           "results": [{"seq": 5000 + n, "status": "applied", "serverId": "srv-%08d" % (70000 + n)} for n in range(10)]}
    return {"push": push, "heartbeat": heartbeat, "ack": ack}


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


def emit(metric, value, unit):
    print(json.dumps({"bench": "codec", "metric": metric, "value": value, "unit": unit}), flush=True)


def main():
    seconds = 2.0
    if "--seconds" in sys.argv:
        seconds = float(sys.argv[sys.argv.index("--seconds") + 1])
    packb, unpackb = msgpack.packb, msgpack.unpackb
    for name, message in messages().items():
        data = packb(message)
        size = len(data)
        encode = measure_rate(seconds, lambda: packb(message))
        decode = measure_rate(seconds, lambda: unpackb(data))
        emit("python.%s.bytes" % name, size, "B")
        emit("python.encode.%s.msg_per_s" % name, encode, "msg/s")
        emit("python.encode.%s.mb_per_s" % name, encode * size / 1e6, "MB/s")
        emit("python.decode.%s.msg_per_s" % name, decode, "msg/s")
        emit("python.decode.%s.mb_per_s" % name, decode * size / 1e6, "MB/s")


if __name__ == "__main__":
    main()
