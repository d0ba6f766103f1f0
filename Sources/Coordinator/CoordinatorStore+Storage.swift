import FleetProtocol
import Foundation
import GRDB

/// The SQLite store's side of ``CoordinatorStorage``: each requirement one GRDB transaction,
/// every write through ``write(_:)`` (the fault monitor).
extension CoordinatorStore: CoordinatorStorage {
    package var location: String { path }

    // MARK: Accounts, users, tokens

    package func insertAccount(_ account: AccountRecord) async throws {
        try await write { db in
            guard try !AccountRecord.exists(db, key: account.id) else { throw StoreRefusal.accountExists(account.id) }
            try account.insert(db)
        }
    }

    package func insertUser(_ user: UserRecord) async throws {
        try await write { db in
            guard try AccountRecord.exists(db, key: user.accountID) else { throw StoreRefusal.noAccount(user.accountID) }
            if try UserRecord.filter(Column("email") == user.email).fetchCount(db) > 0 { throw StoreRefusal.emailTaken(user.email) }
            try user.insert(db)
        }
    }

    package func account(id: String) async throws -> AccountRecord? {
        try await database.read { db in
            try AccountRecord.fetchOne(db.cachedStatement(sql: "SELECT * FROM account WHERE id = ?"), arguments: [id])
        }
    }

    package func accounts() async throws -> [AccountRecord] {
        try await database.read { db in try AccountRecord.order(Column("name")).fetchAll(db) }
    }

    package func users(accountID: String) async throws -> [UserRecord] {
        try await database.read { db in try UserRecord.filter(Column("accountID") == accountID).order(Column("email")).fetchAll(db) }
    }

    package func issueToken(email: String, _ make: @escaping @Sendable (UserRecord?) throws -> AccessTokenRecord) async throws {
        try await write { db in
            let token = try make(try UserRecord.filter(Column("email") == email).fetchOne(db))
            try token.insert(db)
            // Expired tokens are useless; drop them so the table stays small.
            try AccessTokenRecord.filter(Column("expiresAt") < token.issuedAt).deleteAll(db)
        }
    }

    package func tokenOwner(tokenHash: Data) async throws -> TokenOwner? {
        // Asked on every authenticated request: cached statements, not a query built and
        // prepared each time (4.9% of the coordinator's CPU at 10,000 devices, docs/performance.md).
        try await database.read { db in
            guard
                let token = try AccessTokenRecord.fetchOne(
                    db.cachedStatement(sql: "SELECT * FROM accessToken WHERE tokenHash = ?"), arguments: [tokenHash])
            else { return nil }
            let user = try UserRecord.fetchOne(db.cachedStatement(sql: "SELECT * FROM user WHERE id = ?"), arguments: [token.userID])
            let account = try user.flatMap {
                try AccountRecord.fetchOne(db.cachedStatement(sql: "SELECT * FROM account WHERE id = ?"), arguments: [$0.accountID])
            }
            return TokenOwner(token: token, user: user, account: account)
        }
    }

    // MARK: Devices

    package func enroll(
        accountID: String, deviceID: String, curveKey: Data?, _ decide: @escaping @Sendable (EnrollmentFacts) throws -> EnrollmentChange
    ) async throws -> DeviceRecord {
        try await write { db in
            let holder = try curveKey.flatMap { try DeviceRecord.fetchOne(db, sql: "SELECT * FROM device WHERE curveKey = ?", arguments: [$0]) }
            let elsewhere =
                try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM device WHERE id = ? AND accountID != ?", arguments: [deviceID, accountID]) ?? 0
            let existing = try DeviceRecord.fetchOne(db, key: DeviceRecord.key(account: accountID, id: deviceID))
            switch try decide(EnrollmentFacts(keyHolder: holder, idInOtherAccount: elsewhere > 0, existing: existing)) {
            case .keep(let record):
                return record
            case .replace(let record):
                try record.update(db)
            case .insert(let record):
                try record.insert(db)
            }
            // Answer from the stored row (dates round to the store's precision), so a retried
            // enrollment gets exactly the same reply.
            guard let stored = try DeviceRecord.fetchOne(db, key: DeviceRecord.key(account: accountID, id: deviceID)) else {
                throw FleetError(.internal, "enrolled device \"\(deviceID)\" vanished", retryable: true)
            }
            return stored
        }
    }

