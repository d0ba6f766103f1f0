import Metrics
import Foundation
import Logging
import ZeroMQ

/// Settings of the server side of the wire.
public struct FleetServerConfiguration: Sendable {
    /// Where the ROUTER binds. `tcp://127.0.0.1:*` picks a free port (tests).
    public var endpoint: String
    /// Names the server software in ``HelloReply``.
    public var serverName: String
    /// Devices send a heartbeat after this long without other traffic.
    public var heartbeatInterval: Duration
    /// A device silent for `heartbeatInterval * heartbeatLiveness` is lost.
    public var heartbeatLiveness: Int
    public var limits: WireLimits
    /// Bounded queues: ZeroMQ drops nothing silently with ROUTER_MANDATORY,
    /// and a full queue makes `send` wait instead of growing memory.
    public var highWaterMark: Int32
    /// Requests handled at once, across all devices (each device's own requests are still
    /// handled one at a time, in the order they arrived). When this many are in progress or
    /// queued, the server stops reading the socket until one finishes, so a flood waits in
    /// ZeroMQ's bounded queue instead of growing memory.
    public var maxConcurrentRequests: Int

    public init(
        endpoint: String = "tcp://127.0.0.1:5555",
        serverName: String = "signfleet-coordinator/\(FleetProtocolInfo.softwareVersion)",
        heartbeatInterval: Duration = .seconds(1),
        heartbeatLiveness: Int = 3,
        limits: WireLimits = WireLimits(),
        highWaterMark: Int32 = 10_000,
        maxConcurrentRequests: Int = 256
    ) {
        self.endpoint = endpoint
        self.serverName = serverName
        self.heartbeatInterval = heartbeatInterval
        self.heartbeatLiveness = heartbeatLiveness
        self.limits = limits
        self.highWaterMark = highWaterMark
        self.maxConcurrentRequests = max(1, maxConcurrentRequests)
    }
}

public enum FleetProtocolInfo {
    public static let softwareVersion = "0.1.0"
}

/// A change in a peer's liveness as the server sees it.
public enum PeerEvent: Sendable, Hashable {
    case alive(String)
    case lost(String)
}

