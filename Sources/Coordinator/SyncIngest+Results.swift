import FleetProtocol
import Foundation

extension SyncIngest {
    /// Serves `sync.results`: one page of what this coordinator recorded for the sender's own
    /// items (its `syncResult` rows, each with the envelope it names), in sequence order.
    ///
    /// - Throws: `FleetError` `forbidden` when the request names another device than the
    ///   sender's routing id; `unauthenticated` for a device that is not enrolled;
    ///   `invalid_request` for a `limit` of 0 or over `maxLimit`.
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
        guard let account = try await store.account(id: device.accountID) else {
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
        let page = try await store.syncResults(accountID: device.accountID, deviceID: device.id, after: Int64(query.after), limit: limit)
        var results: [SyncStoredResult] = []
        for row in page.rows {
            guard let outcome = SyncItemResult.Outcome(rawValue: row.outcome) else {
                throw FleetError(.internal, "sequence \(row.sequence) of device \"\(device.id)\" has unknown outcome \"\(row.outcome)\"")
            }
            results.append(
                SyncStoredResult(
                    sequence: UInt64(max(0, row.sequence)), outcome: outcome, envelopeID: row.envelopeID, transactionID: row.transactionID,
                    envelopeSequence: row.envelopeSequence.map { UInt64(max(0, $0)) }, reason: row.reason))
        }
        return SyncResultsReply(
            lastApplied: UInt64(max(0, page.lastApplied)), results: results, nextAfter: page.more ? results.last?.sequence : nil)
    }
}
