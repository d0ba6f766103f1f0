import FleetProtocol
import Foundation
import GRDB

// Connect on SQLite (docs/webhooks.md): the outbox's fan-out in the change's transaction, the
// configurations and keys, and the delivery claims.
extension CoordinatorStore {
    /// Writes an envelope change's events to the outbox: one row per event and per enabled
    /// configuration of the envelope's account that asks for it, in the caller's transaction.
    static func publish(_ aggregate: EnvelopeAggregate, _ db: Database) throws {
        guard !aggregate.events.isEmpty else { return }
        let fanOut = try db.cachedStatement(
            sql: """
                INSERT INTO connectDelivery (configurationID, accountID, envelopeID, event, recipientID, occurredAt, recordedAt,
                                             attempts, nextAttemptAt)
                SELECT id, accountID, ?, ?, ?, ?, ?, 0, ? FROM connectConfiguration
                WHERE accountID = ? AND enabled AND instr(events, ?) > 0 ORDER BY createdAt, id
                """)
        for event in aggregate.events {
            try fanOut.execute(arguments: [
                aggregate.envelope.id, event.kind.rawValue, event.recipientID, event.occurredAt, event.recordedAt, event.recordedAt,
                aggregate.envelope.accountID, ",\(event.kind.rawValue),",
            ])
        }
    }

    package func insertConnectConfiguration(_ configuration: ConnectConfigurationRecord) async throws {
        try await write { db in
            guard try AccountRecord.exists(db, key: configuration.accountID) else { throw StoreRefusal.noAccount(configuration.accountID) }
            try configuration.insert(db)
        }
    }

    package func connectConfigurations(accountID: String) async throws -> [ConnectConfigurationRecord] {
        try await database.read { db in
            try ConnectConfigurationRecord.filter(Column("accountID") == accountID).order(Column("createdAt"), Column("id")).fetchAll(db)
        }
    }

    package func connectConfiguration(id: String, accountID: String?) async throws -> ConnectConfigurationRecord? {
        try await database.read { db in
            guard let record = try ConnectConfigurationRecord.fetchOne(db, key: id), accountID == nil || record.accountID == accountID else {
                return nil
            }
            return record
        }
    }

    package func replaceConnectConfiguration(_ configuration: ConnectConfigurationRecord) async throws -> Bool {
        try await write { db in
            guard let stored = try ConnectConfigurationRecord.fetchOne(db, key: configuration.id),
                  stored.accountID == configuration.accountID else { return false }
            try configuration.update(db)
            return true
        }
    }

    package func deleteConnectConfiguration(id: String, accountID: String) async throws -> Bool {
        try await write { db in
            try ConnectConfigurationRecord.filter(Column("id") == id && Column("accountID") == accountID).deleteAll(db) > 0
        }
    }

    package func insertConnectKey(_ key: ConnectKeyRecord) async throws {
        try await write { db in
            guard try AccountRecord.exists(db, key: key.accountID) else { throw StoreRefusal.noAccount(key.accountID) }
            try key.insert(db)
        }
    }

    package func connectKeys(accountID: String) async throws -> [ConnectKeyRecord] {
        try await database.read { db in
            try ConnectKeyRecord.filter(Column("accountID") == accountID).order(Column("createdAt"), Column("id")).fetchAll(db)
        }
    }

    package func revokeConnectKey(id: String, accountID: String, at: Date) async throws -> Bool {
        try await write { db in
            try db.execute(
                sql: "UPDATE connectKey SET revokedAt = ? WHERE id = ? AND accountID = ? AND revokedAt IS NULL", arguments: [at, id, accountID])
            return db.changesCount > 0
        }
    }

    package func claimConnectDeliveries(now: Date, claimUntil: Date, limit: Int) async throws -> [ConnectDeliveryRecord] {
        try await write { db in
            // One writer at a time on SQLite: the transaction itself keeps two claims apart.
            let due = try ConnectDeliveryRecord.fetchAll(
                db,
                sql: """
                    SELECT d.* FROM connectDelivery d
                    WHERE d.deliveredAt IS NULL AND d.failedAt IS NULL AND d.nextAttemptAt <= ?
                      AND (d.claimedUntil IS NULL OR d.claimedUntil <= ?)
                      AND NOT EXISTS (
                        SELECT 1 FROM connectDelivery p
                        WHERE p.configurationID = d.configurationID AND p.envelopeID = d.envelopeID AND p.id < d.id
                          AND p.deliveredAt IS NULL AND p.failedAt IS NULL)
                    ORDER BY d.id LIMIT ?
                    """,
                arguments: [now, now, limit])
            let claim = try db.cachedStatement(sql: "UPDATE connectDelivery SET claimedUntil = ? WHERE id = ?")
            return try due.map { row in
                try claim.execute(arguments: [claimUntil, row.id])
                var claimed = row
                claimed.claimedUntil = claimUntil
                return claimed
            }
        }
    }

    package func finishConnectDelivery(id: Int64, _ outcome: ConnectAttemptOutcome) async throws {
        try await write { db in
            switch outcome {
            case .delivered(let at):
                try db.execute(
                    sql: "UPDATE connectDelivery SET attempts = attempts + 1, deliveredAt = ?, claimedUntil = NULL, lastError = NULL WHERE id = ?",
                    arguments: [at, id])
            case .retry(let at, let error):
                try db.execute(
                    sql: "UPDATE connectDelivery SET attempts = attempts + 1, nextAttemptAt = ?, claimedUntil = NULL, lastError = ? WHERE id = ?",
                    arguments: [at, error, id])
            case .released:
                try db.execute(sql: "UPDATE connectDelivery SET claimedUntil = NULL WHERE id = ?", arguments: [id])
            case .failed(let at, let error):
                try db.execute(
                    sql: "UPDATE connectDelivery SET attempts = attempts + 1, failedAt = ?, claimedUntil = NULL, lastError = ? WHERE id = ?",
                    arguments: [at, error, id])
            }
        }
    }

    package func connectDeliveries(accountID: String, failedOnly: Bool, limit: Int) async throws -> [ConnectDeliveryRecord] {
        try await database.read { db in
            var request = ConnectDeliveryRecord.filter(Column("accountID") == accountID)
            if failedOnly { request = request.filter(Column("failedAt") != nil) }
            return try request.order(Column("id").desc).limit(limit).fetchAll(db)
        }
    }

    package func connectDeliveryCounts() async throws -> ConnectDeliveryCounts {
        try await database.read { db in
            let row = try Row.fetchOne(
                db,
                sql: """
                    SELECT count(*) FILTER (WHERE deliveredAt IS NULL AND failedAt IS NULL) AS pending,
                           count(*) FILTER (WHERE failedAt IS NOT NULL) AS failed
                    FROM connectDelivery
                    """)
            return ConnectDeliveryCounts(pending: row?["pending"] ?? 0, failed: row?["failed"] ?? 0)
        }
    }
}
