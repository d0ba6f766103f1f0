import FleetTesting
import Crypto
import DeviceNode
import FleetProtocol
import Foundation
import GRDB
import SignatureCapture
import Testing

@testable import Coordinator

/// Seeded random interleavings of pushes, resends, dropped replies, coordinator
/// restarts and device crashes must end with every envelope applied exactly once,
/// in each device's order. The seed is printed; `SIGNFLEET_SEED` replays a run.
@Suite struct SyncPropertyTests {
    /// What a simulated device remembers: only what an acknowledgement settled survives a crash.
    struct Device {
        let forger: Forger
        let items: [SyncItem]
        /// Sequences settled by an acknowledgement (persisted on a real device).
        var settled: Set<UInt64> = []
        /// Where the device's next push starts (in memory; reset by a crash).
        var cursor: UInt64 = 1
    }


    @Test func randomInterleavingsEndWithEveryEnvelopeAppliedOnceInOrder() async throws {
        let seed = testSeed("SyncPropertyTests")
        print("sync property seed \(seed) (replay with SIGNFLEET_SEED=\(seed))")
        var random = SeededGenerator(seed: seed)

        let fixture = try await IngestFixture()
        defer { fixture.temporary.remove() }
        let (node, base) = try await signedItems(count: 1, directory: fixture.temporary.directory)
        try await node.close()
        let perDevice = 12
        var devices: [Device] = []
        for index in 0..<3 {
            let forger = Forger(id: "prop-\(index)")
            try await fixture.enroll(forger.id, key: forger.publicKey)
            let items = try (1...perDevice).map { try forger.item(from: base[0], sequence: UInt64($0), transaction: "\(forger.id)-t\($0)") }
            devices.append(Device(forger: forger, items: items))
        }

        var services = fixture.services
        var steps = 0
        var restarts = 0
        var dropped = 0
        while devices.contains(where: { $0.settled.count < perDevice }) {
            steps += 1
            try #require(steps < 5_000, "no convergence after 5,000 steps (seed \(seed))")
            let index = random.below(devices.count)
            // Early in every schedule, at least one restart and one lost reply happen for sure.
            let forceRestart = restarts == 0 && steps == 4
            let forceDrop = dropped == 0 && steps > 6
            switch forceRestart ? 0 : random.below(10) {
            case 0:
                // The coordinator restarts: a new store handle on the same file (committed state only).
                services = CoordinatorServices(store: try CoordinatorStore(path: fixture.temporary.store.path))
                restarts += 1
            case 1:
                // The device crashes: it forgets its cursor and starts again from its first unsettled item.
                devices[index].cursor = (1...UInt64(perDevice)).first { !devices[index].settled.contains($0) } ?? UInt64(perDevice) + 1
            default:
                // A push: from the cursor, sometimes a little earlier (a resend) or later (a gap),
                // sometimes shuffled; its reply is sometimes lost.
                var start = Int(devices[index].cursor) + (random.below(4) == 0 ? random.below(5) - 2 : 0)
                start = min(max(1, start), perDevice)
                let count = 1 + random.below(4)
                var batch = Array(devices[index].items[(start - 1)..<min(perDevice, start - 1 + count)])
                if random.below(6) == 0 { batch.shuffle(using: &random) }
                let ack = try await services.ingest.apply(
                    SyncPush(deviceID: devices[index].forger.id, items: batch), routingID: devices[index].forger.id)
                if forceDrop || random.below(4) == 0 {
                    dropped += 1
                    continue  // the reply never arrived
                }
                for result in ack.results {
                    #expect(result.outcome != .rejected, "a valid item was rejected: \(result) (seed \(seed))")
                    devices[index].settled.insert(result.sequence)
                }
                devices[index].cursor = ack.status == .gap ? (ack.expectedSequence ?? 1) : ack.lastApplied + 1
            }
        }

        let summaries = try await services.ingest.store.envelopeSummaries()
        #expect(summaries.count == 3)
        for summary in summaries {
            #expect(summary.sequences == (1...UInt64(perDevice)).map { $0 }, "\(summary.deviceID) (seed \(seed))")
            #expect(summary.lastAppliedSequence == UInt64(perDevice))
        }
        let transactions = try await fixture.temporary.store.database.read { db in
            try String.fetchAll(db, sql: "SELECT transactionID FROM envelope ORDER BY deviceID, sequence")
        }
        #expect(transactions == devices.flatMap { device in (1...perDevice).map { "\(device.forger.id)-t\($0)" } })
        print("converged in \(steps) steps with \(restarts) coordinator restarts and \(dropped) lost replies")
        #expect(restarts > 0 && dropped > 0, "the schedule exercised restarts and lost replies (seed \(seed))")
    }
}
