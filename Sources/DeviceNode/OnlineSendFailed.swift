/// Fields of ``DeviceEvent/onlineSendFailed(_:)``: a request the device sent to the server while
/// online, outside the outbox, failed.
///
/// Captive signing is the device's online path: it asks the coordinator for a signing URL
/// (`recipient.view`), then opens the signing page and posts the signer's answer over HTTP. When
/// one of those fails, this event says which request failed and why, before the
/// ``DeviceEvent/signingCancelled(_:)`` with ``SigningExitReason/exception`` that ends the session
/// (the SDK's notification). Items sent through the outbox report failures with
/// ``DeviceEvent/syncFailed(_:)`` instead.
public struct OnlineSendFailed: Hashable, Sendable {
    /// Which request failed: an open set of values (compare with `==`; more may be added).
    public struct Request: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        /// The stable name, e.g. `"recipientView"`.
        public let rawValue: String
        /// A request by its stable name.
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// Asking the coordinator for a captive signing URL (`recipient.view`).
        public static let recipientView = Request(rawValue: "recipientView")
        /// Opening the captive signing page or posting the signer's answer to it (HTTP).
        public static let signingPage = Request(rawValue: "signingPage")
    }

    /// Why it failed: an open set of values (compare with `==`; more may be added).
    public struct Reason: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        /// The stable name, e.g. `"refused"`.
        public let rawValue: String
        /// A reason by its stable name.
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// The server answered and said no (``OnlineSendFailed/serverCode`` has its code): no unique
        /// recipient, not their turn, an unknown or used URL, input the page refused.
        public static let refused = Reason(rawValue: "refused")
        /// The server took the request and failed (the page sent the browser back with `event=exception`).
        public static let serverFailed = Reason(rawValue: "serverFailed")
        /// No answer: the server could not be reached, or did not answer within the API timeout.
        public static let unreachable = Reason(rawValue: "unreachable")
        /// The device could not send it: the signing URL is not an http(s) URL.
        public static let invalidRequest = Reason(rawValue: "invalidRequest")
        /// The server answered with something the device cannot read (a page without its data block or CSRF token).
        public static let unreadableReply = Reason(rawValue: "unreadableReply")
    }

    /// Creates the event fields.
    public init(envelope: EnvelopeIDs, recipientId: String, request: Request, reason: Reason, serverCode: String? = nil, message: String) {
        self.envelope = envelope
        self.recipientId = recipientId
        self.request = request
        self.reason = reason
        self.serverCode = serverCode
        self.message = message
    }

    /// The envelope: ``EnvelopeIDs/serverId`` always; the local id and transaction id when this
    /// device knows them (docs/captive-signing.md, "Events").
    public var envelope: EnvelopeIDs
    /// The recipient (their recipient id, or the client user id the app asked with when the server named nobody).
    public var recipientId: String
    /// Which request failed.
    public var request: Request
    /// Why.
    public var reason: Reason
    /// The server's code when it answered: a `FleetErrorCode` raw value for
    /// `recipient.view` (`not_found`, `invalid_request`, …), `http 404` for the page, `exception` for a
    /// page that ended with `event=exception`.
    public var serverCode: String?
    /// What happened, for people (the server's message when it gave one).
    public var message: String
}
