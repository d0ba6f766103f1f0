import Coordinator
import Foundation
import Logging
import PostgresNIO

// Connect on PostgreSQL (docs/webhooks.md): the same rules as SQLite's; the claim is
// `FOR UPDATE SKIP LOCKED`, so coordinators sharing the database never deliver a row at once.
extension PostgresCoordinatorStore {
    /// Writes an envelope change's events to the outbox in one statement: each event joined with
    /// the enabled configurations of the account that ask for it, in event order.
    static func publish(_ aggregate: EnvelopeAggregate, _ c: PostgresConnection, _ logger: Logger) async throws {
        let events = aggregate.events
        guard !events.isEmpty else { return }
        let kinds = events.map(\.kind.rawValue)
        let recipients = events.map { $0.recipientID ?? "" }
        let occurred = events.map(\.occurredAt)
        let recorded = events.map(\.recordedAt)
        try await c.query(
            """
            INSERT INTO connectDelivery (configurationID, accountID, envelopeID, event, recipientID, occurredAt, recordedAt,
                                         attempts, nextAttemptAt)
            SELECT c.id, c.accountID, \(aggregate.envelope.id), e.event, NULLIF(e.recipient, ''), e.occurred, e.recorded, 0, e.recorded
            FROM unnest(\(kinds)::text[], \(recipients)::text[], \(occurred)::timestamptz[], \(recorded)::timestamptz[])
                 WITH ORDINALITY AS e(event, recipient, occurred, recorded, ord)
            JOIN connectConfiguration c
              ON c.accountID = \(aggregate.envelope.accountID) AND c.enabled AND position(',' || e.event || ',' IN c.events) > 0
                 AND (c.envelopeID IS NULL OR c.envelopeID = \(aggregate.envelope.id))
            ORDER BY e.ord, c.createdAt, c.id COLLATE "C"
            """, logger: logger)
    }

    package func insertConnectConfiguration(_ configuration: ConnectConfigurationRecord) async throws {
        try await write { c in
            guard try await Self.exists(c, "SELECT 1 FROM account WHERE id = \(configuration.accountID) FOR SHARE", logger) else {
                throw StoreRefusal.noAccount(configuration.accountID)
            }
            let r = configuration
            try await c.query(
                """
                INSERT INTO connectConfiguration (id, accountID, name, url, events, includeData, enabled, includeHMAC, createdAt, envelopeID)
                VALUES (\(r.id), \(r.accountID), \(r.name), \(r.url), \(r.events), \(r.includeData), \(r.enabled), \(r.includeHMAC), \(r.createdAt),
                        \(r.envelopeID))
                """, logger: logger)
        }
    }

    package func connectConfigurations(accountID: String) async throws -> [ConnectConfigurationRecord] {
        try await read { c in
            try await Self.configurations(
                c, "SELECT \(unescaped: Self.configurationColumns) FROM connectConfiguration WHERE accountID = \(accountID) AND envelopeID IS NULL ORDER BY createdAt, id COLLATE \"C\"",
                logger)
        }
    }

    package func connectConfiguration(id: String, accountID: String?) async throws -> ConnectConfigurationRecord? {
        try await read { c in
            try await Self.configurations(
                c,
                """
                SELECT \(unescaped: Self.configurationColumns) FROM connectConfiguration
                WHERE id = \(id) AND (\(accountID)::text IS NULL OR accountID = \(accountID))
                """, logger
            ).first
        }
    }

    package func replaceConnectConfiguration(_ configuration: ConnectConfigurationRecord) async throws -> Bool {
        let r = configuration
        return try await write { c in
            try await Self.exists(
                c,
                """
                UPDATE connectConfiguration SET name = \(r.name), url = \(r.url), events = \(r.events), includeData = \(r.includeData),
                    enabled = \(r.enabled), includeHMAC = \(r.includeHMAC)
                WHERE id = \(r.id) AND accountID = \(r.accountID) RETURNING 1
                """, logger)
        }
    }

    package func deleteConnectConfiguration(id: String, accountID: String) async throws -> Bool {
        try await write { c in
            try await Self.exists(c, "DELETE FROM connectConfiguration WHERE id = \(id) AND accountID = \(accountID) RETURNING 1", logger)
        }
    }

