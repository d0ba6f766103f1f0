import DeviceNode
import FleetProtocol
import FleetZeroMQTransport
import FleetTesting
import Foundation
import SyncContract
import Logging
import Testing
import ZeroMQ

@testable import Coordinator

/// `sync.results`: a device reads back what the coordinator recorded for its items.
@Suite struct SyncResultsTests {
    @Test func aDevicePagesThroughItsOwnResultsOverZeroMQWithinTheBounds() async throws {
        let rig = try await SyncRig(envelopes: 5)
        _ = try await rig.engine.syncAll()
        let outbox = try await rig.node.outboxItems()
        let deviceID = rig.node.deviceId

        var pages: [SyncResultsReply] = []
        var after: UInt64 = 0
        while true {
            let page = try await rig.client.request(SyncResultsQuery(deviceID: deviceID, after: after, limit: 2))
            pages.append(page)
            guard let next = page.nextAfter else { break }
            after = next
        }
        #expect(pages.map { $0.results.map(\.sequence) } == [[1, 2], [3, 4], [5]])
        #expect(pages.map(\.nextAfter) == [2, 4, nil])
        #expect(pages.allSatisfy { $0.lastApplied == 5 })
        let results = pages.flatMap(\.results)
        for (item, result) in zip(outbox, results) {
            #expect(result.outcome == .applied)
            #expect(result.envelopeID == item.receipt?.serverEnvelopeId && result.envelopeID != nil)
            #expect(result.transactionID == item.envelope.transactionId)
            #expect(result.envelopeSequence == item.sequence)
        }

        // Beyond the last result: an empty last page.
        let beyond = try await rig.client.request(SyncResultsQuery(deviceID: deviceID, after: 5))
        #expect(beyond.results.isEmpty && beyond.nextAfter == nil && beyond.lastApplied == 5)
        let maximal = try await rig.client.request(SyncResultsQuery(deviceID: deviceID, after: UInt64.max))
        #expect(maximal.results.isEmpty && maximal.nextAfter == nil)

        // Page size bounds.
        let full = try await rig.client.request(SyncResultsQuery(deviceID: deviceID, limit: SyncResultsQuery.maxLimit))
        #expect(full.results.count == 5 && full.nextAfter == nil)
        for limit in [0, SyncResultsQuery.maxLimit + 1] {
            let error = await fleetError { _ = try await rig.client.request(SyncResultsQuery(deviceID: deviceID, limit: limit)) }
            #expect(error?.code == .invalidRequest, "limit \(limit): \(String(describing: error))")
            #expect(error?.message.contains("1 to \(SyncResultsQuery.maxLimit)") == true)
        }

        // Another device's results are forbidden, even for an enrolled device.
        let forbidden = await fleetError { _ = try await rig.client.request(SyncResultsQuery(deviceID: "tablet-other")) }
        #expect(forbidden?.code == .forbidden)

        // A device that never enrolled is not authenticated.
        var logger = Logger(label: "sync-results")
        logger.logLevel = .critical
        let stranger = FleetClient(
            configuration: FleetClientConfiguration(endpoint: rig.endpoint, deviceID: "tablet-stranger", requestTimeout: .seconds(5), maxAttempts: 1),
            loop: try #require(rig.loop), logger: logger, clock: ManualClock())
        let connection = Task { await stranger.run() }
        let unauthenticated = await fleetError { _ = try await stranger.request(SyncResultsQuery(deviceID: "tablet-stranger")) }
        #expect(unauthenticated?.code == .unauthenticated)
        let impersonating = await fleetError { _ = try await stranger.request(SyncResultsQuery(deviceID: deviceID)) }
        #expect(impersonating?.code == .forbidden)
        connection.cancel()
        await connection.value
        await rig.tearDown()
    }

    @Test func storedRejectionsAndDuplicatesAreReturnedAsRecorded() async throws {
        let fixture = try await IngestFixture()
        defer { fixture.temporary.remove() }
        let (node, base) = try await signedItems(count: 1, directory: fixture.temporary.directory)
        let forger = Forger(id: "forged-results")
        try await fixture.enroll(forger.id, key: forger.publicKey)
        // Signed by the device but invalid (its ISO record does not match its binding).
        let rejected = try forger.item(from: base[0], sequence: 2, transaction: "second") { payload in
            payload.signatures[0].isoRecord[40] ^= 0x01
        }
        let items = [
            try forger.item(from: base[0], sequence: 1, transaction: "first"), rejected,
            try forger.item(from: base[0], sequence: 3, transaction: "first"),
        ]
        let ack = try await fixture.push(forger.id, items)
        #expect(ack.results.map(\.outcome) == [.applied, .rejected, .duplicate])

        let reply = try await fixture.services.ingest.results(SyncResultsQuery(deviceID: forger.id), routingID: forger.id)
        #expect(reply.lastApplied == 3 && reply.nextAfter == nil)
        #expect(reply.results.map(\.outcome) == [.applied, .rejected, .duplicate])
        let envelope = SyncIngest.serverEnvelopeID(accountID: "acme", transactionID: "first")
        #expect(reply.results[0] == SyncStoredResult(sequence: 1, outcome: .applied, envelopeID: envelope, transactionID: "first", envelopeSequence: 1))
        #expect(reply.results[1].envelopeID == nil && reply.results[1].transactionID == nil && reply.results[1].reason != nil)
        // The duplicate names the envelope item 1 made.
        #expect(reply.results[2].envelopeID == envelope && reply.results[2].transactionID == "first" && reply.results[2].envelopeSequence == 1)
        try await node.close()
    }
}
