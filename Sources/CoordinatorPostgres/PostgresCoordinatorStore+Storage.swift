import Coordinator
import FleetProtocol
import Foundation
import PostgresNIO

extension PostgresCoordinatorStore: CoordinatorStorage {
    // MARK: Accounts, users, tokens

    package func insertAccount(_ account: AccountRecord) async throws {
        try await write { c in
            let inserted = try await c.query(
                """
                INSERT INTO account (id, name, offlineSigning, hourlyLimit, burstLimit, burstWindowSeconds, createdAt)
                VALUES (\(account.id), \(account.name), \(account.offlineSigning), \(account.hourlyLimit), \(account.burstLimit),
                        \(account.burstWindowSeconds), \(account.createdAt))
                ON CONFLICT (id) DO NOTHING RETURNING id
                """, logger: logger
            ).collect()
            guard !inserted.isEmpty else { throw StoreRefusal.accountExists(account.id) }
        }
    }

    package func insertUser(_ user: UserRecord) async throws {
        try await write { c in
            guard try await Self.exists(c, "SELECT 1 FROM account WHERE id = \(user.accountID)", logger) else {
                throw StoreRefusal.noAccount(user.accountID)
            }
            let inserted = try await c.query(
                """
                INSERT INTO "user" (id, accountID, name, email, secretSalt, secretHash, createdAt)
                VALUES (\(user.id), \(user.accountID), \(user.name), \(user.email), \(user.secretSalt), \(user.secretHash), \(user.createdAt))
                ON CONFLICT DO NOTHING RETURNING id
                """, logger: logger
            ).collect()
            guard inserted.isEmpty else { return }
            if try await Self.exists(c, "SELECT 1 FROM \"user\" WHERE lower(email) = lower(\(user.email))", logger) {
                throw StoreRefusal.emailTaken(user.email)
            }
            throw FleetError(.alreadyExists, "a user with id \"\(user.id)\" already exists")
        }
    }

    package func account(id: String) async throws -> AccountRecord? {
        try await read { c in try await Self.accounts(c, "SELECT \(unescaped: Columns.account) FROM account WHERE id = \(id)", logger).first }
    }

    package func accounts() async throws -> [AccountRecord] {
        try await read { c in try await Self.accounts(c, "SELECT \(unescaped: Columns.account) FROM account ORDER BY name COLLATE \"C\"", logger) }
    }

    package func users(accountID: String) async throws -> [UserRecord] {
        try await read { c in
            try await Self.users(c, "SELECT \(unescaped: Columns.user) FROM \"user\" WHERE accountID = \(accountID) ORDER BY email COLLATE \"C\"", logger)
        }
    }

    package func issueToken(email: String, _ make: @escaping @Sendable (UserRecord?) throws -> AccessTokenRecord) async throws {
        try await write { c in
            let user = try await Self.users(c, "SELECT \(unescaped: Columns.user) FROM \"user\" WHERE lower(email) = lower(\(email))", logger).first
            let token = try make(user)
            try await c.query(
                """
                INSERT INTO accessToken (tokenHash, userID, issuedAt, expiresAt)
                VALUES (\(token.tokenHash), \(token.userID), \(token.issuedAt), \(token.expiresAt))
                """, logger: logger)
            // Expired tokens are useless; drop them so the table stays small.
            try await c.query("DELETE FROM accessToken WHERE expiresAt < \(token.issuedAt)", logger: logger)
        }
    }

    package func tokenOwner(tokenHash: Data) async throws -> TokenOwner? {
        try await read { c in
            var tokens: [AccessTokenRecord] = []
            for try await (hash, userID, issuedAt, expiresAt) in try await c.query(
                "SELECT tokenHash, userID, issuedAt, expiresAt FROM accessToken WHERE tokenHash = \(tokenHash)", logger: logger
            ).decode((Data, String, Date, Date).self) {
                tokens.append(AccessTokenRecord(tokenHash: hash, userID: userID, issuedAt: issuedAt, expiresAt: expiresAt))
            }
            guard let token = tokens.first else { return nil }
            let user = try await Self.users(c, "SELECT \(unescaped: Columns.user) FROM \"user\" WHERE id = \(token.userID)", logger).first
            var account: AccountRecord?
            if let user {
                account = try await Self.accounts(c, "SELECT \(unescaped: Columns.account) FROM account WHERE id = \(user.accountID)", logger).first
            }
            return TokenOwner(token: token, user: user, account: account)
        }
    }

    // MARK: Devices

    package func enroll(
        accountID: String, deviceID: String, curveKey: Data?, _ decide: @escaping @Sendable (EnrollmentFacts) throws -> EnrollmentChange
    ) async throws -> DeviceRecord {
        try await write { c in
            // Two coordinators enrolling the same id serialise on this lock (the row may not exist yet).
            try await c.query("SELECT pg_advisory_xact_lock(hashtext(\(accountID + "\n" + deviceID)))", logger: logger)
            var holder: DeviceRecord?
            if let curveKey {
                holder = try await Self.devices(c, "SELECT \(unescaped: Columns.device) FROM device WHERE curveKey = \(curveKey)", logger).first
            }
            let elsewhere = try await Self.exists(c, "SELECT 1 FROM device WHERE id = \(deviceID) AND accountID <> \(accountID)", logger)
            let existing = try await Self.devices(
                c, "SELECT \(unescaped: Columns.device) FROM device WHERE accountID = \(accountID) AND id = \(deviceID) FOR UPDATE", logger
            ).first
            switch try decide(EnrollmentFacts(keyHolder: holder, idInOtherAccount: elsewhere, existing: existing)) {
            case .keep(let record):
                return record
            case .replace(let d):
                try await c.query(
                    """
                    UPDATE device SET userID = \(d.userID), publicKey = \(d.publicKey), curveKey = \(d.curveKey), revokedAt = \(d.revokedAt)
                    WHERE accountID = \(d.accountID) AND id = \(d.id)
                    """, logger: logger)
            case .insert(let d):
                try await c.query(
                    """
                    INSERT INTO device (id, accountID, userID, publicKey, enrolledAt, lastAppliedSequence, curveKey, revokedAt)
                    VALUES (\(d.id), \(d.accountID), \(d.userID), \(d.publicKey), \(d.enrolledAt), \(d.lastAppliedSequence), \(d.curveKey), \(d.revokedAt))
                    """, logger: logger)
            }
            // Answer from the stored row (times round to the server's precision), so a retried
            // enrollment gets exactly the same reply.
            guard
                let stored = try await Self.devices(
                    c, "SELECT \(unescaped: Columns.device) FROM device WHERE accountID = \(accountID) AND id = \(deviceID)", logger
                ).first
            else {
                throw FleetError(.internal, "enrolled device \"\(deviceID)\" vanished", retryable: true)
            }
            return stored
        }
    }

