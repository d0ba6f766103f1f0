import Crypto
import DeviceNode
@testable import FleetProtocol
import FleetZeroMQTransport
import FleetTesting
import GRDB
import Foundation
import Logging
import Metrics
import Prometheus
import Testing
import ZeroMQ

@testable import Coordinator

/// A real coordinator serving CURVE on a free port (its key from the store), as `signfleet
/// coordinator` runs it, for the attacks in issue 13 tried with real sockets.
final class CurveCoordinator: Sendable {
    let temporary: TemporaryStore
    let services: CoordinatorServices
    let context: ZMQContext
    let loop: ZMQIOLoop
    let server: FleetServer
    let endpoint: String
    let serverKey: [UInt8]
    let token: String
    let registry = PrometheusCollectorRegistry()
    /// One element each time a counter of the server moves (the newest only): what tests wait on.
    let counterChanges: AsyncStream<Void>
    private let serving: Task<Void, Never>

    init(
        highWaterMark: Int32 = 10_000, maxConcurrentRequests: Int = 256, peerMessageBurst: Double = 1_000,
        limits: WireLimits = WireLimits(), clock: any FleetClock = ContinuousClock()
    ) async throws {
        temporary = try TemporaryStore()
        services = CoordinatorServices(store: temporary.store)
        _ = try await services.accounts.seedDemo()
        token = try await services.auth.issueToken(email: "user1@demo.example", secret: DemoData.secret).accessToken
        var router = RequestRouter()
        services.register(in: &router)
        context = try ZMQContext()
        loop = try ZMQIOLoop(context: context, label: "wire-trust")
        var logger = Logger(label: "wire-trust")
        logger.logLevel = .warning
        let keys = try temporary.store.transportKeyPair()
        serverKey = keys.publicKey
        let (changes, changed) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        counterChanges = changes
        server = FleetServer(
            configuration: FleetServerConfiguration(
                endpoint: "tcp://127.0.0.1:*", security: .curve(keys), heartbeatInterval: .milliseconds(200),
                limits: limits, highWaterMark: highWaterMark, maxConcurrentRequests: maxConcurrentRequests,
                peerMessageBurst: peerMessageBurst),
            router: router, loop: loop, logger: logger,
            metricsFactory: SignallingMetricsFactory(PrometheusMetricsFactory(registry: registry)) { changed.yield() }, clock: clock)
        endpoint = try await server.bind()
        let server = self.server
        serving = Task { try? await server.run() }
    }

    /// A device client proving `keys` (a fresh key pair unless given), pinned to this coordinator.
    func client(_ deviceID: String, keys: CurveKeyPair? = nil, serverKey: [UInt8]? = nil, timeout: Duration = .seconds(20), attempts: Int = 2)
        throws -> FleetClient
    {
        var logger = Logger(label: "wire-trust-client")
        logger.logLevel = .error
        return FleetClient(
            configuration: FleetClientConfiguration(
                endpoint: endpoint, deviceID: deviceID,
                security: .curve(serverKey: serverKey ?? self.serverKey, keys: try keys ?? CurveKeyPair.generate()),
                requestTimeout: timeout, maxAttempts: attempts),
            loop: loop, logger: logger)
    }

    func metricsText() -> String {
        var buffer: [UInt8] = []
        registry.emit(into: &buffer)
        return String(decoding: buffer, as: UTF8.self)
    }

    /// The sum of the metric `name` over its series whose labels contain `label`.
    func counter(_ name: String, labelled label: String) -> Double {
        metricsText().split(separator: "\n")
            .filter { $0.hasPrefix(name + "{") && $0.contains(label) }
            .compactMap { $0.split(separator: " ").last.flatMap { Double($0) } }
            .reduce(0, +)
    }

    func stop() async {
        serving.cancel()
        await serving.value
        await loop.shutdown()
        context.shutdown()
        temporary.remove()
    }
}

/// Runs `client` for the duration of `body`.
func connected<T: Sendable>(_ client: FleetClient, _ body: () async throws -> T) async throws -> T {
    let connection = Task { await client.run() }
    defer { connection.cancel() }
    return try await body()
}

