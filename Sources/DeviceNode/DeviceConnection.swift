import FleetProtocol
import FleetZeroMQTransport
import Logging
import Synchronization
import ZeroMQ

/// Who the device is to a coordinator.
///
/// ```swift
/// let credentials = CoordinatorCredentials.accessToken(tokenFromYourOAuthFlow)
/// let service = CoordinatorCredentials.password(email: "ann@acme.example", secret: secret)
/// ```
public struct CoordinatorCredentials: Sendable, Hashable {
    enum Kind: Sendable, Hashable {
        case token(String)
        case password(email: String, secret: String)
    }

    let kind: Kind

    /// An access token from your OAuth flow. Coordinators that do not share a store do not know
    /// each other's tokens: with several endpoints, prefer ``password(email:secret:)``.
    public static func accessToken(_ token: String) -> CoordinatorCredentials { .init(kind: .token(token)) }

    /// A user's email and secret: the connection asks the session's coordinator for a fresh token
    /// (`auth.token`) at each enrollment and login (after a failover, the new coordinator).
    public static func password(email: String, secret: String) -> CoordinatorCredentials {
        .init(kind: .password(email: email, secret: secret))
    }
}

/// When a ``DeviceConnection`` syncs the outbox on its own.
public struct SyncPolicy: Sendable, Hashable {
    enum Kind: Sendable, Hashable {
        case whenOnline
        case every(Duration)
        case manual
    }

    let kind: Kind

    /// Each time a session with a coordinator starts (first connection, back online, failover),
    /// and whenever an envelope is queued for sync while connected; a failed pass is tried again
    /// after a back-off. The default.
    public static let whenOnline = SyncPolicy(kind: .whenOnline)
    /// A pass every `interval` while connected (and one when a session starts).
    public static func every(_ interval: Duration) -> SyncPolicy { SyncPolicy(kind: .every(interval)) }
    /// Only when the app calls ``DeviceConnection/sync()``.
    public static let manual = SyncPolicy(kind: .manual)
}

/// What the app's reachability check says: ``DeviceConnection/setReachability(_:)``.
public enum Reachability: Sendable, Hashable {
    case online
    case offline
}

/// Settings of a ``DeviceConnection``; the defaults suit an app.
public struct DeviceConnectionConfiguration: Sendable {
    /// The coordinators' CURVE public key (32 bytes) to pin; `nil` for plain TCP (tests, comparisons).
    public var serverKey: [UInt8]?
    public var syncPolicy: SyncPolicy
    /// Batching and retries of each pass.
    public var sync: SyncEngineConfiguration
    /// How long one request waits for its reply before it is sent again, and to the next
    /// endpoint after a failure (Lazy Pirate): with several endpoints, a failover takes about this.
    public var requestTimeout: Duration
    /// Sends of one request to each endpoint before it fails with a retryable `timeout` (with two
    /// endpoints, twice as many in all: the client moves on to the next endpoint after an unanswered one).
    public var maxAttempts: Int
    /// Delay before each reconnection; doubles per failure, resets on success.
    public var reconnectBackoff: Backoff
    /// Under ``SyncPolicy/whenOnline``, the wait before a failed pass is tried again (doubling).
    public var retryBackoff: Backoff
    /// An I/O loop to share with other connections of this process (one thread polls every
    /// socket); `nil` makes one per online session, shut down with it.
    public var loop: ZMQIOLoop?
    /// What request timeouts, heartbeats, back-off and ``SyncPolicy/every(_:)`` are timed on:
    /// `ContinuousClock()`; tests pass a clock they move by hand (FleetTesting's `ManualClock`).
    public var clock: any FleetClock

