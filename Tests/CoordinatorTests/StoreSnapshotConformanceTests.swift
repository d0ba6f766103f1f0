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
    final class Handed: Sendable {
        let payloads = Mutex<[CoordinatorSnapshot.Payload]>([])
    }

    /// One history: two devices' pushes interleaved, a gap, duplicates, a conflict, a forged
    /// signature, a replayed transaction id, a remote recipient, a void.
    static func play(_ storage: any CoordinatorStorage, _ first: ([SyncItem], Forger), _ second: ([SyncItem], Forger)) async throws {
        let services = StorageServices(storage)
        let token = try await services.seed()
        // A Connect configuration asking for every event: the history writes its outbox too.
        try await storage.insertConnectConfiguration(
            ConnectConfigurationRecord(
                id: "1001", accountID: "acme", name: "hook", url: "http://127.0.0.1:9/hook", events: EnvelopeEvent.Kind.allCases,
                includeData: [], enabled: true, includeHMAC: true, createdAt: Date(timeIntervalSince1970: 1_800_000_000)))
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
        let again = try await push(a, Array(items[0...2]))
        #expect(again.results.map(\.outcome) == [.duplicate, .duplicate, .applied])
        #expect(try await push(a, [try a.item(from: items[3], sequence: 2, transaction: "tx-other")]).results.map(\.outcome) == [.conflict])
        var forged = items[3]
        forged.signature[0] ^= 0xFF
        #expect(try await push(a, [forged]).results.map(\.outcome) == [.badSignature])
        #expect(try await push(a, [try a.item(from: items[3], sequence: 4, transaction: "tx-0")]).results.map(\.outcome) == [.duplicate])
        #expect(try await push(b, [others[1]]).status == .ok)
        // Item a3 has a remote signer still to sign: its envelope is `sent`, and may be voided.
        let voided = try #require(again.results.last?.envelopeID)
        _ = try await services.envelopes.void(envelopeID: voided, reason: "changed my mind", accountID: "acme")
    }

    /// The snapshot with what differs by design between two stores fed at different times made
    /// comparable: server envelope ids (random) as `account/device/sequence`; envelope creation
    /// times (the server's clock) dropped after checking they lie within the test; recipients'
    /// change times only as present or absent (the device's signing times are compared apart:
    /// SQLite keeps milliseconds, PostgreSQL microseconds).
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
            recipient.statusChangedAt = recipient.statusChangedAt.map { _ in Date(timeIntervalSince1970: 0) }
            return recipient
        }.sorted { ($0.envelopeID, $0.routingOrder, $0.recipientID) < ($1.envelopeID, $1.routingOrder, $1.recipientID) }
        // The outbox in id order; ids as positions (a PostgreSQL sequence may skip), times dropped
        // after checking they lie within the test (each store's own clock).
        copy.connectDeliveries = snapshot.connectDeliveries.enumerated().map { position, delivery in
            var delivery = delivery
            #expect(widened.contains(delivery.recordedAt), "recordedAt \(delivery.recordedAt) outside the test")
            delivery.id = Int64(position)
            delivery.envelopeID = names[delivery.envelopeID] ?? "?"
            delivery.recordedAt = Date(timeIntervalSince1970: 0)
            return delivery
        }
        return copy
    }

    @Test func bothStoresExportTheSameSnapshotForTheSameHistory() async throws {
        let first = try await forgedItems(count: 4, remoteSigners: 1)
        let second = try await forgedItems(count: 2, transactionPrefix: "other")
        var exported: [StoreBackend: CoordinatorSnapshot] = [:]
        var signedAt: [StoreBackend: [Date?]] = [:]
        for backend in StoreBackend.allCases {
            let store = try await ConformanceStore.make(backend)
            defer { store.remove() }
            let start = Date()
            try await Self.play(store.storage, first, second)
            let handed = Handed()
            let snapshot = try await store.storage.checkerSnapshot { payload in handed.payloads.withLock { $0.append(payload) } }
            let window = start...Date()

            // Envelopes in the order applied: a1, a2, b1, a3, b2; results likewise (the gap stored none).
            #expect(snapshot.envelopes.map { "\($0.deviceID == first.1.id ? "a" : "b")\($0.sequence)" } == ["a1", "a2", "b1", "a3", "b2"], "\(backend)")
            #expect(
                snapshot.syncResults.map { "\($0.deviceID == first.1.id ? "a" : "b")\($0.sequence) \($0.outcome)" }
                    == ["a1 applied", "a2 applied", "b1 applied", "a3 applied", "a4 duplicate", "b2 applied"], "\(backend)")
            #expect(snapshot.envelopes.map(\.status)[3] == "voided", "a3 was voided: \(backend)")
            #expect(snapshot.devices.map(\.lastAppliedSequence).sorted() == [2, 4], "\(backend)")
            // Every payload once, in order, with its device, and the digest of what was handed over.
            let payloads = handed.payloads.withLock { $0 }
            #expect(payloads.map(\.index) == Array(snapshot.envelopes.indices), "\(backend)")
            for payload in payloads {
                #expect(payload.envelope == snapshot.envelopes[payload.index])
                #expect(Data(SHA256.hash(data: payload.payload)) == payload.envelope.payloadSHA256)
                #expect(payload.device?.id == payload.envelope.deviceID && payload.device?.accountID == "acme")
                let key = try #require(payload.device?.publicKey)
                #expect(try Curve25519.Signing.PublicKey(rawRepresentation: key).isValidSignature(payload.signature, for: payload.payload))
            }
            exported[backend] = Self.comparable(snapshot, within: window)
            let names = Dictionary(uniqueKeysWithValues: snapshot.envelopes.map { ($0.id, "\($0.deviceID)/\($0.sequence)") })
            signedAt[backend] = snapshot.recipients.filter { $0.type == "inPersonSigner" }
                .map { (names[$0.envelopeID] ?? "?", $0.statusChangedAt) }.sorted { $0.0 < $1.0 }.map(\.1)
        }
        let sqlite = try #require(exported[.sqlite]), postgres = try #require(exported[.postgres])
        // The in-person signers' times come from the devices' payloads: the same in both, to the millisecond.
        let sqliteSigned = signedAt[.sqlite] ?? [], postgresSigned = signedAt[.postgres] ?? []
        #expect(sqliteSigned.count == postgresSigned.count && !sqliteSigned.isEmpty)
        for (a, b) in zip(sqliteSigned, postgresSigned) {
            let gap = abs((a?.timeIntervalSince1970 ?? -1) - (b?.timeIntervalSince1970 ?? 1))
            #expect(gap < 0.002, "signing time \(String(describing: a)) vs \(String(describing: b))")
        }
        #expect(sqlite.devices == postgres.devices)
        #expect(sqlite.envelopes == postgres.envelopes)
        #expect(sqlite.syncResults == postgres.syncResults)
        #expect(sqlite.recipients == postgres.recipients)
        #expect(sqlite.recipients.count > postgres.envelopes.count, "device a's envelopes have a remote recipient too")
        #expect(sqlite.connectDeliveries == postgres.connectDeliveries)
        // Per applied envelope its sync's events, in order; the void's after them; nothing for the gap, duplicates or refusals.
        #expect(sqlite.connectDeliveries.filter { $0.envelopeID == "acme/\(first.1.id)/3" }.map(\.event) == [
            "envelope-sent", "recipient-sent", "recipient-delivered", "recipient-completed", "recipient-sent", "envelope-voided",
        ], "\(sqlite.connectDeliveries.map { "\($0.envelopeID) \($0.event)" })")
        #expect(Set(sqlite.connectDeliveries.map(\.envelopeID)).count == 5, "the five applied envelopes")
        #expect(sqlite.connectDeliveries.allSatisfy { $0.attempts == 0 && $0.deliveredAt == nil && $0.configurationID == "1001" })
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
