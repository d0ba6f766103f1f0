import Foundation
import GRDB
import Logging
import Metrics

/// The coordinator's SQLite store (WAL), opened through GRDB with versioned
/// migrations. One file holds accounts, users, access tokens and enrolled
/// devices; the sync ingest adds its tables in a later migration.
public final class CoordinatorStore: Sendable {
    /// The database; exposed so services in this module share one connection pool.
    let database: DatabasePool
    public let path: String

    /// How hard each commit (and so each sync ack) pushes to disk.
    public enum Durability: String, Sendable, Hashable, CaseIterable {
        /// WAL with `synchronous = NORMAL`: a committed push survives a killed coordinator
        /// process; the commits since the last checkpoint can be lost on power loss or a kernel
        /// crash (the file is never corrupt). The default.
        case processCrash
        /// WAL with `synchronous = FULL`: the WAL is synced before each commit returns, so an
        /// acked push survives power loss too. Group commit (`IngestCommitQueue`) makes one
        /// sync serve every push waiting for the writer.
        case powerLoss

        var synchronous: String { self == .powerLoss ? "FULL" : "NORMAL" }
    }

    public let durability: Durability
    /// Disk faults of the store's writes (disk full, I/O errors): the store's `write(_:)` reports to it.
    public let faults: StoreFaultMonitor
    /// Devices whose receipts reach further than this store (it went back in time): enrollment and
    /// ingest report to it.
    public let regressions: StoreRegressionMonitor
    /// Every write goes through it: the writes waiting for the writer share a transaction.
    let writes: StoreWriteBatcher

