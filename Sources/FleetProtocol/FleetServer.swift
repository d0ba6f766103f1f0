import Metrics
import Foundation
import Logging
import Synchronization
import ZeroMQ

/// How the wire is secured (docs/protocol.md, "Security model").
public enum WireSecurity: Sendable, Hashable {
    /// Plain TCP: a peer is whoever its routing id says. For comparison and old clients only;
    /// any peer can act as any device.
    case plaintext
    /// CurveZMQ with the server's long-term key pair: every connection is encrypted, and every
    /// peer proves the key it holds, which is its identity.
    case curve(CurveKeyPair)
}

/// Settings of the server side of the wire.
public struct FleetServerConfiguration: Sendable {
    /// Where the ROUTER binds. `tcp://127.0.0.1:*` picks a free port (tests).
    public var endpoint: String
    /// CURVE or plain TCP (the library default; the `signfleet` commands default to CURVE).
    public var security: WireSecurity
    /// Names the server software in ``HelloReply``.
    public var serverName: String
    /// Devices send a heartbeat after this long without other traffic.
    public var heartbeatInterval: Duration
    /// A device silent for `heartbeatInterval * heartbeatLiveness` is lost.
    public var heartbeatLiveness: Int
    /// Heartbeats per second the server plans for. The interval a `hello` announces grows with the
    /// devices connected so that their heartbeats stay within it: the longer of
    /// `heartbeatInterval` and `connected / heartbeatBudget` seconds (10,000 devices at the
    /// default 1,000/s: 10 s), rounded up to 100 ms and at most ``maxAnnouncedHeartbeatInterval``.
    public var heartbeatBudget: Double
    /// The longest heartbeat interval a `hello` announces.
    public static let maxAnnouncedHeartbeatInterval: Duration = .seconds(60)
    public var limits: WireLimits
    /// Messages queued per peer, each way. A peer whose outgoing queue is full (it does not read)
    /// loses the replies that do not fit, counted in `signfleet_replies_dropped_total`: requests
    /// are idempotent and clients resend, and no other peer waits for it.
    public var highWaterMark: Int32
    /// Requests taken at once, across all devices (each device's own requests are still
    /// handled one at a time, in the order they arrived). Beyond it a request is answered
    /// `busy` (retryable, with `retryAfterMs`) at once: the server never stops reading, so
    /// `hello` and `heartbeat` are always answered.
    public var maxConcurrentRequests: Int
    /// Requests one connection may have waiting behind its request in progress; beyond it, `busy`.
    public var maxQueuedPerPeer: Int
    /// The `retryAfterMs` of a `busy` answer.
    public var busyRetryAfter: Duration
    /// The longest a request may wait behind its connection's earlier requests before its work
    /// starts. One that waited longer is answered `busy` instead of being worked on: its client
    /// has resent it or given up by then (a fleet device waits 1 s), and working on it would only
    /// delay the requests behind it (a queue bounded in time, as CoDel bounds one). nil (the
    /// library's default): no bound; `signfleet coordinator` sets 1 s. Set it only when the
    /// clients' own waits are on the same clock: a client whose clock stands still never waits
    /// out the `busy`.
    public var maxQueueDelay: Duration?
    /// Messages one connection may send in a burst, and per second after it (`PeerBudgets`);
    /// beyond, its messages are dropped unread and counted in `signfleet_requests_dropped_total`.
    public var peerMessageBurst: Double
    public var peerMessageRate: Double
    /// Requests of *strangers* (CURVE keys none of whose requests other than `hello` and `heartbeat`
    /// has yet succeeded, `ProvenKeys`) taken at once, in progress or waiting, and at most one
    /// per stranger; beyond it their requests are answered `busy` at once, so a crowd of new keys
    /// cannot take the capacity the fleet's devices need. nil: a quarter of
    /// ``maxConcurrentRequests`` (64 of 256). Plain TCP peers are never strangers.
    public var maxStrangerRequests: Int?
    /// How many proven keys the server remembers (the longest-proven is forgotten past it).
    public var provenKeyCapacity: Int
    /// When memory freed by peers that left is given back to the system; nil: never (and the
    /// socket is not monitored: `signfleet_peer_connections` stays 0).
    public var memoryReturn: MemoryReturnPolicy?

