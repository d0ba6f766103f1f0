import Coordinator
import FleetProtocol
import FleetZeroMQTransport
import Foundation
import Logging
import ZeroMQ

/// `signfleet-bench ingest-wire [--devices D] [--items N] [--batch B] [--rate R] [--seconds S] [--verification every|payload]
/// [--transport plaintext|curve] [--slow-reader N]`:
/// sync ingest over real ZeroMQ — D devices, each a `FleetClient` (DEALER) on its own socket,
/// pushing to the coordinator's `FleetServer` (ROUTER) and `SyncIngest` in this process, over
/// TCP on 127.0.0.1. First closed loop (each device pushes its items in order, as fast as acks
/// come back), then open loop at R envelopes/s offered (default 5,000) for S seconds with p50/p99
/// ack latency counted from each push's scheduled time. The clients run in this process, so
/// they share the 2 cores with the server: the figures are a floor of what the coordinator
/// alone would do. Metric names carry `.payload_verify` under `--verification payload` and
/// `_curve` (`ingest.zmq_curve…`) under `--transport curve`: every connection CURVE-encrypted and
/// authenticated through the ZAP handler, each device's key bound at enrollment. With
/// `--slow-reader N`, one more peer, a process of its own (`signfleet-bench flood`), sends N
/// heartbeats during the open-loop phase, as fast as its socket takes them, and never reads a
/// reply (issue #13's hostile peer): only the open loop runs, and its metric names carry `.slow_reader`.
func ingestWireBenchmark(_ arguments: [String]) async throws {
    func option(_ name: String) -> Double? {
        guard let i = arguments.firstIndex(of: name), i + 1 < arguments.count else { return nil }
        return Double(arguments[i + 1])
    }
    let devices = Int(option("--devices") ?? 100)
    let items = Int(option("--items") ?? 4000)
    let batch = Int(option("--batch") ?? 10)
    let rate = option("--rate") ?? 5000
    let seconds = option("--seconds") ?? 4
    let verificationName = arguments.firstIndex(of: "--verification").flatMap { $0 + 1 < arguments.count ? arguments[$0 + 1] : nil }
    guard let verification = IngestVerification(rawValue: verificationName ?? "every") else {
        throw BenchError("--verification takes every or payload")
    }
    let transportName = arguments.firstIndex(of: "--transport").flatMap { $0 + 1 < arguments.count ? arguments[$0 + 1] : nil }
    guard ["plaintext", "curve", nil].contains(transportName) else { throw BenchError("--transport takes plaintext or curve") }
    let curve = transportName == "curve"
    let slowReaderMessages = Int(option("--slow-reader") ?? 0)
    let mode = (curve ? "_curve" : "") + (verification == .everySignature ? "" : ".payload_verify")
        + (slowReaderMessages > 0 ? ".slow_reader" : "")
    let bench = "ingest"
    let root = NSTemporaryDirectory() + "signfleet-bench-wire-" + UUID().uuidString
    try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: root) }
    let base = try await IngestBench.realItem(directory: root)

    var logger = Logger(label: "ingest-wire")
    logger.logLevel = .critical
    let context = try ZMQContext()
    let serverLoop = try ZMQIOLoop(context: context, label: "wire-server")
    let clientLoop = try ZMQIOLoop(context: context, label: "wire-clients")

    /// Runs `body` with a served coordinator on a fresh store and connected clients (and, with
    /// `slowReader`, a peer that floods heartbeats and never reads).
    func withWire<T: Sendable>(
        _ name: String, perDevice: Int, slowReader: Int = 0, _ body: @Sendable (IngestRig, [FleetClient], [[SyncPush]]) async throws -> T
    ) async throws -> T {
        let clientKeys = try curve ? (0..<devices).map { _ in try CurveKeyPair.generate() } : nil
        let rig = try await IngestRig(
            path: "\(root)/wire-\(name).sqlite", devices: devices, items: perDevice, base: base, verification: verification,
            curveKeys: clientKeys?.map(\.publicKey))
        var router = RequestRouter()
        rig.services.register(in: &router)
        let serverKeys = try CurveKeyPair.generate()
        let server = FleetServer(
            configuration: FleetServerConfiguration(endpoint: "tcp://127.0.0.1:*", security: curve ? .curve(serverKeys) : .plaintext),
            router: router, loop: serverLoop, logger: logger)
        let endpoint = try await server.bind()
        let serving = Task { try? await server.run() }
        let clients = rig.forgers.enumerated().map { index, forger in
            let security: ClientSecurity = clientKeys.map { .curve(serverKey: serverKeys.publicKey, keys: $0[index]) } ?? .plaintext
            return FleetClient(
                configuration: FleetClientConfiguration(
                    endpoint: endpoint, deviceID: forger.id, security: security, requestTimeout: .seconds(30), maxAttempts: 1),
                loop: clientLoop, logger: logger)
        }
        let connections = clients.map { client in Task { await client.run() } }
        // The slow reader is a process of its own (`signfleet-bench flood`), as a hostile peer is:
        // in this process its sends would compete with the honest clients for this process's threads.
        var flooder: Process?
        if slowReader > 0 {
            let process = Process()
            // At the lowest CPU priority: on this 2-core machine the flooder's own sending would
            // otherwise be charged to the coordinator (a real attacker sends from its own machine).
            process.executableURL = URL(fileURLWithPath: "/usr/bin/nice")
            process.arguments =
                ["-n", "19", CommandLine.arguments[0], "flood", "--endpoint", endpoint, "--count", "\(slowReader)"]
                + (curve ? ["--server-key", Z85.encode(serverKeys.publicKey) ?? ""] : [])
            process.standardOutput = FileHandle.nullDevice
            try process.run()
            flooder = process
        }
        defer {
            for connection in connections { connection.cancel() }
            serving.cancel()
        }
        let result = try await body(rig, clients, rig.pushes(batch: batch))
        // Gone before the server closes (libzmq 4.3.4 aborts when a non-reading peer leaves while the ROUTER closes).
        if let flooder {
            flooder.terminate()
            flooder.waitUntilExit()
        }
        return result
    }

    // Closed loop: every device pushes its items in order (not with a slow reader: the open loop is its measure).
    if slowReaderMessages == 0 {
        let perDevice = max(batch, items / devices)
        let closed = try await withWire("closed", perDevice: perDevice) { rig, clients, pushes in
            let start = ContinuousClock.now
            let applied = try await withThrowingTaskGroup(of: Int.self) { group in
                for (index, devicePushes) in pushes.enumerated() {
                    group.addTask {
                        var applied = 0
                        for push in devicePushes {
                            let ack = try await clients[index].request(push)
                            applied += ack.results.filter { $0.outcome == .applied }.count
                        }
                        return applied
                    }
                }
                return try await group.reduce(0, +)
            }
            let commits = await rig.services.ingest.commitCounts()
            return (Double(applied) / IngestBench.seconds(start.duration(to: .now)), applied, commits)
        }
        guard closed.1 == devices * perDevice else { fatalError("ingest-wire: \(closed.1) of \(devices * perDevice) items applied") }
        Report.emit(bench, "ingest.zmq\(mode).devices\(devices).envelopes_per_s", closed.0, "ops/s")
        Report.emit(bench, "ingest.zmq\(mode).devices\(devices).pushes_per_commit", Double(closed.2.pushes) / Double(max(1, closed.2.transactions)), "ratio")
    }

    // Open loop at `rate` offered.
    let totalPushes = max(devices, Int(rate * seconds) / batch)
    let openPerDevice = (totalPushes + devices - 1) / devices * batch
    let (achieved, latencies) = try await withWire("open", perDevice: openPerDevice, slowReader: slowReaderMessages) { _, clients, pushes in
        let interval = Double(batch) / rate
        let start = ContinuousClock.now + .milliseconds(200)
        let latencies = try await withThrowingTaskGroup(of: [Double].self) { group in
            for (index, devicePushes) in pushes.enumerated() {
                group.addTask {
                    var latencies: [Double] = []
                    for (j, push) in devicePushes.enumerated() {
                        let scheduled = start + .seconds(Double(j * devices + index) * interval)
                        try await Task.sleep(until: scheduled, clock: .continuous)
                        _ = try await clients[index].request(push)
                        latencies.append(IngestBench.seconds(scheduled.duration(to: .now)) * 1000)
                    }
                    return latencies
                }
            }
            return try await group.reduce(into: [Double]()) { $0 += $1 }.sorted()
        }
        let achieved = Double(pushes.reduce(0) { $0 + $1.count } * batch) / IngestBench.seconds(start.duration(to: .now))
        return (achieved, latencies)
    }
    let label = "\(Int(rate))"
    Report.emit(bench, "ingest.zmq\(mode).offered_envelopes_per_s_at\(label)", rate, "ops/s")
    Report.emit(bench, "ingest.zmq\(mode).achieved_envelopes_per_s_at\(label)", achieved, "ops/s")
    Report.emit(bench, "ingest.zmq\(mode).p50_ms_at\(label)", IngestBench.percentile(latencies, 0.50), "ms")
    Report.emit(bench, "ingest.zmq\(mode).p99_ms_at\(label)", IngestBench.percentile(latencies, 0.99), "ms")
    await serverLoop.shutdown()
    await clientLoop.shutdown()
    context.shutdown()
}

