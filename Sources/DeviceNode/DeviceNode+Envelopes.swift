import Crypto
import Envelopes
import Foundation
import SignatureCapture

/// A cached envelope as listed by ``DeviceNode/cachedEnvelopes()``.
public struct CachedEnvelopeInfo: Hashable, Sendable {
    /// The ids.
    public var envelope: EnvelopeIDs
    /// Envelope name.
    public var name: String
    /// The local state (cached, pendingSync, syncing, syncFailed; `signing` while a session runs).
    public var localState: EnvelopeLocalState
    /// How it was composed.
    public var signingMode: SigningMode
    /// The template it came from.
    public var templateId: String?
    /// Whether a local signer can sign now (``DeviceNode/resumeSigning(envelopeId:driver:)`` would ask them).
    public var canResume: Bool
    /// The local signer who would sign next.
    public var nextLocalSigner: Recipient?
    /// The sync-eligibility answer, in words.
    public var eligibility: String
    /// The outbox sequence, when queued.
    public var sequence: UInt64?
    /// When it last changed.
    public var lastModifiedAt: Date
}

extension DeviceNode {
    // MARK: Compose

    /// Composes an envelope into the device's cache and returns its local id
    /// (the SDK's `composeEnvelopeWithEnvelopeDefinition:signingMode:`).
    ///
    /// The definition is validated first. When nobody signs on this device now (only remote
    /// recipients are pending), the envelope goes straight to the outbox in the same transaction.
    ///
    /// **Safe to retry**: composing again with the same transaction id returns the first envelope's
    /// id and changes nothing (also after it synced).
    ///
    /// - Parameters:
    ///   - definition: an envelope from `EnvelopeBuilder` (its `transactionId` identifies it across retries).
    ///   - mode: offline (default) or online.
    /// - Returns: the local envelope id.
    /// - Throws: ``DeviceNodeError`` with ``DeviceNodeError/Code/accountNotLoggedIn``,
    ///   ``DeviceNodeError/Code/invalidEnvelope`` (see `validationErrors`),
    ///   ``DeviceNodeError/Code/transactionIdConflict`` or ``DeviceNodeError/Code/storeFailure``.
    @discardableResult
    public func compose(_ definition: Envelope, mode: SigningMode = .offline) async throws -> String {
        try await compose(definition, mode: mode, deletingDraft: false)
    }

    func compose(_ definition: Envelope, mode: SigningMode, deletingDraft: Bool) async throws -> String {
        _ = try requireAccount()
        let ids = EnvelopeIDs(definition)
        let problems = definition.validate()
        if !problems.isEmpty {
            let error = DeviceNodeError(.invalidEnvelope,
                "the envelope definition is invalid: \(problems.map(\.description).joined(separator: "; "))",
                envelope: ids, validationErrors: problems)
            publish(.envelopeCacheFailed(EnvelopeFailure(envelope: ids, signingMode: mode, error: error)))
            throw error
        }
        var envelope = definition
        envelope.localState = .draft
        envelope.serverEnvelopeId = nil
        do {
            try envelope.apply(.compose, at: configuration.clock())
        } catch {
            throw DeviceNodeError(.invalidEnvelope, error.message, envelope: ids)
        }
        let queue = envelope.syncEligibility(user: signingUser).isReadyForSync
        // A retry of a compose that already happened sends no caching events (the write below
        // still decides, should two composes race).
        let known = try await storeCall { try await self.store.envelopeId(transactionId: envelope.transactionId) }
        if known == nil { publish(.envelopeCachingStarted(ids)) }
        let result: ComposeWrite
        do {
            result = try await storeCall { try await self.store.compose(envelope, mode: mode, queue: queue, deletingDraft: deletingDraft) }
        } catch let error as DeviceNodeError {
            publish(.envelopeCacheFailed(EnvelopeFailure(envelope: ids, signingMode: mode, error: error)))
            throw error
        }
        switch result {
        case .created(let sequence):
            publish(.envelopeCached(EnvelopeCached(envelope: ids, isUpdate: false, templateId: envelope.templateId)))
            if let sequence { publish(.envelopeQueuedForSync(EnvelopeQueued(envelope: ids, sequence: sequence))) }
            logger.debug("composed", metadata: ["envelope": "\(ids)", "sequence": "\(sequence.map(String.init) ?? "-")"])
            return envelope.envelopeId
        case .existing(let envelopeId, let sameContent):
            guard sameContent else {
                let error = DeviceNodeError(.transactionIdConflict,
                    "transaction id \(ids.transactionId) already belongs to envelope \(envelopeId) with different content; use a new transaction id for a new envelope",
                    envelope: EnvelopeIDs(localId: envelopeId, transactionId: ids.transactionId))
                // The event names the envelope that holds the transaction id, as the error does: the
                // definition's own local id was never stored.
                publish(.envelopeCacheFailed(EnvelopeFailure(envelope: error.envelope ?? ids, signingMode: mode, error: error)))
                throw error
            }
            if deletingDraft { _ = try await storeCall { try await self.store.deleteDraft() } }
            return envelopeId
        case .alreadySynced(let envelopeId, _):
            return envelopeId
        }
    }

    // MARK: Drafts

