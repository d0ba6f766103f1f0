import FleetTesting
import Foundation
import Testing

@testable import Fleet

/// Embedded remote signers in a real node run: `signfleet node --plan` against a real
/// `signfleet coordinator` (ZeroMQ, its HTTP signing pages, SQLite); the devices sign each
/// embedded remote signer by captive signing once the envelope has synced.
@Suite(.serialized) struct NodeCaptiveTests {
    @Test(.timeLimit(.minutes(5))) func embeddedRemoteSignersSignByCaptiveSigningAfterSync() async throws {
        let seed = NodeProcessTests.seed
        print("node-captive seed \(seed) (replay with SIGNFLEET_SEED=\(seed))")
        let directory = try NodeProcessTests.temporaryDirectory("node-captive")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = directory + "/coordinator.sqlite"
        let (coordinator, endpoint) = try await NodeProcessTests.coordinator(store: store)
        let serverKey = try await NodeProcessTests.serverKey(of: coordinator)
        defer { Task { await coordinator.terminate() } }
        let behaviour = Self.behaviour
        var plan = NodeProcessTests.plan(
            directory: directory, endpoint: endpoint, devices: 2, seed: seed, behaviour: behaviour,
            connectivity: Connectivity(model: .gilbertElliott(onlineMean: 1, offlineMean: 0.3), startOffline: 0.5), serverKey: serverKey)
        plan.requestTimeout = 2
        let planPath = directory + "/plan.json"
        try NodeProcessTests.write(plan, to: planPath)

        let expected = Self.expectedSigners(plan: plan, behaviour: behaviour)
        let embeddedTotal = expected.values.map(\.embedded).reduce(0, +)
        try #require(embeddedTotal > 0, "seed \(seed) drew no embedded remote signer")

        let node = try ChildProcess.launch(try NodeProcessTests.binary(), ["node", "--plan", planPath], name: "node")
        defer { Task { await node.terminate() } }
        try await node.waitForLine(in: .standardOutput, timeout: .seconds(30)) { NodeProcessTests.stats($0)?.composed == 8 }
        node.signal(SIGUSR1)  // drain: sync what is left, then present the deferred ceremonies
        #expect(try await node.waitForExit(timeout: .seconds(30)) == 0, "\(node.output)")
        let final = try #require(node.lines(.standardOutput).compactMap(NodeProcessTests.stats).last)
        #expect(final.captive == embeddedTotal, "\(final)")

        let events = try HistoryReader.read(path: plan.historyFile).events.filter { $0.op == .captive }
        #expect(!events.contains { $0.type == .fail || $0.type == .info }, "\(events.filter { $0.type != .ok && $0.type != .invoke })")
        try await Self.expectEverySignerSigned(expected, events: events, store: store)
    }

    /// Envelopes synced before their node was killed, their ceremonies not yet done (the first
    /// coordinator has no HTTP listener, so every ceremony fails): the restarted node rebuilds
    /// the ceremonies from its store, asks the coordinator which signers are still to sign, and
    /// has each embedded signer sign exactly once.
    @Test(.timeLimit(.minutes(2))) func ceremoniesOwedBeforeAKillAreRunAfterTheRestart() async throws {
        let seed = NodeProcessTests.seed
        print("node-captive-restart seed \(seed) (replay with SIGNFLEET_SEED=\(seed))")
        let directory = try NodeProcessTests.temporaryDirectory("node-captive-restart")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = directory + "/coordinator.sqlite"
        let (first, endpoint) = try await NodeProcessTests.coordinator(store: store, extra: ["--http", "off"])
        let serverKey = try await NodeProcessTests.serverKey(of: first)
        defer { Task { await first.terminate() } }
        let behaviour = Self.behaviour
        var plan = NodeProcessTests.plan(directory: directory, endpoint: endpoint, devices: 2, seed: seed, behaviour: behaviour, serverKey: serverKey)
        plan.requestTimeout = 2
        let planPath = directory + "/plan.json"
        try NodeProcessTests.write(plan, to: planPath)
        let expected = Self.expectedSigners(plan: plan, behaviour: behaviour)
        let embeddedTotal = expected.values.map(\.embedded).reduce(0, +)
        try #require(embeddedTotal > 0, "seed \(seed) drew no embedded remote signer")

        // First run: everything syncs, no ceremony can complete; killed once all 8 are synced.
        let killed = try ChildProcess.launch(try NodeProcessTests.binary(), ["node", "--plan", planPath], name: "node-1")
        defer { Task { await killed.terminate() } }
        let allSynced: @Sendable (String) -> Bool = { (NodeProcessTests.stats($0)?.synced ?? 0) >= 8 }
        killed.onLines(1, in: .standardOutput, where: allSynced) { killed.signal(SIGKILL) }
        try await killed.waitForLine(in: .standardOutput, timeout: .seconds(60), where: allSynced)
        _ = try await killed.waitForExit(timeout: .seconds(30))
        #expect(killed.lines(.standardOutput).compactMap(NodeProcessTests.stats).allSatisfy { $0.captive == 0 })
        await first.terminate()

        // The coordinator again, on the same endpoint and store, now with its signing pages.
        let (second, _) = try await NodeProcessTests.coordinator(store: store, bind: endpoint)
        defer { Task { await second.terminate() } }
        let restarted = try ChildProcess.launch(try NodeProcessTests.binary(), ["node", "--plan", planPath], name: "node-2")
        defer { Task { await restarted.terminate() } }
        try await restarted.waitForLine(in: .standardOutput, timeout: .seconds(60)) { NodeProcessTests.stats($0)?.captive == embeddedTotal }
        restarted.signal(SIGUSR1)
        #expect(try await restarted.waitForExit(timeout: .seconds(30)) == 0, "\(restarted.output)")

        let events = try HistoryReader.read(path: plan.historyFile).events.filter { $0.op == .captive }
        #expect(!events.contains { $0.type == .fail }, "\(events.filter { $0.type == .fail })")
        try await Self.expectEverySignerSigned(expected, events: events, store: store)
    }

