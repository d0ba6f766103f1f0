import FleetProtocol
import Foundation
import Synchronization
import ZeroMQ

/// A coordinator's request dispatch in this process, without a socket: what `FleetServer`
/// does with each message it reads (`FleetResponder` (FleetProtocol): `hello`, `heartbeat`, then
/// the `RequestRouter`), for clients made by `client(deviceID:security:requestTimeout:maxAttempts:)`.
///
/// Tests and simulations use it to run the sync engine, the remote services and a device's
/// connection end to end in milliseconds; the ZeroMQ `FleetServer` stays the real one.
/// Identity is established as the ROUTER's ZAP handler does, never claimed: under CURVE a
/// client must hold a key pair (`CurveKeyPair` is only made from a secret key) and pin this
/// server's public key, and requests then carry `curveKey(_:)`
/// with its public key; under plain TCP the credential is the claimed device id, as a routing id is.
///
/// ```swift
/// var router = RequestRouter()
/// services.register(in: &router)
/// let server = InProcessServer(router: router, security: .curve(serverKeys))
/// let transport = server.client(deviceID: node.deviceId, security: .curve(serverKey: serverKeys.publicKey, keys: node.transportKeys))
/// let engine = SyncEngine(node: node, client: transport, accessToken: token)
/// ```
public final class InProcessServer: Sendable {
    /// Answers every message, as the real server does.
    public let responder: FleetResponder
    public let security: WireSecurity
    private let codec: WireCodec
    private let answering = Mutex(true)

    /// - Parameters:
    ///   - router: the coordinator's handlers (`CoordinatorServices.register(in:)`).
    ///   - security: CURVE (with the server's key pair) or plain TCP, as `FleetServer`'s.
    ///   - configuration: the server settings `hello` reports (heartbeat, limits, name).
    public init(router: RequestRouter, security: WireSecurity = .plaintext, configuration: FleetServerConfiguration = FleetServerConfiguration()) {
        var configuration = configuration
        configuration.security = security
        self.responder = FleetResponder(router: router, configuration: configuration)
        self.security = security
        self.codec = WireCodec(limits: configuration.limits)
    }

    /// This server run's id (`serverInstance`).
    public var instance: String { responder.instance }

    /// Whether requests are answered: `false` plays a coordinator that hangs (its clients' requests
    /// time out); `true` again answers the requests sent from then on.
    public var isAnswering: Bool {
        get { answering.withLock { $0 } }
        set { answering.withLock { $0 = newValue } }
    }

    /// A client of this server for one device.
    ///
    /// - Parameters:
    ///   - deviceID: what `hello` says (under plain TCP also the claimed identity).
    ///   - security: must match the server's: CURVE with this server's public key pinned, or plain TCP.
    ///     A mismatch never completes the handshake (`handshakeFailed(_:)`).
    ///   - requestTimeout: how long one attempt waits while the server does not answer.
    ///   - maxAttempts: attempts of one request before a retryable `timeout` error.
    ///   - clock: what the attempts' timeouts are timed on (a ``ManualClock`` in a test that is
    ///     not about timeouts never sees one).
    public func client(
        deviceID: String, security: ClientSecurity = .plaintext, requestTimeout: Duration = .seconds(2), maxAttempts: Int = 3,
        clock: any FleetClock = ContinuousClock()
    ) -> InProcessClientTransport {
        InProcessClientTransport(
            server: self, deviceID: deviceID, security: security, requestTimeout: requestTimeout, maxAttempts: max(1, maxAttempts), clock: clock)
    }

    /// The credential a client's handshake establishes, or why it fails (as CURVE's would).
    func handshake(deviceID: String, security clientSecurity: ClientSecurity) -> Result<PeerCredential, HandshakeRefusal> {
        switch (security, clientSecurity) {
        case (.plaintext, .plaintext):
            return .success(.claimedName(deviceID))
        case (.curve(let keys), .curve(let serverKey, let clientKeys)):
            guard serverKey == keys.publicKey else {
                return .failure(HandshakeRefusal(reason: "the coordinator's public key is not the pinned one"))
            }
            return .success(.curveKey(clientKeys.publicKey))
        case (.curve, .plaintext):
            return .failure(HandshakeRefusal(reason: "the coordinator requires CURVE"))
        case (.plaintext, .curve):
            return .failure(HandshakeRefusal(reason: "the coordinator does not serve CURVE"))
        }
    }

