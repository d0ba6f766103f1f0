import Crypto
import Foundation
import GRDB
import MessagePack

/// A read-only, typed copy of what a device's store holds, for the fleet checker (docs/checker.md,
/// "Inputs"; docs/storage.md, "The device store's snapshot"): the device's id and public key, the
/// account it logged in to, its outbox with receipts, the envelopes it still caches, and its journal's
/// last word on every transaction.
///
/// The store's tables stay private to this module: ``read(readOnlyPath:)`` opens a store file
/// read-only (no migration, no recovery, no write; a store whose node was killed is read with its
/// write-ahead log) and copies it out in one read transaction, so the copy is consistent. Values
/// are carried as the store holds them, a state or a kind the current code would not write
/// included: a checker must see a damaged row as it is. The typed accessors (``OutboxRow/outboxStatus``,
/// ``JournalRow/journalKind``, …) are nil for such values. The private key never leaves the store:
/// the snapshot has the public key only.
///
/// ```swift
/// let snapshot = try DeviceStoreSnapshot.read(readOnlyPath: "runs/latest/devices/a-1.sqlite")
/// let pending = snapshot.outbox.filter { $0.outboxStatus == .pending }
/// ```
public struct DeviceStoreSnapshot: Sendable, Hashable {
    /// One outbox item: what the device signed and queued, and the server's answer once it came.
    public struct OutboxRow: Sendable, Hashable {
        /// The item's sequence number (1, 2, 3, … per device).
        public var sequence: UInt64
        /// The device's envelope id.
        public var envelopeId: String
        /// The envelope's transaction id.
        public var transactionId: String
        /// The stored status: an ``OutboxStatus`` raw value (`pending`, `synced`, `rejected`).
        public var status: String
        /// Pushes that included the item.
        public var attempts: Int
        /// The receipt's outcome, a ``SyncReceipt/Outcome`` raw value (nil before an answer).
        public var outcome: String?
        /// The server's envelope id from the receipt.
        public var serverEnvelopeId: String?
        /// The server's reason, for a rejected item.
        public var reason: String?
        /// SHA-256 of the signed payload (kept after the payload itself is dropped).
        public var payloadSHA256: Data

        /// ``status`` as an ``OutboxStatus``; nil for a value this version does not write.
        public var outboxStatus: OutboxStatus? { OutboxStatus(rawValue: status) }
        /// ``outcome`` as a ``SyncReceipt/Outcome``; nil without a receipt or for an unknown value.
        public var receiptOutcome: SyncReceipt.Outcome? { outcome.flatMap(SyncReceipt.Outcome.init(rawValue:)) }

        /// Creates a row.
        public init(
            sequence: UInt64, envelopeId: String, transactionId: String, status: String, attempts: Int, outcome: String?,
            serverEnvelopeId: String?, reason: String?, payloadSHA256: Data
        ) {
            self.sequence = sequence
            self.envelopeId = envelopeId
            self.transactionId = transactionId
            self.status = status
            self.attempts = attempts
            self.outcome = outcome
            self.serverEnvelopeId = serverEnvelopeId
            self.reason = reason
            self.payloadSHA256 = payloadSHA256
        }
    }

    /// An envelope still in the device's cache.
    public struct CachedEnvelope: Sendable, Hashable {
        /// The device's envelope id.
        public var envelopeId: String
        /// Its transaction id.
        public var transactionId: String
        /// Its local state, an `EnvelopeLocalState` raw value (module Envelopes).
        public var localState: String

        /// Creates a row.
        public init(envelopeId: String, transactionId: String, localState: String) {
            self.envelopeId = envelopeId
            self.transactionId = transactionId
            self.localState = localState
        }
    }

    /// One journal entry (``JournalEntry``, as stored).
    public struct JournalRow: Sendable, Hashable {
        /// The entry's id: the order of writing.
        public var id: Int64
        /// The device's envelope id.
        public var envelopeId: String
        /// Its transaction id.
        public var transactionId: String
        /// What happened: a ``JournalEntry/Kind`` raw value.
        public var kind: String
        /// The envelope's local state after it, or `removed`.
        public var state: String
        /// The outbox sequence, when the entry concerns one.
        public var sequence: UInt64?
        /// Details (recipient id, reason, server envelope id, …).
        public var detail: String?

