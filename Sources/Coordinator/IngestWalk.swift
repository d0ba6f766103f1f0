import Crypto
import FleetProtocol
import Foundation
import SyncContract

/// What an ingest walk reads inside its transaction; each store answers from its own tables
/// (SQLite reads as it goes, PostgreSQL reads what a push can need before it walks).
package protocol IngestState {
    /// The device's row as it is now, or nil when it is gone.
    func deviceRow(accountID: String, id: String) throws -> IngestDeviceRow?
    /// The result stored for one of the device's sequences.
    func storedResult(accountID: String, deviceID: String, sequence: Int64) throws -> SyncResultRecord?
    /// The envelope with this server id: the sequence and device it came from.
    func envelopeOwner(id: String) throws -> EnvelopeOwner?
}

/// The columns of a device row the walk checks.
package struct IngestDeviceRow: Sendable {
    package var lastApplied: Int64
    package var publicKey: Data
    package var curveKey: Data?
    package var revokedAt: Date?

    package init(lastApplied: Int64, publicKey: Data, curveKey: Data?, revokedAt: Date?) {
        self.lastApplied = lastApplied
        self.publicKey = publicKey
        self.curveKey = curveKey
        self.revokedAt = revokedAt
    }
}

/// Where an existing envelope came from.
package struct EnvelopeOwner: Sendable {
    package var sequence: Int64
    package var deviceID: String
    /// The device's own id for the envelope (the payload's `envelopeId`): one envelope pushed again
    /// under a new number keeps it; another envelope under the same transaction id does not.
    package var localEnvelopeID: String

    package init(sequence: Int64, deviceID: String, localEnvelopeID: String) {
        self.sequence = sequence
        self.deviceID = deviceID
        self.localEnvelopeID = localEnvelopeID
    }
}

/// What one push's walk stores: its answer, the result rows, the envelopes it created and the
/// device's new last applied sequence. A store writes it in the push's savepoint.
package struct IngestPlan: Sendable {
    package var accountID: String
    package var deviceID: String
    package var ack: SyncAck
    package var results: [SyncResultRecord]
    package var envelopes: [EnvelopeAggregate]
    /// The device's new `lastAppliedSequence`; nil when it stays.
    package var lastApplied: Int64?
}