    /// Four builder envelopes per device, with one or two remote signers each, most of them embedded.
    static let behaviour = Behaviour(
        envelopesPerMinute: 600, templateFraction: 0, inPersonSigners: IntRange(0, 1), remoteSigners: IntRange(1, 2),
        embeddedFraction: 0.7, signingDuration: ClosedSpan(0.01, 0.05), cancelRate: 0, declineRate: 0, sync: .whenOnline,
        maxEnvelopes: 4)

    /// What each envelope of the plan should get: its embedded and all its remote signers, from the same pure model.
    static func expectedSigners(plan: NodePlan, behaviour: Behaviour) -> [String: (embedded: Int, remote: Int)] {
        var expected: [String: (embedded: Int, remote: Int)] = [:]
        for device in plan.devices {
            let model = BehaviourModel(behaviour: behaviour, pens: plan.pens, seed: device.seed)
            for number in 1...(behaviour.maxEnvelopes ?? 0) {
                let decision = model.decision(for: number)
                expected["\(device.id)-\(number)"] = (decision.embeddedCount, decision.remoteSigners)
            }
        }
        return expected
    }

    /// Each embedded signer has one `ok captive`, in routing order, and the coordinator's store
    /// has them signed, the next remote signer current and routing respected.
    static func expectEverySignerSigned(
        _ expected: [String: (embedded: Int, remote: Int)], events: [HistoryEvent], store: String
    ) async throws {
        let snapshot = try await ServerSnapshot.read(location: store, store: "coordinator")
        for (transaction, want) in expected.sorted(by: { $0.key < $1.key }) {
            let oks = events.filter { $0.type == .ok && $0.transaction == transaction }
            #expect(oks.compactMap { $0.details?["recipient"] } == (0..<want.embedded).map { "r\($0 + 1)" }, "\(transaction): \(oks)")
            let envelope = try #require(snapshot.envelopes.first { $0.transactionID == transaction }, "\(transaction) synced")
            #expect(oks.allSatisfy { $0.serverEnvelope == envelope.id })
            let recipients = snapshot.recipients[envelope.id] ?? []
            let remote = recipients.filter { $0.recipientID.hasPrefix("r") }.sorted { $0.routingOrder < $1.routingOrder }
            #expect(remote.map(\.status) == (0..<want.remote).map { $0 < want.embedded ? "signed" : ($0 == want.embedded ? "sent" : "created") }, "\(transaction): \(remote)")
            // Everyone signed (in person, then embedded) exactly when every remote signer was embedded.
            #expect((envelope.status == "completed") == (want.embedded == want.remote), "\(transaction) is \(envelope.status)")
            #expect(CheckerAnalysis.routingViolation(status: envelope.status, recipients: recipients) == nil, "\(transaction): \(recipients)")
        }
    }
}