    static let configurationColumns = "id, accountID, name, url, events, includeData, enabled, includeHMAC, createdAt, envelopeID"

    static func configurations(_ c: PostgresConnection, _ query: PostgresQuery, _ logger: Logger) async throws -> [ConnectConfigurationRecord] {
        var out: [ConnectConfigurationRecord] = []
        for try await (id, account, name, url, events, includeData, enabled, hmac, createdAt, envelope) in try await c.query(query, logger: logger)
            .decode((String, String, String, String, String, String, Bool, Bool, Date, String?).self)
        {
            var record = ConnectConfigurationRecord(
                id: id, accountID: account, name: name, url: url, events: [], includeData: [], enabled: enabled, includeHMAC: hmac,
                createdAt: createdAt, envelopeID: envelope)
            record.events = events
            record.includeData = includeData
            out.append(record)
        }
        return out
    }

    package func insertConnectKey(_ key: ConnectKeyRecord) async throws {
        try await write { c in
            guard try await Self.exists(c, "SELECT 1 FROM account WHERE id = \(key.accountID) FOR SHARE", logger) else {
                throw StoreRefusal.noAccount(key.accountID)
            }
            try await c.query(
                """
                INSERT INTO connectKey (id, accountID, secret, createdAt, revokedAt)
                VALUES (\(key.id), \(key.accountID), \(key.secret), \(key.createdAt), \(key.revokedAt))
                """, logger: logger)
        }
    }

    package func connectKeys(accountID: String) async throws -> [ConnectKeyRecord] {
        try await read { c in
            var keys: [ConnectKeyRecord] = []
            for try await (id, account, secret, createdAt, revokedAt) in try await c.query(
                "SELECT id, accountID, secret, createdAt, revokedAt FROM connectKey WHERE accountID = \(accountID) ORDER BY createdAt, id COLLATE \"C\"",
                logger: logger
            ).decode((String, String, String, Date, Date?).self) {
                keys.append(ConnectKeyRecord(id: id, accountID: account, secret: secret, createdAt: createdAt, revokedAt: revokedAt))
            }
            return keys
        }
    }

    package func revokeConnectKey(id: String, accountID: String, at: Date) async throws -> Bool {
        try await write { c in
            try await Self.exists(
                c, "UPDATE connectKey SET revokedAt = \(at) WHERE id = \(id) AND accountID = \(accountID) AND revokedAt IS NULL RETURNING 1", logger)
        }
    }

    static let deliveryColumns = """
        id, configurationID, accountID, envelopeID, event, recipientID, occurredAt, recordedAt, attempts, nextAttemptAt, claimedUntil,
        claimToken, lastAttemptAt, deliveredAt, failedAt, lastError
        """

    static func deliveries(_ c: PostgresConnection, _ query: PostgresQuery, _ logger: Logger) async throws -> [ConnectDeliveryRecord] {
        var out: [ConnectDeliveryRecord] = []
        for try await row in try await c.query(query, logger: logger)
            .decode((Int64, String, String, String, String, String?, Date, Date, Int64, Date, Date?, String?, Date?, Date?, Date?, String?).self)
        {
            out.append(
                ConnectDeliveryRecord(
                    id: row.0, configurationID: row.1, accountID: row.2, envelopeID: row.3, event: row.4, recipientID: row.5, occurredAt: row.6,
                    recordedAt: row.7, attempts: Int(row.8), nextAttemptAt: row.9, claimedUntil: row.10, claimToken: row.11, lastAttemptAt: row.12,
                    deliveredAt: row.13, failedAt: row.14, lastError: row.15))
        }
        return out
    }

