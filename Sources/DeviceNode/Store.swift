import Crypto
import Envelopes
import Foundation
import GRDB
import Logging
import MessagePack
import SignatureCapture
import SyncContract
import ZeroMQ

/// An envelope as stored: the envelope (documents with their bytes) and how it was composed.
struct StoredEnvelope: Sendable {
    var envelope: Envelope
    var signingMode: SigningMode
    var sequence: UInt64?
}

/// What a compose did in the store.
enum ComposeWrite: Sendable {
    case created(sequence: UInt64?)
    case existing(envelopeId: String, sameContent: Bool)
    case alreadySynced(envelopeId: String, sequence: UInt64)
}

/// What a logout removed.
struct LogoutWrite: Sendable {
    /// Envelopes with work the server had not received (signed, declined, or queued).
    var droppedEnvelopes: [EnvelopeIDs]
    /// Envelopes with nothing unsynced (composed and unsigned, or already synced).
    var clearedEnvelopes: [EnvelopeIDs]
    var droppedSequences: [UInt64]
    var keptInFlight: [UInt64]
}

/// Where the database work of every ``DeviceConfiguration/StoreFootprint/compact`` store in the
/// process runs. GRDB gives each connection a serial dispatch queue; on its own, each such queue
/// targets libdispatch's overcommit pool, which starts a thread for every queue with work, so 250
/// devices syncing at once in one node process ran on some 240 threads. Serial queues that target
/// one concurrent queue share its pool, whose width follows the cores: the same work, a few threads.
/// Each store still has its own serial queue, so one device's accesses stay in order.
private let compactStoresQueue = DispatchQueue(label: "DeviceNode.compact-stores", attributes: .concurrent)

/// The device's SQLite store (WAL; a GRDB `DatabasePool`, or one connection in a `DatabaseQueue`
/// for ``DeviceConfiguration/StoreFootprint/compact``). Every change that must survive a crash
/// together is one write transaction, so a kill at any instant leaves either all of it or none.
final class DeviceStore: Sendable {
    let pool: any DatabaseWriter
    let deviceId: String
    let privateKey: Curve25519.Signing.PrivateKey
    /// The device's CURVE key pair: what it proves to the coordinator on every connection.
    let transportKeys: CurveKeyPair
    let clock: @Sendable () -> Date
    let logger: Logger
    /// Synced items keep their payload (``DeviceConfiguration/retainSynced``) until the window passes.
    let retainsSynced: Bool

    private init(pool: any DatabaseWriter, deviceId: String, privateKey: Curve25519.Signing.PrivateKey, transportKeys: CurveKeyPair,
                 clock: @escaping @Sendable () -> Date, logger: Logger, retainsSynced: Bool) {
        self.retainsSynced = retainsSynced
        self.pool = pool
        self.deviceId = deviceId
        self.privateKey = privateKey
        self.transportKeys = transportKeys
        self.clock = clock
        self.logger = logger
    }

