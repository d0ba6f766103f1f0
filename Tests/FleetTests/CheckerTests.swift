import Crypto
import DeviceNode
import Foundation
import SyncContract
import GRDB
import Testing

@testable import Coordinator
@testable import Fleet

/// The checker on a real run, clean and with one anomaly injected on purpose into a copy:
/// each injected fault is reported with a witness naming the right device and transaction.
@Suite struct CheckerTests {
    static func serverID(_ transaction: String) -> String {
        SyncIngest.serverEnvelopeID(accountID: "acme", transactionID: transaction)
    }

    /// Every text of a witness, to look for the names it must show.
    static func witnessText(_ anomaly: CheckAnomaly) -> String {
        (anomaly.witness.events.map(CheckReport.describe) + anomaly.witness.rows.map(CheckReport.describe)).joined(separator: "\n")
    }

    @Test func aCleanRunIsValid() async throws {
        let fixture = try await CheckerRun.make()
        defer { fixture.remove() }
        let report = try await Checker.check(run: fixture.run)
        #expect(report.verdict == .valid, "\(report.summary())")
        #expect(report.anomalies.isEmpty)
        #expect(report.counts.devices == 2)
        #expect(report.counts.signed == 6 && report.counts.acknowledged == 6 && report.counts.pending == 0)
        #expect(report.counts.serverEnvelopes == 6)
        #expect(report.counts.perDevice["a-1"]?.onServer == 3)
        #expect(report.counts.perDevice["b-1"]?.historySigned == 3 && report.counts.perDevice["b-1"]?.historySynced == 3)
        #expect(report.counts.serverRecipients == 12)
    }

    /// Envelopes created over the REST API belong to the coordinator's REST sender, which has no
    /// device store: they are judged by the server-side rules (a note counts them), not reported as
    /// a device without a store; one whose signature was tampered with is still `invalid-signature`.
    @Test func envelopesCreatedOverRESTAreCheckedByTheServerSideRules() async throws {
        let fixture = try await CheckerRun.make(rest: 2)
        defer { fixture.remove() }
        let report = try await Checker.check(run: fixture.run)
        #expect(report.verdict == .valid, "\(report.summary())")
        #expect(report.counts.serverEnvelopes == 8 && report.counts.perDevice[RESTRoutes.senderDeviceID]?.onServer == 2)
        #expect(report.notes.contains { $0.hasPrefix("2 envelopes created over the REST API") }, "\(report.notes)")

        let broken = try fixture.copy()
        try CheckerRun.edit(broken.coordinatorStore) { db in
            let signature = Data(repeating: 7, count: 64)
            try db.execute(sql: "UPDATE envelope SET deviceSignature = ? WHERE transactionID = ?", arguments: [signature, "rest-tx-2"])
        }
        let tampered = try await Checker.check(run: broken)
        #expect(tampered.verdict == .invalid && tampered.anomalies.map(\.kind) == [.invalidSignature], "\(tampered.summary())")
        #expect(tampered.anomalies.first?.device == RESTRoutes.senderDeviceID)
    }

    @Test func aDeletedServerRowIsLost() async throws {
        let fixture = try await CheckerRun.make()
        defer { fixture.remove() }
        let broken = try fixture.copy()
        let transaction = try #require(fixture.transactions["a-1"]?[1])
        try CheckerRun.edit(broken.coordinatorStore) { db in
            try db.execute(sql: "DELETE FROM envelope WHERE transactionID = ?", arguments: [transaction])
        }
        let report = try await Checker.check(run: broken)
        #expect(report.verdict == .invalid)
        #expect(report.anomalies.map(\.kind) == [.lost], "one fault, reported once: \(report.summary())")
        let lost = try #require(report.anomalies(.lost).first)
        #expect(lost.device == "a-1" && lost.transaction == transaction && lost.sequence == 2)
        let witness = Self.witnessText(lost)
        #expect(witness.contains("outbox") && witness.contains("status=synced"), "the device's receipt: \(witness)")
        #expect(witness.contains("ok sync") && witness.contains("transaction=\(transaction)"), "the history's ok sync: \(witness)")
        #expect(witness.contains("no row with deviceID=a-1 transactionID=\(transaction)"), "the missing server row: \(witness)")
        #expect(report.verdict.exitCode == 1)
    }