    public init(
        serverKey: [UInt8]? = nil, syncPolicy: SyncPolicy = .whenOnline, sync: SyncEngineConfiguration = SyncEngineConfiguration(),
        requestTimeout: Duration = .seconds(2), maxAttempts: Int = 3,
        reconnectBackoff: Backoff = Backoff(initial: .milliseconds(250), maximum: .seconds(5)),
        retryBackoff: Backoff = Backoff(initial: .seconds(1), maximum: .seconds(60)), loop: ZMQIOLoop? = nil,
        clock: any FleetClock = ContinuousClock()
    ) {
        self.clock = clock
        self.serverKey = serverKey
        self.syncPolicy = syncPolicy
        self.sync = sync
        self.requestTimeout = requestTimeout
        self.maxAttempts = max(1, maxAttempts)
        self.reconnectBackoff = reconnectBackoff
        self.retryBackoff = retryBackoff
        self.loop = loop
    }

    /// A configuration that pins the coordinator's key as the coordinator prints it: the 40
    /// characters of Z85 text in its log and in a fleet run's `coordinator.pub` (surrounding
    /// whitespace ignored), or 64 hexadecimal digits.
    /// - Throws: ``DeviceNodeError/Code/invalidConfiguration`` naming what is wrong with the text.
    public init(serverKey text: String, syncPolicy: SyncPolicy = .whenOnline) throws {
        self.init(serverKey: try Self.coordinatorKey(text), syncPolicy: syncPolicy)
    }

    /// The 32 bytes of a coordinator key written as Z85 (40 characters) or hexadecimal (64).
    /// - Throws: ``DeviceNodeError/Code/invalidConfiguration`` naming what is wrong with the text.
    public static func coordinatorKey(_ text: String) throws -> [UInt8] {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        switch trimmed.utf8.count {
        case 40:
            guard let key = Z85.decode(trimmed), key.count == 32 else {
                throw DeviceNodeError(.invalidConfiguration, "the coordinator key '\(trimmed)' is 40 characters but not Z85 text (ZeroMQ's base 85)")
            }
            return key
        case 64:
            guard let key = Hex.decode(trimmed.utf8) else {
                throw DeviceNodeError(.invalidConfiguration, "the coordinator key is 64 characters but not hexadecimal")
            }
            return key
        default:
            throw DeviceNodeError(
                .invalidConfiguration,
                "a coordinator key is 40 characters of Z85 (as the coordinator prints it) or 64 hexadecimal digits; got \(trimmed.utf8.count) characters")
        }
    }
}

/// A change of a ``DeviceConnection``, from ``DeviceConnection/states()``.
public struct DeviceConnectionState: Sendable, Hashable, CustomStringConvertible {
    /// What the connection is doing (an open set: compare with `==`).
    public struct Status: Sendable, Hashable, CustomStringConvertible {
        public let rawValue: String
        init(_ rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }
        /// Online, looking for a coordinator that answers.
        public static let connecting = Status("connecting")
        /// A coordinator answered `hello`: ``DeviceConnectionState/endpoint`` and ``DeviceConnectionState/serverInstance`` say which.
        public static let connected = Status("connected")
        /// Offline by ``DeviceConnection/setReachability(_:)``: no socket, no traffic.
        public static let offline = Status("offline")
        /// Shut down (``DeviceConnection/shutdown()``); ``DeviceConnection/connect()`` starts it again.
        public static let shutDown = Status("shutDown")
        /// The CURVE handshake failed (``DeviceConnectionState/reason`` says how): the pinned
        /// `serverKey` is not the coordinator's, or it refused this device's key. The connection
        /// keeps trying (a coordinator may be replaced by one with the pinned key).
        public static let handshakeFailed = Status("handshakeFailed")
    }

    public var status: Status
    /// The coordinator endpoint of the session, when connected.
    public var endpoint: String?
    /// The coordinator run of the session, when connected (a new one after a restart or failover).
    public var serverInstance: String?
    /// Why, for ``Status/handshakeFailed``.
    public var reason: String?

    public init(status: Status, endpoint: String? = nil, serverInstance: String? = nil, reason: String? = nil) {
        self.status = status
        self.endpoint = endpoint
        self.serverInstance = serverInstance
        self.reason = reason
    }

    public var description: String {
        [status.rawValue, endpoint, serverInstance, reason].compactMap { $0 }.joined(separator: " ")
    }
}

