import Synchronization
import Foundation
import Logging
import MessagePack
import FleetTesting
import Testing
import ZeroMQ

@testable import FleetProtocol
import FleetZeroMQTransport

/// Returns the first element of `sequence` matching `predicate`, or throws after `timeout` (a
/// guard against a hang only).
func first<S: AsyncSequence & Sendable>(
    _ sequence: S, within timeout: Duration = .seconds(120), _ what: String,
    where predicate: @escaping @Sendable (S.Element) -> Bool
) async throws -> S.Element where S.Element: Sendable {
    try await firstElement(of: sequence, within: timeout, what, where: predicate)
}

/// A coordinator-side server on a free port, running until `stop()`.
final class RunningServer: Sendable {
    let server: FleetServer
    let endpoint: String
    let task: Task<Void, Never>

    init(
        loop: ZMQIOLoop, endpoint: String = "tcp://127.0.0.1:*", maxMessageSize: Int = 16 << 20, router: RequestRouter = RequestRouter(),
        maxConcurrentRequests: Int = 256, heartbeatInterval: Duration = .milliseconds(100), clock: any FleetClock = ContinuousClock(),
        maxQueueDelay: Duration? = nil, releaseMemory: @escaping @Sendable () -> Void = {},
        configure: (inout FleetServerConfiguration) -> Void = { _ in }
    ) async throws {
        var logger = Logger(label: "test-server")
        logger.logLevel = .warning
        var configuration = FleetServerConfiguration(
            endpoint: endpoint, heartbeatInterval: heartbeatInterval, heartbeatLiveness: 3,
            limits: WireLimits(maxMessageSize: maxMessageSize), maxConcurrentRequests: maxConcurrentRequests, maxQueueDelay: maxQueueDelay)
        configure(&configuration)
        server = FleetServer(configuration: configuration, router: router, loop: loop, logger: logger, clock: clock, releaseMemory: releaseMemory)
        self.endpoint = try await server.bind()
        let server = self.server
        task = Task { try? await server.run() }
    }

    func stop() async {
        task.cancel()
        await task.value
    }
}

/// A test client. Its `clock` times its replies, heartbeats and back-off: a test that is not about
/// them passes a `ManualClock` that nobody advances, so none fires however slow the machine.
func makeClient(
    _ endpoint: String, loop: ZMQIOLoop, device: String = "dev-1", timeout: Duration = .milliseconds(500), attempts: Int = 3,
    clock: any FleetClock = ContinuousClock(), failover: [String] = [], longestTimeout: Duration? = nil,
    transportHeartbeat: TransportHeartbeat? = TransportHeartbeat(), roundTrips: RoundTripMemory? = nil
) -> FleetClient {
    var logger = Logger(label: "test-client")
    logger.logLevel = .warning
    var configuration = FleetClientConfiguration(
        endpoint: endpoint, failoverEndpoints: failover, deviceID: device, requestTimeout: timeout, maxAttempts: attempts,
        reconnectBackoff: Backoff(initial: .milliseconds(20), maximum: .milliseconds(200)))
    configuration.maxRequestTimeout = longestTimeout
    configuration.transportHeartbeat = transportHeartbeat
    configuration.roundTrips = roundTrips
    return FleetClient(configuration: configuration, loop: loop, logger: logger, clock: clock)
}

/// A raw ROUTER's options as the plaintext `FleetServer` sets them: with handover, so a client's
/// new connection (same routing id, its device id) takes over from its old one at once, even when
/// it comes before the server has seen the old one close (a short, jittered back-off).
func plainServerOptions() -> SocketOptions {
    var options = SocketOptions()
    options.routerHandover = true
    return options
}

/// Sends raw frames from a bare DEALER and returns the reply's header and body.
func rawExchange(_ socket: AsyncSocket, _ frames: [[UInt8]]) async throws -> (MessageHeader, [UInt8]) {
    try await socket.send(frames)
    let reply = try await first(socket.messages, "a reply") { _ in true }
    #expect(reply.count == 2)
    return (try MessagePackDecoder().decode(MessageHeader.self, from: reply[0]), reply[1])
}

@Suite(.serialized) struct WireTests {
    let context: ZMQContext
    let loop: ZMQIOLoop

    init() throws {
        context = try ZMQContext()
        loop = try ZMQIOLoop(context: context, label: "wire-tests")
    }

    func shutdown() async {
        await loop.shutdown()
        context.shutdown()
    }

    @Test func clientSaysHelloAndGetsReplies() async throws {
        let server = try await RunningServer(loop: loop)
        let client = makeClient(server.endpoint, loop: loop, clock: ManualClock())
        let connection = Task { await client.run() }
        let connected = try await first(client.events, "connected") {
            if case .connected = $0 { return true } else { return false }
        }
        let reply = try await client.request(Heartbeat())
        #expect(connected == .connected(serverInstance: reply.serverInstance))
        _ = try await first(server.server.peerEvents, "device alive") { $0 == .alive("dev-1") }
        connection.cancel()
        await connection.value
        await server.stop()
        await shutdown()
    }