    package func device(curveKey: Data) async throws -> DeviceRecord? {
        try await read { c in try await Self.devices(c, "SELECT \(unescaped: Columns.device) FROM device WHERE curveKey = \(curveKey)", logger).first }
    }

    package func device(accountID: String, id: String) async throws -> DeviceRecord? {
        try await read { c in
            try await Self.devices(c, "SELECT \(unescaped: Columns.device) FROM device WHERE accountID = \(accountID) AND id = \(id)", logger).first
        }
    }

    package func devices(id: String, limit: Int) async throws -> [DeviceRecord] {
        try await read { c in
            try await Self.devices(
                c, "SELECT \(unescaped: Columns.device) FROM device WHERE id = \(id) ORDER BY accountID COLLATE \"C\" LIMIT \(limit)", logger)
        }
    }

    package func revokeDevice(id: String, accountID: String?, at: Date) async throws -> DeviceRevocation {
        try await write { c in
            var accounts: [String] = []
            for try await account in try await c.query(
                """
                SELECT accountID FROM device WHERE id = \(id) AND (\(accountID)::text IS NULL OR accountID = \(accountID))
                ORDER BY accountID COLLATE "C" FOR UPDATE
                """, logger: logger
            ).decode(String.self) {
                accounts.append(account)
            }
            guard accounts.count <= 1 else { return .ambiguous(accounts: accounts) }
            guard let account = accounts.first else { return .notFound }
            try await c.query(
                "UPDATE device SET revokedAt = \(at) WHERE accountID = \(account) AND id = \(id) AND revokedAt IS NULL", logger: logger)
            return .revoked(accountID: account)
        }
    }

    // MARK: Sync

    package func ingest(_ pushes: [IngestPush]) async throws -> [Result<SyncAck, any Error>] {
        try await write { c in
            // Lock every device of the group in one order, so that two coordinators' groups never
            // wait on each other in a cycle; a device's pushes then apply one transaction at a time.
            let keys = Set(pushes.map { "\($0.device.accountID)\n\($0.device.id)" }).sorted()
            for key in keys {
                let parts = key.split(separator: "\n", maxSplits: 1).map(String.init)
                try await c.query(
                    "SELECT 1 FROM device WHERE accountID = \(parts[0]) AND id = \(parts.count > 1 ? parts[1] : "") FOR UPDATE", logger: logger)
            }
            var results: [Result<SyncAck, any Error>] = []
            for push in pushes {
                results.append(await Self.applyInSavepoint(push, c, logger))
            }
            return results
        }
    }

    /// One push in its savepoint. A unique-key violation means another coordinator created the
    /// same envelope (same transaction id, another device) after this walk read: the push is
    /// walked once more, and now sees it.
    private static func applyInSavepoint(_ push: IngestPush, _ c: PostgresConnection, _ logger: Logger) async -> Result<SyncAck, any Error> {
        for attempt in 1...2 {
            do {
                try await c.query("SAVEPOINT push", logger: logger)
                do {
                    let state = try await PostgresIngestState.read(for: push, c, logger)
                    let plan = try push.verified(above: state.storedLast).walk(state)
                    try await store(plan, c, logger)
                    try await c.query("RELEASE SAVEPOINT push", logger: logger)
                    return .success(plan.ack)
                } catch {
                    try await c.query("ROLLBACK TO SAVEPOINT push", logger: logger)
                    try await c.query("RELEASE SAVEPOINT push", logger: logger)
                    if attempt == 1, isUniqueViolation(error) { continue }
                    return .failure(translated(error))
                }
            } catch {
                return .failure(translated(error))
            }
        }
        return .failure(FleetError(.internal, "a push could not be applied", retryable: true))
    }

