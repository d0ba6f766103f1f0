// `signfleet-bench rest [--signers K] [--envelopes N] [--seconds S]`: full eSignature REST
// ceremonies per second (defaults: 8 concurrent backends, 2,000 envelopes for the captive-only
// reference, 6 s measured per kind).
//
// The same coordinator as `captive` (SQLite store, hummingbird on 127.0.0.1:0, in this process),
// with its REST API. Three kinds of work alternate in halves on the same server, with the same
// concurrency, each client with its own kept-alive session:
// - the REST ceremony, exactly `signfleet load --workload rest-ceremony`'s (LoadGenerator's
//   RESTCeremonyWorkload): POST envelopes (a one-page PDF as base64, one embedded signer) ->
//   POST views/recipient -> GET the signing page -> POST it with a typed signature (303,
//   event=signing_complete) -> GET documents/combined (the PDF with the signature drawn by qpdf,
//   and the certificate);
// - the captive-only ceremony of `captive` (a device's envelope, synced before measuring: issue a
//   signing URL over the admin API -> open -> finish with a drawn signature);
// - plain GET /health.
// The rate of each kind counts only its own completed ceremonies over its own time; each REST
// step's p50 and p99 are over every measured REST ceremony (closed loop: a step's latency is
// measured from its own start). The run fails unless every finished ceremony, of both kinds,
// completed its envelope in the store.
import Foundation
import LoadGenerator
import Synchronization

func restBenchmark(_ arguments: [String]) async throws {
    let options = BenchOptions(arguments: arguments)
    let concurrency = try options.integer("--signers", default: 8, range: 1...256)
    let envelopes = try options.integer("--envelopes", default: 2000, range: 1...1_000_000)
    let seconds = try options.number("--seconds", default: 6, range: 0.1...3600)
    let bench = "rest"
    let root = NSTemporaryDirectory() + "signfleet-bench-rest-" + UUID().uuidString
    try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: root) }

    let rig = try await CaptiveBenchRig(directory: root)
    let ids = try await rig.syncEnvelopes(envelopes)
    let queue = EnvelopeQueue(ids)
    let signature = try CaptiveBenchClient.signatureJSON()
    let signers = (0..<concurrency).map { _ in CaptiveBenchClient(base: "http://\(rig.http)") }
    let workload = RESTCeremonyWorkload(configuration: RESTCeremonyConfiguration(baseURL: "http://\(rig.http)", token: rig.token))
    var backends: [any LoadDevice] = []
    for index in 0..<concurrency { backends.append(try await workload.makeDevice(index: index, seed: 1)) }
    let ceremonyNumbers = Atomic<Int>(0)
    let steps = Mutex<[String: [Duration]]>([:])
    let measuring = Atomic<Bool>(false)
    let rest: @Sendable (any LoadDevice) async throws -> Bool = { backend in
        let timings = try await backend.perform(ceremony: ceremonyNumbers.wrappingAdd(1, ordering: .relaxed).oldValue)
        if measuring.load(ordering: .relaxed) {
            steps.withLock { for timing in timings { $0[timing.step, default: []].append(timing.duration) } }
        }
        return true
    }

    // Warm-up, not measured: connections, caches, qpdf's first runs.
    for (signer, backend) in zip(signers, backends) {
        try await signer.health()
        if let id = queue.next() { try await signer.ceremony(envelopeID: id, signature: signature) }
        _ = try await rest(backend)
    }
    measuring.store(true, ordering: .relaxed)

    var health = (done: 0, elapsed: 0.0), captive = (done: 0, elapsed: 0.0), full = (done: 0, elapsed: 0.0)
    for _ in 0..<2 {
        let h = try await concurrently(signers, seconds: seconds / 2) { client in try await client.health(); return true }
        health = (health.done + h.done, health.elapsed + h.elapsed)
        let c = try await concurrently(signers, seconds: seconds / 2) { client in
            guard let id = queue.next() else { return false }
            try await client.ceremony(envelopeID: id, signature: signature)
            return true
        }
        captive = (captive.done + c.done, captive.elapsed + c.elapsed)
        let r = try await concurrently(backends, seconds: seconds / 2, rest)
        full = (full.done + r.done, full.elapsed + r.elapsed)
    }
    for backend in backends { await backend.close() }
    let completed = try await rig.completedEnvelopes()
    await rig.tearDown()
    guard full.done > 0, captive.done > 0, health.done > 0 else { throw CaptiveBenchFailure(message: "nothing completed") }
    // Warm-up ceremonies completed envelopes too: 2 per client.
    let expected = full.done + captive.done + 2 * concurrency
    guard completed >= expected else {
        throw CaptiveBenchFailure(message: "\(full.done) REST and \(captive.done) captive ceremonies finished (+ warm-up) but only \(completed) envelopes are completed")
    }
    Report.emit(bench, "rest.ceremonies.k\(concurrency).per_s", Double(full.done) / full.elapsed, "ceremonies/s")
    Report.emit(bench, "rest.captive.k\(concurrency).per_s", Double(captive.done) / captive.elapsed, "ceremonies/s")
    Report.emit(bench, "rest.health.k\(concurrency).per_s", Double(health.done) / health.elapsed, "req/s")
    Report.emit(bench, "rest.ceremonies.k\(concurrency).count", Double(full.done), "ceremonies")
    let measured = steps.withLock { $0 }
    for step in RESTCeremonyWorkload.stepNames {
        let sorted = (measured[step] ?? []).sorted()
        guard !sorted.isEmpty else { continue }
        func milliseconds(_ quantile: Double) -> Double {
            let (whole, atto) = sorted[min(sorted.count - 1, Int((Double(sorted.count) * quantile).rounded(.up)) - 1)].components
            return Double(whole) * 1000 + Double(atto) / 1e15
        }
        Report.emit(bench, "rest.k\(concurrency).\(step).p50_ms", milliseconds(0.5), "ms")
        Report.emit(bench, "rest.k\(concurrency).\(step).p99_ms", milliseconds(0.99), "ms")
    }
    if captive.done + concurrency >= envelopes {
        FileHandle.standardError.write(Data("rest: the \(envelopes) captive envelopes ran out; raise --envelopes\n".utf8))
    }
}