extension DeviceNode {
    /// Connects the device to its coordinator(s) in one call: the returned connection owns the
    /// client (ZeroMQ, CURVE with the device's ``transportKeys`` when `configuration.serverKey` is
    /// set), its I/O loop and the sync engine, and syncs by `configuration.syncPolicy`.
    ///
    /// It returns at once, without waiting for the network (an offline start is normal); follow
    /// ``DeviceConnection/states()`` to see it connect. With several endpoints it uses the first
    /// that answers and moves on to the next when that coordinator dies or stops answering, sending
    /// again whatever was not acknowledged (sync is idempotent).
    ///
    /// ```swift
    /// let connection = try await node.connect(to: ["tcp://coordinator-a:5555", "tcp://coordinator-b:5555"],
    ///                                         credentials: .password(email: email, secret: secret),
    ///                                         configuration: DeviceConnectionConfiguration(serverKey: serverKey))
    /// try await connection.login()
    /// ```
    ///
    /// - Parameters:
    ///   - endpoints: coordinator ROUTER endpoints (`tcp://host:port`), tried in order.
    ///   - credentials: how the device authenticates to an account.
    ///   - configuration: security, sync policy, timeouts.
    ///   - logger: where the connection logs.
    /// - Throws: ``DeviceNodeError/Code/invalidConfiguration`` without endpoints.
    public func connect(
        to endpoints: [String], credentials: CoordinatorCredentials,
        configuration: DeviceConnectionConfiguration = DeviceConnectionConfiguration(),
        logger: Logger = Logger(label: "signfleet.connection")
    ) async throws -> DeviceConnection {
        try ensureOpen()
        guard let first = endpoints.first else {
            throw DeviceNodeError(.invalidConfiguration, "connect(to:) needs at least one coordinator endpoint")
        }
        let security: ClientSecurity = configuration.serverKey.map { .curve(serverKey: $0, keys: transportKeys) } ?? .plaintext
        let client = FleetClientConfiguration(
            endpoint: first, failoverEndpoints: Array(endpoints.dropFirst()), deviceID: deviceId, security: security,
            // Attempts per endpoint: an attempt spent on a dead endpoint must not use up the live one's.
            requestTimeout: configuration.requestTimeout, maxAttempts: configuration.maxAttempts * endpoints.count,
            reconnectBackoff: configuration.reconnectBackoff)
        let sharedLoop = configuration.loop
        let clock = configuration.clock
        let factory: DeviceConnection.TransportFactory = {
            if let sharedLoop {
                return (FleetClient(configuration: client, loop: sharedLoop, logger: logger, clock: clock), {})
            }
            let context = try ZMQContext()
            let loop = try ZMQIOLoop(context: context, label: "device-connection")
            return (FleetClient(configuration: client, loop: loop, logger: logger, clock: clock), {
                await loop.shutdown()
                context.shutdown()
            })
        }
        return try await connect(using: factory, credentials: credentials, configuration: configuration, logger: logger)
    }

    /// ``connect(to:credentials:configuration:logger:)`` over any `ClientTransport`:
    /// `makeTransport` is called for each online session (a stopped transport cannot restart)
    /// and returns the transport and what closes its resources. Tests use FleetTesting's
    /// in-process transport here.
    public func connect(
        using makeTransport: @escaping @Sendable () throws -> (any ClientTransport, close: @Sendable () async -> Void),
        credentials: CoordinatorCredentials, configuration: DeviceConnectionConfiguration = DeviceConnectionConfiguration(),
        logger: Logger = Logger(label: "signfleet.connection")
    ) async throws -> DeviceConnection {
        try ensureOpen()
        let connection = DeviceConnection(
            node: self, makeTransport: makeTransport, credentials: credentials, configuration: configuration, logger: logger)
        try await connection.connect()
        return connection
    }
}