    @Test func badMessagesGetTypedErrorsAndTheServerKeepsServing() async throws {
        let server = try await RunningServer(loop: loop)
        var options = SocketOptions()
        options.routingID = Array("raw-1".utf8)
        let socket = try await loop.makeSocket(.dealer, options: options)
        try await socket.connect(server.endpoint)
        let codec = WireCodec()

        // Unknown type: answered with the typed error naming the request.
        var (header, body) = try await rawExchange(socket, try codec.encode(Heartbeat(), header: MessageHeader(type: "teleport", id: 11)))
        #expect(header.type == FleetError.messageType)
        #expect(header.replyTo == 11)
        #expect(try MessagePackDecoder().decode(FleetError.self, from: body).code == .unknownMessageType)

        // Unknown major version.
        (header, body) = try await rawExchange(
            socket,
            try codec.encode(Heartbeat(), header: MessageHeader(version: ProtocolVersion(major: 9, minor: 0), type: Heartbeat.messageType, id: 12)))
        #expect(header.replyTo == 12)
        #expect(try MessagePackDecoder().decode(FleetError.self, from: body).code == .unsupportedVersion)

        // Random bytes in one frame: malformed, no request id to name.
        (header, body) = try await rawExchange(socket, [[0xc1, 0xff, 0x00, 0x42]])
        #expect(header.replyTo == nil)
        #expect(try MessagePackDecoder().decode(FleetError.self, from: body).code == .malformedMessage)

        // Valid MessagePack of the wrong shape for a known request type.
        (header, body) = try await rawExchange(
            socket, [try codec.encodeHeader(MessageHeader(type: Hello.messageType, id: 13)), try MessagePackEncoder().encode([1, 2, 3])])
        #expect(header.replyTo == 13)
        #expect(try MessagePackDecoder().decode(FleetError.self, from: body).code == .invalidBody)

        // A heartbeat whose body is `[]`, not `{}`: refused like any request's wrong body.
        (header, body) = try await rawExchange(
            socket, [try codec.encodeHeader(MessageHeader(type: Heartbeat.messageType, id: 16)), try MessagePackEncoder().encode([Int]())])
        #expect(header.replyTo == 16 && header.type == FleetError.messageType)
        #expect(try MessagePackDecoder().decode(FleetError.self, from: body).code == .invalidBody)

        // Hello that lies about its device id.
        (header, body) = try await rawExchange(
            socket, try codec.encode(Hello(deviceID: "someone-else", client: "t"), header: MessageHeader(type: Hello.messageType, id: 14)))
        #expect(try MessagePackDecoder().decode(FleetError.self, from: body).code == .invalidRequest)

        // And the server still serves.
        (header, _) = try await rawExchange(socket, try codec.encode(Heartbeat(), header: MessageHeader(type: Heartbeat.messageType, id: 15)))
        #expect(header.type == HeartbeatReply.messageType)
        #expect(header.replyTo == 15)
        await socket.close()
        await server.stop()
        await shutdown()
    }

    @Test func oversizedFramesAreRefusedAndOthersAreStillServed() async throws {
        let server = try await RunningServer(loop: loop, maxMessageSize: 4096)
        let codec = WireCodec()
        var options = SocketOptions()
        options.routingID = Array("big".utf8)
        let big = try await loop.makeSocket(.dealer, options: options)
        try await big.connect(server.endpoint)
        let push = SyncPush(deviceID: "big", items: [SyncItem(sequence: 1, transactionID: "t", payload: Array(repeating: 1, count: 10_000), signature: [])])
        try await big.send(try codec.encode(push, header: MessageHeader(type: SyncPush.messageType, id: 1)))
        await big.close()

        let client = makeClient(server.endpoint, loop: loop, device: "small", clock: ManualClock())
        let connection = Task { await client.run() }
        let reply = try await client.request(Heartbeat())
        #expect(!reply.serverInstance.isEmpty)
        connection.cancel()
        await connection.value
        await server.stop()
        await shutdown()
    }

    @Test func requestsTimeOutWithoutAServerThenSucceedOnceOneAppears() async throws {
        // Find a free port, then leave it empty.
        let probe = try await RunningServer(loop: loop)
        let endpoint = probe.endpoint
        await probe.stop()

        let client = makeClient(endpoint, loop: loop, timeout: .milliseconds(150), attempts: 2)
        let connection = Task { await client.run() }
        do {
            _ = try await client.request(Heartbeat())
            Issue.record("a request with no server must time out")
        } catch let error as FleetError {
            #expect(error.code == .timeout)
            #expect(error.retryable)
        }

        let server = try await RunningServer(loop: loop, endpoint: endpoint)
        let reply = try await client.request(Heartbeat(), attempts: 40)
        #expect(!reply.serverInstance.isEmpty)
        connection.cancel()
        await connection.value
        await server.stop()
        await shutdown()
    }

    /// `serverInstance(waitingUpTo:)` is unknown (nil) when no `hello` is answered in time, and is
    /// the instance of the `hello` answer when one comes while it waits; a stopped client answers nil.
    @Test func theServerInstanceCanBeAwaitedUntilTheHelloIsAnswered() async throws {
        let probe = try await RunningServer(loop: loop)
        let endpoint = probe.endpoint
        await probe.stop()

        let client = makeClient(endpoint, loop: loop, timeout: .milliseconds(150), attempts: 2)
        let connection = Task { await client.run() }
        #expect(await client.serverInstance(waitingUpTo: .milliseconds(200)) == nil, "no server: no instance")
        let waiting = Task { await client.serverInstance(waitingUpTo: .seconds(30)) }
        let server = try await RunningServer(loop: loop, endpoint: endpoint)
        let instance = await waiting.value
        let asked = try await client.request(Heartbeat(), attempts: 40).serverInstance
        #expect(instance == asked, "the awaited instance is the server's")
        #expect(await client.serverInstance(waitingUpTo: .zero) == asked)

        let other = makeClient(endpoint, loop: loop)
        let stopped = Task { await other.serverInstance(waitingUpTo: .seconds(30)) }
        await other.stop()
        #expect(await stopped.value == nil, "a stopped client answers at once")
        connection.cancel()
        await connection.value
        await server.stop()
        await shutdown()
    }

