import Coordinator
import DeviceNode
import Foundation
import GRDB
import Testing

@testable import Fleet

/// The device store's read-only snapshot (`DeviceStoreSnapshot`, module DeviceNode) that the
/// checker reads device stores through.
@Suite struct CheckerDeviceSnapshotTests {
    /// A run whose device b-1 left its last item unsynced: synced, pending and cached rows.
    @Test func aDeviceStoreExportsItsOutboxCacheAndJournalWithoutChangingTheFile() async throws {
        let fixture = try await CheckerRun.make(devices: ["b-1"], envelopes: 3, unsynced: ["b-1": 1])
        defer { fixture.remove() }
        let path = fixture.run.deviceStore(device: "b-1")
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        let snapshot = try DeviceStoreSnapshot.read(readOnlyPath: path)
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before, "a read-only read changes nothing")

        #expect(snapshot.deviceId == "b-1")
        #expect(snapshot.accountId == "acme")
        #expect(snapshot.storeDurability == .powerLoss && snapshot.durability == "powerLoss")
        #expect(snapshot.publicKey.count == 32)
        #expect(snapshot.outbox.map(\.sequence) == [1, 2, 3])
        #expect(snapshot.outbox.map(\.transactionId) == fixture.transactions["b-1"])
        #expect(snapshot.outbox.map(\.outboxStatus) == [.synced, .synced, .pending])
        #expect(snapshot.outbox.map(\.receiptOutcome) == [.applied, .applied, nil])
        #expect(snapshot.outbox.prefix(2).allSatisfy { $0.serverEnvelopeId?.hasPrefix("env-") == true && $0.attempts == 1 })
        #expect(snapshot.outbox.allSatisfy { $0.payloadSHA256.count == 32 })
        // The unsynced item's envelope is still cached, awaiting sync.
        #expect(snapshot.envelopes.map(\.transactionId) == [fixture.transactions["b-1"]?.last].compactMap { $0 })
        #expect(snapshot.envelopes.first?.localState == "pendingSync")
        // One last entry per transaction: synced for the first two, queued for the last.
        #expect(snapshot.lastJournalEntries.map(\.transactionId).sorted() == fixture.transactions["b-1"]?.sorted())
        // In journal order: the never-pushed item was queued before the first two were acknowledged.
        let transactions = try #require(fixture.transactions["b-1"])
        #expect(snapshot.lastJournalEntries.map(\.transactionId) == [transactions[2], transactions[0], transactions[1]])
        #expect(snapshot.lastJournalEntries.map(\.journalKind) == [.queued, .synced, .synced], "\(snapshot.lastJournalEntries.map(\.kind))")
        #expect(snapshot.lastJournalEntries.map(\.id) == snapshot.lastJournalEntries.map(\.id).sorted(), "in journal order")
        #expect(snapshot.droppedJournalEntries.isEmpty)

        // The public key is the device's own: what the coordinator enrolled.
        let coordinator = try CoordinatorStore.checkerSnapshot(readOnlyPath: fixture.run.coordinatorStore)
        #expect(coordinator.devices.first { $0.id == "b-1" }?.publicKey == snapshot.publicKey)
    }

    @Test func valuesTheCodeWouldNotWriteAreCarriedAsStored() async throws {
        let fixture = try await CheckerRun.make(devices: ["a-1"], envelopes: 1)
        defer { fixture.remove() }
        let copy = try fixture.copy()
        try CheckerRun.edit(copy.deviceStore(device: "a-1")) { db in
            try db.execute(sql: "UPDATE outbox SET status = 'lost-in-space', outcome = 'maybe'")
            try db.execute(sql: "UPDATE device SET durability = 'hope'")
        }
        let snapshot = try DeviceStoreSnapshot.read(readOnlyPath: copy.deviceStore(device: "a-1"))
        #expect(snapshot.outbox.first?.status == "lost-in-space" && snapshot.outbox.first?.outboxStatus == nil)
        #expect(snapshot.outbox.first?.outcome == "maybe" && snapshot.outbox.first?.receiptOutcome == nil)
        #expect(snapshot.durability == "hope" && snapshot.storeDurability == nil)

        // A value of another type is an error, not a crash, and the checker reports the store as unreadable.
        try CheckerRun.edit(copy.deviceStore(device: "a-1")) { db in try db.execute(sql: "UPDATE outbox SET attempts = 'many'") }
        #expect(throws: (any Error).self) { try DeviceStoreSnapshot.read(readOnlyPath: copy.deviceStore(device: "a-1")) }
        let report = try await Checker.check(run: copy)
        #expect(report.anomalies.contains { $0.kind == .unreadableInput && $0.message.contains("devices/a-1.sqlite") }, "\(report.summary())")
    }

    @Test func whatIsNotADeviceStoreIsAClearError() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("not-a-store-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let missing = directory.appendingPathComponent("missing.sqlite").path
        let noFile = #expect(throws: DeviceNodeError.self) { try DeviceStoreSnapshot.read(readOnlyPath: missing) }
        #expect(noFile?.code == .storeFailure && noFile?.message == "no device store at \(missing)", "\(String(describing: noFile))")
        #expect(!FileManager.default.fileExists(atPath: missing), "reading creates nothing")

        let other = directory.appendingPathComponent("other.sqlite").path
        let queue = try DatabaseQueue(path: other)
        try await queue.write { db in try db.execute(sql: "CREATE TABLE notes (text TEXT)") }
        try queue.close()
        let notAStore = #expect(throws: DeviceNodeError.self) { try DeviceStoreSnapshot.read(readOnlyPath: other) }
        #expect(notAStore?.code == .storeFailure && notAStore?.message.contains("is not a device store") == true, "\(String(describing: notAStore))")

        // The checker reports such a store as unreadable input, naming it.
        let fixture = try await CheckerRun.make(devices: ["a-1"], envelopes: 1)
        defer { fixture.remove() }
        let copy = try fixture.copy()
        try FileManager.default.copyItem(atPath: other, toPath: copy.devicesDirectory + "/z-9.sqlite")
        let report = try await Checker.check(run: copy)
        #expect(report.verdict == .unknown, "\(report.summary())")
        #expect(report.anomalies.map(\.kind) == [.unreadableInput])
        #expect(report.anomalies.first?.message.contains("devices/z-9.sqlite") == true, "\(report.anomalies.first?.message ?? "")")
    }
}
