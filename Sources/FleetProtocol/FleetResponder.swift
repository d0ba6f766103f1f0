import Foundation

/// What a coordinator answers, apart from how the request arrived: `hello` and `heartbeat`
/// itself, every other request through its ``RequestRouter``.
///
/// ``FleetServer`` calls it for every message it reads from its ROUTER; FleetTesting's in-process
/// transport calls it directly, so a test without sockets gets the same answers, `hello` and the
/// server instance included. It does no I/O and trusts the ``RequestContext`` it is given: who
/// sent a request is the caller's to establish (the ROUTER's ZAP handler, or the in-process
/// transport's own handshake), never the sender's to claim.
///
/// ```swift
/// let responder = FleetResponder(router: router, configuration: FleetServerConfiguration())
/// let result = await responder.answer(message, context: context)
/// ```
public struct FleetResponder: Sendable {
    public let router: RequestRouter
    public let configuration: FleetServerConfiguration
    /// Identifies this server run (sent in ``HelloReply`` and ``HeartbeatReply``).
    public let instance: String
    private let codec: WireCodec

    /// - Parameters:
    ///   - router: answers every request but `hello` and `heartbeat`.
    ///   - configuration: the server's settings (limits, heartbeat interval).
    ///   - instance: this server run's id; a fresh UUID unless given.
    public init(router: RequestRouter, configuration: FleetServerConfiguration, instance: String = UUID().uuidString) {
        self.router = router
        self.configuration = configuration
        self.instance = instance
        self.codec = WireCodec(limits: configuration.limits)
    }

    /// The answer to one decoded request: a reply to encode, or the typed error to send back.
    /// - Parameters:
    ///   - request: the decoded request.
    ///   - context: who sent it, as the caller established.
    ///   - heartbeatInterval: what a `hello` announces (``FleetServerConfiguration/announcedHeartbeatInterval(connected:)``);
    ///     the configured interval when nil.
    public func answer(
        _ request: InboundMessage, context: RequestContext, heartbeatInterval: Duration? = nil
    ) async -> Result<EncodedReply, FleetError> {
        switch request.header.type {
        case Hello.messageType: hello(request, context: context, heartbeatInterval: heartbeatInterval ?? configuration.heartbeatInterval)
        case Heartbeat.messageType:
            // Its body is `{}`: read like any request's, so `[]` is `invalid_body`, not a heartbeat.
            Result { () throws(FleetError) in _ = try codec.decodeBody(Heartbeat.self, from: request) }.flatMap {
                encoded(HeartbeatReply(serverInstance: instance, heartbeatIntervalMs: heartbeatInterval.map { UInt32(clamping: $0.milliseconds) }))
            }
        default: await router.route(request, context: context)
        }
    }

    private func hello(_ message: InboundMessage, context: RequestContext, heartbeatInterval: Duration) -> Result<EncodedReply, FleetError> {
        do {
            let hello = try codec.decodeBody(Hello.self, from: message)
            // Under CURVE the key is the identity and `hello` grants nothing, so its device id is
            // only checked (against the enrollment) by the requests that act for a device.
            if case .claimedName(let name) = context.credential, hello.deviceID != name {
                return .failure(
                    FleetError(
                        .invalidRequest,
                        "hello names device \"\(hello.deviceID)\" but the socket's routing id is \"\(context.peerName)\"; set the DEALER's routing id to the device id"
                    ))
            }
            guard hello.supportedMajorVersions.contains(ProtocolVersion.current.major) else {
                return .failure(
                    FleetError(.unsupportedVersion, "this server speaks protocol \(ProtocolVersion.current.major).x only"))
            }
            return encoded(
                HelloReply(
                    server: configuration.serverName,
                    heartbeatIntervalMs: UInt32(clamping: heartbeatInterval.milliseconds),
                    heartbeatLiveness: UInt32(configuration.heartbeatLiveness),
                    maxMessageSize: UInt32(clamping: configuration.limits.maxMessageSize),
                    serverInstance: instance))
        } catch {
            return .failure(error)
        }
    }

    private func encoded<Body: FleetMessageBody>(_ body: Body) -> Result<EncodedReply, FleetError> {
        Result { () throws(FleetError) in EncodedReply(type: Body.messageType, body: try codec.encodeBody(body)) }
    }
}
