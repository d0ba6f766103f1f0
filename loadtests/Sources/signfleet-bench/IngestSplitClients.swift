import Coordinator
import FleetProtocol
import FleetZeroMQTransport
import Foundation
import Logging
import ZeroMQ

/// What `withWire` hands its body: the served coordinator's rig and the clients' material.
struct WireSetup: Sendable {
    let rig: IngestRig
    /// In-process clients, one per device (empty for the split closed loop).
    let clients: [FleetClient]
    /// Each device's pushes, in order.
    let pushes: [[SyncPush]]
    /// Starts the slow reader at a wall-clock time (a no-op without one).
    let startFlood: @Sendable (Date) throws -> Void
    let endpoint: String
    /// The coordinator's CURVE public key; nil over plain TCP.
    let serverKey: [UInt8]?
    /// Each device's CURVE key pair; nil over plain TCP.
    let clientKeys: [CurveKeyPair]?
}

/// The split closed loop's job file: what the client process needs to act as the rig's devices.
/// Little-endian, length-prefixed: `u32 deviceCount`, then per device `bytes id`, `bytes curveSecret`
/// (empty over plain TCP), `u32 pushCount`, `bytes push body`…; `bytes` is a u32 length and the bytes.
/// Then `bytes endpoint`, `bytes serverKey` (empty over plain TCP).
enum SplitJob {
    static func write(_ setup: WireSetup, to path: String) throws {
        var out: [UInt8] = []
        func u32(_ value: Int) { withUnsafeBytes(of: UInt32(value).littleEndian) { out += $0 } }
        func bytes(_ value: [UInt8]) { u32(value.count); out += value }
        let codec = WireCodec()
        u32(setup.pushes.count)
        for (index, pushes) in setup.pushes.enumerated() {
            bytes(Array(setup.rig.forgers[index].id.utf8))
            bytes(setup.clientKeys?[index].secretKey ?? [])
            u32(pushes.count)
            for push in pushes { bytes(try codec.encodeBody(push)) }
        }
        bytes(Array(setup.endpoint.utf8))
        bytes(setup.serverKey ?? [])
        try Data(out).write(to: URL(fileURLWithPath: path))
    }

    struct Device {
        var id: String
        var curveSecret: [UInt8]
        var pushes: [SyncPush]
    }

    static func read(_ path: String) throws -> (devices: [Device], endpoint: String, serverKey: [UInt8]) {
        let data = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        var at = 0
        func u32() throws -> Int {
            guard at + 4 <= data.count else { throw BenchError("job file \(path) ends early at byte \(at)") }
            defer { at += 4 }
            return Int(UInt32(data[at]) | UInt32(data[at + 1]) << 8 | UInt32(data[at + 2]) << 16 | UInt32(data[at + 3]) << 24)
        }
        func bytes() throws -> [UInt8] {
            let count = try u32()
            guard count <= data.count - at else { throw BenchError("job file \(path): a length of \(count) runs past its end") }
            defer { at += count }
            return Array(data[at..<at + count])
        }
        let codec = WireCodec()
        let header = MessageHeader(type: SyncPush.messageType, id: 1)
        var devices: [Device] = []
        for _ in 0..<(try u32()) {
            let id = String(decoding: try bytes(), as: UTF8.self)
            let secret = try bytes()
            var pushes: [SyncPush] = []
            for _ in 0..<(try u32()) {
                let message = try codec.decode([try codec.encodeHeader(header), try bytes()])
                pushes.append(try codec.decodeBody(SyncPush.self, from: message))
            }
            devices.append(Device(id: id, curveSecret: secret, pushes: pushes))
        }
        return (devices, String(decoding: try bytes(), as: UTF8.self), try bytes())
    }
}

/// Runs the closed loop from a process of its own on CPU `cpu` (`taskset`); returns the items
/// applied and the seconds the client process measured from its first push to its last ack.
func runSplitClients(_ setup: WireSetup, root: String, cpu: Int) async throws -> (Int, Double) {
    let job = "\(root)/split-job.bin"
    try SplitJob.write(setup, to: job)
    let output = "\(root)/split-result.json"
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/taskset")
    process.arguments = ["-c", "\(cpu)", CommandLine.arguments[0], "ingest-clients", "--job", job, "--out", output]
    try process.run()
    // Waited for off the cooperative pool: the coordinator in this process serves meanwhile.
    await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
        Thread.detachNewThread {
            process.waitUntilExit()
            done.resume()
        }
    }
    guard process.terminationStatus == 0 else { throw BenchError("ingest-clients exited with \(process.terminationStatus)") }
    let result = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: output))) as? [String: Double]
    guard let applied = result?["applied"].flatMap({ Int(exactly: $0) }), let seconds = result?["seconds"], seconds.isFinite, seconds > 0
    else {
        throw BenchError("ingest-clients wrote no usable result (a whole number applied, positive seconds) to \(output)")
    }
    return (applied, seconds)
}

/// `signfleet-bench ingest-clients --job PATH --out PATH`: the client side of `ingest-wire --split`.
/// One FleetClient (DEALER) per device of the job, in this process; every device pushes its items
/// in order as fast as acks come back; writes `{"applied": N, "seconds": S}` to the out file.
func ingestClientsBenchmark(_ arguments: [String]) async throws {
    func value(_ name: String) -> String? {
        guard let i = arguments.firstIndex(of: name), i + 1 < arguments.count else { return nil }
        return arguments[i + 1]
    }
    guard let jobPath = value("--job"), let outPath = value("--out") else { throw BenchError("ingest-clients needs --job PATH --out PATH") }
    let job = try SplitJob.read(jobPath)
    var logger = Logger(label: "ingest-clients")
    logger.logLevel = .critical
    let context = try ZMQContext()
    let loop = try ZMQIOLoop(context: context, label: "split-clients")
    let clients = try job.devices.map { device in
        let security: ClientSecurity =
            job.serverKey.isEmpty ? .plaintext : .curve(serverKey: job.serverKey, keys: try CurveKeyPair(secretKey: device.curveSecret))
        return FleetClient(
            configuration: FleetClientConfiguration(
                endpoint: job.endpoint, deviceID: device.id, security: security, requestTimeout: .seconds(30), maxAttempts: 1),
            loop: loop, logger: logger)
    }
    let connections = clients.map { client in Task { await client.run() } }
    let start = ContinuousClock.now
    let applied = try await withThrowingTaskGroup(of: Int.self) { group in
        for (index, device) in job.devices.enumerated() {
            group.addTask {
                var applied = 0
                for push in device.pushes {
                    let ack = try await clients[index].request(push)
                    applied += ack.results.filter { $0.outcome == .applied }.count
                }
                return applied
            }
        }
        return try await group.reduce(0, +)
    }
    let seconds = IngestBench.seconds(start.duration(to: .now))
    for connection in connections { connection.cancel() }
    try JSONSerialization.data(withJSONObject: ["applied": Double(applied), "seconds": seconds]).write(to: URL(fileURLWithPath: outPath))
    await loop.shutdown()
    context.shutdown()
}
