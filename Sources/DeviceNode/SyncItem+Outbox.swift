import FleetProtocol
import Foundation

extension OutboxItem {
    /// The item as a `sync.push` item, or `nil` once synced (its payload is dropped).
    public var syncItem: SyncItem? {
        guard let payload else { return nil }
        return SyncItem(sequence: sequence, transactionID: envelope.transactionId, payload: payload, signature: signature)
    }
}

extension DeviceNode {
    /// Records every per-item result of a `sync.ack` (applied, duplicate, rejected, transaction
    /// conflict) as receipts, in order.
    ///
    /// Items the acknowledgement does not mention (after a `gap`, or beyond the pushed batch) stay
    /// queued, and so do items the server did not settle (`conflict`, `bad_signature`): nothing
    /// the server refused to take is ever marked synced. Returns the sequences settled by this call.
    ///
    /// - Throws: ``DeviceNodeError/Code/unknownSequence`` when a result names a sequence this device
    ///   never assigned (results before it are recorded).
    /// Internal, as the other outbox hooks: only the sync engine records what the server answered.
    @discardableResult
    func recordAcknowledgement(_ ack: SyncAck) async throws -> [UInt64] {
        var settled: [UInt64] = []
        let now = configuration.clock()
        for result in ack.results {
            let outcome: SyncReceipt.Outcome
            switch result.outcome {
            case .applied: outcome = .applied
            case .duplicate: outcome = .duplicate
            case .rejected: outcome = .rejected
            case .transactionConflict: outcome = .transactionConflict
            case .conflict, .badSignature: continue
            }
            try await recordReceipt(sequence: result.sequence, SyncReceipt(
                outcome: outcome, serverEnvelopeId: result.envelopeID, reason: result.reason, recordedAt: now))
            settled.append(result.sequence)
        }
        return settled
    }
}