    private static func store(_ plan: IngestPlan, _ c: PostgresConnection, _ logger: Logger) async throws {
        for aggregate in plan.envelopes {
            let e = aggregate.envelope
            try await c.query(
                """
                INSERT INTO envelope (id, accountID, deviceID, sequence, transactionID, localEnvelopeID, name, status, payload,
                                      deviceSignature, createdAt)
                VALUES (\(e.id), \(e.accountID), \(e.deviceID), \(e.sequence), \(e.transactionID), \(e.localEnvelopeID), \(e.name),
                        \(e.status), \(e.payload), \(e.deviceSignature), \(e.createdAt))
                """, logger: logger)
            for r in aggregate.recipients {
                try await c.query(
                    """
                    INSERT INTO envelopeRecipient (envelopeID, recipientID, type, name, routingOrder, status, statusChangedAt, declineReason)
                    VALUES (\(r.envelopeID), \(r.recipientID), \(r.type), \(r.name), \(r.routingOrder), \(r.status), \(r.statusChangedAt),
                            \(r.declineReason))
                    """, logger: logger)
            }
            try await Self.publish(aggregate, c, logger)
        }
        for r in plan.results {
            try await c.query(
                """
                INSERT INTO syncResult (accountID, deviceID, sequence, outcome, envelopeID, reason, recordedAt, payloadSHA256)
                VALUES (\(r.accountID), \(r.deviceID), \(r.sequence), \(r.outcome), \(r.envelopeID), \(r.reason), \(r.recordedAt), \(r.payloadSHA256))
                """, logger: logger)
        }
        if let last = plan.lastApplied {
            try await c.query(
                "UPDATE device SET lastAppliedSequence = \(last) WHERE accountID = \(plan.accountID) AND id = \(plan.deviceID)", logger: logger)
        }
    }

    package func syncResults(accountID: String, deviceID: String, after: Int64, limit: Int) async throws -> SyncResultsPage {
        try await read { c in
            var last: Int64 = 0
            for try await value in try await c.query(
                "SELECT lastAppliedSequence FROM device WHERE accountID = \(accountID) AND id = \(deviceID)", logger: logger
            ).decode(Int64.self) {
                last = value
            }
            var rows: [SyncResultsPage.Row] = []
            for try await (sequence, outcome, envelopeID, reason, transactionID, envelopeSequence) in try await c.query(
                """
                SELECT r.sequence, r.outcome, r.envelopeID, r.reason, e.transactionID,
                       CASE WHEN e.deviceID = r.deviceID AND e.accountID = r.accountID THEN e.sequence END
                FROM syncResult r LEFT JOIN envelope e ON e.id = r.envelopeID
                WHERE r.accountID = \(accountID) AND r.deviceID = \(deviceID) AND r.sequence > \(after)
                ORDER BY r.sequence LIMIT \(limit + 1)
                """, logger: logger
            ).decode((Int64, String, String?, String?, String?, Int64?).self) {
                rows.append(
                    SyncResultsPage.Row(
                        sequence: sequence, outcome: outcome, envelopeID: envelopeID, reason: reason, transactionID: transactionID,
                        envelopeSequence: envelopeSequence))
            }
            return SyncResultsPage(lastApplied: last, rows: Array(rows.prefix(limit)), more: rows.count > limit)
        }
    }

    // MARK: Envelopes

    package func envelope(id: String, accountID: String?) async throws -> EnvelopeAggregate? {
        try await read { c in try await Self.loadEnvelope(c, id: id, accountID: accountID, lock: false, logger) }
    }

    package func updateEnvelope<T: Sendable>(
        id: String, accountID: String?, _ change: @escaping @Sendable (inout EnvelopeAggregate) throws -> T
    ) async throws -> T {
        try await write { c in
            guard var aggregate = try await Self.loadEnvelope(c, id: id, accountID: accountID, lock: true, logger) else {
                throw StoreRefusal.noEnvelope(id, inAccount: accountID)
            }
            let value = try change(&aggregate)
            try await Self.saveEnvelope(aggregate, c, logger)
            return value
        }
    }

    /// Stores what a lifecycle event may change: the envelope's status and void reason, each recipient's state.
    static func saveEnvelope(_ aggregate: EnvelopeAggregate, _ c: PostgresConnection, _ logger: Logger) async throws {
        let e = aggregate.envelope
        try await c.query("UPDATE envelope SET status = \(e.status), voidReason = \(e.voidReason) WHERE id = \(e.id)", logger: logger)
        for r in aggregate.recipients {
            try await c.query(
                """
                UPDATE envelopeRecipient SET status = \(r.status), statusChangedAt = \(r.statusChangedAt), declineReason = \(r.declineReason)
                WHERE envelopeID = \(r.envelopeID) AND recipientID = \(r.recipientID)
                """, logger: logger)
        }
        try await Self.publish(aggregate, c, logger)
    }

    static func loadEnvelope(_ c: PostgresConnection, id: String, accountID: String?, lock: Bool, _ logger: Logger) async throws -> EnvelopeAggregate? {
        var envelopes: [EnvelopeRecord] = []
        for try await row in try await c.query(
            """
            SELECT id, accountID, deviceID, sequence, transactionID, localEnvelopeID, name, status, payload, deviceSignature, createdAt, voidReason
            FROM envelope WHERE id = \(id) \(unescaped: lock ? "FOR UPDATE" : "")
            """, logger: logger
        ).decode((String, String, String, Int64, String, String, String, String, Data, Data, Date, String?).self) {
            let (id, account, device, sequence, transaction, local, name, status, payload, signature, createdAt, voidReason) = row
            envelopes.append(
                EnvelopeRecord(
                    id: id, accountID: account, deviceID: device, sequence: sequence, transactionID: transaction, localEnvelopeID: local,
                    name: name, status: status, payload: payload, deviceSignature: signature, createdAt: createdAt, voidReason: voidReason))
        }
        guard let envelope = envelopes.first, accountID == nil || envelope.accountID == accountID else { return nil }
        var recipients: [EnvelopeRecipientRecord] = []
        for try await (envelopeID, recipientID, type, name, routingOrder, status, changedAt, declineReason) in try await c.query(
            """
            SELECT envelopeID, recipientID, type, name, routingOrder, status, statusChangedAt, declineReason
            FROM envelopeRecipient WHERE envelopeID = \(id) ORDER BY routingOrder, recipientID COLLATE "C"
            """, logger: logger
        ).decode((String, String, String, String, Int, String, Date?, String?).self) {
            recipients.append(
                EnvelopeRecipientRecord(
                    envelopeID: envelopeID, recipientID: recipientID, type: type, name: name, routingOrder: routingOrder, status: status,
                    statusChangedAt: changedAt, declineReason: declineReason))
        }
        return EnvelopeAggregate(envelope: envelope, recipients: recipients)
    }