    /// A hand-started run has no history. An item erased from the coordinator and from the device's
    /// outbox (its last item: nothing later shows the hole) is still in the device's journal, which is
    /// then the evidence: lost. An item erased from the device only, never pushed, is device-data-loss.
    @Test func withoutAHistoryTheDeviceJournalIsTheEvidence() async throws {
        let fixture = try await CheckerRun.make(unsynced: ["b-1": 1])
        defer { fixture.remove() }
        let broken = try fixture.copy()
        try FileManager.default.removeItem(atPath: broken.historyDirectory)
        try? FileManager.default.removeItem(atPath: broken.historyFile)
        let synced = try #require(fixture.transactions["a-1"]?.last)
        let pending = try #require(fixture.transactions["b-1"]?.last)
        try CheckerRun.edit(broken.coordinatorStore) { db in
            try db.execute(sql: "DELETE FROM envelopeRecipient WHERE envelopeID IN (SELECT id FROM envelope WHERE transactionID = ?)", arguments: [synced])
            try db.execute(sql: "DELETE FROM envelope WHERE transactionID = ?", arguments: [synced])
            try db.execute(sql: "DELETE FROM syncResult WHERE deviceID = 'a-1' AND sequence = 3")
            try db.execute(sql: "UPDATE device SET lastAppliedSequence = 2 WHERE id = 'a-1'")
        }
        try CheckerRun.edit(broken.deviceStore(device: "a-1")) { db in
            try db.execute(sql: "DELETE FROM outbox WHERE transactionId = ?", arguments: [synced])
        }
        try CheckerRun.edit(broken.deviceStore(device: "b-1")) { db in
            try db.execute(sql: "DELETE FROM outbox WHERE transactionId = ?", arguments: [pending])
            try db.execute(sql: "DELETE FROM envelopes WHERE transactionId = ?", arguments: [pending])
        }
        let report = try await Checker.check(run: broken)
        #expect(report.verdict == .invalid, "\(report.summary())")
        let lost = try #require(report.anomalies(.lost).first)
        #expect(lost.device == "a-1" && lost.transaction == synced && lost.sequence == 3)
        #expect(Self.witnessText(lost).contains("kind=synced"), "the journal entry: \(Self.witnessText(lost))")
        let gone = try #require(report.anomalies(.deviceDataLoss).first { $0.transaction == pending })
        #expect(gone.device == "b-1" && gone.message.contains("as queued"), "\(gone.message)")
        #expect(report.anomalies.count == 2, "\(report.summary())")
    }

    @Test func aDuplicatedServerRowIsADuplicate() async throws {
        let fixture = try await CheckerRun.make()
        defer { fixture.remove() }
        let broken = try fixture.copy()
        let transaction = try #require(fixture.transactions["b-1"]?[0])
        try CheckerRun.edit(broken.coordinatorStore) { db in
            try CheckerRun.duplicateEnvelope(db, id: Self.serverID(transaction), as: "env-duplicate")
        }
        let report = try await Checker.check(run: broken)
        #expect(report.verdict == .invalid)
        #expect(report.anomalies.map(\.kind) == [.duplicate], "\(report.summary())")
        let duplicate = try #require(report.anomalies(.duplicate).first)
        #expect(duplicate.device == "b-1" && duplicate.transaction == transaction && duplicate.sequence == 1)
        #expect(duplicate.witness.rows.map { $0.fields["id"] } == [Self.serverID(transaction), "env-duplicate"])
    }