/// A verified push waiting for its transaction (``CoordinatorStorage/ingest(_:)``).
package struct IngestPush: Sendable {
    package let device: EnrolledDevice
    package let push: SyncPush
    let key: Curve25519.Signing.PublicKey?
    let verification: IngestVerification
    let recordedAt: Date
    /// One per item; nil for items at or below the last applied sequence read before verification.
    private(set) var verdicts: [SyncIngest.CheckedItem?]

    init(
        device: EnrolledDevice, push: SyncPush, key: Curve25519.Signing.PublicKey?, verification: IngestVerification, recordedAt: Date,
        verdicts: [SyncIngest.CheckedItem?]
    ) {
        self.device = device
        self.push = push
        self.key = key
        self.verification = verification
        self.recordedAt = recordedAt
        self.verdicts = verdicts
    }

    /// The push with a verdict for every item above `last`: a store that went back since the
    /// push was read (its last is now lower) needs verdicts for items it had skipped.
    package func verified(above last: Int64) -> IngestPush {
        var copy = self
        for (index, item) in push.items.enumerated() where copy.verdicts[index] == nil && item.sequence > UInt64(max(0, last)) {
            copy.verdicts[index] = SyncIngest.CheckedItem(item, device: device, key: key, verification: verification)
        }
        return copy
    }

    /// The server ids of the envelopes the push's verified items would create.
    package var candidateEnvelopeIDs: [String] {
        verdicts.compactMap { checked in
            guard case .success(let payload)? = checked?.verdict else { return nil }
            return SyncIngest.serverEnvelopeID(accountID: device.accountID, transactionID: payload.transactionId)
        }
    }

    /// The walk (``SyncIngest``'s discussion has the rules), on what the transaction reads.
    /// - Throws: ``FleetError`` `unauthenticated` when the device is gone, `forbidden` when it was
    ///   revoked or re-enrolled while the push was checked.
    package func walk(_ state: some IngestState) throws -> IngestPlan {
        guard let row = try state.deviceRow(accountID: device.accountID, id: device.id) else {
            throw FleetError(.unauthenticated, "device \"\(device.id)\" is not enrolled")
        }
        // The enrollment this push was admitted under must still hold now, inside the transaction:
        // a revocation (or a re-enrollment with new keys) during the push's verification wins.
        guard row.revokedAt == nil, row.publicKey == Data(device.publicKey), row.curveKey == device.curveKey.map({ Data($0) }) else {
            throw FleetError(.forbidden, "device \"\(device.id)\" was revoked or enrolled with new keys while this push was checked; nothing was applied")
        }
        var last = UInt64(max(0, row.lastApplied))
        var plan = IngestPlan(accountID: device.accountID, deviceID: device.id, ack: SyncAck(status: .ok, lastApplied: 0, results: []), results: [], envelopes: [], lastApplied: nil)
        var answers: [SyncItemResult] = []
        /// Envelopes this push creates, by server id: a later item with the same transaction is their
        /// duplicate, or a conflict.
        var created: [String: EnvelopeOwner] = [:]
        var gapExpected: UInt64?
        var refused = false
        for (item, verdict) in zip(push.items, verdicts) {
            if item.sequence <= last {
                let result = try storedResult(state, sequence: item.sequence, payload: item.payload)
                answers.append(result)
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
            let checkedItem = verdict ?? SyncIngest.CheckedItem(item, device: device, key: key, verification: verification)
            if case .failure(let rejection) = checkedItem.verdict, !rejection.signedByDevice {
                answers.append(SyncItemResult(sequence: item.sequence, outcome: .badSignature, reason: rejection.reason))
                refused = true
                break
            }
            let result = try applyNext(state, item: item, verdict: checkedItem.verdict, created: &created, plan: &plan)
            plan.results.append(
                SyncResultRecord(
                    accountID: device.accountID, deviceID: device.id, sequence: Int64(item.sequence), outcome: result.outcome.rawValue,
                    envelopeID: result.envelopeID, reason: result.reason, recordedAt: recordedAt, payloadSHA256: checkedItem.payloadDigest))
            answers.append(result)
            last = item.sequence
        }
        if Int64(last) != row.lastApplied { plan.lastApplied = Int64(last) }
        if let gapExpected {
            plan.ack = SyncAck(status: .gap, lastApplied: last, expectedSequence: gapExpected, results: answers)
        } else {
            plan.ack = SyncAck(status: refused ? .refused : .ok, lastApplied: last, results: answers)
        }
        return plan
    }

    /// The answer recorded for an already-handled sequence, when `payload` is the one handled
    /// then (same SHA-256); `conflict` when it is not.
    private func storedResult(_ state: some IngestState, sequence: UInt64, payload: [UInt8]) throws -> SyncItemResult {
        guard sequence <= UInt64(Int64.max),
            let stored = try state.storedResult(accountID: device.accountID, deviceID: device.id, sequence: Int64(sequence))
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
        // An applied item is answered as a duplicate with its envelope id; a rejected one (or one
        // whose transaction id named another envelope) with the same refusal, so the device
        // learns the same thing twice.
        let outcome: SyncItemResult.Outcome
        switch stored.outcome {
        case SyncItemResult.Outcome.rejected.rawValue: outcome = .rejected
        case SyncItemResult.Outcome.transactionConflict.rawValue: outcome = .transactionConflict
        default: outcome = .duplicate
        }
        return SyncItemResult(sequence: sequence, outcome: outcome, envelopeID: stored.envelopeID, reason: stored.reason)
    }

    private func applyNext(
        _ state: some IngestState, item: SyncItem, verdict: SyncIngest.Verdict, created: inout [String: EnvelopeOwner], plan: inout IngestPlan
    ) throws -> SyncItemResult {
        let payload: SyncPayload
        switch verdict {
        case .failure(let rejection):
            return SyncItemResult(sequence: item.sequence, outcome: .rejected, reason: rejection.reason)
        case .success(let verified):
            payload = verified
        }
        let envelopeID = SyncIngest.serverEnvelopeID(accountID: device.accountID, transactionID: payload.transactionId)
        if let existing = try created[envelopeID] ?? state.envelopeOwner(id: envelopeID) {
            // The transaction id already made an envelope: never create a second one. The same
            // envelope (this device's, its local id) pushed again under a new number is its
            // duplicate; another envelope under a used transaction id (a store that went back in
            // time and counted its ids again, or two devices' ids that collide) is a
            // `transaction_conflict`: settled for good (the number is used, later items go on),
            // no envelope stored, and never a duplicate that would give the device a receipt for
            // another envelope.
            guard existing.deviceID == device.id, existing.localEnvelopeID == payload.envelopeId else {
                return SyncItemResult(
                    sequence: item.sequence, outcome: .transactionConflict,
                    reason: "transaction \(payload.transactionId) already names another envelope (item \(existing.sequence) of device \(existing.deviceID), its envelope \(existing.localEnvelopeID)); this item is envelope \(payload.envelopeId): use a new transaction id")
            }
            return SyncItemResult(
                sequence: item.sequence, outcome: .duplicate, envelopeID: envelopeID,
                reason: "transaction \(payload.transactionId) was already applied as item \(existing.sequence) of device \(existing.deviceID)")
        }
        var lifecycle = EnvelopeLifecycle(payload: payload)
        let routed: [String]
        do {
            routed = try lifecycle.apply(.synced)
        } catch {
            return SyncItemResult(sequence: item.sequence, outcome: .rejected, reason: "the envelope cannot start its lifecycle: \(error.message)")
        }
        let envelope = EnvelopeRecord(
            id: envelopeID, accountID: device.accountID, deviceID: device.id, sequence: Int64(item.sequence),
            transactionID: payload.transactionId, localEnvelopeID: payload.envelopeId, name: payload.name, status: lifecycle.status.rawValue,
            payload: Data(item.payload), deviceSignature: Data(item.signature), createdAt: recordedAt)
        var aggregate = EnvelopeAggregate(
            envelope: envelope,
            recipients: EnvelopeService.syncedRecipients(envelopeID: envelopeID, payload: payload, lifecycle: lifecycle, routed: routed, at: recordedAt))
        // Every step the envelope took on the device is reported now, stamped with the device's time.
        aggregate.events = EnvelopeEvent.between(nil, aggregate, at: recordedAt)
        plan.envelopes.append(aggregate)
        created[envelopeID] = EnvelopeOwner(sequence: Int64(item.sequence), deviceID: device.id, localEnvelopeID: payload.envelopeId)
        return SyncItemResult(sequence: item.sequence, outcome: .applied, envelopeID: envelopeID)
    }
}