    public func envelopeSummaries() async throws -> [DeviceEnvelopeSummary] {
        try await read { c in
            var summaries: [DeviceEnvelopeSummary] = []
            for device in try await Self.devices(
                c, "SELECT \(unescaped: Columns.device) FROM device ORDER BY id COLLATE \"C\", accountID COLLATE \"C\"", logger)
            {
                var sequences: [UInt64] = []
                for try await sequence in try await c.query(
                    "SELECT sequence FROM envelope WHERE accountID = \(device.accountID) AND deviceID = \(device.id) ORDER BY sequence",
                    logger: logger
                ).decode(Int64.self) {
                    sequences.append(UInt64(clamping: sequence))
                }
                let rejected = try await Self.count(
                    c, "SELECT COUNT(*) FROM syncResult WHERE accountID = \(device.accountID) AND deviceID = \(device.id) AND outcome = 'rejected'",
                    logger)
                summaries.append(
                    DeviceEnvelopeSummary(
                        deviceID: device.id, envelopes: sequences.count, sequences: sequences, rejected: rejected,
                        lastAppliedSequence: UInt64(clamping: device.lastAppliedSequence)))
            }
            return summaries
        }
    }

    public func counts() async throws -> StoreCounts {
        try await read { c in
            var outcomes: [String: Int] = [:]
            for try await (outcome, n) in try await c.query("SELECT outcome, COUNT(*) FROM syncResult GROUP BY outcome", logger: logger)
                .decode((String, Int).self)
            {
                outcomes[outcome] = n
            }
            return StoreCounts(
                devicesEnrolled: try await Self.count(c, "SELECT COUNT(*) FROM device", logger),
                envelopes: try await Self.count(c, "SELECT COUNT(*) FROM envelope", logger), syncOutcomes: outcomes)
        }
    }

    // MARK: Templates

    package func insertDraft(_ draft: RESTDraftRecord) async throws {
        try await write { c in
            guard try await Self.exists(c, "SELECT 1 FROM account WHERE id = \(draft.accountID)", logger) else {
                throw StoreRefusal.noAccount(draft.accountID)
            }
            try await c.query(
                """
                INSERT INTO restDraft (id, accountID, transactionID, definition, createdAt)
                VALUES (\(draft.id), \(draft.accountID), \(draft.transactionID), \(draft.definition), \(draft.createdAt))
                """, logger: logger)
        }
    }

    package func draft(id: String, accountID: String) async throws -> RESTDraftRecord? {
        try await read { c in
            for try await (id, account, transaction, definition, createdAt) in try await c.query(
                "SELECT id, accountID, transactionID, definition, createdAt FROM restDraft WHERE id = \(id) AND accountID = \(accountID)",
                logger: logger
            ).decode((String, String, String, Data, Date).self) {
                return RESTDraftRecord(id: id, accountID: account, transactionID: transaction, definition: definition, createdAt: createdAt)
            }
            return nil
        }
    }

    package func deleteDraft(id: String, accountID: String) async throws -> Bool {
        try await write { c in
            try await Self.exists(c, "DELETE FROM restDraft WHERE id = \(id) AND accountID = \(accountID) RETURNING 1", logger)
        }
    }

    package func envelopeIDs(
        accountID: String, changedSince: Date, statuses: [String], search: String?, start: Int, count: Int
    ) async throws -> (total: Int, page: [String]) {
        var binds = PostgresBindings()
        binds.append(accountID)
        binds.append(changedSince)
        var clause = """
            e.accountID = $1 AND (e.createdAt >= $2 OR EXISTS (
                SELECT 1 FROM envelopeRecipient r WHERE r.envelopeID = e.id AND r.statusChangedAt >= $2))
            """
        if !statuses.isEmpty {
            binds.append(statuses)
            clause += " AND e.status = ANY($\(binds.count))"
        }
        if let search, let pattern = TemplateFilter.likePattern(containing: search) {
            // As SQLite's: the envelope's name or a recipient's, ASCII case folded by lower() (locale C).
            binds.append(pattern)
            clause += """
                 AND (lower(e.name) LIKE lower($\(binds.count)) ESCAPE '\\' OR EXISTS (
                    SELECT 1 FROM envelopeRecipient s WHERE s.envelopeID = e.id AND lower(s.name) LIKE lower($\(binds.count)) ESCAPE '\\'))
                """
        }
        let whereClause = clause, whereBinds = binds
        return try await read { c in
            let total = try await Self.count(c, PostgresQuery(unsafeSQL: "SELECT COUNT(*) FROM envelope e WHERE \(whereClause)", binds: whereBinds), logger)
            var binds = whereBinds
            binds.append(count)
            binds.append(start)
            let query = PostgresQuery(
                unsafeSQL: """
                    SELECT e.id FROM envelope e WHERE \(whereClause)
                    ORDER BY e.createdAt, e.id COLLATE "C" LIMIT $\(binds.count - 1) OFFSET $\(binds.count)
                    """, binds: binds)
            var page: [String] = []
            for try await id in try await c.query(query, logger: logger).decode(String.self) { page.append(id) }
            return (total, page)
        }
    }