    package func device(curveKey: Data) async throws -> DeviceRecord? {
        try await database.read { db in
            try DeviceRecord.fetchOne(db.cachedStatement(sql: "SELECT * FROM device WHERE curveKey = ?"), arguments: [curveKey])
        }
    }

    package func device(accountID: String, id: String) async throws -> DeviceRecord? {
        try await database.read { db in try DeviceRecord.fetchOne(db, key: DeviceRecord.key(account: accountID, id: id)) }
    }

    package func devices(id: String, limit: Int) async throws -> [DeviceRecord] {
        try await database.read { db in
            try DeviceRecord.fetchAll(
                db.cachedStatement(sql: "SELECT * FROM device WHERE id = ? ORDER BY accountID LIMIT ?"), arguments: [id, limit])
        }
    }

    package func revokeDevice(id: String, accountID: String?, at: Date) async throws -> DeviceRevocation {
        try await write { db in
            let accounts = try String.fetchAll(
                db, sql: "SELECT accountID FROM device WHERE id = ? AND (? IS NULL OR accountID = ?) ORDER BY accountID",
                arguments: [id, accountID, accountID])
            guard accounts.count <= 1 else { return .ambiguous(accounts: accounts) }
            guard let account = accounts.first else { return .notFound }
            try db.execute(
                sql: "UPDATE device SET revokedAt = ? WHERE accountID = ? AND id = ? AND revokedAt IS NULL", arguments: [at, account, id])
            return .revoked(accountID: account)
        }
    }

    // MARK: Sync

    package func ingest(_ pushes: [IngestPush]) async throws -> [Result<SyncAck, any Error>] {
        try await write { db in
            let state = SQLiteIngestState(db: db)
            return pushes.map { push in
                Result {
                    var ack: SyncAck?
                    try db.inSavepoint {
                        let plan = try push.walk(state)
                        try Self.store(plan, db)
                        ack = plan.ack
                        return .commit
                    }
                    guard let ack else { throw FleetError(.internal, "a push produced no ack", retryable: true) }
                    return ack
                }
            }
        }
    }

    /// Writes one push's plan with cached statements: this runs for every ingested item, and the
    /// records' Codable encoding showed in the ingest profile (loadtests/NOTES.md).
    private static func store(_ plan: IngestPlan, _ db: Database) throws {
        let insertEnvelope = try db.cachedStatement(
            sql: """
                INSERT INTO envelope (id, accountID, deviceID, sequence, transactionID, localEnvelopeID, name, status,
                                      payload, deviceSignature, createdAt)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """)
        let insertRecipient = try db.cachedStatement(
            sql: """
                INSERT INTO envelopeRecipient (envelopeID, recipientID, type, name, routingOrder, status, statusChangedAt, declineReason)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                """)
        for aggregate in plan.envelopes {
            let e = aggregate.envelope
            try insertEnvelope.execute(arguments: [
                e.id, e.accountID, e.deviceID, e.sequence, e.transactionID, e.localEnvelopeID, e.name, e.status, e.payload,
                e.deviceSignature, e.createdAt,
            ])
            for r in aggregate.recipients {
                try insertRecipient.execute(arguments: [
                    r.envelopeID, r.recipientID, r.type, r.name, r.routingOrder, r.status, r.statusChangedAt, r.declineReason,
                ])
            }
            try Self.publish(aggregate, db)
        }
        let insertResult = try db.cachedStatement(
            sql: """
                INSERT INTO syncResult (accountID, deviceID, sequence, outcome, envelopeID, reason, recordedAt, payloadSHA256)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                """)
        for r in plan.results {
            try insertResult.execute(arguments: [
                r.accountID, r.deviceID, r.sequence, r.outcome, r.envelopeID, r.reason, r.recordedAt, r.payloadSHA256,
            ])
        }
        if let last = plan.lastApplied {
            try db.cachedStatement(sql: "UPDATE device SET lastAppliedSequence = ? WHERE accountID = ? AND id = ?")
                .execute(arguments: [last, plan.accountID, plan.deviceID])
        }
    }

