import GRDB

/// Per-device totals of the envelopes the coordinator holds.
public struct DeviceEnvelopeSummary: Sendable, Hashable {
    public var deviceID: String
    public var envelopes: Int
    /// The device sequences the envelopes came from, in order.
    public var sequences: [UInt64]
    /// Items recorded as rejected.
    public var rejected: Int
    public var lastAppliedSequence: UInt64
}

extension CoordinatorStore {
    /// What each enrolled device has synced: for checks after a run.
    public func envelopeSummaries() async throws -> [DeviceEnvelopeSummary] {
        try await database.read { db in
            try DeviceRecord.order(Column("id"), Column("accountID")).fetchAll(db).map { device in
                let sequences = try Int64.fetchAll(
                    db, sql: "SELECT sequence FROM envelope WHERE accountID = ? AND deviceID = ? ORDER BY sequence",
                    arguments: [device.accountID, device.id])
                let rejected = try Int.fetchOne(
                    db, sql: "SELECT COUNT(*) FROM syncResult WHERE accountID = ? AND deviceID = ? AND outcome = 'rejected'",
                    arguments: [device.accountID, device.id]) ?? 0
                return DeviceEnvelopeSummary(
                    deviceID: device.id, envelopes: sequences.count, sequences: sequences.map { UInt64(clamping: $0) }, rejected: rejected,
                    lastAppliedSequence: UInt64(clamping: device.lastAppliedSequence))
            }
        }
    }
}