    package func templates(accountID: String, filter: TemplateFilter, start: Int, count: Int) async throws -> (total: Int, page: [TemplateRecord]) {
        // lower() folds ASCII letters as SQLite's NOCASE and LIKE do (the test clusters' locale is C;
        // under another locale lower() folds more letters, docs/storage.md).
        var binds = PostgresBindings()
        binds.append(accountID)
        var clause = "accountID = $1"
        if let pattern = filter.likePattern {
            binds.append(pattern)
            clause += " AND lower(name) LIKE lower($\(binds.count)) ESCAPE '\\'"
        } else if !filter.text.isEmpty {
            binds.append(filter.text)
            clause += " AND lower(name) = lower($\(binds.count))"
        }
        if let folder = filter.folder {
            binds.append(folder)
            clause += " AND lower(folder) = lower($\(binds.count))"
        }
        let whereClause = clause, whereBinds = binds
        return try await read { c in
            let total = try await Self.count(c, PostgresQuery(unsafeSQL: "SELECT COUNT(*) FROM template WHERE \(whereClause)", binds: whereBinds), logger)
            var binds = whereBinds
            binds.append(count)
            binds.append(start)
            let query = PostgresQuery(
                unsafeSQL: """
                    SELECT id, accountID, name, folder, lastModified FROM template WHERE \(whereClause)
                    ORDER BY lower(name) COLLATE "C", id COLLATE "C" LIMIT $\(binds.count - 1) OFFSET $\(binds.count)
                    """, binds: binds)
            var page: [TemplateRecord] = []
            for try await (id, account, name, folder, lastModified) in try await c.query(query, logger: logger)
                .decode((String, String, String, String?, Int64).self)
            {
                page.append(TemplateRecord(id: id, accountID: account, name: name, folder: folder, lastModified: lastModified, definition: Data()))
            }
            return (total, page)
        }
    }

    package func insertTemplate(_ template: TemplateRecord) async throws {
        try await write { c in
            guard try await Self.exists(c, "SELECT 1 FROM account WHERE id = \(template.accountID)", logger) else {
                throw StoreRefusal.noAccount(template.accountID)
            }
            let inserted = try await c.query(
                """
                INSERT INTO template (id, accountID, name, folder, lastModified, definition)
                VALUES (\(template.id), \(template.accountID), \(template.name), \(template.folder), \(template.lastModified), \(template.definition))
                ON CONFLICT (id) DO NOTHING RETURNING id
                """, logger: logger
            ).collect()
            guard !inserted.isEmpty else { throw StoreRefusal.templateExists(template.id) }
        }
    }

    package func template(accountID: String, id: String) async throws -> TemplateRecord? {
        try await read { c in try await Self.template(c, accountID: accountID, id: id, lock: false, logger) }
    }

    package func templateExists(id: String) async throws -> Bool {
        try await read { c in try await Self.exists(c, "SELECT 1 FROM template WHERE id = \(id)", logger) }
    }

    package func updateTemplate<T: Sendable>(
        accountID: String, id: String, at: Date, _ change: @escaping @Sendable (inout TemplateRecord) throws -> T
    ) async throws -> T? {
        try await write { c in
            guard var record = try await Self.template(c, accountID: accountID, id: id, lock: true, logger) else { return nil }
            let value = try change(&record)
            try await c.query(
                """
                UPDATE template SET name = \(record.name), folder = \(record.folder), lastModified = \(record.lastModified),
                       definition = \(record.definition)
                WHERE id = \(record.id)
                """, logger: logger)
            try await Self.publish([.templateModified(record.lastModifiedDate, recordedAt: at)], about: EnvelopeEvent.templateSubject(id), accountID: accountID, c, logger)
            return value
        }
    }

    static func template(_ c: PostgresConnection, accountID: String, id: String, lock: Bool, _ logger: Logger) async throws -> TemplateRecord? {
        for try await (id, account, name, folder, lastModified, definition) in try await c.query(
            """
            SELECT id, accountID, name, folder, lastModified, definition FROM template WHERE accountID = \(accountID) AND id = \(id)
            \(unescaped: lock ? "FOR UPDATE" : "")
            """, logger: logger
        ).decode((String, String, String, String?, Int64, Data).self) {
            return TemplateRecord(id: id, accountID: account, name: name, folder: folder, lastModified: lastModified, definition: definition)
        }
        return nil
    }

    // MARK: Captive signing

    package func insertCaptiveSession(
        envelopeID: String, accountID: String?,
        _ make: @escaping @Sendable (EnvelopeAggregate, _ allowedOrigins: [String]) throws -> CaptiveSessionRecord
    ) async throws -> CaptiveSessionRecord {
        try await write { c in
            guard let envelope = try await Self.loadEnvelope(c, id: envelopeID, accountID: accountID, lock: false, logger) else {
                throw StoreRefusal.noEnvelope(envelopeID, inAccount: accountID)
            }
            let s = try make(envelope, try await Self.returnOrigins(c, accountID: envelope.envelope.accountID, logger))
            try await c.query(
                """
                INSERT INTO captiveSession (tokenHash, accountID, envelopeID, recipientID, returnURL, locale, issuedBy, issuedAt, expiresAt,
                                            openedAt, sessionHash, lastActivityAt, finishedAt, outcome)
                VALUES (\(s.tokenHash), \(s.accountID), \(s.envelopeID), \(s.recipientID), \(s.returnURL), \(s.locale), \(s.issuedBy),
                        \(s.issuedAt), \(s.expiresAt), \(s.openedAt), \(s.sessionHash), \(s.lastActivityAt), \(s.finishedAt), \(s.outcome))
                """, logger: logger)
            return s
        }
    }

    package func captiveSession(tokenHash: Data) async throws -> CaptiveUnit? {
        try await read { c in try await Self.loadCaptive(c, tokenHash: tokenHash, lock: false, logger) }
    }