    /// Opens (creating if needed) the store at `path` and migrates it.
    /// - Parameters:
    ///   - path: the SQLite file.
    ///   - durability: how hard each commit pushes to disk.
    ///   - logger: where ``faults`` logs a disk-fault episode.
    ///   - metricsFactory: where ``faults`` counts failed writes; the process-wide `MetricsSystem.factory` unless given.
    /// - Throws: GRDB's `DatabaseError` when the file cannot be opened or migrated.
    public init(
        path: String, durability: Durability = .processCrash, logger: Logger = Logger(label: "signfleet.coordinator.store"),
        metricsFactory: any MetricsFactory = MetricsSystem.factory
    ) throws {
        var configuration = Configuration()
        configuration.busyMode = .timeout(5)
        // 16 KB pages for new stores: an envelope row (~11 KB with its PDF) fits one page
        // instead of a leaf and three overflow pages, so each ingested item costs fewer WAL
        // frames and writes (about 7% less CPU per item, loadtests/NOTES.md). SQLite applies it
        // only to a file without tables; existing stores keep their page size.
        configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA page_size = \(Self.pageSize)") }
        database = try DatabasePool(path: path, configuration: configuration)
        // Set on the writer after opening: GRDB's DatabasePool runs `PRAGMA synchronous = NORMAL`
        // when it turns WAL on, after `prepareDatabase`, so a setting made there is overwritten.
        try database.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA synchronous = \(durability.synchronous)")
            try db.execute(sql: "PRAGMA wal_autocheckpoint = \(Self.autocheckpointPages)")
        }
        self.path = path
        self.durability = durability
        faults = StoreFaultMonitor(path: path, probesDisk: true, logger: logger, metricsFactory: metricsFactory)
        regressions = StoreRegressionMonitor(path: path, logger: logger, metricsFactory: metricsFactory)
        writes = StoreWriteBatcher(database: database, faults: faults)
        try Self.migrator.migrate(database)
        // Opening and migrating may write nothing: a restart on a still-full disk would say `ok`
        // until its first write failed. A probe says now.
        faults.probeDisk()
    }

    /// The page size of new stores.
    public static let pageSize = 16_384
    /// WAL pages after which a commit checkpoints: 4 MB of 16 KB pages, the bytes SQLite's
    /// default (1,000 pages) meant with 4 KB pages. The checkpoint runs in the committing
    /// writer, so every push of that group commit waits for it; a 16 MB WAL made those waits
    /// four times longer and doubled the p99 at 5,000 envelopes/s (loadtests/NOTES.md).
    static let autocheckpointPages = 256

    /// The store's `PRAGMA page_size`.
    public func pageSizeSetting() throws -> Int {
        try database.read { db in try Int.fetchOne(db, sql: "PRAGMA page_size") ?? -1 }
    }

    /// The writer connection's `PRAGMA synchronous` (1 = NORMAL, 2 = FULL), as SQLite reports it.
    public func synchronousSetting() throws -> Int {
        try database.writeWithoutTransaction { db in try Int.fetchOne(db, sql: "PRAGMA synchronous") ?? -1 }
    }

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1-accounts") { db in
            try db.create(table: "account") { t in
                t.primaryKey("id", .text)
                t.column("name", .text).notNull()
                t.column("offlineSigning", .boolean).notNull()
                t.column("hourlyLimit", .integer).notNull()
                t.column("burstLimit", .integer).notNull()
                t.column("burstWindowSeconds", .integer).notNull()
                t.column("createdAt", .datetime).notNull()
            }
            try db.create(table: "user") { t in
                t.primaryKey("id", .text)
                t.column("accountID", .text).notNull().references("account", onDelete: .cascade)
                t.column("name", .text).notNull()
                t.column("email", .text).notNull().unique(onConflict: .abort).collate(.nocase)
                t.column("secretSalt", .blob).notNull()
                t.column("secretHash", .blob).notNull()
                t.column("createdAt", .datetime).notNull()
            }
            try db.create(table: "accessToken") { t in
                t.primaryKey("tokenHash", .blob)  // only the SHA-256 of a token is stored
                t.column("userID", .text).notNull().indexed().references("user", onDelete: .cascade)
                t.column("issuedAt", .datetime).notNull()
                t.column("expiresAt", .datetime).notNull()
            }
            try db.create(table: "device") { t in
                t.primaryKey("id", .text)
                t.column("accountID", .text).notNull().indexed().references("account", onDelete: .cascade)
                t.column("userID", .text).notNull().references("user", onDelete: .cascade)
                t.column("publicKey", .blob).notNull()
                t.column("enrolledAt", .datetime).notNull()
                t.column("lastAppliedSequence", .integer).notNull().defaults(to: 0)
            }
        }
        migrator.registerMigration("v2-sync") { db in
            try db.create(table: "envelope") { t in
                t.primaryKey("id", .text)  // the server's envelope id
                t.column("accountID", .text).notNull().indexed().references("account", onDelete: .cascade)
                t.column("deviceID", .text).notNull().references("device", onDelete: .cascade)
                t.column("sequence", .integer).notNull()
                t.column("transactionID", .text).notNull()
                t.column("localEnvelopeID", .text).notNull()
                t.column("name", .text).notNull()
                t.column("status", .text).notNull()
                t.column("payload", .blob).notNull()  // the device-signed canonical bytes, as received
                t.column("deviceSignature", .blob).notNull()
                t.column("createdAt", .datetime).notNull()
                t.uniqueKey(["accountID", "transactionID"])  // one envelope per transaction
                t.uniqueKey(["deviceID", "sequence"])
            }
            try db.create(table: "syncResult") { t in
                t.column("deviceID", .text).notNull().references("device", onDelete: .cascade)
                t.column("sequence", .integer).notNull()
                t.column("outcome", .text).notNull()
                t.column("envelopeID", .text)
                t.column("reason", .text)
                t.column("recordedAt", .datetime).notNull()
                t.primaryKey(["deviceID", "sequence"])
            }
        }
        migrator.registerMigration("v3-templates") { db in
            try db.create(table: "template") { t in
                t.primaryKey("id", .text)
                t.column("accountID", .text).notNull().indexed().references("account", onDelete: .cascade)
                t.column("name", .text).notNull()
                t.column("folder", .text)
                t.column("lastModified", .integer).notNull()  // milliseconds since 1970
                t.column("definition", .blob).notNull()  // MessagePack of Envelopes.EnvelopeTemplate
            }
        }
        migrator.registerMigration("v4-lifecycle") { db in
            try db.alter(table: "envelope") { t in
                t.add(column: "voidReason", .text)
            }
            try db.create(table: "envelopeRecipient") { t in
                t.column("envelopeID", .text).notNull().references("envelope", onDelete: .cascade)
                t.column("recipientID", .text).notNull()
                t.column("type", .text).notNull()
                t.column("name", .text).notNull()
                t.column("routingOrder", .integer).notNull()
                t.column("status", .text).notNull()
                t.column("statusChangedAt", .datetime)
                t.column("declineReason", .text)
                t.primaryKey(["envelopeID", "recipientID"])
            }
        }
        migrator.registerMigration("v5-captive-signing") { db in
            try CaptiveSigningStore.migrate(db)
        }
        migrator.registerMigration("v6-payload-digest") { db in
            // The SHA-256 of each handled item's payload: a resend of a used sequence number is a
            // duplicate only with the same payload (docs/sync.md, "Duplicates and conflicts").
            try db.alter(table: "syncResult") { t in t.add(column: "payloadSHA256", .blob) }
        }
        migrator.registerMigration("v7-transport-identity") { db in
            // The CURVE key the device proved when it enrolled (docs/protocol.md, "Security
            // model"); NULL for a device enrolled over plain TCP. One key, one device.
            try db.alter(table: "device") { t in
                t.add(column: "curveKey", .blob)
                t.add(column: "revokedAt", .datetime)
            }
            try db.create(index: "device_curveKey", on: "device", columns: ["curveKey"], unique: true, condition: Column("curveKey") != nil)
            // The coordinator's long-term CURVE key pair (one row), made on first start.
            try db.create(table: "transportKey") { t in
                t.column("id", .integer).primaryKey().check { $0 == 1 }
                t.column("secretKey", .blob).notNull()
                t.column("createdAt", .datetime).notNull()
            }
        }
        migrator.registerMigration("v8-device-ids-per-account") { db in
            try Self.scopeDeviceIDsByAccount(db)
        }
        // Where each account's signing ceremonies may return to (docs/captive-signing.md, "Return URLs").
        migrator.registerMigration("v9-return-origins") { db in
            try db.create(table: "accountReturnOrigin") { t in
                t.column("accountID", .text).notNull().references("account", onDelete: .cascade)
                t.column("origin", .text).notNull()
                t.primaryKey(["accountID", "origin"])
            }
        }
        // Every token issue deletes the expired tokens: without this index that delete scanned the
        // whole table inside the single writer, so a fleet's logins cost O(tokens) each and a
        // burst of reconnects slowed every later login (docs/performance.md, "The startup storm").
        migrator.registerMigration("v10-token-expiry") { db in
            try db.create(index: "accessToken_on_expiresAt", on: "accessToken", columns: ["expiresAt"])
        }
        // Envelopes created over REST as drafts (docs/rest-api.md): kept apart until sent.
        migrator.registerMigration("v11-rest-drafts") { db in
            try db.create(table: "restDraft") { t in
                t.primaryKey("id", .text)
                t.column("accountID", .text).notNull().references("account", onDelete: .cascade)
                t.column("transactionID", .text).notNull()
                t.column("definition", .blob).notNull()
                t.column("createdAt", .datetime).notNull()
            }
        }
        // OAuth integration keys and users' consent to them (docs/rest-api.md, "Authentication").
        migrator.registerMigration("v12-oauth") { db in
            try db.create(table: "integrationKey") { t in
                t.primaryKey("id", .text)
                t.column("accountID", .text).notNull().indexed().references("account", onDelete: .cascade)
                t.column("name", .text).notNull()
                t.column("publicKey", .text).notNull()
                t.column("createdAt", .datetime).notNull()
                t.column("revokedAt", .datetime)
            }
            try db.create(table: "oauthConsent") { t in
                t.column("integrationKeyID", .text).notNull().references("integrationKey", onDelete: .cascade)
                t.column("userID", .text).notNull().references("user", onDelete: .cascade)
                t.column("scopes", .text).notNull()
                t.column("grantedAt", .datetime).notNull()
                t.primaryKey(["integrationKeyID", "userID"])
            }
        }
        migrator.registerMigration("v13-oauth-code") { db in
            try db.alter(table: "integrationKey") { t in
                t.add(column: "secretHash", .blob)
                t.add(column: "redirectURIs", .text).notNull().defaults(to: "")
            }
            try db.create(table: "oauthCode") { t in
                t.primaryKey("codeHash", .blob)
                t.column("integrationKeyID", .text).notNull().references("integrationKey", onDelete: .cascade)
                t.column("userID", .text).notNull().references("user", onDelete: .cascade)
                t.column("scopes", .text).notNull()
                t.column("redirectURI", .text).notNull()
                t.column("codeChallenge", .text)
                t.column("expiresAt", .datetime).notNull().indexed()
            }
        }
        // Connect: configurations, HMAC keys and the outbox of deliveries (docs/webhooks.md).
        migrator.registerMigration("v14-connect") { db in
            try db.create(table: "connectConfiguration") { t in
                t.primaryKey("id", .text)
                t.column("accountID", .text).notNull().indexed().references("account", onDelete: .cascade)
                t.column("name", .text).notNull()
                t.column("url", .text).notNull()
                t.column("events", .text).notNull()
                t.column("includeData", .text).notNull()
                t.column("enabled", .boolean).notNull()
                t.column("includeHMAC", .boolean).notNull()
                t.column("createdAt", .datetime).notNull()
                t.column("envelopeID", .text)
            }
            try db.create(table: "connectKey") { t in
                t.primaryKey("id", .text)
                t.column("accountID", .text).notNull().indexed().references("account", onDelete: .cascade)
                t.column("secret", .text).notNull()
                t.column("createdAt", .datetime).notNull()
                t.column("revokedAt", .datetime)
            }
            try db.create(table: "connectDelivery") { t in
                t.autoIncrementedPrimaryKey("id")
                t.column("configurationID", .text).notNull().references("connectConfiguration", onDelete: .cascade)
                t.column("accountID", .text).notNull().indexed()
                t.column("envelopeID", .text).notNull()
                t.column("event", .text).notNull()
                t.column("recipientID", .text)
                t.column("occurredAt", .datetime).notNull()
                t.column("recordedAt", .datetime).notNull()
                t.column("ready", .boolean).notNull()
                t.column("attempts", .integer).notNull()
                t.column("nextAttemptAt", .datetime).notNull()
                t.column("claimedUntil", .datetime)
                t.column("claimToken", .text)
                t.column("lastAttemptAt", .datetime)
                t.column("deliveredAt", .datetime)
                t.column("failedAt", .datetime)
                t.column("lastError", .text)
            }
            // The claim reads only ready undelivered rows, by id: partial indexes keep it off the
            // waiting events and the delivered history.
            try db.execute(
                sql: """
                    CREATE INDEX connectDelivery_ready ON connectDelivery (id)
                        WHERE ready AND deliveredAt IS NULL AND failedAt IS NULL;
                    CREATE INDEX connectDelivery_pending ON connectDelivery (nextAttemptAt)
                        WHERE deliveredAt IS NULL AND failedAt IS NULL;
                    CREATE INDEX connectDelivery_order ON connectDelivery (configurationID, envelopeID, id)
                        WHERE deliveredAt IS NULL AND failedAt IS NULL;
                    CREATE INDEX connectDelivery_failed ON connectDelivery (accountID, id) WHERE failedAt IS NOT NULL;
                    """)
        }
        return migrator
    }
}