    package func syncResults(accountID: String, deviceID: String, after: Int64, limit: Int) async throws -> SyncResultsPage {
        try await database.read { db in
            let last = try Int64.fetchOne(
                db, sql: "SELECT lastAppliedSequence FROM device WHERE accountID = ? AND id = ?", arguments: [accountID, deviceID]) ?? 0
            // One more than the page, to know whether another page follows.
            let rows = try Row.fetchAll(
                db,
                sql: """
                    SELECT r.sequence, r.outcome, r.envelopeID, r.reason,
                           e.transactionID AS transactionID,
                           CASE WHEN e.deviceID = r.deviceID AND e.accountID = r.accountID THEN e.sequence END AS envelopeSequence
                    FROM syncResult r LEFT JOIN envelope e ON e.id = r.envelopeID
                    WHERE r.accountID = ? AND r.deviceID = ? AND r.sequence > ?
                    ORDER BY r.sequence LIMIT ?
                    """,
                arguments: [accountID, deviceID, after, limit + 1])
            return SyncResultsPage(
                lastApplied: last,
                rows: rows.prefix(limit).map {
                    SyncResultsPage.Row(
                        sequence: $0["sequence"], outcome: $0["outcome"], envelopeID: $0["envelopeID"], reason: $0["reason"],
                        transactionID: $0["transactionID"], envelopeSequence: $0["envelopeSequence"])
                },
                more: rows.count > limit)
        }
    }

    // MARK: Envelopes

    package func envelope(id: String, accountID: String?) async throws -> EnvelopeAggregate? {
        try await database.read { db in try Self.loadEnvelope(db, id: id, accountID: accountID) }
    }

    package func updateEnvelope<T: Sendable>(
        id: String, accountID: String?, _ change: @escaping @Sendable (inout EnvelopeAggregate) throws -> T
    ) async throws -> T {
        try await write { db in
            guard var aggregate = try Self.loadEnvelope(db, id: id, accountID: accountID) else {
                throw StoreRefusal.noEnvelope(id, inAccount: accountID)
            }
            let value = try change(&aggregate)
            try Self.saveEnvelope(aggregate, db)
            return value
        }
    }

    package func envelopeIDs(
        accountID: String, changedSince: Date, statuses: [String], search: String?, start: Int, count: Int
    ) async throws -> (total: Int, page: [String]) {
        try await database.read { db in
            var filter = """
                FROM envelope e WHERE e.accountID = ? AND (e.createdAt >= ? OR EXISTS (
                    SELECT 1 FROM envelopeRecipient r WHERE r.envelopeID = e.id AND r.statusChangedAt >= ?))
                """
            var arguments: StatementArguments = [accountID, changedSince, changedSince]
            if !statuses.isEmpty {
                filter += " AND e.status IN (\(statuses.map { _ in "?" }.joined(separator: ", ")))"
                arguments += StatementArguments(statuses)
            }
            if let search, let pattern = TemplateFilter.likePattern(containing: search) {
                // The envelope's name (its subject) or a recipient's name; SQLite's LIKE ignores ASCII case.
                filter += """
                     AND (e.name LIKE ? ESCAPE '\\' OR EXISTS (
                        SELECT 1 FROM envelopeRecipient s WHERE s.envelopeID = e.id AND s.name LIKE ? ESCAPE '\\'))
                    """
                arguments += [pattern, pattern]
            }
            let total = try Int.fetchOne(db, sql: "SELECT COUNT(*) " + filter, arguments: arguments) ?? 0
            let page = try String.fetchAll(
                db, sql: "SELECT e.id " + filter + " ORDER BY e.createdAt, e.id LIMIT ? OFFSET ?", arguments: arguments + [count, start])
            return (total, page)
        }
    }

    package func insertDraft(_ draft: RESTDraftRecord) async throws {
        try await write { db in
            guard try AccountRecord.exists(db, key: draft.accountID) else { throw StoreRefusal.noAccount(draft.accountID) }
            try draft.insert(db)
        }
    }

    package func draft(id: String, accountID: String) async throws -> RESTDraftRecord? {
        try await database.read { db in
            try RESTDraftRecord.filter(Column("id") == id && Column("accountID") == accountID).fetchOne(db)
        }
    }

    package func deleteDraft(id: String, accountID: String) async throws -> Bool {
        try await write { db in
            try RESTDraftRecord.filter(Column("id") == id && Column("accountID") == accountID).deleteAll(db) > 0
        }
    }

