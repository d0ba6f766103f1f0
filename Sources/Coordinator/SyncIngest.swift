import Crypto
import SyncContract
import FleetProtocol
import Foundation
import GRDB
import Metrics
import SignatureCapture

/// Applies devices' sync pushes exactly once and in order (shared/DESIGN.md, "Sync";
/// docs/sync.md).
///
/// Each push runs in a write transaction (its own savepoint) that walks the items in order
/// against the device's last applied sequence, stored in the same transaction as the effects:
/// - `seq <= last`: a duplicate, answered with the result stored the first time, when the
///   payload's SHA-256 is the one stored; a different payload is a `conflict` (nothing changes,
///   the walk stops);
/// - `seq == last + 1`: when the payload signature does not verify with the device's enrolled
///   key, `bad_signature`: stored nowhere, `last` stays, the walk stops (a forged item must not
///   use up the device's sequence number). Otherwise applied, or, when the device signed
///   something invalid, recorded as rejected with its reason; either way `last` advances, so
///   one bad item of the device's never blocks its later ones;
/// - `seq > last + 1`: the walk stops and the answer is `gap`, expecting `last + 1`.
///
/// Verification (Ed25519 signatures, document hashes, bindings) needs no database state
/// beyond the device's enrolled key, so it runs before the transaction, spread over the
/// cores, and the writer lock is held only for the walk and the inserts. Pushes that arrive
/// while a transaction runs share the next one (``IngestCommitQueue``, group commit).
/// docs/performance.md, "What bounds ingest, and what changed", has the profile behind this.
public struct SyncIngest: Sendable {
    let store: CoordinatorStore
    let devices: DeviceRegistry
    let now: @Sendable () -> Date
    /// The most items one push may carry.
    public var maxItemsPerPush: Int
    /// Which signatures are checked before an item is applied (default: every one).
    public var verification: IngestVerification = .everySignature
    /// Test failpoints (inert unless armed; see ``Failpoints``).
    public var failpoints = Failpoints.fromEnvironment()
    let metrics: SyncIngestMetrics
    let commitQueue: IngestCommitQueue

    /// - Parameter metricsFactory: where ``SyncIngestMetrics`` are reported; the process-wide
    ///   `MetricsSystem.factory` unless given.
    public init(
        store: CoordinatorStore, devices: DeviceRegistry, maxItemsPerPush: Int = 500,
        metricsFactory: any MetricsFactory = MetricsSystem.factory, now: @escaping @Sendable () -> Date = Date.init
    ) {
        self.metrics = SyncIngestMetrics(factory: metricsFactory)
        self.store = store
        self.devices = devices
        self.maxItemsPerPush = maxItemsPerPush
        self.now = now
        self.commitQueue = IngestCommitQueue(store: store)
    }

    /// Applies a push from the sender with `credential` (``DeviceRegistry/authenticate(deviceID:credential:)``).
    /// - Throws: ``FleetError``: `forbidden` / `unauthenticated` when the sender is not the
    ///   enrolled device it names; `feature_disabled` when its account has no offline signing;
    ///   `invalid_request` for an over-long push. A store failure is thrown as it is (GRDB's
    ///   `DatabaseError`); the request router answers `unavailable` (retryable) for a full or failing disk
    ///   and `internal` (retryable) for anything else.
    public func apply(_ push: SyncPush, credential: PeerCredential) async throws -> SyncAck {
        try await apply(push, credential: credential, meter: { _ in })
    }

    /// Plain TCP: the sender is whoever its routing id says.
    public func apply(_ push: SyncPush, routingID: String) async throws -> SyncAck {
        try await apply(push, credential: .claimedName(routingID))
    }

    /// `apply(_:credential:)`, with `meter` called once the account is known and before
    /// anything is applied (rate limits: a refused push changes nothing). Measured for metrics.
    func apply(_ push: SyncPush, credential: PeerCredential, meter: (Account) throws -> Void) async throws -> SyncAck {
        let started = ContinuousClock.now
        defer { metrics.duration.record(duration: started.duration(to: .now)) }
        let ack = try await applyUnmeasured(push, credential: credential, meter: meter)
        metrics.record(ack, pushed: push.items.count)
        return ack
    }

    /// Transactions the group commit ran and the pushes they carried, so far.
    public func commitCounts() async -> (transactions: Int, pushes: Int) {
        (await commitQueue.transactions, await commitQueue.pushes)
    }