    /// What a coordinator that answered `duplicate` by transaction id alone left behind (issue #31):
    /// a device whose store went back in time (item 1 gone from it) signed a new envelope under an
    /// id it had used (item 3 as `a-1-tx-1`); the server stored nothing for it and gave it a receipt
    /// naming item 1's envelope. The new envelope is not on the server: `lost`, not an order
    /// violation (item 1, on the server and no longer on the device, is device-data-loss).
    @Test func anEnvelopeUnderAReusedTransactionIdThatTheServerDoesNotHoldIsLost() async throws {
        let fixture = try await CheckerRun.make()
        defer { fixture.remove() }
        let broken = try fixture.copy()
        let first = try #require(fixture.transactions["a-1"]?[0])
        let third = try #require(fixture.transactions["a-1"]?[2])
        var firstEnvelope = ""
        try CheckerRun.edit(broken.coordinatorStore) { db in
            firstEnvelope = try #require(try String.fetchOne(db, sql: "SELECT id FROM envelope WHERE transactionID = ?", arguments: [first]))
            let thirdEnvelope = try #require(try String.fetchOne(db, sql: "SELECT id FROM envelope WHERE transactionID = ?", arguments: [third]))
            try db.execute(sql: "DELETE FROM envelopeRecipient WHERE envelopeID = ?", arguments: [thirdEnvelope])
            try db.execute(sql: "DELETE FROM envelope WHERE id = ?", arguments: [thirdEnvelope])
            try db.execute(
                sql: "UPDATE syncResult SET outcome = 'duplicate', envelopeID = ? WHERE deviceID = 'a-1' AND sequence = 3", arguments: [firstEnvelope])
        }
        try CheckerRun.edit(broken.deviceStore(device: "a-1")) { db in
            // The store went back: item 1 is gone from it, and its id was made again for item 3.
            try db.execute(sql: "DELETE FROM outbox WHERE sequence = 1")
            try db.execute(sql: "DELETE FROM journal WHERE transactionId = ?", arguments: [first])
            try db.execute(
                sql: "UPDATE outbox SET transactionId = ?, serverEnvelopeId = ?, outcome = 'duplicate' WHERE sequence = 3", arguments: [first, firstEnvelope])
            try db.execute(sql: "UPDATE journal SET transactionId = ? WHERE transactionId = ?", arguments: [first, third])
        }
        let historyFile = broken.historyFile(process: "node-a-1")
        let history = try String(contentsOfFile: historyFile, encoding: .utf8)
        try history.replacingOccurrences(of: "\"\(third)\"", with: "\"\(first)\"").write(toFile: historyFile, atomically: true, encoding: .utf8)

        let report = try await Checker.check(run: broken)
        #expect(report.verdict == .invalid)
        #expect(report.anomalies(.orderViolation).isEmpty, "\(report.summary())")
        let lost = try #require(report.anomalies(.lost).first, "\(report.summary())")
        #expect(lost.device == "a-1" && lost.transaction == first && lost.sequence == 3, "\(report.summary())")
        #expect(lost.message.contains("other envelope"), "the witness names the envelope that holds the id: \(lost.message)")
    }

    @Test func swappedIngestOrderIsAnOrderViolation() async throws {
        let fixture = try await CheckerRun.make()
        defer { fixture.remove() }
        let broken = try fixture.copy()
        let first = try #require(fixture.transactions["a-1"]?[0])
        let second = try #require(fixture.transactions["a-1"]?[1])
        try CheckerRun.edit(broken.coordinatorStore) { db in
            // The server took item 2 before item 1: swap the two rows' ingest positions.
            let a = try #require(try Int64.fetchOne(db, sql: "SELECT rowid FROM envelope WHERE transactionID = ?", arguments: [first]))
            let b = try #require(try Int64.fetchOne(db, sql: "SELECT rowid FROM envelope WHERE transactionID = ?", arguments: [second]))
            try db.execute(sql: "UPDATE envelope SET rowid = -1 WHERE rowid = ?", arguments: [a])
            try db.execute(sql: "UPDATE envelope SET rowid = ? WHERE rowid = ?", arguments: [a, b])
            try db.execute(sql: "UPDATE envelope SET rowid = ? WHERE rowid = -1", arguments: [b])
        }
        let report = try await Checker.check(run: broken)
        #expect(report.verdict == .invalid)
        #expect(report.anomalies.map(\.kind) == [.orderViolation], "\(report.summary())")
        let violation = try #require(report.anomalies(.orderViolation).first)
        #expect(violation.device == "a-1" && violation.transaction == first && violation.sequence == 1)
        #expect(violation.witness.rows.map { $0.fields["transactionID"] } == [second, first], "item 2, then item 1")
    }

