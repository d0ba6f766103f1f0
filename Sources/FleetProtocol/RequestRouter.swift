import Foundation
import Synchronization

/// What a server knows of who sent a request (docs/protocol.md, "Security model").
public enum PeerCredential: Sendable, Hashable {
    /// Plain TCP: the routing id the peer chose for itself. Anyone can claim any name.
    case claimedName(String)
    /// CURVE: the 32-byte public key the peer proved it holds in the handshake (the ZAP handler's
    /// `User-Id`). Which device it is comes from the enrollment that bound this key.
    case curveKey([UInt8])

    /// For logs: the claimed name, or `key:` and the key's first 8 bytes in hex.
    public var displayName: String {
        switch self {
        case .claimedName(let name): name
        case .curveKey(let key): "key:" + key.prefix(8).map { String(format: "%02x", $0) }.joined()
        }
    }
}

/// Who sent a request, as the server sees it.
public struct RequestContext: Sendable {
    /// Where the reply goes: the connection's ZeroMQ routing id. Under CURVE the server assigns
    /// it; it names a connection, never a device.
    public var peer: [UInt8]
    public var header: MessageHeader
    /// When the server received the message.
    public var receivedAt: ContinuousClock.Instant
    /// Who the sender is: what the transport proved (CURVE) or what the peer claimed (plain TCP).
    public var credential: PeerCredential
    /// What the handler adds to its reply's header (shared by copies of this context).
    public let replyMetadata = ReplyMetadata()

    public init(peer: [UInt8], header: MessageHeader, receivedAt: ContinuousClock.Instant, credential: PeerCredential) {
        self.peer = peer
        self.header = header
        self.receivedAt = receivedAt
        self.credential = credential
    }

    /// A plain-TCP context whose credential is the routing id read as UTF-8 (tests, old callers).
    public init(peer: [UInt8], header: MessageHeader, receivedAt: ContinuousClock.Instant) {
        self.init(peer: peer, header: header, receivedAt: receivedAt, credential: .claimedName(String(decoding: peer, as: UTF8.self)))
    }

    /// The sender for logs and messages (``PeerCredential/displayName``).
    public var peerName: String { credential.displayName }
}

/// Header fields a handler sets for its reply, success or error; the server
/// copies them into the reply's header after the handler returns.
public final class ReplyMetadata: Sendable {
    private let state = Mutex<RateLimitStatus?>(nil)

    public init() {}

    /// The caller's account rate-limit status, sent as the header's `rl`.
    public var rateLimit: RateLimitStatus? {
        get { state.withLock { $0 } }
        set { state.withLock { $0 = newValue } }
    }
}

/// A reply ready to be framed: its type and its encoded body.
public struct EncodedReply: Sendable {
    public var type: MessageType
    public var body: [UInt8]
}

/// Maps request types to typed handlers. Decoding the body and encoding the
/// reply happen here, so a handler sees only Swift values and throws
/// ``FleetError`` for anything the sender should hear about.
public struct RequestRouter: Sendable {
    public typealias Handler = @Sendable (InboundMessage, RequestContext) async -> Result<EncodedReply, FleetError>

    private var handlers: [MessageType: Handler] = [:]
    public var codec: WireCodec

    public init(codec: WireCodec = WireCodec()) {
        self.codec = codec
    }

    /// Registers the handler for one request type, replacing any earlier one.
    public mutating func on<Request: FleetRequest>(
        _ type: Request.Type,
        _ handler: @escaping @Sendable (Request, RequestContext) async throws(FleetError) -> Request.Reply
    ) {
        let codec = self.codec
        handlers[Request.messageType] = { message, context in
            do throws(FleetError) {
                let request = try codec.decodeBody(Request.self, from: message)
                let reply = try await handler(request, context)
                return .success(EncodedReply(type: Request.Reply.messageType, body: try codec.encodeBody(reply)))
            } catch {
                return .failure(error)
            }
        }
    }

    public func serves(_ type: MessageType) -> Bool { handlers[type] != nil }

    /// Runs the handler for the message's type.
    public func route(_ message: InboundMessage, context: RequestContext) async -> Result<EncodedReply, FleetError> {
        guard let handler = handlers[message.header.type] else {
            let kind = FleetMessageCatalog.requestTypes.contains(message.header.type) ? "not served by this peer" : "not a request type"
            return .failure(FleetError(.unknownMessageType, "message type \"\(message.header.type)\" is \(kind)"))
        }
        return await handler(message, context)
    }
}