/// A device's connection to its coordinator(s): the client, its I/O loop and the sync engine,
/// kept by one actor (``DeviceNode/connect(to:credentials:configuration:logger:)``).
///
/// - ``setReachability(_:)`` takes it offline (the socket closes; a pass in flight stops, its
///   items stay queued) and back online (a new session; the policy syncs).
/// - ``sync()`` runs a pass now, whatever the policy.
/// - ``shutdown()`` ends it in order: the pass in flight stops with nothing lost, the socket and
///   the loop close. ``connect()`` starts it again.
///
/// A running connection keeps itself alive (its tasks hold it) until ``shutdown()``: dropping the
/// last reference does not end it, so call ``shutdown()`` when you are done.
///
/// ```swift
/// let connection = try await node.connect(to: ["tcp://coordinator:5555"],
///                                         credentials: .password(email: email, secret: secret),
///                                         configuration: try DeviceConnectionConfiguration(serverKey: printedKey))
/// for await state in connection.states() {
///     if state.status == .connected { break }
///     if state.status == .handshakeFailed { print("wrong coordinator key: \(state.reason ?? "")") }
/// }
/// try await connection.login()
/// try await connection.setReachability(.offline)   // what your reachability check says
/// try await connection.setReachability(.online)    // a new session; the policy syncs
/// await connection.shutdown()
/// ```
public actor DeviceConnection {
    typealias TransportFactory = @Sendable () throws -> (any ClientTransport, close: @Sendable () async -> Void)

    /// One online period: a transport, the task keeping it, the engine over it, and the tasks
    /// that follow its events and the policy.
    private struct Session {
        var id: UInt64
        var transport: any ClientTransport
        var close: @Sendable () async -> Void
        var engine: SyncEngine
        var tasks: [Task<Void, Never>]
    }

    public nonisolated let configuration: DeviceConnectionConfiguration
    private let node: DeviceNode
    private let makeTransport: TransportFactory
    private let credentials: CoordinatorCredentials
    private let logger: Logger
    private let broadcaster = StateBroadcaster()
    private var session: Session?
    private var sessions: UInt64 = 0
    private var reachability: Reachability = .online
    private var isShutDown = true
    private var current = DeviceConnectionState(status: .shutDown)
    /// The last CURVE handshake failure since the last `hello` answered: what a request that got no
    /// answer is blamed on, rather than the credentials.
    private var handshakeFailure: String?

    init(
        node: DeviceNode, makeTransport: @escaping TransportFactory, credentials: CoordinatorCredentials,
        configuration: DeviceConnectionConfiguration, logger: Logger
    ) {
        self.node = node
        self.makeTransport = makeTransport
        self.credentials = credentials
        self.configuration = configuration
        var logger = logger
        logger[metadataKey: "device"] = "\(node.deviceId)"
        self.logger = logger
    }

    /// A new subscription to the connection's changes, starting with the current state.
    public nonisolated func states() -> AsyncStream<DeviceConnectionState> {
        broadcaster.subscribe()
    }

    /// The state now.
    public var state: DeviceConnectionState { current }

    /// Starts the connection (again, after ``shutdown()``); online unless ``setReachability(_:)``
    /// said offline. Does nothing when it runs.
    /// - Throws: when the I/O loop cannot be made (resources exhausted).
    public func connect() async throws {
        guard isShutDown else { return }
        isShutDown = false
        if reachability == .online {
            try openSession()
        } else {
            publish(DeviceConnectionState(status: .offline))
        }
    }

    /// Ends the connection in order: the pass in flight stops (its items stay queued, nothing is
    /// lost), the socket and the I/O loop close, ``states()`` says `shutDown`. ``connect()`` starts
    /// it again; the node stays open.
    public func shutdown() async {
        guard !isShutDown else { return }
        isShutDown = true
        await closeSession()
        publish(DeviceConnectionState(status: .shutDown))
    }

    /// What the app's reachability check says. Offline closes the session (no socket, no
    /// heartbeats, a pass in flight stops with its items queued); online opens a new one, and the
    /// policy syncs when it connects.
    public func setReachability(_ reachability: Reachability) async throws {
        guard reachability != self.reachability else { return }
        self.reachability = reachability
        guard !isShutDown else { return }
        switch reachability {
        case .offline:
            await closeSession()
            publish(DeviceConnectionState(status: .offline))
        case .online:
            try openSession()
        }
    }

    /// Runs a sync pass now (any policy) and returns its summary.
    /// - Throws: ``DeviceNodeError/Code/notConnected`` when offline or shut down; the engine's
    ///   errors otherwise (``SyncEngine/syncAll()``). Items not acknowledged stay queued.
    public func sync() async throws -> SyncSummary {
        guard let engine = session?.engine else {
            throw DeviceNodeError(.notConnected, "the device is \(isShutDown ? "shut down" : "offline"); connect or go online first")
        }
        return try await engine.syncAll()
    }

    /// Logs the node in with the connection's credentials, asking the coordinator (`auth.userinfo`);
    /// the account is persisted, so ``DeviceNode/loginOffline()`` works later.
    /// - Throws: ``DeviceNodeError/Code/notConnected`` when offline; ``DeviceNodeError/Code/loginFailed``
    ///   when the coordinator refuses or does not answer.
    @discardableResult
    public func login() async throws -> AccountInfo {
        guard let transport = session?.transport else {
            throw DeviceNodeError(.notConnected, "the device is \(isShutDown ? "shut down" : "offline"); connect or go online first")
        }
        var attempt = 0
        while true {
            attempt += 1
            let token: String
            do {
                token = try await accessToken(over: transport)
            } catch {
                if let handshakeFailure { throw DeviceNodeError(.handshakeFailed, handshakeFailure, underlying: error) }
                throw DeviceNodeError(.loginFailed, "the coordinator did not issue an access token for these credentials", underlying: error)
            }
            do {
                return try await node.login(accessToken: token, using: RemoteAccountService(client: transport))
            } catch let error as DeviceNodeError where error.code == .loginFailed && handshakeFailure != nil {
                throw DeviceNodeError(.handshakeFailed, handshakeFailure ?? "", underlying: error)
            } catch let error as DeviceNodeError where attempt < 3 && error.code == .loginFailed {
                // The session may have moved to another coordinator between the token and its use
                // (a failover), and that one does not know the token: again, with a fresh token.
                guard case .password = credentials.kind else { throw error }
                logger.notice("login refused; asking for a token again (the session may have moved to another coordinator)")
            }
        }
    }

    /// The session's transport while online (for the remote services: templates, recipient views).
    public var transport: (any ClientTransport)? { session?.transport }

    // MARK: Sessions

    private func openSession() throws {
        guard session == nil else { return }
        let (transport, close) = try makeTransport()
        sessions += 1
        let id = sessions
        let engine = SyncEngine(
            node: node, client: transport, token: { [weak self] in
                guard let self else { throw CancellationError() }
                return try await self.accessToken(over: transport)
            }, configuration: configuration.sync, logger: logger, clock: configuration.clock)
        let triggers = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        var tasks: [Task<Void, Never>] = [Task { await transport.run() }]
        tasks.append(Task { [weak self] in await self?.follow(transport, session: id, triggers: triggers.continuation) })
        switch configuration.syncPolicy.kind {
        case .manual:
            break
        case .whenOnline:
            // An envelope queued while connected is pushed at once.
            let events = node.events()
            tasks.append(Task {
                for await event in events {
                    if case .envelopeQueuedForSync = event { triggers.continuation.yield() }
                }
            })
        case .every(let interval):
            tasks.append(Task { [clock = configuration.clock] in
                while (try? await clock.sleep(for: interval)) != nil { triggers.continuation.yield() }
            })
        }
        if configuration.syncPolicy != .manual {
            tasks.append(Task { [weak self] in await self?.runPasses(engine, triggers: triggers.stream) })
        }
        session = Session(id: id, transport: transport, close: close, engine: engine, tasks: tasks)
        // Templates go over this session's transport while it lasts (a node opened before any
        // connection existed has no template service of its own).
        node.connectionTemplates.withLock { $0 = RemoteTemplateService(client: transport) }
        publish(DeviceConnectionState(status: .connecting))
    }

    private func closeSession() async {
        guard let session else { return }
        self.session = nil
        node.connectionTemplates.withLock { $0 = nil }
        for task in session.tasks.dropFirst() { task.cancel() }
        await session.engine.cancel()
        await session.transport.stop()
        for task in session.tasks {
            task.cancel()
            await task.value
        }
        await session.close()
    }

    /// Publishes the transport's connection changes and starts a pass on each new session.
    private func follow(_ transport: any ClientTransport, session id: UInt64, triggers: AsyncStream<Void>.Continuation) async {
        for await event in transport.connectionEvents {
            guard session?.id == id else { break }  // a closed session's late events
            switch event {
            case .connected(let instance):
                handshakeFailure = nil
                let endpoint = await transport.connectedEndpoint
                logger.info("connected", metadata: ["instance": "\(instance)", "endpoint": "\(endpoint ?? "in-process")"])
                publish(DeviceConnectionState(status: .connected, endpoint: endpoint, serverInstance: instance))
                triggers.yield()
            case .handshakeFailed(let reason):
                handshakeFailure = reason
                publish(DeviceConnectionState(status: .handshakeFailed, reason: reason))
            case .lost, .reconnecting:
                if current.status != .connecting, current.status != .handshakeFailed { publish(DeviceConnectionState(status: .connecting)) }
            }
        }
        triggers.finish()
    }

    /// Runs a pass per trigger, one at a time; under ``SyncPolicy/whenOnline`` a failed pass is tried
    /// again after a back-off.
    private func runPasses(_ engine: SyncEngine, triggers: AsyncStream<Void>) async {
        var retry = configuration.retryBackoff
        var retryTask: Task<Void, Never>?
        let (again, againContinuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        defer { retryTask?.cancel() }
        await withDiscardingTaskGroup { group in
            group.addTask { for await _ in triggers { againContinuation.yield() }; againContinuation.finish() }
            for await _ in again {
                if Task.isCancelled { break }
                do {
                    _ = try await engine.syncAll()
                    retry.reset()
                } catch is CancellationError {
                    break
                } catch {
                    guard configuration.syncPolicy == .whenOnline else { continue }
                    let delay = retry.next()
                    logger.notice("sync pass failed; trying again", metadata: ["error": "\(error)", "after": "\(delay)"])
                    retryTask?.cancel()
                    retryTask = Task { [clock = configuration.clock] in
                        if (try? await clock.sleep(for: delay)) != nil { againContinuation.yield() }
                    }
                }
            }
            group.cancelAll()
        }
    }

    /// The token to present on `transport`'s coordinator: the configured one, or a fresh one asked
    /// for with the password each time (once per enrollment, that is per session: never one that
    /// expired, or that another coordinator issued before a failover).
    private func accessToken(over transport: any ClientTransport) async throws -> String {
        switch credentials.kind {
        case .token(let token):
            return token
        case .password(let email, let secret):
            return try await transport.request(AccessTokenRequest(email: email, secret: secret)).accessToken
        }
    }

    private func publish(_ state: DeviceConnectionState) {
        current = state
        broadcaster.publish(state)
    }
}

/// Every subscriber of ``DeviceConnection/states()`` gets every change after the current state.
private final class StateBroadcaster: Sendable {
    private struct State {
        var subscribers: [UInt64: AsyncStream<DeviceConnectionState>.Continuation] = [:]
        var nextID: UInt64 = 0
        var latest = DeviceConnectionState(status: .shutDown)
    }

    private let state = Mutex(State())

    func subscribe() -> AsyncStream<DeviceConnectionState> {
        let (stream, continuation) = AsyncStream.makeStream(of: DeviceConnectionState.self, bufferingPolicy: .bufferingNewest(100))
        let id = state.withLock { state in
            state.nextID += 1
            state.subscribers[state.nextID] = continuation
            continuation.yield(state.latest)
            return state.nextID
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.subscribers.removeValue(forKey: id) }
        }
        return stream
    }

    func publish(_ value: DeviceConnectionState) {
        state.withLock { state in
            state.latest = value
            for continuation in state.subscribers.values { continuation.yield(value) }
        }
    }
}
