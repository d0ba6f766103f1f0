import Foundation

/// The code of a ``FleetError``: a string on the wire, so that codes added
/// later stay readable to older peers (which treat unknown codes by their
/// `retryable` flag).
public struct FleetErrorCode: Sendable, Hashable, Codable, CustomStringConvertible {
    public var rawValue: String
    public init(_ rawValue: String) { self.rawValue = rawValue }

    public init(from decoder: any Decoder) throws {
        rawValue = try decoder.singleValueContainer().decode(String.self)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }

    public var description: String { rawValue }

    /// The header's major version is not one the receiver speaks.
    public static let unsupportedVersion = FleetErrorCode("unsupported_version")
    /// The header's type is not a request type the receiver knows.
    public static let unknownMessageType = FleetErrorCode("unknown_message_type")
    /// The frames are not a header and a body, or are not valid MessagePack.
    public static let malformedMessage = FleetErrorCode("malformed_message")
    /// The body is valid MessagePack but not the shape its type requires.
    public static let invalidBody = FleetErrorCode("invalid_body")
    /// A frame is larger than the receiver's limit.
    public static let messageTooLarge = FleetErrorCode("message_too_large")
    /// The request is well-formed but asks for something that is not allowed.
    public static let invalidRequest = FleetErrorCode("invalid_request")
    /// No valid credentials: log in or enroll first.
    public static let unauthenticated = FleetErrorCode("unauthenticated")
    /// The access token was valid once but has expired.
    public static let tokenExpired = FleetErrorCode("token_expired")
    /// Authenticated, but this caller may not do this.
    public static let forbidden = FleetErrorCode("forbidden")
    /// The named object does not exist.
    public static let notFound = FleetErrorCode("not_found")
    /// The account has no offline-signing feature.
    public static let featureDisabled = FleetErrorCode("feature_disabled")
    /// Too many requests; wait `retryAfterMs` and try again.
    public static let rateLimited = FleetErrorCode("rate_limited")
    /// No reply arrived in time (raised locally by a client, never sent).
    public static let timeout = FleetErrorCode("timeout")
    /// The server has as much work as it takes now; send again after `retryAfterMs` (retryable).
    public static let busy = FleetErrorCode("busy")
    /// The server is shutting down or cannot serve now.
    public static let unavailable = FleetErrorCode("unavailable")
    /// A sync item reuses a sequence number the server applied with a different payload.
    public static let conflict = FleetErrorCode("conflict")
    /// A signature does not verify with the enrolled key.
    public static let badSignature = FleetErrorCode("bad_signature")
    /// The server has applied fewer of a device's items than the device holds receipts for: its
    /// store lost them (raised locally by a device, never sent; docs/sync.md).
    public static let storeRegression = FleetErrorCode("store_regression")
    /// A bug or failure inside the server.
    public static let `internal` = FleetErrorCode("internal")
}

/// A typed error: the body of an `error` reply, and what clients throw.
///
/// `retryable` tells a client whether sending the same request again (with
/// the same request id) may succeed.
public struct FleetError: Error, Sendable, Hashable, Codable, CustomStringConvertible {
    public var code: FleetErrorCode
    public var message: String
    public var retryable: Bool
    /// For `rate_limited` and `busy`: how long to wait before retrying.
    public var retryAfterMs: UInt64?

    public init(_ code: FleetErrorCode, _ message: String, retryable: Bool = false, retryAfterMs: UInt64? = nil) {
        self.code = code
        self.message = message
        self.retryable = retryable
        self.retryAfterMs = retryAfterMs
    }

    public var description: String {
        var text = "\(code): \(message)"
        if retryable { text += " (retryable)" }
        if let retryAfterMs { text += " retry after \(retryAfterMs) ms" }
        return text
    }
}

extension FleetError: FleetMessageBody {
    public static let messageType: MessageType = "error"
}