extension CoordinatorStore {
    /// Migration v8: a device id is unique within its account only, so no account can take an id
    /// another account's device will use (docs/protocol.md, section 1.1). `device` is keyed by
    /// `(accountID, id)`, and `envelope` and `syncResult` refer to a device by both. SQLite cannot
    /// change a key in place: each table is rebuilt and its rows copied (foreign keys are checked
    /// once the migration is done).
    static func scopeDeviceIDsByAccount(_ db: Database) throws {
        try db.create(table: "device_v8") { t in
            t.column("id", .text).notNull()
            t.column("accountID", .text).notNull().references("account", onDelete: .cascade)
            t.column("userID", .text).notNull().references("user", onDelete: .cascade)
            t.column("publicKey", .blob).notNull()
            t.column("enrolledAt", .datetime).notNull()
            t.column("lastAppliedSequence", .integer).notNull().defaults(to: 0)
            t.column("curveKey", .blob)
            t.column("revokedAt", .datetime)
            t.primaryKey(["accountID", "id"])
        }
        try db.execute(sql: """
            INSERT INTO device_v8 (id, accountID, userID, publicKey, enrolledAt, lastAppliedSequence, curveKey, revokedAt)
            SELECT id, accountID, userID, publicKey, enrolledAt, lastAppliedSequence, curveKey, revokedAt FROM device
            """)
        try db.create(table: "envelope_v8") { t in
            t.primaryKey("id", .text)  // the server's envelope id
            t.column("accountID", .text).notNull().references("account", onDelete: .cascade)
            t.column("deviceID", .text).notNull()
            t.column("sequence", .integer).notNull()
            t.column("transactionID", .text).notNull()
            t.column("localEnvelopeID", .text).notNull()
            t.column("name", .text).notNull()
            t.column("status", .text).notNull()
            t.column("payload", .blob).notNull()  // the device-signed canonical bytes, as received
            t.column("deviceSignature", .blob).notNull()
            t.column("createdAt", .datetime).notNull()
            t.column("voidReason", .text)
            t.uniqueKey(["accountID", "transactionID"])  // one envelope per transaction
            t.uniqueKey(["accountID", "deviceID", "sequence"])
            t.foreignKey(["accountID", "deviceID"], references: "device", columns: ["accountID", "id"], onDelete: .cascade)
        }
        try db.execute(sql: """
            INSERT INTO envelope_v8 (id, accountID, deviceID, sequence, transactionID, localEnvelopeID, name, status, payload,
                                     deviceSignature, createdAt, voidReason)
            SELECT id, accountID, deviceID, sequence, transactionID, localEnvelopeID, name, status, payload, deviceSignature,
                   createdAt, voidReason FROM envelope
            """)
        try db.create(table: "syncResult_v8") { t in
            t.column("accountID", .text).notNull()
            t.column("deviceID", .text).notNull()
            t.column("sequence", .integer).notNull()
            t.column("outcome", .text).notNull()
            t.column("envelopeID", .text)
            t.column("reason", .text)
            t.column("recordedAt", .datetime).notNull()
            t.column("payloadSHA256", .blob)
            t.primaryKey(["accountID", "deviceID", "sequence"])
            t.foreignKey(["accountID", "deviceID"], references: "device", columns: ["accountID", "id"], onDelete: .cascade)
        }
        // Device ids were unique before v8, so each result joins exactly one device.
        try db.execute(sql: """
            INSERT INTO syncResult_v8 (accountID, deviceID, sequence, outcome, envelopeID, reason, recordedAt, payloadSHA256)
            SELECT d.accountID, r.deviceID, r.sequence, r.outcome, r.envelopeID, r.reason, r.recordedAt, r.payloadSHA256
            FROM syncResult r JOIN device d ON d.id = r.deviceID
            """)
        for table in ["syncResult", "envelope", "device"] {
            try db.drop(table: table)
        }
        for table in ["device", "envelope", "syncResult"] {
            try db.rename(table: "\(table)_v8", to: table)
        }
        try db.create(index: "envelope_on_accountID", on: "envelope", columns: ["accountID"])
        try db.create(index: "device_curveKey", on: "device", columns: ["curveKey"], unique: true, condition: Column("curveKey") != nil)
    }
}