@Suite struct WireTrustTests {
    /// Issue 13's first attacks: a peer that only claims a device id, with its own keys.
    @Test func anImpersonatorWithItsOwnKeysCannotPushReadResultsEnrollOrDisturbTheDevice() async throws {
        let coordinator = try await CurveCoordinator()
        defer { Task { await coordinator.stop() } }
        let (node, items) = try await signedItems(count: 2, directory: coordinator.temporary.directory, deviceID: "victim")
        defer { Task { try? await node.close() } }
        let device = try coordinator.client("victim", keys: node.transportKeys)
        let deviceConnection = Task { await device.run() }
        defer { deviceConnection.cancel() }
        _ = try await device.request(EnrollDevice(accessToken: coordinator.token, deviceID: "victim", publicKey: node.publicKey))
        let first = try await device.request(SyncPush(deviceID: "victim", items: [items[0]]))
        // On a very loaded machine a timeout can resend the push: its answer is then the stored one.
        #expect(first.lastApplied == 1 && [[.applied], [.duplicate]].contains(first.results.map(\.outcome)), "\(first)")

        let attacker = try coordinator.client("victim")
        try await connected(attacker) {
            // The same device id, a valid access token of the same account, its own keys.
            let forger = Forger(id: "victim")
            let junk = try forger.item(from: items[1], sequence: 2, transaction: "junk")
            let push = await fleetError { _ = try await attacker.request(SyncPush(deviceID: "victim", items: [junk])) }
            #expect(push?.code == .unauthenticated, "\(String(describing: push))")
            let results = await fleetError { _ = try await attacker.request(SyncResultsQuery(deviceID: "victim")) }
            #expect(results?.code == .unauthenticated, "the same as for an id that does not exist: no list of ids")
            let enroll = await fleetError {
                _ = try await attacker.request(EnrollDevice(accessToken: coordinator.token, deviceID: "victim", publicKey: forger.publicKey))
            }
            #expect(enroll?.code == .forbidden)
            // Even the device's own signing key does not let another transport key act for it.
            let rebind = await fleetError {
                _ = try await attacker.request(EnrollDevice(accessToken: coordinator.token, deviceID: "victim", publicKey: node.publicKey))
            }
            #expect(rebind?.code == .forbidden)
        }
        // The device was never displaced: its next item applies, and its results are its own.
        let second = try await device.request(SyncPush(deviceID: "victim", items: [items[1]]))
        // As for the first push, a resend after a timeout is answered with the stored outcome.
        #expect(second.lastApplied == 2 && [[.applied], [.duplicate]].contains(second.results.map(\.outcome)), "\(second)")
        let mine = try await device.request(SyncResultsQuery(deviceID: "victim"))
        #expect(mine.results.map(\.outcome) == [.applied, .applied])
    }

    @Test func aPeerThatSetsItsOwnRoutingIDIsRefusedAndCannotTakeOverAConnection() async throws {
        let coordinator = try await CurveCoordinator()
        defer { Task { await coordinator.stop() } }
        let honest = try coordinator.client("tablet-1")
        let honestConnection = Task { await honest.run() }
        defer { honestConnection.cancel() }
        _ = try await honest.request(Heartbeat())

        // Raw DEALERs that complete CURVE but name their connections: "tablet-1", and ids that
        // start with the 0x00 of the ROUTER's own names (5 bytes, 0x00 then a counter) without
        // being one. Each is refused, and the refusal answers the message it refuses (`re`).
        let codec = WireCodec()
        for (index, chosen) in [Array("tablet-1".utf8), [0x00, 0x41], [0x00, 0, 0, 0, 1, 2]].enumerated() {
            var options = SocketOptions()
            options.curve = .client(serverKey: coordinator.serverKey, keys: try CurveKeyPair.generate())
            options.routingID = chosen
            let raw = try await coordinator.loop.makeSocket(.dealer, options: options)
            try await raw.connect(coordinator.endpoint)
            let id = UInt64(7 + index)
            try await raw.send(try codec.encode(Heartbeat(), header: MessageHeader(type: Heartbeat.messageType, id: id)))
            let reply = try codec.decode(try await firstElement(of: raw.messages, "the refusal of \(chosen)"))
            #expect(reply.header.type == FleetError.messageType, "\(chosen)")
            #expect(reply.header.replyTo == id, "the refusal of \(chosen) answers its message")
            let error = try codec.decodeBody(FleetError.self, from: reply)
            #expect(error.code == .invalidRequest && error.message.contains("routing id"), "\(error)")
            await raw.close()
        }
        // The honest device still gets its own replies.
        _ = try await honest.request(Heartbeat())
    }

