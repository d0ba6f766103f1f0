import Crypto
import SyncContract
import FleetProtocol
import Foundation
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
/// while a transaction runs share the next one (`IngestCommitQueue`, group commit).
/// docs/performance.md, "What bounds ingest, and what changed", has the profile behind this.
public struct SyncIngest: Sendable {
    let store: any CoordinatorStorage
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

    /// - Parameters:
    ///   - store: the coordinator's database.
    ///   - devices: the enrolled devices, whose keys verify the items.
    ///   - maxItemsPerPush: the most items one push may carry.
    ///   - metricsFactory: where ``SyncIngestMetrics`` are reported; the process-wide
    ///     `MetricsSystem.factory` unless given.
    ///   - now: the clock (tests pass a fixed one).
    public init(
        store: CoordinatorStore, devices: DeviceRegistry, maxItemsPerPush: Int = 500,
        metricsFactory: any MetricsFactory = MetricsSystem.factory, now: @escaping @Sendable () -> Date = WallClock.system.now
    ) {
        self.init(storage: store, devices: devices, maxItemsPerPush: maxItemsPerPush, metricsFactory: metricsFactory, now: now)
    }

    /// The same, on any ``CoordinatorStorage``.
    package init(
        storage store: any CoordinatorStorage, devices: DeviceRegistry, maxItemsPerPush: Int = 500,
        metricsFactory: any MetricsFactory = MetricsSystem.factory, now: @escaping @Sendable () -> Date = WallClock.system.now
    ) {
        self.metrics = SyncIngestMetrics(factory: metricsFactory)
        self.store = store
        self.devices = devices
        self.maxItemsPerPush = maxItemsPerPush
        self.now = now
        self.commitQueue = IngestCommitQueue(store: store)
    }

    /// Applies a push from the sender with `credential` (``DeviceRegistry/authenticate(deviceID:credential:)``).
    /// - Throws: `FleetError`: `forbidden` / `unauthenticated` when the sender is not the
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
        let ack = try await commitQueue.commit(
            IngestPush(device: device, push: push, key: key, verification: verification, recordedAt: now(), verdicts: verdicts))
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
        let device = try await devices.authenticate(deviceID: push.deviceID, credential: credential)
        guard let account = try await store.account(id: device.accountID) else {
            throw FleetError(.unauthenticated, "the device's account no longer exists")
        }
        return (device, account)
    }

    /// Sequence numbers a device may use: from 1 up to what the store's 64-bit signed column holds.
    static let sequenceRange: ClosedRange<UInt64> = 1...UInt64(Int64.max)

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