    /// One request through the codec both ways (so the contract's encoding and limits apply) and
    /// the responder; nil when the server is not answering.
    func exchange(_ frames: [[UInt8]], peer: [UInt8], credential: PeerCredential, replyID: UInt64) async -> [[UInt8]]? {
        guard isAnswering else { return nil }
        let result: Result<EncodedReply, FleetError>
        var replyTo: UInt64?
        var rateLimit: RateLimitStatus?
        do {
            let message = try codec.decode(frames)
            replyTo = message.header.id
            let context = RequestContext(peer: peer, header: message.header, receivedAt: .now, credential: credential)
            result = await responder.answer(message, context: context)
            rateLimit = context.replyMetadata.rateLimit
        } catch {
            replyTo = error.header?.id
            result = .failure(error.error)
        }
        guard isAnswering else { return nil }  // it stopped while the handler ran: the reply is lost
        let reply: (type: MessageType, body: [UInt8])
        switch result {
        case .success(let encoded): reply = (encoded.type, encoded.body)
        case .failure(let error):
            guard let body = try? codec.encodeBody(error) else { return nil }
            reply = (FleetError.messageType, body)
        }
        let header = MessageHeader(type: reply.type, id: replyID, replyTo: replyTo, rateLimit: rateLimit)
        guard let headerFrame = try? codec.encodeHeader(header) else { return nil }
        return [headerFrame, reply.body]
    }

    struct HandshakeRefusal: Error {
        var reason: String
    }
}

