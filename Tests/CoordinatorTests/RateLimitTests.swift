import DeviceNode
import FleetProtocol
import FleetZeroMQTransport
import FleetTesting
import Foundation
import Logging
import Synchronization
import Testing
import ZeroMQ

@testable import Coordinator

@Suite struct RateLimiterTests {
    let clock = TestClock()
    let limits = RateLimits(hourly: 10, burst: 3, burstWindowSeconds: 30)

    @Test func theBurstWindowFillsThenRecoversOnceItEnds() {
        let limiter = RateLimiter(now: clock.now)
        let start = clock.now()
        for expected in [2, 1, 0] as [UInt32] {
            let decision = limiter.admit(accountID: "a", limits: limits)
            #expect(decision.allowed)
            #expect(decision.status == RateLimitStatus(remaining: expected, resetAt: start.addingTimeInterval(30)))
        }
        clock.advance(10)
        let denied = limiter.admit(accountID: "a", limits: limits)
        #expect(!denied.allowed)
        #expect(denied.exceeded == [.burst])
        #expect(denied.retryAfterMs == 20_000)
        #expect(denied.status == RateLimitStatus(remaining: 0, resetAt: start.addingTimeInterval(30)))
        let error = denied.error
        #expect(error?.code == .rateLimited && error?.retryable == true && error?.retryAfterMs == 20_000)
        #expect(error?.message.contains("3 requests per 30 s (burst)") == true, "\(String(describing: error))")
        #expect(limiter.state(accountID: "a")?.hourly.count == 3, "a denied request is not counted")

        clock.advance(19.5)
        #expect(limiter.admit(accountID: "a", limits: limits).retryAfterMs == 500)
        clock.advance(0.5)
        let recovered = limiter.admit(accountID: "a", limits: limits)
        #expect(recovered.allowed)
        // A new burst window opens now; the hourly window (4 of 10 used) is still looser.
        #expect(recovered.status == RateLimitStatus(remaining: 2, resetAt: start.addingTimeInterval(60)))
    }

    @Test func theHourlyWindowDeniesWhileTheBurstWindowHasRoom() {
        let limiter = RateLimiter(now: clock.now)
        let start = clock.now()
        let limits = RateLimits(hourly: 4, burst: 3, burstWindowSeconds: 30)
        for _ in 0..<3 { #expect(limiter.admit(accountID: "a", limits: limits).allowed) }
        clock.advance(30)
        let last = limiter.admit(accountID: "a", limits: limits)
        #expect(last.allowed)
        // Burst has 2 left, hourly 0: the hourly window is the tightest.
        #expect(last.status == RateLimitStatus(remaining: 0, resetAt: start.addingTimeInterval(3600)))
        let denied = limiter.admit(accountID: "a", limits: limits)
        #expect(!denied.allowed)
        #expect(denied.exceeded == [.hourly])
        #expect(denied.retryAfterMs == 3_570_000)
        #expect(denied.error?.message.contains("4 requests per hour (hourly)") == true)
        clock.advance(3570)
        #expect(limiter.admit(accountID: "a", limits: limits).allowed)
    }

    @Test func whenBothWindowsAreFullTheLaterResetCounts() {
        let limiter = RateLimiter(now: clock.now)
        let start = clock.now()
        let limits = RateLimits(hourly: 2, burst: 2, burstWindowSeconds: 30)
        _ = limiter.admit(accountID: "a", limits: limits)
        let second = limiter.admit(accountID: "a", limits: limits)
        // A tie: the burst reset alone would not raise the minimum, so the hourly reset is reported.
        #expect(second.status == RateLimitStatus(remaining: 0, resetAt: start.addingTimeInterval(3600)))
        let denied = limiter.admit(accountID: "a", limits: limits)
        #expect(denied.exceeded == [.burst, .hourly])
        #expect(denied.retryAfterMs == 3_600_000)
    }

    @Test func accountsAreLimitedSeparately() {
        let limiter = RateLimiter(now: clock.now)
        let limits = RateLimits(hourly: 10, burst: 1, burstWindowSeconds: 30)
        #expect(limiter.admit(accountID: "a", limits: limits).allowed)
        #expect(!limiter.admit(accountID: "a", limits: limits).allowed)
        let other = limiter.admit(accountID: "b", limits: limits)
        #expect(other.allowed)
        #expect(other.status.remaining == 0)
        #expect(limiter.state(accountID: "b")?.burst.count == 1)
        #expect(limiter.state(accountID: "a")?.burst.count == 1)
    }

    @Test func theStateMachineIsAPureValue() {
        var state = AccountRateState(limits: limits)
        let copy = state
        let start = Date(timeIntervalSince1970: 0)
        _ = state.admit(at: start, limits: limits)
        #expect(state.burst.count == 1 && state.burst.openedAt == start)
        #expect(copy.burst.count == 0, "copies do not share state")
        var full = AccountRateState(limits: RateLimits(hourly: 10, burst: 1, burstWindowSeconds: 30))
        _ = full.admit(at: start, limits: RateLimits(hourly: 10, burst: 1, burstWindowSeconds: 30))
        let almost = full.admit(at: start.addingTimeInterval(29.9999), limits: RateLimits(hourly: 10, burst: 1, burstWindowSeconds: 30))
        #expect(almost.retryAfterMs == 1, "a fraction of a millisecond rounds up, never to 0")
        // A clock set back before the window opened starts a fresh window, bounding the wait.
        _ = state.admit(at: start.addingTimeInterval(-5), limits: limits)
        #expect(state.burst.count == 1 && state.burst.openedAt == start.addingTimeInterval(-5))
    }
}

/// A coordinator on a free port whose services run on a test clock, with account
/// "acme" limited to `burst` requests per 30 s.
final class RateLimitRig: Sendable {
    let temporary: TemporaryStore
    let clock: TestClock
    let services: CoordinatorServices
    let token: String
    let context: ZMQContext
    let loop: ZMQIOLoop
    let endpoint: String
    let serving: Task<Void, Never>

