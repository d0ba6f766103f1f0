/// Why a signing session ended without every local signer signing (the SDK's `DSMSigningExitReasonKey`).
///
/// An open set of values, as ``DeviceNodeError/Code`` is: compare with `==` (`reason == .decline`)
/// and keep a `default` when you switch over one, because new reasons may be added. The raw value
/// is stable and is what `Codable` writes.
public struct SigningExitReason: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    /// The stable name, e.g. `"ttlExpired"`.
    public let rawValue: String

    /// A reason by its stable name (one of the static members, or one a newer library sent).
    public init(rawValue: String) {
        self.rawValue = rawValue
    }

    public var description: String { rawValue }

    /// "Finish later": progress so far is kept; resume later.
    public static let cancel = SigningExitReason(rawValue: "cancel")
    /// The signer declined; the envelope goes to the server so it records the decline.
    public static let decline = SigningExitReason(rawValue: "decline")
    /// The signer's session expired.
    public static let tokenExpired = SigningExitReason(rawValue: "tokenExpired")
    /// Captive signing: the signing URL was opened after it expired (`ttl_expired`).
    public static let ttlExpired = SigningExitReason(rawValue: "ttlExpired")
    /// Captive signing: the page sat idle too long (`session_timeout`).
    public static let sessionTimeout = SigningExitReason(rawValue: "sessionTimeout")
    /// Captive signing: the URL had been used already, or the recipient had signed (`viewing_complete`).
    public static let viewingComplete = SigningExitReason(rawValue: "viewingComplete")
    /// Captive signing could not start or failed (`exception`); ``SigningCancelled/details`` says why,
    /// and a ``DeviceEvent/onlineSendFailed(_:)`` before it names the request that failed.
    public static let exception = SigningExitReason(rawValue: "exception")
}
