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
public enum SigningViewEvent: String, Sendable, Hashable, Codable, CaseIterable {
    /// The recipient signed; routing moved on.
    case signingComplete = "signing_complete"
    /// The recipient declined (with a reason); the envelope is declined.
    case decline
    /// "Finish later": nothing was signed; ask for a new URL to continue.
    case cancel
    /// The URL was opened after its five minutes.
    case ttlExpired = "ttl_expired"
    /// The page sat idle longer than the session's inactivity timeout.
    case sessionTimeout = "session_timeout"
    /// A finished session's URL was opened again, or the recipient had already signed.
    case viewingComplete = "viewing_complete"
    /// The envelope could not be signed (voided, declined by someone else) or the server failed.
    case exception
}