package struct AccountRecord: Codable, FetchableRecord, PersistableRecord, Sendable {
    package static let databaseTableName = "account"
    package var id: String
    package var name: String
    package var offlineSigning: Bool
    package var hourlyLimit: Int
    package var burstLimit: Int
    package var burstWindowSeconds: Int
    package var createdAt: Date

    package init(id: String, name: String, offlineSigning: Bool, hourlyLimit: Int, burstLimit: Int, burstWindowSeconds: Int, createdAt: Date) {
        self.id = id
        self.name = name
        self.offlineSigning = offlineSigning
        self.hourlyLimit = hourlyLimit
        self.burstLimit = burstLimit
        self.burstWindowSeconds = burstWindowSeconds
        self.createdAt = createdAt
    }
}

package struct UserRecord: Codable, FetchableRecord, PersistableRecord, Sendable {
    package static let databaseTableName = "user"
    package var id: String
    package var accountID: String
    package var name: String
    package var email: String
    package var secretSalt: Data
    package var secretHash: Data
    package var createdAt: Date

    package init(id: String, accountID: String, name: String, email: String, secretSalt: Data, secretHash: Data, createdAt: Date) {
        self.id = id
        self.accountID = accountID
        self.name = name
        self.email = email
        self.secretSalt = secretSalt
        self.secretHash = secretHash
        self.createdAt = createdAt
    }
}