    /// Runs `body` to read. A ``DeviceConfiguration/StoreFootprint/compact`` store is one
    /// connection in a `DatabaseQueue` that runs one block at a time, writes included, and no
    /// other process writes a device's store: no write can fall between the statements of a read
    /// block, so it needs no transaction. GRDB's `read` would wrap each one in `BEGIN` (prepared
    /// anew every time), `PRAGMA query_only` on and off, and `COMMIT`: four statements around
    /// reads of one or two, at 10,000 devices a visible share of a node's CPU
    /// (docs/performance.md). A `DatabasePool`, whose readers run beside the writer, reads in a
    /// snapshot as before.
    func read<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        if let queue = pool as? DatabaseQueue { return try await queue.unsafeRead(body) }
        return try await pool.read(body)
    }

    /// Frees the store's caches (prepared statements, pages; GRDB's `releaseMemory()`): what GRDB
    /// does on iOS when the app goes to the background. They come back as the store is used.
    func releaseMemory() async throws {
        try await pool.writeWithoutTransaction { db in db.releaseMemory() }
    }

    // MARK: Opening

    static func open(
        path: String, deviceId requested: String?, durability: DeviceConfiguration.Durability,
        footprint: DeviceConfiguration.StoreFootprint = .standard,
        clock: @escaping @Sendable () -> Date, logger: Logger, retainsSynced: Bool = false
    ) throws -> DeviceStore {
        var configuration = Configuration()
        let synchronous = durability == .powerLoss ? "FULL" : "NORMAL"
        // Wait for a lock held by another connection rather than failing at once.
        configuration.busyMode = .timeout(10)
        configuration.label = "DeviceNode"
        let pool: any DatabaseWriter
        switch footprint {
        case .standard:
            pool = try DatabasePool(path: path, configuration: configuration)
        case .compact:
            configuration.journalMode = .wal
            configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA cache_size = -32") }
            configuration.targetQueue = compactStoresQueue
            pool = try DatabaseQueue(path: path, configuration: configuration)
        }
        // Set on the writer after opening: GRDB's DatabasePool runs `PRAGMA synchronous = NORMAL`
        // when it turns WAL on, after `prepareDatabase`, so a setting made there was overwritten
        // (powerLoss measured the same as processCrash: no sync per commit).
        try pool.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA synchronous = \(synchronous)")
        }
        try migrator.migrate(pool)
        let now = clock().timeIntervalSince1970
        let (deviceId, keyBytes) = try pool.write { db -> (String, Data) in
            if let row = try Row.fetchOne(db, sql: "SELECT deviceId, privateKey FROM device WHERE id = 1") {
                return (row["deviceId"], row["privateKey"])
            }
            let key = Curve25519.Signing.PrivateKey()
            let id = requested ?? "device-" + UUID().uuidString.lowercased()
            try db.execute(sql: "INSERT INTO device (id, deviceId, privateKey, createdAt) VALUES (1, ?, ?, ?)",
                           arguments: [id, key.rawRepresentation, now])
            return (id, key.rawRepresentation)
        }
        if let requested, requested != deviceId {
            throw DeviceNodeError(.invalidConfiguration,
                "the store at \(path) belongs to device '\(deviceId)', not '\(requested)'; use that id or another store")
        }
        try pool.write { db in
            try db.execute(sql: "UPDATE device SET durability = ? WHERE id = 1", arguments: [durability.rawValue])
        }
        let key = try Curve25519.Signing.PrivateKey(rawRepresentation: keyBytes)
        // Made on the first open of this version (stores from before it get theirs now).
        let transportSecret = try pool.write { db -> Data in
            if let stored = try Data.fetchOne(db, sql: "SELECT transportSecretKey FROM device WHERE id = 1") { return stored }
            let fresh = Data(try CurveKeyPair.generate().secretKey)
            try db.execute(sql: "UPDATE device SET transportSecretKey = ? WHERE id = 1", arguments: [fresh])
            return fresh
        }
        let store = DeviceStore(
            pool: pool, deviceId: deviceId, privateKey: key, transportKeys: try CurveKeyPair(secretKey: Array(transportSecret)),
            clock: clock, logger: logger, retainsSynced: retainsSynced)
        try store.recoverAfterRestart()
        return store
    }

    /// The writer connection's `PRAGMA synchronous` (1 = NORMAL, 2 = FULL), as SQLite reports it.
    func synchronousSetting() throws -> Int {
        try pool.writeWithoutTransaction { db in try Int.fetchOne(db, sql: "PRAGMA synchronous") ?? -1 }
    }

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.execute(sql: """
                CREATE TABLE device (
                    id INTEGER PRIMARY KEY CHECK (id = 1),
                    deviceId TEXT NOT NULL,
                    privateKey BLOB NOT NULL,
                    createdAt DOUBLE NOT NULL);
                CREATE TABLE account (
                    id INTEGER PRIMARY KEY CHECK (id = 1),
                    userInfo BLOB NOT NULL,
                    accessToken TEXT NOT NULL,
                    loggedInAt DOUBLE NOT NULL);
                CREATE TABLE envelopes (
                    envelopeId TEXT PRIMARY KEY,
                    transactionId TEXT NOT NULL UNIQUE,
                    localState TEXT NOT NULL,
                    signingMode TEXT NOT NULL,
                    templateId TEXT,
                    contentHash BLOB NOT NULL,
                    body BLOB NOT NULL,
                    createdAt DOUBLE NOT NULL,
                    updatedAt DOUBLE NOT NULL);
                CREATE TABLE documents (
                    envelopeId TEXT NOT NULL REFERENCES envelopes(envelopeId) ON DELETE CASCADE,
                    position INTEGER NOT NULL,
                    documentId TEXT NOT NULL,
                    name TEXT NOT NULL,
                    pageCount INTEGER NOT NULL,
                    sha256 BLOB NOT NULL,
                    bytes BLOB NOT NULL,
                    PRIMARY KEY (envelopeId, documentId));
                CREATE TABLE signatures (
                    envelopeId TEXT NOT NULL REFERENCES envelopes(envelopeId) ON DELETE CASCADE,
                    tabIndex INTEGER NOT NULL,
                    recipientId TEXT NOT NULL,
                    documentId TEXT NOT NULL,
                    fieldId TEXT NOT NULL,
                    isoRecord BLOB NOT NULL,
                    svg TEXT NOT NULL,
                    binding BLOB NOT NULL,
                    deviceSignature BLOB NOT NULL,
                    signedAt DOUBLE NOT NULL,
                    PRIMARY KEY (envelopeId, tabIndex));
                CREATE TABLE drafts (
                    id INTEGER PRIMARY KEY CHECK (id = 1),
                    envelopeId TEXT NOT NULL,
                    transactionId TEXT NOT NULL,
                    body BLOB NOT NULL,
                    savedAt DOUBLE NOT NULL);
                CREATE TABLE templates (
                    templateId TEXT PRIMARY KEY,
                    body BLOB NOT NULL,
                    lastModified DOUBLE NOT NULL,
                    cachedAt DOUBLE NOT NULL);
                CREATE TABLE journal (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    at DOUBLE NOT NULL,
                    envelopeId TEXT NOT NULL,
                    transactionId TEXT NOT NULL,
                    kind TEXT NOT NULL,
                    state TEXT NOT NULL,
                    sequence INTEGER,
                    detail TEXT);
                CREATE INDEX journal_envelope ON journal(envelopeId, id);
                CREATE TABLE outbox (
                    sequence INTEGER PRIMARY KEY,
                    envelopeId TEXT NOT NULL,
                    transactionId TEXT NOT NULL UNIQUE,
                    payload BLOB,
                    payloadSHA256 BLOB NOT NULL,
                    signature BLOB NOT NULL,
                    createdAt DOUBLE NOT NULL,
                    status TEXT NOT NULL DEFAULT 'pending',
                    attempts INTEGER NOT NULL DEFAULT 0,
                    outcome TEXT,
                    serverEnvelopeId TEXT,
                    reason TEXT,
                    recordedAt DOUBLE);
                CREATE INDEX outbox_status ON outbox(status, sequence);
                """)
        }
        // Loading an envelope asks for its pending outbox item; without this index SQLite walked
        // every pending item (outbox_status), so each load cost more the longer a device stayed
        // offline (loadtests/NOTES.md, "Device side").
        migrator.registerMigration("v2-outbox-envelope-index") { db in
            try db.execute(sql: "CREATE INDEX outbox_envelope ON outbox(envelopeId, status)")
        }
        // The CURVE secret key the device proves to the coordinator (docs/protocol.md, "Security model").
        migrator.registerMigration("v3-transport-key") { db in
            try db.execute(sql: "ALTER TABLE device ADD COLUMN transportSecretKey BLOB")
        }
        // Numbers the server took that the store has no item for (docs/sync.md, "When a store goes back in time").
        migrator.registerMigration(regressionMigration) { db in try createOutboxGaps(db) }
        // The durability the store was last opened with: a checker that finds lost commits says what allowed it.
        migrator.registerMigration("v5-durability") { db in
            try db.execute(sql: "ALTER TABLE device ADD COLUMN durability TEXT")
        }
        // Captive signing names envelopes by their server id: events find the device's own ids by it.
        migrator.registerMigration("v6-outbox-server-envelope-index") { db in
            try db.execute(sql: "CREATE INDEX outbox_server_envelope ON outbox(serverEnvelopeId) WHERE serverEnvelopeId IS NOT NULL")
        }
        return migrator
    }

    /// After a crash or stop: an envelope left `syncing` goes back to `pendingSync` (its push may
    /// or may not have reached the server; the retry's acknowledgement settles it).
    private func recoverAfterRestart() throws {
        let now = clock().timeIntervalSince1970
        try pool.write { db in
            let rows = try Row.fetchAll(db, sql: "SELECT envelopeId, transactionId FROM envelopes WHERE localState IN ('syncing', 'signing')")
            for row in rows {
                let id: String = row["envelopeId"]
                let transactionId: String = row["transactionId"]
                guard var stored = try Self.loadEnvelope(db, id: id) else { continue }
                try? stored.envelope.apply(.restart, at: Date(timeIntervalSince1970: now))
                try Self.updateEnvelope(db, stored.envelope, now: now)
                try Self.journal(db, at: now, envelopeId: id, transactionId: transactionId, kind: .recovered,
                                 state: stored.envelope.localState.rawValue, sequence: stored.sequence, detail: "restart")
            }
        }
    }

    func close() throws {
        try pool.close()
    }

    var publicKey: [UInt8] { Array(privateKey.publicKey.rawRepresentation) }

    // MARK: Encoding helpers

    static func encodeBody(_ envelope: Envelope) throws -> Data {
        var body = envelope
        // Document bytes live in the documents table, once.
        for index in body.documents.indices { body.documents[index].pdfBytes = Data() }
        return try MessagePackEncoder().encodeData(body)
    }

    /// A hash of what the integrator defined, ignoring the ids and times each build gives anew,
    /// so that a retried compose with the same transaction id is recognised.
    static func contentHash(_ envelope: Envelope) throws -> Data {
        var normalized = envelope
        normalized.envelopeId = ""
        normalized.createdAt = Date(timeIntervalSince1970: 0)
        normalized.lastModifiedAt = normalized.createdAt
        normalized.localState = .draft
        return Data(SHA256.hash(data: try MessagePackEncoder().encode(normalized)))
    }

    // MARK: Rows

    /// The sequence of an envelope's pending outbox item (served by the `outbox_envelope` index).
    static let pendingSequenceOfEnvelopeSQL = "SELECT sequence FROM outbox WHERE envelopeId = ? AND status = 'pending'"

    // The statements below run for every envelope composed, signed or queued: cached, so each
    // is compiled once per connection (compiling went through GRDB's authorizer every time).

    static func loadEnvelope(_ db: Database, id: String) throws -> StoredEnvelope? {
        guard let row = try Row.fetchOne(db.cachedStatement(sql: "SELECT body, signingMode, localState FROM envelopes WHERE envelopeId = ?"), arguments: [id]) else {
            return nil
        }
        let body: Data = row["body"]
        var envelope = try MessagePackDecoder().decode(Envelope.self, from: body)
        if let state = EnvelopeLocalState(rawValue: row["localState"]) { envelope.localState = state }
        let documents = try Row.fetchAll(db.cachedStatement(sql: "SELECT documentId, bytes FROM documents WHERE envelopeId = ? ORDER BY position"), arguments: [id])
        var bytes: [String: Data] = [:]
        for document in documents { bytes[document["documentId"]] = document["bytes"] }
        for index in envelope.documents.indices {
            envelope.documents[index].pdfBytes = bytes[envelope.documents[index].documentId] ?? Data()
        }
        let sequence = try Int64.fetchOne(db.cachedStatement(sql: pendingSequenceOfEnvelopeSQL), arguments: [id])
        let mode = SigningMode(rawValue: row["signingMode"]) ?? .offline
        return StoredEnvelope(envelope: envelope, signingMode: mode, sequence: sequence.map { UInt64(clamping: $0) })
    }

    static func insertEnvelope(_ db: Database, _ envelope: Envelope, mode: SigningMode, contentHash: Data, now: Double) throws {
        try db.cachedStatement(sql: """
            INSERT INTO envelopes (envelopeId, transactionId, localState, signingMode, templateId, contentHash, body, createdAt, updatedAt)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
            """).execute(arguments: [envelope.envelopeId, envelope.transactionId, envelope.localState.rawValue, mode.rawValue,
                             envelope.templateId, contentHash, try encodeBody(envelope), now, now])
        for (position, document) in envelope.documents.enumerated() {
            try db.cachedStatement(sql: """
                INSERT INTO documents (envelopeId, position, documentId, name, pageCount, sha256, bytes) VALUES (?, ?, ?, ?, ?, ?, ?)
                """).execute(arguments: [envelope.envelopeId, position, document.documentId, document.name, document.pageCount,
                                 Data(SHA256.hash(data: document.pdfBytes)), document.pdfBytes])
        }
    }

    static func updateEnvelope(_ db: Database, _ envelope: Envelope, now: Double) throws {
        try db.cachedStatement(sql: "UPDATE envelopes SET localState = ?, body = ?, updatedAt = ? WHERE envelopeId = ?")
            .execute(arguments: [envelope.localState.rawValue, try encodeBody(envelope), now, envelope.envelopeId])
    }

    static func insertSignature(_ db: Database, _ signature: StoredSignature) throws {
        try db.cachedStatement(sql: """
            INSERT OR REPLACE INTO signatures
                (envelopeId, tabIndex, recipientId, documentId, fieldId, isoRecord, svg, binding, deviceSignature, signedAt)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """).execute(arguments: [signature.envelopeId, signature.tabIndex, signature.recipientId, signature.documentId,
                             signature.fieldId, Data(signature.isoRecord), signature.svg, Data(signature.binding),
                             Data(signature.deviceSignature), signature.signedAt.timeIntervalSince1970])
    }

    static func loadSignatures(_ db: Database, envelopeId: String) throws -> [StoredSignature] {
        try Row.fetchAll(db.cachedStatement(sql: "SELECT * FROM signatures WHERE envelopeId = ? ORDER BY tabIndex"), arguments: [envelopeId]).map { row in
            let iso: Data = row["isoRecord"]
            let binding: Data = row["binding"]
            let deviceSignature: Data = row["deviceSignature"]
            return StoredSignature(
                envelopeId: row["envelopeId"], tabIndex: row["tabIndex"], recipientId: row["recipientId"],
                documentId: row["documentId"], fieldId: row["fieldId"], isoRecord: Array(iso), svg: row["svg"],
                binding: Array(binding), deviceSignature: Array(deviceSignature),
                signedAt: Date(timeIntervalSince1970: row["signedAt"]))
        }
    }

    static func journal(
        _ db: Database, at: Double, envelopeId: String, transactionId: String, kind: JournalEntry.Kind, state: String,
        sequence: UInt64? = nil, detail: String? = nil
    ) throws {
        try db.cachedStatement(sql: """
            INSERT INTO journal (at, envelopeId, transactionId, kind, state, sequence, detail) VALUES (?, ?, ?, ?, ?, ?, ?)
            """).execute(arguments: [at, envelopeId, transactionId, kind.rawValue, state, sequence.map { Int64($0) }, detail])
    }

    /// Moves a cached envelope into the outbox: the next gapless sequence number, the canonical
    /// payload and its Ed25519 signature, all in the caller's transaction.
    func enqueue(_ db: Database, _ envelope: inout Envelope, mode: SigningMode, now: Double) throws -> UInt64 {
        try envelope.apply(.queueForSync, at: Date(timeIntervalSince1970: now))
        // Outbox rows are never deleted except never-pushed ones at the tail (forced logout), so
        // after the last item or recorded gap is gapless and never reuses a number the server has seen.
        let last = try Self.lastAssigned(db)
        // A damaged store (or a gap up to the end of the range) leaves no number: say so, never trap.
        guard last >= 0, last < Int64.max else {
            throw DeviceNodeError(.storeFailure, "the outbox has no sequence number left after \(last); this store cannot queue more items")
        }
        let sequence = UInt64(last + 1)
        let signatures = try Self.loadSignatures(db, envelopeId: envelope.envelopeId)
        let payload = try SyncPayload(envelope: envelope, documents: envelope.documents, signatures: signatures,
                                      deviceId: deviceId, sequence: sequence, signingMode: mode).canonicalBytes()
        let signature = try privateKey.signature(for: payload)
        try db.cachedStatement(sql: """
            INSERT INTO outbox (sequence, envelopeId, transactionId, payload, payloadSHA256, signature, createdAt)
            VALUES (?, ?, ?, ?, ?, ?, ?)
            """).execute(arguments: [Int64(sequence), envelope.envelopeId, envelope.transactionId, Data(payload),
                             Data(SHA256.hash(data: payload)), signature, now])
        try Self.updateEnvelope(db, envelope, now: now)
        try Self.journal(db, at: now, envelopeId: envelope.envelopeId, transactionId: envelope.transactionId, kind: .queued,
                         state: envelope.localState.rawValue, sequence: sequence)
        return sequence
    }

    // MARK: Envelope operations

    func envelope(id: String) async throws -> StoredEnvelope? {
        try await read { db in try Self.loadEnvelope(db, id: id) }
    }

    func envelopeId(transactionId: String) async throws -> String? {
        try await read { db in
            try String.fetchOne(db, sql: "SELECT envelopeId FROM envelopes WHERE transactionId = ?", arguments: [transactionId])
        }
    }

    func allEnvelopes() async throws -> [StoredEnvelope] {
        try await read { db in
            let ids = try String.fetchAll(db, sql: "SELECT envelopeId FROM envelopes ORDER BY createdAt, envelopeId")
            return try ids.compactMap { try Self.loadEnvelope(db, id: $0) }
        }
    }

    func signatures(envelopeId: String) async throws -> [StoredSignature] {
        try await read { db in try Self.loadSignatures(db, envelopeId: envelopeId) }
    }

    /// Stores a composed envelope (state `cached`), queueing it at once when `queue`; idempotent by transaction id.
    func compose(_ composed: Envelope, mode: SigningMode, queue: Bool, deletingDraft: Bool) async throws -> ComposeWrite {
        let hash = try Self.contentHash(composed)
        let now = clock().timeIntervalSince1970
        return try await pool.write { db in
            if let row = try Row.fetchOne(db.cachedStatement(sql: "SELECT envelopeId, contentHash FROM envelopes WHERE transactionId = ?"),
                                          arguments: [composed.transactionId]) {
                let existingHash: Data = row["contentHash"]
                return .existing(envelopeId: row["envelopeId"], sameContent: existingHash == hash)
            }
            if let row = try Row.fetchOne(db.cachedStatement(sql: "SELECT envelopeId, sequence FROM outbox WHERE transactionId = ?"),
                                          arguments: [composed.transactionId]) {
                let sequence: Int64 = row["sequence"]
                return .alreadySynced(envelopeId: row["envelopeId"], sequence: UInt64(clamping: sequence))
            }
            var envelope = composed
            try Self.insertEnvelope(db, envelope, mode: mode, contentHash: hash, now: now)
            try Self.journal(db, at: now, envelopeId: envelope.envelopeId, transactionId: envelope.transactionId,
                             kind: .composed, state: envelope.localState.rawValue)
            var sequence: UInt64?
            if queue { sequence = try self.enqueue(db, &envelope, mode: mode, now: now) }
            if deletingDraft { try db.execute(sql: "DELETE FROM drafts") }
            return .created(sequence: sequence)
        }
    }

    /// Saves one step of signing: the envelope, the new signatures and a journal entry, queueing the
    /// envelope when `queue`, all in one transaction. Returns the sequence when queued.
    func commitSigning(
        _ signed: Envelope, mode: SigningMode, signatures: [StoredSignature], kind: JournalEntry.Kind, detail: String?, queue: Bool
    ) async throws -> UInt64? {
        let now = clock().timeIntervalSince1970
        return try await pool.write { db in
            guard try Bool.fetchOne(db.cachedStatement(sql: "SELECT 1 FROM envelopes WHERE envelopeId = ?"), arguments: [signed.envelopeId]) != nil else {
                throw DeviceNodeError(.envelopeNotCached, "the envelope was removed while it was being signed", envelope: EnvelopeIDs(signed))
            }
            var envelope = signed
            for signature in signatures { try Self.insertSignature(db, signature) }
            try Self.updateEnvelope(db, envelope, now: now)
            try Self.journal(db, at: now, envelopeId: envelope.envelopeId, transactionId: envelope.transactionId,
                             kind: kind, state: envelope.localState.rawValue, detail: detail)
            guard queue else { return nil }
            return try self.enqueue(db, &envelope, mode: mode, now: now)
        }
    }

    /// Queues a cached envelope that is ready for sync but not yet in the outbox.
    func enqueueExisting(envelopeId: String) async throws -> UInt64 {
        let now = clock().timeIntervalSince1970
        return try await pool.write { db in
            guard var stored = try Self.loadEnvelope(db, id: envelopeId) else {
                throw DeviceNodeError(.envelopeNotCached, "envelope \(envelopeId) is not cached")
            }
            if let sequence = stored.sequence { return sequence }
            return try self.enqueue(db, &stored.envelope, mode: stored.signingMode, now: now)
        }
    }

    /// Removes a cached envelope that is not in the outbox.
    func remove(envelopeId: String) async throws -> EnvelopeIDs {
        let now = clock().timeIntervalSince1970
        return try await pool.write { db in
            guard let stored = try Self.loadEnvelope(db, id: envelopeId) else {
                throw DeviceNodeError(.envelopeNotCached, "envelope \(envelopeId) is not cached; nothing to remove")
            }
            let ids = EnvelopeIDs(stored.envelope)
            guard stored.sequence == nil, !stored.envelope.localState.isAwaitingSync else {
                throw DeviceNodeError(.envelopeReadyForSync,
                    "envelope is queued for sync as outbox item \(stored.sequence.map(String.init) ?? "?"); it leaves the device only by syncing",
                    envelope: ids)
            }
            try db.cachedStatement(sql: "DELETE FROM envelopes WHERE envelopeId = ?").execute(arguments: [envelopeId])
            try Self.journal(db, at: now, envelopeId: ids.localId, transactionId: ids.transactionId, kind: .removed, state: "removed")
            return ids
        }
    }

    // MARK: Drafts

    func saveDraft(_ envelope: Envelope, replacing: Bool) async throws {
        let body = try Self.encodeBody(envelope)
        let documents = try MessagePackEncoder().encodeData(envelope.documents)
        let now = clock().timeIntervalSince1970
        try await pool.write { db in
            if try Bool.fetchOne(db, sql: "SELECT 1 FROM drafts") != nil, !replacing {
                throw DeviceNodeError(.draftExists, "a draft is already cached; compose it (composeDraft) or discard it first")
            }
            // The draft keeps its documents inline: it has no rows elsewhere until composed.
            var combined = Data()
            let bodyCount = UInt32(body.count)
            withUnsafeBytes(of: bodyCount.bigEndian) { combined.append(contentsOf: $0) }
            combined.append(body)
            combined.append(documents)
            try db.execute(sql: "INSERT OR REPLACE INTO drafts (id, envelopeId, transactionId, body, savedAt) VALUES (1, ?, ?, ?, ?)",
                           arguments: [envelope.envelopeId, envelope.transactionId, combined, now])
        }
    }

    func draft() async throws -> Envelope? {
        try await read { db in
            guard let combined = try Data.fetchOne(db, sql: "SELECT body FROM drafts WHERE id = 1") else { return nil }
            let bytes = Array(combined)
            guard bytes.count >= 4 else { throw DeviceNodeError(.storeFailure, "the cached draft is truncated") }
            let count = bytes[0..<4].reduce(0) { $0 << 8 | Int($1) }
            guard bytes.count >= 4 + count else { throw DeviceNodeError(.storeFailure, "the cached draft is truncated") }
            var envelope = try MessagePackDecoder().decode(Envelope.self, from: Array(bytes[4..<(4 + count)]))
            envelope.documents = try MessagePackDecoder().decode([Document].self, from: Array(bytes[(4 + count)...]))
            return envelope
        }
    }

    func deleteDraft() async throws -> Bool {
        try await pool.write { db in
            try db.execute(sql: "DELETE FROM drafts")
            return db.changesCount > 0
        }
    }

    // MARK: Templates

    func upsertTemplate(_ template: EnvelopeTemplate, cachedAt: Date) async throws -> Bool {
        let body = try MessagePackEncoder().encodeData(template)
        return try await pool.write { db in
            let existed = try Bool.fetchOne(db, sql: "SELECT 1 FROM templates WHERE templateId = ?", arguments: [template.templateId]) != nil
            try db.execute(sql: "INSERT OR REPLACE INTO templates (templateId, body, lastModified, cachedAt) VALUES (?, ?, ?, ?)",
                           arguments: [template.templateId, body, template.lastModified.timeIntervalSince1970, cachedAt.timeIntervalSince1970])
            return existed
        }
    }

    func templates() async throws -> [CachedTemplate] {
        try await read { db in
            try Row.fetchAll(db.cachedStatement(sql: "SELECT body, cachedAt FROM templates ORDER BY templateId")).map { row in
                let body: Data = row["body"]
                return CachedTemplate(template: try MessagePackDecoder().decode(EnvelopeTemplate.self, from: body),
                                      cachedAt: Date(timeIntervalSince1970: row["cachedAt"]))
            }
        }
    }

    func deleteTemplate(id: String) async throws -> Bool {
        try await pool.write { db in
            try db.execute(sql: "DELETE FROM templates WHERE templateId = ?", arguments: [id])
            return db.changesCount > 0
        }
    }

    // MARK: Account

    func saveAccount(_ user: UserInfo, accessToken: String, at: Date) async throws {
        let body = try MessagePackEncoder().encodeData(user)
        try await pool.write { db in
            try db.execute(sql: "INSERT OR REPLACE INTO account (id, userInfo, accessToken, loggedInAt) VALUES (1, ?, ?, ?)",
                           arguments: [body, accessToken, at.timeIntervalSince1970])
        }
    }

    func account() async throws -> AccountInfo? {
        try await read { db in
            guard let row = try Row.fetchOne(db.cachedStatement(sql: "SELECT userInfo, accessToken, loggedInAt FROM account WHERE id = 1")) else { return nil }
            let body: Data = row["userInfo"]
            return AccountInfo(user: try MessagePackDecoder().decode(UserInfo.self, from: body), accessToken: row["accessToken"],
                               loggedInAt: Date(timeIntervalSince1970: row["loggedInAt"]), isOffline: true)
        }
    }

    /// Lists what a logout would lose: cached envelopes with any local signature or decline, and
    /// queued outbox items.
    func unsynced() async throws -> [EnvelopeIDs] {
        try await read { db in try Self.unsynced(db) }
    }

    /// Envelopes (`e`) holding work the server has not received: signed, declined or queued.
    private static let unsyncedCondition = """
        e.localState IN ('pendingSync', 'syncing', 'syncFailed')
           OR EXISTS (SELECT 1 FROM signatures s WHERE s.envelopeId = e.envelopeId)
           OR EXISTS (SELECT 1 FROM journal j WHERE j.envelopeId = e.envelopeId AND j.kind = 'signerDeclined')
        """

    private static func unsynced(_ db: Database) throws -> [EnvelopeIDs] {
        try Row.fetchAll(db, sql: "SELECT envelopeId, transactionId FROM envelopes e WHERE \(unsyncedCondition) ORDER BY createdAt, envelopeId")
            .map { EnvelopeIDs(localId: $0["envelopeId"], transactionId: $0["transactionId"]) }
    }

    /// Clears local data. Outbox items already pushed at least once stay (with their envelopes):
    /// the server may have applied them, and their acknowledgement must still settle them.
    /// Never-pushed items are the outbox's tail, so dropping them leaves the numbering gapless.
    func logout() async throws -> LogoutWrite {
        let now = clock().timeIntervalSince1970
        return try await pool.write { db in
            let inFlight = try Row.fetchAll(db, sql: "SELECT sequence, envelopeId FROM outbox WHERE status = 'pending' AND attempts > 0")
            let keptEnvelopes = Set(inFlight.map { $0["envelopeId"] as String })
            let dropped = try Row.fetchAll(db, sql: "SELECT sequence FROM outbox WHERE status = 'pending' AND attempts = 0 ORDER BY sequence")
                .map { UInt64($0["sequence"] as Int64) }
            let unsynced = Set(try Self.unsynced(db).map(\.localId))
            var droppedEnvelopes: [EnvelopeIDs] = []
            var clearedEnvelopes: [EnvelopeIDs] = []
            for row in try Row.fetchAll(db, sql: "SELECT envelopeId, transactionId FROM envelopes ORDER BY createdAt, envelopeId") {
                let ids = EnvelopeIDs(localId: row["envelopeId"], transactionId: row["transactionId"])
                if keptEnvelopes.contains(ids.localId) { continue }
                if unsynced.contains(ids.localId) { droppedEnvelopes.append(ids) } else { clearedEnvelopes.append(ids) }
                try db.execute(sql: "DELETE FROM envelopes WHERE envelopeId = ?", arguments: [ids.localId])
                try Self.journal(db, at: now, envelopeId: ids.localId, transactionId: ids.transactionId, kind: .dropped,
                                 state: "removed", detail: "forced logout")
            }
            try db.execute(sql: "DELETE FROM outbox WHERE status = 'pending' AND attempts = 0")
            try db.execute(sql: "DELETE FROM drafts")
            try db.execute(sql: "DELETE FROM templates")
            try db.execute(sql: "DELETE FROM account")
            return LogoutWrite(droppedEnvelopes: droppedEnvelopes, clearedEnvelopes: clearedEnvelopes, droppedSequences: dropped,
                               keptInFlight: inFlight.map { UInt64($0["sequence"] as Int64) }.sorted())
        }
    }

    // MARK: Outbox

    static func outboxItem(_ row: Row) -> OutboxItem {
        let payload: Data? = row["payload"]
        let sha: Data = row["payloadSHA256"]
        let signature: Data = row["signature"]
        let sequence: Int64 = row["sequence"]
        let status = OutboxStatus(rawValue: row["status"]) ?? .pending
        var receipt: SyncReceipt?
        if let outcome = (row["outcome"] as String?).flatMap(SyncReceipt.Outcome.init(rawValue:)) {
            receipt = SyncReceipt(outcome: outcome, serverEnvelopeId: row["serverEnvelopeId"], reason: row["reason"],
                                  recordedAt: Date(timeIntervalSince1970: row["recordedAt"] ?? 0))
        }
        return OutboxItem(
            sequence: UInt64(clamping: sequence),
            envelope: EnvelopeIDs(localId: row["envelopeId"], transactionId: row["transactionId"], serverId: row["serverEnvelopeId"]),
            payload: payload.map(Array.init), payloadSHA256: Array(sha), signature: Array(signature),
            createdAt: Date(timeIntervalSince1970: row["createdAt"]), status: status, attempts: row["attempts"], receipt: receipt)
    }

    func outbox(status: OutboxStatus?, after: UInt64 = 0, limit: Int = Int.max) async throws -> [OutboxItem] {
        try await read { db in
            let limit = Int64(clamping: limit)
            if let status {
                return try Row.fetchAll(db.cachedStatement(sql: "SELECT * FROM outbox WHERE status = ? AND sequence > ? ORDER BY sequence LIMIT ?"),
                                        arguments: [status.rawValue, Int64(clamping: after), limit]).map(Self.outboxItem)
            }
            return try Row.fetchAll(db, sql: "SELECT * FROM outbox WHERE sequence > ? ORDER BY sequence LIMIT ?",
                                    arguments: [Int64(clamping: after), limit]).map(Self.outboxItem)
        }
    }

    /// The ids of the envelope this device synced under `serverId` (its outbox receipt), or `nil`.
    func envelopeIDs(serverId: String) async throws -> EnvelopeIDs? {
        try await read { db in
            try Row.fetchOne(
                db.cachedStatement(sql: "SELECT envelopeId, transactionId FROM outbox WHERE serverEnvelopeId = ? ORDER BY sequence DESC LIMIT 1"),
                arguments: [serverId]
            ).map { EnvelopeIDs(localId: $0["envelopeId"], transactionId: $0["transactionId"], serverId: serverId) }
        }
    }

    /// Applies one local-state event to the envelopes of pending outbox items, with a journal entry.
    func syncTransition(
        sequences: [UInt64], event: EnvelopeLocalEvent, kind: JournalEntry.Kind, detail: String?, countAttempt: Bool
    ) async throws -> [(UInt64, EnvelopeIDs)] {
        let now = clock().timeIntervalSince1970
        return try await pool.write { db in
            var changed: [(UInt64, EnvelopeIDs)] = []
            for sequence in sequences {
                guard let row = try Row.fetchOne(db.cachedStatement(sql: "SELECT envelopeId, transactionId, serverEnvelopeId, status FROM outbox WHERE sequence = ?"),
                                                 arguments: [Int64(clamping: sequence)]) else {
                    throw DeviceNodeError(.unknownSequence, "outbox has no item \(sequence)")
                }
                guard (row["status"] as String) == OutboxStatus.pending.rawValue,
                      var stored = try Self.loadEnvelope(db, id: row["envelopeId"]) else { continue }
                if countAttempt {
                    try db.cachedStatement(sql: "UPDATE outbox SET attempts = attempts + 1 WHERE sequence = ?").execute(arguments: [Int64(clamping: sequence)])
                }
                // Repeated events (a second "started" while syncing) are harmless: keep the state.
                if (try? stored.envelope.apply(event, at: Date(timeIntervalSince1970: now))) != nil {
                    try Self.updateEnvelope(db, stored.envelope, now: now)
                    try Self.journal(db, at: now, envelopeId: stored.envelope.envelopeId, transactionId: stored.envelope.transactionId,
                                     kind: kind, state: stored.envelope.localState.rawValue, sequence: sequence, detail: detail)
                }
                changed.append((sequence, EnvelopeIDs(stored.envelope)))
            }
            return changed
        }
    }

    /// Records the server's answer for one item. Applied or duplicate: the envelope leaves the
    /// cache and the outbox row becomes its receipt (payload dropped). Rejected: the envelope leaves
    /// the cache and the row keeps its payload for inspection. A second answer for a settled item
    /// changes nothing.
    func recordReceipt(sequence: UInt64, receipt: SyncReceipt) async throws -> (ids: EnvelopeIDs, changed: Bool) {
        let now = clock().timeIntervalSince1970
        return try await pool.write { db in
            // Only what the receipt needs: not the payload (tens of KB), nor a `SELECT *`
            // statement kept prepared in every store.
            guard let row = try Row.fetchOne(
                db.cachedStatement(sql: "SELECT envelopeId, transactionId, serverEnvelopeId, status FROM outbox WHERE sequence = ?"),
                arguments: [Int64(clamping: sequence)]) else {
                throw DeviceNodeError(.unknownSequence, "outbox has no item \(sequence); the acknowledgement is for another device or store")
            }
            var item = (envelope: EnvelopeIDs(localId: row["envelopeId"], transactionId: row["transactionId"], serverId: row["serverEnvelopeId"]),
                        status: OutboxStatus(rawValue: row["status"]) ?? .pending)
            guard item.status == .pending else { return (item.envelope, false) }
            let status: OutboxStatus = receipt.outcome.isRefusal ? .rejected : .synced
            try db.cachedStatement(sql: """
                UPDATE outbox SET status = ?, outcome = ?, serverEnvelopeId = ?, reason = ?, recordedAt = ?,
                    payload = CASE WHEN ? THEN NULL ELSE payload END
                WHERE sequence = ?
                """).execute(arguments: [status.rawValue, receipt.outcome.rawValue, receipt.serverEnvelopeId, receipt.reason,
                                 receipt.recordedAt.timeIntervalSince1970, status == .synced && !retainsSynced, Int64(clamping: sequence)])
            item.envelope.serverId = receipt.serverEnvelopeId
            try db.cachedStatement(sql: "DELETE FROM envelopes WHERE envelopeId = ?").execute(arguments: [item.envelope.localId])
            try Self.journal(db, at: now, envelopeId: item.envelope.localId, transactionId: item.envelope.transactionId,
                             kind: status == .synced ? .synced : .rejected, state: "removed", sequence: sequence,
                             detail: receipt.serverEnvelopeId ?? receipt.reason)
            return (item.envelope, true)
        }
    }

    func journalEntries(envelopeId: String?) async throws -> [JournalEntry] {
        try await read { db in
            let rows: [Row]
            if let envelopeId {
                rows = try Row.fetchAll(db, sql: "SELECT * FROM journal WHERE envelopeId = ? ORDER BY id", arguments: [envelopeId])
            } else {
                rows = try Row.fetchAll(db, sql: "SELECT * FROM journal ORDER BY id")
            }
            return rows.map { row in
                JournalEntry(id: row["id"], at: Date(timeIntervalSince1970: row["at"]), envelopeId: row["envelopeId"],
                             transactionId: row["transactionId"], kind: JournalEntry.Kind(rawValue: row["kind"]) ?? .recovered,
                             state: row["state"], sequence: (row["sequence"] as Int64?).map { UInt64(clamping: $0) }, detail: row["detail"])
            }
        }
    }
}