    package func claimConnectDeliveries(
        now: Date, claimUntil: Date, limit: Int, perConfiguration: Int, excluding: Set<String>, token: String
    ) async throws -> [ConnectDeliveryRecord] {
        let excluded = excluding.sorted()
        return try await write { c in
            // The heads ranked per configuration; then the rows locked (a window function cannot
            // sit beside FOR UPDATE), re-checked on their latest version, skipping rows another
            // coordinator is locking now.
            try await Self.deliveries(
                c,
                """
                WITH ranked AS (
                    SELECT d.id, ROW_NUMBER() OVER (PARTITION BY d.configurationID ORDER BY d.id) AS rank
                    FROM connectDelivery d
                    WHERE d.deliveredAt IS NULL AND d.failedAt IS NULL AND d.nextAttemptAt <= \(now)
                      AND (d.claimedUntil IS NULL OR d.claimedUntil <= \(now))
                      AND NOT (d.configurationID = ANY(\(excluded)::text[]))
                      AND NOT EXISTS (
                        SELECT 1 FROM connectDelivery p
                        WHERE p.configurationID = d.configurationID AND p.envelopeID = d.envelopeID AND p.id < d.id
                          AND p.deliveredAt IS NULL AND p.failedAt IS NULL)),
                due AS (
                    SELECT x.id FROM connectDelivery x
                    WHERE x.id IN (SELECT id FROM ranked WHERE rank <= \(Int64(perConfiguration)))
                      AND x.deliveredAt IS NULL AND x.failedAt IS NULL AND (x.claimedUntil IS NULL OR x.claimedUntil <= \(now))
                    ORDER BY x.id LIMIT \(Int64(limit)) FOR UPDATE SKIP LOCKED)
                UPDATE connectDelivery SET claimedUntil = \(claimUntil), claimToken = \(token) FROM due WHERE connectDelivery.id = due.id
                RETURNING \(unescaped: Self.deliveryColumns.split(separator: ",").map { "connectDelivery." + $0.trimmingCharacters(in: .whitespacesAndNewlines) }.joined(separator: ", "))
                """, logger
            ).sorted { $0.id < $1.id }
        }
    }

    package func finishConnectDelivery(id: Int64, token: String, _ outcome: ConnectAttemptOutcome) async throws -> Bool {
        try await write { c in
            switch outcome {
            case .delivered(let at):
                return try await Self.exists(
                    c,
                    """
                    UPDATE connectDelivery SET attempts = attempts + 1, deliveredAt = \(at), lastAttemptAt = \(at), claimedUntil = NULL,
                        claimToken = NULL, lastError = NULL
                    WHERE id = \(id) AND claimToken = \(token) RETURNING 1
                    """, logger)
            case .retry(let next, let at, let error):
                return try await Self.exists(
                    c,
                    """
                    UPDATE connectDelivery SET attempts = attempts + 1, nextAttemptAt = \(next), lastAttemptAt = \(at), claimedUntil = NULL,
                        claimToken = NULL, lastError = \(error)
                    WHERE id = \(id) AND claimToken = \(token) RETURNING 1
                    """, logger)
            case .released:
                return try await Self.exists(
                    c, "UPDATE connectDelivery SET claimedUntil = NULL, claimToken = NULL WHERE id = \(id) AND claimToken = \(token) RETURNING 1", logger)
            case .failed(let at, let error):
                return try await Self.exists(
                    c,
                    """
                    UPDATE connectDelivery SET attempts = attempts + 1, failedAt = \(at), lastAttemptAt = \(at), claimedUntil = NULL,
                        claimToken = NULL, lastError = \(error)
                    WHERE id = \(id) AND claimToken = \(token) RETURNING 1
                    """, logger)
            }
        }
    }

    package func connectDeliveries(accountID: String, failedOnly: Bool, limit: Int) async throws -> [ConnectDeliveryRecord] {
        try await read { c in
            try await Self.deliveries(
                c,
                """
                SELECT \(unescaped: Self.deliveryColumns) FROM connectDelivery
                WHERE accountID = \(accountID) AND (NOT \(failedOnly) OR failedAt IS NOT NULL) ORDER BY id DESC LIMIT \(Int64(limit))
                """, logger)
        }
    }

    package func connectDeliveryCounts() async throws -> ConnectDeliveryCounts {
        // Each count reads its partial index, not the delivered history.
        try await read { c in
            var counts = ConnectDeliveryCounts(pending: 0, failed: 0)
            for try await (pending, failed) in try await c.query(
                """
                SELECT (SELECT count(*) FROM connectDelivery WHERE deliveredAt IS NULL AND failedAt IS NULL),
                       (SELECT count(*) FROM connectDelivery WHERE failedAt IS NOT NULL)
                """, logger: logger
            ).decode((Int64, Int64).self) {
                counts = ConnectDeliveryCounts(pending: Int(pending), failed: Int(failed))
            }
            return counts
        }
    }
}