/// The ROUTER side of the wire: receives requests from devices, answers each
/// with exactly one reply (success or typed error), answers `hello` and
/// `heartbeat` itself, and tracks device liveness.
///
/// Requests of different devices are handled concurrently (up to
/// ``FleetServerConfiguration/maxConcurrentRequests``), so one device's slow push does not
/// hold up the others and concurrent pushes can share a commit; requests of one device are
/// handled one after another in arrival order (``PeerQueues``), which is what a device relies
/// on when it sends a request before the previous one was answered. `hello` and `heartbeat`,
/// which the server answers itself, are answered as they arrive.
///
/// ```swift
/// let server = FleetServer(configuration: .init(endpoint: "tcp://127.0.0.1:*"), router: router, loop: loop, logger: logger)
/// let endpoint = try await server.bind()   // the real port
/// try await server.run()                   // until the task is cancelled
/// ```
public actor FleetServer {
    public let configuration: FleetServerConfiguration
    /// Liveness changes of devices, for logs and tests.
    public nonisolated let peerEvents: AsyncStream<PeerEvent>

    private let router: RequestRouter
    private let codec: WireCodec
    private let loop: ZMQIOLoop
    private let logger: Logger
    /// Identifies this server run (sent in ``HelloReply`` and ``HeartbeatReply``; fresh on every start).
    public nonisolated let instance = UUID().uuidString
    private let peerEventsContinuation: AsyncStream<PeerEvent>.Continuation
    private var socket: AsyncSocket?
    private var boundEndpoint: String?
    private var liveness: LivenessTable<[UInt8]>
    private var nextID: UInt64 = 1
    private let metrics: FleetServerMetrics
    private var queues: PeerQueues<ReceivedRequest>

    /// - Parameter metricsFactory: where ``FleetServerMetrics`` are reported; the process-wide
    ///   `MetricsSystem.factory` unless given.
    public init(
        configuration: FleetServerConfiguration, router: RequestRouter, loop: ZMQIOLoop, logger: Logger,
        metricsFactory: any MetricsFactory = MetricsSystem.factory
    ) {
        self.metrics = FleetServerMetrics(factory: metricsFactory)
        self.configuration = configuration
        self.router = router
        self.codec = WireCodec(limits: configuration.limits)
        self.loop = loop
        self.logger = logger
        self.liveness = LivenessTable(interval: configuration.heartbeatInterval, liveness: configuration.heartbeatLiveness)
        self.queues = PeerQueues(capacity: configuration.maxConcurrentRequests)
        (peerEvents, peerEventsContinuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(10_000))
    }

    /// Opens and binds the ROUTER; returns the bound endpoint (with the real port).
    @discardableResult
    public func bind() async throws -> String {
        if let boundEndpoint { return boundEndpoint }
        var options = SocketOptions()
        options.routerMandatory = true
        options.routerHandover = true
        options.maxMessageSize = Int64(configuration.limits.maxMessageSize)
        options.sendHighWaterMark = configuration.highWaterMark
        options.receiveHighWaterMark = configuration.highWaterMark
        options.linger = 0
        let socket = try await loop.makeSocket(.router, options: options)
        do {
            let endpoint = try await socket.bind(configuration.endpoint)
            self.socket = socket
            self.boundEndpoint = endpoint
            logger.info("listening", metadata: ["endpoint": "\(endpoint)"])
            return endpoint
        } catch {
            await socket.close()
            throw error
        }
    }

    /// Serves until the calling task is cancelled, then closes the socket.
    public func run() async throws {
        try await bind()
        guard let socket else { return }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.serve(socket) }
            group.addTask { await self.sweepLiveness() }
            await group.next()
            group.cancelAll()
        }
        await socket.close()
        self.socket = nil
        peerEventsContinuation.finish()
        logger.info("stopped")
    }

    private func serve(_ socket: AsyncSocket) async {
        await withDiscardingTaskGroup { group in
            do {
                for try await frames in socket.messages {
                    guard let peer = frames.first else { continue }
                    noteHeard(peer)
                    let receivedAt = ContinuousClock.now
                    guard let request = await accept(frames, from: peer, on: socket) else { continue }
                    // `hello` and `heartbeat` are answered here, at once: the server answers them
                    // itself, and a device's liveness must not wait behind its own slow push.
                    if request.header.type == Hello.messageType || request.header.type == Heartbeat.messageType {
                        await answer(request, peer: peer, receivedAt: receivedAt, on: socket)
                        continue
                    }
                    await waitForCapacity()
                    // A device with a request in progress gets this one queued behind it;
                    // otherwise a task starts handling the device's requests.
                    if queues.enqueue(ReceivedRequest(request: request, receivedAt: receivedAt), for: peer) {
                        group.addTask { await self.handleRequests(of: peer, on: socket) }
                    }
                }
            } catch is CancellationError {
                // a normal stop
            } catch {
                logger.error("receive failed", metadata: ["error": "\(error)"])
            }
            group.cancelAll()
        }
    }

    /// Decodes a message; answers an unreadable one with its typed error and drops a stray
    /// reply (both return nil).
    private func accept(_ frames: [[UInt8]], from peer: [UInt8], on socket: AsyncSocket) async -> InboundMessage? {
        let request: InboundMessage
        do {
            request = try codec.decode(frames.dropFirst())
        } catch {
            logger.notice(
                "refused message", metadata: ["device": "\(String(decoding: peer, as: UTF8.self))", "error": "\(error.error)"])
            metrics.countRequest(type: error.header?.type, outcome: error.error.code.rawValue)
            await reply(.failure(error.error), to: peer, replyTo: error.header?.id, on: socket)
            return nil
        }
        if request.header.replyTo != nil {
            // Devices do not answer server requests yet; a stray reply is dropped, not answered,
            // so two peers can never ping-pong errors at each other.
            logger.debug("ignored reply from device", metadata: ["type": "\(request.header.type)"])
            return nil
        }
        return request
    }

    /// Handles `peer`'s queued requests in order until its queue is empty.
    private func handleRequests(of peer: [UInt8], on socket: AsyncSocket) async {
        while let received = queues.next(for: peer) {
            await answer(received.request, peer: peer, receivedAt: received.receivedAt, on: socket)
            queues.finished()
            if let waiter = capacityWaiter, queues.hasCapacity {
                capacityWaiter = nil
                waiter.resume()
            }
        }
    }

    /// The receive loop waiting for a free slot (only that loop ever waits).
    private var capacityWaiter: CheckedContinuation<Void, Never>?

    private func waitForCapacity() async {
        guard !queues.hasCapacity else { return }
        await withCheckedContinuation { capacityWaiter = $0 }
    }

    private func noteHeard(_ peer: [UInt8]) {
        if liveness.heard(peer, at: .now) == .alive {
            let name = String(decoding: peer, as: UTF8.self)
            logger.info("device alive", metadata: ["device": "\(name)"])
            peerEventsContinuation.yield(.alive(name))
            metrics.connectedDevices.record(liveness.alivePeers.count)
        }
    }

    private func answer(_ request: InboundMessage, peer: [UInt8], receivedAt: ContinuousClock.Instant, on socket: AsyncSocket) async {
        let context = RequestContext(peer: peer, header: request.header, receivedAt: receivedAt)
        let result: Result<EncodedReply, FleetError>
        switch request.header.type {
        case Hello.messageType: result = hello(request, context: context)
        case Heartbeat.messageType:
            logger.debug("heartbeat", metadata: ["device": "\(context.peerName)"])
            result = encoded(HeartbeatReply(serverInstance: instance))
        default: result = await router.route(request, context: context)
        }
        metrics.countRequest(type: request.header.type, outcome: Self.outcome(of: result))
        await reply(result, to: peer, replyTo: request.header.id, rateLimit: context.replyMetadata.rateLimit, on: socket)
    }

    /// The reply type of a success, the error code of a failure (the `outcome` dimension).
    static func outcome(of result: Result<EncodedReply, FleetError>) -> String {
        switch result {
        case .success(let reply): reply.type.rawValue
        case .failure(let error): error.code.rawValue
        }
    }

    /// How many devices are alive now (heard from within the liveness timeout).
    public var aliveDeviceCount: Int { liveness.alivePeers.count }

    private func hello(_ message: InboundMessage, context: RequestContext) -> Result<EncodedReply, FleetError> {
        do {
            let hello = try codec.decodeBody(Hello.self, from: message)
            guard hello.deviceID == context.peerName else {
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
                    heartbeatIntervalMs: UInt32(configuration.heartbeatInterval.milliseconds),
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

    private func reply(
        _ result: Result<EncodedReply, FleetError>, to peer: [UInt8], replyTo: UInt64?, rateLimit: RateLimitStatus? = nil,
        on socket: AsyncSocket
    ) async {
        let encodedReply: EncodedReply
        switch result {
        case .success(let value): encodedReply = value
        case .failure(let error):
            guard case .success(let value) = encoded(error) else { return }
            encodedReply = value
        }
        let header = MessageHeader(type: encodedReply.type, id: nextID, replyTo: replyTo, rateLimit: rateLimit)
        nextID &+= 1
        do {
            let headerFrame = try codec.encodeHeader(header)
            try await socket.send([peer, headerFrame, encodedReply.body])
        } catch {
            // EHOSTUNREACH: the device disconnected before its reply was ready.
            // It will resend the request (same id) and get the same answer.
            logger.notice(
                "reply not delivered",
                metadata: ["device": "\(String(decoding: peer, as: UTF8.self))", "error": "\(error)"])
        }
    }

    private func sweepLiveness() async {
        while !Task.isCancelled {
            do {
                try await Task.sleep(for: configuration.heartbeatInterval)
            } catch {
                return
            }
            for peer in liveness.sweep(at: .now) {
                let name = String(decoding: peer, as: UTF8.self)
                logger.warning("device lost", metadata: ["device": "\(name)"])
                peerEventsContinuation.yield(.lost(name))
            }
            metrics.connectedDevices.record(liveness.alivePeers.count)
        }
    }
}

extension Duration {
    /// Whole milliseconds, rounded down.
    var milliseconds: Int64 {
        components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000
    }
}
