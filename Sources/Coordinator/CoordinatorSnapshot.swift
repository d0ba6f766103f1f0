import Foundation

/// A read-only, typed copy of what a coordinator store holds for the fleet checker
/// (docs/checker.md, "Inputs"; docs/storage.md, "The checker's snapshot"): enrolled devices,
/// synced envelopes, the ingest's answers and the server-side recipients. Every store exports
/// the same snapshot for the same history (the conformance suite checks it), with no
/// store-specific identity: rows are named by their keys (an envelope by its id or by
/// (account, device, sequence), a result by (account, device, sequence)), and the one ordering
/// the checker needs, the order in which the store applied them, is the order of the arrays.
///
/// Payloads are not kept: `CoordinatorStorage.checkerSnapshot(payloads:)` hands each
/// envelope's signed bytes to a closure while it reads, and the snapshot keeps their SHA-256.
public struct CoordinatorSnapshot: Sendable, Equatable {
    public struct Device: Sendable, Hashable {
        public var accountID: String
        public var id: String
        /// The Ed25519 key the device enrolled (32 bytes).
        public var publicKey: Data
        /// The highest sequence the store applied for the device (0 before any).
        public var lastAppliedSequence: Int64

        public init(accountID: String, id: String, publicKey: Data, lastAppliedSequence: Int64) {
            self.accountID = accountID
            self.id = id
            self.publicKey = publicKey
            self.lastAppliedSequence = lastAppliedSequence
        }
    }

    public struct Envelope: Sendable, Hashable {
        /// The server's envelope id.
        public var id: String
        public var accountID: String
        public var deviceID: String
        public var sequence: Int64
        public var transactionID: String
        /// The envelope id on the device (the payload's `envelopeId`).
        public var localEnvelopeID: String
        public var status: String
        /// When the store created it (the ingest's clock).
        public var createdAt: Date
        /// SHA-256 of the signed payload as stored.
        public var payloadSHA256: Data

        public init(
            id: String, accountID: String, deviceID: String, sequence: Int64, transactionID: String, localEnvelopeID: String, status: String,
            createdAt: Date, payloadSHA256: Data
        ) {
            self.id = id
            self.accountID = accountID
            self.deviceID = deviceID
            self.sequence = sequence
            self.transactionID = transactionID
            self.localEnvelopeID = localEnvelopeID
            self.status = status
            self.createdAt = createdAt
            self.payloadSHA256 = payloadSHA256
        }
    }

    /// The ingest's stored answer for one handled item (`applied`, `duplicate`, `rejected`, …).
    public struct SyncResult: Sendable, Hashable {
        public var accountID: String
        public var deviceID: String
        public var sequence: Int64
        public var outcome: String
        public var envelopeID: String?
        public var reason: String?
        /// The SHA-256 of the payload the result was recorded for, as stored (it decides whether a
        /// later push of the same sequence is a resend or a conflict); nil in rows from before it
        /// was kept.
        public var payloadSHA256: Data?

        public init(
            accountID: String, deviceID: String, sequence: Int64, outcome: String, envelopeID: String?, reason: String?,
            payloadSHA256: Data? = nil
        ) {
            self.accountID = accountID
            self.deviceID = deviceID
            self.sequence = sequence
            self.outcome = outcome
            self.envelopeID = envelopeID
            self.reason = reason
            self.payloadSHA256 = payloadSHA256
        }
    }

    public struct Recipient: Sendable, Hashable {
        public var envelopeID: String
        public var recipientID: String
        public var type: String
        public var routingOrder: Int
        public var status: String
        public var statusChangedAt: Date?

        public init(envelopeID: String, recipientID: String, type: String, routingOrder: Int, status: String, statusChangedAt: Date?) {
            self.envelopeID = envelopeID
            self.recipientID = recipientID
            self.type = type
            self.routingOrder = routingOrder
            self.status = status
            self.statusChangedAt = statusChangedAt
        }
    }

