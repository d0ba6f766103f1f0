import DeviceNode
import FleetProtocol
import Testing

@testable import LoadGenerator

/// The audit's classifier on hand-made inputs: each anomaly class is found, and only it.
@Suite struct SyncAuditTests {
    static let device = "load-x-0"

    /// A clean device: `count` items acknowledged, each applied once on the coordinator.
    struct Sides {
        var outbox: [AuditOutboxItem]
        var coordinator: [SyncStoredResult]
        var lastApplied: UInt64
        var acknowledgedInRun: [UInt64]

        init(count: UInt64) {
            outbox = (1...count).map {
                AuditOutboxItem(sequence: $0, transactionID: "tx-\($0)", status: .synced, outcome: .applied, serverEnvelopeID: "env-\($0)")
            }
            coordinator = (1...count).map {
                SyncStoredResult(sequence: $0, outcome: .applied, envelopeID: "env-\($0)", transactionID: "tx-\($0)", envelopeSequence: $0)
            }
            lastApplied = count
            acknowledgedInRun = Array(1...count)
        }

        var input: DeviceAuditInput {
            DeviceAuditInput(
                deviceID: SyncAuditTests.device, outbox: outbox, acknowledgedInRun: acknowledgedInRun, coordinator: coordinator,
                coordinatorLastApplied: lastApplied)
        }

        func kinds() -> [AuditAnomaly.Kind] { SyncAudit.classify(input).anomalies.map(\.kind) }
    }

    @Test func aCleanDeviceHasNoAnomalies() {
        let result = SyncAudit.classify(Sides(count: 5).input)
        #expect(result.anomalies.isEmpty, "\(result.anomalies.map(\.line))")
        #expect(result.itemsChecked == 5 && result.acknowledged == 5 && result.rejected == 0)
    }

    @Test func aDuplicateReceiptForAnItemTheCoordinatorAppliedIsARetryNotAnAnomaly() {
        var sides = Sides(count: 3)
        sides.outbox[1].outcome = .duplicate  // the first ack was lost; the resend was answered from the stored result
        #expect(sides.kinds().isEmpty)
    }

    @Test func anAcknowledgedItemTheCoordinatorDoesNotHoldIsLost() throws {
        var sides = Sides(count: 4)
        sides.coordinator.remove(at: 3)
        sides.lastApplied = 3
        let anomalies = SyncAudit.classify(sides.input).anomalies
        #expect(anomalies.map(\.kind) == [.lost])
        let witness = try #require(anomalies.first)
        #expect(witness.device == Self.device && witness.sequence == 4)
        #expect(witness.deviceHolds.contains("tx-4") && witness.deviceHolds.contains("env-4"))
        #expect(witness.coordinatorHolds.contains("no result"))
    }

    @Test func anAppliedResultWhoseEnvelopeIsMissingIsLost() {
        var sides = Sides(count: 3)
        sides.coordinator[2].transactionID = nil
        sides.coordinator[2].envelopeSequence = nil
        #expect(sides.kinds() == [.lost])
    }

    @Test func anItemTheWorkloadSawAcknowledgedButTheStoreHoldsPendingIsLost() {
        var sides = Sides(count: 3)
        sides.outbox[2] = AuditOutboxItem(sequence: 3, transactionID: "tx-3", status: .pending)
        #expect(sides.kinds() == [.lost])
    }

    @Test func aResultForASequenceTheDeviceNeverHeldIsLostOnTheDevice() {
        var sides = Sides(count: 3)
        sides.outbox.removeLast()
        sides.acknowledgedInRun.removeLast()
        #expect(sides.kinds() == [.lost])
    }

    @Test func aPendingItemIsUnsyncedWhetherOrNotTheCoordinatorAppliedIt() {
        var sides = Sides(count: 3)
        sides.outbox[2] = AuditOutboxItem(sequence: 3, transactionID: "tx-3", status: .pending)
        sides.acknowledgedInRun = [1, 2]
        let result = SyncAudit.classify(sides.input)
        #expect(result.anomalies.map(\.kind) == [.unsynced])
        #expect(result.anomalies[0].coordinatorHolds.contains("never recorded the ack"))

        sides.coordinator.removeLast()
        sides.lastApplied = 2
        #expect(sides.kinds() == [.unsynced])
    }

