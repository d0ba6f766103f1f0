import Crypto
import Envelopes
import Foundation
import MessagePack
import SignatureCapture

/// What the device signs and sends for one envelope: the canonical payload of an outbox item.
///
/// **Canonical encoding.** The bytes are the MessagePack encoding of this struct by
/// `MessagePackEncoder`, which is deterministic for these types: every struct is a map whose keys
/// are written in declaration order; arrays keep envelope order (documents, recipients, tabs,
/// signatures by tab index); there are no dictionaries; `nil` optionals are left out; times are
/// `Int64` nanoseconds since the Unix epoch (never `Date`, whose `Double` loses digits); byte
/// strings are `bin`. The bytes are produced once, inside the transaction that assigns the
/// sequence number, stored, and never re-encoded: the device's Ed25519 signature covers exactly
/// the stored bytes, and the server verifies those bytes before decoding them.
public struct SyncPayload: Hashable, Sendable, Codable {
    /// The format name; changes when the layout does.
    public static let currentFormat = "signfleet.envelope/1"

    /// ``currentFormat`` when written.
    public var format: String
    /// The device that signed the payload.
    public var deviceId: String
    /// The outbox sequence number (covered by the signature, so an item cannot be replayed at another position).
    public var sequence: UInt64
    /// The device-local envelope id.
    public var envelopeId: String
    /// The transaction id; the server creates at most one envelope per transaction id.
    public var transactionId: String
    /// The template the envelope was composed from.
    public var templateId: String?
    /// `offline` or `online`.
    public var signingMode: String
    /// Envelope name.
    public var name: String
    /// Email subject.
    public var emailSubject: String
    /// Email message (blurb).
    public var emailMessage: String
    /// When the envelope was composed (ns since epoch).
    public var createdAtNanos: Int64
    /// When the last local signer finished or declined (ns since epoch).
    public var completedLocallyAtNanos: Int64?
    /// The documents with their SHA-256s and bytes.
    public var documents: [PayloadDocument]
    /// The recipients and their statuses.
    public var recipients: [PayloadRecipient]
    /// Every tab with the values signers gave.
    public var tabs: [Tab]
    /// Custom fields.
    public var customFields: CustomFields
    /// The captured signatures, by tab index.
    public var signatures: [PayloadSignature]

    /// Encodes canonically (see the type's discussion).
    public func canonicalBytes() throws -> [UInt8] {
        try MessagePackEncoder().encode(self)
    }

    /// Decodes a payload (strict, bounded MessagePack decoding).
    public init(canonicalBytes bytes: [UInt8]) throws {
        self = try MessagePackDecoder().decode(SyncPayload.self, from: bytes)
    }

    init(
        envelope: Envelope, documents: [Document], signatures: [StoredSignature], deviceId: String,
        sequence: UInt64, signingMode: SigningMode
    ) {
        format = Self.currentFormat
        self.deviceId = deviceId
        self.sequence = sequence
        envelopeId = envelope.envelopeId
        transactionId = envelope.transactionId
        templateId = envelope.templateId
        self.signingMode = signingMode.rawValue
        name = envelope.name
        emailSubject = envelope.emailSubject
        emailMessage = envelope.emailMessage
        createdAtNanos = envelope.createdAt.nanosecondsSinceEpoch
        completedLocallyAtNanos = envelope.completedLocallyAt?.nanosecondsSinceEpoch
        self.documents = documents.map {
            PayloadDocument(documentId: $0.documentId, name: $0.name, pageCount: $0.pageCount,
                            sha256: Array(SHA256.hash(data: $0.pdfBytes)), pdf: $0.pdfBytes)
        }
        recipients = envelope.recipients.map(PayloadRecipient.init)
        tabs = envelope.tabs
        customFields = envelope.customFields
        self.signatures = signatures.sorted { $0.tabIndex < $1.tabIndex }.map {
            PayloadSignature(tabIndex: $0.tabIndex, recipientId: $0.recipientId, documentId: $0.documentId,
                             fieldId: $0.fieldId, isoRecord: $0.isoRecord, binding: $0.binding,
                             bindingSignature: $0.deviceSignature)
        }
    }
}