    init(
        limits: RateLimits, clock: TestClock = TestClock(), now: (@Sendable () -> Date)? = nil,
        customize: (inout RequestRouter, CoordinatorServices) -> Void = { _, _ in }
    ) async throws {
        temporary = try TemporaryStore()
        self.clock = clock
        services = CoordinatorServices(store: temporary.store, now: now ?? clock.now)
        _ = try await services.accounts.createAccount(id: "acme", name: "Acme", rateLimits: limits)
        _ = try await services.accounts.createUser(accountID: "acme", name: "Ann", email: "ann@acme.example", secret: "secret-123")
        token = try await services.auth.issueToken(email: "ann@acme.example", secret: "secret-123").accessToken
        var router = RequestRouter()
        services.register(in: &router)
        customize(&router, services)
        var logger = Logger(label: "rate-limit-rig")
        logger.logLevel = .critical
        context = try ZMQContext()
        loop = try ZMQIOLoop(context: context, label: "rate-limit-rig")
        let server = FleetServer(configuration: FleetServerConfiguration(endpoint: "tcp://127.0.0.1:*"), router: router, loop: loop, logger: logger)
        endpoint = try await server.bind()
        serving = Task { try? await server.run() }
    }

    func envelopeCount() async throws -> Int {
        try await temporary.store.database.read { db in try EnvelopeRecord.fetchCount(db) }
    }

    func tearDown() async {
        serving.cancel()
        await serving.value
        await loop.shutdown()
        context.shutdown()
        temporary.remove()
    }
}

/// Frozen until the coordinator first refuses a request for the rate limit, then runs in
/// real time. The window then starts exactly at the refusal however slow the machine is, and
/// a device that ignored `retryAfterMs` would be refused again.
final class StartOnDenialClock: Sendable {
    private let state = Mutex<(base: Date, startedAt: ContinuousClock.Instant?)>((Date(timeIntervalSince1970: 1_800_000_000), nil))

    func now() -> Date {
        state.withLock { state in
            guard let startedAt = state.startedAt else { return state.base }
            let elapsed = ContinuousClock.now - startedAt
            return state.base.addingTimeInterval(Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18)
        }
    }

    func start() { state.withLock { if $0.startedAt == nil { $0.startedAt = .now } } }

