import DeviceNode
import FleetProtocol
import Foundation
import SignatureCapture
import Testing

@testable import Coordinator
@testable import Fleet

/// Hostile groups: the scenario syntax, the launch plan, and the checker's two jobs with them:
/// judge only the honest account's devices, and make every attempt that got through an anomaly.
@Suite struct HostileGroupTests {
    static let scenario = """
        name: h
        duration: 30s
        groups:
          - name: office
            count: 4
            processes: 2
          - name: mallory
            count: 6
            hostile:
              target: office
              behaviours: [impersonate, junk_push, slow_reader, replay, squat]
              every: 250ms
              slow_reader_messages: 500
        faults:
          - {at: 5s, for: 2s, kill: node}
        """

    @Test func aHostileGroupParsesRendersBackAndIsNoFaultTarget() throws {
        let scenario = try ScenarioLoader.parse(yaml: Self.scenario, source: "h.yaml")
        let hostile = try #require(scenario.groups[1].hostile)
        #expect(hostile.target == "office" && hostile.every == 0.25 && hostile.slowReaderMessages == 500)
        #expect(hostile.behaviours == [.impersonate, .junkPush, .slowReader, .replay, .squat])
        // Device 6 wraps round to the first behaviour.
        #expect((1...6).map(hostile.behaviour(ofDeviceNumber:)) == [.impersonate, .junkPush, .slowReader, .replay, .squat, .impersonate])
        #expect(try ScenarioLoader.parse(yaml: scenario.yaml(), source: "rendered.yaml") == scenario)

        // A kill of "any node" never picks an attacker's process, whatever the seed.
        for seed in UInt64(1)...40 {
            let plan = LaunchPlan.make(scenario: scenario, seed: seed)
            for event in plan.faults { #expect(event.targets.allSatisfy { $0.hasPrefix("node-office-") }, "seed \(seed): \(event)") }
        }
    }

    @Test(arguments: [
        ("  - {name: m, count: 5, hostile: {target: nobody}}", "groups[2].hostile.target", "`nobody` is not an honest group"),
        ("  - {name: m, count: 1, hostile: {target: m, behaviours: [squat]}}", "groups[2].hostile.target", "`m` is not an honest group"),
        ("  - {name: m, count: 1, hostile: {target: office}}", "groups[2].hostile", "has 5 behaviours but the group has 1 devices"),
        ("  - {name: m, count: 2, hostile: {target: office, behaviours: [phishing]}}", "groups[2].hostile.behaviours[0]", "impersonate, junk_push"),
        ("  - {name: m, count: 2, hostile: {target: office, behaviours: [squat, squat]}}", "groups[2].hostile.behaviours", "names a behaviour twice"),
        ("  - {name: m, count: 2, pens: {finger: 1}, hostile: {target: office, behaviours: [squat]}}", "groups[2].pens", "a hostile group signs nothing"),
    ])
    func aBadHostileGroupIsRefusedWithLineAndField(entry: String, field: String, says: String) {
        let yaml = ScenarioValidationTests.base + "\n" + entry
        let error = #expect(throws: ScenarioError.self) { try ScenarioLoader.parse(yaml: yaml, source: "bad.yaml") }
        #expect(error?.line == 13, "\(String(describing: error))")
        #expect(error?.field == field, "\(String(describing: error))")
        #expect(error?.description.contains(says) == true, "\(String(describing: error))")
    }

    @Test func aFaultNamingAHostileGroupIsRefused() {
        let yaml = ScenarioValidationTests.base + "\n  - {name: m, count: 1, hostile: {target: office, behaviours: [squat]}}\nfaults:\n  - {at: 1s, for: 1s, kill: node, group: m}"
        let error = #expect(throws: ScenarioError.self) { try ScenarioLoader.parse(yaml: yaml, source: "bad.yaml") }
        #expect(error?.description.contains("`m` is a hostile or backend group; faults hit the signing devices' groups") == true, "\(String(describing: error))")
    }

    // MARK: - The checker

    /// A rival account enrolls the honest device `a-1`'s id with its own key and gets an envelope
    /// applied under it (sequence 1, even the same transaction id). The run's verdict is about the
    /// honest account only: still valid, and the note says what was left out. Keyed by id alone, the
    /// checker would verify the honest envelopes with the rival's key.
    @Test func aRivalAccountsDeviceOfTheSameIDIsNotTheHonestDevice() async throws {
        let fixture = try await CheckerRun.make(devices: ["a-1"], envelopes: 2)
        defer { fixture.remove() }
        let copy = try fixture.copy()
        let store = try CoordinatorStore(path: copy.coordinatorStore)
        let services = CoordinatorServices(store: store)
        _ = try await services.accounts.createAccount(id: RivalAccount.id, name: RivalAccount.name, offlineSigning: true)
        _ = try await services.accounts.createUser(accountID: RivalAccount.id, name: "Mallory", email: RivalAccount.email, secret: "secret-456")
        let token = try await services.auth.issueToken(email: RivalAccount.email, secret: "secret-456").accessToken

        let elsewhere = URL(fileURLWithPath: fixture.root).appendingPathComponent("squatter-a-1.sqlite").path
        var configuration = DeviceConfiguration(storePath: elsewhere)
        configuration.deviceId = "a-1"
        let user = UserInfo(accountId: RivalAccount.id, accountName: RivalAccount.name, userId: "m", userName: "Mallory", email: RivalAccount.email, host: "h")
        let squatter = try await DeviceNode.open(configuration: configuration, accountService: InMemoryAccountService(tokens: ["t": user]))
        try await squatter.login(accessToken: "t")
        let id = try await squatter.compose(try SampleEnvelope.inPerson(signers: 1, transactionId: "a-1-tx-1"), mode: .offline)
        _ = try await squatter.resumeSigning(envelopeId: id, driver: SyntheticSigner(seed: 99))
        // Over CURVE, as the coordinator admits another account's device of the same id.
        let squatterKey = PeerCredential.curveKey(Array(repeating: 7, count: 32))
        _ = try await services.devices.enroll(EnrollDevice(accessToken: token, deviceID: "a-1", publicKey: squatter.publicKey), credential: squatterKey)
        let items = try await squatter.pendingOutboxItems().compactMap(\.syncItem)
        let ack = try await services.ingest.apply(SyncPush(deviceID: "a-1", items: items), credential: squatterKey)
        #expect(ack.results.map(\.outcome) == [.applied], "the squatter's own item applies in its own account")
        try await squatter.close()
        try store.database.close()

        let report = try await Checker.check(run: copy)
        #expect(report.verdict == .valid, "\(report.summary())")
        #expect(report.counts.serverEnvelopes == 2, "only the honest account's envelopes are counted")
        #expect(report.notes.contains { $0.contains("not checked: rival with 1 devices and 1 envelopes") }, "\(report.notes)")
    }

    /// One attempt that got through makes the run invalid, with the attempt as the witness; refused
    /// attempts only count; a partial last line (a killed writer) is skipped.
    @Test func anAttemptThatGotThroughIsAHostileBreach() async throws {
        let fixture = try await CheckerRun.make(devices: ["a-1"], envelopes: 1)
        defer { fixture.remove() }
        let copy = try fixture.copy()
        let log = try HistoryWriter(path: copy.hostileLogFile(process: "node-mallory-1"))
        try log.appendLine(HostileAttempt(
            time: 1, device: "mallory-1", behaviour: .junkPush, action: "push_junk_unknown_key", target: "a-1", result: "forbidden", breach: false))
        try log.appendLine(HostileAttempt(
            time: 2, device: "mallory-2", behaviour: .impersonate, action: "results_as_target", target: "a-1", result: "ok", breach: true))
        log.close()
        let handle = try #require(FileHandle(forWritingAtPath: copy.hostileLogFile(process: "node-mallory-1")))
        handle.seekToEndOfFile()
        handle.write(Data("{\"time\": 3, \"dev".utf8))
        try handle.close()

        let report = try await Checker.check(run: copy)
        #expect(report.verdict == .invalid)
        let breaches = report.anomalies.filter { $0.kind == .hostileBreach }
        #expect(breaches.count == 1)
        #expect(breaches.first?.device == "a-1")
        #expect(breaches.first?.message.contains("mallory-2 (impersonate) tried results_as_target against a-1 and got ok") == true)
        #expect(report.notes.contains("hostile groups made 2 attempts, 1 got through"), "\(report.notes)")
        // Without the breach the same run is valid.
        try Data().write(to: URL(fileURLWithPath: copy.hostileLogFile(process: "node-mallory-1")))
        #expect(try await Checker.check(run: copy).verdict == .valid)
    }
}
