import DeviceNode
import FleetProtocol
import FleetTesting
import Foundation
import Logging
import Synchronization
import Testing
import ZeroMQ

@testable import Coordinator

/// A coordinator on a free port, a device with signed envelopes, and a sync engine between them.
final class SyncRig: Sendable {
    let fixture: IngestFixture
    let context: ZMQContext
    let loop: ZMQIOLoop
    let serving: Task<Void, Never>
    let endpoint: String
    let node: DeviceNode
    let client: FleetClient
    let connection: Task<Void, Never>
    let engine: SyncEngine

    init(envelopes: Int, offlineSigning: Bool = true, batchSize: Int = 2, customize: (inout RequestRouter, CoordinatorServices) -> Void = { _, _ in }) async throws {
        fixture = try await IngestFixture(offlineSigning: offlineSigning)
        var router = RequestRouter()
        fixture.services.register(in: &router)
        customize(&router, fixture.services)
        var logger = Logger(label: "sync-rig")
        logger.logLevel = .critical
        context = try ZMQContext()
        loop = try ZMQIOLoop(context: context, label: "sync-rig")
        let server = FleetServer(configuration: FleetServerConfiguration(endpoint: "tcp://127.0.0.1:*"), router: router, loop: loop, logger: logger)
        endpoint = try await server.bind()
        serving = Task { try? await server.run() }
        (node, _) = try await signedItems(count: envelopes, directory: fixture.temporary.directory, deviceID: "tablet-\(UUID().uuidString.prefix(8))")
        // 2 s, not less: with the whole suite running in parallel (fleets, Chromium) a first
        // request can take longer than a few hundred milliseconds, and one attempt only.
        client = FleetClient(
            configuration: FleetClientConfiguration(endpoint: endpoint, deviceID: node.deviceId, requestTimeout: .seconds(3), maxAttempts: 1),
            loop: loop, logger: logger)
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
        serving.cancel()
        await serving.value
        await loop.shutdown()
        context.shutdown()
        fixture.temporary.remove()
    }
}

@Suite struct SyncEndToEndTests {
    @Test func syncAllPushesEveryEnvelopeInOrderAndKeepsReceipts() async throws {
        let rig = try await SyncRig(envelopes: 5)
        let summary = try await rig.engine.syncAll()
        #expect(summary.attempted == 5 && summary.succeeded == 5 && summary.failed == 0 && summary.remaining == 0)
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

    @Test func aPushAppliedByTheServerWhoseReplyWasLostNeverBecomesADuplicate() async throws {
        // Failpoint: the first push is applied and committed, then its reply is held back
        // until the device has given up on it (its timeout), exactly the SDK users' trap.
        let (release, releaseContinuation) = AsyncStream<Void>.makeStream()
        let calls = Mutex(0)
        let rig = try await SyncRig(envelopes: 3, batchSize: 3) { router, services in
            router.on(SyncPush.self) { [ingest = services.ingest] push, context throws(FleetError) in
                let ack = try await CoordinatorServices.typed { try await ingest.apply(push, routingID: context.peerName) }
                if calls.withLock({ $0 += 1; return $0 }) == 1 {
                    for await _ in release { break }
                }
                return ack
            }
        }
        let events = await rig.node.events()
        let sync = Task { try await rig.engine.syncAll() }
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

    @Test func anAccountWithoutOfflineSigningKeepsEverythingQueued() async throws {
        let rig = try await SyncRig(envelopes: 2, offlineSigning: false)
        await expectFleetError(.featureDisabled) { _ = try await rig.engine.syncAll() }
        #expect(try await rig.node.pendingOutboxItems().count == 2)
        #expect(try await rig.fixture.envelopeCount() == 0)
        await rig.tearDown()
    }
}
