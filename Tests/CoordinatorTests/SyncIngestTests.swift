import Crypto
import DeviceNode
import Envelopes
import FleetProtocol
import Foundation
import SyncContract
import GRDB
import SignatureCapture
import Testing

@testable import Coordinator

/// Envelopes signed by a real DeviceNode (real SQLite store, real capture, real keys).
func signedItems(count: Int, directory: URL, deviceID: String = "tablet-1") async throws -> (DeviceNode, [SyncItem]) {
    var configuration = DeviceConfiguration(storePath: directory.appendingPathComponent("\(deviceID).sqlite").path)
    configuration.deviceId = deviceID
    let user = UserInfo(accountId: "acme", accountName: "Acme", userId: "u1", userName: "Ann Host", email: "host@example.com", host: "h")
    let node = try await DeviceNode.open(configuration: configuration, accountService: InMemoryAccountService(tokens: ["t": user]))
    try await node.login(accessToken: "t")
    for index in 0..<count {
        let id = try await node.compose(try SampleEnvelope.inPerson(signers: 1, transactionId: "\(deviceID)-tx-\(index)"), mode: .offline)
        _ = try await node.resumeSigning(envelopeId: id, driver: SyntheticSigner(seed: UInt64(index + 1)))
    }
    let items = try await node.pendingOutboxItems().compactMap(\.syncItem)
    return (node, items)
}

/// A device the test controls completely: it rewrites payloads and signs them with its own key,
/// so tampered items carry valid signatures everywhere except where the test breaks them.
struct Forger {
    let id: String
    let key = Curve25519.Signing.PrivateKey()
    var publicKey: [UInt8] { Array(key.publicKey.rawRepresentation) }

    func item(from base: SyncItem, sequence: UInt64, transaction: String, edit: (inout SyncPayload) -> Void = { _ in }) throws -> SyncItem {
        var payload = try SyncPayload(canonicalBytes: base.payload)
        payload.deviceId = id
        payload.sequence = sequence
        payload.transactionId = transaction
        payload.signatures = try payload.signatures.map { signature in
            var resigned = signature
            resigned.bindingSignature = try SignatureBinding(canonicalBytes: signature.binding).sign(privateKey: Array(key.rawRepresentation))
            return resigned
        }
        edit(&payload)
        let bytes = try payload.canonicalBytes()
        return SyncItem(sequence: sequence, transactionID: transaction, payload: bytes, signature: Array(try key.signature(for: bytes)))
    }
}

struct IngestFixture {
    let temporary: TemporaryStore
    let services: CoordinatorServices
    let token: String

    init(offlineSigning: Bool = true) async throws {
        temporary = try TemporaryStore()
        services = CoordinatorServices(store: temporary.store)
        _ = try await services.accounts.createAccount(id: "acme", name: "Acme", offlineSigning: offlineSigning)
        _ = try await services.accounts.createUser(accountID: "acme", name: "Ann", email: "ann@acme.example", secret: "secret-123")
        token = try await services.auth.issueToken(email: "ann@acme.example", secret: "secret-123").accessToken
    }

    func enroll(_ deviceID: String, key: [UInt8]) async throws {
        _ = try await services.devices.enroll(EnrollDevice(accessToken: token, deviceID: deviceID, publicKey: key), routingID: deviceID)
    }

    func push(_ deviceID: String, _ items: [SyncItem]) async throws -> SyncAck {
        try await services.ingest.apply(SyncPush(deviceID: deviceID, items: items), routingID: deviceID)
    }

    func envelopeCount() async throws -> Int {
        try await temporary.store.database.read { db in try EnvelopeRecord.fetchCount(db) }
    }
}

