import Coordinator
import CoordinatorPostgres
import Crypto
import DeviceNode
import Foundation
import GRDB
import Synchronization

/// Opens a run's SQLite file read-only: the checker never changes what it judges.
enum CheckerDatabase {
    static func openReadOnly(_ path: String) throws -> DatabaseQueue {
        guard FileManager.default.fileExists(atPath: path) else {
            throw CheckerError.unreadable(path: path, reason: "no such file")
        }
        var configuration = Configuration()
        configuration.readonly = true
        configuration.label = "Checker"
        configuration.busyMode = .timeout(5)
        return try DatabaseQueue(path: path, configuration: configuration)
    }

    static func sha256(_ data: Data) -> [UInt8] { Array(SHA256.hash(data: data)) }
}

/// What the coordinator's store holds, as the checker needs it: the store's read-only
/// ``CoordinatorSnapshot`` (the same for SQLite and PostgreSQL), indexed. Payloads are verified
/// while the store hands them over (``Envelope/verification``) and not kept.
struct ServerSnapshot: Sendable {
    struct Device: Sendable {
        var id: String
        var accountID: String
        var publicKey: [UInt8]
        var lastAppliedSequence: UInt64
    }

    struct Envelope: Sendable {
        /// 1-based place in the store's ingest order (the snapshot's order), shown in order witnesses.
        var position: Int
        var id: String
        var accountID: String
        var deviceID: String
        var sequence: UInt64
        var transactionID: String
        var localEnvelopeID: String
        var status: String
        var createdAt: Date?
        var payloadSHA256: [UInt8]
        /// `nil` when the payload verifies with the device's enrolled key; otherwise why not.
        var verification: String?
    }

    struct SyncResult: Sendable {
        /// 1-based place in the store's order of results.
        var position: Int
        var accountID: String
        var deviceID: String
        var sequence: UInt64
        var outcome: String
        var envelopeID: String?
        var reason: String?
        /// The digest stored with the result (nil in rows from before it was kept).
        var payloadSHA256: [UInt8]? = nil
    }

    struct Recipient: Sendable {
        var envelopeID: String
        var recipientID: String
        var type: String
        var routingOrder: Int
        var status: String
        var statusChangedAt: Date?
    }

    struct AccountDevice: Hashable, Sendable {
        var account: String
        var device: String
    }

    /// The store's name shown in witnesses (`coordinator.sqlite`, or the PostgreSQL location).
    var store: String
    /// The checked accounts' devices by id (``restricted(to:)``).
    var devices: [String: Device]
    /// Every account's devices.
    var allDevices: [AccountDevice: Device]
    /// In ingest order.
    var envelopes: [Envelope]
    /// In ingest order.
    var syncResults: [SyncResult]
    var recipients: [String: [Recipient]]

    /// Reads the coordinator store at `location` (a SQLite file, opened read-only, or a
    /// `postgres://` URL, opened without migrating) through its ``CoordinatorSnapshot``, and
    /// verifies each payload as the store hands it over.
    static func read(location: String, store: String) async throws -> ServerSnapshot {
        let failures = VerificationFailures()
        let verify: @Sendable (CoordinatorSnapshot.Payload) -> Void = { signed in
            guard let failure = Self.verify(signed) else { return }
            failures.byIndex.withLock { $0[signed.index] = failure }
        }
        let snapshot: CoordinatorSnapshot
        if PostgresCoordinatorStore.isURL(location) {
            let postgres = try await PostgresCoordinatorStore(url: location, readOnly: true)
            defer { postgres.close() }
            snapshot = try await postgres.checkerSnapshot(payloads: verify)
        } else {
            guard FileManager.default.fileExists(atPath: location) else { throw CheckerError.unreadable(path: location, reason: "no such file") }
            snapshot = try CoordinatorStore.checkerSnapshot(readOnlyPath: location, payloads: verify)
        }
        return ServerSnapshot(snapshot, verifications: failures.byIndex.withLock { $0 }, store: store)
    }

    /// Why envelopes do not verify, by index, filled while the store hands the payloads over.
    private final class VerificationFailures: Sendable {
        let byIndex = Mutex<[Int: String]>([:])
    }

