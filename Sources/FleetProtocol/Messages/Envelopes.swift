import Foundation

/// Asks for a synced envelope of the token's account: its status and its recipients'.
/// Another account's envelope is `not_found` (docs/protocol.md, "Envelopes").
public struct EnvelopeQuery: FleetRequest, Hashable {
    public typealias Reply = EnvelopeQueryReply
    public static let messageType: MessageType = "envelope.get"

    public var accessToken: String
    /// The server's envelope id (`env-...`, from the sync receipt).
    public var envelopeID: String

    public init(accessToken: String, envelopeID: String) {
        self.accessToken = accessToken
        self.envelopeID = envelopeID
    }
}

/// Voids a `sent` or `delivered` envelope of the token's account, with a non-empty reason.
/// The reply is the envelope after the change.
public struct EnvelopeVoid: FleetRequest, Hashable {
    public typealias Reply = EnvelopeQueryReply
    public static let messageType: MessageType = "envelope.void"

    public var accessToken: String
    public var envelopeID: String
    /// Why the envelope is voided (1 to 500 characters after trimming).
    public var reason: String

    public init(accessToken: String, envelopeID: String, reason: String) {
        self.accessToken = accessToken
        self.envelopeID = envelopeID
        self.reason = reason
    }
}

/// A simulation hook: acts for a remote recipient (who would otherwise deliver, sign or
/// decline through captive signing) of an envelope of the token's account. The reply is
/// the envelope after the change.
public struct RecipientAction: FleetRequest, Hashable {
    public typealias Reply = EnvelopeQueryReply
    public static let messageType: MessageType = "envelope.recipient.action"

    /// What the recipient does.
    public enum Action: String, Sendable, Hashable, Codable, CaseIterable {
        /// Opens the envelope.
        case deliver
        /// Signs (or finishes a non-signing role).
        case sign
        /// Declines, with a reason.
        case decline
    }

    public var accessToken: String
    public var envelopeID: String
    public var recipientID: String
    public var action: Action
    /// Required (non-empty) for `decline`; ignored otherwise.
    public var reason: String?

    public init(accessToken: String, envelopeID: String, recipientID: String, action: Action, reason: String? = nil) {
        self.accessToken = accessToken
        self.envelopeID = envelopeID
        self.recipientID = recipientID
        self.action = action
        self.reason = reason
    }
}

/// An envelope on the server: the reply to `envelope.get`, `envelope.void` and
/// `envelope.recipient.action`.
public struct EnvelopeQueryReply: FleetMessageBody, Hashable {
    public static let messageType: MessageType = "envelope.reply"

    /// One recipient and where it stands.
    public struct Recipient: Sendable, Hashable, Codable {
        public var recipientID: String
        /// The raw recipient type (`signer`, `inPersonSigner`, `carbonCopy`, ...).
        public var type: String
        public var name: String
        public var routingOrder: Int
        /// `created`, `sent`, `delivered`, `signed`, `completed`, `declined` (or `autoResponded`).
        public var status: String
        public var statusChangedAt: Date?
        public var declineReason: String?

        public init(
            recipientID: String, type: String, name: String, routingOrder: Int, status: String,
            statusChangedAt: Date? = nil, declineReason: String? = nil
        ) {
            self.recipientID = recipientID
            self.type = type
            self.name = name
            self.routingOrder = routingOrder
            self.status = status
            self.statusChangedAt = statusChangedAt
            self.declineReason = declineReason
        }
    }

    public var envelopeID: String
    /// `sent`, `delivered`, `completed`, `declined` or `voided`.
    public var status: String
    public var transactionID: String
    /// The device that synced the envelope.
    public var deviceID: String
    /// When the server applied the envelope.
    public var createdAt: Date
    /// Set once the envelope is voided.
    public var voidReason: String?
    /// In routing order, then recipient id.
    public var recipients: [Recipient]

    public init(
        envelopeID: String, status: String, transactionID: String, deviceID: String, createdAt: Date,
        voidReason: String? = nil, recipients: [Recipient]
    ) {
        self.envelopeID = envelopeID
        self.status = status
        self.transactionID = transactionID
        self.deviceID = deviceID
        self.createdAt = createdAt
        self.voidReason = voidReason
        self.recipients = recipients
    }
}