    @Test func aCorruptedSignatureIsAnInvalidSignature() async throws {
        let fixture = try await CheckerRun.make()
        defer { fixture.remove() }
        let broken = try fixture.copy()
        let transaction = try #require(fixture.transactions["b-1"]?[2])
        try CheckerRun.edit(broken.coordinatorStore) { db in
            var signature = try #require(try Data.fetchOne(db, sql: "SELECT deviceSignature FROM envelope WHERE transactionID = ?", arguments: [transaction]))
            signature[10] ^= 0x01
            try db.execute(sql: "UPDATE envelope SET deviceSignature = ? WHERE transactionID = ?", arguments: [signature, transaction])
        }
        let report = try await Checker.check(run: broken)
        #expect(report.verdict == .invalid)
        #expect(report.anomalies.map(\.kind) == [.invalidSignature], "\(report.summary())")
        let invalid = try #require(report.anomalies.first)
        #expect(invalid.device == "b-1" && invalid.transaction == transaction && invalid.serverEnvelope == Self.serverID(transaction))
        #expect(invalid.message.contains("signature does not verify"), "\(invalid.message)")
    }

    /// The digest stored with a sync result decides whether a later push of the item is a resend
    /// or a conflict: one overwritten (while every envelope still verifies) is found, naming the
    /// result and the item the device signed.
    @Test func aSyncResultsStoredDigestMustBeThePayloadTheDeviceSigned() async throws {
        let fixture = try await CheckerRun.make()
        defer { fixture.remove() }
        let broken = try fixture.copy()
        try CheckerRun.edit(broken.coordinatorStore) { db in
            try db.execute(sql: "UPDATE syncResult SET payloadSHA256 = ? WHERE deviceID = 'a-1' AND sequence = 2", arguments: [Data(repeating: 7, count: 32)])
        }
        let report = try await Checker.check(run: broken)
        #expect(report.verdict == .invalid)
        #expect(report.anomalies.map(\.kind) == [.invalidSignature], "\(report.summary())")
        let anomaly = try #require(report.anomalies.first)
        #expect(anomaly.device == "a-1" && anomaly.sequence == 2)
        #expect(anomaly.message.contains("stores payload digest 0707070707070707…"), "\(anomaly.message)")
        #expect(anomaly.witness.rows.compactMap { $0.fields["payloadSHA256"] }.count == 2)
        // The untouched run is valid: every stored digest is its item's.
        #expect(try await Checker.check(run: fixture.run).verdict == .valid)
    }

    @Test func aPayloadChangedInPlaceFailsItsSignature() async throws {
        let fixture = try await CheckerRun.make()
        defer { fixture.remove() }
        let broken = try fixture.copy()
        let transaction = try #require(fixture.transactions["a-1"]?[2])
        try CheckerRun.edit(broken.coordinatorStore) { db in
            var payload = try #require(try Data.fetchOne(db, sql: "SELECT payload FROM envelope WHERE transactionID = ?", arguments: [transaction]))
            payload[payload.count - 1] ^= 0x01
            try db.execute(sql: "UPDATE envelope SET payload = ? WHERE transactionID = ?", arguments: [payload, transaction])
        }
        let report = try await Checker.check(run: broken)
        #expect(report.anomalies.map(\.kind) == [.invalidSignature], "\(report.summary())")
        #expect(report.anomalies.first?.transaction == transaction)
    }

    @Test func aPayloadReSignedWithTheDeviceKeyIsNotTheOneTheDeviceSigned() async throws {
        // Someone holding the device's key signed a different payload for the same item: every
        // signature verifies, but the device's outbox kept the SHA-256 of what it really signed.
        let fixture = try await CheckerRun.make()
        defer { fixture.remove() }
        let broken = try fixture.copy()
        let transaction = try #require(fixture.transactions["b-1"]?[0])
        let keyQueue = try DatabaseQueue(path: broken.deviceStore(device: "b-1"))
        let storedKey: Data? = try await keyQueue.read { db in try Data.fetchOne(db, sql: "SELECT privateKey FROM device WHERE id = 1") }
        try keyQueue.close()
        let keyBytes = try #require(storedKey)
        let key = try Curve25519.Signing.PrivateKey(rawRepresentation: keyBytes)
        try CheckerRun.edit(broken.coordinatorStore) { db in
            let stored = try #require(try Data.fetchOne(db, sql: "SELECT payload FROM envelope WHERE transactionID = ?", arguments: [transaction]))
            var payload = try SyncPayload(canonicalBytes: Array(stored))
            payload.name = "Something else entirely"
            let bytes = try payload.canonicalBytes()
            let signature = try key.signature(for: bytes)
            try db.execute(sql: "UPDATE envelope SET payload = ?, deviceSignature = ? WHERE transactionID = ?",
                           arguments: [Data(bytes), signature, transaction])
        }
        let report = try await Checker.check(run: broken)
        #expect(report.anomalies.map(\.kind) == [.invalidSignature], "\(report.summary())")
        let invalid = try #require(report.anomalies.first)
        #expect(invalid.device == "b-1" && invalid.transaction == transaction)
        #expect(invalid.message.contains("not the one device b-1 signed"), "\(invalid.message)")
        #expect(invalid.witness.rows.compactMap { $0.fields["payloadSHA256"] }.count == 2)
    }