    @Test func clientNoticesALostServerAndReconnectsToItsSuccessor() async throws {
        let first = try await RunningServer(loop: loop)
        let client = makeClient(first.endpoint, loop: loop)
        let connection = Task { await client.run() }
        let events = client.events
        guard case .connected(let firstInstance) = try await FleetProtocolTests.first(events, "connected", where: { if case .connected = $0 { true } else { false } }) else {
            return
        }
        await first.stop()
        _ = try await FleetProtocolTests.first(events, "lost") { $0 == .lost }

        let second = try await RunningServer(loop: loop, endpoint: first.endpoint)
        let reconnected = try await FleetProtocolTests.first(events, "reconnected") { if case .connected = $0 { true } else { false } }
        #expect(reconnected != .connected(serverInstance: firstInstance), "a restarted server has a new instance id")
        _ = try await FleetProtocolTests.first(second.server.peerEvents, "device alive again") { $0 == .alive("dev-1") }
        connection.cancel()
        await connection.value
        await second.stop()
        await shutdown()
    }

    /// A server that takes a request, then falls silent (heartbeats unanswered) until the client
    /// replaces its connection: the client resends the unanswered request on the new connection,
    /// with the same id, instead of waiting out its one attempt's whole timeout.
    @Test func anUnansweredRequestIsResentWhenTheConnectionIsReplaced() async throws {
        let router = try await loop.makeSocket(.router, options: plainServerOptions())
        let endpoint = try await router.bind("tcp://127.0.0.1:*")
        let codec = WireCodec()
        let serving = Task { () throws -> (tokenRequests: [UInt64], hellos: Int) in
            var tokenRequests: [UInt64] = []
            var hellos = 0
            func reply<Body: FleetMessageBody>(_ body: Body, to peer: [UInt8], _ request: InboundMessage) async throws {
                let frames = try codec.encode(body, header: MessageHeader(type: Body.messageType, id: UInt64(100 + hellos), replyTo: request.header.id))
                try await router.send([peer] + frames)
            }
            for try await frames in router.messages {
                let message = try codec.decode(frames.dropFirst())
                switch message.header.type {
                case Hello.messageType:
                    hellos += 1
                    try await reply(
                        HelloReply(server: "raw", heartbeatIntervalMs: 100, heartbeatLiveness: 3, maxMessageSize: 1 << 20, serverInstance: "raw-\(hellos)"),
                        to: frames[0], message)
                case AccessTokenRequest.messageType:
                    tokenRequests.append(message.header.id)
                    if tokenRequests.count == 2 {
                        try await reply(AccessTokenReply(accessToken: "late", expiresAt: Date(timeIntervalSinceNow: 60)), to: frames[0], message)
                        return (tokenRequests, hellos)
                    }
                default:
                    break  // heartbeats go unanswered: the client declares this server lost
                }
            }
            return (tokenRequests, hellos)
        }
        let client = makeClient(endpoint, loop: loop, timeout: .seconds(20), attempts: 1)
        let connection = Task { await client.run() }
        // Without the resend this waits the whole 20 s and fails with a timeout.
        let reply = try await client.request(AccessTokenRequest(email: "a@example.com", secret: "s"))
        #expect(reply.accessToken == "late")
        let seen = try await serving.value
        #expect(seen.tokenRequests.count == 2 && Set(seen.tokenRequests).count == 1, "resent with the same id: \(seen.tokenRequests)")
        #expect(seen.hellos >= 2, "the second copy came on a new connection")
        connection.cancel()
        await connection.value
        await router.close()
        await shutdown()
    }

