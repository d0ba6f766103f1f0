import Crypto
import Envelopes
import FleetProtocol
import Foundation
import MessagePack
import SignatureCapture
import SyncContract

/// A captured signature as the device stores it.
public struct StoredSignature: Hashable, Sendable {
    /// The envelope.
    public var envelopeId: String
    /// Index of the tab in the envelope's `tabs`.
    public var tabIndex: Int
    /// Who signed.
    public var recipientId: String
    /// The document signed.
    public var documentId: String
    /// The field id recorded in the binding.
    public var fieldId: String
    /// ISO/IEC 19794-7 record.
    public var isoRecord: [UInt8]
    /// SVG rendering.
    public var svg: String
    /// `SignatureBinding` canonical bytes.
    public var binding: [UInt8]
    /// The device's Ed25519 signature over ``binding``.
    public var deviceSignature: [UInt8]
    /// When it was saved.
    public var signedAt: Date
}

/// Where an outbox item stands.
#if hasAttribute(nonexhaustive)
@nonexhaustive
#endif
public enum OutboxStatus: String, Hashable, Sendable, Codable {
    /// Waiting to be pushed, or pushed without an acknowledgement yet.
    case pending
    /// The server applied it (or had applied it before: a duplicate); a receipt is kept.
    case synced
    /// The server refused it for good (rejected, or its transaction id names another envelope);
    /// the payload is kept for inspection.
    case rejected
}

/// The server's answer for one outbox item, recorded as its receipt.
public struct SyncReceipt: Hashable, Sendable {
    /// The outcome.
    #if hasAttribute(nonexhaustive)
    @nonexhaustive
    #endif
    public enum Outcome: String, Hashable, Sendable, Codable {
        /// Created on the server now.
        case applied
        /// The server had applied it before (a retry whose first acknowledgement was lost).
        case duplicate
        /// Refused for good (``reason`` says why); the device moves on.
        case rejected
        /// Refused for good: the transaction id already names another envelope on the server
        /// (``reason`` says which). The signed payload stays in the outbox (status `rejected`);
        /// composing the envelope again under a new transaction id is the way to send it.
        case transactionConflict = "transaction_conflict"

        /// Whether the server refused the item for good (nothing of it is on the server).
        public var isRefusal: Bool { self == .rejected || self == .transactionConflict }
    }
    /// The outcome.
    public var outcome: Outcome
    /// The server's envelope id (applied or duplicate).
    public var serverEnvelopeId: String?
    /// Why it was rejected.
    public var reason: String?
    /// When the acknowledgement was recorded.
    public var recordedAt: Date

    /// Creates a receipt.
    public init(outcome: Outcome, serverEnvelopeId: String? = nil, reason: String? = nil, recordedAt: Date = WallClock.system.now()) {
        self.outcome = outcome
        self.serverEnvelopeId = serverEnvelopeId
        self.reason = reason
        self.recordedAt = recordedAt
    }
}

/// One outbox item: an envelope ready for sync, numbered and signed by the device.
public struct OutboxItem: Hashable, Sendable {
    /// The gapless per-device sequence number (1, 2, 3, …).
    public var sequence: UInt64
    /// The envelope's ids (``EnvelopeIDs/serverId`` once synced).
    public var envelope: EnvelopeIDs
    /// The canonical payload; `nil` once synced (the receipt remains).
    public var payload: [UInt8]?
    /// SHA-256 of the payload (kept after the payload is dropped).
    public var payloadSHA256: [UInt8]
    /// The device's Ed25519 signature over the payload (64 bytes).
    public var signature: [UInt8]
    /// When the item was queued.
    public var createdAt: Date
    /// Where it stands.
    public var status: OutboxStatus
    /// How many pushes included it.
    public var attempts: Int
    /// The server's answer, once recorded.
    public var receipt: SyncReceipt?

    /// Whether ``signature`` is a valid Ed25519 signature over ``payload`` by `publicKey` (raw 32 bytes).
    /// `false` when the payload has been dropped.
    public func hasValidSignature(publicKey: [UInt8]) -> Bool {
        guard let payload else { return false }
        return StrictEd25519.isValid(signature, for: payload, publicKey: publicKey)
    }

    /// The decoded payload.
    /// - Throws: ``DeviceNodeError`` when the payload was dropped, or a decoding error.
    public func decodedPayload() throws -> SyncPayload {
        guard let payload else {
            throw DeviceNodeError(.unknownSequence, "outbox item \(sequence) was synced; only its receipt is kept")
        }
        return try SyncPayload(canonicalBytes: payload)
    }
}

/// Ed25519 verification of device signatures, for servers, checkers and tests.
public enum DeviceSignature {
    /// Whether `signature` is a valid Ed25519 signature of `message` by `publicKey` (raw 32 bytes),
    /// under the strict rule every party uses (`StrictEd25519`).
    public static func isValid(_ signature: [UInt8], for message: [UInt8], publicKey: [UInt8]) -> Bool {
        StrictEd25519.isValid(signature, for: message, publicKey: publicKey)
    }
}

extension SyncPayload {
    /// The payload of an envelope ready for sync, with its documents and captured signatures.
    init(
        envelope: Envelope, documents: [Document], signatures: [StoredSignature], deviceId: String,
        sequence: UInt64, signingMode: SigningMode
    ) {
        self.init(
            format: Self.currentFormat, deviceId: deviceId, sequence: sequence, envelopeId: envelope.envelopeId,
            transactionId: envelope.transactionId, templateId: envelope.templateId, signingMode: signingMode.rawValue,
            name: envelope.name, emailSubject: envelope.emailSubject, emailMessage: envelope.emailMessage,
            createdAtNanos: envelope.createdAt.nanosecondsSinceEpoch,
            completedLocallyAtNanos: envelope.completedLocallyAt?.nanosecondsSinceEpoch,
            documents: documents.map {
                PayloadDocument(
                    documentId: $0.documentId, name: $0.name, pageCount: $0.pageCount,
                    sha256: Array(SHA256.hash(data: $0.pdfBytes)), pdf: $0.pdfBytes)
            },
            recipients: envelope.recipients.map(PayloadRecipient.init),
            tabs: envelope.tabs, customFields: envelope.customFields,
            signatures: signatures.sorted { $0.tabIndex < $1.tabIndex }.map {
                PayloadSignature(
                    tabIndex: $0.tabIndex, recipientId: $0.recipientId, documentId: $0.documentId, fieldId: $0.fieldId,
                    isoRecord: $0.isoRecord, binding: $0.binding, bindingSignature: $0.deviceSignature)
            })
    }
}

extension PayloadRecipient {
    /// A recipient of the device's model, as the payload carries it.
    init(_ recipient: Recipient) {
        self.init(
            recipientId: recipient.recipientId, type: recipient.type.rawValue, name: recipient.name, email: recipient.email,
            routingOrder: recipient.routingOrder, clientUserId: recipient.clientUserId, hostName: recipient.hostName,
            hostEmail: recipient.hostEmail, status: recipient.status.rawValue,
            statusChangedAtNanos: recipient.statusChangedAt?.nanosecondsSinceEpoch, declineReason: recipient.declineReason)
    }
}
