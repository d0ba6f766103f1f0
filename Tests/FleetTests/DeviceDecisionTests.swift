import FleetTesting
import Foundation
import Testing

@testable import Fleet

/// The behaviour model: every decision comes from the device's seed and the envelope's number.
@Suite struct DeviceDecisionTests {
    static let seed: UInt64 = testSeed("DeviceDecisionTests")

    static let behaviour = Behaviour(
        envelopesPerMinute: 12, templateFraction: 0.25, inPersonSigners: IntRange(1, 3), remoteSigners: IntRange(0, 2),
        signingDuration: ClosedSpan(1, 4), cancelRate: 0.1, declineRate: 0.2)
    static let pens = ["applePencil": 3, "finger": 1.0]

    @Test func theSameSeedGivesTheSameDecisionsAndAnotherSeedOthers() {
        print("decision seed \(Self.seed) (replay with SIGNFLEET_SEED=\(Self.seed))")
        let model = BehaviourModel(behaviour: Self.behaviour, pens: Self.pens, seed: Self.seed)
        let again = BehaviourModel(behaviour: Self.behaviour, pens: Self.pens, seed: Self.seed)
        let other = BehaviourModel(behaviour: Self.behaviour, pens: Self.pens, seed: Self.seed &+ 1)
        let first = (1...200).map(model.decision(for:))
        #expect(first == (1...200).map(again.decision(for:)))
        #expect(first != (1...200).map(other.decision(for:)))
        // Envelope n's decisions do not depend on the ones before (a restart skips straight to n).
        #expect(model.decision(for: 150) == first[149])
    }

    @Test func embeddedRemoteSignersFollowTheFractionAndLeaveEveryOtherDecisionAsItWas() {
        var embedding = Self.behaviour
        embedding.embeddedFraction = 0.3
        let plain = BehaviourModel(behaviour: Self.behaviour, pens: Self.pens, seed: Self.seed)
        let model = BehaviourModel(behaviour: embedding, pens: Self.pens, seed: Self.seed)
        var remote = 0
        var embedded = 0
        for number in 1...20_000 {
            let decision = model.decision(for: number)
            var without = decision
            without.embeddedRemoteSigners = (0..<decision.remoteSigners).map { _ in false }
            #expect(without == plain.decision(for: number), "envelope \(number), seed \(Self.seed)")
            #expect(decision.embeddedRemoteSigners.count == decision.remoteSigners)
            remote += decision.remoteSigners
            embedded += decision.embeddedCount
        }
        let share = Double(embedded) / Double(remote)
        #expect(abs(share - 0.3) < 0.015, "embedded share \(share) of \(remote) remote signers (seed \(Self.seed))")
        #expect(plain.decision(for: 7).embeddedCount == 0, "fraction 0 embeds nobody")
    }

    @Test func decisionsFollowTheBehaviourStatistics() {
        let model = BehaviourModel(behaviour: Self.behaviour, pens: Self.pens, seed: Self.seed)
        let decisions = (1...40_000).map(model.decision(for:))
        let count = Double(decisions.count)
        let meanGap = decisions.map(\.gap).reduce(0, +) / count
        #expect(abs(meanGap - 5) / 5 < 0.03, "mean gap \(meanGap) s for 12/min (seed \(Self.seed))")
        let cancelled = Double(decisions.filter { $0.outcome == .cancel }.count) / count
        let declined = Double(decisions.filter { if case .decline = $0.outcome { true } else { false } }.count) / count
        #expect(abs(cancelled - 0.1) < 0.01, "cancelled \(cancelled)")
        #expect(abs(declined - 0.9 * 0.2) < 0.01, "declined \(declined)")
        let templates = Double(decisions.filter(\.fromTemplate).count) / count
        #expect(abs(templates - 0.25) < 0.01, "templates \(templates)")
        let fingers = Double(decisions.filter { $0.pen == "finger" }.count) / count
        #expect(abs(fingers - 0.25) < 0.01, "finger \(fingers)")
        #expect(decisions.allSatisfy { (1...3).contains($0.inPersonSigners) && (0...2).contains($0.remoteSigners) })
        #expect(Set(decisions.map(\.inPersonSigners)) == [1, 2, 3])
        #expect(decisions.allSatisfy { $0.signingDurations.allSatisfy { (1...4).contains($0) } })
    }