    @Test func aWrongPinnedServerKeyNeverConnectsAndSaysWhy() async throws {
        let coordinator = try await CurveCoordinator()
        defer { Task { await coordinator.stop() } }
        let impostorKey = try CurveKeyPair.generate().publicKey
        let client = try coordinator.client("tablet-9", serverKey: impostorKey, timeout: .milliseconds(300), attempts: 1)
        let events = client.events
        try await connected(client) {
            let event = try await firstElement(of: events, within: .seconds(20), "a handshake failure") {
                if case .handshakeFailed = $0 { return true }
                return false
            }
            guard case .handshakeFailed(let reason) = event else { return }
            #expect(reason.contains("public key is not the pinned one"), "\(reason)")
            let error = await fleetError { _ = try await client.request(Heartbeat()) }
            #expect(error?.code == .timeout)
        }
        #expect(await coordinator.server.aliveDeviceCount == 0)
    }

    @Test func aPlainTCPPeerGetsNothingFromACurveCoordinator() async throws {
        let coordinator = try await CurveCoordinator()
        defer { Task { await coordinator.stop() } }
        var logger = Logger(label: "plain")
        logger.logLevel = .error
        let plain = FleetClient(
            configuration: FleetClientConfiguration(
                endpoint: coordinator.endpoint, deviceID: "tablet-plain", requestTimeout: .milliseconds(300), maxAttempts: 1),
            loop: coordinator.loop, logger: logger)
        try await connected(plain) {
            let error = await fleetError { _ = try await plain.request(Heartbeat()) }
            #expect(error?.code == .timeout)
        }
        #expect(await coordinator.server.aliveDeviceCount == 0)
    }

    @Test func anUnknownKeyMayOnlySayHelloAuthenticateAndEnroll() async throws {
        let coordinator = try await CurveCoordinator()
        defer { Task { await coordinator.stop() } }
        let stranger = try coordinator.client("stranger")
        try await connected(stranger) {
            _ = try await stranger.request(Heartbeat())
            _ = try await stranger.request(AccessTokenRequest(email: "user1@demo.example", secret: DemoData.secret))
            let push = await fleetError { _ = try await stranger.request(SyncPush(deviceID: "stranger", items: [])) }
            #expect(push?.code == .unauthenticated)
            let results = await fleetError { _ = try await stranger.request(SyncResultsQuery(deviceID: "stranger")) }
            #expect(results?.code == .unauthenticated)
        }
    }