    @Test func anItemTheCoordinatorAnsweredAsADuplicateOfAnotherIsDuplicated() {
        var sides = Sides(count: 3)
        sides.coordinator[2] = SyncStoredResult(
            sequence: 3, outcome: .duplicate, envelopeID: "env-1", transactionID: "tx-1", envelopeSequence: 1,
            reason: "transaction tx-1 was already applied as item 1")
        sides.outbox[2].outcome = .duplicate
        sides.outbox[2].serverEnvelopeID = "env-1"
        #expect(sides.kinds() == [.duplicated])
    }

    @Test func aDuplicateReceiptForAnItemWhoseTransactionWasNeverAppliedIsDuplicated() throws {
        var sides = Sides(count: 3)
        // E.g. a device id reused with a fresh store: the coordinator answers from an old item.
        sides.outbox[2].outcome = .duplicate
        sides.outbox[2].serverEnvelopeID = "env-old"
        sides.coordinator[2] = SyncStoredResult(sequence: 3, outcome: .applied, envelopeID: "env-old", transactionID: "tx-old", envelopeSequence: 3)
        let anomalies = SyncAudit.classify(sides.input).anomalies
        #expect(anomalies.map(\.kind) == [.duplicated])
        #expect(try #require(anomalies.first).deviceHolds.contains("never applied"))
        // The same disagreement with an `applied` receipt is a plain mismatch.
        sides.outbox[2].outcome = .applied
        #expect(sides.kinds() == [.mismatched])
    }

    @Test func oneSequenceAnsweredTwiceIsDuplicated() {
        var sides = Sides(count: 3)
        sides.coordinator.insert(
            SyncStoredResult(sequence: 2, outcome: .applied, envelopeID: "env-9", transactionID: "tx-9", envelopeSequence: 2), at: 2)
        #expect(sides.kinds() == [.duplicated])
    }

    @Test func oneTransactionAppliedAsTwoEnvelopesIsDuplicated() {
        var sides = Sides(count: 3)
        // The device committed the same transaction twice and the coordinator made two envelopes.
        sides.outbox[2].transactionID = "tx-2"
        sides.coordinator[2].transactionID = "tx-2"
        #expect(sides.kinds() == [.duplicated, .duplicated])
        let result = SyncAudit.classify(sides.input)
        #expect(result.anomalies.contains { $0.deviceHolds.contains("committed as #2 and #3") })
        #expect(result.anomalies.contains { $0.coordinatorHolds.contains("applied as #2 and #3") })
    }

    @Test func swappedTransactionsAreReordered() {
        var sides = Sides(count: 4)
        // The coordinator applied the device's items 2 and 3 the other way round.
        sides.coordinator[1] = SyncStoredResult(sequence: 2, outcome: .applied, envelopeID: "env-3", transactionID: "tx-3", envelopeSequence: 2)
        sides.coordinator[2] = SyncStoredResult(sequence: 3, outcome: .applied, envelopeID: "env-2", transactionID: "tx-2", envelopeSequence: 3)
        #expect(sides.kinds() == [.reordered, .reordered])
    }

    @Test func resultsListedOutOfOrderAreReordered() {
        var sides = Sides(count: 3)
        sides.coordinator.swapAt(1, 2)
        #expect(sides.kinds() == [.reordered])
    }

    @Test func aGapBelowTheCoordinatorsLastAppliedIsReordered() throws {
        var sides = Sides(count: 4)
        sides.outbox[2] = AuditOutboxItem(sequence: 3, transactionID: "tx-3", status: .pending)
        sides.acknowledgedInRun = [1, 2, 4]
        sides.coordinator.remove(at: 2)  // 4 applied, 3 never handled
        let anomalies = SyncAudit.classify(sides.input).anomalies
        #expect(anomalies.map(\.kind).sorted { $0.rawValue < $1.rawValue } == [.reordered, .unsynced])
        let gap = try #require(anomalies.first { $0.kind == .reordered })
        #expect(gap.sequence == 3 && gap.coordinatorHolds.contains("no result for #3"))
    }

