@testable import DeviceNode
import FleetProtocol
import FleetTesting
import Foundation
import GRDB
import Testing
import ZeroMQ

@testable import Coordinator

/// One store goes back in time (docs/sync.md, "When a store goes back in time"), against a real
/// coordinator on real sockets: the device's (it lost its last commits) or the coordinator's (restored
/// from a backup, its WAL deleted). Nothing is lost silently: what can be repaired is, and what cannot
/// is said by a typed event and error.
@Suite struct StoreRegressionTests {
    /// A device with its own store in the coordinator's temporary directory.
    struct Device {
        let coordinator: CurveCoordinator
        let configuration: DeviceConfiguration
        let accounts: InMemoryAccountService

        init(_ coordinator: CurveCoordinator, id: String, retainSynced: Duration? = nil) throws {
            self.coordinator = coordinator
            let directory = coordinator.temporary.directory.appendingPathComponent(id)
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            var configuration = DeviceConfiguration(storePath: directory.appendingPathComponent("device.sqlite").path)
            configuration.deviceId = id
            configuration.retainSynced = retainSynced
            self.configuration = configuration
            let user = UserInfo(accountId: "demo", accountName: "Demo", userId: "u1", userName: "Ann", email: "a@demo.example", host: "h")
            accounts = InMemoryAccountService(tokens: ["t": user])
        }

        var directory: URL { URL(fileURLWithPath: configuration.storePath).deletingLastPathComponent() }

        func open() async throws -> DeviceNode {
            let node = try await DeviceNode.open(configuration: configuration, accountService: accounts)
            try await node.login(accessToken: "t")
            return node
        }

        func sign(_ node: DeviceNode, _ transaction: String) async throws {
            let id = try await node.compose(try SampleEnvelope.inPerson(signers: 1, transactionId: transaction), mode: .offline)
            _ = try await node.resumeSigning(envelopeId: id, driver: SyntheticSigner(seed: 5))
        }

        /// One session: a connected client and a fresh engine (it enrolls and reconciles first).
        func session<T: Sendable>(_ node: DeviceNode, _ body: (SyncEngine) async throws -> T) async throws -> T {
            let client = try coordinator.client(configuration.deviceId ?? "", keys: node.transportKeys)
            let engine = SyncEngine(
                node: node, client: client, accessToken: coordinator.token,
                configuration: SyncEngineConfiguration(maxAttempts: 1, retryBackoff: Backoff(initial: .milliseconds(10), maximum: .milliseconds(10))))
            return try await connected(client) { try await body(engine) }
        }

        /// Copies the store's files aside (a backup) or back (a restore).
        func copyStore(from source: URL, to target: URL) throws {
            try FileManager.default.createDirectory(at: target, withIntermediateDirectories: true)
            for name in try FileManager.default.contentsOfDirectory(atPath: target.path) where name.hasPrefix("device.sqlite") {
                try FileManager.default.removeItem(at: target.appendingPathComponent(name))
            }
            for name in try FileManager.default.contentsOfDirectory(atPath: source.path) where name.hasPrefix("device.sqlite") {
                try FileManager.default.copyItem(at: source.appendingPathComponent(name), to: target.appendingPathComponent(name))
            }
        }
    }

