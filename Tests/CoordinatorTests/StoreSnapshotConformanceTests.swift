import CoordinatorPostgres
import Crypto
import FleetTesting
import FleetProtocol
import Foundation
import Synchronization
import SyncContract
import Testing

@testable import Coordinator

/// The checker's snapshot (docs/storage.md, "The checker's snapshot"): both stores export the
/// same ``CoordinatorSnapshot`` for the same history, in the order they applied it, with every
/// payload handed over once with its enrolled device.
@Suite struct StoreSnapshotConformanceTests {
    /// One history: two devices' pushes interleaved, a gap, duplicates, a conflict, a forged
    /// signature, a replayed transaction id, a remote recipient, a void.
    static func play(_ storage: any CoordinatorStorage, _ first: ([SyncItem], Forger), _ second: ([SyncItem], Forger)) async throws {
        let services = StorageServices(storage)
        let token = try await services.seed()
        for (_, forger) in [first, second] {
            _ = try await services.devices.enroll(EnrollDevice(accessToken: token, deviceID: forger.id, publicKey: forger.publicKey), routingID: forger.id)
        }
        let (items, a) = first
        let (others, b) = second
        func push(_ forger: Forger, _ items: [SyncItem]) async throws -> SyncAck {
            try await services.ingest.apply(SyncPush(deviceID: forger.id, items: items), routingID: forger.id)
        }
        #expect(try await push(a, [items[1]]).status == .gap)
        #expect(try await push(a, Array(items[0...1])).status == .ok)
        #expect(try await push(b, [others[0]]).status == .ok)
        #expect(try await push(a, Array(items[0...2])).results.map(\.outcome) == [.duplicate, .duplicate, .applied])
        #expect(try await push(a, [try a.item(from: items[3], sequence: 2, transaction: "tx-other")]).results.map(\.outcome) == [.conflict])
        var forged = items[3]
        forged.signature[0] ^= 0xFF
        #expect(try await push(a, [forged]).results.map(\.outcome) == [.badSignature])
        #expect(try await push(a, [try a.item(from: items[3], sequence: 4, transaction: "tx-0")]).results.map(\.outcome) == [.duplicate])
        let last = try await push(b, [others[1]])
        #expect(last.status == .ok)
        let voided = try #require(last.results.first?.envelopeID)
        _ = try await services.envelopes.void(envelopeID: voided, reason: "changed my mind", accountID: "acme")
    }

    /// The snapshot with what differs by design between two stores fed at different times made
    /// comparable: server envelope ids (random) as `account/device/sequence`, times dropped after
    /// checking they lie within the test.
    static func comparable(_ snapshot: CoordinatorSnapshot, within window: ClosedRange<Date>) -> CoordinatorSnapshot {
        var names: [String: String] = [:]
        for envelope in snapshot.envelopes { names[envelope.id] = "\(envelope.accountID)/\(envelope.deviceID)/\(envelope.sequence)" }
        var copy = snapshot
        let widened = window.lowerBound.addingTimeInterval(-1)...window.upperBound.addingTimeInterval(1)
        copy.envelopes = snapshot.envelopes.map { envelope in
            var envelope = envelope
            #expect(widened.contains(envelope.createdAt), "createdAt \(envelope.createdAt) outside the test")
            envelope.id = names[envelope.id] ?? "?"
            envelope.createdAt = Date(timeIntervalSince1970: 0)
            return envelope
        }
        copy.syncResults = snapshot.syncResults.map { result in
            var result = result
            result.envelopeID = result.envelopeID.map { names[$0] ?? "unknown \($0)" }
            return result
        }
        copy.recipients = snapshot.recipients.map { recipient in
            var recipient = recipient
            recipient.envelopeID = names[recipient.envelopeID] ?? "?"
            recipient.statusChangedAt = recipient.statusChangedAt.map { widened.contains($0) ? Date(timeIntervalSince1970: 0) : $0 }
            return recipient
        }.sorted { ($0.envelopeID, $0.routingOrder, $0.recipientID) < ($1.envelopeID, $1.routingOrder, $1.recipientID) }
        return copy
    }

    @Test func bothStoresExportTheSameSnapshotForTheSameHistory() async throws {
        let first = try await forgedItems(count: 4, remoteSigners: 1)
        let second = try await forgedItems(count: 2, transactionPrefix: "other")
        var exported: [StoreBackend: CoordinatorSnapshot] = [:]
        for backend in StoreBackend.allCases {
            let store = try await ConformanceStore.make(backend)
            defer { store.remove() }
            let start = Date()
            try await Self.play(store.storage, first, second)
            let handed = Mutex<[CoordinatorSnapshot.Payload]>([])
            let snapshot = try await store.storage.checkerSnapshot { payload in handed.withLock { $0.append(payload) } }
            let window = start...Date()

            // Envelopes in the order applied: a1, a2, b1, a3, b2; results likewise (the gap stored none).
            #expect(snapshot.envelopes.map { "\($0.deviceID == first.1.id ? "a" : "b")\($0.sequence)" } == ["a1", "a2", "b1", "a3", "b2"], "\(backend)")
            #expect(
                snapshot.syncResults.map { "\($0.deviceID == first.1.id ? "a" : "b")\($0.sequence) \($0.outcome)" }
                    == ["a1 applied", "a2 applied", "b1 applied", "a3 applied", "a4 duplicate", "b2 applied"], "\(backend)")
            #expect(snapshot.envelopes.last?.status == "voided", "\(backend)")
            #expect(snapshot.devices.map(\.lastAppliedSequence).sorted() == [2, 4], "\(backend)")
            // Every payload once, in order, with its device, and the digest of what was handed over.
            let payloads = handed.withLock { $0 }
            #expect(payloads.map(\.index) == Array(snapshot.envelopes.indices), "\(backend)")
            for payload in payloads {
                #expect(payload.envelope == snapshot.envelopes[payload.index])
                #expect(Data(SHA256.hash(data: payload.payload)) == payload.envelope.payloadSHA256)
                #expect(payload.device?.id == payload.envelope.deviceID && payload.device?.accountID == "acme")
                let key = try #require(payload.device?.publicKey)
                #expect(try Curve25519.Signing.PublicKey(rawRepresentation: key).isValidSignature(payload.signature, for: payload.payload))
            }
            exported[backend] = Self.comparable(snapshot, within: window)
        }
        let sqlite = try #require(exported[.sqlite]), postgres = try #require(exported[.postgres])
        #expect(sqlite.devices == postgres.devices)
        #expect(sqlite.envelopes == postgres.envelopes)
        #expect(sqlite.syncResults == postgres.syncResults)
        #expect(sqlite.recipients == postgres.recipients)
        #expect(sqlite.recipients.count > postgres.envelopes.count, "device a's envelopes have a remote recipient too")
    }

    @Test func aReadOnlyReaderNeitherCreatesNorMigratesAPostgresStore() async throws {
        let url = try await PostgresTestServer.url()
        let empty = "t_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        let refused = await #expect(throws: FleetError.self) {
            _ = try await PostgresCoordinatorStore(url: url, schema: empty, readOnly: true)
        }
        #expect(refused?.code == .notFound && refused?.message.contains("holds no coordinator store") == true, "\(String(describing: refused))")
        // Still nothing there: a second read-only open is refused the same way.
        await #expect(throws: FleetError.self) { _ = try await PostgresCoordinatorStore(url: url, schema: empty, readOnly: true) }
    }
}
