import Coordinator
import FleetProtocol
import Foundation
import Hummingbird
import Logging
import Synchronization
import Foundation

/// `signfleet-bench connect [--rate R] [--seconds S] [--devices D]`: Connect keeping up with
/// ingest (docs/webhooks.md). Envelopes signed offline (one in-person signer each: five events —
/// envelope-sent, recipient-sent, -delivered, -completed, envelope-completed) are ingested open
/// loop at R a second (default 1,000) for S seconds (default 5) by D devices (default 100), in
/// pushes of one, into a SQLite store whose account has one configuration asking for every event,
/// HMAC on, pointing at a local listener (hummingbird, in this process) that answers 200.
///
/// Figures: envelopes ingested and events delivered per second; the lag from an envelope's commit
/// (its push's ack) to each of its events' arrival at the listener, p50/p99/max; and whether the
/// outbox drained within 30 s of the last push. Reference in the same run: the same open-loop
/// ingest with no configuration (ack p99 and achieved rate), so the cost of writing the outbox and
/// delivering it shows as a ratio.
func connectBenchmark(_ arguments: [String]) async throws {
    let options = BenchOptions(arguments: arguments)
    let rate = try options.number("--rate", default: 1000, range: 1...100_000)
    let seconds = try options.number("--seconds", default: 5, range: 0.5...600)
    let devices = try options.integer("--devices", default: 100, range: 1...10_000)
    let claimAhead = try options.integer("--claim-ahead", default: ConnectPublisherConfiguration().claimAhead, range: 0...64)
    let bench = "connect"
    let root = NSTemporaryDirectory() + "signfleet-bench-connect-" + UUID().uuidString
    try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: root) }
    let base = try await IngestBench.realItem(directory: root)
    let perDevice = max(1, Int((rate * seconds).rounded(.up)) / devices)

    /// Open-loop ingest: push j of device i at start + (j * devices + i) / rate; the ack instant of each envelope.
    func ingest(_ rig: IngestRig) async throws -> (acks: [String: ContinuousClock.Instant], p99: Double, achieved: Double) {
        let pushes = rig.pushes(batch: 1)
        let start = ContinuousClock.now + .milliseconds(50)
        let results = try await withThrowingTaskGroup(of: [(String, ContinuousClock.Instant, Double)].self) { group in
            for (index, devicePushes) in pushes.enumerated() {
                group.addTask {
                    var out: [(String, ContinuousClock.Instant, Double)] = []
                    for (j, push) in devicePushes.enumerated() {
                        let scheduled = start + .seconds(Double(j * devices + index) / rate)
                        try await Task.sleep(until: scheduled, clock: .continuous)
                        let ack = try await rig.services.ingest.apply(push, routingID: rig.forgers[index].id)
                        let now = ContinuousClock.now
                        for result in ack.results where result.outcome == .applied {
                            out.append((result.envelopeID ?? "", now, IngestBench.seconds(scheduled.duration(to: now)) * 1000))
                        }
                    }
                    return out
                }
            }
            return try await group.reduce(into: []) { $0 += $1 }
        }
        guard results.count == devices * perDevice else { throw BenchError("connect: \(results.count) of \(devices * perDevice) envelopes applied") }
        let achieved = Double(results.count) / IngestBench.seconds(start.duration(to: .now))
        let latencies = results.map(\.2).sorted()
        return (Dictionary(results.map { ($0.0, $0.1) }, uniquingKeysWith: { first, _ in first }), IngestBench.percentile(latencies, 0.99), achieved)
    }

    // The reference: the same ingest, no configuration.
    let reference = try await ingest(try await IngestRig(path: "\(root)/reference.sqlite", devices: devices, items: perDevice, base: base))
    Report.emit(bench, "ref.ingest_p99_ms", reference.p99, "ms")
    Report.emit(bench, "ref.ingest_envelopes_per_s", reference.achieved, "ops/s")

    // The listener: records each message's envelope id and arrival.
    let arrivals = Mutex<[(String, ContinuousClock.Instant)]>([])
    let router = Router()
    router.post("hook") { request, _ -> HTTPResponse.Status in
        let body = try await request.body.collect(upTo: 1 << 20)
        let now = ContinuousClock.now
        guard let json = try? JSONSerialization.jsonObject(with: Data(buffer: body)) as? [String: Any] else { return .ok }
        let envelope = (json["data"] as? [String: Any])?["envelopeId"] as? String ?? ""
        arrivals.withLock { $0.append((envelope, now)) }
        return .ok
    }
    let (ports, announce) = AsyncStream<Int>.makeStream()
    var quiet = Logger(label: "bench-listener")
    quiet.logLevel = .critical
    let application = Application(
        router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
        onServerRunning: { announce.yield($0.localAddress?.port ?? 0) }, logger: quiet)
    let listening = Task { try await application.runService() }
    var portIterator = ports.makeAsyncIterator()
    guard let port = await portIterator.next() else { throw BenchError("connect: the listener did not start") }

    let rig = try await IngestRig(path: "\(root)/connect.sqlite", devices: devices, items: perDevice, base: base)
    _ = try await rig.services.connect.makeKey(accountID: "bench")
    _ = try await rig.services.connect.configure(
        accountID: "bench", name: "bench", url: "http://127.0.0.1:\(port)/hook",
        events: ["envelope-sent", "envelope-delivered", "envelope-completed", "recipient-sent", "recipient-delivered", "recipient-completed"])
    var configuration = ConnectPublisherConfiguration()
    configuration.pollInterval = .milliseconds(100)
    configuration.jitterSeed = 1
    configuration.claimAhead = claimAhead
    let publisher = ConnectPublisher(services: rig.services, configuration: configuration, logger: quiet)
    let publishing = Task { try await publisher.run() }
    let started = ContinuousClock.now
    let measured = try await ingest(rig)
    // Drained: every event arrived (five per envelope), or 30 s passed.
    let expected = measured.acks.count * 5
    let deadline = ContinuousClock.now + .seconds(30)
    while arrivals.withLock({ $0.count }) < expected, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
    let got = arrivals.withLock { $0 }
    let elapsed = IngestBench.seconds(started.duration(to: got.map(\.1).max() ?? .now))
    publishing.cancel()
    _ = try? await publishing.value

    // Reference: bare POSTs of a message-sized body to the same listener, as many at once as the
    // publisher sends to one listener, through the same transport, nothing else running.
    let transport = HTTPConnectTransport()
    let sample = Data(repeating: 0x7B, count: 2048)
    let referenceStart = ContinuousClock.now
    let posts = try await withThrowingTaskGroup(of: Int.self) { group in
        for _ in 0..<configuration.maxInFlightPerListener {
            group.addTask {
                var count = 0
                while referenceStart.duration(to: .now) < .seconds(3) {
                    _ = try await transport.post("http://127.0.0.1:\(port)/hook", body: sample, headers: [(name: "Content-Type", value: "application/json")])
                    count += 1
                }
                return count
            }
        }
        return try await group.reduce(0, +)
    }
    await transport.shutdown()
    Report.emit(bench, "ref.bare_posts_per_s", Double(posts) / IngestBench.seconds(referenceStart.duration(to: .now)), "req/s")
    listening.cancel()

    let lags = got.compactMap { envelope, at in measured.acks[envelope].map { IngestBench.seconds($0.duration(to: at)) * 1000 } }.sorted()
    Report.emit(bench, "connect.offered_envelopes_per_s", rate, "ops/s")
    Report.emit(bench, "connect.ingest_envelopes_per_s", measured.achieved, "ops/s")
    Report.emit(bench, "connect.ingest_p99_ms", measured.p99, "ms")
    Report.emit(bench, "connect.events_delivered_per_s", Double(got.count) / elapsed, "events/s")
    Report.emit(bench, "connect.events_expected", Double(expected), "events")
    Report.emit(bench, "connect.events_delivered", Double(got.count), "events")
    Report.emit(bench, "connect.lag_p50_ms", IngestBench.percentile(lags, 0.50), "ms")
    Report.emit(bench, "connect.lag_p99_ms", IngestBench.percentile(lags, 0.99), "ms")
    Report.emit(bench, "connect.lag_max_ms", lags.last ?? 0, "ms")
    Report.emit(bench, "connect.ingest_p99_vs_reference", measured.p99 / max(reference.p99, 0.001), "ratio")
}