    /// One row of the Connect outbox (docs/webhooks.md): an event for one configuration, and how
    /// its delivery stands.
    public struct ConnectDelivery: Sendable, Hashable {
        /// Increasing in commit order per envelope (or template): the order its events go in.
        public var id: Int64
        public var configurationID: String
        public var accountID: String
        /// The envelope the event is about; `template:` and the template's id for `template-*` events.
        public var envelopeID: String
        /// The Connect event name (`envelope-completed`, …).
        public var event: String
        public var recipientID: String?
        /// When the coordinator recorded the change (its clock).
        public var recordedAt: Date
        /// Attempts made so far.
        public var attempts: Int
        /// Set once a listener answered 2xx.
        public var deliveredAt: Date?
        /// Set when the attempts ran out: a failure record.
        public var failedAt: Date?
        public var lastError: String?

        public init(
            id: Int64, configurationID: String, accountID: String, envelopeID: String, event: String, recipientID: String?, recordedAt: Date,
            attempts: Int, deliveredAt: Date?, failedAt: Date?, lastError: String?
        ) {
            self.id = id
            self.configurationID = configurationID
            self.accountID = accountID
            self.envelopeID = envelopeID
            self.event = event
            self.recipientID = recipientID
            self.recordedAt = recordedAt
            self.attempts = attempts
            self.deliveredAt = deliveredAt
            self.failedAt = failedAt
            self.lastError = lastError
        }

        package init(_ row: ConnectDeliveryRecord) {
            self.init(
                id: row.id, configurationID: row.configurationID, accountID: row.accountID, envelopeID: row.envelopeID, event: row.event,
                recipientID: row.recipientID, recordedAt: row.recordedAt, attempts: row.attempts, deliveredAt: row.deliveredAt,
                failedAt: row.failedAt, lastError: row.lastError)
        }
    }

    /// One envelope's signed bytes, handed to the `payloads` closure while the snapshot is read,
    /// with the enrolled device they must verify against (devices are read first).
    public struct Payload: Sendable {
        /// The envelope's index in ``CoordinatorSnapshot/envelopes``.
        public var index: Int
        public var envelope: Envelope
        /// The envelope's device in its account (nil: not enrolled, only a damaged store has this).
        public var device: Device?
        /// The device-signed canonical bytes, as received.
        public var payload: Data
        /// The device's Ed25519 signature over them.
        public var signature: Data

        public init(index: Int, envelope: Envelope, device: Device?, payload: Data, signature: Data) {
            self.index = index
            self.envelope = envelope
            self.device = device
            self.payload = payload
            self.signature = signature
        }
    }

    /// Looks devices up by (account, id) while a snapshot is read.
    package struct DeviceIndex {
        private var byKey: [String: Device] = [:]

        package init(_ devices: [Device]) {
            for device in devices { byKey[device.accountID + "\n" + device.id] = device }
        }

        package subscript(account: String, id: String) -> Device? { byKey[account + "\n" + id] }
    }

    /// Every account's devices, by account then id (bytewise).
    public var devices: [Device]
    /// In the order the store applied them (its ingest order). Per device this is the order of
    /// commits: a device's pushes are applied one transaction at a time by every store.
    public var envelopes: [Envelope]
    /// In the order the store recorded them, as ``envelopes``.
    public var syncResults: [SyncResult]
    /// By envelope id (bytewise), routing order, recipient id.
    public var recipients: [Recipient]
    /// The Connect outbox, by id: every event written and how its delivery stands (pruned rows are
    /// gone; a store from before Connect has none).
    public var connectDeliveries: [ConnectDelivery]

    public init(
        devices: [Device], envelopes: [Envelope], syncResults: [SyncResult], recipients: [Recipient], connectDeliveries: [ConnectDelivery] = []
    ) {
        self.devices = devices
        self.envelopes = envelopes
        self.syncResults = syncResults
        self.recipients = recipients
        self.connectDeliveries = connectDeliveries
    }
}
