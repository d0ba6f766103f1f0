import Crypto
import DeviceNode
import FleetProtocol
import Foundation
import SyncContract
import GRDB
import SignatureCapture
import Testing

@testable import Coordinator

/// The ingest changes made for throughput (docs/performance.md, "What bounds ingest"): the
/// synchronous pragma really applied, group commit keeping order and exactly-once, and what
/// payload-only verification does and does not check.
@Suite struct IngestThroughputTests {
    @Test func theStoreWriterRunsWithTheSynchronousSettingItWasOpenedWith() throws {
        for durability in CoordinatorStore.Durability.allCases {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("durability-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            let store = try CoordinatorStore(path: directory.appendingPathComponent("store.sqlite").path, durability: durability)
            #expect(try store.synchronousSetting() == (durability == .powerLoss ? 2 : 1), "\(durability)")
        }
    }

    @Test func aNewStoreUsesSixteenKilobytePagesAndAnExistingOneKeepsItsOwn() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pages-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let fresh = try CoordinatorStore(path: directory.appendingPathComponent("new.sqlite").path)
        #expect(try fresh.pageSizeSetting() == CoordinatorStore.pageSize)
        // Checkpoints after the same WAL bytes as SQLite's default with 4 KB pages.
        let checkpointPages = try fresh.database.writeWithoutTransaction { db in try Int.fetchOne(db, sql: "PRAGMA wal_autocheckpoint") }
        #expect(checkpointPages == CoordinatorStore.autocheckpointPages)
        // A store made with 4 KB pages (an older version) opens and keeps them.
        let oldPath = directory.appendingPathComponent("old.sqlite").path
        try DatabaseQueue(path: oldPath).write { db in try db.execute(sql: "CREATE TABLE earlier (x)") }
        let old = try CoordinatorStore(path: oldPath)
        #expect(try old.pageSizeSetting() == 4096)
    }

    @Test func concurrentPushesShareCommitsAndEveryItemIsAppliedOnceInOrder() async throws {
        let fixture = try await IngestFixture()
        defer { fixture.temporary.remove() }
        let (node, base) = try await signedItems(count: 1, directory: fixture.temporary.directory)
        let forgers = (0..<12).map { Forger(id: "group-\($0)") }
        for forger in forgers { try await fixture.enroll(forger.id, key: forger.publicKey) }
        let perDevice = 12
        let items = try forgers.map { forger in
            try (1...perDevice).map { try forger.item(from: base[0], sequence: UInt64($0), transaction: "\(forger.id)-\($0)") }
        }
        // Each device pushes its items in batches of 3, and every batch twice at once (a resend
        // racing the original): the twin is answered as duplicates or applies the same items.
        let acks = try await withThrowingTaskGroup(of: [SyncAck].self) { group in
            for (forger, list) in zip(forgers, items) {
                group.addTask {
                    var acks: [SyncAck] = []
                    for start in stride(from: 0, to: list.count, by: 3) {
                        let batch = Array(list[start..<start + 3])
                        async let first = fixture.push(forger.id, batch)
                        async let twin = fixture.push(forger.id, batch)
                        acks += [try await first, try await twin]
                    }
                    return acks
                }
            }
            return try await group.reduce(into: [SyncAck]()) { $0 += $1 }
        }
        #expect(acks.allSatisfy { $0.status == .ok })
        let applied = acks.flatMap(\.results).filter { $0.outcome == .applied }.count
        #expect(applied == forgers.count * perDevice, "each item applied exactly once")
        #expect(try await fixture.envelopeCount() == forgers.count * perDevice)
        let sequences = try fixture.temporary.store.database.read { db in
            try Row.fetchAll(db, sql: "SELECT id, lastAppliedSequence FROM device WHERE id LIKE 'group-%'")
        }
        #expect(sequences.count == forgers.count)
        #expect(sequences.allSatisfy { ($0["lastAppliedSequence"] as Int64) == Int64(perDevice) })
        // Envelopes were created in each device's order.
        let order = try fixture.temporary.store.database.read { db in
            try Row.fetchAll(db, sql: "SELECT deviceID, sequence FROM envelope ORDER BY rowid")
        }
        var seen: [String: Int64] = [:]
        for row in order {
            let device: String = row["deviceID"]
            let sequence: Int64 = row["sequence"]
            #expect(sequence == (seen[device] ?? 0) + 1, "device \(device) applied out of order")
            seen[device] = sequence
        }
        let counts = await fixture.services.ingest.commitCounts()
        #expect(counts.pushes == acks.count)
        #expect(counts.transactions <= counts.pushes)
        try await node.close()
    }

    @Test func payloadOnlyVerificationStillChecksThePayloadSignatureAndEveryHash() async throws {
        let fixture = try await IngestFixture()
        defer { fixture.temporary.remove() }
        var ingest = fixture.services.ingest
        ingest.verification = .payloadSignature
        let (node, base) = try await signedItems(count: 1, directory: fixture.temporary.directory)
        let forger = Forger(id: "payload-only")
        try await fixture.enroll(forger.id, key: forger.publicKey)
        var badSignature = try forger.item(from: base[0], sequence: 1, transaction: "a")
        badSignature.signature[7] ^= 0x01
        let badISO = try forger.item(from: base[0], sequence: 1, transaction: "b") { payload in
            payload.signatures[0].isoRecord[40] ^= 0x01
        }
        let otherKey = Curve25519.Signing.PrivateKey()
        let badBindingSignature = try forger.item(from: base[0], sequence: 2, transaction: "c") { payload in
            payload.signatures[0].bindingSignature = (try? SignatureBinding(canonicalBytes: payload.signatures[0].binding)
                .sign(privateKey: Array(otherKey.rawRepresentation))) ?? []
        }
        // A payload signature that does not verify proves nothing: refused, not recorded.
        let refused = try await ingest.apply(SyncPush(deviceID: forger.id, items: [badSignature]), routingID: forger.id)
        #expect(refused.status == .refused && refused.lastApplied == 0)
        #expect(refused.results.map(\.outcome) == [.badSignature])
        #expect(refused.results.first?.reason?.contains("does not verify") == true)
        let ack = try await ingest.apply(SyncPush(deviceID: forger.id, items: [badISO, badBindingSignature]), routingID: forger.id)
        #expect(ack.results.map(\.outcome) == [.rejected, .applied])
        #expect(ack.results.first?.reason?.contains("binding does not match") == true)

        // The same binding signature under the default (every signature) is refused.
        let again = try forger.item(from: base[0], sequence: 3, transaction: "d") { payload in
            payload.signatures[0].bindingSignature = (try? SignatureBinding(canonicalBytes: payload.signatures[0].binding)
                .sign(privateKey: Array(otherKey.rawRepresentation))) ?? []
        }
        let strict = try await fixture.push(forger.id, [again])
        #expect(strict.results.map(\.outcome) == [.rejected])
        #expect(strict.results.first?.reason?.contains("binding's device signature") == true)
        try await node.close()
    }

    @Test func serverEnvelopeIDsAreTheFirstHalfOfTheSHA256InHex() {
        let id = SyncIngest.serverEnvelopeID(accountID: "acme", transactionID: "tx-1")
        let digest = Array(SHA256.hash(data: Data("acme\ntx-1".utf8)))
        #expect(id == "env-" + digest.prefix(16).map { String(format: "%02x", $0) }.joined())
    }
}
