import Coordinator
import FleetProtocol
import FleetZeroMQTransport
import Foundation
import Logging
import Metrics
import Synchronization
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
/// With `--crowd N` (CURVE only), a process of its own (`signfleet-bench crowd`) opens N connections
/// with fresh keys one second into the open loop, each saying `hello` and sending one `auth.token`
/// with wrong credentials, holds them `--crowd-hold` seconds (default 2) and closes them (issue #31's
/// many peers): the open loop runs once without the crowd (`.crowd_reference`) and once with it
/// (`.crowd`), and the process's resident memory is reported before the crowd, at its peak and
/// 10 s after the crowd left; `--keep-memory` turns the server's memory return off (`.keep_memory`).
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
    guard let crowd = Int(exactly: option("--crowd") ?? 0), (0...100_000).contains(crowd) else {
        throw BenchError("--crowd takes a whole number of peers from 0 to 100,000")
    }
    let crowdHold = option("--crowd-hold") ?? 2
    // `--keep-memory`: the server never returns freed memory (the comparison for its memory return).
    let keepMemory = arguments.contains("--keep-memory")
    guard crowdHold.isFinite, (0...600).contains(crowdHold) else { throw BenchError("--crowd-hold takes 0 to 600 seconds") }
    guard crowd == 0 || curve else { throw BenchError("--crowd needs --transport curve (peers are told apart by their keys)") }
    if crowd > 0 { OpenFileLimit.raiseToHardLimit() }
    // `--split`: the closed loop's clients run in a process of their own (`ingest-clients`) on the
    // CPU given by `--clients-cpu` (default 1), so that their half of the encryption is not charged
    // to the coordinator; run this process with `taskset -c 0` to give the coordinator one core.
    let split = arguments.contains("--split")
    guard let clientsCPU = Int(exactly: option("--clients-cpu") ?? 1), (0...1024).contains(clientsCPU) else {
        throw BenchError("--clients-cpu takes a whole number from 0 to 1024")
    }
    let mode = (split ? ".split" : "") + (curve ? "_curve" : "") + (verification == .everySignature ? "" : ".payload_verify")
        + (slowReaderMessages > 0 ? ".slow_reader" : "") + (crowd > 0 ? ".crowd\(crowd)" : "") + (keepMemory ? ".keep_memory" : "")
    let bench = "ingest"
    let root = NSTemporaryDirectory() + "signfleet-bench-wire-" + UUID().uuidString
    try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: root) }
    let base = try await IngestBench.realItem(directory: root)

    var logger = Logger(label: "ingest-wire")
    logger.logLevel = .critical
    // The clients have a libzmq context (and so I/O threads) of their own, as devices in other
    // processes do: with one context, one I/O thread would encrypt and decrypt for both sides.
    guard let serverIOThreads = Int(exactly: option("--server-io-threads") ?? 1), (0...1024).contains(serverIOThreads) else {
        throw BenchError("--server-io-threads takes a whole number from 0 to 1024")
    }
    let context = try ZMQContext(ioThreads: serverIOThreads)
    let clientContext = try ZMQContext()
    let serverLoop = try ZMQIOLoop(context: context, label: "wire-server")
    let clientLoop = try ZMQIOLoop(context: clientContext, label: "wire-clients")

    /// Runs `body` with a served coordinator on a fresh store and connected clients (none with
    /// `inProcessClients: false`: the split closed loop starts its own process). With
    /// `slowReader`, `startFlood` starts a peer that floods heartbeats from the wall-clock time it
    /// is given and never reads (a no-op without).
    func withWire<T: Sendable>(
        _ name: String, perDevice: Int, slowReader: Int = 0, crowdPeers: Int = 0, inProcessClients: Bool = true,
        _ body: @Sendable (WireSetup) async throws -> T
    ) async throws -> T {
        let clientKeys = try curve ? (0..<devices).map { _ in try CurveKeyPair.generate() } : nil
        let rig = try await IngestRig(
            path: "\(root)/wire-\(name).sqlite", devices: devices, items: perDevice, base: base, verification: verification,
            curveKeys: clientKeys?.map(\.publicKey))
        var router = RequestRouter()
        rig.services.register(in: &router)
        let serverKeys = try CurveKeyPair.generate()
        var serverConfiguration = FleetServerConfiguration(endpoint: "tcp://127.0.0.1:*", security: curve ? .curve(serverKeys) : .plaintext)
        if keepMemory { serverConfiguration.memoryReturn = nil }
        let server = FleetServer(
            configuration: serverConfiguration,
            router: router, loop: serverLoop, logger: logger,
            metricsFactory: timelineWanted ? CountingMetrics.shared : NOOPMetricsHandler.instance)
        let endpoint = try await server.bind()
        let serving = Task { try? await server.run() }
        let clients: [FleetClient] = !inProcessClients ? [] : rig.forgers.enumerated().map { index, forger in
            let security: ClientSecurity = clientKeys.map { .curve(serverKey: serverKeys.publicKey, keys: $0[index]) } ?? .plaintext
            return FleetClient(
                configuration: FleetClientConfiguration(
                    endpoint: endpoint, deviceID: forger.id, security: security, requestTimeout: .seconds(30), maxAttempts: 1),
                loop: clientLoop, logger: logger)
        }
        let connections = clients.map { client in Task { await client.run() } }
        // The slow reader is a process of its own (`signfleet-bench flood`), as a hostile peer is:
        // in this process its sends would compete with the honest clients for this process's threads.
        let flooder = Mutex<Process?>(nil)
        let startFlood: @Sendable (Date) throws -> Void = { at in
            guard slowReader > 0 || crowdPeers > 0 else { return }
            let process = Process()
            // At the lowest CPU priority: on this 2-core machine the flooder's own sending would
            // otherwise be charged to the coordinator (a real attacker sends from its own machine).
            process.executableURL = URL(fileURLWithPath: "/usr/bin/chrt")
            let peer =
                slowReader > 0
                ? ["flood", "--count", "\(slowReader)"] : ["crowd", "--count", "\(crowdPeers)", "--hold", "\(crowdHold)"]
            process.arguments =
                ["--idle", "0", CommandLine.arguments[0]] + peer
                + ["--endpoint", endpoint, "--at-unix-ms", "\(Int64(at.timeIntervalSince1970 * 1000))"]
                + (curve ? ["--server-key", Z85.encode(serverKeys.publicKey) ?? ""] : [])
            process.standardOutput = FileHandle.nullDevice
            try process.run()
            flooder.withLock { $0 = process }
        }
        defer {
            for connection in connections { connection.cancel() }
            serving.cancel()
        }
        let setup = WireSetup(
            rig: rig, clients: clients, pushes: rig.pushes(batch: batch), startFlood: startFlood, endpoint: endpoint,
            serverKey: curve ? serverKeys.publicKey : nil, clientKeys: clientKeys)
        let result = try await body(setup)
        if crowdPeers > 0, let crowd = flooder.withLock({ $0 }) {
            // The crowd leaves by itself after its hold; memory is read 10 s after it left (the
            // server declares its peers lost after the liveness timeout, 3 heartbeat intervals of
            // about 2 s with 2,000 more peers alive, and returns their memory then).
            while crowd.isRunning { try await Task.sleep(for: .milliseconds(50)) }
            try await Task.sleep(for: .seconds(10))
            MemoryWatch.shared.noteAfter()
            flooder.withLock { $0 = nil }
        }
        // Gone before the server closes (libzmq 4.3.4 aborts when a non-reading peer leaves while the ROUTER closes).
        if let flooder = flooder.withLock({ $0 }) {
            flooder.terminate()
            flooder.waitUntilExit()
        }
        return result
    }

    // Closed loop: every device pushes its items in order (not with a slow reader: the open loop is its measure).
    if slowReaderMessages == 0 && crowd == 0 {
        let perDevice = max(batch, items / devices)
        let closed = try await withWire("closed", perDevice: perDevice, inProcessClients: !split) { setup in
            let (rig, clients, pushes) = (setup.rig, setup.clients, setup.pushes)
            if split {
                let (applied, seconds) = try await runSplitClients(setup, root: root, cpu: clientsCPU)
                return (Double(applied) / seconds, applied, await rig.services.ingest.commitCounts())
            }
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

    if split {
        await serverLoop.shutdown()
        await clientLoop.shutdown()
        context.shutdown()
        clientContext.shutdown()
        return
    }

    // Open loop at `rate` offered. With a slow reader, the same open loop runs first without it
    // (in this process, on a fresh store, just before) as the reference; the flood starts one
    // second into the second one, so its effect falls inside the measured window.
    let totalPushes = max(devices, Int(rate * seconds) / batch)
    let openPerDevice = (totalPushes + devices - 1) / devices * batch
    func openLoop(_ name: String, slowReader: Int, crowdPeers: Int = 0) async throws -> (Double, [Double]) {
        try await withWire(name, perDevice: openPerDevice, slowReader: slowReader, crowdPeers: crowdPeers) { setup in
            let (clients, pushes, startFlood) = (setup.clients, setup.pushes, setup.startFlood)
            let interval = Double(batch) / rate
            let start = ContinuousClock.now + .milliseconds(200)
            if crowdPeers > 0 { MemoryWatch.shared.start() }
            try startFlood(Date().addingTimeInterval(1.2))
            let latencies = try await withThrowingTaskGroup(of: [Double].self) { group in
                for (index, devicePushes) in pushes.enumerated() {
                    group.addTask {
                        var latencies: [Double] = []
                        var timeline: [(Double, Double)] = []
                        for (j, push) in devicePushes.enumerated() {
                            let offset = Double(j * devices + index) * interval
                            let scheduled = start + .seconds(offset)
                            try await Task.sleep(until: scheduled, clock: .continuous)
                            _ = try await clients[index].request(push)
                            let latency = IngestBench.seconds(scheduled.duration(to: .now)) * 1000
                            latencies.append(latency)
                            timeline.append((offset, latency))
                        }
                        if timelineWanted { TimelineLog.shared.add(timeline) }
                        return latencies
                    }
                }
                return try await group.reduce(into: [Double]()) { $0 += $1 }.sorted()
            }
            let achieved = Double(pushes.reduce(0) { $0 + $1.count } * batch) / IngestBench.seconds(start.duration(to: .now))
            if timelineWanted {
                FileHandle.standardError.write(Data("== open loop \(name)\n".utf8))
                TimelineLog.shared.print()
                CountingMetrics.shared.print(since: start)
            }
            return (achieved, latencies)
        }
    }
    let label = "\(Int(rate))"
    func emitOpenLoop(_ mode: String, _ result: (Double, [Double])) {
        Report.emit(bench, "ingest.zmq\(mode).offered_envelopes_per_s_at\(label)", rate, "ops/s")
        Report.emit(bench, "ingest.zmq\(mode).achieved_envelopes_per_s_at\(label)", result.0, "ops/s")
        Report.emit(bench, "ingest.zmq\(mode).p50_ms_at\(label)", IngestBench.percentile(result.1, 0.50), "ms")
        Report.emit(bench, "ingest.zmq\(mode).p99_ms_at\(label)", IngestBench.percentile(result.1, 0.99), "ms")
    }
    if slowReaderMessages > 0 {
        emitOpenLoop(mode.replacingOccurrences(of: ".slow_reader", with: ".slow_reader_reference"), try await openLoop("open-reference", slowReader: 0))
    }
    if crowd > 0 {
        emitOpenLoop(mode.replacingOccurrences(of: ".crowd\(crowd)", with: ".crowd_reference"), try await openLoop("open-reference", slowReader: 0))
    }
    emitOpenLoop(mode, try await openLoop("open", slowReader: slowReaderMessages, crowdPeers: crowd))
    if crowd > 0 {
        let memory = MemoryWatch.shared.figures()
        Report.emit(bench, "ingest.zmq\(mode).rss_mb_before", memory.before, "MB")
        Report.emit(bench, "ingest.zmq\(mode).rss_mb_peak", memory.peak, "MB")
        Report.emit(bench, "ingest.zmq\(mode).rss_mb_after", memory.after, "MB")
    }
    await serverLoop.shutdown()
    await clientLoop.shutdown()
    context.shutdown()
    clientContext.shutdown()
}

/// `signfleet-bench flood --endpoint E --count N [--at-unix-ms T] [--server-key Z85]`: the slow reader of
/// `ingest-wire --slow-reader`. Connects, waits until wall-clock time T (Unix milliseconds), sends N
/// heartbeats as fast as its socket takes them, never reads a reply, then holds the connection until
/// it is terminated.
func floodBenchmark(_ arguments: [String]) async throws {
    func value(_ name: String) -> String? {
        guard let i = arguments.firstIndex(of: name), i + 1 < arguments.count else { return nil }
        return arguments[i + 1]
    }
    guard let endpoint = value("--endpoint"), let count = value("--count").flatMap(Int.init), count > 0 else {
        throw BenchError("flood needs --endpoint E --count N")
    }
    // The cheapest sender there is: one socket driven synchronously from this thread, the same
    // bytes each time with the next id. What the flood costs the coordinator is what is measured;
    // on this shared 2-core machine the flooder's own sending is charged to it too, so it is kept
    // as small as it can be (a real attacker sends from another machine).
    let context = try ZMQContext()
    let socket = try Socket(context: context, type: .dealer)
    var options = SocketOptions()
    if let key = value("--server-key") {
        guard let serverKey = Z85.decode(key) else { throw BenchError("--server-key is not a Z85 key") }
        options.curve = .client(serverKey: serverKey, keys: try CurveKeyPair.generate())
    } else {
        options.routingID = Array("slow-reader".utf8)
    }
    // Small queues on its side, so the coordinator's queue to it fills as soon as possible.
    options.receiveHighWaterMark = 100
    options.sendHighWaterMark = Int32(clamping: count + 100)
    try socket.apply(options)
    try socket.connect(endpoint)
    if let at = value("--at-unix-ms").flatMap(Int64.init) {
        let wait = Double(at) / 1000 - Date().timeIntervalSince1970
        if wait > 0 { try await Task.sleep(for: .seconds(wait)) }
    }
    let codec = WireCodec()
    var frames = try codec.encode(Heartbeat(), header: MessageHeader(type: Heartbeat.messageType, id: 1))
    for id in 1...count {
        if id % 1000 == 1 {
            frames = try codec.encode(Heartbeat(), header: MessageHeader(type: Heartbeat.messageType, id: UInt64(id)))
        }
        _ = try socket.send(frames: frames)
    }
    while true { try await Task.sleep(for: .seconds(3600)) }
}

/// `signfleet-bench crowd --endpoint E --server-key Z85 --count N [--hold S] [--at-unix-ms T]`: the crowd
/// of `ingest-wire --crowd`. At wall-clock time T opens N DEALERs, each with a fresh CURVE key, each
/// saying `hello` and asking `auth.token` with credentials that do not exist (what a peer can do before
/// it has any), never reading a reply, holds the connections S seconds (default 2), closes them all
/// and exits.
func crowdBenchmark(_ arguments: [String]) async throws {
    func value(_ name: String) -> String? {
        guard let i = arguments.firstIndex(of: name), i + 1 < arguments.count else { return nil }
        return arguments[i + 1]
    }
    guard let endpoint = value("--endpoint"), let count = value("--count").flatMap(Int.init), count > 0,
        let serverKey = value("--server-key").flatMap(Z85.decode)
    else { throw BenchError("crowd needs --endpoint E --server-key Z85 --count N") }
    let hold = value("--hold").flatMap(Double.init) ?? 2
    OpenFileLimit.raiseToHardLimit()
    let context = try ZMQContext(maxSockets: count + 16)
    var sockets: [Socket] = []
    if let at = value("--at-unix-ms").flatMap(Int64.init) {
        let wait = Double(at) / 1000 - Date().timeIntervalSince1970
        if wait > 0 { try await Task.sleep(for: .seconds(wait)) }
    }
    let codec = WireCodec()
    for n in 0..<count {
        let socket = try Socket(context: context, type: .dealer)
        var options = SocketOptions()
        options.curve = .client(serverKey: serverKey, keys: try CurveKeyPair.generate())
        options.linger = 0
        try socket.apply(options)
        try socket.connect(endpoint)
        _ = try socket.send(frames: try codec.encode(
            Hello(deviceID: "crowd-\(n)", client: "signfleet-bench-crowd"), header: MessageHeader(type: Hello.messageType, id: 1)))
        _ = try socket.send(frames: try codec.encode(
            AccessTokenRequest(email: "crowd-\(n)@crowd.invalid", secret: "not-a-secret"),
            header: MessageHeader(type: AccessTokenRequest.messageType, id: 2)))
        sockets.append(socket)
    }
    try await Task.sleep(for: .seconds(hold))
    for socket in sockets { socket.close() }
    context.shutdown()
}

/// `SIGNFLEET_BENCH_TIMELINE=1`: the open loop's worst and median ack latency per 250 ms of its
/// schedule, on stderr, to see when a p99 is made (e.g. the first moments of a flood).
let timelineWanted = ProcessInfo.processInfo.environment["SIGNFLEET_BENCH_TIMELINE"] == "1"

final class TimelineLog: @unchecked Sendable {
    static let shared = TimelineLog()
    private let lock = NSLock()
    private var points: [(Double, Double)] = []
    func add(_ more: [(Double, Double)]) { lock.withLock { points += more } }
    func print() {
        let buckets = Dictionary(grouping: lock.withLock { defer { points = [] }; return points }) { Int($0.0 / 0.25) }
        for key in buckets.keys.sorted() {
            let latencies = buckets[key]!.map(\.1).sorted()
            FileHandle.standardError.write(Data(String(
                format: "t=%5.2fs n=%4d p50=%7.1f ms max=%7.1f ms\n", Double(key) * 0.25, latencies.count,
                latencies[latencies.count / 2], latencies.last!).utf8))
        }
    }
}

/// With `SIGNFLEET_BENCH_TIMELINE=1`: the server's counters (dropped, cut, answered), each with
/// when it first and last moved, to see what the server did during a flood.
final class CountingMetrics: MetricsFactory, @unchecked Sendable {
    static let shared = CountingMetrics()
    private let lock = NSLock()
    private var counts: [String: (Int64, ContinuousClock.Instant, ContinuousClock.Instant)] = [:]

    final class Handler: CounterHandler, @unchecked Sendable {
        let key: String
        let owner: CountingMetrics
        init(key: String, owner: CountingMetrics) { self.key = key; self.owner = owner }
        func increment(by amount: Int64) { owner.add(key, amount) }
        func reset() {}
    }
    func add(_ key: String, _ amount: Int64) {
        let now = ContinuousClock.now
        lock.withLock {
            let old = counts[key] ?? (0, now, now)
            counts[key] = (old.0 + amount, old.1, now)
        }
    }
    func print(since start: ContinuousClock.Instant) {
        for (key, value) in lock.withLock({ counts }).sorted(by: { $0.key < $1.key }) {
            FileHandle.standardError.write(Data(String(
                format: "%@ %lld first=%.3fs last=%.3fs\n", key, value.0,
                IngestBench.seconds(start.duration(to: value.1)), IngestBench.seconds(start.duration(to: value.2))).utf8))
        }
    }
    func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler {
        Handler(key: label + dimensions.map { "\($0.0)=\($0.1)" }.joined(separator: ","), owner: self)
    }
    func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler {
        NOOPMetricsHandler.instance.makeRecorder(label: label, dimensions: dimensions, aggregate: aggregate)
    }
    func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler {
        NOOPMetricsHandler.instance.makeTimer(label: label, dimensions: dimensions)
    }
    func destroyCounter(_ handler: any CounterHandler) {}
    func destroyRecorder(_ handler: any RecorderHandler) {}
    func destroyTimer(_ handler: any TimerHandler) {}
}

/// The process's resident memory (VmRSS) for `ingest-wire --crowd`: before the crowd, the peak
/// while it is connected (sampled every 100 ms) and after it left.
final class MemoryWatch: @unchecked Sendable {
    static let shared = MemoryWatch()
    private let lock = NSLock()
    private var before = 0.0, peak = 0.0, after = 0.0
    private var sampler: Task<Void, Never>?

    static func residentMB() -> Double {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
            let kB = line.split(separator: " ").dropFirst().first.flatMap({ Double($0) })
        else { return 0 }
        return kB / 1024
    }

    func start() {
        let now = Self.residentMB()
        lock.withLock { (before, peak) = (now, now) }
        sampler = Task.detached { [self] in
            while !Task.isCancelled {
                let now = Self.residentMB()
                lock.withLock { peak = max(peak, now) }
                try? await Task.sleep(for: .milliseconds(100))
            }
        }
    }

    func noteAfter() {
        sampler?.cancel()
        let now = Self.residentMB()
        lock.withLock { after = now }
    }

    func figures() -> (before: Double, peak: Double, after: Double) { lock.withLock { (before, peak, after) } }
}
