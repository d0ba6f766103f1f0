import Crypto
import Envelopes
import Foundation
import MessagePack

// The sync item payload: what a device signs and the coordinator verifies
// (docs/sync-payload.md defines it byte by byte). Owned here, in the wire contract, so the device,
// the coordinator and the fleet checker share one definition.

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

    public init(documentId: String, name: String, pageCount: Int, sha256: [UInt8], pdf: Data) {
        self.documentId = documentId
        self.name = name
        self.pageCount = pageCount
        self.sha256 = sha256
        self.pdf = pdf
    }
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

    public init(
        recipientId: String, type: String, name: String, email: String?, routingOrder: Int, clientUserId: String?,
        hostName: String?, hostEmail: String?, status: String, statusChangedAtNanos: Int64?, declineReason: String?
    ) {
        self.recipientId = recipientId
        self.type = type
        self.name = name
        self.email = email
        self.routingOrder = routingOrder
        self.clientUserId = clientUserId
        self.hostName = hostName
        self.hostEmail = hostEmail
        self.status = status
        self.statusChangedAtNanos = statusChangedAtNanos
        self.declineReason = declineReason
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

    public init(
        tabIndex: Int, recipientId: String, documentId: String, fieldId: String, isoRecord: [UInt8], binding: [UInt8],
        bindingSignature: [UInt8]
    ) {
        self.tabIndex = tabIndex
        self.recipientId = recipientId
        self.documentId = documentId
        self.fieldId = fieldId
        self.isoRecord = isoRecord
        self.binding = binding
        self.bindingSignature = bindingSignature
    }
}

extension Date {
    /// This time as the payload's `*Nanos` fields carry it: nanoseconds since the Unix epoch,
    /// rounded; 0 for a time outside `Int64`'s range (the conversion never traps).
    public var nanosecondsSinceEpoch: Int64 {
        let value = (timeIntervalSince1970 * 1e9).rounded()
        guard value.isFinite, value > -9.2e18, value < 9.2e18 else { return 0 }
        return Int64(value)
    }
}
