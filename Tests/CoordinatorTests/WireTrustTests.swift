import Crypto
import DeviceNode
import FleetProtocol
import FleetTesting
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
    private let serving: Task<Void, Never>

    init(highWaterMark: Int32 = 10_000, maxConcurrentRequests: Int = 256) async throws {
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
        server = FleetServer(
            configuration: FleetServerConfiguration(
                endpoint: "tcp://127.0.0.1:*", security: .curve(keys), heartbeatInterval: .milliseconds(200),
                highWaterMark: highWaterMark, maxConcurrentRequests: maxConcurrentRequests),
            router: router, loop: loop, logger: logger, metricsFactory: PrometheusMetricsFactory(registry: registry))
        endpoint = try await server.bind()
        let server = self.server
        serving = Task { try? await server.run() }
    }

    /// A device client proving `keys` (a fresh key pair unless given), pinned to this coordinator.
    func client(_ deviceID: String, keys: CurveKeyPair? = nil, serverKey: [UInt8]? = nil, timeout: Duration = .seconds(5), attempts: Int = 2)
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
        #expect(first.results.map(\.outcome) == [.applied])

        let attacker = try coordinator.client("victim")
        try await connected(attacker) {
            // The same device id, a valid access token of the same account, its own keys.
            let forger = Forger(id: "victim")
            let junk = try forger.item(from: items[1], sequence: 2, transaction: "junk")
            let push = await fleetError { _ = try await attacker.request(SyncPush(deviceID: "victim", items: [junk])) }
            #expect(push?.code == .forbidden, "\(String(describing: push))")
            let results = await fleetError { _ = try await attacker.request(SyncResultsQuery(deviceID: "victim")) }
            #expect(results?.code == .forbidden)
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
        #expect(second.results.map(\.outcome) == [.applied] && second.lastApplied == 2)
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

        // A raw DEALER that completes CURVE but names its connection "tablet-1".
        var options = SocketOptions()
        options.curve = .client(serverKey: coordinator.serverKey, keys: try CurveKeyPair.generate())
        options.routingID = Array("tablet-1".utf8)
        let raw = try await coordinator.loop.makeSocket(.dealer, options: options)
        try await raw.connect(coordinator.endpoint)
        let codec = WireCodec()
        try await raw.send(try codec.encode(Heartbeat(), header: MessageHeader(type: Heartbeat.messageType, id: 7)))
        let reply = try codec.decode(try await firstElement(of: raw.messages, "the refusal"))
        #expect(reply.header.type == FleetError.messageType)
        let error = try codec.decodeBody(FleetError.self, from: reply)
        #expect(error.code == .invalidRequest && error.message.contains("routing id"), "\(error)")
        await raw.close()
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
        let reply = try await registry.enroll(again, credential: .curveKey(newKey.publicKey))
        #expect(reply.lastAppliedSequence == 1, "the device's history stays with it")
        #expect(try await registry.device(id: "lost-tablet")?.curveKey == newKey.publicKey)
        #expect(try await registry.revoke(deviceID: "no-such-device") == false)
    }

    /// One peer floods requests and never reads: only it loses replies; hello, heartbeats and
    /// other devices' work go on (the coordinator used to freeze for everyone).
    @Test(.timeLimit(.minutes(3))) func aPeerThatNeverReadsCostsOnlyItself() async throws {
        let coordinator = try await CurveCoordinator(highWaterMark: 50)
        defer { Task { await coordinator.stop() } }
        var options = SocketOptions()
        options.curve = .client(serverKey: coordinator.serverKey, keys: try CurveKeyPair.generate())
        options.receiveHighWaterMark = 50
        options.receiveBufferLimit = 50
        options.sendHighWaterMark = 100_000
        let flooder = try await coordinator.loop.makeSocket(.dealer, options: options)
        try await flooder.connect(coordinator.endpoint)
        let codec = WireCodec()
        // Far more replies than the server's queue (50), the flooder's (50) and loopback TCP buffers
        // hold. Sent from a task of its own: against a coordinator that stops reading, the sends
        // would wait and this test must fail on its deadline, not hang.
        let flood = Task {
            for id in 1...200_000 {
                try await flooder.send(try codec.encode(Heartbeat(), header: MessageHeader(type: Heartbeat.messageType, id: UInt64(id))))
            }
        }
        defer { flood.cancel() }
        // The flooder never reads. Once its replies are being dropped (a coordinator that waited
        // for it instead froze here for everyone), other devices must still be served.
        try await waitUntil(within: .seconds(90), "replies to the flooder are dropped") {
            coordinator.metricsText().contains("signfleet_replies_dropped_total{reason=\"peer_not_reading\"}")
        }
        let honest = try coordinator.client("tablet-honest", timeout: .seconds(5), attempts: 1)
        try await connected(honest) {
            for _ in 0..<20 { _ = try await honest.request(Heartbeat()) }
            _ = try await honest.request(AccessTokenRequest(email: "user1@demo.example", secret: DemoData.secret))
        }
        await flooder.close()
    }
}

/// Checks `condition` (cheap, side-effect free) every 20 ms until it holds, failing after `within`:
/// for states with no event to wait on (a metric's value). Not a synchronisation sleep: the
/// condition, not the time, decides.
func waitUntil(within timeout: Duration, _ what: String, _ condition: @Sendable () async throws -> Bool) async throws {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if try await condition() { return }
        try await Task.sleep(for: .milliseconds(20))
    }
    Issue.record("timed out after \(timeout) waiting until \(what)")
    throw CancellationError()
}