    /// The coordinator's transactions for `device`, by sequence.
    static func serverItems(_ coordinator: CurveCoordinator, _ device: String) async throws -> [Int64: String] {
        try await coordinator.temporary.store.database.read { db in
            var items: [Int64: String] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT sequence, transactionID FROM envelope WHERE deviceID = ?", arguments: [device]) {
                items[row["sequence"]] = row["transactionID"]
            }
            return items
        }
    }

    /// The coordinator's store loses `device`'s items after `sequence`, as a restore from an older
    /// backup would (the rows and the device's `lastAppliedSequence` go back together).
    static func rollBackCoordinator(_ coordinator: CurveCoordinator, _ device: String, to sequence: Int64) async throws {
        try await coordinator.temporary.store.database.write { db in
            try db.execute(sql: "DELETE FROM envelopeRecipient WHERE envelopeID IN (SELECT id FROM envelope WHERE deviceID = ? AND sequence > ?)", arguments: [device, sequence])
            try db.execute(sql: "DELETE FROM envelope WHERE deviceID = ? AND sequence > ?", arguments: [device, sequence])
            try db.execute(sql: "DELETE FROM syncResult WHERE deviceID = ? AND sequence > ?", arguments: [device, sequence])
            try db.execute(sql: "UPDATE device SET lastAppliedSequence = ? WHERE id = ?", arguments: [sequence, device])
        }
    }

    // MARK: - The device's store went back

    /// The store lost its last commits after item 1 synced, and signed a new envelope under number
    /// 1 again. The server answers `conflict` (it holds another payload there); the device moves the
    /// new item after the server's numbers, signs it again, and it applies: nothing lost, no error.
    @Test func aDeviceStoreRolledBackRenumbersItsNewItemAfterTheServersAndLosesNothing() async throws {
        let coordinator = try await CurveCoordinator()
        defer { Task { await coordinator.stop() } }
        let device = try Device(coordinator, id: "tablet-rb")
        try await device.open().close()
        let backup = device.directory.appendingPathComponent("backup")
        try device.copyStore(from: device.directory, to: backup)

        let first = try await device.open()
        try await device.sign(first, "first")
        let synced = try await device.session(first) { try await $0.syncAll() }
        #expect(synced.succeeded == 1 && synced.remaining == 0)
        try await first.close()

        try device.copyStore(from: backup, to: device.directory)
        let node = try await device.open()
        defer { Task { try? await node.close() } }
        try await device.sign(node, "second")
        #expect(try await node.pendingOutboxItems().map(\.sequence) == [1], "the rolled-back store reuses number 1")
        let events = node.events()
        let summary = try await device.session(node) { try await $0.syncAll() }
        #expect(summary.remaining == 0, "\(summary)")

        let renumbered = try await firstElement(of: events, "an outboxRenumbered event") {
            if case .outboxRenumbered = $0 { return true }
            return false
        }
        guard case .outboxRenumbered(let renumbering) = renumbered else { return }
        #expect(renumbering.serverLastApplied == 1)
        #expect(renumbering.moves.map { [$0.from, $0.to] } == [[1, 2]])
        #expect(try await Self.serverItems(coordinator, "tablet-rb") == [1: "first", 2: "second"])
        let audit = try await node.auditStore()
        #expect(audit.isGapless && audit.invalidSignatures.isEmpty, "\(audit)")
        #expect(try await node.journal().contains { $0.kind == .renumbered && $0.sequence == 2 && $0.detail?.contains("was 1") == true })
    }

    /// The same rollback, but the device connects before it signs: the session start shows the
    /// server ahead, so the next envelope is numbered after the server's at once.
    @Test func aDeviceThatLearnsAtSessionStartThatItIsBehindNumbersItsNextItemAfterTheServers() async throws {
        let coordinator = try await CurveCoordinator()
        defer { Task { await coordinator.stop() } }
        let device = try Device(coordinator, id: "tablet-behind")
        try await device.open().close()
        let backup = device.directory.appendingPathComponent("backup")
        try device.copyStore(from: device.directory, to: backup)
        let first = try await device.open()
        try await device.sign(first, "one")
        try await device.sign(first, "two")
        _ = try await device.session(first) { try await $0.syncAll() }
        try await first.close()

        try device.copyStore(from: backup, to: device.directory)
        let node = try await device.open()
        defer { Task { try? await node.close() } }
        let events = node.events()
        _ = try await device.session(node) { try await $0.syncAll() }
        let behind = try await firstElement(of: events, "a storeBehindServer event") {
            if case .storeBehindServer = $0 { return true }
            return false
        }
        #expect(behind == .storeBehindServer(StoreBehindServer(serverLastApplied: 2, deviceLastSequence: 0)))
        try await device.sign(node, "three")
        #expect(try await node.pendingOutboxItems().map(\.sequence) == [3])
        let summary = try await device.session(node) { try await $0.syncAll() }
        #expect(summary.succeeded == 1 && summary.remaining == 0)
        #expect(try await Self.serverItems(coordinator, "tablet-behind") == [1: "one", 2: "two", 3: "three"])
        #expect(try await node.auditStore().isGapless)
    }

    // MARK: - The coordinator's store went back

    /// The coordinator lost items 2 and 3 of a device that keeps synced payloads (`retainSynced`):
    /// at its next session the device sends them again, with their original signatures, then its
    /// new item 4; the server holds all four, with the payloads it had.
    @Test func aCoordinatorThatLostItemsGetsThemBackFromADeviceThatRetainedThem() async throws {
        let coordinator = try await CurveCoordinator()
        defer { Task { await coordinator.stop() } }
        let device = try Device(coordinator, id: "tablet-keep", retainSynced: .seconds(3600))
        let node = try await device.open()
        defer { Task { try? await node.close() } }
        for transaction in ["a", "b", "c"] { try await device.sign(node, transaction) }
        _ = try await device.session(node) { try await $0.syncAll() }
        let digests = try await coordinator.temporary.store.database.read { db in
            try Data.fetchAll(db, sql: "SELECT payloadSHA256 FROM syncResult ORDER BY sequence")
        }

        try await Self.rollBackCoordinator(coordinator, "tablet-keep", to: 1)
        try await device.sign(node, "d")
        let events = node.events()
        let summary = try await device.session(node) { try await $0.syncAll() }
        #expect(summary.succeeded == 1 && summary.remaining == 0, "\(summary)")
        let event = try await firstElement(of: events, "a serverBehind event") {
            if case .serverBehind = $0 { return true }
            return false
        }
        #expect(event == .serverBehind(ServerRegression(serverLastApplied: 1, deviceLastSettled: 3, resent: [2, 3], lost: [])))
        #expect(try await Self.serverItems(coordinator, "tablet-keep") == [1: "a", 2: "b", 3: "c", 4: "d"])
        let healed = try await coordinator.temporary.store.database.read { db in
            try Data.fetchAll(db, sql: "SELECT payloadSHA256 FROM syncResult WHERE sequence <= 3 ORDER BY sequence")
        }
        #expect(healed == digests, "the same signed payloads, not new ones")
        // The coordinator said so too (the device told it at enrollment), and it is healed now.
        let regressions = coordinator.temporary.store.regressions
        #expect(regressions.regressionsFound == 1)
        #expect(regressions.current.isEmpty && regressions.healthReasons.isEmpty)
    }

    /// Without retained payloads the device cannot repair the server: it says so (a `serverBehind`
    /// event naming the lost items, then a `store_regression` error, not retryable), and keeps its
    /// new item pending rather than pretending.
    @Test func aCoordinatorThatLostItemsTheDeviceNoLongerHoldsIsAStoreRegressionNotASilentRetry() async throws {
        let coordinator = try await CurveCoordinator()
        defer { Task { await coordinator.stop() } }
        let device = try Device(coordinator, id: "tablet-lost")
        let node = try await device.open()
        defer { Task { try? await node.close() } }
        for transaction in ["a", "b", "c"] { try await device.sign(node, transaction) }
        _ = try await device.session(node) { try await $0.syncAll() }

        try await Self.rollBackCoordinator(coordinator, "tablet-lost", to: 1)
        try await device.sign(node, "d")
        let events = node.events()
        let error = await fleetError { _ = try await device.session(node) { try await $0.syncAll() } }
        #expect(error?.code == .storeRegression && error?.retryable == false, "\(String(describing: error))")
        #expect(error?.message.contains("2…3") == true, "\(String(describing: error))")
        let event = try await firstElement(of: events, "a serverBehind event") {
            if case .serverBehind = $0 { return true }
            return false
        }
        #expect(event == .serverBehind(ServerRegression(serverLastApplied: 1, deviceLastSettled: 3, resent: [], lost: [2...3])))
        #expect(try await node.pendingOutboxItems().map(\.envelope.transactionId) == ["d"])
        // The coordinator knows which items it lost, and its health says so until they come back.
        let regressions = coordinator.temporary.store.regressions
        #expect(regressions.current.map { "\($0.deviceID) \($0.lastApplied) \($0.acknowledgedThrough)" } == ["tablet-lost 1 3"])
        #expect(regressions.healthReasons == [StoreRegressionMonitor.healthReason])
    }

    /// The coordinator lost the device's enrollment (and with it the device's items) while the
    /// session was up: the next push is `unauthenticated`, and the engine enrolls again by itself and
    /// sends what it retained, without a restart.
    @Test func aDeviceWhoseEnrollmentTheCoordinatorLostEnrollsAgainWithoutARestart() async throws {
        let coordinator = try await CurveCoordinator()
        defer { Task { await coordinator.stop() } }
        let device = try Device(coordinator, id: "tablet-again", retainSynced: .seconds(3600))
        let node = try await device.open()
        defer { Task { try? await node.close() } }
        try await device.sign(node, "a")
        try await device.session(node) { engine in
            #expect(try await engine.syncAll().succeeded == 1)
            try await coordinator.temporary.store.database.write { db in
                try db.execute(sql: "DELETE FROM device WHERE id = ?", arguments: ["tablet-again"])
            }
            try await device.sign(node, "b")
            let summary = try await engine.syncAll()
            #expect(summary.succeeded == 1 && summary.remaining == 0, "\(summary)")
        }
        #expect(try await Self.serverItems(coordinator, "tablet-again") == [1: "a", 2: "b"])
    }

    /// What a server says it applied is input: a number past the sequence range is refused as
    /// malformed, and a store whose numbers run out says so at the next signing instead of trapping.
    @Test func sequenceNumbersFromTheServerOrAnExhaustedStoreNeverTrap() async throws {
        #expect(throws: FleetError.self) { try SyncEngine.checked(UInt64.max) }
        #expect(try SyncEngine.checked(UInt64(Int64.max)) == UInt64(Int64.max))
        let coordinator = try await CurveCoordinator()
        defer { Task { await coordinator.stop() } }
        let device = try Device(coordinator, id: "tablet-full")
        let node = try await device.open()
        defer { Task { try? await node.close() } }
        _ = try await node.recordServerAhead(of: UInt64(Int64.max))
        await #expect(throws: (any Error).self) { try await device.sign(node, "one-too-many") }
        #expect(try await node.pendingOutboxItems().isEmpty)
    }
}