@Suite struct SyncIngestTests {
    @Test func realDeviceItemsApplyInOrderAndTheSameBatchTwiceGivesDuplicates() async throws {
        let fixture = try await IngestFixture()
        defer { fixture.temporary.remove() }
        let (node, items) = try await signedItems(count: 3, directory: fixture.temporary.directory)
        try await fixture.enroll(node.deviceId, key: node.publicKey)
        #expect(items.map(\.sequence) == [1, 2, 3])

        let first = try await fixture.push(node.deviceId, items)
        #expect(first.status == .ok)
        #expect(first.lastApplied == 3)
        #expect(first.results.map(\.outcome) == [.applied, .applied, .applied])
        let ids = first.results.compactMap(\.envelopeID)
        #expect(Set(ids).count == 3)
        #expect(ids[0] == SyncIngest.serverEnvelopeID(accountID: "acme", transactionID: items[0].transactionID))

        let again = try await fixture.push(node.deviceId, items)
        #expect(again.status == .ok)
        #expect(again.lastApplied == 3)
        #expect(again.results.map(\.outcome) == [.duplicate, .duplicate, .duplicate])
        #expect(again.results.compactMap(\.envelopeID) == ids, "duplicates are answered with the stored results")
        #expect(try await fixture.envelopeCount() == 3)
        let status = try await fixture.temporary.store.database.read { db in
            try String.fetchOne(db, sql: "SELECT status FROM envelope WHERE id = ?", arguments: [ids[0]])
        }
        #expect(status == "completed", "one in-person signer who signed: nothing left to do")
        try await node.close()
    }

    @Test func aGapOrItemsOutOfOrderApplyNothingAndNameTheExpectedSequence() async throws {
        let fixture = try await IngestFixture()
        defer { fixture.temporary.remove() }
        let (node, base) = try await signedItems(count: 1, directory: fixture.temporary.directory)
        let forger = Forger(id: "forged-1")
        try await fixture.enroll(forger.id, key: forger.publicKey)
        let items = try (1...3).map { try forger.item(from: base[0], sequence: UInt64($0), transaction: "t\($0)") }

        var ack = try await fixture.push(forger.id, [items[1], items[2]])
        #expect(ack.status == .gap)
        #expect(ack.expectedSequence == 1)
        #expect(ack.lastApplied == 0)
        #expect(ack.results.isEmpty)

        ack = try await fixture.push(forger.id, [items[1], items[0]])
        #expect(ack.status == .gap && ack.expectedSequence == 1 && ack.results.isEmpty)

        ack = try await fixture.push(forger.id, [items[0], items[2]])
        #expect(ack.status == .gap, "1 applies, then 3 is a gap")
        #expect(ack.lastApplied == 1)
        #expect(ack.expectedSequence == 2)
        #expect(ack.results.map(\.outcome) == [.applied])

        ack = try await fixture.push(forger.id, items)
        #expect(ack.status == .ok && ack.lastApplied == 3)
        #expect(ack.results.map(\.outcome) == [.duplicate, .applied, .applied])
        #expect(try await fixture.envelopeCount() == 3)
        try await node.close()
    }