    @Test func reEnrollingWithNewKeysNeedsAnAdminsRevocationAndKeepsTheHistory() async throws {
        let coordinator = try await CurveCoordinator()
        defer { Task { await coordinator.stop() } }
        let (node, items) = try await signedItems(count: 1, directory: coordinator.temporary.directory, deviceID: "lost-tablet")
        defer { Task { try? await node.close() } }
        let registry = coordinator.services.devices
        let firstKey = try CurveKeyPair.generate()
        let enroll = EnrollDevice(accessToken: coordinator.token, deviceID: "lost-tablet", publicKey: node.publicKey)
        _ = try await registry.enroll(enroll, credential: .curveKey(firstKey.publicKey))
        _ = try await coordinator.services.ingest.apply(SyncPush(deviceID: "lost-tablet", items: items), credential: .curveKey(firstKey.publicKey))

        // The tablet is reset: new transport and signing keys.
        let newKey = try CurveKeyPair.generate()
        let newSigning = Curve25519.Signing.PrivateKey()
        let again = EnrollDevice(accessToken: coordinator.token, deviceID: "lost-tablet", publicKey: Array(newSigning.publicKey.rawRepresentation))
        await expectFleetError(.forbidden) { _ = try await registry.enroll(again, credential: .curveKey(newKey.publicKey)) }
        #expect(try await registry.revoke(deviceID: "lost-tablet"))
        // Revoked: the old key can do nothing more.
        await expectFleetError(.forbidden) {
            _ = try await coordinator.services.ingest.apply(SyncPush(deviceID: "lost-tablet", items: items), credential: .curveKey(firstKey.publicKey))
        }
        // The old keys (maybe in a thief's hands) cannot undo the revocation.
        await expectFleetError(.forbidden) { _ = try await registry.enroll(enroll, credential: .curveKey(firstKey.publicKey)) }
        // A push admitted under the old keys before the revocation cannot commit after it.
        let stale = try #require(try await registry.device(id: "lost-tablet"))
        let reply = try await registry.enroll(again, credential: .curveKey(newKey.publicKey))
        let late = SyncPush(deviceID: "lost-tablet", items: items)
        await expectFleetError(.forbidden) {
            let push = IngestPush(device: stale, push: late, key: nil, verification: .everySignature, recordedAt: Date(), verdicts: [nil])
            _ = try await coordinator.temporary.store.ingest([push])[0].get()
        }
        #expect(reply.lastAppliedSequence == 1, "the device's history stays with it")
        #expect(try await registry.device(id: "lost-tablet")?.curveKey == newKey.publicKey)
        #expect(try await registry.revoke(deviceID: "no-such-device") == false)
    }

    /// A signing key sent in the clear over plain TCP proves nothing: it cannot bind a CURVE key.
    @Test func aDeviceEnrolledOverPlainTCPCannotBeClaimedOverCURVEWithoutARevocation() async throws {
        let coordinator = try await CurveCoordinator()
        defer { Task { await coordinator.stop() } }
        let registry = coordinator.services.devices
        let signing = Forger(id: "plain-tablet")
        let enroll = EnrollDevice(accessToken: coordinator.token, deviceID: "plain-tablet", publicKey: signing.publicKey)
        _ = try await registry.enroll(enroll, routingID: "plain-tablet")
        let squatter = try CurveKeyPair.generate()
        await expectFleetError(.forbidden) { _ = try await registry.enroll(enroll, credential: .curveKey(squatter.publicKey)) }
        #expect(try await registry.device(id: "plain-tablet")?.curveKey == nil)
    }

    /// One peer floods requests and never reads: only it loses replies; hello, heartbeats and
    /// other devices' work go on (the coordinator used to freeze for everyone).
    @Test(.timeLimit(.minutes(4))) func aPeerThatNeverReadsCostsOnlyItself() async throws {
        // A budget large enough that the whole flood is read and answered: this is about replies
        // that do not fit, not about the budget (the next test).
        let coordinator = try await CurveCoordinator(highWaterMark: 50, peerMessageBurst: 1_000_000)
        let flooder = try await Flooder(to: coordinator, receiveHighWaterMark: 50)
        // Requests of an unknown type whose 1 KB name the error reply repeats: far more reply bytes
        // than the server's queue (50), the flooder's (50) and loopback TCP buffers hold, from few
        // messages (the suite's other tests share these 2 cores).
        let floodSize = 20_000
        let flood = flooder.flood(floodSize, type: MessageType(String(repeating: "x", count: 1_000)))
        // The flooder never reads. The coordinator answers its whole flood, dropping what does not
        // fit (one that waited for it instead froze here, for everyone); then other devices are
        // served at once. (What the flood costs in CPU is the budget's business: the next test.)
        try await coordinator.waitUntil(within: .seconds(150), "the flood is answered") {
            coordinator.counter("signfleet_requests_total", labelled: "type=\"other\"") >= Double(floodSize)
        }
        #expect(coordinator.counter("signfleet_replies_dropped_total", labelled: "reason=\"peer_not_reading\"") > 0)
        let honest = try coordinator.client("tablet-honest", timeout: .seconds(10), attempts: 1)
        try await connected(honest) {
            for _ in 0..<20 { _ = try await honest.request(Heartbeat()) }
            _ = try await honest.request(AccessTokenRequest(email: "user1@demo.example", secret: DemoData.secret))
        }
        flood.cancel()
        await coordinator.stop()
        await flooder.stop()
    }