    /// ``maxStrangerRequests``, or its default.
    public var strangerRequestLimit: Int { max(1, maxStrangerRequests ?? maxConcurrentRequests / 4) }

    public init(
        endpoint: String = "tcp://127.0.0.1:5555",
        security: WireSecurity = .plaintext,
        serverName: String = "signfleet-coordinator/\(FleetProtocolInfo.softwareVersion)",
        heartbeatInterval: Duration = .seconds(1),
        heartbeatLiveness: Int = 3,
        heartbeatBudget: Double = 1_000,
        limits: WireLimits = WireLimits(),
        highWaterMark: Int32 = 10_000,
        maxConcurrentRequests: Int = 256,
        maxQueuedPerPeer: Int = 64,
        busyRetryAfter: Duration = .milliseconds(200),
        maxQueueDelay: Duration? = nil,
        peerMessageBurst: Double = 200,
        peerMessageRate: Double = 200,
        maxStrangerRequests: Int? = nil,
        provenKeyCapacity: Int = 65_536,
        memoryReturn: MemoryReturnPolicy? = MemoryReturnPolicy()
    ) {
        self.maxStrangerRequests = maxStrangerRequests.map { max(1, $0) }
        self.provenKeyCapacity = max(1, provenKeyCapacity)
        self.memoryReturn = memoryReturn
        self.peerMessageBurst = peerMessageBurst
        self.peerMessageRate = peerMessageRate
        self.endpoint = endpoint
        self.security = security
        self.maxQueuedPerPeer = max(0, maxQueuedPerPeer)
        self.busyRetryAfter = busyRetryAfter
        self.maxQueueDelay = maxQueueDelay.map { max(.zero, $0) }
        self.serverName = serverName
        self.heartbeatInterval = heartbeatInterval
        self.heartbeatLiveness = heartbeatLiveness
        self.heartbeatBudget = heartbeatBudget.isFinite && heartbeatBudget > 0 ? heartbeatBudget : 1_000
        self.limits = limits
        self.highWaterMark = highWaterMark
        self.maxConcurrentRequests = max(1, maxConcurrentRequests)
    }
}

