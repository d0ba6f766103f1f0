import Foundation

/// One outbox item: an envelope made ready for sync on the device.
public struct SyncItem: Sendable, Hashable, Codable {
    /// Gapless per-device sequence number, starting at 1.
    public var sequence: UInt64
    /// The device-chosen id that stops a double creation on the server.
    public var transactionID: String
    /// The envelope's canonical bytes (format owned by the `Envelopes` module).
    public var payload: [UInt8]
    /// Ed25519 signature by the device's enrolled key over `payload`.
    public var signature: [UInt8]

    public init(sequence: UInt64, transactionID: String, payload: [UInt8], signature: [UInt8]) {
        self.sequence = sequence
        self.transactionID = transactionID
        self.payload = payload
        self.signature = signature
    }

    enum CodingKeys: String, CodingKey {
        case sequence = "seq"
        case transactionID, payload, signature
    }
}

/// Pushes a batch of consecutive outbox items, lowest sequence first.
/// Safe to resend: items the server already applied are answered from its
/// stored results (see docs/sync.md).
public struct SyncPush: FleetRequest, Hashable {
    public typealias Reply = SyncAck
    public static let messageType: MessageType = "sync.push"

    public var deviceID: String
    public var items: [SyncItem]

    public init(deviceID: String, items: [SyncItem]) {
        self.deviceID = deviceID
        self.items = items
    }
}

/// What became of one pushed item.
public struct SyncItemResult: Sendable, Hashable, Codable {
    public enum Outcome: String, Sendable, Hashable, Codable {
        /// Applied now; `envelopeID` is the server's id.
        case applied
        /// Applied by an earlier push; the stored result is repeated.
        case duplicate
        /// Signed by the device but invalid: recorded as rejected with `reason`; the sequence
        /// still advanced (the device's own mistake never blocks its later items).
        case rejected
        /// Not settled: the sequence was already used with a different payload (the stored
        /// result's payload digest differs). Nothing changed on the server; the item stays the
        /// device's to resolve. Ends the walk (``SyncAck/Status/refused``).
        case conflict
        /// Settled, refused for good: the item's transaction id already names another envelope
        /// of the account (another device's, or this device's under another local envelope id: a
        /// store that went back in time and counted its ids again). Nothing is stored but the
        /// result (`reason` names the envelope holding the id); the sequence advanced, as for
        /// `rejected`, so later items go on. The device keeps the envelope; a new transaction id
        /// is the way to send it. Never answered `duplicate`: that would hand the device a
        /// receipt for an envelope that is not its.
        case transactionConflict = "transaction_conflict"
        /// Not settled: the signature does not verify with the device's enrolled key, so the item
        /// is not proven to be the device's. Stored nowhere; `lastApplied` did not move. Ends the
        /// walk (``SyncAck/Status/refused``).
        case badSignature = "bad_signature"

        /// Whether the server settled the item for good (applied, duplicate, rejected or a
        /// transaction conflict).
        public var isSettled: Bool {
            switch self {
            case .applied, .duplicate, .rejected, .transactionConflict: true
            case .conflict, .badSignature: false
            }
        }
    }

    public var sequence: UInt64
    public var outcome: Outcome
    public var envelopeID: String?
    public var reason: String?

    public init(sequence: UInt64, outcome: Outcome, envelopeID: String? = nil, reason: String? = nil) {
        self.sequence = sequence
        self.outcome = outcome
        self.envelopeID = envelopeID
        self.reason = reason
    }

    enum CodingKeys: String, CodingKey {
        case sequence = "seq"
        case outcome, envelopeID, reason
    }
}

public struct SyncAck: FleetMessageBody, Hashable {
    public static let messageType: MessageType = "sync.ack"

    public enum Status: String, Sendable, Hashable, Codable {
        /// Every item was settled: applied, duplicate, rejected or a transaction conflict.
        case ok
        /// The first unknown item was not `lastApplied + 1`; resend from `expectedSequence`.
        case gap
        /// The walk stopped at an item the server would not settle: the last result is its
        /// `conflict` or `bad_signature`; items after it have no result.
        case refused
    }

    public var status: Status
    /// The highest sequence the server has applied for this device, after this push.
    public var lastApplied: UInt64
    /// For `gap`: the sequence the server expects next.
    public var expectedSequence: UInt64?
    /// One result per item handled, in order; items after a gap have none.
    public var results: [SyncItemResult]

    public init(status: Status, lastApplied: UInt64, expectedSequence: UInt64? = nil, results: [SyncItemResult]) {
        self.status = status
        self.lastApplied = lastApplied
        self.expectedSequence = expectedSequence
        self.results = results
    }
}
