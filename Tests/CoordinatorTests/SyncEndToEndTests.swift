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

/// How a ``SyncRig``'s device reaches its coordinator: the same tests run over both.
enum RigTransport: String, CaseIterable, Sendable, CustomTestStringConvertible {
    /// FleetTesting's in-process transport: the coordinator's router without sockets, under CURVE identities.
    case inProcess
    /// A real FleetServer on a free port and a FleetClient over ZeroMQ.
    case zeroMQ

    var testDescription: String { rawValue }
}

/// A coordinator, a device with signed envelopes, and a sync engine between them.
final class SyncRig: Sendable {
    let fixture: IngestFixture
    /// ZeroMQ only: the context, the loop, the server's task and its endpoint.
    let context: ZMQContext?
    let loop: ZMQIOLoop?
    let serving: Task<Void, Never>?
    let endpoint: String
    let node: DeviceNode
    let client: any ClientTransport
    let connection: Task<Void, Never>
    let engine: SyncEngine
    /// The client's clock: it moves only when a test advances it, so no reply times out unless
    /// the test says so (the engine's short back-off runs on the continuous clock).
    let clock = ManualClock()

    init(
        envelopes: Int, transport: RigTransport = .zeroMQ, offlineSigning: Bool = true, batchSize: Int = 2,
        customize: (inout RequestRouter, CoordinatorServices) -> Void = { _, _ in }
    ) async throws {
        fixture = try await IngestFixture(offlineSigning: offlineSigning)
        var router = RequestRouter()
        fixture.services.register(in: &router)
        customize(&router, fixture.services)
        var logger = Logger(label: "sync-rig")
        logger.logLevel = .critical
        (node, _) = try await signedItems(count: envelopes, directory: fixture.temporary.directory, deviceID: "tablet-\(UUID().uuidString.prefix(8))")
        switch transport {
        case .inProcess:
            let serverKeys = try CurveKeyPair.generate()
            let server = InProcessServer(router: router, security: .curve(serverKeys))
            context = nil
            loop = nil
            serving = nil
            endpoint = "inproc"
            client = server.client(
                deviceID: node.deviceId, security: .curve(serverKey: serverKeys.publicKey, keys: node.transportKeys),
                requestTimeout: .seconds(3), maxAttempts: 1, clock: clock)
        case .zeroMQ:
            let context = try ZMQContext()
            let loop = try ZMQIOLoop(context: context, label: "sync-rig")
            let server = FleetServer(configuration: FleetServerConfiguration(endpoint: "tcp://127.0.0.1:*"), router: router, loop: loop, logger: logger)
            endpoint = try await server.bind()
            serving = Task { try? await server.run() }
            self.context = context
            self.loop = loop
            client = FleetClient(
                configuration: FleetClientConfiguration(endpoint: endpoint, deviceID: node.deviceId, requestTimeout: .seconds(3), maxAttempts: 1),
                loop: loop, logger: logger, clock: clock)
        }
        let client = self.client
        connection = Task { await client.run() }
        engine = SyncEngine(
            node: node, client: client, accessToken: fixture.token,
            configuration: SyncEngineConfiguration(batchSize: batchSize, maxAttempts: 5, retryBackoff: Backoff(initial: .milliseconds(10), maximum: .milliseconds(100))),
            logger: logger)
    }

    func tearDown() async {
        try? await node.close()
        connection.cancel()
        await connection.value
        serving?.cancel()
        await serving?.value
        await loop?.shutdown()
        context?.shutdown()
        fixture.temporary.remove()
    }
}

@Suite struct SyncEndToEndTests {
    @Test(arguments: RigTransport.allCases)
    func syncAllPushesEveryEnvelopeInOrderAndKeepsReceipts(transport: RigTransport) async throws {
        let rig = try await SyncRig(envelopes: 5, transport: transport)
        let started = ContinuousClock.now
        let summary = try await rig.engine.syncAll()
        print("sync of 5 items (enroll + 3 pushes) over \(transport): \(started.duration(to: .now))")
        // A push whose reply is late on a loaded machine is pushed again (counted again in
        // `attempted`); the server still holds each envelope once.
        #expect(summary.attempted >= 5 && summary.succeeded == 5 && summary.failed == 0 && summary.remaining == 0, "\(summary)")
        #expect(try await rig.fixture.envelopeCount() == 5)
        let outbox = try await rig.node.outboxItems()
        #expect(outbox.map(\.sequence) == [1, 2, 3, 4, 5])
        for item in outbox {
            #expect(item.payload == nil, "a synced item keeps a receipt, not its payload")
            #expect(item.receipt?.serverEnvelopeId == SyncIngest.serverEnvelopeID(accountID: "acme", transactionID: item.envelope.transactionId))
        }
        // Nothing left: another pass pushes nothing.
        let again = try await rig.engine.syncAll()
        #expect(again.attempted == 0)
        await rig.tearDown()
    }

    @Test(arguments: RigTransport.allCases)
    func aPushAppliedByTheServerWhoseReplyWasLostNeverBecomesADuplicate(transport: RigTransport) async throws {
        // Failpoint: the first push is applied and committed, then its reply is held back
        // until the device has given up on it (its timeout), exactly the SDK users' trap.
        let (release, releaseContinuation) = AsyncStream<Void>.makeStream()
        let (held, heldContinuation) = AsyncStream<Void>.makeStream()
        let calls = Mutex(0)
        let rig = try await SyncRig(envelopes: 3, transport: transport, batchSize: 3) { router, services in
            router.on(SyncPush.self) { [ingest = services.ingest] push, context throws(FleetError) in
                let ack = try await CoordinatorServices.typed { try await ingest.apply(push, credential: context.credential) }
                if calls.withLock({ $0 += 1; return $0 }) == 1 {
                    heldContinuation.yield()
                    for await _ in release { break }
                }
                return ack
            }
        }
        let events = await rig.node.events()
        let sync = Task { try await rig.engine.syncAll() }
        // The push is committed and its reply held: now the device's reply timeout (3 s on its
        // clock) runs out, because the test moves the clock past it.
        _ = try await firstElement(of: held, "the first push to be applied and held")
        try await withDeadline(.seconds(120), "the device to wait for the push's reply") { await rig.clock.sleeping(atLeast: .seconds(3)) }
        await rig.clock.advance(by: .seconds(3))
        _ = try await firstElement(of: events, "the device's timeout") { event in
            if case .syncFailed(let progress) = event { return progress.willRetry }
            return false
        }
        releaseContinuation.yield()
        let summary = try await sync.value
        #expect(summary.remaining == 0)
        #expect(summary.succeeded == 3)
        #expect(calls.withLock { $0 } >= 2, "the push was sent again")
        #expect(try await rig.fixture.envelopeCount() == 3, "applied once, answered twice")
        let receipts = try await rig.node.outboxItems().compactMap(\.receipt)
        #expect(receipts.count == 3)
        #expect(receipts.allSatisfy { $0.outcome == .duplicate }, "the resend was answered from the stored results")
        await rig.tearDown()
    }

    @Test(arguments: RigTransport.allCases)
    func anAccountWithoutOfflineSigningKeepsEverythingQueued(transport: RigTransport) async throws {
        let rig = try await SyncRig(envelopes: 2, transport: transport, offlineSigning: false)
        await expectFleetError(.featureDisabled) { _ = try await rig.engine.syncAll() }
        #expect(try await rig.node.pendingOutboxItems().count == 2)
        #expect(try await rig.fixture.envelopeCount() == 0)
        await rig.tearDown()
    }
}