    @Test func aGapInTheDevicesOutboxIsReordered() {
        var sides = Sides(count: 4)
        sides.outbox.remove(at: 1)
        sides.coordinator.remove(at: 1)
        sides.acknowledgedInRun = [1, 3, 4]
        sides.lastApplied = 4
        // The device skipped #2; so did the coordinator's records below its last applied.
        #expect(sides.kinds() == [.reordered, .reordered])
    }

    @Test func differentEnvelopeOrTransactionIsMismatched() {
        var sides = Sides(count: 3)
        sides.coordinator[1].envelopeID = "env-other"
        #expect(sides.kinds() == [.mismatched])

        sides = Sides(count: 3)
        sides.coordinator[1].transactionID = "tx-unknown"
        #expect(sides.kinds() == [.mismatched])

        sides = Sides(count: 3)
        sides.coordinator[1] = SyncStoredResult(sequence: 2, outcome: .rejected, reason: "bad signature")
        #expect(sides.kinds() == [.mismatched])
    }

    @Test func aRejectionBothSidesAgreeOnIsNoAnomaly() {
        var sides = Sides(count: 3)
        sides.outbox[1] = AuditOutboxItem(sequence: 2, transactionID: "tx-2", status: .rejected, outcome: .rejected)
        sides.coordinator[1] = SyncStoredResult(sequence: 2, outcome: .rejected, reason: "bad signature")
        sides.acknowledgedInRun = [1, 3]
        let result = SyncAudit.classify(sides.input)
        #expect(result.anomalies.isEmpty && result.rejected == 1 && result.acknowledged == 2)
    }

    @Test func hugeBogusSequencesAreReportedWithoutWalkingTheRange() {
        var sides = Sides(count: 2)
        sides.lastApplied = UInt64.max
        sides.coordinator.append(SyncStoredResult(sequence: UInt64.max, outcome: .applied, envelopeID: "e", transactionID: "t"))
        let kinds = SyncAudit.classify(sides.input).anomalies.map(\.kind)
        // The result for a sequence the device never assigned, and the gap up to it.
        #expect(kinds.sorted { $0.rawValue < $1.rawValue } == [.lost, .reordered])
    }

    @Test func theRunSummaryCountsEveryClassAndFailsOnlyOnFailures() {
        var clean = Sides(count: 3)
        clean.outbox[2] = AuditOutboxItem(sequence: 3, transactionID: "tx-3", status: .pending)
        clean.acknowledgedInRun = [1, 2]
        var lost = Sides(count: 2)
        lost.coordinator.removeLast()
        lost.lastApplied = 1
        let results = [SyncAudit.classify(clean.input), SyncAudit.classify(lost.input)]

        let cutShort = LoadAudit(results: [results[0]], errors: [], failedCeremonies: 1, seconds: 0.1)
        #expect(cutShort.passed && cutShort.unsynced == 1 && cutShort.itemsChecked == 3)
        #expect(cutShort.lines.contains { $0.contains("not a failure") })
        let unexplained = LoadAudit(results: [results[0]], errors: [], failedCeremonies: 0, seconds: 0.1)
        #expect(!unexplained.passed)

        let failed = LoadAudit(results: results, errors: [], failedCeremonies: 1, seconds: 0.1)
        #expect(!failed.passed)
        #expect(failed.counts == ["lost": 1, "duplicated": 0, "reordered": 0, "mismatched": 0, "unsynced": 1])
        #expect(failed.witnesses.first?.kind == .lost, "failures come first among the witnesses")
        #expect(failed.lines[0].hasPrefix("audit FAIL  2 devices, 5 items checked"))

        let unreachable = LoadAudit(
            results: [results[0]], errors: [LoadAudit.DeviceError(device: "device 1", error: "timeout")], failedCeremonies: 1, seconds: 1)
        #expect(!unreachable.passed)
    }
}