    @Test func anEnvelopeAlwaysHasARecipient() {
        let behaviour = Behaviour(inPersonSigners: IntRange(0, 1), remoteSigners: IntRange(0, 0))
        let model = BehaviourModel(behaviour: behaviour, pens: [:], seed: Self.seed)
        let decisions = (1...500).map(model.decision(for:))
        #expect(decisions.allSatisfy { $0.inPersonSigners == 1 })
        #expect(decisions.allSatisfy { $0.pen == "applePencil" })
    }

    @Test func planValidationNamesTheField() throws {
        var plan = NodeProcessTests.plan(directory: "/tmp/x", endpoint: "tcp://127.0.0.1:1", devices: 2, seed: 1)
        try plan.validate()
        plan.behaviour.cancelRate = 1.5
        #expect(throws: NodePlanError(path: "plan", "behaviour.cancelRate: must be between 0 and 1, not 1.5")) { try plan.validate() }
        plan.behaviour.cancelRate = 0
        plan.devices.append(plan.devices[0])
        #expect(throws: NodePlanError(path: "plan", "devices[2].id: 'n-1' is listed twice")) { try plan.validate() }
        plan.devices.removeLast()
        plan.pens = ["quill": 1]
        #expect((try? plan.validate()) == nil)
        plan.pens = ["finger": 1]
        plan.outages = [Outage(start: 5, end: 2)]
        #expect((try? plan.validate()) == nil)
    }

    @Test func aPlanFileThatIsNotAPlanIsNamedWithItsMissingField() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("plan-\(UUID().uuidString).json").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        try Data(#"{"process":"node-a-1"}"#.utf8).write(to: URL(fileURLWithPath: path))
        #expect(throws: NodePlanError(path: path, "not a node plan: missing field 'group'")) { try NodePlan.load(path: path) }
        try Data("not json".utf8).write(to: URL(fileURLWithPath: path))
        #expect(throws: NodePlanError(path: path, "not a node plan: not JSON")) { try NodePlan.load(path: path) }
        var plan = NodeProcessTests.plan(directory: "/tmp/x", endpoint: "tcp://127.0.0.1:1", devices: 1, seed: 1)
        plan.statsInterval = 0
        try JSONEncoder().encode(plan).write(to: URL(fileURLWithPath: path))
        #expect(throws: NodePlanError(path: path, "statsInterval: must be 0.05 to 86400 s, not 0.0")) { try NodePlan.load(path: path) }
        // Far too long values are refused, not converted (1e300 s used to trap the node).
        plan.statsInterval = 1
        plan.requestTimeout = 1e300
        try JSONEncoder().encode(plan).write(to: URL(fileURLWithPath: path))
        #expect(throws: NodePlanError(path: path, "requestTimeout: must be 0.01 to 3600 s, not 1e+300")) { try NodePlan.load(path: path) }
    }
}

/// A simulated device's transaction ids: `<device>-<n>` in its first life, `<device>-<n>.<life>`
/// after a restart, so a store that went back in time never makes an id twice.
@Suite struct SimulatedTransactionIDTests {
    @Test func theFirstLifesIdsArePlainAndLaterOnesCarryTheirLife() {
        #expect(SimulatedDevice.transactionID(device: "office-5", number: 12, lifeSuffix: nil) == "office-5-12")
        #expect(SimulatedDevice.transactionID(device: "office-5", number: 12, lifeSuffix: "3fa2c90d") == "office-5-12.3fa2c90d")
    }

    @Test func theEnvelopeNumberIsReadFromEitherFormAndNothingElse() {
        #expect(SimulatedDevice.envelopeNumber(inTransaction: "office-5-12", device: "office-5") == 12)
        #expect(SimulatedDevice.envelopeNumber(inTransaction: "office-5-12.3fa2c90d", device: "office-5") == 12)
        for other in [
            "office-5", "office-5-", "office-5-0", "office-5--1", "office-5-12.", "office-5-12.3fa2c90", "office-5-12.3fa2c90dd",
            "office-5-12.zzzzzzzz", "office-50-12", "office-5-١٢", "office-5-12-r1", "E6448E9E-9922-46A0-9AE2-DA87DBE8EC4A",
        ] {
            #expect(SimulatedDevice.envelopeNumber(inTransaction: other, device: "office-5") == nil, "\(other)")
        }
    }

    @Test func livesDrawDifferentSuffixesOfEightHexDigits() {
        let drawn = (0..<64).map { _ in SimulatedDevice.drawLifeSuffix() }
        #expect(drawn.allSatisfy { $0.count == 8 && $0.allSatisfy { $0.isHexDigit && !$0.isUppercase } }, "\(drawn)")
        #expect(Set(drawn).count > 60, "64 draws of 32 bits: a repeat is a broken generator, not luck")
    }
}