    private func applyUnmeasured(_ push: SyncPush, credential: PeerCredential, meter: (Account) throws -> Void) async throws -> SyncAck {
        let (device, account) = try await sender(of: push, credential: credential)
        try meter(AccountDirectory.account(account))
        guard push.items.count <= maxItemsPerPush else {
            throw FleetError(.invalidRequest, "a push carries at most \(maxItemsPerPush) items; this one has \(push.items.count)")
        }
        if let item = push.items.first(where: { !Self.sequenceRange.contains($0.sequence) }) {
            throw FleetError(.invalidRequest, "item sequence \(item.sequence) is out of range: sequences start at 1 and are at most 2^63 - 1")
        }
        guard account.offlineSigning else {
            throw FleetError(
                .featureDisabled,
                "account \"\(account.name)\" does not have offline signing; envelopes signed offline cannot be accepted")
        }
        let key = try? StrictEd25519.publicKey(device.publicKey).get()
        let verdicts = await Self.verifyAll(
            push.items, device: device, key: key, appliedThrough: device.lastAppliedSequence, verification: verification)
        let recordedAt = now()
        let verification = self.verification
        let ack = try await commitQueue.commit { db in
            try Self.walk(db, push: push, verdicts: verdicts, device: device, key: key, verification: verification, recordedAt: recordedAt)
        }
        failpoints.hit(Failpoints.syncAfterCommit)
        // A gap means the device holds receipts for the items before its first pushed one: a
        // device pushes from just after its last receipt, so this store lost them.
        let gapShows = ack.status == .gap ? push.items.first.map { $0.sequence - 1 } : nil
        store.regressions.observe(
            accountID: device.accountID, deviceID: device.id, lastApplied: ack.lastApplied, acknowledgedThrough: gapShows)
        return ack
    }

    /// The enrolled device the push comes from and its account, in one read.
    private func sender(of push: SyncPush, credential: PeerCredential) async throws -> (EnrolledDevice, AccountRecord) {
        let deviceID = push.deviceID
        let (record, account) = try await store.database.read { db -> (DeviceRecord?, AccountRecord?) in
            guard let device = try DeviceRegistry.lookUp(db, deviceID: deviceID, credential: credential) else { return (nil, nil) }
            let account = try AccountRecord.fetchOne(
                db.cachedStatement(sql: "SELECT * FROM account WHERE id = ?"), arguments: [device.accountID])
            return (device, account)
        }
        let device = try DeviceRegistry.admit(record, deviceID: deviceID, credential: credential)
        guard let account else {
            throw FleetError(.unauthenticated, "the device's account no longer exists")
        }
        return (device, account)
    }

    /// One push's walk inside the write transaction (see the type's discussion).
    static func walk(
        _ db: Database, push: SyncPush, verdicts: [CheckedItem?], device: EnrolledDevice, key: Curve25519.Signing.PublicKey?,
        verification: IngestVerification, recordedAt: Date
    ) throws -> SyncAck {
        guard
            let row = try Row.fetchOne(
                db.cachedStatement(
                    sql: "SELECT lastAppliedSequence, publicKey, curveKey, revokedAt FROM device WHERE accountID = ? AND id = ?"),
                arguments: [device.accountID, device.id])
        else {
            throw FleetError(.unauthenticated, "device \"\(device.id)\" is not enrolled")
        }
        // The enrollment this push was admitted under must still hold now, inside the transaction:
        // a revocation (or a re-enrollment with new keys) during the push's verification wins.
        let publicKey: Data = row["publicKey"]
        let curveKey: Data? = row["curveKey"]
        let revokedAt: Date? = row["revokedAt"]
        guard revokedAt == nil, publicKey == Data(device.publicKey), curveKey == device.curveKey.map({ Data($0) }) else {
            throw FleetError(.forbidden, "device \"\(device.id)\" was revoked or enrolled with new keys while this push was checked; nothing was applied")
        }
        let stored: Int64 = row["lastAppliedSequence"]
        let at = recordedAt.databaseValue  // formatted once per push
        var last = UInt64(max(0, stored))
        var results: [SyncItemResult] = []
        var gapExpected: UInt64?
        var refused = false
        for (item, verdict) in zip(push.items, verdicts) {
            if item.sequence <= last {
                let result = try Self.storedResult(db, device: device, sequence: item.sequence, payload: item.payload)
                results.append(result)
                if result.outcome == .conflict {
                    refused = true
                    break
                }
                continue
            }
            guard item.sequence == last + 1 else {
                gapExpected = last + 1
                break
            }
            // Items above the `last` read before verification always have a verdict.
            let checkedItem = verdict ?? CheckedItem(item, device: device, key: key, verification: verification)
            let checked = checkedItem.verdict
            if case .failure(let rejection) = checked, !rejection.signedByDevice {
                results.append(SyncItemResult(sequence: item.sequence, outcome: .badSignature, reason: rejection.reason))
                refused = true
                break
            }
            let result = try Self.applyNext(db, item: item, verdict: checked, device: device, recordedAt: recordedAt)
            try db.cachedStatement(
                sql: """
                    INSERT INTO syncResult (accountID, deviceID, sequence, outcome, envelopeID, reason, recordedAt, payloadSHA256)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                    """
            ).execute(arguments: [
                device.accountID, device.id, Int64(item.sequence), result.outcome.rawValue, result.envelopeID, result.reason, at,
                checkedItem.payloadDigest,
            ])
            results.append(result)
            last = item.sequence
        }
        if Int64(last) != stored {
            try db.cachedStatement(sql: "UPDATE device SET lastAppliedSequence = ? WHERE accountID = ? AND id = ?")
                .execute(arguments: [Int64(last), device.accountID, device.id])
        }
        if let gapExpected {
            return SyncAck(status: .gap, lastApplied: last, expectedSequence: gapExpected, results: results)
        }
        if refused {
            return SyncAck(status: .refused, lastApplied: last, results: results)
        }
        return SyncAck(status: .ok, lastApplied: last, results: results)
    }