    @Test func aLaterRoutingOrderSignedBeforeAnEarlierOneIsARoutingViolation() async throws {
        let fixture = try await CheckerRun.make()
        defer { fixture.remove() }
        let broken = try fixture.copy()
        let transaction = try #require(fixture.transactions["a-1"]?[0])
        let id = Self.serverID(transaction)
        try CheckerRun.edit(broken.coordinatorStore) { db in
            // The remote signer (order 2) signed while the in-person signer (order 1) is still sent.
            try db.execute(sql: "UPDATE envelopeRecipient SET status = 'sent' WHERE envelopeID = ? AND recipientID = '1'", arguments: [id])
            try db.execute(sql: "UPDATE envelopeRecipient SET status = 'signed' WHERE envelopeID = ? AND recipientID = 'r1'", arguments: [id])
        }
        let report = try await Checker.check(run: broken)
        #expect(report.verdict == .invalid)
        #expect(report.anomalies.map(\.kind) == [.routingViolation], "\(report.summary())")
        let violation = try #require(report.anomalies.first)
        #expect(violation.device == "a-1" && violation.transaction == transaction && violation.serverEnvelope == id)
        #expect(violation.witness.rows.compactMap { $0.fields["recipientID"] } == ["1", "r1"])
    }

    @Test func aLaterOrderFinishingEarlierIsARoutingViolation() {
        let earlier = Date(timeIntervalSince1970: 1_000)
        let recipients = [
            ServerSnapshot.Recipient(envelopeID: "e", recipientID: "1", type: "inPersonSigner", routingOrder: 1, status: "signed",
                                     statusChangedAt: earlier.addingTimeInterval(5)),
            ServerSnapshot.Recipient(envelopeID: "e", recipientID: "2", type: "signer", routingOrder: 2, status: "signed", statusChangedAt: earlier),
        ]
        let violation = CheckerAnalysis.routingViolation(status: "completed", recipients: recipients)
        #expect(violation?.recipients.map(\.recipientID) == ["1", "2"])
        // In order, and a carbon copy completed with the envelope, is fine.
        let fine = [
            ServerSnapshot.Recipient(envelopeID: "e", recipientID: "1", type: "signer", routingOrder: 1, status: "signed", statusChangedAt: earlier),
            ServerSnapshot.Recipient(envelopeID: "e", recipientID: "2", type: "carbonCopy", routingOrder: 1, status: "completed", statusChangedAt: nil),
            ServerSnapshot.Recipient(envelopeID: "e", recipientID: "3", type: "signer", routingOrder: 2, status: "sent", statusChangedAt: earlier),
            ServerSnapshot.Recipient(envelopeID: "e", recipientID: "4", type: "signer", routingOrder: 3, status: "created", statusChangedAt: nil),
        ]
        #expect(CheckerAnalysis.routingViolation(status: "sent", recipients: fine) == nil)
        #expect(CheckerAnalysis.routingViolation(status: "completed", recipients: fine)?.recipients.map(\.recipientID) == ["3"],
                "completed while a signer is still sent")
    }

    @Test func anOutboxLeftUnsyncedIsUnknownUnlessTheHistorySaysItSynced() async throws {
        let fixture = try await CheckerRun.make(unsynced: ["b-1": 1])
        defer { fixture.remove() }
        let transaction = try #require(fixture.transactions["b-1"]?[2])
        let report = try await Checker.check(run: fixture.run)
        #expect(report.verdict == .unknown, "\(report.summary())")
        #expect(report.verdict.exitCode == 2)
        #expect(report.anomalies.map(\.kind) == [.unsynced])
        let unsynced = try #require(report.anomalies.first)
        #expect(unsynced.device == "b-1" && unsynced.transaction == transaction && unsynced.sequence == 3)
        #expect(report.counts.pending == 1)

        // The same outbox, but the history claims the server acknowledged it: now it is lost.
        let claimed = try fixture.copy()
        let writer = try HistoryWriter(path: claimed.historyFile(process: "node-b-1"))
        try writer.append(HistoryEvent(
            process: "node-b-1", type: .ok, op: .sync, device: "b-1", transaction: transaction, sequence: 3,
            serverEnvelope: Self.serverID(transaction)))
        writer.close()
        let lost = try await Checker.check(run: claimed)
        #expect(lost.verdict == .invalid)
        #expect(lost.anomalies.map(\.kind) == [.lost], "\(lost.summary())")
        #expect(lost.anomalies.first?.transaction == transaction)
    }

    @Test func aReceiptNamingAMissingServerEnvelopeIsReported() async throws {
        let fixture = try await CheckerRun.make()
        defer { fixture.remove() }
        let broken = try fixture.copy()
        let transaction = try #require(fixture.transactions["a-1"]?[0])
        try CheckerRun.edit(broken.deviceStore(device: "a-1")) { db in
            try db.execute(sql: "UPDATE outbox SET serverEnvelopeId = 'env-nowhere' WHERE transactionId = ?", arguments: [transaction])
        }
        let report = try await Checker.check(run: broken)
        #expect(report.verdict == .invalid)
        #expect(report.anomalies.map(\.kind) == [.receiptWithoutServerRecord], "\(report.summary())")
        let receipt = try #require(report.anomalies.first)
        #expect(receipt.device == "a-1" && receipt.transaction == transaction)
        #expect(receipt.message.contains("env-nowhere"))
    }

    @Test func aDeviceThatLostWhatItReportedSignedIsDeviceDataLoss() async throws {
        let fixture = try await CheckerRun.make()
        defer { fixture.remove() }
        let broken = try fixture.copy()
        let transaction = try #require(fixture.transactions["b-1"]?[1])
        try CheckerRun.edit(broken.deviceStore(device: "b-1")) { db in
            try db.execute(sql: "DELETE FROM outbox WHERE transactionId = ?", arguments: [transaction])
        }
        let report = try await Checker.check(run: broken)
        #expect(report.verdict == .invalid)
        #expect(report.anomalies.map(\.kind) == [.deviceDataLoss], "\(report.summary())")
        let loss = try #require(report.anomalies.first)
        #expect(loss.device == "b-1" && loss.transaction == transaction)
        #expect(loss.witness.events.map(\.op) == [.sign], "the history's ok sign is the witness")
        // The fixture's stores run with the default durability: what allowed the loss is named.
        #expect(loss.message.contains("durability powerLoss, synchronous = FULL"), "\(loss.message)")
    }

    @Test func aMissingDeviceStoreIsUnknown() async throws {
        let fixture = try await CheckerRun.make()
        defer { fixture.remove() }
        let broken = try fixture.copy()
        try FileManager.default.removeItem(atPath: broken.deviceStore(device: "a-1"))
        let report = try await Checker.check(run: broken)
        #expect(report.verdict == .unknown, "\(report.summary())")
        #expect(report.anomalies.map(\.kind) == [.unreadableInput])
        #expect(report.anomalies.first?.device == "a-1")
    }

    @Test func aServerRowMissingAndDuplicatedTogetherAreBothReportedAndTheReportRoundTrips() async throws {
        let fixture = try await CheckerRun.make()
        defer { fixture.remove() }
        let broken = try fixture.copy()
        let gone = try #require(fixture.transactions["a-1"]?[2])
        let twice = try #require(fixture.transactions["b-1"]?[1])
        try CheckerRun.edit(broken.coordinatorStore) { db in
            try db.execute(sql: "DELETE FROM envelope WHERE transactionID = ?", arguments: [gone])
            try CheckerRun.duplicateEnvelope(db, id: Self.serverID(twice), as: "env-again")
        }
        let report = try await Checker.check(run: broken)
        #expect(Set(report.anomalies.map(\.kind)) == [.lost, .duplicate], "\(report.summary())")
        try report.write(to: broken.checkFile)
        let read = try CheckReport.read(from: broken.checkFile)
        #expect(read == report)
        let summary = report.summary(maxAnomalies: 1)
        #expect(summary.hasPrefix("verdict: invalid (exit 1)"))
        #expect(summary.contains("… and 1 more in check.json"), "\(summary)")
    }

    @Test func aSequenceTheServerNeverHandledIsAGap() async throws {
        let fixture = try await CheckerRun.make()
        defer { fixture.remove() }
        let broken = try fixture.copy()
        try CheckerRun.edit(broken.coordinatorStore) { db in
            try db.execute(sql: "DELETE FROM syncResult WHERE deviceID = 'a-1' AND sequence = 2")
        }
        let report = try await Checker.check(run: broken)
        #expect(report.anomalies.map(\.kind) == [.orderViolation], "\(report.summary())")
        let gap = try #require(report.anomalies.first)
        #expect(gap.device == "a-1" && gap.sequence == 2 && gap.message.hasPrefix("gap:"), "\(gap.message)")
        #expect(gap.witness.rows.compactMap { $0.fields["sequence"] } == ["1", "3"], "the neighbours of the hole")
    }

    @Test func aStoreLeftWithItsWriteAheadLogIsReadWithIt() async throws {
        // A coordinator killed mid-run leaves coordinator.sqlite-wal behind; its last writes are
        // only there. The read-only checker must see them.
        let fixture = try await CheckerRun.make()
        defer { fixture.remove() }
        let live = try fixture.copy()
        let transaction = try #require(fixture.transactions["b-1"]?[2])
        let pool = try DatabasePool(path: live.coordinatorStore)
        try await pool.write { db in try db.execute(sql: "DELETE FROM envelopeRecipient WHERE envelopeID = ?", arguments: [Self.serverID(transaction)]) }
        try await pool.write { db in try db.execute(sql: "DELETE FROM envelope WHERE transactionID = ?", arguments: [transaction]) }
        // Copied while the pool is open: the copy's last write is in its -wal file only.
        let snapshot = try fixture.copy(of: live)
        try pool.close()
        #expect(FileManager.default.fileExists(atPath: snapshot.coordinatorStore + "-wal"))
        let report = try await Checker.check(run: snapshot)
        #expect(report.anomalies.map(\.kind) == [.lost], "\(report.summary())")
        #expect(report.anomalies.first?.transaction == transaction)
    }

    @Test func infoOutcomesAreResolvedAndATruncatedHistoryIsNoted() async throws {
        let fixture = try await CheckerRun.make()
        defer { fixture.remove() }
        let run = try fixture.copy()
        let synced = try #require(fixture.transactions["a-1"]?[0])
        let writer = try HistoryWriter(path: run.historyFile(process: "node-a-1"))
        try writer.append(HistoryEvent(process: "node-a-1", type: .invoke, op: .sync, device: "a-1", transaction: synced, sequence: 1))
        try writer.append(HistoryEvent(process: "node-a-1", type: .info, op: .sync, device: "a-1", transaction: synced, sequence: 1, error: "timeout"))
        try writer.append(HistoryEvent(process: "node-a-1", type: .info, op: .sync, device: "a-1", transaction: "a-1-tx-never", error: "timeout"))
        try writer.append(HistoryEvent(process: "node-a-1", type: .invoke, op: .sign, device: "a-1"))
        writer.close()
        let handle = try #require(FileHandle(forWritingAtPath: run.historyFile(process: "node-a-1")))
        handle.seekToEndOfFile()
        handle.write(Data("{\"time\":1,\"pro".utf8))
        try handle.close()

        let report = try await Checker.check(run: run)
        #expect(report.verdict == .valid, "info outcomes and a partial line are not anomalies: \(report.summary())")
        #expect(report.resolvedInfo.map(\.resolution) == ["happened", "did-not-happen"])
        #expect(report.notes.contains { $0.contains("node-a-1.jsonl ends in a partial line") }, "\(report.notes)")
        #expect(report.notes.contains { $0.contains("without a completion") && $0.contains("1 sign") }, "\(report.notes)")
    }

    @Test func aDirectoryWithoutACoordinatorStoreIsNotARunDirectory() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("not-a-run-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: path) }
        await #expect(throws: CheckerError.notARunDirectory(path: path, reason: "it has no coordinator.sqlite")) {
            try await Checker.check(run: RunDirectory(path: path))
        }
        await #expect(throws: CheckerError.self) { try await Checker.check(run: RunDirectory(path: path + "/nowhere")) }
    }
}
