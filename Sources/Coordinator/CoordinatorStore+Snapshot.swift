import Crypto
import Foundation
import GRDB

/// The SQLite store's ``CoordinatorSnapshot``: the ingest order is the tables' `rowid` order
/// (the coordinator never deletes an envelope or a result, so a new row always gets a higher
/// rowid), and nothing of the rowid leaves this file.
extension CoordinatorStore {
    package func checkerSnapshot(payloads: @escaping @Sendable (CoordinatorSnapshot.Payload) -> Void) async throws -> CoordinatorSnapshot {
        try await database.read { db in try Self.readSnapshot(db, payloads: payloads) }
    }

    /// The snapshot of the store file at `path`, opened read-only (no migration, no write; a store
    /// whose coordinator was killed is read with its write-ahead log). For the checker, which must
    /// not change what it judges.
    /// - Throws: GRDB's `DatabaseError` when the file cannot be opened or is not a coordinator store.
    public static func checkerSnapshot(
        readOnlyPath path: String, payloads: @escaping @Sendable (CoordinatorSnapshot.Payload) -> Void = { _ in }
    ) throws -> CoordinatorSnapshot {
        guard FileManager.default.fileExists(atPath: path) else {
            throw CocoaError(.fileNoSuchFile, userInfo: [NSFilePathErrorKey: path, NSLocalizedDescriptionKey: "no such file: \(path)"])
        }
        var configuration = Configuration()
        configuration.readonly = true
        configuration.label = "CoordinatorSnapshot"
        configuration.busyMode = .timeout(5)
        let queue = try DatabaseQueue(path: path, configuration: configuration)
        defer { try? queue.close() }
        return try queue.read { db in try readSnapshot(db, payloads: payloads) }
    }

    static func readSnapshot(_ db: Database, payloads: (CoordinatorSnapshot.Payload) -> Void) throws -> CoordinatorSnapshot {
        let devices = try Row.fetchAll(db, sql: "SELECT accountID, id, publicKey, lastAppliedSequence FROM device ORDER BY accountID, id").map {
            CoordinatorSnapshot.Device(
                accountID: $0["accountID"], id: $0["id"], publicKey: $0["publicKey"], lastAppliedSequence: $0["lastAppliedSequence"])
        }
        let index = CoordinatorSnapshot.DeviceIndex(devices)
        var envelopes: [CoordinatorSnapshot.Envelope] = []
        // A cursor: one payload in memory at a time.
        let cursor = try Row.fetchCursor(
            db,
            sql: """
                SELECT id, accountID, deviceID, sequence, transactionID, localEnvelopeID, status, createdAt, payload, deviceSignature
                FROM envelope ORDER BY rowid
                """)
        while let row = try cursor.next() {
            let payload: Data = row["payload"]
            let envelope = CoordinatorSnapshot.Envelope(
                id: row["id"], accountID: row["accountID"], deviceID: row["deviceID"], sequence: row["sequence"],
                transactionID: row["transactionID"], localEnvelopeID: row["localEnvelopeID"], status: row["status"],
                createdAt: row["createdAt"] ?? Date(timeIntervalSince1970: 0), payloadSHA256: Data(SHA256.hash(data: payload)))
            payloads(CoordinatorSnapshot.Payload(
                index: envelopes.count, envelope: envelope, device: index[envelope.accountID, envelope.deviceID], payload: payload,
                signature: row["deviceSignature"]))
            envelopes.append(envelope)
        }
        let results = try Row.fetchAll(
            db, sql: "SELECT accountID, deviceID, sequence, outcome, envelopeID, reason, payloadSHA256 FROM syncResult ORDER BY rowid"
        ).map {
            CoordinatorSnapshot.SyncResult(
                accountID: $0["accountID"], deviceID: $0["deviceID"], sequence: $0["sequence"], outcome: $0["outcome"],
                envelopeID: $0["envelopeID"], reason: $0["reason"], payloadSHA256: $0["payloadSHA256"])
        }
        let recipients = try Row.fetchAll(
            db,
            sql: """
                SELECT envelopeID, recipientID, type, routingOrder, status, statusChangedAt
                FROM envelopeRecipient ORDER BY envelopeID, routingOrder, recipientID
                """
        ).map {
            CoordinatorSnapshot.Recipient(
                envelopeID: $0["envelopeID"], recipientID: $0["recipientID"], type: $0["type"], routingOrder: $0["routingOrder"],
                status: $0["status"], statusChangedAt: $0["statusChangedAt"])
        }
        // A store file from before Connect (`v14-connect`), opened read-only, has no outbox.
        let deliveries = try db.tableExists("connectDelivery")
            ? try ConnectDeliveryRecord.fetchAll(db, sql: "SELECT * FROM connectDelivery ORDER BY id").map(CoordinatorSnapshot.ConnectDelivery.init)
            : []
        return CoordinatorSnapshot(
            devices: devices, envelopes: envelopes, syncResults: results, recipients: recipients, connectDeliveries: deliveries)
    }
}
