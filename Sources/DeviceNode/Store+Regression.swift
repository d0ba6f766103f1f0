import Crypto
import Foundation
import GRDB
import SyncContract

/// Where the outbox stands, compared with what a server says it applied (docs/sync.md, "When a
/// store goes back in time").
public struct OutboxPosition: Hashable, Sendable {
    /// The highest sequence this store assigned or knows the server took (items and gaps); the next
    /// item gets the one after.
    public var lastSequence: UInt64
    /// The highest sequence with a receipt (applied, duplicate or rejected: the server took it).
    public var lastSettled: UInt64
    /// The lowest sequence still waiting for an acknowledgement.
    public var firstPending: UInt64?
}

/// Items renumbered because the server had applied other payloads under their numbers.
public struct OutboxRenumbering: Hashable, Sendable {
    /// What the server said it applied.
    public var serverLastApplied: UInt64
    /// (old, new) sequence of each renumbered item, in order.
    public var moves: [Move]

    public struct Move: Hashable, Sendable {
        public var envelope: EnvelopeIDs
        public var from: UInt64
        public var to: UInt64
    }
}

/// A server that has applied fewer of this device's items than the device holds receipts for:
/// its store lost them.
public struct ServerRegression: Hashable, Sendable {
    public var serverLastApplied: UInt64
    /// The device's highest receipt.
    public var deviceLastSettled: UInt64
    /// Items in between that the device still holds (kept by ``DeviceConfiguration/retainSynced``)
    /// and sends again with their original signatures.
    public var resent: [UInt64]
    /// Items in between the device no longer holds (or that cannot apply before them): the server's
    /// loss, which this device cannot repair.
    public var lost: [ClosedRange<UInt64>]

    public init(serverLastApplied: UInt64, deviceLastSettled: UInt64, resent: [UInt64], lost: [ClosedRange<UInt64>]) {
        self.serverLastApplied = serverLastApplied
        self.deviceLastSettled = deviceLastSettled
        self.resent = resent
        self.lost = lost
    }
}

/// A device store behind the server: the server applied numbers the store has no item for.
public struct StoreBehindServer: Hashable, Sendable {
    public var serverLastApplied: UInt64
    /// The store's highest sequence before it learnt of the server's.
    public var deviceLastSequence: UInt64

    public init(serverLastApplied: UInt64, deviceLastSequence: UInt64) {
        self.serverLastApplied = serverLastApplied
        self.deviceLastSequence = deviceLastSequence
    }
}

extension DeviceStore {
    static let regressionMigration = "v4-outbox-gaps"

    /// Sequences the server took that this store has no item for: the store lost them (they were
    /// signed before a rollback), or its own items moved past them. The outbox plus these gaps is
    /// gapless, and no new item reuses them.
    static func createOutboxGaps(_ db: Database) throws {
        try db.execute(sql: """
            CREATE TABLE outboxGap (
                fromSequence INTEGER NOT NULL PRIMARY KEY,
                toSequence INTEGER NOT NULL,
                reason TEXT NOT NULL,
                recordedAt DOUBLE NOT NULL,
                CHECK (toSequence >= fromSequence));
            """)
    }

    /// The next sequence to assign: after every item and every recorded gap.
    static func lastAssigned(_ db: Database) throws -> Int64 {
        let items = try Int64.fetchOne(db.cachedStatement(sql: "SELECT MAX(sequence) FROM outbox")) ?? 0
        let gaps = try Int64.fetchOne(db.cachedStatement(sql: "SELECT MAX(toSequence) FROM outboxGap")) ?? 0
        return max(items, gaps)
    }

    func outboxPosition() async throws -> OutboxPosition {
        try await read { db in
            let last = try Self.lastAssigned(db)
            let settled = try Int64.fetchOne(db, sql: "SELECT MAX(sequence) FROM outbox WHERE status != 'pending'") ?? 0
            let pending = try Int64.fetchOne(db, sql: "SELECT MIN(sequence) FROM outbox WHERE status = 'pending'")
            return OutboxPosition(
                lastSequence: UInt64(clamping: last), lastSettled: UInt64(clamping: settled), firstPending: pending.map { UInt64(clamping: $0) })
        }
    }

    /// Records that the server applied up to `serverLastApplied`, beyond anything this store has:
    /// the numbers in between are a gap, and the next item comes after them. False when there was
    /// nothing to record.
    func recordServerAhead(of serverLastApplied: UInt64) async throws -> StoreBehindServer? {
        let now = clock().timeIntervalSince1970
        return try await pool.write { db in
            let last = UInt64(clamping: try Self.lastAssigned(db))
            guard serverLastApplied > last else { return nil }
            try db.execute(
                sql: "INSERT INTO outboxGap (fromSequence, toSequence, reason, recordedAt) VALUES (?, ?, ?, ?)",
                arguments: [Int64(clamping: last + 1), Int64(clamping: serverLastApplied), "server applied; not in this store", now])
            return StoreBehindServer(serverLastApplied: serverLastApplied, deviceLastSequence: last)
        }
    }