        /// ``kind`` as a ``JournalEntry/Kind``; nil for a value this version does not write.
        public var journalKind: JournalEntry.Kind? { JournalEntry.Kind(rawValue: kind) }

        /// Creates a row.
        public init(id: Int64, envelopeId: String, transactionId: String, kind: String, state: String, sequence: UInt64?, detail: String?) {
            self.id = id
            self.envelopeId = envelopeId
            self.transactionId = transactionId
            self.kind = kind
            self.state = state
            self.sequence = sequence
            self.detail = detail
        }
    }

    /// The device's id.
    public var deviceId: String
    /// The device's Ed25519 public key (32 bytes), derived from the stored private key; empty when
    /// the stored key is unreadable.
    public var publicKey: Data
    /// The account the device last logged in to (its user info's `accountId`); nil before the first
    /// login, after a logout, or when the stored user info does not decode.
    public var accountId: String?
    /// The durability the store was last opened with, a ``DeviceConfiguration/Durability`` raw
    /// value (nil for stores written before it was recorded).
    public var durability: String?
    /// Every outbox item, by sequence.
    public var outbox: [OutboxRow]
    /// Every cached envelope, by envelope id (bytewise).
    public var envelopes: [CachedEnvelope]
    /// The last journal entry of each transaction the device ever journalled, in journal order.
    public var lastJournalEntries: [JournalRow]
    /// Each transaction's last entry of kind `dropped` (a forced logout dropped it), in journal order.
    public var droppedJournalEntries: [JournalRow]

    /// ``durability`` as a ``DeviceConfiguration/Durability``; nil when absent or unknown.
    public var storeDurability: DeviceConfiguration.Durability? { durability.flatMap(DeviceConfiguration.Durability.init(rawValue:)) }

    /// Creates a snapshot (tests build them by hand; stores export theirs with ``read(readOnlyPath:)``).
    public init(
        deviceId: String, publicKey: Data, accountId: String?, durability: String?, outbox: [OutboxRow], envelopes: [CachedEnvelope],
        lastJournalEntries: [JournalRow], droppedJournalEntries: [JournalRow]
    ) {
        self.deviceId = deviceId
        self.publicKey = publicKey
        self.accountId = accountId
        self.durability = durability
        self.outbox = outbox
        self.envelopes = envelopes
        self.lastJournalEntries = lastJournalEntries
        self.droppedJournalEntries = droppedJournalEntries
    }

    /// The snapshot of the device store at `path`, opened read-only.
    ///
    /// Nothing is written, migrated or recovered: an envelope a crash left `syncing` is read as
    /// `syncing`. The journal is streamed (one row in memory at a time) and only each transaction's
    /// last entry is kept.
    ///
    /// The path is the store's SQLite file (`devices/<id>.sqlite` in a run directory).
    ///
    /// - Returns: the store's contents, read in one transaction.
    /// - Throws: ``DeviceNodeError`` with code ``DeviceNodeError/Code/storeFailure`` when there is no
    ///   file at `path`, the file is not a device store, or a device node never opened it (no
    ///   device row); GRDB's `DatabaseError` when SQLite cannot read it, and its `RowDecodingError`
    ///   for a damaged row (a NULL where a value is required, a value of another type).
    public static func read(readOnlyPath path: String) throws -> DeviceStoreSnapshot {
        guard FileManager.default.fileExists(atPath: path) else {
            throw DeviceNodeError(.storeFailure, "no device store at \(path)")
        }
        var configuration = Configuration()
        configuration.readonly = true
        configuration.label = "DeviceStoreSnapshot"
        configuration.busyMode = .timeout(5)
        let queue = try DatabaseQueue(path: path, configuration: configuration)
        defer { try? queue.close() }
        return try queue.read { db in try read(db, path: path) }
    }