    /// ZeroMQ measures frames encrypted, 33 bytes longer under CURVE: a frame of exactly the limit
    /// is answered as over plain TCP (it was dropped with the connection, the sender left to time out).
    @Test(.timeLimit(.minutes(2))) func aFrameOfExactlyTheLimitIsTakenUnderCURVE() async throws {
        let limit = 4_096
        let coordinator = try await CurveCoordinator(limits: WireLimits(maxMessageSize: limit))
        var options = SocketOptions()
        options.curve = .client(serverKey: coordinator.serverKey, keys: try CurveKeyPair.generate())
        let peer = try await coordinator.loop.makeSocket(.dealer, options: options)
        try await peer.connect(coordinator.endpoint)
        let codec = WireCodec()
        /// A heartbeat whose body (a map holding one string, which a heartbeat ignores) is `size` bytes.
        func heartbeat(id: UInt64, bodySize size: Int) throws -> [[UInt8]] {
            let padding = size - 6  // fixmap, "p" as fixstr, str16 marker and length
            let body: [UInt8] = [0x81, 0xa1, 0x70, 0xda, UInt8(padding >> 8), UInt8(padding & 0xff)]
                + [UInt8](repeating: 0x78, count: padding)
            return [try codec.encode(Heartbeat(), header: MessageHeader(type: Heartbeat.messageType, id: id))[0], body]
        }
        func reply(_ what: String) async throws -> InboundMessage {
            try codec.decode(try await firstElement(of: peer.messages, within: .seconds(60), what))
        }
        try await peer.send(try heartbeat(id: 1, bodySize: limit))
        let atLimit = try await reply("the answer to a frame of exactly the limit")
        #expect(atLimit.header.type == HeartbeatReply.messageType)
        #expect(atLimit.header.replyTo == 1)
        await peer.close()
        await coordinator.stop()
    }

    /// A peer that floods costs the coordinator only its budget (1,000 messages, then 200/s):
    /// the rest is dropped unread, and another device is served at once.
    @Test(.timeLimit(.minutes(4))) func aFloodingPeerIsHeldToItsMessageBudget() async throws {
        // The server's clock stands still: the flooder's budget is its burst and nothing refills it,
        // and the drops that cut a connection are counted over one (never-ending) interval, so what
        // is answered does not depend on how fast this machine reads the flood.
        let coordinator = try await CurveCoordinator(clock: ManualClock())
        let flooder = try await Flooder(to: coordinator)
        let floodSize = 20_000
        let flood = flooder.flood(floodSize)
        // Read to the end, or cut (PeerBudgetGate.dropsBeforeCut in one heartbeat interval): either
        // way the flood stops costing anything.
        try await coordinator.waitUntil(within: .seconds(150), "the flood is read (answered or dropped) or cut") {
            let answered = coordinator.counter("signfleet_requests_total", labelled: "type=\"heartbeat\"")
            let dropped = coordinator.counter("signfleet_requests_dropped_total", labelled: "reason=\"peer_over_budget\"")
            let cut = coordinator.counter("signfleet_requests_dropped_total", labelled: "reason=\"peer_cut\"")
            // After a cut, the messages admitted before it are still answered.
            return answered + dropped >= Double(floodSize) || (cut >= 1 && answered >= 1_000)
        }
        let answered = coordinator.counter("signfleet_requests_total", labelled: "type=\"heartbeat\"")
        #expect(answered == 1_000, "answered \(answered) of \(floodSize): the burst, and nothing refilled it")
        #expect(coordinator.counter("signfleet_requests_dropped_total", labelled: "reason=\"peer_cut\"") >= 1)
        let honest = try coordinator.client("tablet-honest", timeout: .seconds(10), attempts: 1)
        try await connected(honest) {
            for _ in 0..<20 { _ = try await honest.request(Heartbeat()) }
        }
        flood.cancel()
        await coordinator.stop()
        await flooder.stop()
    }
}

