/// An envelope's state on the device, from draft to synced.
///
/// ```
/// draft ─compose→ cached ─startSigning→ signing ─signerFinished / finishLater / decline→ cached
/// cached ─queueForSync→ pendingSync ─syncStarted→ syncing ─syncSucceeded→ synced
///                                            syncing ─syncFailed→ syncFailed ─syncStarted→ syncing
/// ```
///
/// Move between states only with ``apply(_:)``, which allows the transitions in the table in
/// `docs/envelopes.md` and throws ``LocalStateTransitionError`` for anything else.
public enum EnvelopeLocalState: String, Hashable, Sendable, Codable, CaseIterable {
    /// Being composed; not yet saved as an envelope (at most one per device).
    case draft
    /// Saved on the device; local signers may sign, or it waits to be queued for sync.
    case cached
    /// A local signer is signing now.
    case signing
    /// In the outbox with a sequence number, waiting to be pushed.
    case pendingSync
    /// Being pushed to the server.
    case syncing
    /// The last push failed; still in the outbox and retried on the next sync.
    case syncFailed
    /// The server has it; the device keeps only a receipt.
    case synced

    /// Whether the envelope is in the outbox (queued, in flight or failed) and must not be lost.
    public var isAwaitingSync: Bool { self == .pendingSync || self == .syncing || self == .syncFailed }

    /// The state after `event`.
    ///
    /// - Parameter event: What happened.
    /// - Returns: The new state.
    /// - Throws: ``LocalStateTransitionError`` when `event` is not allowed in this state.
    public func apply(_ event: EnvelopeLocalEvent) throws(LocalStateTransitionError) -> EnvelopeLocalState {
        switch (self, event) {
        case (.draft, .compose): return .cached
        case (.cached, .startSigning): return .signing
        case (.cached, .queueForSync): return .pendingSync
        case (.signing, .signerFinished), (.signing, .finishLater), (.signing, .decline): return .cached
        case (.pendingSync, .syncStarted), (.syncFailed, .syncStarted): return .syncing
        case (.syncing, .syncSucceeded): return .synced
        case (.syncing, .syncFailed): return .syncFailed
        case (.syncing, .cancelSync): return .pendingSync
        // The server applied it but the reply was lost and the push marked failed: trust the ack.
        case (.syncFailed, .syncSucceeded): return .synced
        // Duplicate acknowledgements of a retried push are harmless.
        case (.synced, .syncSucceeded): return .synced
        // After a crash, interrupted work resumes from the last durable state.
        case (.signing, .restart): return .cached
        case (.syncing, .restart): return .pendingSync
        case (_, .restart): return self
        default:
            throw LocalStateTransitionError(state: self, event: event)
        }
    }
}

/// Something that happens to an envelope on the device.
public enum EnvelopeLocalEvent: String, Hashable, Sendable, Codable, CaseIterable {
    /// The draft is composed into a cached envelope.
    case compose
    /// A local signer starts (or resumes) signing.
    case startSigning
    /// The current local signer finished their tabs.
    case signerFinished
    /// The signer chose "finish later" (the SDK's cancel exit reason); progress is kept.
    case finishLater
    /// The signer declined.
    case decline
    /// The envelope became eligible for sync and entered the outbox.
    case queueForSync
    /// A push containing the envelope started.
    case syncStarted
    /// The server acknowledged the envelope.
    case syncSucceeded
    /// The push failed (network, timeout, server error).
    case syncFailed
    /// The user cancelled the sync in flight; the envelope stays queued.
    case cancelSync
    /// The process restarted (after a crash or a normal stop).
    case restart
}

/// An event that is not allowed in the envelope's current state.
public struct LocalStateTransitionError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The state the envelope was in.
    public var state: EnvelopeLocalState
    /// The event that was refused.
    public var event: EnvelopeLocalEvent

    /// Creates the error for `event` refused in `state`.
    public init(state: EnvelopeLocalState, event: EnvelopeLocalEvent) {
        self.state = state
        self.event = event
    }

    /// What was refused and why, for people.
    public var message: String {
        "event '\(event.rawValue)' is not allowed when the envelope is '\(state.rawValue)'; \(hint)"
    }

    private var hint: String {
        switch state {
        case .draft: return "compose the draft first"
        case .cached: return "start signing or queue it for sync"
        case .signing: return "finish, decline or finish later first"
        case .pendingSync: return "it is queued; start a sync"
        case .syncing: return "wait for the sync to succeed, fail or be cancelled"
        case .syncFailed: return "start a sync to retry"
        case .synced: return "it is already on the server"
        }
    }

    public var description: String { message }
}