    /// An envelope and its recipients, in the caller's transaction (captive signing uses it too).
    static func loadEnvelope(_ db: Database, id: String, accountID: String?) throws -> EnvelopeAggregate? {
        // Cached statements: every captive page view and form post loads and saves an envelope,
        // and the query interface prepares its SQL anew each time.
        guard let record = try EnvelopeRecord.fetchOne(db.cachedStatement(sql: "SELECT * FROM envelope WHERE id = ?"), arguments: [id]),
              accountID == nil || record.accountID == accountID else { return nil }
        let recipients = try EnvelopeRecipientRecord.fetchAll(
            db.cachedStatement(sql: "SELECT * FROM envelopeRecipient WHERE envelopeID = ? ORDER BY routingOrder, recipientID"), arguments: [id])
        return EnvelopeAggregate(envelope: record, recipients: recipients)
    }

    /// Stores what a lifecycle event may change: the envelope's status and void reason, each recipient's state.
    static func saveEnvelope(_ aggregate: EnvelopeAggregate, _ db: Database) throws {
        try db.cachedStatement(sql: "UPDATE envelope SET status = ?, voidReason = ? WHERE id = ?")
            .execute(arguments: [aggregate.envelope.status, aggregate.envelope.voidReason, aggregate.envelope.id])
        let recipient = try db.cachedStatement(
            sql: "UPDATE envelopeRecipient SET status = ?, statusChangedAt = ?, declineReason = ? WHERE envelopeID = ? AND recipientID = ?")
        for r in aggregate.recipients {
            try recipient.execute(arguments: [r.status, r.statusChangedAt, r.declineReason, r.envelopeID, r.recipientID])
        }
        try Self.publish(aggregate, db)
    }

    public func envelopeSummaries() async throws -> [DeviceEnvelopeSummary] {
        try await database.read { db in
            try DeviceRecord.order(Column("id"), Column("accountID")).fetchAll(db).map { device in
                let sequences = try Int64.fetchAll(
                    db, sql: "SELECT sequence FROM envelope WHERE accountID = ? AND deviceID = ? ORDER BY sequence",
                    arguments: [device.accountID, device.id])
                let rejected = try Int.fetchOne(
                    db, sql: "SELECT COUNT(*) FROM syncResult WHERE accountID = ? AND deviceID = ? AND outcome = 'rejected'",
                    arguments: [device.accountID, device.id]) ?? 0
                return DeviceEnvelopeSummary(
                    deviceID: device.id, envelopes: sequences.count, sequences: sequences.map { UInt64(clamping: $0) }, rejected: rejected,
                    lastAppliedSequence: UInt64(clamping: device.lastAppliedSequence))
            }
        }
    }