/// A raw CURVE DEALER on a context of its own, for peers that flood and never read.
///
/// libzmq 4.3.4 aborts (`session_base.cpp:260`, clean_pipes) when a connection's engine fails while
/// its ROUTER is being closed and the connection is in the middle of a multipart message to a peer
/// that does not read. So these tests stop the coordinator first (its context terminates only once
/// every session is gone), and only then close the flooder, on its own context.
final class Flooder: Sendable {
    let context: ZMQContext
    let loop: ZMQIOLoop
    let socket: AsyncSocket

    init(to coordinator: CurveCoordinator, receiveHighWaterMark: Int32 = 1_000) async throws {
        context = try ZMQContext()
        loop = try ZMQIOLoop(context: context, label: "flooder")
        var options = SocketOptions()
        options.curve = .client(serverKey: coordinator.serverKey, keys: try CurveKeyPair.generate())
        options.receiveHighWaterMark = receiveHighWaterMark
        options.receiveBufferLimit = Int(receiveHighWaterMark)
        options.sendHighWaterMark = 1_000_000
        socket = try await loop.makeSocket(.dealer, options: options)
        try await socket.connect(coordinator.endpoint)
    }

    /// Sends `count` messages of `type` from a task of its own (against a coordinator that stops
    /// reading they would wait, and the test must fail on its deadline, not hang).
    func flood(_ count: Int, type: MessageType = Heartbeat.messageType) -> Task<Void, Error> {
        let socket = self.socket
        let codec = WireCodec()
        return Task {
            for id in 1...count {
                try await socket.send(try codec.encode(Heartbeat(), header: MessageHeader(type: type, id: UInt64(id))))
            }
        }
    }

    func stop() async {
        await loop.shutdown()
        context.shutdown()
    }
}

extension CurveCoordinator {
    /// Waits until `condition` (on the server's counters) holds, re-checking it each time a counter
    /// moves; fails after `timeout`.
    func waitUntil(within timeout: Duration, _ what: String, _ condition: @escaping @Sendable () -> Bool) async throws {
        if condition() { return }
        _ = try await firstElement(of: counterChanges, within: timeout, what) { _ in condition() }
    }
}

/// Forwards to another metrics factory and calls `changed` whenever a counter is incremented.
struct SignallingMetricsFactory: MetricsFactory {
    let base: any MetricsFactory
    let changed: @Sendable () -> Void

    init(_ base: any MetricsFactory, changed: @escaping @Sendable () -> Void) {
        self.base = base
        self.changed = changed
    }

    final class SignallingCounter: CounterHandler {
        let base: any CounterHandler
        let changed: @Sendable () -> Void
        init(base: any CounterHandler, changed: @escaping @Sendable () -> Void) {
            self.base = base
            self.changed = changed
        }
        func increment(by amount: Int64) {
            base.increment(by: amount)
            changed()
        }
        func reset() { base.reset() }
    }

    func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler {
        SignallingCounter(base: base.makeCounter(label: label, dimensions: dimensions), changed: changed)
    }
    func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler {
        base.makeRecorder(label: label, dimensions: dimensions, aggregate: aggregate)
    }
    func makeMeter(label: String, dimensions: [(String, String)]) -> any MeterHandler {
        base.makeMeter(label: label, dimensions: dimensions)
    }
    func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler {
        base.makeTimer(label: label, dimensions: dimensions)
    }
    func destroyCounter(_ handler: any CounterHandler) {
        base.destroyCounter((handler as? SignallingCounter)?.base ?? handler)
    }
    func destroyRecorder(_ handler: any RecorderHandler) { base.destroyRecorder(handler) }
    func destroyMeter(_ handler: any MeterHandler) { base.destroyMeter(handler) }
    func destroyTimer(_ handler: any TimerHandler) { base.destroyTimer(handler) }
}

