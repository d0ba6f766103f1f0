// `signfleet-bench codec [--seconds S] [--only KIND] [--op OPERATION] [--bytes-dir DIR]`
//
// Encodes and decodes the reference messages — the real FleetProtocol types,
// header frame and body frame as they go on the wire — with MessagePack and
// prints msg/s and MB/s per message kind, for the fast path (what WireCodec
// uses) and, as extras, for the plain Codable path.
//
// The Python reference (loadtests/reference/msgpack_bench.py, python msgpack's
// C extension) builds byte-identical messages; loadtests/run runs it after
// this and report.py pairs the figures. This bench writes its encoded frames to
// DIR (default $TMPDIR/signfleet-codec) and the Python script checks that its
// own bytes are identical before measuring.
import Foundation
import FleetProtocol
import MessagePack

// MARK: Reference messages (identical keys, values and bytes in msgpack_bench.py)

/// 64-bit LCG (Knuth's MMIX constants); the Python reference uses the same one.
struct BenchBytes {
    var state: UInt64
    mutating func bytes(_ count: Int) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: count)
        for i in 0..<count {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            out[i] = UInt8(truncatingIfNeeded: state >> 56)
        }
        return out
    }
}

struct BenchMessages {
    var push: (header: MessageHeader, body: SyncPush)
    var heartbeat: (header: MessageHeader, body: Heartbeat)
    var ack: (header: MessageHeader, body: SyncAck)
}

func benchMessages() -> BenchMessages {
    var random = BenchBytes(state: 42)
    let base = 1_700_000_000.0
    let items = (0..<10).map { i in
        SyncItem(
            sequence: UInt64(5000 + i), transactionID: "txn-\(String(format: "%08d", 1000 + i))",
            payload: random.bytes(6144), signature: random.bytes(64))
    }
    let push = SyncPush(deviceID: "device-00042", items: items)
    let pushHeader = MessageHeader(type: SyncPush.messageType, id: 123_456_789, sentAt: Date(timeIntervalSince1970: base + 20.25))
    let heartbeatHeader = MessageHeader(type: Heartbeat.messageType, id: 987_654_321, sentAt: Date(timeIntervalSince1970: base + 30.5))
    let results = (0..<10).map { i -> SyncItemResult in
        switch i {
        case 7: SyncItemResult(sequence: UInt64(5000 + i), outcome: .duplicate, envelopeID: "srv-\(String(format: "%08d", 70000 + i))")
        case 9: SyncItemResult(sequence: UInt64(5000 + i), outcome: .rejected, reason: "signature does not verify")
        default: SyncItemResult(sequence: UInt64(5000 + i), outcome: .applied, envelopeID: "srv-\(String(format: "%08d", 70000 + i))")
        }
    }
    let ack = SyncAck(status: .ok, lastApplied: 5009, results: results)
    let ackHeader = MessageHeader(
        type: SyncAck.messageType, id: 123_456_790, replyTo: 123_456_789, sentAt: Date(timeIntervalSince1970: base + 20.75),
        rateLimit: RateLimitStatus(remaining: 99, resetAt: Date(timeIntervalSince1970: base + 60)))
    return BenchMessages(push: (pushHeader, push), heartbeat: (heartbeatHeader, Heartbeat()), ack: (ackHeader, ack))
}

// MARK: Benchmark