    public func counts() async throws -> StoreCounts {
        try await database.read { db in
            var outcomes: [String: Int] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT outcome, COUNT(*) AS n FROM syncResult GROUP BY outcome") {
                outcomes[row["outcome"]] = row["n"]
            }
            return StoreCounts(devicesEnrolled: try DeviceRecord.fetchCount(db), envelopes: try EnvelopeRecord.fetchCount(db), syncOutcomes: outcomes)
        }
    }

    // MARK: Templates

    package func templates(accountID: String, filter: TemplateFilter, start: Int, count: Int) async throws -> (total: Int, page: [TemplateRecord]) {
        var conditions = ["accountID = ?"]
        var arguments: [(any DatabaseValueConvertible)?] = [accountID]
        if let pattern = filter.likePattern {
            conditions.append("name LIKE ? ESCAPE '\\'")  // SQLite's LIKE ignores ASCII case
            arguments.append(pattern)
        } else if !filter.text.isEmpty {
            conditions.append("name = ? COLLATE NOCASE")
            arguments.append(filter.text)
        }
        if let folder = filter.folder {
            conditions.append("folder = ? COLLATE NOCASE")
            arguments.append(folder)
        }
        let whereClause = conditions.joined(separator: " AND ")
        let statementArguments = StatementArguments(arguments)
        return try await database.read { db in
            let total = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM template WHERE \(whereClause)", arguments: statementArguments) ?? 0
            let rows = try TemplateRecord.fetchAll(
                db,
                sql: """
                    SELECT id, accountID, name, folder, lastModified, X'' AS definition FROM template WHERE \(whereClause)
                    ORDER BY name COLLATE NOCASE, id LIMIT ? OFFSET ?
                    """,
                arguments: statementArguments + [count, start])
            return (total, rows)
        }
    }

    package func insertTemplate(_ template: TemplateRecord) async throws {
        try await write { db in
            guard try AccountRecord.exists(db, key: template.accountID) else { throw StoreRefusal.noAccount(template.accountID) }
            guard try !TemplateRecord.exists(db, key: template.id) else { throw StoreRefusal.templateExists(template.id) }
            try template.insert(db)
        }
    }

    package func template(accountID: String, id: String) async throws -> TemplateRecord? {
        try await database.read { db in
            try TemplateRecord.filter(Column("accountID") == accountID && Column("id") == id).fetchOne(db)
        }
    }

    package func templateExists(id: String) async throws -> Bool {
        try await database.read { db in try TemplateRecord.exists(db, key: id) }
    }

    package func updateTemplate<T: Sendable>(
        accountID: String, id: String, at: Date, _ change: @escaping @Sendable (inout TemplateRecord) throws -> T
    ) async throws -> T? {
        try await write { db in
            guard var record = try TemplateRecord.filter(Column("accountID") == accountID && Column("id") == id).fetchOne(db) else {
                return nil
            }
            let value = try change(&record)
            try record.update(db)
            try Self.publish([.templateModified(record.lastModifiedDate, recordedAt: at)], about: EnvelopeEvent.templateSubject(id), accountID: accountID, db)
            return value
        }
    }

    // MARK: Captive signing

    package func insertCaptiveSession(
        envelopeID: String, accountID: String?,
        _ make: @escaping @Sendable (EnvelopeAggregate, _ allowedOrigins: [String]) throws -> CaptiveSessionRecord
    ) async throws -> CaptiveSessionRecord {
        try await write { db in
            guard let envelope = try Self.loadEnvelope(db, id: envelopeID, accountID: accountID) else {
                throw StoreRefusal.noEnvelope(envelopeID, inAccount: accountID)
            }
            let session = try make(envelope, try Self.returnOrigins(db, accountID: envelope.envelope.accountID))
            try session.insert(db)
            return session
        }
    }

    package func captiveSession(tokenHash: Data) async throws -> CaptiveUnit? {
        try await database.read { db in try Self.loadCaptive(db, tokenHash: tokenHash) }
    }

    package func updateCaptiveSession<T: Sendable>(
        tokenHash: Data, _ change: @escaping @Sendable (inout CaptiveUnit?) throws -> T
    ) async throws -> T {
        try await write { db in
            var unit = try Self.loadCaptive(db, tokenHash: tokenHash)
            let value = try change(&unit)
            guard let unit else { return value }
            try unit.session.update(db)
            if let envelope = unit.envelope { try Self.saveEnvelope(envelope, db) }
            for tab in unit.newTabs { try tab.save(db) }
            return value
        }
    }

    private static func loadCaptive(_ db: Database, tokenHash: Data) throws -> CaptiveUnit? {
        guard let session = try CaptiveSessionRecord.fetchOne(
            db.cachedStatement(sql: "SELECT * FROM captiveSession WHERE tokenHash = ?"), arguments: [tokenHash]) else { return nil }
        return CaptiveUnit(session: session, envelope: try loadEnvelope(db, id: session.envelopeID, accountID: session.accountID))
    }

    package func captiveTabs(envelopeID: String) async throws -> [CaptiveTabRecord] {
        try await database.read { db in
            try CaptiveTabRecord.filter(Column("envelopeID") == envelopeID).order(Column("tabIndex")).fetchAll(db)
        }
    }

    // MARK: Return origins, transport key

    package func returnOrigins(accountID: String) async throws -> [String] {
        try await database.read { db in try Self.returnOrigins(db, accountID: accountID) }
    }

    static func returnOrigins(_ db: Database, accountID: String) throws -> [String] {
        try String.fetchAll(db.cachedStatement(sql: "SELECT origin FROM accountReturnOrigin WHERE accountID = ? ORDER BY origin"), arguments: [accountID])
    }

    package func changeReturnOrigins(accountID: String, add: [String], remove: [String]) async throws -> [String] {
        try await write { db in
            guard try AccountRecord.exists(db, key: accountID) else { throw StoreRefusal.noAccount(accountID) }
            for origin in add {
                try db.execute(sql: "INSERT OR IGNORE INTO accountReturnOrigin (accountID, origin) VALUES (?, ?)", arguments: [accountID, origin])
            }
            for origin in remove {
                try db.execute(sql: "DELETE FROM accountReturnOrigin WHERE accountID = ? AND origin = ?", arguments: [accountID, origin])
            }
            return try Self.returnOrigins(db, accountID: accountID)
        }
    }

    package func insertIntegrationKey(_ key: IntegrationKeyRecord) async throws {
        try await write { db in
            guard try AccountRecord.exists(db, key: key.accountID) else { throw StoreRefusal.noAccount(key.accountID) }
            try key.insert(db)
        }
    }

    package func integrationKey(id: String) async throws -> IntegrationKeyRecord? {
        try await database.read { db in try IntegrationKeyRecord.fetchOne(db, key: id) }
    }

    package func integrationKeys(accountID: String?) async throws -> [IntegrationKeyRecord] {
        try await database.read { db in
            var request = IntegrationKeyRecord.order(Column("createdAt"), Column("id"))
            if let accountID { request = request.filter(Column("accountID") == accountID) }
            return try request.fetchAll(db)
        }
    }

    package func revokeIntegrationKey(id: String, accountID: String, at: Date) async throws -> Bool {
        try await write { db in
            try db.execute(
                sql: "UPDATE integrationKey SET revokedAt = ? WHERE id = ? AND accountID = ? AND revokedAt IS NULL", arguments: [at, id, accountID])
            return db.changesCount > 0
        }
    }

    package func grantConsent(_ consent: ConsentRecord) async throws {
        try await write { db in try consent.upsert(db) }
    }

    package func consent(integrationKeyID: String, userID: String) async throws -> ConsentRecord? {
        try await database.read { db in
            try ConsentRecord.fetchOne(db, key: ["integrationKeyID": integrationKeyID, "userID": userID])
        }
    }

    package func insertAuthorizationCode(_ code: AuthorizationCodeRecord, purgeBefore: Date) async throws {
        try await write { db in
            try db.execute(sql: "DELETE FROM oauthCode WHERE expiresAt < ?", arguments: [purgeBefore])
            try code.insert(db)
        }
    }

    package func redeemAuthorizationCode(codeHash: Data) async throws -> AuthorizationCodeRecord? {
        try await write { db in
            guard let code = try AuthorizationCodeRecord.fetchOne(db, key: codeHash) else { return nil }
            try code.delete(db)
            return code
        }
    }

    package func transportSecretKey(_ generate: @escaping @Sendable () throws -> Data) async throws -> Data {
        try await write { db -> Data in
            if let stored = try Data.fetchOne(db, sql: "SELECT secretKey FROM transportKey WHERE id = 1") { return stored }
            let fresh = try generate()
            try db.execute(sql: "INSERT INTO transportKey (id, secretKey, createdAt) VALUES (1, ?, ?)", arguments: [fresh, WallClock.system.now()])
            return fresh
        }
    }
}

