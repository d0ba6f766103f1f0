import FleetProtocol
import Foundation
import Logging
import ZeroMQ

/// Settings of the device side of the wire.
public struct FleetClientConfiguration: Sendable {
    /// The coordinator's (or the fault proxy's) ROUTER endpoint: the first one tried.
    public var endpoint: String
    /// Other coordinators' endpoints, tried in order after ``endpoint`` when a connection fails
    /// (no answer to `hello`, the server fell silent, or a request went unanswered): the client
    /// side of the zguide's Binary Star, cycling through the list.
    public var failoverEndpoints: [String]
    /// The device id; under plain TCP also the DEALER's routing id.
    public var deviceID: String
    /// CURVE or plain TCP; must match the server's.
    public var security: ClientSecurity
    /// Names the client software in `Hello`.
    public var clientName: String
    /// How long to wait for one reply before retrying (Lazy Pirate), when the coordinator answers
    /// promptly: the floor of the adaptive timeout (`RetransmissionTimeout` (FleetProtocol)).
    public var requestTimeout: Duration
    /// The longest the adaptive timeout grows to while replies come late; nil: 8 × ``requestTimeout``.
    public var maxRequestTimeout: Duration?
    /// Sends of one request before giving up with a retryable `timeout` error.
    public var maxAttempts: Int
    /// Delay before each reconnection: a ceiling that doubles per failure and resets on success,
    /// with full jitter (a delay drawn from 0 up to the ceiling). Without a `Backoff.jitterSeed`
    /// the client seeds the jitter from its device id, so devices that lost their server together
    /// come back spread out, and each device's delays replay from run to run.
    public var reconnectBackoff: Backoff
    /// When a timed-out request may be sent again (`RetryBudget`): resends stop while most
    /// recent requests go unanswered, and the request fails at once with a retryable `timeout`.
    public var retryBudget: RetryBudget = RetryBudget()
    /// Used until the server's `HelloReply` says otherwise.
    public var heartbeatInterval: Duration
    public var heartbeatLiveness: Int
    public var limits: WireLimits
    /// Under CURVE, whether failed handshakes (a wrong pinned server key) are watched for and
    /// reported (a `handshakeFailed` `ConnectionEvent` on ``FleetClient/events`` and a warning).
    /// Watching costs a libzmq monitor (two more sockets) and a task per client; a fleet node, whose
    /// devices get the key from the launcher, turns it off (docs/performance.md, "Memory per device").
    public var reportsHandshakeFailures: Bool = true
    /// Round-trip times shared with the other clients of this process that talk to the same
    /// coordinators (RFC 9040): this client starts from what they saw instead of from
    /// ``requestTimeout``, and adds what it sees. Nil: this client learns alone.
    public var roundTrips: RoundTripMemory?
    /// ZeroMQ's own heartbeats on the connection (ZMTP `PING`/`PONG`, answered by the peer's
    /// libzmq I/O thread, whatever its application is doing): libzmq drops and redials a TCP
    /// connection on which nothing arrived for `timeout` after a `PING`. This is what cures a
    /// half-open connection, so a slow `hello` never costs one (docs/protocol.md, "Heartbeats and
    /// liveness"). Nil: none (a peer that vanishes without a reset is then noticed by the
    /// application's heartbeats only once a `hello` was answered).
    public var transportHeartbeat: TransportHeartbeat? = TransportHeartbeat()

    public init(
        endpoint: String,
        failoverEndpoints: [String] = [],
        deviceID: String,
        security: ClientSecurity = .plaintext,
        clientName: String = "signfleet-node/\(FleetProtocolInfo.softwareVersion)",
        requestTimeout: Duration = .seconds(2),
        maxAttempts: Int = 3,
        reconnectBackoff: Backoff = Backoff(initial: .milliseconds(250), maximum: .seconds(30)),
        heartbeatInterval: Duration = .seconds(1),
        heartbeatLiveness: Int = 3,
        limits: WireLimits = WireLimits()
    ) {
        self.endpoint = endpoint
        self.failoverEndpoints = failoverEndpoints
        self.deviceID = deviceID
        self.security = security
        self.clientName = clientName
        self.requestTimeout = requestTimeout
        self.maxAttempts = max(1, maxAttempts)
        self.reconnectBackoff = reconnectBackoff
        self.heartbeatInterval = heartbeatInterval
        self.heartbeatLiveness = heartbeatLiveness
        self.limits = limits
    }

