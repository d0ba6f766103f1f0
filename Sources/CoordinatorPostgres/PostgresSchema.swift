import FleetProtocol
import Logging
import PostgresNIO

/// The coordinator's tables on PostgreSQL: the same tables, keys and columns as the SQLite store
/// at its migration `v9-return-origins` (docs/storage.md), in one schema per store. Migrations are
/// numbered and recorded in `schemaMigration`; a coordinator applies the missing ones at start,
/// under an advisory lock, so coordinators starting together do not race.
enum PostgresSchema {
    struct Migration {
        let name: String
        let statements: [String]
    }

    static let migrations: [Migration] = [
        Migration(
            name: "v1-coordinator",
            statements: [
                """
                CREATE TABLE account (
                    id text PRIMARY KEY, name text NOT NULL, offlineSigning boolean NOT NULL, hourlyLimit bigint NOT NULL,
                    burstLimit bigint NOT NULL, burstWindowSeconds bigint NOT NULL, createdAt timestamptz NOT NULL)
                """,
                """
                CREATE TABLE "user" (
                    id text PRIMARY KEY, accountID text NOT NULL REFERENCES account (id) ON DELETE CASCADE, name text NOT NULL,
                    email text NOT NULL, secretSalt bytea NOT NULL, secretHash bytea NOT NULL, createdAt timestamptz NOT NULL)
                """,
                // Emails are unique without regard to ASCII case, as SQLite's NOCASE.
                #"CREATE UNIQUE INDEX user_email ON "user" (lower(email))"#,
                """
                CREATE TABLE accessToken (
                    tokenHash bytea PRIMARY KEY, userID text NOT NULL REFERENCES "user" (id) ON DELETE CASCADE,
                    issuedAt timestamptz NOT NULL, expiresAt timestamptz NOT NULL)
                """,
                "CREATE INDEX accessToken_userID ON accessToken (userID)",
                """
                CREATE TABLE device (
                    id text NOT NULL, accountID text NOT NULL REFERENCES account (id) ON DELETE CASCADE,
                    userID text NOT NULL REFERENCES "user" (id) ON DELETE CASCADE, publicKey bytea NOT NULL,
                    enrolledAt timestamptz NOT NULL, lastAppliedSequence bigint NOT NULL DEFAULT 0, curveKey bytea,
                    revokedAt timestamptz, PRIMARY KEY (accountID, id))
                """,
                "CREATE UNIQUE INDEX device_curveKey ON device (curveKey) WHERE curveKey IS NOT NULL",
                "CREATE INDEX device_id ON device (id)",
                """
                CREATE TABLE envelope (
                    id text PRIMARY KEY, accountID text NOT NULL REFERENCES account (id) ON DELETE CASCADE,
                    deviceID text NOT NULL, sequence bigint NOT NULL, transactionID text NOT NULL, localEnvelopeID text NOT NULL,
                    name text NOT NULL, status text NOT NULL, payload bytea NOT NULL, deviceSignature bytea NOT NULL,
                    createdAt timestamptz NOT NULL, voidReason text,
                    UNIQUE (accountID, transactionID), UNIQUE (accountID, deviceID, sequence),
                    FOREIGN KEY (accountID, deviceID) REFERENCES device (accountID, id) ON DELETE CASCADE)
                """,
                """
                CREATE TABLE envelopeRecipient (
                    envelopeID text NOT NULL REFERENCES envelope (id) ON DELETE CASCADE, recipientID text NOT NULL,
                    type text NOT NULL, name text NOT NULL, routingOrder bigint NOT NULL, status text NOT NULL,
                    statusChangedAt timestamptz, declineReason text, PRIMARY KEY (envelopeID, recipientID))
                """,
                """
                CREATE TABLE syncResult (
                    accountID text NOT NULL, deviceID text NOT NULL, sequence bigint NOT NULL, outcome text NOT NULL,
                    envelopeID text, reason text, recordedAt timestamptz NOT NULL, payloadSHA256 bytea,
                    PRIMARY KEY (accountID, deviceID, sequence),
                    FOREIGN KEY (accountID, deviceID) REFERENCES device (accountID, id) ON DELETE CASCADE)
                """,
                """
                CREATE TABLE template (
                    id text PRIMARY KEY, accountID text NOT NULL REFERENCES account (id) ON DELETE CASCADE, name text NOT NULL,
                    folder text, lastModified bigint NOT NULL, definition bytea NOT NULL)
                """,
                "CREATE INDEX template_accountID ON template (accountID)",
                """
                CREATE TABLE captiveSession (
                    tokenHash bytea PRIMARY KEY, accountID text NOT NULL REFERENCES account (id) ON DELETE CASCADE,
                    envelopeID text NOT NULL REFERENCES envelope (id) ON DELETE CASCADE, recipientID text NOT NULL,
                    returnURL text NOT NULL, locale text, issuedBy text NOT NULL, issuedAt timestamptz NOT NULL,
                    expiresAt timestamptz NOT NULL, openedAt timestamptz, sessionHash bytea, lastActivityAt timestamptz,
                    finishedAt timestamptz, outcome text)
                """,
                "CREATE INDEX captiveSession_envelopeID ON captiveSession (envelopeID)",
                """
                CREATE TABLE captiveTab (
                    envelopeID text NOT NULL REFERENCES envelope (id) ON DELETE CASCADE, tabIndex bigint NOT NULL,
                    recipientID text NOT NULL, type text NOT NULL, value text, selected boolean, isoRecord bytea, svg text,
                    pointerType text, pointCount bigint, capturedAt timestamptz NOT NULL, PRIMARY KEY (envelopeID, tabIndex))
                """,
                """
                CREATE TABLE transportKey (
                    id bigint PRIMARY KEY CHECK (id = 1), secretKey bytea NOT NULL, createdAt timestamptz NOT NULL)
                """,
                """
                CREATE TABLE accountReturnOrigin (
                    accountID text NOT NULL REFERENCES account (id) ON DELETE CASCADE, origin text NOT NULL,
                    PRIMARY KEY (accountID, origin))
                """,
            ]),
        // The order in which the store applied envelopes and results, for the checker's snapshot
        // (docs/storage.md, "The checker's snapshot"). Each insert draws the next value after the
        // ingest locked its device's row, so per device the values follow the commits.
        Migration(
            name: "v2-ingest-order",
            statements: [
                "ALTER TABLE envelope ADD COLUMN ingestOrder bigserial",
                "ALTER TABLE syncResult ADD COLUMN ingestOrder bigserial",
            ]),
        // SQLite's `v10-token-expiry`: each token issue deletes the expired tokens, which scanned
        // the whole table without this index.
        Migration(
            name: "v3-token-expiry",
            statements: ["CREATE INDEX accessToken_expiresAt ON accessToken (expiresAt)"]),
        // SQLite's `v11-rest-drafts`: envelopes created over REST as drafts, kept apart until sent.
        Migration(
            name: "v4-rest-drafts",
            statements: [
                """
                CREATE TABLE restDraft (
                    id text PRIMARY KEY, accountID text NOT NULL REFERENCES account (id) ON DELETE CASCADE,
                    transactionID text NOT NULL, definition bytea NOT NULL, createdAt timestamptz NOT NULL)
                """
            ]),
        // SQLite's `v12-oauth`: integration keys and users' consent to them.
        Migration(
            name: "v5-oauth",
            statements: [
                """
                CREATE TABLE integrationKey (
                    id text PRIMARY KEY, accountID text NOT NULL REFERENCES account (id) ON DELETE CASCADE,
                    name text NOT NULL, publicKey text NOT NULL, createdAt timestamptz NOT NULL, revokedAt timestamptz)
                """,
                "CREATE INDEX integrationKey_accountID ON integrationKey (accountID)",
                """
                CREATE TABLE oauthConsent (
                    integrationKeyID text NOT NULL REFERENCES integrationKey (id) ON DELETE CASCADE,
                    userID text NOT NULL REFERENCES "user" (id) ON DELETE CASCADE,
                    scopes text NOT NULL, grantedAt timestamptz NOT NULL, PRIMARY KEY (integrationKeyID, userID))
                """,
            ]),
        // SQLite's `v13-oauth-code`: client secrets and redirect URIs of keys, authorization codes.
        Migration(
            name: "v6-oauth-code",
            statements: [
                "ALTER TABLE integrationKey ADD COLUMN secretHash bytea, ADD COLUMN redirectURIs text NOT NULL DEFAULT ''",
                """
                CREATE TABLE oauthCode (
                    codeHash bytea PRIMARY KEY,
                    integrationKeyID text NOT NULL REFERENCES integrationKey (id) ON DELETE CASCADE,
                    userID text NOT NULL REFERENCES "user" (id) ON DELETE CASCADE,
                    scopes text NOT NULL, redirectURI text NOT NULL, codeChallenge text, expiresAt timestamptz NOT NULL)
                """,
                "CREATE INDEX oauthCode_expiresAt ON oauthCode (expiresAt)",
            ]),
        // SQLite's `v14-connect`: Connect configurations, HMAC keys, the outbox of deliveries.
        Migration(
            name: "v7-connect",
            statements: [
                """
                CREATE TABLE connectConfiguration (
                    id text PRIMARY KEY, accountID text NOT NULL REFERENCES account (id) ON DELETE CASCADE,
                    name text NOT NULL, url text NOT NULL, events text NOT NULL, includeData text NOT NULL,
                    enabled boolean NOT NULL, includeHMAC boolean NOT NULL, createdAt timestamptz NOT NULL, envelopeID text)
                """,
                "CREATE INDEX connectConfiguration_accountID ON connectConfiguration (accountID)",
                """
                CREATE TABLE connectKey (
                    id text PRIMARY KEY, accountID text NOT NULL REFERENCES account (id) ON DELETE CASCADE,
                    secret text NOT NULL, createdAt timestamptz NOT NULL, revokedAt timestamptz)
                """,
                "CREATE INDEX connectKey_accountID ON connectKey (accountID)",
                """
                CREATE TABLE connectDelivery (
                    id bigserial PRIMARY KEY,
                    configurationID text NOT NULL REFERENCES connectConfiguration (id) ON DELETE CASCADE,
                    accountID text NOT NULL, envelopeID text NOT NULL, event text NOT NULL, recipientID text,
                    occurredAt timestamptz NOT NULL, recordedAt timestamptz NOT NULL, ready boolean NOT NULL, attempts bigint NOT NULL,
                    nextAttemptAt timestamptz NOT NULL, claimedUntil timestamptz, claimToken text, lastAttemptAt timestamptz,
                    deliveredAt timestamptz, failedAt timestamptz, lastError text)
                """,
                "CREATE INDEX connectDelivery_accountID ON connectDelivery (accountID)",
                "CREATE INDEX connectDelivery_ready ON connectDelivery (id) WHERE ready AND deliveredAt IS NULL AND failedAt IS NULL",
                "CREATE INDEX connectDelivery_pending ON connectDelivery (nextAttemptAt) WHERE deliveredAt IS NULL AND failedAt IS NULL",
                """
                CREATE INDEX connectDelivery_order ON connectDelivery (configurationID, envelopeID, id)
                    WHERE deliveredAt IS NULL AND failedAt IS NULL
                """,
                "CREATE INDEX connectDelivery_failed ON connectDelivery (accountID, id) WHERE failedAt IS NOT NULL",
            ]),
    ]

