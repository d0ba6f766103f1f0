import FleetProtocol
import Foundation
import GRDB

// Connect on SQLite (docs/webhooks.md): the outbox's fan-out in the change's transaction, the
// configurations and keys, and the delivery claims.
extension CoordinatorStore {
    /// Writes an envelope change's events to the outbox: one row per event and per enabled
    /// configuration of the envelope's account that asks for it, in the caller's transaction.
    static func publish(_ aggregate: EnvelopeAggregate, _ db: Database) throws {
        try publish(aggregate.events, about: aggregate.envelope.id, accountID: aggregate.envelope.accountID, db)
    }

    /// Writes events about `subjectID` (an envelope, or a template for `template-*` events; the
    /// outbox's `envelopeID` column, whose rows are delivered in order) to the outbox, in the
    /// caller's transaction.
    static func publish(_ events: [EnvelopeEvent], about subjectID: String, accountID: String, _ db: Database) throws {
        guard !events.isEmpty else { return }
        // Each event is its own statement, so a later one sees the earlier ones and is not ready.
        let fanOut = try db.cachedStatement(
            sql: """
                INSERT INTO connectDelivery (configurationID, accountID, envelopeID, event, recipientID, occurredAt, recordedAt,
                                             ready, attempts, nextAttemptAt)
                SELECT c.id, c.accountID, ?1, ?2, ?3, ?4, ?5,
                       NOT EXISTS (SELECT 1 FROM connectDelivery p WHERE p.configurationID = c.id AND p.envelopeID = ?1
                                   AND p.deliveredAt IS NULL AND p.failedAt IS NULL),
                       0, ?5
                FROM connectConfiguration c
                WHERE c.accountID = ?6 AND c.enabled AND instr(c.events, ?7) > 0 AND (c.envelopeID IS NULL OR c.envelopeID = ?1)
                ORDER BY c.createdAt, c.id
                """)
        for event in events {
            try fanOut.execute(arguments: [
                subjectID, event.kind.rawValue, event.recipientID, event.occurredAt, event.recordedAt, accountID, ",\(event.kind.rawValue),",
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
            try ConnectConfigurationRecord.filter(Column("accountID") == accountID && Column("envelopeID") == nil)
                .order(Column("createdAt"), Column("id")).fetchAll(db)
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

    package func settleConnectDeliveries(_ outcomes: [ConnectOutcomeRecord], claim: ConnectClaimRequest?) async throws -> ConnectSettlement {
        let candidates = """
            SELECT * FROM connectDelivery INDEXED BY connectDelivery_ready
            WHERE ready AND deliveredAt IS NULL AND failedAt IS NULL AND nextAttemptAt <= ?
              AND (claimedUntil IS NULL OR claimedUntil <= ?) AND configurationID NOT IN (SELECT value FROM json_each(?))
            ORDER BY id LIMIT ?
            """
        let full = String(decoding: try JSONEncoder().encode(claim?.full ?? []), as: UTF8.self)
        var claim = claim
        if outcomes.isEmpty, let request = claim {
            // Most polls find nothing due: a read says so without taking the single writer's turn.
            let anyDue = try await database.read { db in
                try !ConnectDeliveryRecord.fetchAll(db, sql: candidates, arguments: [request.now, request.now, full, 1]).isEmpty
            }
            guard anyDue else { return ConnectSettlement() }
        }
        if let request = claim, request.limit <= 0 { claim = nil }
        return try await write { [claim] db in
            var settlement = ConnectSettlement()
            for outcome in outcomes where try Self.record(outcome, db) {
                settlement.recorded.insert(outcome.id)
            }
            guard let request = claim else { return settlement }
            // One writer at a time on SQLite: the transaction itself keeps two claims apart.
            let due = request.take(
                try ConnectDeliveryRecord.fetchAll(db, sql: candidates, arguments: [request.now, request.now, full, request.limit * 4]))
            let take = try db.cachedStatement(sql: "UPDATE connectDelivery SET claimedUntil = ?, claimToken = ? WHERE id = ?")
            settlement.claimed = try due.map { row in
                try take.execute(arguments: [request.claimUntil, request.token, row.id])
                var claimed = row
                claimed.claimedUntil = request.claimUntil
                claimed.claimToken = request.token
                return claimed
            }
            return settlement
        }
    }

    /// Records one outcome under its claim and, when the row is done with, makes its envelope's
    /// next event ready. False when the claim no longer holds the row.
    private static func record(_ record: ConnectOutcomeRecord, _ db: Database) throws -> Bool {
        let held = "id = ? AND claimToken = ?"
        let (id, token) = (record.id, record.token)
        switch record.outcome {
        case .delivered(let at):
            try db.cachedStatement(
                sql: """
                    UPDATE connectDelivery SET attempts = attempts + 1, deliveredAt = ?, lastAttemptAt = ?, claimedUntil = NULL,
                        claimToken = NULL, lastError = NULL WHERE \(held)
                    """
            ).execute(arguments: [at, at, id, token])
        case .retry(let next, let at, let error):
            try db.cachedStatement(
                sql: """
                    UPDATE connectDelivery SET attempts = attempts + 1, nextAttemptAt = ?, lastAttemptAt = ?, claimedUntil = NULL,
                        claimToken = NULL, lastError = ? WHERE \(held)
                    """
            ).execute(arguments: [next, at, error, id, token])
        case .released:
            try db.cachedStatement(sql: "UPDATE connectDelivery SET claimedUntil = NULL, claimToken = NULL WHERE \(held)")
                .execute(arguments: [id, token])
        case .failed(let at, let error):
            try db.cachedStatement(
                sql: """
                    UPDATE connectDelivery SET attempts = attempts + 1, failedAt = ?, lastAttemptAt = ?, claimedUntil = NULL,
                        claimToken = NULL, lastError = ? WHERE \(held)
                    """
            ).execute(arguments: [at, at, error, id, token])
        }
        let recorded = db.changesCount > 0
        if recorded, record.outcome.ends {
            // The envelope's next event for this configuration is ready now (found through the
            // partial index on waiting rows: a join here scanned the whole outbox per delivery).
            if let row = try Row.fetchOne(
                db.cachedStatement(sql: "SELECT configurationID, envelopeID FROM connectDelivery WHERE id = ?"), arguments: [id])
            {
                try db.cachedStatement(
                    sql: """
                        UPDATE connectDelivery SET ready = 1 WHERE id = (
                            SELECT id FROM connectDelivery INDEXED BY connectDelivery_order
                            WHERE configurationID = ? AND envelopeID = ? AND deliveredAt IS NULL AND failedAt IS NULL ORDER BY id LIMIT 1)
                        """
                ).execute(arguments: [row["configurationID"], row["envelopeID"]])
            }
        }
        return recorded
    }

    package func pruneConnectDeliveries(recordedBefore cutoff: Date, limit: Int) async throws -> Int {
        guard limit > 0 else { return 0 }
        // Found in a read, off the writer: a binary search over ids (which grow with time), a few
        // index probes however long the outbox.
        let boundary = try await database.read { db in
            var search = ConnectPruneBoundary(cutoff: cutoff, maxID: try Int64.fetchOne(db, sql: "SELECT max(id) FROM connectDelivery"))
            while let id = search.probe {
                search.found(try Date.fetchOne(db, sql: "SELECT recordedAt FROM connectDelivery WHERE id >= ? ORDER BY id LIMIT 1", arguments: [id]))
            }
            return search.boundary
        }
        guard boundary > 0 else { return 0 }
        return try await write { db in
            // The cutoff is checked row by row too: ids only roughly follow the clock.
            try db.execute(
                sql: """
                    DELETE FROM connectDelivery WHERE id IN (
                        SELECT id FROM connectDelivery WHERE id < ? AND recordedAt < ? AND (deliveredAt IS NOT NULL OR failedAt IS NOT NULL)
                        ORDER BY id LIMIT ?)
                    """, arguments: [boundary, cutoff, limit])
            return db.changesCount
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
        // Each count reads its partial index, not the delivered history.
        try await database.read { db in
            ConnectDeliveryCounts(
                pending: try Int.fetchOne(db, sql: "SELECT count(*) FROM connectDelivery WHERE deliveredAt IS NULL AND failedAt IS NULL") ?? 0,
                failed: try Int.fetchOne(db, sql: "SELECT count(*) FROM connectDelivery WHERE failedAt IS NOT NULL") ?? 0)
        }
    }
}
