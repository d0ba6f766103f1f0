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
        try await publish(aggregate.events, about: aggregate.envelope.id, accountID: aggregate.envelope.accountID, c, logger)
    }

    /// Writes events about `subjectID` (an envelope, or a template for `template-*` events) to the
    /// outbox, in the caller's transaction (as SQLite's `publish`).
    static func publish(_ events: [EnvelopeEvent], about subjectID: String, accountID: String, _ c: PostgresConnection, _ logger: Logger) async throws {
        guard !events.isEmpty else { return }
        let kinds = events.map(\.kind.rawValue)
        let recipients = events.map { $0.recipientID ?? "" }
        let occurred = events.map(\.occurredAt)
        let recorded = events.map(\.recordedAt)
        try await c.query(
            """
            INSERT INTO connectDelivery (configurationID, accountID, envelopeID, event, recipientID, occurredAt, recordedAt,
                                         ready, attempts, nextAttemptAt)
            SELECT c.id, c.accountID, \(subjectID), e.event, NULLIF(e.recipient, ''), e.occurred, e.recorded,
                   -- ready: the configuration's first event of this change, and none of the envelope's waiting before it
                   ROW_NUMBER() OVER (PARTITION BY c.id ORDER BY e.ord) = 1
                     AND NOT EXISTS (SELECT 1 FROM connectDelivery p WHERE p.configurationID = c.id AND p.envelopeID = \(subjectID)
                                     AND p.deliveredAt IS NULL AND p.failedAt IS NULL),
                   0, e.recorded
            FROM unnest(\(kinds)::text[], \(recipients)::text[], \(occurred)::timestamptz[], \(recorded)::timestamptz[])
                 WITH ORDINALITY AS e(event, recipient, occurred, recorded, ord)
            JOIN connectConfiguration c
              ON c.accountID = \(accountID) AND c.enabled AND position(',' || e.event || ',' IN c.events) > 0
                 AND (c.envelopeID IS NULL OR c.envelopeID = \(subjectID))
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
        id, configurationID, accountID, envelopeID, event, recipientID, occurredAt, recordedAt, ready, attempts, nextAttemptAt, claimedUntil,
        claimToken, lastAttemptAt, deliveredAt, failedAt, lastError
        """

    static func deliveries(_ c: PostgresConnection, _ query: PostgresQuery, _ logger: Logger) async throws -> [ConnectDeliveryRecord] {
        var out: [ConnectDeliveryRecord] = []
        for try await row in try await c.query(query, logger: logger)
            .decode((Int64, String, String, String, String, String?, Date, Date, Bool, Int64, Date, Date?, String?, Date?, Date?, Date?, String?).self)
        {
            out.append(
                ConnectDeliveryRecord(
                    id: row.0, configurationID: row.1, accountID: row.2, envelopeID: row.3, event: row.4, recipientID: row.5, occurredAt: row.6,
                    recordedAt: row.7, ready: row.8, attempts: Int(row.9), nextAttemptAt: row.10, claimedUntil: row.11, claimToken: row.12,
                    lastAttemptAt: row.13, deliveredAt: row.14, failedAt: row.15, lastError: row.16))
        }
        return out
    }

    package func settleConnectDeliveries(_ outcomes: [ConnectOutcomeRecord], claim: ConnectClaimRequest?) async throws -> ConnectSettlement {
        let full = claim?.full ?? []
        func candidates(_ request: ConnectClaimRequest, _ count: Int) -> PostgresQuery {
            """
            SELECT \(unescaped: Self.deliveryColumns) FROM connectDelivery
            WHERE ready AND deliveredAt IS NULL AND failedAt IS NULL AND nextAttemptAt <= \(request.now)
              AND (claimedUntil IS NULL OR claimedUntil <= \(request.now)) AND NOT (configurationID = ANY(\(full)::text[]))
            ORDER BY id LIMIT \(Int64(count))
            """
        }
        var claim = claim
        if outcomes.isEmpty, let request = claim {
            // Most polls find nothing due: a read says so without a write transaction.
            guard try await read({ c in try await !Self.deliveries(c, candidates(request, 1), logger).isEmpty }) else { return ConnectSettlement() }
        }
        if let request = claim, request.limit <= 0 { claim = nil }
        return try await write { [claim, logger] c in
            var settlement = ConnectSettlement()
            // In id order, as every settling transaction locks them: two coordinators cannot deadlock on them.
            for outcome in outcomes.sorted(by: { $0.id < $1.id }) where try await Self.record(outcome, c, logger) {
                settlement.recorded.insert(outcome.id)
            }
            guard let request = claim else { return settlement }
            // The rows chosen are locked and claimed in one statement: rows another coordinator is
            // locking are skipped, and a locked row is re-checked on its latest version, so one
            // claimed meanwhile is not taken again.
            let chosen = request.take(try await Self.deliveries(c, candidates(request, request.limit * 4), logger))
            guard !chosen.isEmpty else { return settlement }
            let ids = chosen.map(\.id)
            settlement.claimed = try await Self.deliveries(
                c,
                """
                WITH due AS (
                    SELECT id FROM connectDelivery
                    WHERE id = ANY(\(ids)::bigint[]) AND ready AND deliveredAt IS NULL AND failedAt IS NULL
                      AND (claimedUntil IS NULL OR claimedUntil <= \(request.now))
                    FOR UPDATE SKIP LOCKED)
                UPDATE connectDelivery SET claimedUntil = \(request.claimUntil), claimToken = \(request.token) FROM due WHERE connectDelivery.id = due.id
                RETURNING \(unescaped: Self.deliveryColumns.split(separator: ",").map { "connectDelivery." + $0.trimmingCharacters(in: .whitespacesAndNewlines) }.joined(separator: ", "))
                """, logger
            ).sorted { $0.id < $1.id }
            return settlement
        }
    }

    /// Records one outcome under its claim and, when the row is done with, makes its envelope's
    /// next event ready. False when the claim no longer holds the row.
    private static func record(_ record: ConnectOutcomeRecord, _ c: PostgresConnection, _ logger: Logger) async throws -> Bool {
        let recorded = try await Self.record(id: record.id, token: record.token, record.outcome, c, logger)
        if recorded, record.outcome.ends {
            // The envelope's next event for this configuration is ready now.
            try await c.query(
                """
                UPDATE connectDelivery SET ready = TRUE WHERE id = (
                    SELECT n.id FROM connectDelivery n, (SELECT configurationID, envelopeID FROM connectDelivery WHERE id = \(record.id)) d
                    WHERE n.configurationID = d.configurationID AND n.envelopeID = d.envelopeID
                      AND n.deliveredAt IS NULL AND n.failedAt IS NULL ORDER BY n.id LIMIT 1)
                """, logger: logger)
        }
        return recorded
    }

    private static func record(id: Int64, token: String, _ outcome: ConnectAttemptOutcome, _ c: PostgresConnection, _ logger: Logger) async throws -> Bool {
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

    package func pruneConnectDeliveries(recordedBefore cutoff: Date, limit: Int) async throws -> Int {
        guard limit > 0 else { return 0 }
        // Found in a read, outside the deleting transaction (as SQLite's).
        let boundary = try await read { [logger] c in
            var maxID: Int64?
            for try await id in try await c.query("SELECT max(id) FROM connectDelivery", logger: logger).decode(Int64?.self) { maxID = id }
            var search = ConnectPruneBoundary(cutoff: cutoff, maxID: maxID)
            while let id = search.probe {
                var found: Date?
                for try await at in try await c.query(
                    "SELECT recordedAt FROM connectDelivery WHERE id >= \(id) ORDER BY id LIMIT 1", logger: logger
                ).decode(Date.self) {
                    found = at
                }
                search.found(found)
            }
            return search.boundary
        }
        guard boundary > 0 else { return 0 }
        return try await write { [logger] c in
            try await Self.count(
                c,
                """
                WITH gone AS (
                    DELETE FROM connectDelivery WHERE id IN (
                        SELECT id FROM connectDelivery
                        WHERE id < \(boundary) AND recordedAt < \(cutoff) AND (deliveredAt IS NOT NULL OR failedAt IS NOT NULL)
                        ORDER BY id LIMIT \(Int64(limit)) FOR UPDATE SKIP LOCKED)
                    RETURNING 1)
                SELECT count(*) FROM gone
                """, logger)
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