/// Device ids are unique per account (migration v8): no account can take an id another
/// account's device will use.
@Suite struct DeviceIDsPerAccountTests {
    @Test func anotherAccountEnrollingAnIDFirstDoesNotLockTheRealDeviceOut() async throws {
        let coordinator = try await CurveCoordinator()
        defer { Task { await coordinator.stop() } }
        let services = coordinator.services
        _ = try await services.accounts.createAccount(id: "mallory", name: "Mallory", offlineSigning: true)
        _ = try await services.accounts.createUser(accountID: "mallory", name: "M", email: "m@mallory.example", secret: "secret-123")
        let malloryToken = try await services.auth.issueToken(email: "m@mallory.example", secret: "secret-123").accessToken

        // Mallory's peer enrolls the id first, over the wire.
        let squatter = try coordinator.client("tablet-1")
        try await connected(squatter) {
            _ = try await squatter.request(
                EnrollDevice(accessToken: malloryToken, deviceID: "tablet-1", publicKey: Forger(id: "tablet-1").publicKey))
        }
        // The real device of the demo account enrolls and syncs as if nobody had.
        let (node, items) = try await signedItems(count: 2, directory: coordinator.temporary.directory, deviceID: "tablet-1")
        defer { Task { try? await node.close() } }
        let device = try coordinator.client("tablet-1", keys: node.transportKeys)
        try await connected(device) {
            let enrolled = try await device.request(
                EnrollDevice(accessToken: coordinator.token, deviceID: "tablet-1", publicKey: node.publicKey))
            #expect(enrolled.accountID == "demo")
            let ack = try await device.request(SyncPush(deviceID: "tablet-1", items: items))
            // A reply lost under heavy load makes the client resend: the stored answers are duplicates.
            #expect(ack.lastApplied == 2 && ack.results.allSatisfy { [.applied, .duplicate].contains($0.outcome) }, "\(ack)")
            let mine = try await device.request(SyncResultsQuery(deviceID: "tablet-1"))
            #expect(mine.lastApplied == 2 && mine.results.count == 2)
        }
        // Two devices named tablet-1 now: revocation must say which.
        await expectFleetError(.invalidRequest) { _ = try await services.devices.revoke(deviceID: "tablet-1") }
        #expect(try await services.devices.revoke(deviceID: "tablet-1", accountID: "mallory"))
        #expect(try await services.devices.device(id: "tablet-1", accountID: "demo")?.revokedAt == nil)
        // Plain TCP cannot tell the two apart, and says so.
        await expectFleetError(.forbidden) {
            _ = try await services.ingest.apply(SyncPush(deviceID: "tablet-1", items: items), routingID: "tablet-1")
        }
    }

