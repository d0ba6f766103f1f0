import Foundation

/// The protocol version a message was written for. Peers accept any minor
/// version of the major version they speak; a different major is refused.
public struct ProtocolVersion: Sendable, Hashable, Codable, CustomStringConvertible {
    public var major: UInt16
    public var minor: UInt16

    public init(major: UInt16, minor: UInt16) {
        self.major = major
        self.minor = minor
    }

    /// The version this build speaks.
    public static let current = ProtocolVersion(major: 1, minor: 0)

    public var description: String { "\(major).\(minor)" }

    // On the wire: a two-element array `[major, minor]`.
    public init(from decoder: any Decoder) throws {
        var container = try decoder.unkeyedContainer()
        major = try container.decode(UInt16.self)
        minor = try container.decode(UInt16.self)
        if !container.isAtEnd {
            throw DecodingError.dataCorruptedError(
                in: container, debugDescription: "version must be [major, minor]")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.unkeyedContainer()
        try container.encode(major)
        try container.encode(minor)
    }
}

/// A message type name such as `sync.push`. A struct, not an enum, so that a
/// type this build does not know still decodes and can be answered with
/// ``FleetErrorCode/unknownMessageType``.
public struct MessageType: Sendable, Hashable, Codable, CustomStringConvertible,
    ExpressibleByStringLiteral
{
    public var rawValue: String

    public init(_ rawValue: String) { self.rawValue = rawValue }
    public init(stringLiteral value: String) { self.rawValue = value }

    public init(from decoder: any Decoder) throws {
        rawValue = try decoder.singleValueContainer().decode(String.self)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }

    public var description: String { rawValue }
}

/// Rate-limit state of the caller's account, reported in every reply once the
/// coordinator enforces limits.
public struct RateLimitStatus: Sendable, Hashable, Codable {
    /// Requests left in the tightest window.
    public var remaining: UInt32
    /// When that window resets.
    public var resetAt: Date

    public init(remaining: UInt32, resetAt: Date) {
        self.remaining = remaining
        self.resetAt = resetAt
    }
}

/// The first frame of every message.
///
/// A request has a fresh `id` and no `replyTo`; its reply has its own `id`
/// and `replyTo` set to the request's `id`. Ids are unsigned 64-bit numbers
/// chosen by the sender, unique per sender for the life of its process.
public struct MessageHeader: Sendable, Hashable, Codable {
    public var version: ProtocolVersion
    public var type: MessageType
    public var id: UInt64
    public var replyTo: UInt64?
    public var sentAt: Date
    public var rateLimit: RateLimitStatus?

    public init(
        version: ProtocolVersion = .current,
        type: MessageType,
        id: UInt64,
        replyTo: UInt64? = nil,
        sentAt: Date = WallClock.system.now(),
        rateLimit: RateLimitStatus? = nil
    ) {
        self.version = version
        self.type = type
        self.id = id
        self.replyTo = replyTo
        self.sentAt = sentAt
        self.rateLimit = rateLimit
    }

    enum CodingKeys: String, CodingKey {
        case version = "v"
        case type = "t"
        case id = "id"
        case replyTo = "re"
        case sentAt = "at"
        case rateLimit = "rl"
    }
}