package struct AccessTokenRecord: Codable, FetchableRecord, PersistableRecord, Sendable {
    package static let databaseTableName = "accessToken"
    package var tokenHash: Data
    package var userID: String
    package var issuedAt: Date
    package var expiresAt: Date

    package init(tokenHash: Data, userID: String, issuedAt: Date, expiresAt: Date) {
        self.tokenHash = tokenHash
        self.userID = userID
        self.issuedAt = issuedAt
        self.expiresAt = expiresAt
    }
}

package struct DeviceRecord: Codable, FetchableRecord, PersistableRecord, Sendable {
    package static let databaseTableName = "device"
    package var id: String
    package var accountID: String
    package var userID: String
    package var publicKey: Data
    package var enrolledAt: Date
    package var lastAppliedSequence: Int64
    /// The CURVE public key bound at enrollment (nil: enrolled over plain TCP). Migration v7.
    package var curveKey: Data? = nil
    /// Set by an admin's revocation: the device may enroll again with new keys.
    package var revokedAt: Date? = nil

    /// The primary key (migration v8): device ids are unique within an account.
    static func key(account: String, id: String) -> [String: any DatabaseValueConvertible] {
        ["accountID": account, "id": id]
    }

    package init(id: String, accountID: String, userID: String, publicKey: Data, enrolledAt: Date, lastAppliedSequence: Int64, curveKey: Data? = nil, revokedAt: Date? = nil) {
        self.id = id
        self.accountID = accountID
        self.userID = userID
        self.publicKey = publicKey
        self.enrolledAt = enrolledAt
        self.lastAppliedSequence = lastAppliedSequence
        self.curveKey = curveKey
        self.revokedAt = revokedAt
    }
}

