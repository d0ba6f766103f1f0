import Foundation

/// An integrator's backend asks for a captive signing URL for one embedded recipient, named
/// by its recipient id, to hand to an app that presents it without logging in (the SDK's
/// `presentCaptiveSigning(signingUrl:envelopeId:recipientId:)`). Same rules and reply as
/// `recipient.view` (docs/captive-signing.md).
public struct SigningURLRequest: FleetRequest, Hashable {
    public typealias Reply = RecipientViewReply
    public static let messageType: MessageType = "signing.url.create"

    /// An access token of the envelope's account (the backend's own user).
    public var accessToken: String
    public var envelopeID: String
    public var recipientID: String
    /// Where the browser goes when signing ends, with `event=...` appended.
    public var returnURL: String
    /// A BCP 47 language tag for the page.
    public var locale: String?

    public init(accessToken: String, envelopeID: String, recipientID: String, returnURL: String, locale: String? = nil) {
        self.accessToken = accessToken
        self.envelopeID = envelopeID
        self.recipientID = recipientID
        self.returnURL = returnURL
        self.locale = locale
    }
}

/// How a captive signing session ended: the `event` query parameter the coordinator appends to
/// the return URL (DocuSign's embedded-signing event values).
///
/// An open set of values, as ``FleetErrorCode`` is: DocuSign has more events than these, and a
/// newer coordinator may send one this library does not name. Compare with `==`, and keep a
/// `default` when you switch over one. ``allCases`` lists the values this version sends.
public struct SigningViewEvent: RawRepresentable, Sendable, Hashable, Codable, CaseIterable, CustomStringConvertible {
    /// The value on the wire, e.g. `"signing_complete"`.
    public let rawValue: String

    /// An event by its wire value (one of the static members, or one a newer coordinator sent).
    public init(rawValue: String) {
        self.rawValue = rawValue
    }

    public var description: String { rawValue }

    /// The recipient signed; routing moved on.
    public static let signingComplete = SigningViewEvent(rawValue: "signing_complete")
    /// The recipient declined (with a reason); the envelope is declined.
    public static let decline = SigningViewEvent(rawValue: "decline")
    /// "Finish later": nothing was signed; ask for a new URL to continue.
    public static let cancel = SigningViewEvent(rawValue: "cancel")
    /// The URL was opened after its five minutes.
    public static let ttlExpired = SigningViewEvent(rawValue: "ttl_expired")
    /// The page sat idle longer than the session's inactivity timeout.
    public static let sessionTimeout = SigningViewEvent(rawValue: "session_timeout")
    /// A finished session's URL was opened again, or the recipient had already signed.
    public static let viewingComplete = SigningViewEvent(rawValue: "viewing_complete")
    /// The envelope could not be signed (voided, declined by someone else) or the server failed.
    public static let exception = SigningViewEvent(rawValue: "exception")

    /// The events this version of the coordinator sends.
    public static let allCases: [SigningViewEvent] = [
        .signingComplete, .decline, .cancel, .ttlExpired, .sessionTimeout, .viewingComplete, .exception,
    ]
}