    package func updateCaptiveSession<T: Sendable>(
        tokenHash: Data, _ change: @escaping @Sendable (inout CaptiveUnit?) throws -> T
    ) async throws -> T {
        try await write { c in
            var unit = try await Self.loadCaptive(c, tokenHash: tokenHash, lock: true, logger)
            let value = try change(&unit)
            guard let unit else { return value }
            let s = unit.session
            try await c.query(
                """
                UPDATE captiveSession SET openedAt = \(s.openedAt), sessionHash = \(s.sessionHash), lastActivityAt = \(s.lastActivityAt),
                       finishedAt = \(s.finishedAt), outcome = \(s.outcome)
                WHERE tokenHash = \(s.tokenHash)
                """, logger: logger)
            if let envelope = unit.envelope { try await Self.saveEnvelope(envelope, c, logger) }
            for t in unit.newTabs {
                try await c.query(
                    """
                    INSERT INTO captiveTab (envelopeID, tabIndex, recipientID, type, value, selected, isoRecord, svg, pointerType, pointCount, capturedAt)
                    VALUES (\(t.envelopeID), \(t.tabIndex), \(t.recipientID), \(t.type), \(t.value), \(t.selected), \(t.isoRecord), \(t.svg),
                            \(t.pointerType), \(t.pointCount), \(t.capturedAt))
                    ON CONFLICT (envelopeID, tabIndex) DO UPDATE SET recipientID = excluded.recipientID, type = excluded.type,
                        value = excluded.value, selected = excluded.selected, isoRecord = excluded.isoRecord, svg = excluded.svg,
                        pointerType = excluded.pointerType, pointCount = excluded.pointCount, capturedAt = excluded.capturedAt
                    """, logger: logger)
            }
            return value
        }
    }

    static func loadCaptive(_ c: PostgresConnection, tokenHash: Data, lock: Bool, _ logger: Logger) async throws -> CaptiveUnit? {
        var sessions: [CaptiveSessionRecord] = []
        for try await row in try await c.query(
            """
            SELECT tokenHash, accountID, envelopeID, recipientID, returnURL, locale, issuedBy, issuedAt, expiresAt, openedAt, sessionHash,
                   lastActivityAt, finishedAt, outcome
            FROM captiveSession WHERE tokenHash = \(tokenHash) \(unescaped: lock ? "FOR UPDATE" : "")
            """, logger: logger
        ).decode((Data, String, String, String, String, String?, String, Date, Date, Date?, Data?, Date?, Date?, String?).self) {
            let (hash, account, envelope, recipient, returnURL, locale, issuedBy, issuedAt, expiresAt, openedAt, sessionHash, lastActivity, finished, outcome) = row
            sessions.append(
                CaptiveSessionRecord(
                    tokenHash: hash, accountID: account, envelopeID: envelope, recipientID: recipient, returnURL: returnURL, locale: locale,
                    issuedBy: issuedBy, issuedAt: issuedAt, expiresAt: expiresAt, openedAt: openedAt, sessionHash: sessionHash,
                    lastActivityAt: lastActivity, finishedAt: finished, outcome: outcome))
        }
        guard let session = sessions.first else { return nil }
        let envelope = try await loadEnvelope(c, id: session.envelopeID, accountID: session.accountID, lock: lock, logger)
        return CaptiveUnit(session: session, envelope: envelope)
    }

    package func captiveTabs(envelopeID: String) async throws -> [CaptiveTabRecord] {
        try await read { c in
            var tabs: [CaptiveTabRecord] = []
            for try await row in try await c.query(
                """
                SELECT envelopeID, tabIndex, recipientID, type, value, selected, isoRecord, svg, pointerType, pointCount, capturedAt
                FROM captiveTab WHERE envelopeID = \(envelopeID) ORDER BY tabIndex
                """, logger: logger
            ).decode((String, Int, String, String, String?, Bool?, Data?, String?, String?, Int?, Date).self) {
                let (envelope, index, recipient, type, value, selected, iso, svg, pointer, points, capturedAt) = row
                tabs.append(
                    CaptiveTabRecord(
                        envelopeID: envelope, tabIndex: index, recipientID: recipient, type: type, value: value, selected: selected,
                        isoRecord: iso, svg: svg, pointerType: pointer, pointCount: points, capturedAt: capturedAt))
            }
            return tabs
        }
    }

    // MARK: Return origins, transport key

    package func returnOrigins(accountID: String) async throws -> [String] {
        try await read { c in try await Self.returnOrigins(c, accountID: accountID, logger) }
    }

    static func returnOrigins(_ c: PostgresConnection, accountID: String, _ logger: Logger) async throws -> [String] {
        var origins: [String] = []
        for try await origin in try await c.query(
            "SELECT origin FROM accountReturnOrigin WHERE accountID = \(accountID) ORDER BY origin COLLATE \"C\"", logger: logger
        ).decode(String.self) {
            origins.append(origin)
        }
        return origins
    }

    package func changeReturnOrigins(accountID: String, add: [String], remove: [String]) async throws -> [String] {
        try await write { c in
            guard try await Self.exists(c, "SELECT 1 FROM account WHERE id = \(accountID) FOR UPDATE", logger) else {
                throw StoreRefusal.noAccount(accountID)
            }
            for origin in add {
                try await c.query(
                    "INSERT INTO accountReturnOrigin (accountID, origin) VALUES (\(accountID), \(origin)) ON CONFLICT DO NOTHING", logger: logger)
            }
            for origin in remove {
                try await c.query("DELETE FROM accountReturnOrigin WHERE accountID = \(accountID) AND origin = \(origin)", logger: logger)
            }
            return try await Self.returnOrigins(c, accountID: accountID, logger)
        }
    }