    @Test func aStoreFromBeforeMigrationV8KeepsEveryRow() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("v8-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("old.sqlite").path
        // A store as the previous version left it, with an applied and a rejected item.
        do {
            let queue = try DatabaseQueue(path: path)
            try CoordinatorStore.migrator.migrate(queue, upTo: "v7-transport-identity")
            try await queue.write { db in
                try db.execute(sql: """
                    INSERT INTO account (id, name, offlineSigning, hourlyLimit, burstLimit, burstWindowSeconds, createdAt)
                    VALUES ('acme', 'Acme', 1, 100, 10, 30, '2026-01-01 00:00:00.000');
                    INSERT INTO user (id, accountID, name, email, secretSalt, secretHash, createdAt)
                    VALUES ('u1', 'acme', 'Ann', 'a@acme.example', x'00', x'00', '2026-01-01 00:00:00.000');
                    INSERT INTO device (id, accountID, userID, publicKey, enrolledAt, lastAppliedSequence, curveKey)
                    VALUES ('old-tablet', 'acme', 'u1', x'01', '2026-01-01 00:00:00.000', 2, x'02');
                    INSERT INTO envelope (id, accountID, deviceID, sequence, transactionID, localEnvelopeID, name, status, payload,
                                          deviceSignature, createdAt)
                    VALUES ('env-1', 'acme', 'old-tablet', 1, 'tx-1', 'l-1', 'Lease', 'sent', x'03', x'04', '2026-01-01 00:00:00.000');
                    INSERT INTO syncResult (deviceID, sequence, outcome, envelopeID, reason, recordedAt, payloadSHA256)
                    VALUES ('old-tablet', 1, 'applied', 'env-1', NULL, '2026-01-01 00:00:00.000', x'05'),
                           ('old-tablet', 2, 'rejected', NULL, 'bad', '2026-01-01 00:00:00.000', x'06');
                    """)
            }
        }
        let store = try CoordinatorStore(path: path)
        let (devices, envelopes, results, problems) = try await store.database.read { db in
            (
                try Row.fetchAll(db, sql: "SELECT accountID, id, lastAppliedSequence, curveKey FROM device"),
                try Row.fetchAll(db, sql: "SELECT accountID, deviceID, sequence FROM envelope"),
                try Row.fetchAll(db, sql: "SELECT accountID, deviceID, sequence, outcome, payloadSHA256 FROM syncResult ORDER BY sequence"),
                try Row.fetchAll(db, sql: "PRAGMA foreign_key_check")
            )
        }
        #expect(devices.count == 1 && devices[0]["accountID"] == "acme" && devices[0]["lastAppliedSequence"] == 2)
        #expect(devices[0]["curveKey"] == Data([0x02]))
        #expect(envelopes.count == 1 && envelopes[0]["deviceID"] == "old-tablet")
        #expect(results.map { $0["outcome"] as String } == ["applied", "rejected"])
        #expect(results.allSatisfy { $0["accountID"] == "acme" })
        #expect(results[1]["payloadSHA256"] == Data([0x06]))
        #expect(problems.isEmpty, "\(problems)")
    }
}

/// The cut of a connection far over its message budget (PeerBudgetGate), decided without sockets.
@Suite struct PeerBudgetCutTests {
    @Test func aConnectionThatDropsThousandsOfMessagesInOneIntervalIsCutOnce() {
        let registry = PrometheusCollectorRegistry()
        let gate = PeerBudgetGate(
            burst: 10, rate: 0.001, security: .plaintext, metrics: FleetServerMetrics(factory: PrometheusMetricsFactory(registry: registry)),
            logger: Logger(label: "cut"), clock: ManualClock())
        let message: [[UInt8]] = [Array("flooder".utf8), [0x80], [0xC0]]
        var admitted = 0
        for _ in 0..<(10 + PeerBudgetGate.dropsBeforeCut - 1) where gate.admit(message) { admitted += 1 }
        #expect(admitted == 10 && gate.connectionsCut == 0, "not yet: \(PeerBudgetGate.dropsBeforeCut - 1) dropped")
        #expect(!gate.admit(message))
        #expect(gate.connectionsCut == 1, "cut at the \(PeerBudgetGate.dropsBeforeCut)th drop")
        // What was already sent on the cut connection is dropped, never cut again: its descriptor
        // number may since name another socket (here a live connection that must stay up).
        var pair: [Int32] = [-1, -1]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair) == 0)
        defer { for descriptor in pair { close(descriptor) } }
        for _ in 0..<(10 * PeerBudgetGate.dropsBeforeCut) { _ = gate.admit(message, descriptor: pair[0]) }
        #expect(gate.connectionsCut == 1)
        var byte: UInt8 = 7
        #expect(write(pair[1], &byte, 1) == 1 && read(pair[0], &byte, 1) == 1, "the other socket was not shut down")
        // The cut sender, reconnected (a new interval, a full bucket), gets nothing during the
        // cooldown and is cut after a few drops.
        gate.pruneIdle()
        gate.forget(message[0])
        var again = 0
        for _ in 0..<PeerBudgetGate.dropsBeforeCutWhileCooling where gate.admit(message) { again += 1 }
        #expect(again == 0, "no budget while cooling down")
        #expect(gate.connectionsCut == 2)
        // Another sender is not affected.
        #expect(gate.admit([Array("honest".utf8), [0x80], [0xC0]]))
    }
}
