import Foundation

/// Reads back, a page at a time, what the coordinator recorded for the calling device's
/// pushed items: per sequence, the stored outcome and the envelope it made. Lets a device
/// (or the load generator's end-of-run audit) check that everything it was told was applied
/// is really there, once and in order. Only the sender's own results (docs/protocol.md).
public struct SyncResultsQuery: FleetRequest, Hashable {
    public typealias Reply = SyncResultsReply
    public static let messageType: MessageType = "sync.results"

    /// The most results one page may carry.
    public static let maxLimit: UInt32 = 500

    /// Must be the sender's routing id (an enrolled device).
    public var deviceID: String
    /// Results for sequences strictly above this (0: from the first).
    public var after: UInt64
    /// Page size, 1 ... ``maxLimit``.
    public var limit: UInt32

    public init(deviceID: String, after: UInt64 = 0, limit: UInt32 = SyncResultsQuery.maxLimit) {
        self.deviceID = deviceID
        self.after = after
        self.limit = limit
    }
}

/// What the coordinator holds for one handled sequence of a device.
public struct SyncStoredResult: Sendable, Hashable, Codable {
    public var sequence: UInt64
    /// The outcome recorded when the item was first handled: `applied` (it made the envelope),
    /// `duplicate` (its transaction had already made an envelope from another item) or `rejected`.
    public var outcome: SyncItemResult.Outcome
    /// The envelope the answer names (absent for `rejected`).
    public var envelopeID: String?
    /// The transaction id of that envelope as the coordinator stores it; absent when no such
    /// envelope exists (rejected, or a store that lost it).
    public var transactionID: String?
    /// The sequence of this device's item that made that envelope; absent when no such envelope
    /// exists or another device's item made it.
    public var envelopeSequence: UInt64?
    /// Why it was rejected (or which item made the envelope, for `duplicate`).
    public var reason: String?

    public init(
        sequence: UInt64, outcome: SyncItemResult.Outcome, envelopeID: String? = nil, transactionID: String? = nil,
        envelopeSequence: UInt64? = nil, reason: String? = nil
    ) {
        self.sequence = sequence
        self.outcome = outcome
        self.envelopeID = envelopeID
        self.transactionID = transactionID
        self.envelopeSequence = envelopeSequence
        self.reason = reason
    }

    enum CodingKeys: String, CodingKey {
        case sequence = "seq"
        case outcome, envelopeID, transactionID, envelopeSequence, reason
    }
}

public struct SyncResultsReply: FleetMessageBody, Hashable {
    public static let messageType: MessageType = "sync.results.reply"

    /// The device's last applied sequence when the page was read.
    public var lastApplied: UInt64
    /// In increasing sequence, at most `limit`.
    public var results: [SyncStoredResult]
    /// The `after` of the next page; absent on the last page.
    public var nextAfter: UInt64?

    public init(lastApplied: UInt64, results: [SyncStoredResult], nextAfter: UInt64?) {
        self.lastApplied = lastApplied
        self.results = results
        self.nextAfter = nextAfter
    }
}