    package func insertIntegrationKey(_ key: IntegrationKeyRecord) async throws {
        try await write { c in
            guard try await Self.exists(c, "SELECT 1 FROM account WHERE id = \(key.accountID) FOR SHARE", logger) else {
                throw StoreRefusal.noAccount(key.accountID)
            }
            try await c.query(
                """
                INSERT INTO integrationKey (id, accountID, name, publicKey, createdAt, revokedAt, secretHash, redirectURIs)
                VALUES (\(key.id), \(key.accountID), \(key.name), \(key.publicKey), \(key.createdAt), \(key.revokedAt), \(key.secretHash),
                    \(key.redirectURIs))
                """, logger: logger)
        }
    }

    package func integrationKey(id: String) async throws -> IntegrationKeyRecord? {
        try await read { c in try await Self.integrationKeys(c, "SELECT \(unescaped: Self.integrationKeyColumns) FROM integrationKey WHERE id = \(id)", logger).first }
    }

    package func integrationKeys(accountID: String?) async throws -> [IntegrationKeyRecord] {
        try await read { c in
            try await Self.integrationKeys(
                c,
                """
                SELECT \(unescaped: Self.integrationKeyColumns) FROM integrationKey
                WHERE \(accountID)::text IS NULL OR accountID = \(accountID) ORDER BY createdAt, id COLLATE "C"
                """, logger)
        }
    }

    static let integrationKeyColumns = "id, accountID, name, publicKey, createdAt, revokedAt, secretHash, redirectURIs"

    static func integrationKeys(_ c: PostgresConnection, _ query: PostgresQuery, _ logger: Logger) async throws -> [IntegrationKeyRecord] {
        var keys: [IntegrationKeyRecord] = []
        for try await (id, account, name, publicKey, createdAt, revokedAt, secretHash, redirectURIs) in try await c.query(query, logger: logger)
            .decode((String, String, String, String, Date, Date?, Data?, String).self)
        {
            keys.append(
                IntegrationKeyRecord(
                    id: id, accountID: account, name: name, publicKey: publicKey, createdAt: createdAt, revokedAt: revokedAt, secretHash: secretHash,
                    redirectURIs: redirectURIs.split(separator: "\n").map(String.init)))
        }
        return keys
    }

    package func revokeIntegrationKey(id: String, accountID: String, at: Date) async throws -> Bool {
        try await write { c in
            try await Self.exists(
                c, "UPDATE integrationKey SET revokedAt = \(at) WHERE id = \(id) AND accountID = \(accountID) AND revokedAt IS NULL RETURNING 1", logger)
        }
    }

    package func grantConsent(_ consent: ConsentRecord) async throws {
        try await write { c in
            try await c.query(
                """
                INSERT INTO oauthConsent (integrationKeyID, userID, scopes, grantedAt)
                VALUES (\(consent.integrationKeyID), \(consent.userID), \(consent.scopes), \(consent.grantedAt))
                ON CONFLICT (integrationKeyID, userID) DO UPDATE SET scopes = EXCLUDED.scopes, grantedAt = EXCLUDED.grantedAt
                """, logger: logger)
        }
    }

    package func consent(integrationKeyID: String, userID: String) async throws -> ConsentRecord? {
        try await read { c in
            for try await (scopes, grantedAt) in try await c.query(
                "SELECT scopes, grantedAt FROM oauthConsent WHERE integrationKeyID = \(integrationKeyID) AND userID = \(userID)", logger: logger
            ).decode((String, Date).self) {
                return ConsentRecord(integrationKeyID: integrationKeyID, userID: userID, scopes: scopes, grantedAt: grantedAt)
            }
            return nil
        }
    }

    package func insertAuthorizationCode(_ code: AuthorizationCodeRecord, purgeBefore: Date) async throws {
        try await write { c in
            try await c.query("DELETE FROM oauthCode WHERE expiresAt < \(purgeBefore)", logger: logger)
            try await c.query(
                """
                INSERT INTO oauthCode (codeHash, integrationKeyID, userID, scopes, redirectURI, codeChallenge, expiresAt)
                VALUES (\(code.codeHash), \(code.integrationKeyID), \(code.userID), \(code.scopes), \(code.redirectURI), \(code.codeChallenge),
                    \(code.expiresAt))
                """, logger: logger)
        }
    }

    package func redeemAuthorizationCode(codeHash: Data) async throws -> AuthorizationCodeRecord? {
        // One DELETE … RETURNING: of two coordinators racing for one code, one gets the row.
        try await write { c in
            var taken: [AuthorizationCodeRecord] = []
            for try await (keyID, userID, scopes, redirectURI, challenge, expiresAt) in try await c.query(
                "DELETE FROM oauthCode WHERE codeHash = \(codeHash) RETURNING integrationKeyID, userID, scopes, redirectURI, codeChallenge, expiresAt",
                logger: logger
            ).decode((String, String, String, String, String?, Date).self) {
                taken.append(
                    AuthorizationCodeRecord(
                        codeHash: codeHash, integrationKeyID: keyID, userID: userID, scopes: scopes, redirectURI: redirectURI, codeChallenge: challenge,
                        expiresAt: expiresAt))
            }
            return taken.first
        }
    }

    package func transportSecretKey(_ generate: @escaping @Sendable () throws -> Data) async throws -> Data {
        try await write { c in
            let fresh = try generate()
            // The first coordinator's key wins; every later one reads it.
            try await c.query(
                "INSERT INTO transportKey (id, secretKey, createdAt) VALUES (1, \(fresh), \(WallClock.system.now())) ON CONFLICT (id) DO NOTHING", logger: logger)
            for try await key in try await c.query("SELECT secretKey FROM transportKey WHERE id = 1", logger: logger).decode(Data.self) {
                return key
            }
            throw FleetError(.internal, "the transport key vanished", retryable: true)
        }
    }

