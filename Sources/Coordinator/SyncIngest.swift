import Crypto
import DeviceNode
import FleetProtocol
import Foundation
import GRDB
import Metrics
import SignatureCapture

/// Applies devices' sync pushes exactly once and in order (shared/DESIGN.md, "Sync";
/// docs/sync.md).
///
/// Each push is one write transaction that walks the items in order against the
/// device's last applied sequence, stored in the same transaction as the effects:
/// - `seq <= last`: a duplicate, answered with the result stored the first time;
/// - `seq == last + 1`: verified and applied, or recorded as rejected with its reason;
///   either way `last` advances, so one bad item never blocks a device;
/// - `seq > last + 1`: the walk stops and the answer is `gap`, expecting `last + 1`.
///
/// Verification (Ed25519 signatures, document hashes, bindings) needs no database
/// state beyond the device's enrolled key, so it runs before the transaction and
/// the writer lock is held only for the walk and the inserts.
public struct SyncIngest: Sendable {
    let store: CoordinatorStore
    let devices: DeviceRegistry
    let now: @Sendable () -> Date
    /// The most items one push may carry.
    public var maxItemsPerPush: Int
    /// Test failpoints (inert unless armed; see ``Failpoints``).
    public var failpoints = Failpoints.fromEnvironment()
    let metrics: SyncIngestMetrics

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
    }

    /// Applies a push from the device whose socket has `routingID`.
    /// - Throws: ``FleetError``: `forbidden` / `unauthenticated` when the sender is not the
    ///   enrolled device it names; `feature_disabled` when its account has no offline signing;
    ///   `invalid_request` for an over-long push; `internal` (retryable) for a store failure.
    public func apply(_ push: SyncPush, routingID: String) async throws -> SyncAck {
        try await apply(push, routingID: routingID, meter: { _ in })
    }

    /// `apply(_:routingID:)`, with `meter` called once the account is known and before
    /// anything is applied (rate limits: a refused push changes nothing). Measured for metrics.
    func apply(_ push: SyncPush, routingID: String, meter: (Account) throws -> Void) async throws -> SyncAck {
        let started = ContinuousClock.now
        defer { metrics.duration.record(duration: started.duration(to: .now)) }
        let ack = try await applyUnmeasured(push, routingID: routingID, meter: meter)
        metrics.record(ack, pushed: push.items.count)
        return ack
    }

    private func applyUnmeasured(_ push: SyncPush, routingID: String, meter: (Account) throws -> Void) async throws -> SyncAck {
        let device = try await devices.authenticate(deviceID: push.deviceID, routingID: routingID)
        let accountID = device.accountID
        guard let account = try await store.database.read({ db in try AccountRecord.fetchOne(db, key: accountID) }) else {
            throw FleetError(.unauthenticated, "the device's account no longer exists")
        }
        try meter(AccountDirectory.account(account))
        guard push.items.count <= maxItemsPerPush else {
            throw FleetError(.invalidRequest, "a push carries at most \(maxItemsPerPush) items; this one has \(push.items.count)")
        }
        guard account.offlineSigning else {
            throw FleetError(
                .featureDisabled,
                "account \"\(account.name)\" does not have offline signing; envelopes signed offline cannot be accepted")
        }
        let verdicts = push.items.map { Self.verify($0, device: device) }
        let recordedAt = now()
        let ack = try await store.database.write { db in
            guard var row = try DeviceRecord.fetchOne(db, key: device.id) else {
                throw FleetError(.unauthenticated, "device \"\(device.id)\" is not enrolled")
            }
            var last = UInt64(row.lastAppliedSequence)
            var results: [SyncItemResult] = []
            var gapExpected: UInt64?
            for (item, verdict) in zip(push.items, verdicts) {
                if item.sequence <= last {
                    results.append(try Self.storedResult(db, device: device.id, sequence: item.sequence))
                    continue
                }
                guard item.sequence == last + 1 else {
                    gapExpected = last + 1
                    break
                }
                let result = try Self.applyNext(
                    db, item: item, verdict: verdict, device: device, recordedAt: recordedAt)
                try SyncResultRecord(
                    deviceID: device.id, sequence: Int64(item.sequence), outcome: result.outcome.rawValue,
                    envelopeID: result.envelopeID, reason: result.reason, recordedAt: recordedAt
                ).insert(db)
                results.append(result)
                last = item.sequence
            }
            row.lastAppliedSequence = Int64(last)
            try row.update(db)
            if let gapExpected {
                return SyncAck(status: .gap, lastApplied: last, expectedSequence: gapExpected, results: results)
            }
            return SyncAck(status: .ok, lastApplied: last, results: results)
        }
        failpoints.hit(Failpoints.syncAfterCommit)
        return ack
    }

    /// The answer recorded for an already-handled sequence.
    static func storedResult(_ db: Database, device: String, sequence: UInt64) throws -> SyncItemResult {
        guard sequence <= UInt64(Int64.max),
            let stored = try SyncResultRecord.fetchOne(db, key: ["deviceID": device, "sequence": Int64(sequence)])
        else {
            // Sequences at or below `last` always have a stored result; none means a damaged store.
            throw FleetError(.internal, "no stored result for sequence \(sequence) of device \"\(device)\"", retryable: false)
        }
        // An applied item is answered as a duplicate with its envelope id; a rejected one
        // is answered with the same rejection, so the device learns the same thing twice.
        let outcome: SyncItemResult.Outcome = stored.outcome == SyncItemResult.Outcome.rejected.rawValue ? .rejected : .duplicate
        return SyncItemResult(sequence: sequence, outcome: outcome, envelopeID: stored.envelopeID, reason: stored.reason)
    }

    static func applyNext(
        _ db: Database, item: SyncItem, verdict: Result<SyncPayload, Rejection>, device: EnrolledDevice, recordedAt: Date
    ) throws -> SyncItemResult {
        let payload: SyncPayload
        switch verdict {
        case .failure(let rejection):
            return SyncItemResult(sequence: item.sequence, outcome: .rejected, reason: rejection.reason)
        case .success(let verified):
            payload = verified
        }
        let envelopeID = serverEnvelopeID(accountID: device.accountID, transactionID: payload.transactionId)
        if let existing = try EnvelopeRecord.fetchOne(db, key: envelopeID) {
            // The transaction id already made an envelope: never create a second one.
            return SyncItemResult(
                sequence: item.sequence, outcome: .duplicate, envelopeID: existing.id,
                reason: "transaction \(payload.transactionId) was already applied as item \(existing.sequence) of device \(existing.deviceID)")
        }
        var lifecycle = EnvelopeLifecycle(payload: payload)
        let routed: [String]
        do {
            routed = try lifecycle.apply(.synced)
        } catch {
            return SyncItemResult(sequence: item.sequence, outcome: .rejected, reason: "the envelope cannot start its lifecycle: \(error.message)")
        }
        try EnvelopeRecord(
            id: envelopeID, accountID: device.accountID, deviceID: device.id, sequence: Int64(item.sequence),
            transactionID: payload.transactionId, localEnvelopeID: payload.envelopeId, name: payload.name,
            status: lifecycle.status.rawValue, payload: Data(item.payload), deviceSignature: Data(item.signature),
            createdAt: recordedAt
        ).insert(db)
        try EnvelopeService.insertRecipients(db, envelopeID: envelopeID, payload: payload, lifecycle: lifecycle, routed: routed, at: recordedAt)
        return SyncItemResult(sequence: item.sequence, outcome: .applied, envelopeID: envelopeID)
    }

    /// The server's id for an envelope: derived from its account and transaction id, so
    /// the same transaction always names the same envelope (and replays are reproducible).
    public static func serverEnvelopeID(accountID: String, transactionID: String) -> String {
        let digest = Array(SHA256.hash(data: Data("\(accountID)\n\(transactionID)".utf8)))
        let hex = digest.prefix(16).map { String(format: "%02x", $0) }.joined()
        return "env-" + hex
    }

    /// Where a synced envelope starts on the server (``EnvelopeLifecycle``, event `synced`):
    /// declined when a recipient declined, completed when every recipient who must act is
    /// done, otherwise sent to the recipients of the lowest open routing order.
    static func initialStatus(_ payload: SyncPayload) -> String {
        var lifecycle = EnvelopeLifecycle(payload: payload)
        _ = try? lifecycle.apply(.synced)
        return lifecycle.status.rawValue
    }

    struct Rejection: Error {
        var reason: String
    }

    /// Checks one item against the device's key: the payload signature, the payload's own
    /// claims, every document's hash, and every signature binding.
    static func verify(_ item: SyncItem, device: EnrolledDevice) -> Result<SyncPayload, Rejection> {
        guard let key = try? Curve25519.Signing.PublicKey(rawRepresentation: device.publicKey) else {
            return .failure(Rejection(reason: "the device's enrolled key is unusable"))
        }
        guard item.signature.count == 64, key.isValidSignature(item.signature, for: item.payload) else {
            return .failure(Rejection(reason: "the device signature does not verify over the payload"))
        }
        let payload: SyncPayload
        do {
            payload = try SyncPayload(canonicalBytes: item.payload)
        } catch {
            return .failure(Rejection(reason: "the payload is not a valid envelope: \(error)"))
        }
        guard payload.format == SyncPayload.currentFormat else {
            return .failure(Rejection(reason: "unknown payload format \"\(payload.format)\""))
        }
        guard payload.deviceId == device.id, payload.sequence == item.sequence, payload.transactionId == item.transactionID else {
            return .failure(
                Rejection(
                    reason: "the payload names device \(payload.deviceId), item \(payload.sequence), transaction \(payload.transactionId), but was pushed as device \(device.id), item \(item.sequence), transaction \(item.transactionID)"
                ))
        }
        var documents: [String: PayloadDocument] = [:]
        for document in payload.documents {
            guard Array(SHA256.hash(data: document.pdf)) == document.sha256 else {
                return .failure(Rejection(reason: "document \(document.documentId): its bytes do not match its SHA-256"))
            }
            documents[document.documentId] = document
        }
        for signature in payload.signatures {
            guard let document = documents[signature.documentId] else {
                return .failure(Rejection(reason: "signature for tab \(signature.tabIndex) names unknown document \(signature.documentId)"))
            }
            guard let binding = try? SignatureBinding(canonicalBytes: signature.binding) else {
                return .failure(Rejection(reason: "signature for tab \(signature.tabIndex): the binding is unreadable"))
            }
            guard binding.matches(document: Array(document.pdf), iso: signature.isoRecord) else {
                return .failure(
                    Rejection(reason: "signature for tab \(signature.tabIndex): the binding does not match document \(document.documentId) or its ISO record"))
            }
            guard binding.verify(signature: signature.bindingSignature, publicKey: device.publicKey) else {
                return .failure(Rejection(reason: "signature for tab \(signature.tabIndex): the binding's device signature does not verify"))
            }
        }
        return .success(payload)
    }
}