    /// Serves `sync.push` as the coordinator does, starting the clock at the first refusal.
    func startingOnDenial(_ router: inout RequestRouter, _ services: CoordinatorServices) {
        router.on(SyncPush.self) { push, context throws(FleetError) in
            do throws(FleetError) {
                return try await CoordinatorServices.typed {
                    try await services.ingest.apply(push, credential: context.credential, meter: services.meter(context))
                }
            } catch {
                if error.code == .rateLimited { self.start() }
                throw error
            }
        }
    }
}

/// Sends one request on a raw DEALER and returns the reply's header and message, so a
/// test sees exactly what the header carries.
private func exchange<Request: FleetRequest>(_ socket: AsyncSocket, _ request: Request, id: UInt64) async throws -> InboundMessage {
    let codec = WireCodec()
    try await socket.send(try codec.encode(request, header: MessageHeader(type: Request.messageType, id: id)))
    let frames = try await firstElement(of: socket.messages, "the reply to \(Request.messageType)")
    let reply = try codec.decode(frames[...])
    #expect(reply.header.replyTo == id)
    return reply
}

@Suite struct RateLimitWireTests {
    @Test func everyAccountBoundReplyCarriesTheStatusAndTheThirdRequestIsRefused() async throws {
        let rig = try await RateLimitRig(limits: RateLimits(hourly: 100, burst: 2, burstWindowSeconds: 30))
        let start = rig.clock.now()
        let deviceID = "tablet-rl"
        let (node, items) = try await signedItems(count: 3, directory: rig.temporary.directory, deviceID: deviceID)
        var options = SocketOptions()
        options.routingID = Array(deviceID.utf8)
        let socket = try await rig.loop.makeSocket(.dealer, options: options)
        try await socket.connect(rig.endpoint)
        let codec = WireCodec()

        // Not account-bound: no `rl`, and not counted.
        var reply = try await exchange(socket, Heartbeat(), id: 1)
        #expect(reply.header.rateLimit == nil)
        reply = try await exchange(socket, AccessTokenRequest(email: "ann@acme.example", secret: "secret-123"), id: 2)
        #expect(reply.header.type == AccessTokenReply.messageType)
        #expect(reply.header.rateLimit == nil)
        // Not authenticated: no account, so no `rl` either.
        reply = try await exchange(socket, UserInfoRequest(accessToken: "nonsense"), id: 3)
        #expect(reply.header.type == FleetError.messageType)
        #expect(reply.header.rateLimit == nil)

        reply = try await exchange(socket, UserInfoRequest(accessToken: rig.token), id: 4)
        #expect(reply.header.type == UserInfoReply.messageType)
        #expect(reply.header.rateLimit == RateLimitStatus(remaining: 1, resetAt: start.addingTimeInterval(30)))
        reply = try await exchange(socket, EnrollDevice(accessToken: rig.token, deviceID: deviceID, publicKey: node.publicKey), id: 5)
        #expect(reply.header.type == EnrollDeviceReply.messageType)
        #expect(reply.header.rateLimit == RateLimitStatus(remaining: 0, resetAt: start.addingTimeInterval(30)))

        rig.clock.advance(12)
        reply = try await exchange(socket, SyncPush(deviceID: deviceID, items: items), id: 6)
        #expect(reply.header.type == FleetError.messageType)
        let error = try codec.decodeBody(FleetError.self, from: reply)
        #expect(error.code == .rateLimited)
        #expect(error.retryable)
        #expect(error.retryAfterMs == 18_000)
        #expect(error.message.contains("2 requests per 30 s (burst)"), "\(error)")
        #expect(reply.header.rateLimit == RateLimitStatus(remaining: 0, resetAt: start.addingTimeInterval(30)))
        // The refused push applied nothing.
        #expect(try await rig.envelopeCount() == 0)
        #expect(try await rig.services.devices.device(id: deviceID)?.lastAppliedSequence == 0)

        rig.clock.advance(18)
        reply = try await exchange(socket, SyncPush(deviceID: deviceID, items: items), id: 7)
        #expect(reply.header.type == SyncAck.messageType)
        let ack = try codec.decodeBody(SyncAck.self, from: reply)
        #expect(ack.status == .ok && ack.lastApplied == 3)
        #expect(reply.header.rateLimit == RateLimitStatus(remaining: 1, resetAt: start.addingTimeInterval(60)))
        #expect(try await rig.envelopeCount() == 3)

        await socket.close()
        try? await node.close()
        await rig.tearDown()
    }

    @Test func anErrorAfterAdmissionStillCarriesTheStatus() async throws {
        let rig = try await RateLimitRig(limits: RateLimits(hourly: 100, burst: 5, burstWindowSeconds: 30))
        var options = SocketOptions()
        options.routingID = Array("tablet-x".utf8)
        let socket = try await rig.loop.makeSocket(.dealer, options: options)
        try await socket.connect(rig.endpoint)
        // A key of the wrong size is refused after the token's account was charged.
        let reply = try await exchange(socket, EnrollDevice(accessToken: rig.token, deviceID: "tablet-x", publicKey: [1, 2, 3]), id: 1)
        #expect(reply.header.type == FleetError.messageType)
        #expect(reply.header.rateLimit?.remaining == 4)
        await socket.close()
        await rig.tearDown()
    }

