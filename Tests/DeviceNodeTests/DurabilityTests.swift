import Foundation
import GRDB
import Testing

@testable import DeviceNode

/// The device store's writer runs with the synchronous setting its durability names. GRDB's
/// DatabasePool sets `synchronous = NORMAL` when it turns WAL on, after `prepareDatabase`, so a
/// setting made only there was silently NORMAL (powerLoss measured the same as processCrash).
@Suite struct DurabilityTests {
    @Test(arguments: [DeviceConfiguration.Durability.powerLoss, .processCrash])
    func theWriterUsesTheSynchronousSettingOfItsDurability(_ durability: DeviceConfiguration.Durability) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("device-durability-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        var configuration = DeviceConfiguration(storePath: directory.appendingPathComponent("device.sqlite").path)
        configuration.durability = durability
        let node = try await DeviceNode.open(configuration: configuration, accountService: InMemoryAccountService(tokens: [:]))
        let store = await node.store
        #expect(try store.synchronousSetting() == (durability == .powerLoss ? 2 : 1))
        try await node.close()
    }

    /// Loading an envelope looks its pending outbox item up by envelope id, not by walking every
    /// pending item (which made each load slower the longer a device stayed offline).
    @Test func anEnvelopesPendingOutboxItemIsFoundThroughItsIndex() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("device-index-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let configuration = DeviceConfiguration(storePath: directory.appendingPathComponent("device.sqlite").path)
        let node = try await DeviceNode.open(configuration: configuration, accountService: InMemoryAccountService(tokens: [:]))
        let store = await node.store
        let plan = try await store.pool.read { db in
            try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + DeviceStore.pendingSequenceOfEnvelopeSQL, arguments: ["e-1"]).map { $0["detail"] as String }
        }
        #expect(plan.isEmpty == false)
        #expect(plan.contains { $0.contains("outbox_envelope") }, "\(plan)")
        try await node.close()
    }
}