    // MARK: Row helpers

    enum Columns {
        static let account = "id, name, offlineSigning, hourlyLimit, burstLimit, burstWindowSeconds, createdAt"
        static let user = "id, accountID, name, email, secretSalt, secretHash, createdAt"
        static let device = "id, accountID, userID, publicKey, enrolledAt, lastAppliedSequence, curveKey, revokedAt"
    }

    static func accounts(_ c: PostgresConnection, _ query: PostgresQuery, _ logger: Logger) async throws -> [AccountRecord] {
        var rows: [AccountRecord] = []
        for try await (id, name, offline, hourly, burst, window, createdAt) in try await c.query(query, logger: logger)
            .decode((String, String, Bool, Int, Int, Int, Date).self)
        {
            rows.append(
                AccountRecord(
                    id: id, name: name, offlineSigning: offline, hourlyLimit: hourly, burstLimit: burst, burstWindowSeconds: window, createdAt: createdAt))
        }
        return rows
    }

    static func users(_ c: PostgresConnection, _ query: PostgresQuery, _ logger: Logger) async throws -> [UserRecord] {
        var rows: [UserRecord] = []
        for try await (id, account, name, email, salt, hash, createdAt) in try await c.query(query, logger: logger)
            .decode((String, String, String, String, Data, Data, Date).self)
        {
            rows.append(UserRecord(id: id, accountID: account, name: name, email: email, secretSalt: salt, secretHash: hash, createdAt: createdAt))
        }
        return rows
    }

    static func devices(_ c: PostgresConnection, _ query: PostgresQuery, _ logger: Logger) async throws -> [DeviceRecord] {
        var rows: [DeviceRecord] = []
        for try await (id, account, user, publicKey, enrolledAt, last, curveKey, revokedAt) in try await c.query(query, logger: logger)
            .decode((String, String, String, Data, Date, Int64, Data?, Date?).self)
        {
            rows.append(
                DeviceRecord(
                    id: id, accountID: account, userID: user, publicKey: publicKey, enrolledAt: enrolledAt, lastAppliedSequence: last,
                    curveKey: curveKey, revokedAt: revokedAt))
        }
        return rows
    }

    static func exists(_ c: PostgresConnection, _ query: PostgresQuery, _ logger: Logger) async throws -> Bool {
        try await !c.query(query, logger: logger).collect().isEmpty
    }

    static func count(_ c: PostgresConnection, _ query: PostgresQuery, _ logger: Logger) async throws -> Int {
        for try await n in try await c.query(query, logger: logger).decode(Int.self) { return n }
        return 0
    }
}

/// The ingest walk's reads on PostgreSQL: the device row (locked by the group), and the stored
/// results and envelopes the push can touch, read before the walk in one query each.
struct PostgresIngestState: IngestState {
    var storedLast: Int64
    var row: IngestDeviceRow?
    var results: [Int64: SyncResultRecord]
    var owners: [String: EnvelopeOwner]

    static func read(for push: IngestPush, _ c: PostgresConnection, _ logger: Logger) async throws -> PostgresIngestState {
        let accountID = push.device.accountID, deviceID = push.device.id
        var row: IngestDeviceRow?
        for try await (last, publicKey, curveKey, revokedAt) in try await c.query(
            "SELECT lastAppliedSequence, publicKey, curveKey, revokedAt FROM device WHERE accountID = \(accountID) AND id = \(deviceID)",
            logger: logger
        ).decode((Int64, Data, Data?, Date?).self) {
            row = IngestDeviceRow(lastApplied: last, publicKey: publicKey, curveKey: curveKey, revokedAt: revokedAt)
        }
        let storedLast = row?.lastApplied ?? 0
        let sequences = push.push.items.map(\.sequence).filter { $0 <= UInt64(max(0, storedLast)) }.map { Int64($0) }
        var results: [Int64: SyncResultRecord] = [:]
        if !sequences.isEmpty {
            for try await (sequence, outcome, envelopeID, reason, recordedAt, digest) in try await c.query(
                """
                SELECT sequence, outcome, envelopeID, reason, recordedAt, payloadSHA256 FROM syncResult
                WHERE accountID = \(accountID) AND deviceID = \(deviceID) AND sequence = ANY(\(sequences))
                """, logger: logger
            ).decode((Int64, String, String?, String?, Date, Data?).self) {
                results[sequence] = SyncResultRecord(
                    accountID: accountID, deviceID: deviceID, sequence: sequence, outcome: outcome, envelopeID: envelopeID, reason: reason,
                    recordedAt: recordedAt, payloadSHA256: digest)
            }
        }
        let candidates = push.verified(above: storedLast).candidateEnvelopeIDs
        var owners: [String: EnvelopeOwner] = [:]
        if !candidates.isEmpty {
            for try await (id, sequence, owner, local) in try await c.query(
                "SELECT id, sequence, deviceID, localEnvelopeID FROM envelope WHERE id = ANY(\(candidates))", logger: logger
            ).decode((String, Int64, String, String).self) {
                owners[id] = EnvelopeOwner(sequence: sequence, deviceID: owner, localEnvelopeID: local)
            }
        }
        return PostgresIngestState(storedLast: storedLast, row: row, results: results, owners: owners)
    }

    func deviceRow(accountID: String, id: String) throws -> IngestDeviceRow? { row }

    func storedResult(accountID: String, deviceID: String, sequence: Int64) throws -> SyncResultRecord? { results[sequence] }

    func envelopeOwner(id: String) throws -> EnvelopeOwner? { owners[id] }
}
