import DeviceNode
import Envelopes
import Foundation
import SignatureCapture

/// `signfleet-bench device [--seconds S] [--devices N]`: compose + sign (one in-person signer,
/// two tabs: sign here and text) + outbox commit, per second, for one device and for N devices
/// (default 100) in one process, each with its own SQLite store. The reference, measured in the
/// same run, is the signature capture alone (synthesis, ISO record, SVG, binding) for the same
/// envelopes: the ratio shows what the store and the outbox add. N devices use the default
/// durability (`powerLoss`: an fsync per commit).
func deviceBenchmark(_ arguments: [String]) async throws {
    func option(_ name: String) -> Double? {
        guard let i = arguments.firstIndex(of: name), i + 1 < arguments.count else { return nil }
        return Double(arguments[i + 1])
    }
    let seconds = option("--seconds") ?? 3
    let devices = Int(option("--devices") ?? 100)
    let bench = "device"
    let root = NSTemporaryDirectory() + "signfleet-bench-device-" + UUID().uuidString
    try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: root) }

    let user = UserInfo(accountId: "acct", accountName: "Bench", userId: "u", userName: "Ann Host",
                        email: "host@example.com", host: "http://127.0.0.1")
    let accounts = InMemoryAccountService(tokens: ["t": user])

    func openNode(_ index: Int, durability: DeviceConfiguration.Durability = .powerLoss) async throws -> DeviceNode {
        var configuration = DeviceConfiguration(storePath: "\(root)/device-\(index).sqlite", deviceId: "bench-\(index)")
        configuration.durability = durability
        let node = try await DeviceNode.open(configuration: configuration, accountService: accounts)
        try await node.login(accessToken: "t")
        return node
    }

    /// Composes and signs envelopes on `node` until `deadline`; returns how many reached the outbox.
    @Sendable func run(_ node: DeviceNode, index: Int, until deadline: ContinuousClock.Instant) async throws -> Int {
        var done = 0
        var counter = 0
        let signer = SyntheticSigner(seed: UInt64(index) &* 7919)
        while ContinuousClock.now < deadline {
            counter += 1
            let envelope = try SampleEnvelope.inPerson(signers: 1, transactionId: "bench-\(index)-\(counter)")
            let id = try await node.compose(envelope)
            if case .completed(_, .some) = try await node.resumeSigning(envelopeId: id, driver: signer) { done += 1 }
        }
        return done
    }

    // Reference: the capture work of the same envelopes, without store or outbox.
    let document = Array(SamplePDF.make(pages: 2, title: "Agreement"))
    let capturer = SignatureCapturer(pen: .applePencil)
    var signing = 0
    let captureOnly = try measureRate(seconds: seconds) {
        signing += 1
        let signature = try capturer.capture(signer: SignerProfile(seed: UInt64(signing & 15)), signing: signing, fieldID: "sign-1")
        blackHole(SignatureBinding(document: document, signature: signature).canonicalBytes())
        blackHole(signature.svg())
    }
    Report.emit(bench, "capture_only_per_second", captureOnly, "ops/s")

    // One device, with each durability (FULL: fsync per commit; NORMAL: WAL without fsync per commit).
    for (offset, durability) in [DeviceConfiguration.Durability.powerLoss, .processCrash].enumerated() {
        let single = try await openNode(-1 - offset, durability: durability)
        _ = try await run(single, index: 0, until: .now + .milliseconds(300))      // warm-up
        let start = ContinuousClock.now
        let count = try await run(single, index: 0, until: start + .seconds(seconds))
        let elapsed = start.duration(to: .now)
        let singleRate = Double(count) / (Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
        Report.emit(bench, "one_device_\(durability.rawValue)_envelopes_per_second", singleRate, "ops/s")
        Report.emit(bench, "one_device_\(durability.rawValue)_vs_capture_only", singleRate / captureOnly, "ratio")
        let audit = try await single.auditStore()
        Report.emit(bench, "one_device_\(durability.rawValue)_audit_consistent", audit.isConsistent ? 1 : 0, "bool")
        try await single.close()
    }

    // N devices in one process, each its own actor and store.
    var nodes: [DeviceNode] = []
    for index in 1...devices { nodes.append(try await openNode(index)) }
    let manyStart = ContinuousClock.now
    let deadline = manyStart + .seconds(seconds)
    let total = try await withThrowingTaskGroup(of: Int.self) { group in
        for (offset, node) in nodes.enumerated() {
            group.addTask { try await run(node, index: offset + 1, until: deadline) }
        }
        return try await group.reduce(0, +)
    }
    let manyElapsed = manyStart.duration(to: .now)
    let manyRate = Double(total) / (Double(manyElapsed.components.seconds) + Double(manyElapsed.components.attoseconds) / 1e18)
    Report.emit(bench, "\(devices)_devices_envelopes_per_second", manyRate, "ops/s")
    Report.emit(bench, "\(devices)_devices_per_device_per_second", manyRate / Double(devices), "ops/s")
    Report.emit(bench, "cores", Double(ProcessInfo.processInfo.activeProcessorCount), "cores")
    for node in nodes { try await node.close() }
}