extension FleetServerConfiguration {
    /// The heartbeat interval a `hello` announces with `connected` devices alive (``heartbeatBudget``).
    public func announcedHeartbeatInterval(connected: Int) -> Duration {
        let spread = Double(max(0, connected)) / heartbeatBudget
        let tenths = (spread * 10).rounded(.up)
        let needed = Duration.milliseconds(Int64(min(tenths, 600)) * 100)
        return min(max(heartbeatInterval, needed), max(heartbeatInterval, Self.maxAnnouncedHeartbeatInterval))
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
/// handled one after another in arrival order (`PeerQueues`), which is what a device relies
/// on when it sends a request before the previous one was answered. `hello` and `heartbeat`,
/// which the server answers itself, are answered as they arrive.
///
/// ```swift
/// let server = FleetServer(configuration: .init(endpoint: "tcp://127.0.0.1:*"), router: router, loop: loop, logger: logger)
/// let endpoint = try await server.bind()   // the real port
/// try await server.run()                   // until the task is cancelled
/// ```
public actor FleetServer {
    public nonisolated let configuration: FleetServerConfiguration
    /// Liveness changes of devices, for logs and tests.
    public nonisolated let peerEvents: AsyncStream<PeerEvent>

    /// What is answered, apart from the socket: `hello`, `heartbeat` and the router's requests.
    private let responder: FleetResponder
    private let codec: WireCodec
    private let loop: ZMQIOLoop
    private let logger: Logger
    /// Times liveness, message budgets and when requests arrived (a test's `ManualClock` moves only when told).
    private let clock: any FleetClock
    /// Identifies this server run (sent in ``HelloReply`` and ``HeartbeatReply``; fresh on every start).
    public nonisolated var instance: String { responder.instance }
    private let peerEventsContinuation: AsyncStream<PeerEvent>.Continuation
    private var socket: AsyncSocket?
    private var boundEndpoint: String?
    private var liveness: LivenessTable<[UInt8]>
    /// The display name of each live connection (its credential's), for liveness events.
    private var peerNames: [[UInt8]: String] = [:]
    /// Rate-limits the log lines about peers that lose replies or send unreadable messages.
    private var refusalLog: RefusalLog
    /// ``refusalLog`` for replies that were not delivered, which the I/O thread reports.
    private nonisolated let deliveryLog = Mutex(RefusalLog())
    private var nextID: UInt64 = 1
    private let metrics: FleetServerMetrics
    private var queues: PeerQueues<ReceivedRequest>
    private let budgets: PeerBudgetGate
    /// Keys that have shown they belong to someone served (``FleetServerConfiguration/maxStrangerRequests``).
    private var proven: ProvenKeys
    /// Strangers' requests taken and not yet finished.
    private var strangerWork = 0
    private var memoryReturnGate: MemoryReturnGate?
    /// TCP connections open on the socket (accepted and not yet closed), from its monitor.
    private var openConnections = 0
    /// Gives freed memory back to the system (``MemoryReturn`` unless a test counts the calls).
    private let releaseMemory: @Sendable () -> Void
    /// Runs `releaseMemory` off this actor: it walks the allocator's free lists.
    private static let memoryReturnQueue = DispatchQueue(label: "signfleet.memory-return", qos: .utility)

    /// - Parameters:
    ///   - configuration: the server's settings.
    ///   - router: answers the requests (through a ``FleetResponder``).
    ///   - loop: the I/O loop that runs the server's socket.
    ///   - logger: where the server logs.
    ///   - metricsFactory: where ``FleetServerMetrics`` are reported; the process-wide
    ///     `MetricsSystem.factory` unless given.
    ///   - clock: what liveness, message budgets and request ages are timed on.
    ///   - releaseMemory: returns freed memory to the system, off the server's actor, after a
    ///     burst (the allocator's free pages by default; tests count the calls).
    public init(
        configuration: FleetServerConfiguration, router: RequestRouter, loop: ZMQIOLoop, logger: Logger,
        metricsFactory: any MetricsFactory = MetricsSystem.factory, clock: any FleetClock = ContinuousClock(),
        releaseMemory: @escaping @Sendable () -> Void = { MemoryReturn.releaseFreePages() }
    ) {
        self.clock = clock
        self.releaseMemory = releaseMemory
        self.proven = ProvenKeys(capacity: configuration.provenKeyCapacity)
        self.memoryReturnGate = configuration.memoryReturn.map(MemoryReturnGate.init(policy:))
        self.refusalLog = RefusalLog(now: clock.now)
        self.metrics = FleetServerMetrics(factory: metricsFactory)
        self.configuration = configuration
        self.responder = FleetResponder(router: router, configuration: configuration)
        self.codec = WireCodec(limits: configuration.limits)
        self.loop = loop
        self.logger = logger
        self.liveness = LivenessTable(interval: configuration.heartbeatInterval, liveness: configuration.heartbeatLiveness)
        self.queues = PeerQueues(capacity: configuration.maxConcurrentRequests)
        self.budgets = PeerBudgetGate(
            burst: configuration.peerMessageBurst, rate: configuration.peerMessageRate, security: configuration.security,
            metrics: metrics, logger: logger, clock: clock)
        (peerEvents, peerEventsContinuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(10_000))
    }

    /// Opens and binds the ROUTER; returns the bound endpoint (with the real port).
    @discardableResult
    public func bind() async throws -> String {
        if let boundEndpoint { return boundEndpoint }
        var options = SocketOptions()
        options.routerMandatory = true
        switch configuration.security {
        case .plaintext:
            // A reconnecting device takes its routing id back from its dead connection.
            options.routerHandover = true
            logger.warning(
                "PLAIN TCP: no transport authentication; any peer can claim any device id (use CURVE outside tests and comparisons)")
        case .curve(let keys):
            // Peers set no routing id: the ROUTER names each connection, so no peer can take over
            // another's (handover off). Identity is the key the ZAP handler saw.
            options.routerHandover = false
            options.curve = .server(secretKey: keys.secretKey)
            options.zapDomain = zapDomain
            options.zapEnforceDomain = true
            options.prependedProperty = "User-Id"
            try await loop.context.zap.register(domain: zapDomain, on: loop) { request in
                Self.admit(request)
            }
        }
        // Connections opening and closing, for ``FleetServerConfiguration/memoryReturn``: only those
        // two events (each is a message the server reads), with room for a fleet's worth of them.
        options.monitor = configuration.memoryReturn != nil
        options.monitoredEvents = SocketOptions.connectionEvents
        options.monitorBufferLimit = 65_536
        options.maxMessageSize = Int64(configuration.limits.maxMessageSize)
        options.sendHighWaterMark = configuration.highWaterMark
        options.receiveHighWaterMark = configuration.highWaterMark
        options.linger = 0
        // Messages over a connection's budget are dropped on the I/O thread, before this actor.
        options.inboundFilter = { [budgets] message, descriptor in budgets.admit(message, descriptor: descriptor) }
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
            // The server runs as long as its receive loop: the sweep and the connection watcher
            // only help (a monitor that could not start ends the watcher, not the server).
            group.addTask { await self.sweepLiveness() }
            if configuration.memoryReturn != nil { group.addTask { await self.watchConnections(socket) } }
            await self.serve(socket)
            group.cancelAll()
        }
        await socket.close()
        self.socket = nil
        if case .curve = configuration.security { loop.context.zap.unregister(domain: zapDomain) }
        peerEventsContinuation.finish()
        logger.info("stopped")
    }

    /// This server's ZAP domain: unique, so servers sharing a context keep their own policy.
    private nonisolated var zapDomain: String { "signfleet-\(instance)" }

    /// The ZAP policy: every peer that completed a CURVE handshake is admitted under its key
    /// (lower-case hex, 64 digits, as `User-Id`); what the key may do is decided per request.
    static func admit(_ request: ZAPRequest) -> ZAPDecision {
        guard request.mechanism == "CURVE", let key = request.credentials.first, key.count == 32 else {
            return .deny(reason: "CURVE is required")
        }
        return .allow(userID: key.map { String(format: "%02x", $0) }.joined())
    }

    private func serve(_ socket: AsyncSocket) async {
        await withDiscardingTaskGroup { group in
            do {
                for try await received in socket.messages {
                    let receivedAt = clock.now
                    guard let (peer, credential, frames) = await identify(received, on: socket) else { continue }
                    guard let request = await accept(frames, from: peer, on: socket) else { continue }
                    noteHeard(peer, as: credential, saying: request)
                    // `hello` and `heartbeat` are answered here, at once: the server answers them
                    // itself, and a device's liveness must not wait behind its own slow push.
                    if request.header.type == Hello.messageType || request.header.type == Heartbeat.messageType {
                        await answer(request, peer: peer, credential: credential, receivedAt: receivedAt, on: socket)
                        continue
                    }
                    // Never stop reading: beyond what the server takes, the answer is `busy`.
                    if !queues.hasCapacity {
                        shed(request, reason: .capacity, peer: peer, on: socket)
                        continue
                    }
                    if queues.queued(for: peer) >= configuration.maxQueuedPerPeer {
                        shed(request, reason: .peerQueue, peer: peer, on: socket)
                        continue
                    }
                    let stranger = isStranger(credential)
                    if stranger {
                        // One request at a time per stranger, so that one connection cannot take the share.
                        if strangerWork >= configuration.strangerRequestLimit || queues.isActive(peer) {
                            shed(request, reason: .strangers, peer: peer, on: socket)
                            continue
                        }
                        strangerWork += 1
                    }
                    // A device with a request in progress gets this one queued behind it;
                    // otherwise a task starts handling the device's requests.
                    let queued = ReceivedRequest(request: request, receivedAt: receivedAt, credential: credential, stranger: stranger)
                    if queues.enqueue(queued, for: peer) {
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

    /// Splits a received message into the connection's routing id, the sender's credential and
    /// the message's own frames. Nil (after answering, where an answer can reach the sender)
    /// when the sender cannot be identified.
    private func identify(_ received: [[UInt8]], on socket: AsyncSocket) async -> ([UInt8], PeerCredential, ArraySlice<[UInt8]>)? {
        switch configuration.security {
        case .plaintext:
            guard let peer = received.first else { return nil }
            guard let name = String(validating: peer, as: UTF8.self) else {
                // Lossy decoding would make different ids one device.
                refusalLog.note("routing id is not UTF-8", logger: logger, now: clock.now)
                reply(
                    .failure(FleetError(.invalidRequest, "the routing id is not UTF-8; set the DEALER's routing id to the device id")),
                    to: peer, replyTo: readableID(received.dropFirst()), on: socket)
                return nil
            }
            return (peer, .claimedName(name), received.dropFirst())
        case .curve:
            // [User-Id, routing id, frames...]: the first frame is added by our own socket.
            guard received.count >= 2 else { return nil }
            let peer = received[1]
            guard let key = Self.key(fromUserID: received[0]) else {
                // Only a handshake that skipped ZAP gets here; fail closed.
                refusalLog.note("message without a ZAP-authenticated key", logger: logger, now: clock.now)
                return nil
            }
            if !Self.isRouterAssigned(peer) {
                // Peers must let the ROUTER name their connection (a chosen name could be claimed by
                // another peer first).
                refusalLog.note("peer-chosen routing id under CURVE", logger: logger, now: clock.now)
                reply(
                    .failure(FleetError(.invalidRequest, "under CURVE a device sets no routing id; its key identifies it")),
                    to: peer, replyTo: readableID(received.dropFirst(2)), on: socket)
                return nil
            }
            return (peer, .curveKey(key), received.dropFirst(2))
        }
    }

    /// Whether `routingID` has the shape of the names a ROUTER gives connections that set none:
    /// 5 bytes, a 0x00 and a 32-bit counter. A peer may still choose 5 such bytes; what it cannot
    /// choose is anything else, and under CURVE its key, not its routing id, says who it is.
    static func isRouterAssigned(_ routingID: [UInt8]) -> Bool {
        routingID.count == 5 && routingID.first == 0
    }

    /// The message id of `frames` when its header can be read, for a refusal's `re`.
    private func readableID(_ frames: ArraySlice<[UInt8]>) -> UInt64? {
        do {
            return try codec.decode(frames).header.id
        } catch {
            return error.header?.id
        }
    }

    /// The connection's routing id in a received message (after the `User-Id` frame under CURVE).
    static func routingID(of received: [[UInt8]], security: WireSecurity) -> [UInt8]? {
        switch security {
        case .plaintext: received.first
        case .curve: received.count >= 2 ? received[1] : nil
        }
    }

    /// The 32-byte key of a `User-Id` set by ``admit(_:)`` (64 lower-case hex digits).
    static func key(fromUserID frame: [UInt8]) -> [UInt8]? {
        guard frame.count == 64 else { return nil }
        return Hex.decode(frame, lowercaseOnly: true)
    }

    /// Decodes a message; answers an unreadable one with its typed error and drops a stray
    /// reply (both return nil).
    private func accept(_ frames: ArraySlice<[UInt8]>, from peer: [UInt8], on socket: AsyncSocket) async -> InboundMessage? {
        let request: InboundMessage
        do {
            request = try codec.decode(frames)
        } catch {
            refusalLog.note("refused message: \(error.error.code)", logger: logger, now: clock.now)
            metrics.countRequest(type: error.header?.type, outcome: error.error.code.rawValue)
            reply(.failure(error.error), to: peer, replyTo: error.header?.id, on: socket)
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
            if let bound = configuration.maxQueueDelay, clock.elapsed(since: received.receivedAt) > bound {
                shed(received.request, reason: .queueAge, peer: peer, on: socket)
            } else {
                await answer(received.request, peer: peer, credential: received.credential, receivedAt: received.receivedAt, on: socket)
            }
            if received.stranger { strangerWork -= 1 }
            queues.finished()
        }
    }

    /// Why a request was answered `busy` without being worked on.
    enum ShedReason: String {
        /// Requests in progress across all connections were at ``FleetServerConfiguration/maxConcurrentRequests``.
        case capacity
        /// Its connection had ``FleetServerConfiguration/maxQueuedPerPeer`` requests waiting.
        case peerQueue = "peer_queue"
        /// It waited longer than ``FleetServerConfiguration/maxQueueDelay``.
        case queueAge = "queue_age"
        /// Strangers' requests in progress were at ``FleetServerConfiguration/maxStrangerRequests``.
        case strangers
    }

    /// Whether `credential` is a CURVE key none of whose requests has succeeded yet.
    private func isStranger(_ credential: PeerCredential) -> Bool {
        guard case .curveKey(let key) = credential else { return false }
        return !proven.contains(key)
    }

    /// Answers `request` `busy` with the configured retry-after: no body decoded, no handler run.
    private func shed(_ request: InboundMessage, reason: ShedReason, peer: [UInt8], on socket: AsyncSocket) {
        metrics.countRequest(type: request.header.type, outcome: FleetErrorCode.busy.rawValue)
        metrics.countShedRequest(reason: reason.rawValue)
        refusalLog.note("request shed (busy): \(reason.rawValue)", logger: logger, now: clock.now)
        let busy = FleetError(
            .busy, "the server has as much work as it takes now; send again after retryAfterMs", retryable: true,
            retryAfterMs: UInt64(configuration.busyRetryAfter.milliseconds))
        reply(.failure(busy), to: peer, replyTo: request.header.id, on: socket)
    }

    private func noteHeard(_ peer: [UInt8], as credential: PeerCredential, saying request: InboundMessage) {
        if liveness.heard(peer, at: clock.now) == .alive {
            var name = credential.displayName
            var metadata: Logger.Metadata = [:]
            if case .curveKey = credential {
                // A connection's first message is its `hello`: its device id names it in logs. The
                // key is what was authenticated; the id is checked by the requests that act for it.
                metadata["key"] = "\(credential.displayName)"
                if request.header.type == Hello.messageType, let hello = try? codec.decodeBody(Hello.self, from: request) {
                    name = hello.deviceID
                }
            }
            peerNames[peer] = name
            metadata["device"] = "\(name)"
            logger.info("device alive", metadata: metadata)
            peerEventsContinuation.yield(.alive(name))
            metrics.connectedDevices.record(liveness.aliveCount)
        }
    }

    private func answer(
        _ request: InboundMessage, peer: [UInt8], credential: PeerCredential, receivedAt: ContinuousClock.Instant, on socket: AsyncSocket
    ) async {
        let context = RequestContext(peer: peer, header: request.header, receivedAt: receivedAt, credential: credential)
        if request.header.type == Heartbeat.messageType {
            logger.debug("heartbeat", metadata: ["device": "\(peerNames[peer] ?? context.peerName)"])
        }
        var announced: Duration?
        if request.header.type == Hello.messageType || request.header.type == Heartbeat.messageType {
            // A larger fleet is told to send heartbeats less often, in every `hello` and
            // `heartbeat` reply; every device is then judged by the longest interval announced so far.
            let interval = configuration.announcedHeartbeatInterval(connected: liveness.aliveCount)
            liveness.interval = max(liveness.interval, interval)
            announced = interval
        }
        let result = await responder.answer(request, context: context, heartbeatInterval: announced)
        metrics.countRequest(type: request.header.type, outcome: Self.outcome(of: result))
        if announced == nil, case .success = result, case .curveKey(let key) = credential { proven.insert(key) }
        reply(result, to: peer, replyTo: request.header.id, rateLimit: context.replyMetadata.rateLimit, on: socket)
    }

    /// The reply type of a success, the error code of a failure (the `outcome` dimension).
    static func outcome(of result: Result<EncodedReply, FleetError>) -> String {
        switch result {
        case .success(let reply): reply.type.rawValue
        case .failure(let error): error.code.rawValue
        }
    }

    /// How many devices are alive now (heard from within the liveness timeout).
    public var aliveDeviceCount: Int { liveness.aliveCount }

    private func encoded<Body: FleetMessageBody>(_ body: Body) -> Result<EncodedReply, FleetError> {
        Result { () throws(FleetError) in EncodedReply(type: Body.messageType, body: try codec.encodeBody(body)) }
    }

    private func reply(
        _ result: Result<EncodedReply, FleetError>, to peer: [UInt8], replyTo: UInt64?, rateLimit: RateLimitStatus? = nil,
        on socket: AsyncSocket
    ) {
        let encodedReply: EncodedReply
        switch result {
        case .success(let value): encodedReply = value
        case .failure(let error):
            guard case .success(let value) = encoded(error) else { return }
            encodedReply = value
        }
        let header = MessageHeader(type: encodedReply.type, id: nextID, replyTo: replyTo, rateLimit: rateLimit)
        nextID &+= 1
        let headerFrame: [UInt8]
        do {
            headerFrame = try codec.encodeHeader(header)
        } catch {
            refusalLog.note("reply not encoded: \(error.code)", logger: logger, now: clock.now)
            return
        }
        // Never wait for one peer (a peer that does not read loses its own replies), nor for the
        // I/O thread: the receive loop answers `hello` and `heartbeat` itself and must go on
        // reading at once. The outcome is counted when the I/O thread has tried the send.
        socket.sendOrDrop([peer, headerFrame, encodedReply.body]) { [self] outcome in
            self.noteDelivery(outcome)
        }
    }

    /// Counts and logs (rate-limited) a reply that was not delivered; called on the I/O thread.
    private nonisolated func noteDelivery(_ outcome: Result<Bool, ZMQError>) {
        switch outcome {
        case .success(true):
            return
        case .success(false):
            metrics.countDroppedReply(reason: "peer_not_reading")
            deliveryLog.withLock { $0.note("reply dropped: the peer's queue is full (it does not read)", logger: logger, now: clock.now) }
        case .failure(let error):
            // EHOSTUNREACH: the device disconnected before its reply was ready.
            // It will resend the request (same id) and get the same answer.
            metrics.countDroppedReply(reason: "peer_gone")
            deliveryLog.withLock { $0.note("reply not delivered: \(error)", logger: logger, now: clock.now) }
        }
    }

    /// Counts the socket's connections from its monitor events, and the closed ones for
    /// ``FleetServerConfiguration/memoryReturn``.
    private func watchConnections(_ socket: AsyncSocket) async {
        for await event in socket.monitorEvents {
            switch event.kind {
            case .accepted:
                openConnections += 1
            case .disconnected:
                openConnections = max(0, openConnections - 1)
                // libzmq freed the connection's buffers as it closed; the allocator still holds the pages.
                memoryReturnGate?.connectionClosed(at: clock.now)
                returnMemoryIfDue()
            default:
                continue
            }
            metrics.peerConnections.record(openConnections)
        }
    }

    /// Returns freed memory when the policy says so; asked at each closed connection and at each
    /// liveness sweep (so that a crowd's memory goes back once it stopped leaving).
    private func returnMemoryIfDue() {
        guard memoryReturnGate?.isDue(at: clock.now) == true else { return }
        metrics.countMemoryReturn()
        Self.memoryReturnQueue.async(execute: releaseMemory)
    }

    private func sweepLiveness() async {
        while !Task.isCancelled {
            let due = clock.now.advanced(by: configuration.heartbeatInterval)
            do {
                try await clock.sleep(until: due, tolerance: nil)
            } catch {
                return
            }
            // A sweep that wakes more than an interval late means the server itself did not run
            // (SIGSTOP, a starved CPU): what its devices sent meanwhile is unread in its socket, so
            // that time is not held against them, or a paused coordinator would declare its whole
            // fleet lost on waking, and every device would reconnect at once.
            let late = due.duration(to: clock.now)
            if late > configuration.heartbeatInterval {
                liveness.excuse(late, now: clock.now)
                logger.notice("the server did not run for a while (stopped or starved); that silence is not held against its devices", metadata: ["late": "\(late)"])
            }
            budgets.pruneIdle()
            for peer in liveness.sweep(at: clock.now) {
                budgets.forget(peer)
                let name = peerNames.removeValue(forKey: peer) ?? String(decoding: peer, as: UTF8.self)
                logger.warning("device lost", metadata: ["device": "\(name)"])
                peerEventsContinuation.yield(.lost(name))
            }
            metrics.connectedDevices.record(liveness.aliveCount)
            returnMemoryIfDue()
        }
    }
}

extension Duration {
    /// Whole milliseconds, rounded down.
    var milliseconds: Int64 {
        components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000
    }
}