    static func read(_ db: Database, path: String) throws -> DeviceStoreSnapshot {
        guard try db.tableExists("device"), try db.tableExists("outbox"), try db.tableExists("journal"), try db.tableExists("envelopes") else {
            throw DeviceNodeError(.storeFailure, "\(path) is not a device store (no device, outbox, journal or envelopes table)")
        }
        guard let deviceRow = try Row.fetchOne(db, sql: "SELECT deviceId, privateKey FROM device WHERE id = 1") else {
            throw DeviceNodeError(.storeFailure, "the store at \(path) has no device row (never opened by a device node)")
        }
        // Throwing decoders: a damaged row (a NULL or a value of another type) is an error, never a trap.
        let deviceId: String = try deviceRow.decode(forColumn: "deviceId")
        let privateKey: Data = try deviceRow.decode(forColumn: "privateKey")
        let publicKey = (try? Curve25519.Signing.PrivateKey(rawRepresentation: privateKey)).map { $0.publicKey.rawRepresentation } ?? Data()
        // The account is the one the device logged in to (its stored user info).
        let accountId = try db.tableExists("account")
            ? Data.fetchOne(db, sql: "SELECT userInfo FROM account WHERE id = 1")
                .flatMap { try? MessagePackDecoder().decode(UserInfo.self, from: $0) }?.accountId
            : nil
        let durability: String? = try db.columns(in: "device").contains { $0.name == "durability" }
            ? Row.fetchOne(db, sql: "SELECT durability FROM device WHERE id = 1").flatMap { try $0.decode(forColumn: "durability") } : nil
        let outbox = try Row.fetchAll(
            db,
            sql: """
                SELECT sequence, envelopeId, transactionId, status, attempts, outcome, serverEnvelopeId, reason, payloadSHA256
                FROM outbox ORDER BY sequence
                """
        ).map { row in
            let sequence: Int64 = try row.decode(forColumn: "sequence")
            return OutboxRow(
                sequence: UInt64(clamping: sequence), envelopeId: try row.decode(forColumn: "envelopeId"),
                transactionId: try row.decode(forColumn: "transactionId"), status: try row.decode(forColumn: "status"),
                attempts: try row.decode(forColumn: "attempts"), outcome: try row.decode(forColumn: "outcome"),
                serverEnvelopeId: try row.decode(forColumn: "serverEnvelopeId"), reason: try row.decode(forColumn: "reason"),
                payloadSHA256: try row.decode(forColumn: "payloadSHA256"))
        }
        let envelopes = try Row.fetchAll(db, sql: "SELECT envelopeId, transactionId, localState FROM envelopes ORDER BY envelopeId").map { row in
            CachedEnvelope(
                envelopeId: try row.decode(forColumn: "envelopeId"), transactionId: try row.decode(forColumn: "transactionId"),
                localState: try row.decode(forColumn: "localState"))
        }
        var last: [String: JournalRow] = [:]
        var dropped: [String: JournalRow] = [:]
        let cursor = try Row.fetchCursor(db, sql: "SELECT id, envelopeId, transactionId, kind, state, sequence, detail FROM journal ORDER BY id")
        while let row = try cursor.next() {
            let sequence: Int64? = try row.decode(forColumn: "sequence")
            let entry = JournalRow(
                id: try row.decode(forColumn: "id"), envelopeId: try row.decode(forColumn: "envelopeId"),
                transactionId: try row.decode(forColumn: "transactionId"), kind: try row.decode(forColumn: "kind"),
                state: try row.decode(forColumn: "state"), sequence: sequence.map { UInt64(clamping: $0) }, detail: try row.decode(forColumn: "detail"))
            last[entry.transactionId] = entry
            if entry.kind == JournalEntry.Kind.dropped.rawValue { dropped[entry.transactionId] = entry }
        }
        return DeviceStoreSnapshot(
            deviceId: deviceId, publicKey: publicKey, accountId: accountId, durability: durability, outbox: outbox, envelopes: envelopes,
            lastJournalEntries: last.values.sorted { $0.id < $1.id }, droppedJournalEntries: dropped.values.sorted { $0.id < $1.id })
    }
}