func codecBenchmark(_ arguments: [String]) async throws {
    var seconds = 2.0
    var only = ""  // e.g. "push": run only the message kinds whose name contains this
    var op = ""  // e.g. "decode": run only the operations with exactly this name (for profiling)
    var bytesDir = FileManager.default.temporaryDirectory.appendingPathComponent("signfleet-codec").path
    var index = 0
    while index < arguments.count {
        let value = index + 1 < arguments.count ? arguments[index + 1] : ""
        switch arguments[index] {
        case "--seconds": seconds = Double(value) ?? seconds
        case "--only": only = value
        case "--op": op = value
        case "--bytes-dir": bytesDir = value
        default: print("unknown option \(arguments[index])"); return
        }
        index += 2
    }

    let messages = benchMessages()
    let encoder = MessagePackEncoder()
    let decoder = MessagePackDecoder()
    var codableEncoder = MessagePackEncoder()
    codableEncoder.usesFastPath = false
    var codableDecoder = MessagePackDecoder()
    codableDecoder.usesFastPath = false
    try FileManager.default.createDirectory(atPath: bytesDir, withIntermediateDirectories: true)

    // Generic over FleetMessageBody, as WireCodec is: the fast path is found at run time.
    func run<Body: FleetMessageBody>(_ name: String, _ header: MessageHeader, _ body: Body) throws {
        guard only.isEmpty || name.contains(only) else { return }
        let headerBytes = try encoder.encode(header)
        let bodyBytes = try encoder.encode(body)
        guard try codableEncoder.encode(header) == headerBytes, try codableEncoder.encode(body) == bodyBytes else {
            throw MessagePackError(code: .invalidInput, message: "\(name): fast path and Codable bytes differ")
        }
        try Data(headerBytes).write(to: URL(fileURLWithPath: "\(bytesDir)/\(name).header.msgpack"))
        try Data(bodyBytes).write(to: URL(fileURLWithPath: "\(bytesDir)/\(name).body.msgpack"))
        let size = Double(headerBytes.count + bodyBytes.count)

        func encode(_ encoder: MessagePackEncoder) throws {
            blackHole(try encoder.encode(header))
            blackHole(try encoder.encode(body))
        }
        func decode(_ decoder: MessagePackDecoder) throws {
            blackHole(try decoder.decode(MessageHeader.self, from: headerBytes))
            blackHole(try decoder.decode(Body.self, from: bodyBytes))
        }
        // Python's unpackb builds dicts: the like-for-like dynamic figure.
        func decodeDynamic() throws {
            blackHole(try MessagePackValue.decode(headerBytes))
            blackHole(try MessagePackValue.decode(bodyBytes))
        }
        let rates: [(String, () throws -> Void)] = [
            ("encode", { try encode(encoder) }),
            ("decode", { try decode(decoder) }),
            ("encode_codable", { try encode(codableEncoder) }),
            ("decode_codable", { try decode(codableDecoder) }),
            ("decode_dynamic", decodeDynamic),
        ]
        Report.emit("codec", "swift.\(name).bytes", size, "B")
        for (operation, body) in rates where op.isEmpty || op == operation {
            let rate = try measureRate(seconds: seconds) { try body() }
            Report.emit("codec", "swift.\(operation).\(name).msg_per_s", rate, "msg/s")
            Report.emit("codec", "swift.\(operation).\(name).mb_per_s", rate * size / 1e6, "MB/s")
            // CPU-time rates: the machine is shared, and wall-clock rates swing with other load.
            let cpuRate = try measureCPURate(seconds: seconds) { try body() }
            Report.emit("codec", "swift.\(operation).\(name).cpu_msg_per_s", cpuRate, "msg/cpu-s")
        }
    }
    try run("push", messages.push.header, messages.push.body)
    try run("heartbeat", messages.heartbeat.header, messages.heartbeat.body)
    try run("ack", messages.ack.header, messages.ack.body)
}

/// Like `measureRate`, but divides by the thread's CPU time rather than wall time.
func measureCPURate(seconds: Double, _ body: () throws -> Void) rethrows -> Double {
    func cpuNow() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now)
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }
    let warmUpEnd = cpuNow() + 0.1
    while cpuNow() < warmUpEnd { try body() }
    var calls = 0
    let start = cpuNow()
    while cpuNow() - start < seconds {
        for _ in 0..<16 { try body() }
        calls += 16
    }
    return Double(calls) / (cpuNow() - start)
}