    /// Creates the schema if needed and applies the migrations it lacks, in one transaction under
    /// an advisory lock keyed by the schema's name.
    /// - Returns: the names of the migrations applied now.
    static func migrate(_ client: PostgresClient, schema: String, logger: Logger) async throws -> [String] {
        try await client.withTransaction(logger: logger) { connection in
            try await connection.query("SELECT pg_advisory_xact_lock(hashtext(\(schema)))", logger: logger)
            try await connection.query("CREATE SCHEMA IF NOT EXISTS \(unescaped: quoted(schema))", logger: logger)
            try await connection.query(
                "CREATE TABLE IF NOT EXISTS schemaMigration (name text PRIMARY KEY, appliedAt timestamptz NOT NULL DEFAULT now())",
                logger: logger)
            var applied = Set<String>()
            for try await name in try await connection.query("SELECT name FROM schemaMigration", logger: logger).decode(String.self) {
                applied.insert(name)
            }
            var now: [String] = []
            for migration in migrations where !applied.contains(migration.name) {
                for statement in migration.statements {
                    try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
                }
                try await connection.query("INSERT INTO schemaMigration (name) VALUES (\(migration.name))", logger: logger)
                now.append(migration.name)
            }
            return now
        }
    }

    /// Throws `not_found` unless `schema` holds a coordinator store with every migration applied
    /// (a reader that must not create or migrate anything).
    static func requireStore(_ client: PostgresClient, schema: String, logger: Logger) async throws {
        let applied: Set<String> = try await client.withConnection { connection in
            var names = Set<String>()
            let tables = try await connection.query(
                "SELECT 1 FROM information_schema.tables WHERE table_schema = \(schema) AND table_name = 'schemamigration'", logger: logger
            ).collect()
            guard !tables.isEmpty else { return names }
            for try await name in try await connection.query("SELECT name FROM schemaMigration", logger: logger).decode(String.self) {
                names.insert(name)
            }
            return names
        }
        let missing = migrations.map(\.name).filter { !applied.contains($0) }
        guard missing.isEmpty else {
            throw FleetError(
                .notFound,
                applied.isEmpty
                    ? "schema \"\(schema)\" holds no coordinator store"
                    : "the coordinator store in schema \"\(schema)\" lacks migrations \(missing.joined(separator: ", ")); open it with a coordinator first")
        }
    }

    /// A schema name as an SQL identifier (names are checked by ``PostgresCoordinatorStore``).
    static func quoted(_ name: String) -> String { "\"\(name)\"" }
}
