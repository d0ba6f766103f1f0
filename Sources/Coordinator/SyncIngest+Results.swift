import FleetProtocol
import Foundation
import GRDB

extension SyncIngest {
    /// Serves `sync.results`: one page of what this coordinator recorded for the sender's own
    /// items (its `syncResult` rows, each with the envelope it names), in sequence order.
    ///
    /// - Throws: ``FleetError`` `forbidden` when the request names another device than the
    ///   sender's routing id; `unauthenticated` for a device that is not enrolled;
    ///   `invalid_request` for a `limit` of 0 or over ``SyncResultsQuery/maxLimit``.
    public func results(_ query: SyncResultsQuery, routingID: String, meter: (Account) throws -> Void = { _ in }) async throws
        -> SyncResultsReply
    {
        try await results(query, credential: .claimedName(routingID), meter: meter)
    }

    /// `sync.results` for the sender with `credential`: answered only to the enrolled device itself.
    public func results(_ query: SyncResultsQuery, credential: PeerCredential, meter: (Account) throws -> Void = { _ in }) async throws
        -> SyncResultsReply
    {
        let device = try await devices.authenticate(deviceID: query.deviceID, credential: credential)
        guard let account = try await store.database.read({ db in try AccountRecord.fetchOne(db, key: device.accountID) }) else {
            throw FleetError(.unauthenticated, "the device's account no longer exists")
        }
        try meter(AccountDirectory.account(account))
        guard (1...SyncResultsQuery.maxLimit).contains(query.limit) else {
            throw FleetError(
                .invalidRequest, "limit must be 1 to \(SyncResultsQuery.maxLimit) results per page; got \(query.limit)")
        }
        // Sequences are stored as SQLite integers: nothing lies above Int64.max.
        guard query.after < UInt64(Int64.max) else {
            return SyncResultsReply(lastApplied: device.lastAppliedSequence, results: [], nextAfter: nil)
        }
        let limit = Int(query.limit)
        return try await store.database.read { db in
            let last = try Int64.fetchOne(
                db, sql: "SELECT lastAppliedSequence FROM device WHERE accountID = ? AND id = ?", arguments: [device.accountID, device.id]) ?? 0
            // One more than the page, to know whether another page follows.
            let rows = try Row.fetchAll(
                db,
                sql: """
                    SELECT r.sequence, r.outcome, r.envelopeID, r.reason,
                           e.transactionID AS transactionID,
                           CASE WHEN e.deviceID = r.deviceID AND e.accountID = r.accountID THEN e.sequence END AS envelopeSequence
                    FROM syncResult r LEFT JOIN envelope e ON e.id = r.envelopeID
                    WHERE r.accountID = ? AND r.deviceID = ? AND r.sequence > ?
                    ORDER BY r.sequence LIMIT ?
                    """,
                arguments: [device.accountID, device.id, Int64(query.after), limit + 1])
            var results: [SyncStoredResult] = []
            for row in rows.prefix(limit) {
                let sequence: Int64 = row["sequence"]
                let stored: String = row["outcome"]
                guard let outcome = SyncItemResult.Outcome(rawValue: stored) else {
                    throw FleetError(.internal, "sequence \(sequence) of device \"\(device.id)\" has unknown outcome \"\(stored)\"")
                }
                let envelopeSequence: Int64? = row["envelopeSequence"]
                results.append(
                    SyncStoredResult(
                        sequence: UInt64(max(0, sequence)), outcome: outcome, envelopeID: row["envelopeID"],
                        transactionID: row["transactionID"], envelopeSequence: envelopeSequence.map { UInt64(max(0, $0)) },
                        reason: row["reason"]))
            }
            return SyncResultsReply(
                lastApplied: UInt64(max(0, last)), results: results, nextAfter: rows.count > limit ? results.last?.sequence : nil)
        }
    }
}