    @Test func fleetClientExposesTheLastStatus() async throws {
        let rig = try await RateLimitRig(limits: RateLimits(hourly: 100, burst: 3, burstWindowSeconds: 30))
        var logger = Logger(label: "test")
        logger.logLevel = .critical
        // One attempt with a long timeout: a resend on a loaded machine would be charged again.
        let client = FleetClient(
            configuration: FleetClientConfiguration(endpoint: rig.endpoint, deviceID: "tablet-c", requestTimeout: .seconds(30), maxAttempts: 1),
            loop: rig.loop, logger: logger, clock: ManualClock())
        let connection = Task { await client.run() }
        #expect(await client.lastRateLimit == nil)
        _ = try await client.request(UserInfoRequest(accessToken: rig.token))
        #expect(await client.lastRateLimit == RateLimitStatus(remaining: 2, resetAt: rig.clock.now().addingTimeInterval(30)))
        _ = try await client.request(UserInfoRequest(accessToken: rig.token))
        #expect(await client.lastRateLimit?.remaining == 1)
        connection.cancel()
        await connection.value
        await rig.tearDown()
    }

    @Test func syncEngineWaitsOutTheRetryAfterAndFinishes() async throws {
        // A one-second window on a clock that starts at the refusal: the engine's own wait is
        // real, the test never sleeps. Its back-off (10 ms doubling, 5 attempts: 150 ms in all)
        // is far shorter than the window, so the pass can only finish if the engine honours
        // `retryAfterMs` (exactly 1000 ms here).
        let clock = StartOnDenialClock()
        let rig = try await RateLimitRig(
            limits: RateLimits(hourly: 100, burst: 1, burstWindowSeconds: 1), now: clock.now, customize: clock.startingOnDenial)
        let (node, _) = try await signedItems(count: 3, directory: rig.temporary.directory, deviceID: "tablet-e")
        var logger = Logger(label: "test")
        logger.logLevel = .critical
        let client = FleetClient(
            // The client's clock never moves: no `timeout` failure can join the `rate_limited`
            // ones this test is about, however slow the machine.
            configuration: FleetClientConfiguration(endpoint: rig.endpoint, deviceID: node.deviceId, maxAttempts: 1),
            loop: rig.loop, logger: logger, clock: ManualClock())
        let connection = Task { await client.run() }
        let engine = SyncEngine(
            node: node, client: client, accessToken: rig.token,
            configuration: SyncEngineConfiguration(batchSize: 10, maxAttempts: 5, retryBackoff: Backoff(initial: .milliseconds(10), maximum: .milliseconds(100))),
            logger: logger)
        let events = node.events()

        // Enrollment takes the window's one request, so the first push is refused.
        let summary = try await engine.syncAll()
        #expect(summary.succeeded == 3 && summary.remaining == 0)
        #expect(try await rig.envelopeCount() == 3)

        let failures = Mutex<[String]>([])
        _ = try await firstElement(of: events, "the end of the pass") { event in
            if case .syncFailed(let progress) = event { failures.withLock { $0.append(progress.error ?? "") } }
            if case .syncEnded = event { return true }
            return false
        }
        let errors = failures.withLock { $0 }
        #expect(!errors.isEmpty, "the first push was refused")
        #expect(errors.allSatisfy { $0.contains("rate_limited") }, "\(errors)")
        #expect(await client.lastRateLimit != nil)

        connection.cancel()
        await connection.value
        try? await node.close()
        await rig.tearDown()
    }
}

@Suite struct RateLimitedSyncPassTests {
    @Test func aPassThatGaveUpOnARateLimitMakesTheNextPassWait() async throws {
        // One attempt per pass: the first pass gives up on the refusal; the next pass must
        // wait out the retry-after (a real one-second window) instead of pushing at once.
        let clock = StartOnDenialClock()
        let rig = try await RateLimitRig(
            limits: RateLimits(hourly: 100, burst: 1, burstWindowSeconds: 1), now: clock.now, customize: clock.startingOnDenial)
        let (node, _) = try await signedItems(count: 2, directory: rig.temporary.directory, deviceID: "tablet-p")
        var logger = Logger(label: "test")
        logger.logLevel = .critical
        let client = FleetClient(
            configuration: FleetClientConfiguration(endpoint: rig.endpoint, deviceID: node.deviceId, maxAttempts: 1), loop: rig.loop, logger: logger,
            // The client's clock never moves: no reply can time out, however slow the machine.
            clock: ManualClock())
        let connection = Task { await client.run() }
        let engine = SyncEngine(
            node: node, client: client, accessToken: rig.token, configuration: SyncEngineConfiguration(batchSize: 10, maxAttempts: 1),
            logger: logger)

        await expectFleetError(.rateLimited) { _ = try await engine.syncAll() }
        #expect(try await rig.envelopeCount() == 0)
        let summary = try await engine.syncAll()
        #expect(summary.succeeded == 2 && summary.remaining == 0)
        #expect(try await rig.envelopeCount() == 2)

        connection.cancel()
        await connection.value
        try? await node.close()
        await rig.tearDown()
    }
}