    /// Saves an envelope definition as the draft (there is one draft at a time; it need not be valid yet).
    ///
    /// - Parameters:
    ///   - definition: the envelope to keep as the draft.
    ///   - replacingExisting: replace a cached draft (the SDK's `resumeWithDraft: false`);
    ///     otherwise an existing draft makes this throw ``DeviceNodeError/Code/draftExists``.
    public func saveDraft(_ definition: Envelope, replacingExisting: Bool = false) async throws {
        _ = try requireAccount()
        var draft = definition
        draft.localState = .draft
        try await storeCall { try await self.store.saveDraft(draft, replacing: replacingExisting) }
    }

    /// Whether a draft is cached (the SDK's `hasCachedDraftEnvelope`).
    public func hasCachedDraft() async throws -> Bool {
        try ensureOpen()
        return try await storeCall { try await self.store.draft() } != nil
    }

    /// The cached draft, if any.
    public func cachedDraft() async throws -> Envelope? {
        try ensureOpen()
        return try await storeCall { try await self.store.draft() }
    }

    /// Resumes the draft: composes it (validating it) and removes the draft in the same transaction.
    /// - Returns: the composed envelope's local id.
    /// - Throws: ``DeviceNodeError/Code/noDraft``, or what ``compose(_:mode:)`` throws (the draft stays).
    @discardableResult
    public func composeDraft(mode: SigningMode = .offline) async throws -> String {
        _ = try requireAccount()
        guard let draft = try await storeCall({ try await self.store.draft() }) else {
            throw DeviceNodeError(.noDraft, "there is no cached draft to compose; save one with saveDraft first")
        }
        return try await compose(draft, mode: mode, deletingDraft: true)
    }

    /// Discards the cached draft.
    /// - Throws: ``DeviceNodeError/Code/noDraft`` when there is none.
    public func discardDraft() async throws {
        try ensureOpen()
        guard try await storeCall({ try await self.store.deleteDraft() }) else {
            throw DeviceNodeError(.noDraft, "there is no cached draft to discard")
        }
    }

    // MARK: Cache

    /// Every cached envelope, oldest first, with its state and whether it can be resumed.
    public func cachedEnvelopes() async throws -> [CachedEnvelopeInfo] {
        try ensureOpen()
        return try await storeCall { try await self.store.allEnvelopes() }.map(info)
    }

    /// A cached envelope in full (documents, recipients' progress, tab values), or `nil`.
    public func cachedEnvelope(id: String) async throws -> Envelope? {
        try ensureOpen()
        return try await storeCall { try await self.store.envelope(id: id) }?.envelope
    }

    /// The stored signatures of a cached envelope, by tab index.
    public func signatures(envelopeId: String) async throws -> [StoredSignature] {
        try ensureOpen()
        return try await storeCall { try await self.store.signatures(envelopeId: envelopeId) }
    }

    /// The cache state of an envelope, or `nil` when it is not cached.
    public func cacheState(envelopeId: String) async throws -> EnvelopeLocalState? {
        try ensureOpen()
        if activeSessions.contains(envelopeId) { return .signing }
        return try await storeCall { try await self.store.envelope(id: envelopeId) }?.envelope.localState
    }

    /// Whether a local signer can sign this envelope now.
    public func canResume(envelopeId: String) async throws -> Bool {
        try ensureOpen()
        guard !activeSessions.contains(envelopeId),
              let stored = try await storeCall({ try await self.store.envelope(id: envelopeId) }) else { return false }
        if case .sign = stored.envelope.resumeDecision(user: signingUser) { return true }
        return false
    }

    /// Removes a cached envelope that is not queued for sync.
    ///
    /// - Throws: ``DeviceNodeError/Code/envelopeReadyForSync`` when it is queued (it leaves the device
    ///   only by syncing), ``DeviceNodeError/Code/envelopeNotCached``, ``DeviceNodeError/Code/signingInProgress``.
    public func removeCachedEnvelope(envelopeId: String) async throws {
        try ensureOpen()
        guard !activeSessions.contains(envelopeId) else {
            throw DeviceNodeError(.signingInProgress, "envelope \(envelopeId) is being signed; finish or cancel first")
        }
        let ids = try await storeCall { try await self.store.remove(envelopeId: envelopeId) }
        publish(.envelopeUncached(EnvelopeUncached(envelope: ids, reason: .removed)))
    }

    /// Removes several cached envelopes; those that cannot be removed are returned with the reason.
    public func removeCachedEnvelopes(_ envelopeIds: [String]) async throws -> [String: DeviceNodeError] {
        var refused: [String: DeviceNodeError] = [:]
        for id in envelopeIds {
            do { try await removeCachedEnvelope(envelopeId: id) } catch let error as DeviceNodeError { refused[id] = error }
        }
        return refused
    }

    func info(_ stored: StoredEnvelope) -> CachedEnvelopeInfo {
        let envelope = stored.envelope
        let decision = envelope.resumeDecision(user: signingUser)
        var next: Recipient?
        if case .sign(let recipient) = decision { next = recipient }
        return CachedEnvelopeInfo(
            envelope: EnvelopeIDs(envelope), name: envelope.name,
            localState: activeSessions.contains(envelope.envelopeId) ? .signing : envelope.localState,
            signingMode: stored.signingMode, templateId: envelope.templateId, canResume: next != nil && !activeSessions.contains(envelope.envelopeId),
            nextLocalSigner: next, eligibility: envelope.syncEligibility(user: signingUser).message, sequence: stored.sequence,
            lastModifiedAt: envelope.lastModifiedAt)
    }
}