/// The ingest walk's reads on SQLite, as it goes, in the walk's transaction.
private struct SQLiteIngestState: IngestState {
    let db: Database

    func deviceRow(accountID: String, id: String) throws -> IngestDeviceRow? {
        try Row.fetchOne(
            db.cachedStatement(
                sql: "SELECT lastAppliedSequence, publicKey, curveKey, revokedAt FROM device WHERE accountID = ? AND id = ?"),
            arguments: [accountID, id]
        ).map {
            IngestDeviceRow(lastApplied: $0["lastAppliedSequence"], publicKey: $0["publicKey"], curveKey: $0["curveKey"], revokedAt: $0["revokedAt"])
        }
    }

    func storedResult(accountID: String, deviceID: String, sequence: Int64) throws -> SyncResultRecord? {
        try SyncResultRecord.fetchOne(
            db.cachedStatement(sql: "SELECT * FROM syncResult WHERE accountID = ? AND deviceID = ? AND sequence = ?"),
            arguments: [accountID, deviceID, sequence])
    }

    func envelopeOwner(id: String) throws -> EnvelopeOwner? {
        // Only the columns the answer needs: the full row would read the payload blob back.
        try Row.fetchOne(db.cachedStatement(sql: "SELECT sequence, deviceID, localEnvelopeID FROM envelope WHERE id = ?"), arguments: [id])
            .map { EnvelopeOwner(sequence: $0["sequence"], deviceID: $0["deviceID"], localEnvelopeID: $0["localEnvelopeID"]) }
    }
}