    @Test func signedButInvalidItemsAreRejectedWithTheirReasonAndTheSequenceStillAdvances() async throws {
        let fixture = try await IngestFixture()
        defer { fixture.temporary.remove() }
        let (node, base) = try await signedItems(count: 1, directory: fixture.temporary.directory)
        let forger = Forger(id: "forged-2")
        try await fixture.enroll(forger.id, key: forger.publicKey)

        // Signed by the device, but its payload names a format this server does not know.
        let unknownFormat = try forger.item(from: base[0], sequence: 1, transaction: "a") { payload in
            payload.format = "signfleet.envelope/99"
        }
        let badDocument = try forger.item(from: base[0], sequence: 2, transaction: "b") { payload in
            var pdf = payload.documents[0].pdf
            pdf[pdf.count / 2] ^= 0x01
            payload.documents[0].pdf = pdf
        }
        let badISO = try forger.item(from: base[0], sequence: 3, transaction: "c") { payload in
            payload.signatures[0].isoRecord[40] ^= 0x01
        }
        let wrongPosition = try forger.item(from: base[0], sequence: 9, transaction: "d")
        let replayed = SyncItem(sequence: 4, transactionID: "d", payload: wrongPosition.payload, signature: wrongPosition.signature)
        let otherKey = Curve25519.Signing.PrivateKey()
        var badBinding = try forger.item(from: base[0], sequence: 5, transaction: "e") { payload in
            payload.signatures[0].bindingSignature = (try? SignatureBinding(canonicalBytes: payload.signatures[0].binding)
                .sign(privateKey: Array(otherKey.rawRepresentation))) ?? []
        }
        badBinding.transactionID = "e"
        let good = try forger.item(from: base[0], sequence: 6, transaction: "f")

        let ack = try await fixture.push(forger.id, [unknownFormat, badDocument, badISO, replayed, badBinding, good])
        #expect(ack.status == .ok)
        #expect(ack.lastApplied == 6)
        #expect(ack.results.map(\.outcome) == [.rejected, .rejected, .rejected, .rejected, .rejected, .applied])
        let reasons = ack.results.map { $0.reason ?? "" }
        #expect(reasons[0].contains("unknown payload format"), "\(reasons[0])")
        #expect(reasons[1].contains("document doc1"), "\(reasons[1])")
        #expect(reasons[2].contains("binding does not match"), "\(reasons[2])")
        #expect(reasons[3].contains("pushed as"), "\(reasons[3])")
        #expect(reasons[4].contains("binding's device signature"), "\(reasons[4])")
        #expect(try await fixture.envelopeCount() == 1)

        let again = try await fixture.push(forger.id, [unknownFormat])
        #expect(again.results.first?.outcome == .rejected)
        #expect(again.results.first?.reason == reasons[0], "a rejection is answered the same way twice")
        try await node.close()
    }

    @Test func theTransactionIDPreventsADoubleCreation() async throws {
        let fixture = try await IngestFixture()
        defer { fixture.temporary.remove() }
        let (node, base) = try await signedItems(count: 1, directory: fixture.temporary.directory)
        let forger = Forger(id: "forged-3")
        try await fixture.enroll(forger.id, key: forger.publicKey)
        let items = try [1, 2].map { try forger.item(from: base[0], sequence: UInt64($0), transaction: "same-transaction") }
        let ack = try await fixture.push(forger.id, items)
        #expect(ack.results.map(\.outcome) == [.applied, .duplicate])
        #expect(ack.results[0].envelopeID == ack.results[1].envelopeID)
        #expect(try await fixture.envelopeCount() == 1)
        try await node.close()
    }

    @Test func anAccountWithoutOfflineSigningIsRefused() async throws {
        let fixture = try await IngestFixture(offlineSigning: false)
        defer { fixture.temporary.remove() }
        let (node, items) = try await signedItems(count: 1, directory: fixture.temporary.directory)
        try await fixture.enroll(node.deviceId, key: node.publicKey)
        await expectFleetError(.featureDisabled) { _ = try await fixture.push(node.deviceId, items) }
        #expect(try await fixture.envelopeCount() == 0)
        try await node.close()
    }

    @Test func aDeviceCannotPushForAnotherOrWithoutEnrolling() async throws {
        let fixture = try await IngestFixture()
        defer { fixture.temporary.remove() }
        let (node, items) = try await signedItems(count: 1, directory: fixture.temporary.directory)
        await expectFleetError(.unauthenticated) { _ = try await fixture.push(node.deviceId, items) }
        try await fixture.enroll(node.deviceId, key: node.publicKey)
        await expectFleetError(.forbidden) {
            _ = try await fixture.services.ingest.apply(SyncPush(deviceID: node.deviceId, items: items), routingID: "intruder")
        }
        #expect(try await fixture.envelopeCount() == 0)
        try await node.close()
    }
}