    /// Sequence numbers a device may use: from 1 up to what the store's 64-bit signed column holds.
    static let sequenceRange: ClosedRange<UInt64> = 1...UInt64(Int64.max)

    /// The answer recorded for an already-handled sequence, when `payload` is the one handled
    /// then (same SHA-256); `conflict` when it is not.
    static func storedResult(_ db: Database, device: EnrolledDevice, sequence: UInt64, payload: [UInt8]) throws -> SyncItemResult {
        guard sequence <= UInt64(Int64.max),
            let stored = try SyncResultRecord.fetchOne(
                db.cachedStatement(sql: "SELECT * FROM syncResult WHERE accountID = ? AND deviceID = ? AND sequence = ?"),
                arguments: [device.accountID, device.id, Int64(sequence)])
        else {
            // Sequences at or below `last` always have a stored result; none means a damaged store.
            throw FleetError(.internal, "no stored result for sequence \(sequence) of device \"\(device.id)\"", retryable: false)
        }
        // Rows written before the digest was kept (migration v6) cannot be compared.
        if let digest = stored.payloadSHA256, digest != Data(SHA256.hash(data: payload)) {
            return SyncItemResult(
                sequence: sequence, outcome: .conflict,
                reason: "item \(sequence) was already handled with a different payload (SHA-256 \(digest.hexPrefix)…); this payload is not that item")
        }
        // An applied item is answered as a duplicate with its envelope id; a rejected one
        // is answered with the same rejection, so the device learns the same thing twice.
        let outcome: SyncItemResult.Outcome = stored.outcome == SyncItemResult.Outcome.rejected.rawValue ? .rejected : .duplicate
        return SyncItemResult(sequence: sequence, outcome: outcome, envelopeID: stored.envelopeID, reason: stored.reason)
    }

    static func applyNext(
        _ db: Database, item: SyncItem, verdict: Verdict, device: EnrolledDevice, recordedAt: Date
    ) throws -> SyncItemResult {
        let payload: SyncPayload
        switch verdict {
        case .failure(let rejection):
            return SyncItemResult(sequence: item.sequence, outcome: .rejected, reason: rejection.reason)
        case .success(let verified):
            payload = verified
        }
        let envelopeID = serverEnvelopeID(accountID: device.accountID, transactionID: payload.transactionId)
        // Only the columns the answer needs: the full row would read the payload blob back.
        if let existing = try Row.fetchOne(
            db.cachedStatement(sql: "SELECT sequence, deviceID FROM envelope WHERE id = ?"), arguments: [envelopeID])
        {
            // The transaction id already made an envelope: never create a second one.
            let sequence: Int64 = existing["sequence"]
            let deviceID: String = existing["deviceID"]
            return SyncItemResult(
                sequence: item.sequence, outcome: .duplicate, envelopeID: envelopeID,
                reason: "transaction \(payload.transactionId) was already applied as item \(sequence) of device \(deviceID)")
        }
        var lifecycle = EnvelopeLifecycle(payload: payload)
        let routed: [String]
        do {
            routed = try lifecycle.apply(.synced)
        } catch {
            return SyncItemResult(sequence: item.sequence, outcome: .rejected, reason: "the envelope cannot start its lifecycle: \(error.message)")
        }
        try db.cachedStatement(
            sql: """
                INSERT INTO envelope (id, accountID, deviceID, sequence, transactionID, localEnvelopeID, name, status,
                                      payload, deviceSignature, createdAt)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """
        ).execute(arguments: [
            envelopeID, device.accountID, device.id, Int64(item.sequence), payload.transactionId, payload.envelopeId,
            payload.name, lifecycle.status.rawValue, Data(item.payload), Data(item.signature), recordedAt,
        ])
        try EnvelopeService.insertRecipients(db, envelopeID: envelopeID, payload: payload, lifecycle: lifecycle, routed: routed, at: recordedAt)
        return SyncItemResult(sequence: item.sequence, outcome: .applied, envelopeID: envelopeID)
    }

    /// The server's id for an envelope: derived from its account and transaction id, so
    /// the same transaction always names the same envelope (and replays are reproducible).
    public static func serverEnvelopeID(accountID: String, transactionID: String) -> String {
        let digest = Array(SHA256.hash(data: Data("\(accountID)\n\(transactionID)".utf8)))
        let digits = Array("0123456789abcdef".utf8)
        var text = Array("env-".utf8)
        text.reserveCapacity(36)
        for byte in digest.prefix(16) {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// Where a synced envelope starts on the server (``EnvelopeLifecycle``, event `synced`):
    /// declined when a recipient declined, completed when every recipient who must act is
    /// done, otherwise sent to the recipients of the lowest open routing order.
    static func initialStatus(_ payload: SyncPayload) -> String {
        var lifecycle = EnvelopeLifecycle(payload: payload)
        _ = try? lifecycle.apply(.synced)
        return lifecycle.status.rawValue
    }
}