/// `signfleet-bench flood --endpoint E --count N [--server-key Z85]`: the slow reader of
/// `ingest-wire --slow-reader`. Sends N heartbeats as fast as its socket takes them, never reads a
/// reply, then holds the connection until it is terminated.
func floodBenchmark(_ arguments: [String]) async throws {
    func value(_ name: String) -> String? {
        guard let i = arguments.firstIndex(of: name), i + 1 < arguments.count else { return nil }
        return arguments[i + 1]
    }
    guard let endpoint = value("--endpoint"), let count = value("--count").flatMap(Int.init), count > 0 else {
        throw BenchError("flood needs --endpoint E --count N")
    }
    let context = try ZMQContext()
    let loop = try ZMQIOLoop(context: context, label: "flooder")
    var options = SocketOptions()
    if let key = value("--server-key") {
        guard let serverKey = Z85.decode(key) else { throw BenchError("--server-key is not a Z85 key") }
        options.curve = .client(serverKey: serverKey, keys: try CurveKeyPair.generate())
    } else {
        options.routingID = Array("slow-reader".utf8)
    }
    // Small queues on its side, so the coordinator's queue to it fills as soon as possible.
    options.receiveHighWaterMark = 100
    options.receiveBufferLimit = 100
    options.sendHighWaterMark = Int32(clamping: count + 100)
    let socket = try await loop.makeSocket(.dealer, options: options)
    try await socket.connect(endpoint)
    let codec = WireCodec()
    for id in 1...count {
        try await socket.send(try codec.encode(Heartbeat(), header: MessageHeader(type: Heartbeat.messageType, id: UInt64(id))))
    }
    while true { try await Task.sleep(for: .seconds(3600)) }
}