/// A document in a ``SyncPayload``.
public struct PayloadDocument: Hashable, Sendable, Codable {
    /// Document id.
    public var documentId: String
    /// Name.
    public var name: String
    /// Pages.
    public var pageCount: Int
    /// SHA-256 of ``pdf`` (what signature bindings name).
    public var sha256: [UInt8]
    /// The PDF bytes.
    public var pdf: Data
}

/// A recipient in a ``SyncPayload``.
public struct PayloadRecipient: Hashable, Sendable, Codable {
    /// Recipient id.
    public var recipientId: String
    /// Type (raw value of `RecipientType`).
    public var type: String
    /// Name.
    public var name: String
    /// Email.
    public var email: String?
    /// Routing order.
    public var routingOrder: Int
    /// Embedded recipient's client user id.
    public var clientUserId: String?
    /// In-person host name.
    public var hostName: String?
    /// In-person host email.
    public var hostEmail: String?
    /// Status (raw value of `RecipientStatus`).
    public var status: String
    /// When the status changed (ns since epoch).
    public var statusChangedAtNanos: Int64?
    /// Decline reason.
    public var declineReason: String?

    init(_ recipient: Recipient) {
        recipientId = recipient.recipientId
        type = recipient.type.rawValue
        name = recipient.name
        email = recipient.email
        routingOrder = recipient.routingOrder
        clientUserId = recipient.clientUserId
        hostName = recipient.hostName
        hostEmail = recipient.hostEmail
        status = recipient.status.rawValue
        statusChangedAtNanos = recipient.statusChangedAt?.nanosecondsSinceEpoch
        declineReason = recipient.declineReason
    }
}

/// A signature in a ``SyncPayload``.
public struct PayloadSignature: Hashable, Sendable, Codable {
    /// Index of the tab in the envelope's `tabs`.
    public var tabIndex: Int
    /// Who signed.
    public var recipientId: String
    /// The document signed.
    public var documentId: String
    /// The signature field id recorded in the binding.
    public var fieldId: String
    /// ISO/IEC 19794-7 record.
    public var isoRecord: [UInt8]
    /// `SignatureBinding` canonical bytes (document SHA-256, ISO SHA-256, field, signer, times).
    public var binding: [UInt8]
    /// The device's Ed25519 signature over ``binding``.
    public var bindingSignature: [UInt8]
}

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
public enum OutboxStatus: String, Hashable, Sendable, Codable {
    /// Waiting to be pushed, or pushed without an acknowledgement yet.
    case pending
    /// The server applied it (or had applied it before: a duplicate); a receipt is kept.
    case synced
    /// The server rejected it for good; the payload is kept for inspection.
    case rejected
}

/// The server's answer for one outbox item, recorded as its receipt.
public struct SyncReceipt: Hashable, Sendable {
    /// The outcome.
    public enum Outcome: String, Hashable, Sendable, Codable {
        /// Created on the server now.
        case applied
        /// The server had applied it before (a retry whose first acknowledgement was lost).
        case duplicate
        /// Refused for good (``reason`` says why); the device moves on.
        case rejected
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
    public init(outcome: Outcome, serverEnvelopeId: String? = nil, reason: String? = nil, recordedAt: Date = Date()) {
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

extension Date {
    var nanosecondsSinceEpoch: Int64 {
        let value = (timeIntervalSince1970 * 1e9).rounded()
        guard value.isFinite, value > -9.2e18, value < 9.2e18 else { return 0 }
        return Int64(value)
    }
}

/// Ed25519 verification of device signatures, for servers, checkers and tests.
public enum DeviceSignature {
    /// Whether `signature` is a valid Ed25519 signature of `message` by `publicKey` (raw 32 bytes),
    /// under the strict rule every party uses (``StrictEd25519``).
    public static func isValid(_ signature: [UInt8], for message: [UInt8], publicKey: [UInt8]) -> Bool {
        StrictEd25519.isValid(signature, for: message, publicKey: publicKey)
    }
}