    /// Moves the pending items from `first` on to the numbers after `serverLastApplied` (the server
    /// holds other payloads under theirs), re-signing each payload for its new number, in one
    /// transaction; the numbers they leave up to `serverLastApplied` become a gap.
    func renumberPending(from first: UInt64, serverLastApplied: UInt64) async throws -> OutboxRenumbering {
        let now = clock().timeIntervalSince1970
        return try await pool.write { db in
            let rows = try Row.fetchAll(
                db, sql: "SELECT * FROM outbox WHERE status = 'pending' AND sequence >= ? ORDER BY sequence", arguments: [Int64(clamping: first)])
            let items = rows.map(Self.outboxItem)
            guard !items.isEmpty else { return OutboxRenumbering(serverLastApplied: serverLastApplied, moves: []) }
            // After the server's numbers and after everything this store keeps below the moved items.
            let below = try Int64.fetchOne(db, sql: "SELECT MAX(sequence) FROM outbox WHERE sequence < ?", arguments: [Int64(clamping: first)]) ?? 0
            let gapsBelow = try Int64.fetchOne(
                db, sql: "SELECT MAX(toSequence) FROM outboxGap WHERE toSequence < ?", arguments: [Int64(clamping: first)]) ?? 0
            var next = max(serverLastApplied, UInt64(clamping: max(below, gapsBelow))) + 1
            guard next <= UInt64(Int64.max) - UInt64(items.count) else {
                throw DeviceNodeError(.storeFailure, "no sequence numbers left after \(serverLastApplied) to renumber \(items.count) items")
            }
            // Out of the way first (negative numbers are never assigned), so no two rows collide.
            try db.execute(
                sql: "UPDATE outbox SET sequence = -sequence WHERE status = 'pending' AND sequence >= ?", arguments: [Int64(clamping: first)])
            var moves: [OutboxRenumbering.Move] = []
            for item in items {
                guard let payload = item.payload else {
                    throw DeviceNodeError(.storeFailure, "pending outbox item \(item.sequence) has no payload")
                }
                var decoded = try SyncPayload(canonicalBytes: payload)
                decoded.sequence = next
                let bytes = try decoded.canonicalBytes()
                let signature = try privateKey.signature(for: bytes)
                try db.execute(
                    sql: """
                        UPDATE outbox SET sequence = ?, payload = ?, payloadSHA256 = ?, signature = ?, attempts = 0
                        WHERE sequence = ?
                        """,
                    arguments: [Int64(clamping: next), Data(bytes), Data(SHA256.hash(data: bytes)), signature, -Int64(clamping: item.sequence)])
                try Self.journal(
                    db, at: now, envelopeId: item.envelope.localId, transactionId: item.envelope.transactionId, kind: .renumbered,
                    state: "pendingSync", sequence: next, detail: "was \(item.sequence); the server applied another payload there")
                moves.append(.init(envelope: item.envelope, from: item.sequence, to: next))
                next += 1
            }
            if first <= serverLastApplied {
                try db.execute(
                    sql: "INSERT OR REPLACE INTO outboxGap (fromSequence, toSequence, reason, recordedAt) VALUES (?, ?, ?, ?)",
                    arguments: [Int64(clamping: first), Int64(clamping: serverLastApplied), "server applied other payloads", now])
            }
            return OutboxRenumbering(serverLastApplied: serverLastApplied, moves: moves)
        }
    }

    /// Settled items in `range` whose payload this store still holds (``DeviceConfiguration/retainSynced``).
    func retainedItems(in range: ClosedRange<UInt64>) async throws -> [OutboxItem] {
        try await pool.read { db in
            try Row.fetchAll(
                db, sql: "SELECT * FROM outbox WHERE status != 'pending' AND payload IS NOT NULL AND sequence BETWEEN ? AND ? ORDER BY sequence",
                arguments: [Int64(clamping: range.lowerBound), Int64(clamping: range.upperBound)]
            ).map(Self.outboxItem)
        }
    }

    /// Drops the payloads of synced items acknowledged before `cutoff` (the retention window passed).
    func dropRetainedPayloads(acknowledgedBefore cutoff: Date) async throws {
        try await pool.write { db in
            try db.execute(
                sql: "UPDATE outbox SET payload = NULL WHERE status = 'synced' AND payload IS NOT NULL AND recordedAt < ?",
                arguments: [cutoff.timeIntervalSince1970])
        }
    }
}
