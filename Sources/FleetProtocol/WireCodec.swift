import Foundation
import MessagePack

/// Size and shape limits applied to every received message.
public struct WireLimits: Sendable {
    /// The largest frame accepted, in bytes. Also set as the socket's
    /// ZMQ_MAXMSGSIZE so that oversized frames are dropped before allocation.
    public var maxMessageSize: Int
    /// Limits of the MessagePack decoder (depth, collection sizes).
    public var messagePack: MessagePackLimits

    public init(maxMessageSize: Int = 16 << 20, messagePack: MessagePackLimits = .default) {
        self.maxMessageSize = maxMessageSize
        self.messagePack = messagePack
    }
}

/// A received message whose header has been checked; the body is decoded on
/// demand, once the receiver knows which type to expect.
public struct InboundMessage: Sendable {
    public var header: MessageHeader
    public var body: [UInt8]

    public init(header: MessageHeader, body: [UInt8]) {
        self.header = header
        self.body = body
    }
}

/// Why a message could not be accepted, with its header when that much was readable
/// (so the error reply can name the request it answers).
public struct WireDecodingFailure: Error, Sendable {
    public var error: FleetError
    public var header: MessageHeader?
}

/// Turns typed messages into frames and frames back into typed messages.
///
/// A message is two ZeroMQ frames: the MessagePack-encoded ``MessageHeader``
/// and the MessagePack-encoded body. (A ROUTER sees the sender's routing id
/// as an extra first frame; that frame is not part of the message.)
public struct WireCodec: Sendable {
    public var limits: WireLimits

    public init(limits: WireLimits = WireLimits()) {
        self.limits = limits
    }

    /// Encodes a header and body into the two frames of a message.
    /// - Throws: ``FleetError`` with code `internal` when the body cannot be encoded.
    public func encode<Body: FleetMessageBody>(_ body: Body, header: MessageHeader) throws(FleetError) -> [[UInt8]] {
        [try encodeHeader(header), try encodeBody(body)]
    }

    /// Encodes the header frame alone (for replies whose body is already encoded).
    public func encodeHeader(_ header: MessageHeader) throws(FleetError) -> [UInt8] {
        do {
            return try MessagePackEncoder().encode(header)
        } catch {
            throw FleetError(.internal, "cannot encode header of \(header.type): \(error)")
        }
    }

    /// Encodes the body frame alone.
    public func encodeBody<Body: FleetMessageBody>(_ body: Body) throws(FleetError) -> [UInt8] {
        do {
            return try MessagePackEncoder().encode(body)
        } catch {
            throw FleetError(.internal, "cannot encode \(Body.messageType): \(error)")
        }
    }

    /// Checks frame count and sizes, decodes the header, and checks its
    /// version and type. The body is left for ``decodeBody(_:from:)``.
    public func decode(_ frames: some Collection<[UInt8]>) throws(WireDecodingFailure) -> InboundMessage {
        guard frames.count == 2, let headerFrame = frames.first, let bodyFrame = frames.dropFirst().first else {
            // A readable header still lets the error name the request it answers (`re`).
            let header = frames.first.flatMap { frame in
                frame.count <= limits.maxMessageSize
                    ? try? MessagePackDecoder(limits: limits.messagePack).decode(MessageHeader.self, from: frame) : nil
            }
            throw WireDecodingFailure(
                error: FleetError(.malformedMessage, "a message is 2 frames (header, body); got \(frames.count)"),
                header: header)
        }
        for (name, frame) in [("header", headerFrame), ("body", bodyFrame)] where frame.count > limits.maxMessageSize {
            throw WireDecodingFailure(
                error: FleetError(
                    .messageTooLarge, "\(name) frame is \(frame.count) bytes; the limit is \(limits.maxMessageSize)"),
                header: nil)
        }
        let decoder = MessagePackDecoder(limits: limits.messagePack)
        let header: MessageHeader
        do {
            header = try decoder.decode(MessageHeader.self, from: headerFrame)
        } catch {
            // A header from another major version may have another shape:
            // read just its version to say so rather than "malformed".
            if let probe = try? decoder.decode(VersionProbe.self, from: headerFrame),
                probe.v.major != ProtocolVersion.current.major
            {
                throw WireDecodingFailure(error: Self.unsupported(probe.v), header: nil)
            }
            throw WireDecodingFailure(error: FleetError(.malformedMessage, "bad header: \(error)"), header: nil)
        }
        guard header.version.major == ProtocolVersion.current.major else {
            throw WireDecodingFailure(error: Self.unsupported(header.version), header: header)
        }
        guard FleetMessageCatalog.isKnown(header.type) else {
            throw WireDecodingFailure(
                error: FleetError(.unknownMessageType, "unknown message type \"\(header.type)\""), header: header)
        }
        return InboundMessage(header: header, body: bodyFrame)
    }

    /// Decodes a body as the given type.
    /// - Throws: ``FleetError`` with code `invalid_body`, naming the field at fault.
    public func decodeBody<Body: FleetMessageBody>(_ type: Body.Type, from message: InboundMessage) throws(FleetError) -> Body {
        do {
            return try MessagePackDecoder(limits: limits.messagePack).decode(Body.self, from: message.body)
        } catch {
            throw FleetError(.invalidBody, "body of \(message.header.type) is not a valid \(Body.messageType): \(error)")
        }
    }

    private static func unsupported(_ version: ProtocolVersion) -> FleetError {
        FleetError(
            .unsupportedVersion,
            "protocol version \(version) is not supported; this peer speaks \(ProtocolVersion.current.major).x")
    }

    private struct VersionProbe: Decodable {
        var v: ProtocolVersion
    }
}
