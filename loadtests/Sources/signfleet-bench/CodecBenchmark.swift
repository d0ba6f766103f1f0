// `signfleet-bench codec [--seconds S] [--python PATH] [--reference FILE]`
//
// Encodes and decodes the reference message set with MessagePack and prints
// msg/s and MB/s per message kind. Then runs loadtests/reference/msgpack_bench.py
// (python msgpack, C extension, identical messages) and prints Swift/Python ratios.
import Foundation
import MessagePack

// MARK: Reference messages (identical field names, sizes and content in msgpack_bench.py)

struct BenchHeartbeat: Codable {
    var type: String
    var requestId: UInt64
    var sentAt: Date
}

struct BenchEnvelope: Codable {
    var envelopeId: String
    var seq: UInt64
    var status: String
    var signerName: String
    var createdAt: Date
    var signedAt: Date
    var documentHash: Data
    var biometricHash: Data
    var signature: Data
    var pageCount: Int
}

struct BenchPush: Codable {
    var type: String
    var requestId: UInt64
    var deviceId: String
    var sentAt: Date
    var items: [BenchEnvelope]
}

struct BenchItemResult: Codable {
    var seq: UInt64
    var status: String
    var serverId: String
}

struct BenchAck: Codable {
    var type: String
    var requestId: UInt64
    var lastApplied: UInt64
    var results: [BenchItemResult]
}

/// 64-bit LCG (Knuth's MMIX constants); the Python reference uses the same one.
struct BenchBytes {
    var state: UInt64
    mutating func bytes(_ count: Int) -> Data {
        var out = Data(count: count)
        for i in 0..<count {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            out[i] = UInt8(truncatingIfNeeded: state >> 56)
        }
        return out
    }
}

func benchMessages() -> (push: BenchPush, heartbeat: BenchHeartbeat, ack: BenchAck) {
    var random = BenchBytes(state: 42)
    let base = 1_700_000_000.0
    let items = (0..<10).map { i in
        BenchEnvelope(
            envelopeId: "env-\(String(format: "%08d", 1000 + i))", seq: UInt64(5000 + i), status: "signed",
            signerName: "Signer Number \(i)",
            createdAt: Date(timeIntervalSince1970: base + Double(i)),
            signedAt: Date(timeIntervalSince1970: base + Double(i) + 0.5),
            documentHash: random.bytes(32), biometricHash: random.bytes(32), signature: random.bytes(6144),
            pageCount: 3 + i)
    }
    let push = BenchPush(type: "sync.push", requestId: 123_456_789, deviceId: "device-00042", sentAt: Date(timeIntervalSince1970: base + 20.25), items: items)
    let heartbeat = BenchHeartbeat(type: "heartbeat", requestId: 987_654_321, sentAt: Date(timeIntervalSince1970: base + 30.5))
    let ack = BenchAck(
        type: "sync.ack", requestId: 123_456_789, lastApplied: 5009,
        results: (0..<10).map { BenchItemResult(seq: UInt64(5000 + $0), status: "applied", serverId: "srv-\(String(format: "%08d", 70000 + $0))") })
    return (push, heartbeat, ack)
}

// MARK: Benchmark

func codecBenchmark(_ arguments: [String]) async throws {
    var seconds = 2.0
    var python = ProcessInfo.processInfo.environment["SIGNFLEET_PYTHON"] ?? "python3"
    var reference = "reference/msgpack_bench.py"
    var index = 0
    while index < arguments.count {
        let value = index + 1 < arguments.count ? arguments[index + 1] : ""
        switch arguments[index] {
        case "--seconds": seconds = Double(value) ?? seconds
        case "--python": python = value
        case "--reference": reference = value
        default: print("unknown option \(arguments[index])"); return
        }
        index += 2
    }

    let (push, heartbeat, ack) = benchMessages()
    let encoder = MessagePackEncoder()
    let decoder = MessagePackDecoder()
    var swift: [String: Double] = [:]

    func run<T: Codable>(_ name: String, _ message: T) throws {
        let bytes = try encoder.encode(message)
        let size = Double(bytes.count)
        let encodeRate = try measureRate(seconds: seconds) { blackHole(try encoder.encode(message)) }
        let decodeRate = try measureRate(seconds: seconds) { blackHole(try decoder.decode(T.self, from: bytes)) }
        swift["encode.\(name)"] = encodeRate
        swift["decode.\(name)"] = decodeRate
        Report.emit("codec", "swift.\(name).bytes", size, "B")
        Report.emit("codec", "swift.encode.\(name).msg_per_s", encodeRate, "msg/s")
        Report.emit("codec", "swift.encode.\(name).mb_per_s", encodeRate * size / 1e6, "MB/s")
        Report.emit("codec", "swift.decode.\(name).msg_per_s", decodeRate, "msg/s")
        Report.emit("codec", "swift.decode.\(name).mb_per_s", decodeRate * size / 1e6, "MB/s")
    }
    try run("push", push)
    try run("heartbeat", heartbeat)
    try run("ack", ack)

    // The reference: the same messages through Python's msgpack C extension.
    guard let output = try await runReference(python: python, script: reference, seconds: seconds) else { return }
    print(output, terminator: "")
    for line in output.split(separator: "\n") {
        guard let figure = try? JSONDecoder().decode(Figure.self, from: Data(line.utf8)),
              figure.metric.hasPrefix("python."), figure.metric.hasSuffix(".msg_per_s") else { continue }
        let key = String(figure.metric.dropFirst("python.".count).dropLast(".msg_per_s".count))
        if let mine = swift[key], figure.value > 0 {
            Report.emit("codec", "ratio.\(key).swift_over_python", mine / figure.value, "x")
        }
    }
}

extension Figure: Decodable {}

/// Runs the Python reference, output to a file (no pipe to fill), waiting without blocking a thread.
func runReference(python: String, script: String, seconds: Double) async throws -> String? {
    guard FileManager.default.fileExists(atPath: script) else {
        print("reference script \(script) not found; run from loadtests/ or pass --reference")
        return nil
    }
    let outURL = FileManager.default.temporaryDirectory.appendingPathComponent("codec-ref-\(UUID().uuidString).txt")
    _ = FileManager.default.createFile(atPath: outURL.path, contents: nil)
    defer { try? FileManager.default.removeItem(at: outURL) }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = [python, script, "--seconds", "\(seconds)"]
    process.standardOutput = try FileHandle(forWritingTo: outURL)
    let status: Int32 = await withCheckedContinuation { continuation in
        process.terminationHandler = { continuation.resume(returning: $0.terminationStatus) }
        do { try process.run() } catch {
            process.terminationHandler = nil
            continuation.resume(returning: -1)
        }
    }
    guard status == 0 else {
        print("reference run failed (status \(status)); is python msgpack installed? scripts/install-deps.sh")
        return nil
    }
    return try String(contentsOf: outURL, encoding: .utf8)
}