package struct EnvelopeRecord: Codable, FetchableRecord, PersistableRecord, Sendable {
    package static let databaseTableName = "envelope"
    package var id: String
    package var accountID: String
    package var deviceID: String
    package var sequence: Int64
    package var transactionID: String
    package var localEnvelopeID: String
    package var name: String
    package var status: String
    package var payload: Data
    package var deviceSignature: Data
    package var createdAt: Date
    /// Set once the envelope is voided (migration v4-lifecycle).
    package var voidReason: String? = nil

    package init(id: String, accountID: String, deviceID: String, sequence: Int64, transactionID: String, localEnvelopeID: String, name: String, status: String, payload: Data, deviceSignature: Data, createdAt: Date, voidReason: String? = nil) {
        self.id = id
        self.accountID = accountID
        self.deviceID = deviceID
        self.sequence = sequence
        self.transactionID = transactionID
        self.localEnvelopeID = localEnvelopeID
        self.name = name
        self.status = status
        self.payload = payload
        self.deviceSignature = deviceSignature
        self.createdAt = createdAt
        self.voidReason = voidReason
    }
}

/// One recipient of a synced envelope and its server-side status (migration v4-lifecycle).
/// An OAuth integration key (DocuSign's "integration key": the JWT grant's `iss`, the
/// authorization code grant's `client_id`) of one account (docs/rest-api.md, "Authentication").
package struct IntegrationKeyRecord: Codable, FetchableRecord, PersistableRecord, Sendable, Hashable {
    package static let databaseTableName = "integrationKey"
    package var id: String
    package var accountID: String
    package var name: String
    /// The RSA public key its JWT assertions are signed with, PEM (`-----BEGIN PUBLIC KEY-----`);
    /// empty for a key that only uses the authorization code grant.
    package var publicKey: String
    package var createdAt: Date
    package var revokedAt: Date?
    /// SHA-256 of the client secret (the authorization code grant's HTTP Basic password), if it has one.
    package var secretHash: Data?
    /// Where the consent page may send its authorization codes, one URI per line (exact match).
    package var redirectURIs: String

    package init(
        id: String, accountID: String, name: String, publicKey: String, createdAt: Date, revokedAt: Date? = nil, secretHash: Data? = nil,
        redirectURIs: [String] = []
    ) {
        self.id = id
        self.accountID = accountID
        self.name = name
        self.publicKey = publicKey
        self.createdAt = createdAt
        self.revokedAt = revokedAt
        self.secretHash = secretHash
        self.redirectURIs = redirectURIs.joined(separator: "\n")
    }

    package var redirectURIList: [String] { redirectURIs.split(separator: "\n").map(String.init) }
}

