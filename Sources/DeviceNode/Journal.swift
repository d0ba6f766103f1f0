import Foundation

/// One entry of the device's event journal, written in the same transaction as the change it records.
public struct JournalEntry: Hashable, Sendable {
    /// What happened.
    #if hasAttribute(nonexhaustive)
    @nonexhaustive
    #endif
    public enum Kind: String, Hashable, Sendable, Codable {
        /// Composed into the cache.
        case composed
        /// A local signer signed (their progress saved).
        case signerSigned
        /// A local signer declined.
        case signerDeclined
        /// Entered the outbox (``JournalEntry/sequence`` set).
        case queued
        /// A push including the item started.
        case syncStarted
        /// The server applied it (or had before).
        case synced
        /// The server rejected it.
        case rejected
        /// A push failed; still queued.
        case syncFailed
        /// The push in flight was cancelled; still queued.
        case syncCancelled
        /// Removed from the cache by the integrator.
        case removed
        /// Given a new sequence number (and signed again for it): the server had applied another
        /// payload under the old one (``JournalEntry/detail`` names it).
        case renumbered
        /// Dropped by a forced logout.
        case dropped
        /// A state left by a crash was repaired on open.
        case recovered
    }

    /// Monotonic id (order of writing).
    public var id: Int64
    /// When.
    public var at: Date
    /// The envelope.
    public var envelopeId: String
    /// Its transaction id.
    public var transactionId: String
    /// What happened.
    public var kind: Kind
    /// The envelope's local state after the change (raw value of `EnvelopeLocalState`), or `removed`.
    public var state: String
    /// The outbox sequence, when the entry concerns one.
    public var sequence: UInt64?
    /// Details (recipient id, reason, …).
    public var detail: String?
}

/// What ``DeviceNode/auditStore()`` found: the store's invariants, checked with SQL.
public struct StoreAudit: Hashable, Sendable {
    /// Outbox sequence numbers, ascending.
    public var sequences: [UInt64]
    /// Whether ``sequences`` is exactly 1...n.
    public var isGapless: Bool
    /// Items whose signature does not verify over their payload (pending or rejected items only).
    public var invalidSignatures: [UInt64]
    /// Envelopes awaiting sync (pendingSync, syncing, syncFailed) without an outbox row.
    public var queuedWithoutOutbox: [String]
    /// Outbox items (still pending) whose envelope is missing or not awaiting sync.
    public var outboxWithoutEnvelope: [UInt64]
    /// Outbox items whose payload names signatures the store does not hold (pending items).
    public var outboxWithoutSignatures: [UInt64]
    /// Signatures whose binding does not match the stored document or ISO record.
    public var unboundSignatures: [String]
    /// Envelopes whose state differs from their last journal entry, or that have no journal entry.
    public var journalMismatches: [String]
    /// Outbox items without a `queued` journal entry.
    public var outboxWithoutJournal: [UInt64]
    /// Cached envelopes that are ready for sync (for the persisted account's user) but not queued:
    /// signed work that would never leave the device.
    public var readyButNotQueued: [String]

    /// Whether every invariant holds.
    public var isConsistent: Bool {
        isGapless && invalidSignatures.isEmpty && queuedWithoutOutbox.isEmpty && outboxWithoutEnvelope.isEmpty
            && outboxWithoutSignatures.isEmpty && unboundSignatures.isEmpty && journalMismatches.isEmpty
            && outboxWithoutJournal.isEmpty && readyButNotQueued.isEmpty
    }
}