    /// The checker's view of a store's snapshot; `verifications`: why the envelope at an index does not verify.
    init(_ snapshot: CoordinatorSnapshot, verifications: [Int: String], store: String) {
        // Device ids are unique per account (several accounts may use one id): rows are keyed
        // per account, and each payload was verified with its own account's device key.
        var allDevices: [AccountDevice: Device] = [:]
        for row in snapshot.devices {
            let device = Device(
                id: row.id, accountID: row.accountID, publicKey: Array(row.publicKey),
                lastAppliedSequence: UInt64(clamping: row.lastAppliedSequence))
            allDevices[AccountDevice(account: device.accountID, device: device.id)] = device
        }
        let envelopes = snapshot.envelopes.enumerated().map { index, row in
            Envelope(
                position: index + 1, id: row.id, accountID: row.accountID, deviceID: row.deviceID, sequence: UInt64(clamping: row.sequence),
                transactionID: row.transactionID, localEnvelopeID: row.localEnvelopeID, status: row.status, createdAt: row.createdAt,
                payloadSHA256: Array(row.payloadSHA256), verification: verifications[index])
        }
        let syncResults = snapshot.syncResults.enumerated().map { index, row in
            SyncResult(
                position: index + 1, accountID: row.accountID, deviceID: row.deviceID, sequence: UInt64(clamping: row.sequence),
                outcome: row.outcome, envelopeID: row.envelopeID, reason: row.reason, payloadSHA256: row.payloadSHA256.map { Array($0) })
        }
        var recipients: [String: [Recipient]] = [:]
        for row in snapshot.recipients {
            recipients[row.envelopeID, default: []].append(
                Recipient(
                    envelopeID: row.envelopeID, recipientID: row.recipientID, type: row.type, routingOrder: row.routingOrder,
                    status: row.status, statusChangedAt: row.statusChangedAt))
        }
        // Every account's rows: the checker narrows them down with `restricted(to:)`.
        self.init(store: store, devices: [:], allDevices: allDevices, envelopes: envelopes, syncResults: syncResults, recipients: recipients)
    }

    init(
        store: String, devices: [String: Device], allDevices: [AccountDevice: Device], envelopes: [Envelope], syncResults: [SyncResult],
        recipients: [String: [Recipient]]
    ) {
        self.store = store
        self.devices = devices
        self.allDevices = allDevices
        self.envelopes = envelopes
        self.syncResults = syncResults
        self.recipients = recipients
    }

    /// The snapshot as seen by the accounts in `accounts` (nil: every account), with ``devices``
    /// keyed by id. Two accounts' devices of the same id cannot both be checked by id: when
    /// `accounts` is nil and an id repeats, the first account (by name) is kept.
    func restricted(to accounts: Set<String>?) -> ServerSnapshot {
        var copy = self
        let kept = { (account: String) in accounts?.contains(account) ?? true }
        copy.devices = [:]
        for key in allDevices.keys.sorted(by: { ($0.account, $0.device) < ($1.account, $1.device) }) where kept(key.account) {
            if copy.devices[key.device] == nil { copy.devices[key.device] = allDevices[key] }
        }
        let chosen = Set(copy.devices.values.map { AccountDevice(account: $0.accountID, device: $0.id) })
        let isChosen = { (account: String, device: String) in
            chosen.contains(AccountDevice(account: account, device: device)) || (kept(account) && copy.devices[device] == nil)
        }
        copy.envelopes = envelopes.filter { isChosen($0.accountID, $0.deviceID) }
        copy.syncResults = syncResults.filter { isChosen($0.accountID, $0.deviceID) }
        let envelopeIDs = Set(copy.envelopes.map(\.id))
        copy.recipients = recipients.filter { envelopeIDs.contains($0.key) }
        return copy
    }

    /// The accounts whose device of id `device` has the Ed25519 key `publicKey`.
    func accounts(ofDevice device: String, publicKey: [UInt8]) -> [String] {
        allDevices.values.filter { $0.id == device && $0.publicKey == publicKey }.map(\.accountID)
    }

    /// The checker's own implementation of the documented rule (``CheckerSignatureRule``, every
    /// signature checked), plus the row's local envelope id; nil when it verifies, else why not.
    static func verify(_ signed: CoordinatorSnapshot.Payload) -> String? {
        let envelope = signed.envelope
        guard let device = signed.device else { return "device \(envelope.deviceID) is not enrolled on the server" }
        let result = CheckerSignatureRule.check(
            payload: Array(signed.payload), signature: Array(signed.signature), deviceID: envelope.deviceID,
            sequence: UInt64(clamping: envelope.sequence), transactionID: envelope.transactionID, publicKey: Array(device.publicKey))
        switch result {
        case .failure(let failure):
            return failure.reason
        case .success(let verified):
            guard verified.envelopeID == envelope.localEnvelopeID else {
                return "the payload's envelope id \(verified.envelopeID) is not the row's local envelope id \(envelope.localEnvelopeID)"
            }
            return nil
        }
    }
}