    /// Every endpoint, in the order the client tries them.
    public var endpoints: [String] { [endpoint] + failoverEndpoints }

    /// The longest one attempt waits for its reply: ``maxRequestTimeout``, by default 8 × ``requestTimeout``.
    public var longestReplyTimeout: Duration { maxRequestTimeout ?? requestTimeout * 8 }

    /// The adaptive timeout's bounds: ``requestTimeout`` to ``longestReplyTimeout``.
    var retransmissionTimeout: RetransmissionTimeout {
        RetransmissionTimeout(floor: requestTimeout, ceiling: longestReplyTimeout)
    }
}

/// ZMTP heartbeats of a client's connection (``FleetClientConfiguration/transportHeartbeat``).
public struct TransportHeartbeat: Sendable, Hashable {
    /// A `PING` after this long without traffic.
    public var interval: Duration
    /// The connection is dropped and redialled when nothing arrived for this long after a `PING`.
    public var timeout: Duration

    public init(interval: Duration = .seconds(10), timeout: Duration = .seconds(60)) {
        self.interval = max(.milliseconds(1), interval)
        self.timeout = max(self.interval, timeout)
    }
}

/// The DEALER side of the wire, for one device: the ZeroMQ `ClientTransport`.
///
/// `run()` keeps a connection: it opens the socket, says `hello`, sends
/// heartbeats when idle, and when the server falls silent (Paranoid Pirate)
/// or a request times out while the server has been silent for the liveness
/// timeout (Lazy Pirate) it closes the socket and opens a new one after an
/// exponential back-off, to the next of its endpoints when it has several
/// (``FleetClientConfiguration/failoverEndpoints``). `request(_:)` sends a typed request and
/// waits for its reply, resending it with the same request id on timeout and
/// on every new connection (a reply sent to a closing socket is lost);
/// requests are idempotent, so a resend is always safe. How long it waits
/// adapts to the server (`RetransmissionTimeout` (FleetProtocol), docs/protocol.md "Retries").
///
/// ```swift
/// let client = FleetClient(configuration: .init(endpoint: endpoint, deviceID: "dev-1"), loop: loop, logger: logger)
/// async let connection: Void = client.run()
/// let reply = try await client.request(Heartbeat())
/// ```
public actor FleetClient: ClientTransport {
    public let configuration: FleetClientConfiguration
    /// Connection changes, for logs and tests.
    public nonisolated let events: AsyncStream<ConnectionEvent>
    /// The account rate-limit status from the latest reply that carried one
    /// (header `rl`), so a device can slow down before it is refused.
    public private(set) var lastRateLimit: RateLimitStatus?
    /// The instance of the server that answered the latest `hello` (a restarted coordinator has a
    /// new one); nil before the first.
    public private(set) var serverInstance: String?
    /// The endpoint of the connection now up (its `hello` answered); nil while there is none.
    public private(set) var connectedEndpoint: String?
    /// ``events`` (the `ClientTransport` name).
    public nonisolated var connectionEvents: AsyncStream<ConnectionEvent> { events }

    private enum ReplySlot {
        case waiting(CheckedContinuation<InboundMessage, any Error>?)
        case arrived(InboundMessage)
    }

    private struct ReplyTimeout: Error {}

    private let loop: ZMQIOLoop
    /// Times replies, heartbeats and back-off (a test's `ManualClock` moves only when told).
    private let clock: any FleetClock
    private let logger: Logger
    private let codec: WireCodec
    private let eventsContinuation: AsyncStream<ConnectionEvent>.Continuation
    private var socket: AsyncSocket?
    private var socketWaiters: [CheckedContinuation<Void, Never>] = []
    /// Callers of ``serverInstance(waitingUpTo:)`` waiting for a `hello` answer, by id.
    private var instanceWaiters: [UInt64: CheckedContinuation<String?, Never>] = [:]
    private var nextInstanceWaiter: UInt64 = 0
    private var pending: [UInt64: ReplySlot] = [:]
    /// Requests sent and not yet answered, with the connection they were last sent on. A new
    /// connection resends the older ones: a reply sent while the old socket was closing is lost,
    /// and a request with one attempt would otherwise wait out its whole timeout.
    private var unanswered: [UInt64: (frames: [[UInt8]], connection: UInt64)] = [:]
    /// Counts the connections `run()` has opened.
    private var connection: UInt64 = 0
    /// Which of ``FleetClientConfiguration/endpoints`` the next socket connects to.
    private var endpointIndex = 0
    private var nextRequestID: UInt64
    private var liveness: PeerLiveness
    private var backoff: Backoff
    private var budget: RetryBudget
    /// How long the next `hello` or request waits for its reply: each timeout doubles it, replies
    /// bring it back towards their round-trip time, so a coordinator that is slow, not gone, is not
    /// handed resends and new connections (new handshakes) at every timeout.
    private var retransmission: RetransmissionTimeout
    private var reconnectRequested = false
    private var lastSent: ContinuousClock.Instant
    private var stopped = false

    public init(configuration: FleetClientConfiguration, loop: ZMQIOLoop, logger: Logger, clock: any FleetClock = ContinuousClock()) {
        self.configuration = configuration
        self.loop = loop
        self.clock = clock
        self.lastSent = clock.now
        self.logger = logger
        self.codec = WireCodec(limits: configuration.limits)
        self.liveness = PeerLiveness(interval: configuration.heartbeatInterval, liveness: configuration.heartbeatLiveness)
        self.backoff = configuration.reconnectBackoff.jitterSeed == nil
            ? configuration.reconnectBackoff.jittered(seed: Backoff.jitterSeed(for: configuration.deviceID))
            : configuration.reconnectBackoff
        self.budget = configuration.retryBudget
        self.retransmission = configuration.roundTrips?.seeded(configuration.retransmissionTimeout) ?? configuration.retransmissionTimeout
        // Ids start from the wall clock so a restarted device cannot match a
        // stale reply meant for its previous run (ROUTER_HANDOVER routes it here).
        self.nextRequestID = UInt64(max(0, WallClock.system.secondsSince1970 * 1_000_000)) << 8
        (events, eventsContinuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1000))
    }

    /// Tokens left in the retry budget (``FleetClientConfiguration/retryBudget``).
    public var retryTokens: Double { budget.tokens }

    /// Sockets this client has opened: one per connection it made itself (libzmq's own redials
    /// under one socket, ``FleetClientConfiguration/transportHeartbeat``, are not counted).
    public var socketsOpened: UInt64 { connection }

    // MARK: Connection

    /// Keeps the connection up until the calling task is cancelled.
    public func run() async {
        while !Task.isCancelled {
            let endpoint = configuration.endpoints[endpointIndex % configuration.endpoints.count]
            if let socket = await openSocket(to: endpoint) {
                self.socket = socket
                connection &+= 1
                resumeSocketWaiters()
                await withTaskGroup(of: Void.self) { group in
                    group.addTask { await self.receive(from: socket) }
                    group.addTask { await self.keepAlive(socket, endpoint: endpoint) }
                    await group.next()
                    group.cancelAll()
                }
                self.socket = nil
                connectedEndpoint = nil
                await socket.close()
            }
            if Task.isCancelled { break }
            // This endpoint failed (no hello answer, silence, or an unanswered request): the next
            // connection tries the next one (Binary Star's client side). Unanswered requests are
            // resent there.
            endpointIndex = (endpointIndex + 1) % configuration.endpoints.count
            let delay = backoff.next()
            eventsContinuation.yield(.reconnecting(after: delay))
            logger.info("reconnecting", metadata: ["after": "\(delay)"])
            do { try await clock.sleep(for: delay) } catch { break }
        }
        stop()
    }

    private func openSocket(to endpoint: String) async -> AsyncSocket? {
        var options = SocketOptions()
        switch configuration.security {
        case .plaintext:
            options.routingID = Array(configuration.deviceID.utf8)
        case .curve(let serverKey, let keys):
            options.curve = .client(serverKey: serverKey, keys: keys)
            // A wrong pinned key shows only as failed handshakes: watch for them to say so.
            options.monitor = configuration.reportsHandshakeFailures
        }
        options.linger = 0
        options.maxMessageSize = Int64(configuration.limits.maxMessageSize)
        options.reconnectInterval = .milliseconds(100)
        options.reconnectIntervalMax = .seconds(5)
        if let heartbeat = configuration.transportHeartbeat {
            options.heartbeatInterval = heartbeat.interval
            options.heartbeatTimeout = heartbeat.timeout
        }
        do {
            let socket = try await loop.makeSocket(.dealer, options: options)
            do {
                try await socket.connect(endpoint)
                if options.monitor { watchHandshakes(of: socket, endpoint: endpoint) }
                return socket
            } catch {
                await socket.close()
                throw error
            }
        } catch {
            logger.error("cannot open connection", metadata: ["endpoint": "\(endpoint)", "error": "\(error)"])
            return nil
        }
    }

    /// Reports failed CURVE handshakes of `socket` (once per socket: libzmq keeps retrying).
    private nonisolated func watchHandshakes(of socket: AsyncSocket, endpoint: String) {
        Task { [logger, eventsContinuation] in
            for await event in socket.monitorEvents {
                let reason: String
                switch event.kind {
                case .handshakeFailedNoDetail, .handshakeFailedProtocol:
                    reason = "the CURVE handshake with \(endpoint) failed (\(event)): the coordinator's public key is not the pinned one, or it does not serve CURVE; check --server-key against the key it prints"
                case .handshakeFailedAuth:
                    reason = "the coordinator refused this device's CURVE key (\(event))"
                default:
                    continue
                }
                logger.warning("\(reason)")
                eventsContinuation.yield(.handshakeFailed(reason))
                return
            }
        }
    }

    /// Says hello, then sends heartbeats while idle; returns when the server
    /// is lost or a reconnection was requested.
    private func keepAlive(_ socket: AsyncSocket, endpoint: String) async {
        liveness = PeerLiveness(interval: liveness.interval, liveness: liveness.liveness)
        _ = liveness.heard(at: clock.now)  // the liveness clock starts with the connection
        do {
            let hello = Hello(deviceID: configuration.deviceID, client: configuration.clientName)
            let helloID = makeRequestID()
            let sent = clock.now
            var helloAttempts = 0
            var reply: HelloReply?
            while reply == nil {
                helloAttempts += 1
                let wait = retransmission.current
                do {
                    reply = try decodeReply(Hello.self, try await exchange(hello, id: helloID, on: socket, timeout: wait))
                } catch is ReplyTimeout {
                    retransmission.timedOut()
                    // A coordinator slow to answer (a crowd connecting at once, or this process
                    // starved of CPU) is asked again on this connection, each wait twice the last
                    // up to the longest: a new connection would cost it another CURVE handshake,
                    // and reaches the same server by the same path. What a new one would cure, a
                    // half-open connection, libzmq's ZMTP heartbeats cure on this socket
                    // (transportHeartbeat). Without them the connection ends once a wait of the
                    // longest reply timeout went unanswered too, after at least maxAttempts sends;
                    // with other endpoints to go to, at the first timeout.
                    let exhausted =
                        configuration.transportHeartbeat == nil && helloAttempts >= configuration.maxAttempts
                        && wait >= retransmission.ceiling
                    if !configuration.failoverEndpoints.isEmpty || exhausted { throw ReplyTimeout() }
                    logger.notice("hello unanswered; asking again on this connection", metadata: ["attempt": "\(helloAttempts)", "waited": "\(wait)"])
                }
            }
            guard let reply else { throw ReplyTimeout() }
            // Karn's rule: only a hello sent once says how long a round trip takes.
            if helloAttempts == 1 { recordRoundTrip(clock.elapsed(since: sent)) }
            liveness.interval = Self.heartbeatInterval(announced: reply.heartbeatIntervalMs)
            liveness.liveness = min(max(1, Int(reply.heartbeatLiveness)), 100)
            backoff.reset()
            logger.info(
                "connected", metadata: ["server": "\(reply.server)", "instance": "\(reply.serverInstance)", "endpoint": "\(endpoint)"])
            serverInstance = reply.serverInstance
            connectedEndpoint = endpoint
            resumeInstanceWaiters(with: reply.serverInstance)
            eventsContinuation.yield(.connected(serverInstance: reply.serverInstance))
            await resendUnanswered(on: socket)
        } catch {
            logger.notice("hello failed", metadata: ["error": "\(error)"])
            return
        }
        while !Task.isCancelled {
            do { try await clock.sleep(for: liveness.interval / 2) } catch { return }
            if reconnectRequested {
                reconnectRequested = false
                return
            }
            let now = clock.now
            if liveness.check(at: now, atLeast: extraSilenceAllowed, probes: liveness.liveness) == .lost {
                logger.warning(
                    "server lost",
                    metadata: ["silentFor": "\(max(liveness.timeout, extraSilenceAllowed))", "unansweredProbes": "\(liveness.unansweredProbes)"])
                eventsContinuation.yield(.lost)
                return
            }
            if lastSent.duration(to: now) >= liveness.interval {
                await sendHeartbeat(on: socket)
            }
        }
    }

    /// Resends, on the connection just established, every request still waiting for its reply
    /// that was sent on an earlier one (same request id: requests are idempotent, and a reply
    /// that comes twice is taken once).
    private func resendUnanswered(on socket: AsyncSocket) async {
        let current = connection
        let stale = unanswered.filter { $0.value.connection != current }.sorted { $0.key < $1.key }
        guard !stale.isEmpty else { return }
        logger.info("resending unanswered requests", metadata: ["count": "\(stale.count)"])
        for (id, entry) in stale {
            unanswered[id]?.connection = current
            do {
                try await socket.send(entry.frames)
            } catch {
                logger.notice("resend failed", metadata: ["error": "\(error)"])
                return
            }
        }
    }

    private func sendHeartbeat(on socket: AsyncSocket) async {
        do {
            let frames = try codec.encode(Heartbeat(), header: MessageHeader(type: Heartbeat.messageType, id: makeRequestID()))
            lastSent = clock.now
            liveness.probed(at: lastSent)
            try await socket.send(frames)
        } catch {
            logger.notice("heartbeat not sent", metadata: ["error": "\(error)"])
        }
    }

    private func receive(from socket: AsyncSocket) async {
        do {
            for try await frames in socket.messages {
                deliver(frames)
            }
        } catch is CancellationError {
            return  // the connection is being replaced or stopped
        } catch {
            logger.notice("receive ended", metadata: ["error": "\(error)"])
        }
    }

    private func deliver(_ frames: [[UInt8]]) {
        _ = liveness.heard(at: clock.now)
        let message: InboundMessage
        do {
            message = try codec.decode(frames)
        } catch {
            logger.warning("dropped unreadable message from server", metadata: ["error": "\(error.error)"])
            return
        }
        if let rateLimit = message.header.rateLimit { lastRateLimit = rateLimit }
        if message.header.type == HeartbeatReply.messageType,
            let reply = try? codec.decodeBody(HeartbeatReply.self, from: message), let interval = reply.heartbeatIntervalMs
        {
            // The server's interval for the fleet as it is now (it grows with the fleet).
            liveness.interval = Self.heartbeatInterval(announced: interval)
        }
        guard let replyTo = message.header.replyTo else {
            logger.debug("dropped unsolicited message", metadata: ["type": "\(message.header.type)"])
            return
        }
        switch pending[replyTo] {
        case .waiting(let continuation?):
            pending[replyTo] = nil
            continuation.resume(returning: message)
        case .waiting(nil):
            pending[replyTo] = .arrived(message)
        case .arrived, nil:
            break  // a heartbeat's reply, or a late duplicate of one already delivered
        }
    }

    /// Ends the connection from outside `run()` (which also ends on cancellation).
    public func stop() {
        stopped = true
        eventsContinuation.finish()
        for (id, slot) in pending {
            if case .waiting(let continuation?) = slot { continuation.resume(throwing: CancellationError()) }
            pending[id] = nil
        }
        resumeSocketWaiters()
        resumeInstanceWaiters(with: nil)
    }

    /// ``serverInstance``, or, before the first `hello` is answered, that answer's instance once it
    /// comes, waiting at most `timeout`: `nil` when it does not come by then, or the client stops.
    /// A caller that must know which server it talks to before its first request (whether an
    /// enrollment still holds) asks this rather than send a request of its own.
    public func serverInstance(waitingUpTo timeout: Duration) async -> String? {
        if let serverInstance { return serverInstance }
        guard !stopped else { return nil }
        nextInstanceWaiter &+= 1
        let id = nextInstanceWaiter
        let timer = Task { [weak self, clock] in
            try? await clock.sleep(for: timeout)
            await self?.resumeInstanceWaiter(id, with: nil)
        }
        defer { timer.cancel() }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { instanceWaiters[id] = $0 }
        } onCancel: {
            Task { await self.resumeInstanceWaiter(id, with: nil) }
        }
    }

    private func resumeInstanceWaiter(_ id: UInt64, with instance: String?) {
        instanceWaiters.removeValue(forKey: id)?.resume(returning: instance)
    }

    private func resumeInstanceWaiters(with instance: String?) {
        let waiters = instanceWaiters
        instanceWaiters = [:]
        for waiter in waiters.values { waiter.resume(returning: instance) }
    }

    // MARK: Requests

    /// Sends a request and returns its reply.
    ///
    /// - Parameters:
    ///   - request: The typed request.
    ///   - timeout: How long to wait for each attempt's reply (default: the configuration's).
    ///   - attempts: How many times to send it (default: the configuration's).
    /// - Throws: The server's `FleetError`; `timeout` (retryable) when no reply came;
    ///   `CancellationError` when the task or the client stopped.
    public func request<Request: FleetRequest>(
        _ request: Request, timeout: Duration? = nil, attempts: Int? = nil
    ) async throws -> Request.Reply {
        let fixedTimeout = timeout
        let attempts = max(1, attempts ?? configuration.maxAttempts)
        let id = makeRequestID()
        var busyAnswers = 0
        var attempt = 1
        var lastTimeout = fixedTimeout ?? retransmission.current
        // Timeouts of this request on one connection (``timeoutsConnection``).
        var timeoutsOnConnection = 0
        var timeoutsConnection = connection
        while attempt <= attempts {
            try Task.checkCancellation()
            guard let socket = await currentSocket() else { throw CancellationError() }
            let timeout = fixedTimeout ?? retransmission.current
            lastTimeout = timeout
            let sent = clock.now
            let sentOn = connection
            do {
                let reply = try await exchange(request, id: id, on: socket, timeout: timeout)
                let decoded = Result { try decodeReply(Request.self, reply) }
                // Any answer gives back to the retry budget, but a `busy`: its resends are bounded
                // apart (maxBusyAnswers, each after the server's retry-after), and a server that
                // sheds must not buy its clients more resends.
                if case .failure(let error as FleetError) = decoded, error.code == .busy {} else { budget.recordSuccess() }
                // Karn's rule: only a request sent once says how long a round trip takes.
                if attempt == 1, busyAnswers == 0, sentOn == connection { recordRoundTrip(clock.elapsed(since: sent)) }
                return try decoded.get()
            } catch let error as FleetError where error.code == .busy && busyAnswers < Self.maxBusyAnswers {
                // The server is alive and says when to come back: that costs no attempt.
                busyAnswers += 1
                let wait = Duration.milliseconds(Int64(clamping: min(error.retryAfterMs ?? 200, 5_000)))
                logger.debug("server busy", metadata: ["type": "\(Request.messageType)", "after": "\(wait)"])
                try await clock.sleep(for: wait)
                continue
            } catch is ReplyTimeout {
                logger.notice(
                    "no reply", metadata: ["type": "\(Request.messageType)", "attempt": "\(attempt)/\(attempts)"])
                budget.recordFailure()
                if fixedTimeout == nil { retransmission.timedOut() }
                // Lazy Pirate: a fresh socket cures a half-open connection, but only one that shows
                // it is dead: nothing heard, not even a heartbeat reply, for the liveness timeout.
                // A server heard from since is alive, perhaps only slow, and a new connection (a new
                // handshake, a new hello) would add to its load: the resend goes on this one, with
                // twice the wait. With other endpoints to go to, a second timeout on the same
                // connection, or the last attempt's, moves on all the same: a server that answers
                // heartbeats but no request is hung (Binary Star's client side).
                if sentOn != timeoutsConnection {
                    timeoutsConnection = sentOn
                    timeoutsOnConnection = 0
                }
                timeoutsOnConnection += 1
                let hung = !configuration.failoverEndpoints.isEmpty && (attempt == attempts || timeoutsOnConnection >= 2)
                if hung || !heardWithinLiveness(at: clock.now) { reconnectRequested = true }
                if attempt < attempts, !budget.allowsRetry {
                    logger.notice("resend withheld: retry budget spent", metadata: ["type": "\(Request.messageType)", "tokens": "\(budget.tokens)"])
                    throw FleetError(
                        .timeout,
                        "no reply to \(Request.messageType) after \(attempt) attempt\(attempt == 1 ? "" : "s"); resend withheld: most recent requests went unanswered (retry budget)",
                        retryable: true)
                }
            }
            attempt += 1
        }
        throw FleetError(
            .timeout, "no reply to \(Request.messageType) after \(attempts) attempts (the last waited \(lastTimeout))", retryable: true)
    }

    /// A reply to a request sent once: this client's estimate and the process's shared one learn it.
    private func recordRoundTrip(_ roundTrip: Duration) {
        retransmission.record(roundTrip: roundTrip)
        configuration.roundTrips?.record(roundTrip: roundTrip)
    }

    /// An announced heartbeat interval, kept between 10 ms and the longest a server announces
    /// (``FleetServerConfiguration/maxAnnouncedHeartbeatInterval``): 0 would make the keep-alive
    /// loop spin, and days would leave a dead server unnoticed.
    static func heartbeatInterval(announced milliseconds: UInt32) -> Duration {
        min(max(.milliseconds(Int64(milliseconds)), .milliseconds(10)), FleetServerConfiguration.maxAnnouncedHeartbeatInterval)
    }

    /// Whether the server said anything within the liveness timeout (the silence after which the
    /// heartbeats declare it lost: ``PeerLiveness/timeout``), or has not yet had `liveness` probes
    /// to answer: a client starved of CPU finds replies unread, and that is its silence, not the server's.
    private func heardWithinLiveness(at now: ContinuousClock.Instant) -> Bool {
        guard liveness.lastHeard != nil else { return false }
        return !liveness.isSilent(at: now, atLeast: extraSilenceAllowed, probes: liveness.liveness)
    }

    /// The silence a server may keep beyond the heartbeats' timeout before it is declared lost:
    /// twice the delay its replies have shown (``RetransmissionTimeout/observedDelay``). A server
    /// whose replies take seconds (past capacity) is late with its heartbeat replies too; declaring
    /// it lost would hand it a new connection, a CURVE handshake and a `hello` on top of its work.
    /// Zero until a reply was timed, so a prompt server's loss is noticed as the heartbeats say.
    private var extraSilenceAllowed: Duration {
        (retransmission.observedDelay ?? .zero) * 2
    }


    /// How late a reply timer may wake before the lateness is taken for the client's own absence
    /// (``FleetClock/sleep(ownTimeFor:tolerance:)``): a quarter of the wait, at least 100 ms.
    static func starvationTolerance(of timeout: Duration) -> Duration {
        max(.milliseconds(100), timeout / 4)
    }

    /// `busy` answers one request waits out before the error reaches its caller.
    static let maxBusyAnswers = 50

    private func decodeReply<Request: FleetRequest>(_ type: Request.Type, _ message: InboundMessage) throws -> Request.Reply {
        switch message.header.type {
        case Request.Reply.messageType:
            return try codec.decodeBody(Request.Reply.self, from: message)
        case FleetError.messageType:
            throw try codec.decodeBody(FleetError.self, from: message)
        default:
            throw FleetError(.malformedMessage, "\(Request.messageType) was answered with \(message.header.type)")
        }
    }

    /// Sends one attempt of a request and waits up to `timeout` for the reply.
    private func exchange<Request: FleetRequest>(
        _ request: Request, id: UInt64, on socket: AsyncSocket, timeout: Duration
    ) async throws -> InboundMessage {
        let frames = try codec.encode(request, header: MessageHeader(type: Request.messageType, id: id))
        // The slot exists before the send, so a fast reply is never missed.
        if pending[id] == nil { pending[id] = .waiting(nil) }
        unanswered[id] = (frames, connection)
        defer {
            pending[id] = nil
            unanswered[id] = nil
        }
        lastSent = clock.now
        liveness.probed(at: lastSent)
        try await socket.send(frames)
        return try await withThrowingTaskGroup(of: InboundMessage.self) { group in
            group.addTask { try await self.awaitReply(id) }
            group.addTask { [clock] in
                try await clock.sleep(ownTimeFor: timeout, tolerance: Self.starvationTolerance(of: timeout))
                throw ReplyTimeout()
            }
            defer { group.cancelAll() }
            guard let first = try await group.next() else { throw ReplyTimeout() }
            return first
        }
    }

    private func awaitReply(_ id: UInt64) async throws -> InboundMessage {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                switch pending[id] {
                case .arrived(let message):
                    pending[id] = nil
                    continuation.resume(returning: message)
                case .waiting, nil:
                    if Task.isCancelled || stopped {
                        continuation.resume(throwing: CancellationError())
                    } else {
                        pending[id] = .waiting(continuation)
                    }
                }
            }
        } onCancel: {
            Task { await self.cancelWaiter(id) }
        }
    }

    private func cancelWaiter(_ id: UInt64) {
        if case .waiting(let continuation?) = pending[id] {
            pending[id] = .waiting(nil)
            continuation.resume(throwing: CancellationError())
        }
    }

    private func currentSocket() async -> AsyncSocket? {
        while socket == nil && !stopped {
            await withCheckedContinuation { socketWaiters.append($0) }
        }
        return socket
    }

    private func resumeSocketWaiters() {
        let waiters = socketWaiters
        socketWaiters = []
        for waiter in waiters { waiter.resume() }
    }

    private func makeRequestID() -> UInt64 {
        nextRequestID &+= 1
        return nextRequestID
    }
}
