import Coordinator
import Crypto
import Foundation
import PostgresNIO

/// The PostgreSQL store's ``Coordinator/CoordinatorSnapshot``: one `REPEATABLE READ READ ONLY`
/// transaction (a consistent cut while coordinators keep writing), the ingest order from the
/// `ingestOrder` columns (migration `v2-ingest-order`), byte-wise (`COLLATE "C"`) orders as SQLite's.
extension PostgresCoordinatorStore {
    package func checkerSnapshot(payloads: @escaping @Sendable (CoordinatorSnapshot.Payload) -> Void) async throws -> CoordinatorSnapshot {
        try await read { c in
            try await c.query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY", logger: logger)
            var devices: [CoordinatorSnapshot.Device] = []
            for try await (account, id, key, last) in try await c.query(
                "SELECT accountID, id, publicKey, lastAppliedSequence FROM device ORDER BY accountID COLLATE \"C\", id COLLATE \"C\"",
                logger: logger
            ).decode((String, String, Data, Int64).self) {
                devices.append(CoordinatorSnapshot.Device(accountID: account, id: id, publicKey: key, lastAppliedSequence: last))
            }
            let index = CoordinatorSnapshot.DeviceIndex(devices)
            var envelopes: [CoordinatorSnapshot.Envelope] = []
            // Rows stream from the server: one payload in memory at a time.
            for try await row in try await c.query(
                """
                SELECT id, accountID, deviceID, sequence, transactionID, localEnvelopeID, status, createdAt, payload, deviceSignature
                FROM envelope ORDER BY ingestOrder
                """, logger: logger
            ).decode((String, String, String, Int64, String, String, String, Date, Data, Data).self) {
                let (id, account, device, sequence, transaction, local, status, createdAt, payload, signature) = row
                let envelope = CoordinatorSnapshot.Envelope(
                    id: id, accountID: account, deviceID: device, sequence: sequence, transactionID: transaction, localEnvelopeID: local,
                    status: status, createdAt: createdAt, payloadSHA256: Data(SHA256.hash(data: payload)))
                payloads(CoordinatorSnapshot.Payload(
                index: envelopes.count, envelope: envelope, device: index[envelope.accountID, envelope.deviceID], payload: payload,
                signature: signature))
                envelopes.append(envelope)
            }
            var results: [CoordinatorSnapshot.SyncResult] = []
            for try await (account, device, sequence, outcome, envelopeID, reason, digest) in try await c.query(
                "SELECT accountID, deviceID, sequence, outcome, envelopeID, reason, payloadSHA256 FROM syncResult ORDER BY ingestOrder",
                logger: logger
            ).decode((String, String, Int64, String, String?, String?, Data?).self) {
                results.append(
                    CoordinatorSnapshot.SyncResult(
                        accountID: account, deviceID: device, sequence: sequence, outcome: outcome, envelopeID: envelopeID, reason: reason,
                        payloadSHA256: digest))
            }
            var recipients: [CoordinatorSnapshot.Recipient] = []
            for try await (envelopeID, recipientID, type, routingOrder, status, changedAt) in try await c.query(
                """
                SELECT envelopeID, recipientID, type, routingOrder, status, statusChangedAt FROM envelopeRecipient
                ORDER BY envelopeID COLLATE "C", routingOrder, recipientID COLLATE "C"
                """, logger: logger
            ).decode((String, String, String, Int, String, Date?).self) {
                recipients.append(
                    CoordinatorSnapshot.Recipient(
                        envelopeID: envelopeID, recipientID: recipientID, type: type, routingOrder: routingOrder, status: status,
                        statusChangedAt: changedAt))
            }
            let deliveries = try await Self.deliveries(c, "SELECT \(unescaped: Self.deliveryColumns) FROM connectDelivery ORDER BY id", logger)
            return CoordinatorSnapshot(
                devices: devices, envelopes: envelopes, syncResults: results, recipients: recipients,
                connectDeliveries: deliveries.map(CoordinatorSnapshot.ConnectDelivery.init))
        }
    }
}