    @Test func aHelloThatGoesUnansweredWaitsLongerOnTheNextConnection() async throws {
        // A slow coordinator, not a dead one: it answers each hello 1.5 s after it came (on the
        // client's clock, which the test moves). With a 1 s request timeout and a fixed hello
        // timeout the client would reconnect for ever, each reply arriving at a connection it had
        // just closed; an adaptive one waits 2 s on the next connection and is answered. (A client
        // with failover endpoints, here the same one again, moves to a new connection at the first
        // unanswered hello; one with a single endpoint asks again on the same connection.)
        let server = try await HelloCatcher.start(loop: loop)
        let endpoint = server.endpoint, hellos = server.hellos
        let clock = ManualClock()
        let client = makeClient(endpoint, loop: loop, timeout: .seconds(1), attempts: 1, clock: clock, failover: [endpoint])
        let events = client.events
        let connection = Task { await client.run() }

        let first = try await FleetProtocolTests.first(hellos, "the first hello") { _ in true }
        try await withDeadline(.seconds(120), "the first hello's 1 s timeout") { await clock.sleeping(atLeast: .seconds(1)) }
        await clock.advance(by: .seconds(1))  // no answer in 1 s: the client gives up on this connection
        try await withDeadline(.seconds(120), "the reconnection's back-off") { await clock.sleeping(atLeast: 1) }
        await clock.advance(by: try #require(clock.pendingDeadlines.first))
        let second = try await FleetProtocolTests.first(hellos, "the second hello, on a new connection") { _ in true }
        try await withDeadline(.seconds(120), "the second hello's timeout") { await clock.sleeping(atLeast: 1) }
        #expect(clock.pendingDeadlines == [.seconds(2)], "the timeout doubled after the first hello timed out")
        await clock.advance(by: .milliseconds(1_500))  // the coordinator's slowness: within the 2 s
        try await server.answer(first, instance: "slow-1")  // to a connection closed since: dropped
        try await server.answer(second, instance: "slow-2")
        let connected = try await FleetProtocolTests.first(events, "connected") {
            if case .connected = $0 { return true } else { return false }
        }
        #expect(connected == .connected(serverInstance: "slow-2"))
        connection.cancel()
        await connection.value
        #expect(await server.close() == 0, "no third hello: the second was answered in time")
        await shutdown()
    }

    /// With more than one attempt, an unanswered `hello` is sent again on the same connection (the
    /// same id: a new connection's hello would have a new one), with twice the wait, and the late
    /// reply to either copy connects the client: no new handshake for a coordinator that is slow.
    @Test func anUnansweredHelloIsAskedAgainOnTheSameConnection() async throws {
        let server = try await HelloCatcher.start(loop: loop)
        let endpoint = server.endpoint, hellos = server.hellos
        let clock = ManualClock()
        let client = makeClient(endpoint, loop: loop, timeout: .seconds(1), attempts: 2, clock: clock)
        let events = client.events
        let connection = Task { await client.run() }
        let first = try await FleetProtocolTests.first(hellos, "the first hello") { _ in true }
        try await withDeadline(.seconds(120), "the first hello's 1 s timeout") { await clock.sleeping(atLeast: .seconds(1)) }
        await clock.advance(by: .seconds(1))
        let second = try await FleetProtocolTests.first(hellos, "the hello sent again") { _ in true }
        #expect(second.id == first.id, "the same hello, on the same connection")
        try await withDeadline(.seconds(120), "the second wait") { await clock.sleeping(atLeast: 1) }
        #expect(clock.pendingDeadlines == [.seconds(2)], "twice the wait")
        try await server.answer(first, instance: "slow")
        let connected = try await FleetProtocolTests.first(events, "connected") { if case .connected = $0 { true } else { false } }
        #expect(connected == .connected(serverInstance: "slow"))
        connection.cancel()
        await connection.value
        #expect(await server.close() == 0, "no third hello, no new connection")
        await shutdown()
    }

    /// With ZMTP heartbeats (the default), a single endpoint's `hello` is asked again on its
    /// connection for as long as it goes unanswered, each wait the longest once it got there: the
    /// heartbeats, not a new connection, cure a half-open one (ChaosTests' HalfOpenConnectionTests),
    /// and a coordinator or a process too slow to answer in time is not handed a new handshake.
    @Test func aSingleEndpointsHelloIsAskedAgainAtTheLongestWaitOnTheSameConnection() async throws {
        let server = try await HelloCatcher.start(loop: loop)
        let endpoint = server.endpoint, hellos = server.hellos
        let clock = ManualClock()
        let client = makeClient(endpoint, loop: loop, timeout: .seconds(1), attempts: 1, clock: clock, longestTimeout: .seconds(2))
        let events = client.events
        let connection = Task { await client.run() }
        let first = try await FleetProtocolTests.first(hellos, "the first hello") { _ in true }
        var waits: [Duration] = []
        for round in 1...6 {
            try await withDeadline(.seconds(120), "wait \(round)") { await clock.sleeping(atLeast: 1) }
            let wait = try #require(clock.pendingDeadlines.first)
            waits.append(wait)
            await clock.advance(by: wait)
            let again = try await FleetProtocolTests.first(hellos, "the hello asked again (\(round))") { _ in true }
            #expect(again.id == first.id && again.peer == first.peer, "the same hello on the same connection")
        }
        #expect(waits == [.seconds(1), .seconds(2), .seconds(2), .seconds(2), .seconds(2), .seconds(2)], "doubling up to the longest, then the longest")
        try await server.answer(first, instance: "late")
        let connected = try await FleetProtocolTests.first(events, "connected") { if case .connected = $0 { true } else { false } }
        #expect(connected == .connected(serverInstance: "late"))
        connection.cancel()
        await connection.value
        _ = await server.close()
        await shutdown()
    }

    /// Without ZMTP heartbeats, a single endpoint's connection ends for an unanswered `hello` once
    /// a wait of the longest reply timeout went unanswered too: then a new connection (a new hello
    /// id) is tried, since nothing else would cure a half-open one.
    @Test func withoutTransportHeartbeatsAHelloEndsItsConnectionAfterTheLongestWaitWentUnanswered() async throws {
        let server = try await HelloCatcher.start(loop: loop)
        let endpoint = server.endpoint, hellos = server.hellos
        let clock = ManualClock()
        let client = makeClient(
            endpoint, loop: loop, timeout: .seconds(1), attempts: 1, clock: clock, longestTimeout: .seconds(2), transportHeartbeat: nil)
        let connection = Task { await client.run() }
        let first = try await FleetProtocolTests.first(hellos, "the first hello") { _ in true }
        try await withDeadline(.seconds(120), "the first wait") { await clock.sleeping(atLeast: 1) }
        #expect(clock.pendingDeadlines == [.seconds(1)])
        await clock.advance(by: .seconds(1))
        let second = try await FleetProtocolTests.first(hellos, "the hello asked again") { _ in true }
        #expect(second.id == first.id, "one send is maxAttempts, but a 1 s wait is not the longest: the same hello on the same connection")
        try await withDeadline(.seconds(120), "the second wait") { await clock.sleeping(atLeast: 1) }
        #expect(clock.pendingDeadlines == [.seconds(2)], "the longest reply timeout")
        await clock.advance(by: .seconds(2))
        try await withDeadline(.seconds(120), "the reconnection's back-off") { await clock.sleeping(atLeast: 1) }
        await clock.advance(by: try #require(clock.pendingDeadlines.first))
        let third = try await FleetProtocolTests.first(hellos, "the hello of a new connection") { _ in true }
        #expect(third.id != first.id, "a new connection says a new hello")
        connection.cancel()
        await connection.value
        _ = await server.close()
        await shutdown()
    }

    /// A client given the process's round-trip memory starts from what the others saw: here a
    /// coordinator that took 3 s to answer the first client's `hello`. The second client's first
    /// wait is the shared `srtt + 4 × rttvar` (3 + 6 s, at most its longest, 8 s), not the 1 s floor
    /// a client learning alone starts from (the third).
    @Test func aNewClientStartsFromTheRoundTripsItsProcessSaw() async throws {
        let server = try await HelloCatcher.start(loop: loop)
        let endpoint = server.endpoint, hellos = server.hellos
        let memory = RoundTripMemory()
        let clock = ManualClock()
        // The first client waits 4 s, so its hello is answered once, at 3 s (Karn's rule: a reply
        // to a hello sent again would teach nothing).
        let firstClient = makeClient(
            endpoint, loop: loop, device: "dev-1", timeout: .seconds(4), attempts: 1, clock: clock, longestTimeout: .seconds(32), roundTrips: memory)
        let firstConnection = Task { await firstClient.run() }
        let hello = try await FleetProtocolTests.first(hellos, "the first client's hello") { _ in true }
        try await withDeadline(.seconds(120), "the first wait") { await clock.sleeping(atLeast: 1) }
        #expect(clock.pendingDeadlines == [.seconds(4)], "nothing learnt yet: the floor")
        await clock.advance(by: .seconds(3))
        try await server.answer(hello, instance: "slow")
        _ = try await FleetProtocolTests.first(firstClient.events, "connected") { if case .connected = $0 { true } else { false } }
        firstConnection.cancel()
        await firstConnection.value
        #expect(memory.observedDelay != nil)

        let sharing = makeClient(
            endpoint, loop: loop, device: "dev-2", timeout: .seconds(1), attempts: 1, clock: clock, longestTimeout: .seconds(8), roundTrips: memory)
        let sharingConnection = Task { await sharing.run() }
        _ = try await FleetProtocolTests.first(hellos, "the sharing client's hello") { _ in true }
        try await withDeadline(.seconds(120), "the sharing client's wait") { await clock.sleeping(atLeast: 1) }
        #expect(clock.pendingDeadlines == [.seconds(8)], "the shared estimate, capped at the longest wait")
        sharingConnection.cancel()
        await sharingConnection.value

        let alone = makeClient(
            endpoint, loop: loop, device: "dev-3", timeout: .seconds(1), attempts: 1, clock: clock, longestTimeout: .seconds(8))
        let aloneConnection = Task { await alone.run() }
        _ = try await FleetProtocolTests.first(hellos, "the lone client's hello") { _ in true }
        try await withDeadline(.seconds(120), "the lone client's wait") { await clock.sleeping(atLeast: 1) }
        #expect(clock.pendingDeadlines == [.seconds(1)], "a client without the memory starts from the floor")
        aloneConnection.cancel()
        await aloneConnection.value
        _ = await server.close()
        await shutdown()
    }

    /// A server whose replies have taken seconds is allowed twice that delay of silence beyond the
    /// heartbeats' timeout before it is declared lost: past capacity it is late with heartbeat
    /// replies too, and a new connection would add a handshake and a `hello` to its work.
    @Test func aServerKnownToBeSlowIsAllowedLongerSilence() async throws {
        let server = try await HelloCatcher.start(loop: loop)
        let endpoint = server.endpoint, hellos = server.hellos
        let clock = ManualClock()
        let client = makeClient(endpoint, loop: loop, timeout: .seconds(4), attempts: 1, clock: clock)
        let events = client.events
        let connection = Task { await client.run() }
        let hello = try await FleetProtocolTests.first(hellos, "the hello") { _ in true }
        try await withDeadline(.seconds(120), "the hello's wait") { await clock.sleeping(atLeast: 1) }
        await clock.advance(by: .seconds(3))  // answered after 3 s: srtt 3 s, rttvar 1.5 s, delay 9 s
        try await server.answer(hello, instance: "slow", heartbeatIntervalMs: 1_000)
        _ = try await FleetProtocolTests.first(events, "connected") { if case .connected = $0 { true } else { false } }
        // Silent for 10 s: the heartbeats' timeout (3 s) is long past, 3 s + 2 × 9 s is not.
        for _ in 0..<20 {
            try await withDeadline(.seconds(120), "the keep-alive's wait") { await clock.sleeping(atLeast: 1) }
            await clock.advance(by: .milliseconds(500))
        }
        try await withDeadline(.seconds(120), "the keep-alive's wait") { await clock.sleeping(atLeast: 1) }
        #expect(await client.connectedEndpoint == endpoint, "still connected after 10 s of silence from a server known to take 9 s")
        // Past 2 × 9 s of silence the server is lost.
        for _ in 0..<20 {
            try await withDeadline(.seconds(120), "the keep-alive's wait") { await clock.sleeping(atLeast: 1) }
            await clock.advance(by: .milliseconds(500))
        }
        let lost = try await FleetProtocolTests.first(events, "lost") { $0 == .lost }
        #expect(lost == .lost)
        connection.cancel()
        await connection.value
        _ = await server.close()
        await shutdown()
    }

    /// A client starved of CPU (its node process at nice 19 on a full machine) wakes 12 s later
    /// to find its keep-alive long overdue: it has sent no heartbeat meanwhile, so the server had
    /// nothing to answer and is not declared lost (a reconnection would cost the server a
    /// handshake and a `hello`); only `liveness` heartbeats an interval apart, unanswered, lose it.
    @Test func aClientStarvedOfCPUDoesNotBlameTheServer() async throws {
        let server = try await HelloCatcher.start(loop: loop)
        let endpoint = server.endpoint, hellos = server.hellos
        let clock = ManualClock()
        let client = makeClient(endpoint, loop: loop, timeout: .seconds(4), attempts: 1, clock: clock)
        let events = client.events
        let connection = Task { await client.run() }
        let hello = try await FleetProtocolTests.first(hellos, "the hello") { _ in true }
        try await server.answer(hello, instance: "quiet", heartbeatIntervalMs: 1_000)
        _ = try await FleetProtocolTests.first(events, "connected") { if case .connected = $0 { true } else { false } }
        // The keep-alive's half-interval wait (not the hello's timer, which may not be gone yet).
        let keepAliveWait: @Sendable ([Duration]) -> Bool = { $0.contains(.milliseconds(500)) }
        try await withDeadline(.seconds(120), "the keep-alive's wait") { await clock.waitForSleepers(where: keepAliveWait) }
        await clock.jump(by: .seconds(12))  // the starved stretch: one wake-up, 12 s late
        try await withDeadline(.seconds(120), "the keep-alive's wait") { await clock.waitForSleepers(where: keepAliveWait) }
        #expect(await client.connectedEndpoint == endpoint, "12 s of its own absence is not the server's silence")
        // The server answers nothing: three heartbeats, one a second, go unanswered and it is lost.
        var steps = 0
        while await client.connectedEndpoint == endpoint, steps < 20 {
            await clock.advance(by: .milliseconds(500))
            steps += 1
            try await withDeadline(.seconds(120), "the keep-alive's wait") { await clock.sleeping(atLeast: 1) }
        }
        let lost = try await FleetProtocolTests.first(events, "lost") { $0 == .lost }
        #expect(lost == .lost)
        #expect(steps >= 4, "lost only after three probes an interval apart (took \(steps) half-second steps)")
        connection.cancel()
        await connection.value
        _ = await server.close()
        await shutdown()
    }

    /// A client whose process is stopped for 5 s while a reply is on its way (the 2 s timer wakes
    /// 3 s late) does not take that for the server's silence: the reply may be unread in its socket,
    /// so the timer runs once more, for the lateness (at most the wait), before a timeout resends.
    @Test func aReplyTimerThatWakesLateWaitsOnceMoreBeforeBlamingTheServer() async throws {
        let pending = try await PendingTokenRequest.start(loop: loop, timeout: .seconds(2))
        let (server, clock, first) = (pending.server, pending.clock, pending.first)
        await clock.jump(by: .seconds(5))  // stopped: the timer wakes 3 s late
        try await withDeadline(.seconds(120), "the timer's second wait") { await clock.sleeping(atLeast: .seconds(1)) }
        let deadlines = clock.pendingDeadlines
        #expect(deadlines.contains(.seconds(2)), "the timer waits the lateness again, at most the 2 s wait: \(deadlines)")
        #expect(!deadlines.contains(.seconds(4)), "no resend with a doubled wait: \(deadlines)")
        try await server.answer(first, token: "read late")
        #expect(try await withDeadline(.seconds(120), "the reply") { try await pending.request.value.accessToken } == "read late")
        #expect(server.tokenRequestsSeen == 1, "sent once: the late timer did not resend")
        await pending.stop()
        await shutdown()
    }

    /// A coordinator that is alive (it answers `hello` and every heartbeat) but slow with one
    /// request: the timed-out request is resent on the same connection, not on a new one (a new
    /// connection would cost the slow coordinator a handshake and a `hello` more: the retry storm
    /// of a fleet past capacity).
    @Test func aTimedOutRequestToALiveServerIsResentOnTheSameConnection() async throws {
        let pending = try await PendingTokenRequest.start(loop: loop, timeout: .seconds(1))
        let (server, clock, first) = (pending.server, pending.clock, pending.first)
        await clock.advance(by: .seconds(1))  // no reply within 1 s; the server was heard at the hello
        let second = try await FleetProtocolTests.first(server.tokenRequests, "the resend") { _ in true }
        #expect(second.id == first.id, "the same request id")
        #expect(second.peer == first.peer)
        try await server.answer(second, token: "late")
        #expect(try await withDeadline(.seconds(120), "the reply") { try await pending.request.value.accessToken } == "late")
        #expect(server.hellosSeen == 1, "one connection, one hello: the resend went on it")
        await pending.stop()
        await shutdown()
    }

    /// The retry budget (gRPC's retry throttling: 10 tokens, an unanswered attempt takes one, an
    /// answer gives back 0.1, resends only above 5): a server that answers nothing gets fewer and
    /// fewer resends, and one answer does not buy them back. The test drives every timeout on its
    /// clock, so each count is exact.
    @Test func timeoutsSpendTheRetryBudgetAndResendsStop() async throws {
        let router = try await loop.makeSocket(.router, options: plainServerOptions())
        let endpoint = try await router.bind("tcp://127.0.0.1:*")
        let codec = WireCodec()
        // What the test sees, in order: each attempt reaching the server, each request ending.
        enum Seen: Sendable {
            case arrived(String)
            case ended(String, Result<AccessTokenReply, any Error>)
        }
        let (seen, note) = AsyncStream<Seen>.makeStream()
        let serving = Task {
            for try await frames in router.messages {
                let message = try codec.decode(frames.dropFirst())
                func reply<Body: FleetMessageBody>(_ body: Body) async throws {
                    try await router.send([frames[0]] + codec.encode(body, header: MessageHeader(type: Body.messageType, id: 1, replyTo: message.header.id)))
                }
                switch message.header.type {
                case Hello.messageType:
                    // A long heartbeat interval: liveness never runs out while the test advances.
                    try await reply(HelloReply(server: "mute", heartbeatIntervalMs: 60_000, heartbeatLiveness: 3, maxMessageSize: 1 << 20, serverInstance: "mute"))
                case Heartbeat.messageType:
                    try await reply(HeartbeatReply(serverInstance: "mute", heartbeatIntervalMs: 60_000))
                case AccessTokenRequest.messageType:
                    let request = try codec.decodeBody(AccessTokenRequest.self, from: message)
                    if request.email == "answered@example.com" {
                        try await reply(AccessTokenReply(accessToken: "t", expiresAt: Date(timeIntervalSince1970: 2_000_000_000)))
                    }
                    note.yield(.arrived(request.email))
                default:
                    break
                }
            }
        }
        let clock = ManualClock()
        let client = makeClient(endpoint, loop: loop, clock: clock)
        let events = client.events
        let connection = Task { await client.run() }
        _ = try await FleetProtocolTests.first(events, "connected") { if case .connected = $0 { true } else { false } }

        /// Sends one unanswered request with 3 attempts of 1 s, times out each attempt that
        /// arrives, and returns how many arrived and the error it ended with.
        func unanswered(_ email: String) async throws -> (attempts: Int, error: FleetError) {
            _ = Task {
                do {
                    let reply = try await client.request(AccessTokenRequest(email: email, secret: "s"), timeout: .seconds(1), attempts: 3)
                    note.yield(.ended(email, .success(reply)))
                } catch {
                    note.yield(.ended(email, .failure(error)))
                }
            }
            var attempts = 0
            while true {
                switch try await FleetProtocolTests.first(seen, "attempt \(attempts + 1) or the end of \(email)") { _ in true } {
                case .arrived(let arrived) where arrived == email:
                    attempts += 1
                    try await withDeadline(.seconds(120), "the attempt's 1 s timeout") {
                        await clock.waitForSleepers { $0.contains { $0 > .zero && $0 <= .seconds(1) } }
                    }
                    await clock.advance(by: .seconds(1))
                case .ended(let ended, .failure(let error as FleetError)) where ended == email:
                    return (attempts, error)
                case let other:
                    throw DeadlineExceeded(what: "an attempt or a timeout of \(email), not \(other)")
                }
            }
        }

        let first = try await unanswered("a@example.com")
        #expect(first.attempts == 3)
        #expect(first.error.code == .timeout && first.error.retryable)
        #expect(await client.retryTokens == 7)
        let second = try await unanswered("b@example.com")
        #expect(second.attempts == 2, "the second attempt left 5 tokens: no third")
        #expect(second.error.description.contains("retry budget"), "\(second.error)")
        let third = try await unanswered("c@example.com")
        #expect(third.attempts == 1)
        #expect(await client.retryTokens == 4)
        // An answer gives back a tenth of a token: not enough for a resend.
        _ = try await withDeadline(.seconds(120), "the answered request") {
            try await client.request(AccessTokenRequest(email: "answered@example.com", secret: "s"))
        }
        let answered = try await FleetProtocolTests.first(seen, "the answered request's arrival") { _ in true }
        guard case .arrived("answered@example.com") = answered else { throw DeadlineExceeded(what: "the answered request's arrival, not \(answered)") }
        #expect(abs(await client.retryTokens - 4.1) < 1e-9)
        let fourth = try await unanswered("d@example.com")
        #expect(fourth.attempts == 1)
        connection.cancel()
        await connection.value
        serving.cancel()
        await router.close()
        await shutdown()
    }

    @Test func serverReportsADeviceLostWhenItFallsSilent() async throws {
        let server = try await RunningServer(loop: loop)
        let client = makeClient(server.endpoint, loop: loop, device: "quiet")
        let connection = Task { await client.run() }
        _ = try await first(server.server.peerEvents, "alive") { $0 == .alive("quiet") }
        connection.cancel()
        await connection.value
        _ = try await first(server.server.peerEvents, "lost") { $0 == .lost("quiet") }
        await server.stop()
        await shutdown()
    }
}

/// A raw ROUTER that answers `hello` and every `heartbeat` at once (a live coordinator) and keeps
/// each `auth.token` for the test to answer, or not: the slow coordinator of the tests of a
/// client's request timeouts.
struct TokenKeeper {
    typealias Request = (peer: [UInt8], id: UInt64)
    let endpoint: String
    /// Each `auth.token` as it arrives: the connection's routing id and the message id.
    let tokenRequests: AsyncStream<Request>
    private let router: AsyncSocket
    private let serving: Task<Void, any Error>
    private let counts: Counts

    /// What arrived so far (shared with the serving task).
    final class Counts: Sendable {
        let value = Mutex((hellos: 0, tokens: 0))
    }

    static func start(loop: ZMQIOLoop) async throws -> TokenKeeper {
        let router = try await loop.makeSocket(.router, options: plainServerOptions())
        let endpoint = try await router.bind("tcp://127.0.0.1:*")
        let (requests, arrived) = AsyncStream<Request>.makeStream()
        let counts = Counts()
        let serving = Task {
            let codec = WireCodec()
            for try await frames in router.messages {
                let message = try codec.decode(frames.dropFirst())
                func reply<Body: FleetMessageBody>(_ body: Body) async throws {
                    try await router.send([frames[0]] + codec.encode(body, header: MessageHeader(type: Body.messageType, id: 1, replyTo: message.header.id)))
                }
                switch message.header.type {
                case Hello.messageType:
                    counts.value.withLock { $0.hellos += 1 }
                    try await reply(HelloReply(server: "slow", heartbeatIntervalMs: 1_000, heartbeatLiveness: 3, maxMessageSize: 1 << 20, serverInstance: "slow"))
                case Heartbeat.messageType:
                    try await reply(HeartbeatReply(serverInstance: "slow", heartbeatIntervalMs: 1_000))
                case AccessTokenRequest.messageType:
                    counts.value.withLock { $0.tokens += 1 }
                    arrived.yield((frames[0], message.header.id))
                default:
                    break
                }
            }
        }
        return TokenKeeper(endpoint: endpoint, tokenRequests: requests, router: router, serving: serving, counts: counts)
    }

    var hellosSeen: Int { counts.value.withLock { $0.hellos } }
    var tokenRequestsSeen: Int { counts.value.withLock { $0.tokens } }

    /// Answers `request` with an access token, on the connection it came from.
    func answer(_ request: Request, token: String) async throws {
        try await router.send(
            [request.peer] + WireCodec().encode(
                AccessTokenReply(accessToken: token, expiresAt: Date(timeIntervalSince1970: 2_000_000_000)),
                header: MessageHeader(type: AccessTokenReply.messageType, id: 2, replyTo: request.id)))
    }

    func close() async {
        serving.cancel()
        await router.close()
    }
}

/// A client connected to a ``TokenKeeper`` on a manual clock, with one `auth.token` sent, arrived
/// and its reply timer running: where the tests of a request's timeout start.
struct PendingTokenRequest {
    let server: TokenKeeper
    let clock: ManualClock
    /// The request as the server saw it (answer it with ``TokenKeeper/answer(_:token:)``).
    let first: TokenKeeper.Request
    let request: Task<AccessTokenReply, any Error>
    private let connection: Task<Void, Never>

    static func start(loop: ZMQIOLoop, timeout: Duration) async throws -> PendingTokenRequest {
        let server = try await TokenKeeper.start(loop: loop)
        let clock = ManualClock()
        let client = makeClient(server.endpoint, loop: loop, timeout: timeout, attempts: 2, clock: clock)
        let events = client.events
        let connection = Task { await client.run() }
        // Connected first: a hello still waiting when the clock moves would time out too, and the
        // reconnection that follows would wait on the back-off of a clock that then stands still.
        _ = try await FleetProtocolTests.first(events, "connected") { if case .connected = $0 { true } else { false } }
        let request = Task { try await client.request(AccessTokenRequest(email: "a@example.com", secret: "s")) }
        let first = try await FleetProtocolTests.first(server.tokenRequests, "the request") { _ in true }
        try await withDeadline(.seconds(120), "the request's reply timer") { await clock.sleeping(atLeast: timeout) }
        return PendingTokenRequest(server: server, clock: clock, first: first, request: request, connection: connection)
    }

    func stop() async {
        connection.cancel()
        await connection.value
        await server.close()
    }
}

/// A raw ROUTER that only listens for `hello`s (none is answered unless the test says so): the
/// slow or silent coordinator of the tests of a client's hello and liveness rules.
struct HelloCatcher {
    typealias Hello = (peer: [UInt8], id: UInt64)
    let endpoint: String
    /// Each `hello` as it arrives: the connection's routing id and the message id.
    let hellos: AsyncStream<Hello>
    private let router: AsyncSocket
    private let arrived: AsyncStream<Hello>.Continuation
    private let serving: Task<Void, any Error>

    static func start(loop: ZMQIOLoop) async throws -> HelloCatcher {
        let router = try await loop.makeSocket(.router, options: plainServerOptions())
        let endpoint = try await router.bind("tcp://127.0.0.1:*")
        let (hellos, arrived) = AsyncStream<Hello>.makeStream()
        let serving = Task {
            let codec = WireCodec()
            for try await frames in router.messages {
                let message = try codec.decode(frames.dropFirst())
                if message.header.type == FleetProtocol.Hello.messageType { arrived.yield((frames[0], message.header.id)) }
            }
        }
        return HelloCatcher(endpoint: endpoint, hellos: hellos, router: router, arrived: arrived, serving: serving)
    }

    /// Answers `hello` on the connection it came from (dropped if that connection has closed).
    func answer(_ hello: Hello, instance: String, heartbeatIntervalMs: UInt32 = 10_000) async throws {
        let reply = HelloReply(
            server: "slow", heartbeatIntervalMs: heartbeatIntervalMs, heartbeatLiveness: 3, maxMessageSize: 1 << 20, serverInstance: instance)
        try await router.send([hello.peer] + WireCodec().encode(reply, header: MessageHeader(type: HelloReply.messageType, id: 1, replyTo: hello.id)))
    }

    /// Stops listening and closes the socket; returns how many hellos arrived that nobody took.
    func close() async -> Int {
        arrived.finish()
        let left = await hellos.reduce(0) { count, _ in count + 1 }
        serving.cancel()
        await router.close()
        return left
    }
}