/// The `ClientTransport` of an ``InProcessServer``: requests go through the wire
/// codec to the server's responder in this process, with the identity the handshake established.
///
/// `run()` does the handshake and says `hello` (so ``serverInstance`` is the server's), then keeps
/// the session until cancelled or stopped. Requests wait for the session, are handled one at a
/// time in the order sent (as the real server handles one device's requests), and are sent again
/// with the same request id while the server does not answer, up to the attempts allowed.
public actor InProcessClientTransport: ClientTransport {
    public nonisolated let connectionEvents: AsyncStream<ConnectionEvent>
    public private(set) var serverInstance: String?
    public private(set) var lastRateLimit: RateLimitStatus?
    /// `inproc:` and the server's instance once connected.
    public var connectedEndpoint: String? { serverInstance.map { "inproc:\($0)" } }

    private let server: InProcessServer
    private let deviceID: String
    private let security: ClientSecurity
    private let requestTimeout: Duration
    /// What each attempt's timeout is timed on.
    private let clock: any FleetClock
    private let maxAttempts: Int
    private let codec: WireCodec
    private let eventsContinuation: AsyncStream<ConnectionEvent>.Continuation
    /// The server-side name of this connection: under CURVE assigned (a leading 0, as libzmq's),
    /// under plain TCP the device id.
    private let peer: [UInt8]
    private var credential: PeerCredential?
    private var sessionWaiters: [CheckedContinuation<Void, Never>] = []
    private var inFlight = false
    private var turnWaiters: [CheckedContinuation<Void, Never>] = []
    private var stopped = false
    private var nextID: UInt64 = 1

    init(
        server: InProcessServer, deviceID: String, security: ClientSecurity, requestTimeout: Duration, maxAttempts: Int,
        clock: any FleetClock = ContinuousClock()
    ) {
        self.clock = clock
        self.server = server
        self.deviceID = deviceID
        self.security = security
        self.requestTimeout = requestTimeout
        self.maxAttempts = maxAttempts
        self.codec = WireCodec(limits: server.responder.configuration.limits)
        switch security {
        case .plaintext: peer = Array(deviceID.utf8)
        case .curve: peer = [0] + withUnsafeBytes(of: UInt32.random(in: 0...UInt32.max)) { Array($0) }
        }
        (connectionEvents, eventsContinuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1000))
    }

    public func run() async {
        defer { stop() }
        switch server.handshake(deviceID: deviceID, security: security) {
        case .failure(let refusal):
            eventsContinuation.yield(.handshakeFailed(refusal.reason))
            // libzmq keeps retrying a failed handshake; so does this until the task ends.
            await waitUntilStopped()
            return
        case .success(let credential):
            self.credential = credential
        }
        while !Task.isCancelled && !stopped {
            do {
                let reply = try await send(Hello(deviceID: deviceID, client: "signfleet-inprocess"), timeout: requestTimeout, attempts: 1)
                serverInstance = reply.serverInstance
                eventsContinuation.yield(.connected(serverInstance: reply.serverInstance))
                resumeSessionWaiters()
                await waitUntilStopped()
                return
            } catch {
                // no answer yet (the server is not answering): say hello again
                continue
            }
        }
    }

    public func stop() {
        guard !stopped else { return }
        stopped = true
        eventsContinuation.finish()
        for waiter in stopWaiters { waiter.finish() }
        stopWaiters = []
        resumeSessionWaiters()
        let waiters = turnWaiters
        turnWaiters = []
        for waiter in waiters { waiter.resume() }
    }

    public func request<Request: FleetRequest>(_ request: Request, timeout: Duration?, attempts: Int?) async throws -> Request.Reply {
        while serverInstance == nil && !stopped {
            await withCheckedContinuation { sessionWaiters.append($0) }
        }
        return try await send(request, timeout: timeout ?? requestTimeout, attempts: max(1, attempts ?? maxAttempts))
    }

    private func send<Request: FleetRequest>(_ request: Request, timeout: Duration, attempts: Int) async throws -> Request.Reply {
        guard let credential, !stopped else { throw CancellationError() }
        // One request at a time, in order: what the server guarantees one device.
        while inFlight && !stopped { await withCheckedContinuation { turnWaiters.append($0) } }
        guard !stopped else { throw CancellationError() }
        inFlight = true
        defer { nextTurn() }
        nextID &+= 1
        let id = nextID
        let frames = try codec.encode(request, header: MessageHeader(type: Request.messageType, id: id))
        for _ in 0..<attempts {
            try Task.checkCancellation()
            if let replyFrames = await answer(to: frames, credential: credential, replyID: id, within: timeout) {
                return try decodeReply(Request.self, replyFrames)
            }
            if stopped { throw CancellationError() }
        }
        throw FleetError(.timeout, "no reply to \(Request.messageType) after \(attempts) attempts (the last waited \(timeout))", retryable: true)
    }

    /// The server's answer, or nil when none came within `timeout`. The server keeps working on a
    /// request whose client gave up (as a real one does): its task is not cancelled.
    private func answer(to frames: [[UInt8]], credential: PeerCredential, replyID: UInt64, within timeout: Duration) async -> [[UInt8]]? {
        let server = self.server
        let peer = self.peer
        let handling = Task { await server.exchange(frames, peer: peer, credential: credential, replyID: replyID) }
        let outcome = Mutex<CheckedContinuation<[[UInt8]]?, Never>?>(nil)
        let resume: @Sendable ([[UInt8]]?) -> Void = { value in outcome.withLock { $0.take() }?.resume(returning: value) }
        var timer: Task<Void, Never>?
        let reply = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                outcome.withLock { $0 = continuation }
                Task { resume(await handling.value) }
                timer = Task { [clock] in
                    // The attempt's timeout, raced against the answer; not a synchronisation sleep.
                    try? await clock.sleep(for: timeout)
                    resume(nil)
                }
                if Task.isCancelled { resume(nil) }
            }
        } onCancel: {
            resume(nil)
        }
        timer?.cancel()
        return reply
    }

    private func decodeReply<Request: FleetRequest>(_ type: Request.Type, _ frames: [[UInt8]]) throws -> Request.Reply {
        let message: InboundMessage
        do {
            message = try codec.decode(frames)
        } catch {
            throw error.error
        }
        if let rateLimit = message.header.rateLimit { lastRateLimit = rateLimit }
        switch message.header.type {
        case Request.Reply.messageType: return try codec.decodeBody(Request.Reply.self, from: message)
        case FleetError.messageType: throw try codec.decodeBody(FleetError.self, from: message)
        default: throw FleetError(.malformedMessage, "\(Request.messageType) was answered with \(message.header.type)")
        }
    }

    private func nextTurn() {
        inFlight = false
        if !turnWaiters.isEmpty { turnWaiters.removeFirst().resume() }
    }

    private func resumeSessionWaiters() {
        let waiters = sessionWaiters
        sessionWaiters = []
        for waiter in waiters { waiter.resume() }
    }

    private func waitUntilStopped() async {
        // Ends with the task (cancellation) or with stop(), whichever comes first.
        let (ended, continuation) = AsyncStream<Void>.makeStream()
        stopWaiters.append(continuation)
        if stopped { continuation.finish() }
        await withTaskCancellationHandler {
            for await _ in ended {}
        } onCancel: {
            continuation.finish()
        }
    }

    private var stopWaiters: [AsyncStream<Void>.Continuation] = []
}