/// What one device's store holds, as the checker needs it.
struct DeviceSnapshot: Sendable {
    struct OutboxRow: Sendable {
        var sequence: UInt64
        var envelopeId: String
        var transactionId: String
        var status: String
        var attempts: Int
        var outcome: String?
        var serverEnvelopeId: String?
        var reason: String?
        var payloadSHA256: [UInt8]
    }

    struct JournalRow: Sendable {
        var id: Int64
        var envelopeId: String
        var transactionId: String
        var kind: String
        var state: String
        var sequence: UInt64?
        var detail: String?
    }

    /// The file name shown in witnesses (`devices/<file>`).
    let store: String
    let deviceID: String
    /// The device's Ed25519 public key (empty if the stored private key is unreadable).
    let publicKey: [UInt8]
    /// The account the device logged in to (nil before its first login).
    let accountID: String?
    /// `DeviceConfiguration.Durability` the store was last opened with (nil for older stores).
    let durability: String?
    /// By sequence.
    let outbox: [OutboxRow]
    /// Cached envelopes by transaction id: (local id, local state).
    let envelopes: [String: (envelopeId: String, localState: String)]
    /// The last journal entry of every transaction the device ever journalled.
    let lastJournal: [String: JournalRow]
    /// Journal entries of kind `dropped` (forced logout), by transaction.
    let dropped: [String: JournalRow]

    let outboxBySequence: [UInt64: OutboxRow]
    let outboxTransactions: Set<String>

    init(
        store: String, deviceID: String, publicKey: [UInt8] = [], accountID: String? = nil, durability: String? = nil, outbox: [OutboxRow],
        envelopes: [String: (envelopeId: String, localState: String)], lastJournal: [String: JournalRow], dropped: [String: JournalRow]
    ) {
        self.store = store
        self.deviceID = deviceID
        self.publicKey = publicKey
        self.accountID = accountID
        self.durability = durability
        self.outbox = outbox
        self.envelopes = envelopes
        self.lastJournal = lastJournal
        self.dropped = dropped
        outboxBySequence = Dictionary(outbox.map { ($0.sequence, $0) }, uniquingKeysWith: { first, _ in first })
        outboxTransactions = Set(outbox.map(\.transactionId))
    }

    /// Whether the store has any trace of the transaction (outbox, cache or journal).
    func knows(transaction: String) -> Bool {
        outboxTransactions.contains(transaction) || envelopes[transaction] != nil || lastJournal[transaction] != nil
    }

    /// Reads the device store at `path` through its read-only ``DeviceStoreSnapshot`` (module
    /// DeviceNode): the checker never reads a device's tables itself.
    static func read(path: String, store: String) throws -> DeviceSnapshot {
        DeviceSnapshot(try DeviceStoreSnapshot.read(readOnlyPath: path), store: store)
    }

    /// The checker's view of a device store's snapshot, indexed.
    init(_ snapshot: DeviceStoreSnapshot, store: String) {
        let outbox = snapshot.outbox.map { row in
            OutboxRow(
                sequence: row.sequence, envelopeId: row.envelopeId, transactionId: row.transactionId, status: row.status,
                attempts: row.attempts, outcome: row.outcome, serverEnvelopeId: row.serverEnvelopeId, reason: row.reason,
                payloadSHA256: Array(row.payloadSHA256))
        }
        var envelopes: [String: (envelopeId: String, localState: String)] = [:]
        for row in snapshot.envelopes { envelopes[row.transactionId] = (row.envelopeId, row.localState) }
        func journal(_ row: DeviceStoreSnapshot.JournalRow) -> JournalRow {
            JournalRow(
                id: row.id, envelopeId: row.envelopeId, transactionId: row.transactionId, kind: row.kind, state: row.state,
                sequence: row.sequence, detail: row.detail)
        }
        var last: [String: JournalRow] = [:]
        for row in snapshot.lastJournalEntries { last[row.transactionId] = journal(row) }
        var dropped: [String: JournalRow] = [:]
        for row in snapshot.droppedJournalEntries { dropped[row.transactionId] = journal(row) }
        self.init(
            store: store, deviceID: snapshot.deviceId, publicKey: Array(snapshot.publicKey), accountID: snapshot.accountId,
            durability: snapshot.durability, outbox: outbox, envelopes: envelopes, lastJournal: last, dropped: dropped)
    }
}