/// An authorization code the consent page issued (the authorization code grant), kept by its
/// SHA-256 until it is redeemed once or expires.
package struct AuthorizationCodeRecord: Codable, FetchableRecord, PersistableRecord, Sendable, Hashable {
    package static let databaseTableName = "oauthCode"
    package var codeHash: Data
    package var integrationKeyID: String
    package var userID: String
    /// Space-separated, as consented.
    package var scopes: String
    package var redirectURI: String
    /// PKCE (RFC 7636): base64url SHA-256 of the verifier the token request must show, if the
    /// authorization request sent one (`code_challenge_method=S256`).
    package var codeChallenge: String?
    package var expiresAt: Date

    package init(
        codeHash: Data, integrationKeyID: String, userID: String, scopes: String, redirectURI: String, codeChallenge: String?, expiresAt: Date
    ) {
        self.codeHash = codeHash
        self.integrationKeyID = integrationKeyID
        self.userID = userID
        self.scopes = scopes
        self.redirectURI = redirectURI
        self.codeChallenge = codeChallenge
        self.expiresAt = expiresAt
    }
}

/// A user's consent to an integration key acting for them with these scopes (space-separated).
package struct ConsentRecord: Codable, FetchableRecord, PersistableRecord, Sendable, Hashable {
    package static let databaseTableName = "oauthConsent"
    package var integrationKeyID: String
    package var userID: String
    package var scopes: String
    package var grantedAt: Date

    package init(integrationKeyID: String, userID: String, scopes: String, grantedAt: Date) {
        self.integrationKeyID = integrationKeyID
        self.userID = userID
        self.scopes = scopes
        self.grantedAt = grantedAt
    }
}

/// A REST draft (`POST …/envelopes` with `status: created`, docs/rest-api.md): the definition as
/// sent, kept until it is sent (then it becomes an envelope with the same id) or never.
package struct RESTDraftRecord: Codable, FetchableRecord, PersistableRecord, Sendable, Hashable {
    package static let databaseTableName = "restDraft"
    /// The server envelope id it will have once sent (derived from `transactionID`).
    package var id: String
    package var accountID: String
    package var transactionID: String
    /// The EnvelopeDefinition JSON, as received.
    package var definition: Data
    package var createdAt: Date

    package init(id: String, accountID: String, transactionID: String, definition: Data, createdAt: Date) {
        self.id = id
        self.accountID = accountID
        self.transactionID = transactionID
        self.definition = definition
        self.createdAt = createdAt
    }
}

package struct EnvelopeRecipientRecord: Codable, FetchableRecord, PersistableRecord, Sendable {
    package static let databaseTableName = "envelopeRecipient"
    package var envelopeID: String
    package var recipientID: String
    package var type: String
    package var name: String
    package var routingOrder: Int
    package var status: String
    package var statusChangedAt: Date?
    package var declineReason: String?

    package init(envelopeID: String, recipientID: String, type: String, name: String, routingOrder: Int, status: String, statusChangedAt: Date?, declineReason: String?) {
        self.envelopeID = envelopeID
        self.recipientID = recipientID
        self.type = type
        self.name = name
        self.routingOrder = routingOrder
        self.status = status
        self.statusChangedAt = statusChangedAt
        self.declineReason = declineReason
    }
}

package struct SyncResultRecord: Codable, FetchableRecord, PersistableRecord, Sendable {
    package static let databaseTableName = "syncResult"
    /// The device's account (migration v8: device ids are unique per account).
    package var accountID: String
    package var deviceID: String
    package var sequence: Int64
    package var outcome: String
    package var envelopeID: String?
    package var reason: String?
    package var recordedAt: Date
    /// SHA-256 of the payload handled (nil in rows from before migration v6).
    package var payloadSHA256: Data?

    package init(accountID: String, deviceID: String, sequence: Int64, outcome: String, envelopeID: String?, reason: String?, recordedAt: Date, payloadSHA256: Data?) {
        self.accountID = accountID
        self.deviceID = deviceID
        self.sequence = sequence
        self.outcome = outcome
        self.envelopeID = envelopeID
        self.reason = reason
        self.recordedAt = recordedAt
        self.payloadSHA256 = payloadSHA256
    }
}

extension Data {
    /// The first bytes in hex, for messages.
    var hexPrefix: String { prefix(8).map { String(format: "%02x", $0) }.joined() }
}
