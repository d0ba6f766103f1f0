import Crypto
import DeviceNode
import FleetProtocol
import Foundation
import SyncContract
import GRDB
import SignatureCapture
import Testing

@testable import Coordinator

/// A device's sequence advances only for items it provably signed; a used sequence with another
/// payload is a conflict (docs/sync.md, "Verification" and "Duplicates and conflicts").
@Suite struct IngestTrustTests {
    func syncResultRows(_ fixture: IngestFixture, device: String) async throws -> Int {
        try await fixture.temporary.store.database.read { db in
            try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM syncResult WHERE deviceID = ?", arguments: [device]) ?? 0
        }
    }

    @Test func junkAtADevicesNextSequenceChangesNothingAndTheDevicesOwnItemStillApplies() async throws {
        let fixture = try await IngestFixture()
        defer { fixture.temporary.remove() }
        let (node, base) = try await signedItems(count: 1, directory: fixture.temporary.directory)
        let device = Forger(id: "victim")
        try await fixture.enroll(device.id, key: device.publicKey)
        // The attacker knows the device id and builds well-formed items, signed with its own key.
        let attacker = Forger(id: "victim")
        let junk = try (1...2).map { try attacker.item(from: base[0], sequence: UInt64($0), transaction: "junk-\($0)") }

        let refused = try await fixture.push(device.id, junk)
        #expect(refused.status == .refused)
        #expect(refused.lastApplied == 0)
        #expect(refused.results.map(\.outcome) == [.badSignature])
        #expect(try await syncResultRows(fixture, device: device.id) == 0, "a forged item leaves no trace in the device's history")
        #expect(try await fixture.envelopeCount() == 0)

        let genuine = try (1...2).map { try device.item(from: base[0], sequence: UInt64($0), transaction: "real-\($0)") }
        let ack = try await fixture.push(device.id, genuine)
        #expect(ack.status == .ok && ack.lastApplied == 2)
        #expect(ack.results.map(\.outcome) == [.applied, .applied])
        try await node.close()
    }

    @Test func aUsedSequenceWithAnotherPayloadIsAConflictNeverADuplicate() async throws {
        let fixture = try await IngestFixture()
        defer { fixture.temporary.remove() }
        let (node, base) = try await signedItems(count: 1, directory: fixture.temporary.directory)
        let device = Forger(id: "rolled-back")
        try await fixture.enroll(device.id, key: device.publicKey)
        let first = try device.item(from: base[0], sequence: 1, transaction: "first")
        _ = try await fixture.push(device.id, [first])

        // The same bytes again: a duplicate. Other bytes (a store that lost commits re-signs a
        // new envelope under number 1): a conflict, and nothing changes.
        let resent = try await fixture.push(device.id, [first])
        #expect(resent.results.map(\.outcome) == [.duplicate])
        let other = try device.item(from: base[0], sequence: 1, transaction: "other")
        let second = try device.item(from: base[0], sequence: 2, transaction: "second")
        let conflict = try await fixture.push(device.id, [other, second])
        #expect(conflict.status == .refused)
        #expect(conflict.lastApplied == 1)
        #expect(conflict.results.map(\.outcome) == [.conflict])
        #expect(conflict.results.first?.reason?.contains("different payload") == true)
        #expect(try await fixture.envelopeCount() == 1)
        try await node.close()
    }

    /// A signed payload whose recipients share an id passed every check and then failed the
    /// insert: `internal` on every resend, so nothing after it could apply. Now it is rejected.
    @Test func aPayloadWithRepeatedRecipientIDsIsRejectedNotAPoisonItem() async throws {
        let fixture = try await IngestFixture()
        defer { fixture.temporary.remove() }
        let (node, base) = try await signedItems(count: 1, directory: fixture.temporary.directory)
        let device = Forger(id: "poison")
        try await fixture.enroll(device.id, key: device.publicKey)
        let poison = try device.item(from: base[0], sequence: 1, transaction: "p") { payload in
            payload.recipients.append(payload.recipients[0])
        }
        let next = try device.item(from: base[0], sequence: 2, transaction: "n")
        let ack = try await fixture.push(device.id, [poison, next])
        #expect(ack.results.map(\.outcome) == [.rejected, .applied])
        #expect(ack.results.first?.reason?.contains("share the recipientId") == true)
        try await node.close()
    }

    @Test func sequenceZeroAndSequencesBeyondTheStoreAreInvalidRequests() async throws {
        let fixture = try await IngestFixture()
        defer { fixture.temporary.remove() }
        let (node, base) = try await signedItems(count: 1, directory: fixture.temporary.directory)
        let device = Forger(id: "numbers")
        try await fixture.enroll(device.id, key: device.publicKey)
        for sequence: UInt64 in [0, UInt64(Int64.max) + 1, .max] {
            var item = try device.item(from: base[0], sequence: 1, transaction: "t")
            item.sequence = sequence
            let error = await fleetError { _ = try await fixture.push(device.id, [item]) }
            #expect(error?.code == .invalidRequest, "sequence \(sequence)")
            #expect(error?.message.contains("out of range") == true)
        }
        try await node.close()
    }

    @Test func enrollmentRefusesKeysOfSmallOrderNonCanonicalKeysAndNonPoints() async throws {
        let fixture = try await IngestFixture()
        defer { fixture.temporary.remove() }
        var refused: [[UInt8]] = Array(StrictEd25519.smallOrderPoints)
        refused.append([0xed] + [UInt8](repeating: 0xff, count: 30) + [0x7f])  // y = p
        refused.append([0x02] + [UInt8](repeating: 0, count: 31))  // no curve point: every push would be bad_signature
        for (index, key) in refused.enumerated() {
            let error = await fleetError { try await fixture.enroll("weak-\(index)", key: key) }
            #expect(error?.code == .invalidRequest, "key \(index)")
            #expect(error?.message.contains("Strict Ed25519") == true)
        }
        let count = try await fixture.temporary.store.database.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM device") }
        #expect(count == 0)
    }
}
