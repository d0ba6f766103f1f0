import Envelopes
import Foundation

extension DeviceNode {
    /// Outbox items still waiting for an acknowledgement, in sequence order — what the sync engine pushes.
    ///
    /// - Parameters:
    ///   - after: only items with a larger sequence (0 for all).
    ///   - limit: at most this many.
    public func pendingOutboxItems(after: UInt64 = 0, limit: Int = 100) async throws -> [OutboxItem] {
        try ensureOpen()
        return try await storeCall { try await self.store.outbox(status: .pending, after: after, limit: max(0, limit)) }
    }

    /// Every outbox item (pending, synced receipts, rejected), in sequence order.
    public func outboxItems() async throws -> [OutboxItem] {
        try ensureOpen()
        return try await storeCall { try await self.store.outbox(status: nil) }
    }

    /// The highest sequence number assigned so far (0 when none).
    public func lastSequence() async throws -> UInt64 {
        try await outboxItems().last?.sequence ?? 0
    }

    // The calls below change what the device believes the server has: only the sync engine makes
    // them (internal, so an app cannot forge a receipt); tests reach them with `@testable import`.

    /// Records that a push carrying these items starts: their envelopes become `syncing` and a
    /// ``DeviceEvent/syncStarted(_:)`` is sent for each. Settled or unknown items are skipped.
    func beginSync(sequences: [UInt64]) async throws {
        try ensureOpen()
        let changed = try await storeCall {
            try await self.store.syncTransition(sequences: sequences, event: .syncStarted, kind: .syncStarted, detail: nil, countAttempt: true)
        }
        for (sequence, ids) in changed { publish(.syncStarted(SyncProgress(envelope: ids, sequence: sequence))) }
    }

    /// Records the server's answer for one item (from `sync.ack`'s results).
    ///
    /// Applied or duplicate: the envelope leaves the cache (``DeviceEvent/envelopeUncached(_:)`` with
    /// reason `synced`) and the item keeps a receipt with the server id; ``DeviceEvent/syncSucceeded(_:)``
    /// carries the local, transaction and server ids. Rejected: ``DeviceEvent/syncFailed(_:)`` with
    /// `willRetry: false`. Recording the same answer again changes nothing and sends nothing, so a
    /// lost-then-retried acknowledgement never duplicates anything.
    ///
    /// - Throws: ``DeviceNodeError/Code/unknownSequence`` for a sequence this device never assigned.
    func recordReceipt(sequence: UInt64, _ receipt: SyncReceipt) async throws {
        try ensureOpen()
        let (ids, changed) = try await storeCall { try await self.store.recordReceipt(sequence: sequence, receipt: receipt) }
        guard changed else { return }
        if receipt.outcome.isRefusal {
            publish(.syncFailed(SyncProgress(envelope: ids, sequence: sequence, error: receipt.reason ?? "rejected by the server", willRetry: false)))
            publish(.envelopeUncached(EnvelopeUncached(envelope: ids, reason: .rejected)))
        } else {
            publish(.syncSucceeded(SyncProgress(envelope: ids, sequence: sequence)))
            publish(.envelopeUncached(EnvelopeUncached(envelope: ids, reason: .synced)))
        }
    }

    /// Records that a push failed (timeout, gap, transport): the items stay queued (`syncFailed`) and
    /// will be pushed again; ``DeviceEvent/syncFailed(_:)`` with `willRetry: true` for each.
    func recordSyncFailure(sequences: [UInt64], error: String) async throws {
        try ensureOpen()
        let changed = try await storeCall {
            try await self.store.syncTransition(sequences: sequences, event: .syncFailed, kind: .syncFailed, detail: error, countAttempt: false)
        }
        for (sequence, ids) in changed {
            publish(.syncFailed(SyncProgress(envelope: ids, sequence: sequence, error: error, willRetry: true)))
        }
    }

    /// Stops the push in flight: its items go back to `pendingSync` (they stay in the outbox).
    func cancelSync(sequences: [UInt64]) async throws {
        try ensureOpen()
        _ = try await storeCall {
            try await self.store.syncTransition(sequences: sequences, event: .cancelSync, kind: .syncCancelled, detail: nil, countAttempt: false)
        }
    }

    /// Announces the end of a sync pass (``DeviceEvent/syncEnded(_:)``).
    func endSync(_ summary: SyncSummary) {
        publish(.syncEnded(summary))
    }

    /// The journal, oldest first (for one envelope, or all).
    public func journal(envelopeId: String? = nil) async throws -> [JournalEntry] {
        try ensureOpen()
        return try await storeCall { try await self.store.journalEntries(envelopeId: envelopeId) }
    }

    /// Checks the store's invariants: gapless outbox, valid signatures, no queued envelope without
    /// its outbox row (and the reverse), bindings matching their documents, journal agreeing with states.
    public func auditStore() async throws -> StoreAudit {
        try ensureOpen()
        return try await storeCall { try await self.store.audit() }
    }
}
