import Crypto
import Envelopes
import Foundation
import SignatureCapture

extension DeviceNode {
    /// Resumes signing a cached envelope: each local signer, in routing order, is asked through
    /// `driver` to sign their tabs, finish later, or decline (the SDK's `resumeSigningEnvelope`).
    ///
    /// Each signer's signatures are bound to their document (`SignatureBinding`), signed with the
    /// device key and saved — after each signer when ``DeviceConfiguration/saveProgressAfterEachLocalSigner``
    /// is set, else once at the end of the session. When no local signer remains, the envelope goes
    /// to the outbox in the same transaction as the last signer's work.
    ///
    /// **Safe to retry and clear about "nothing to sign"**: an envelope with no local signer (for
    /// example right after composing one that has only remote recipients), or one already queued,
    /// answers ``SigningOutcome/readyForSync(sequence:message:)`` instead of failing obscurely.
    ///
    /// - Parameters:
    ///   - envelopeId: the local envelope id returned by compose.
    ///   - driver: the person at the device (``SyntheticSigner`` simulates one).
    /// - Returns: how the session ended.
    /// - Throws: ``DeviceNodeError`` with ``DeviceNodeError/Code/accountNotLoggedIn``,
    ///   ``DeviceNodeError/Code/envelopeNotCached``, ``DeviceNodeError/Code/signingInProgress``,
    ///   ``DeviceNodeError/Code/noIncompleteLocalSigner``, ``DeviceNodeError/Code/signerWithoutTabs``,
    ///   ``DeviceNodeError/Code/invalidSignerInput``, ``DeviceNodeError/Code/signerFailed``
    ///   (progress of earlier signers is kept), ``DeviceNodeError/Code/storeFailure``.
    @discardableResult
    public func resumeSigning(envelopeId: String, driver: some SignerDriver) async throws -> SigningOutcome {
        _ = try requireAccount()
        guard !activeSessions.contains(envelopeId) else {
            throw DeviceNodeError(.signingInProgress, "envelope \(envelopeId) is being signed now; wait for that session to end")
        }
        guard let stored = try await storeCall({ try await self.store.envelope(id: envelopeId) }) else {
            throw DeviceNodeError(.envelopeNotCached,
                "envelope \(envelopeId) is not in this device's cache (never composed here, removed, or already synced)")
        }
        // The store was read across a suspension: check again before claiming the envelope.
        guard activeSessions.insert(envelopeId).inserted else {
            throw DeviceNodeError(.signingInProgress, "envelope \(envelopeId) is being signed now; wait for that session to end")
        }
        defer { activeSessions.remove(envelopeId) }

        let ids = EnvelopeIDs(stored.envelope)
        if let sequence = stored.sequence {
            // Say why it is ready (as when it was queued), not merely that it is queued.
            var probe = stored.envelope
            probe.localState = .cached
            return .readyForSync(sequence: sequence, message: probe.syncEligibility(user: signingUser).message)
        }
        switch stored.envelope.resumeDecision(user: signingUser) {
        case .readyForSync(let eligibility):
            let sequence = try await storeCall { try await self.store.enqueueExisting(envelopeId: envelopeId) }
            publish(.envelopeQueuedForSync(EnvelopeQueued(envelope: ids, sequence: sequence)))
            return .readyForSync(sequence: sequence, message: eligibility.message)
        case .notResumable(let eligibility):
            throw DeviceNodeError(.noIncompleteLocalSigner, "nothing to sign on this device: \(eligibility.message)", envelope: ids)
        case .sign:
            return try await runSession(stored, driver: driver)
        }
    }

    /// A running session's progress (kept outside closures so nothing mutable is captured across suspensions).
    struct SessionState: Sendable {
        var envelope: Envelope
        let mode: SigningMode
        let ids: EnvelopeIDs
        var signed: [String] = []
        // With progress saved only at the end, signers' work waits here until the session ends.
        var unsaved: [StoredSignature] = []
    }

    /// Saves the session's progress (queueing the envelope when it is now ready for sync).
    private func commit(_ state: inout SessionState, kind: JournalEntry.Kind, detail: String?) async throws -> UInt64? {
        let queue = state.envelope.syncEligibility(user: signingUser).isReadyForSync
        if queue, state.envelope.completedLocallyAt == nil { state.envelope.completedLocallyAt = configuration.clock() }
        let (snapshot, signatures, mode) = (state.envelope, state.unsaved, state.mode)
        do {
            let sequence = try await storeCall {
                try await self.store.commitSigning(snapshot, mode: mode, signatures: signatures, kind: kind, detail: detail, queue: queue)
            }
            state.unsaved = []
            publish(.envelopeCached(EnvelopeCached(envelope: state.ids, isUpdate: true, templateId: snapshot.templateId)))
            if let sequence { publish(.envelopeQueuedForSync(EnvelopeQueued(envelope: state.ids, sequence: sequence))) }
            return sequence
        } catch let error as DeviceNodeError {
            publish(.saveError(EnvelopeFailure(envelope: state.ids, signingMode: mode, error: error)))
            throw error
        }
    }

    /// Reports a signing error, keeps the work of signers who finished, and throws.
    private func fail(_ state: inout SessionState, _ error: DeviceNodeError, recipient: String?) async throws -> Never {
        publish(.signingError(EnvelopeFailure(envelope: state.ids, recipientId: recipient, signingMode: state.mode, error: error)))
        if !state.unsaved.isEmpty {
            try? state.envelope.apply(.restart, at: configuration.clock())
            _ = try? await commit(&state, kind: .signerSigned, detail: "saved after a signing error")
        }
        throw error
    }

    private func runSession(_ stored: StoredEnvelope, driver: some SignerDriver) async throws -> SigningOutcome {
        var state = SessionState(envelope: stored.envelope, mode: stored.signingMode, ids: EnvelopeIDs(stored.envelope))
        let perSigner = configuration.saveProgressAfterEachLocalSigner
        let ids = state.ids
        let mode = state.mode

        while case .sign(let recipient) = state.envelope.resumeDecision(user: signingUser) {
            let tabs = state.envelope.tabs.enumerated().filter { $0.element.recipientId == recipient.recipientId }
            guard !tabs.isEmpty else {
                try await fail(&state, DeviceNodeError(.signerWithoutTabs,
                    "signer '\(recipient.name)' (\(recipient.recipientId)) has no tabs to fill; add at least one sign-here tab", envelope: ids),
                    recipient: recipient.recipientId)
            }
            do {
                try state.envelope.apply(.startSigning, at: configuration.clock())
            } catch {
                try await fail(&state, DeviceNodeError(.noIncompleteLocalSigner, error.message, envelope: ids), recipient: recipient.recipientId)
            }
            let session = SigningSession(envelope: ids, snapshot: state.envelope, recipient: recipient,
                                         tabs: tabs.map(\.element), startedAt: configuration.clock())
            let action: SignerAction
            do {
                action = try await driver.act(in: session)
            } catch {
                try await fail(&state, DeviceNodeError(.signerFailed,
                    "the signer driver failed for '\(recipient.name)' (\(recipient.recipientId)); earlier signers' work is kept, resume to retry",
                    envelope: ids, underlying: error), recipient: recipient.recipientId)
            }
            let now = configuration.clock()
            switch action {
            case .sign(let inputs):
                let signatures: [StoredSignature]
                do {
                    signatures = try apply(inputs, to: &state.envelope, tabs: tabs, recipient: recipient, at: now)
                } catch let error as DeviceNodeError {
                    try await fail(&state, error, recipient: recipient.recipientId)
                }
                state.envelope.setStatus(.signed, forRecipient: recipient.recipientId, at: now)
                try? state.envelope.apply(.signerFinished, at: now)
                state.signed.append(recipient.recipientId)
                state.unsaved += signatures
                let willContinue: Bool
                if case .sign = state.envelope.resumeDecision(user: signingUser) { willContinue = true } else { willContinue = false }
                if perSigner || !willContinue {
                    let sequence = try await commit(&state, kind: .signerSigned, detail: recipient.recipientId)
                    if !willContinue {
                        publish(.signingCompleted(SigningCompleted(envelope: ids, recipientIds: state.signed, signingMode: mode, sequence: sequence)))
                        return .completed(signed: state.signed, sequence: sequence)
                    }
                }
            case .finishLater, .sessionExpired:
                let reason: SigningExitReason = if case .finishLater = action { .cancel } else { .tokenExpired }
                try? state.envelope.apply(.finishLater, at: now)
                if !state.unsaved.isEmpty { _ = try await commit(&state, kind: .signerSigned, detail: "finish later") }
                publish(.signingCancelled(SigningCancelled(envelope: ids, recipientId: recipient.recipientId, exitReason: reason,
                                                           signingMode: mode, declineReason: nil)))
                return .cancelled(recipientId: recipient.recipientId, reason: reason, signed: state.signed)
            case .decline(let reason):
                state.envelope.setStatus(.declined, forRecipient: recipient.recipientId, at: now, declineReason: reason)
                try? state.envelope.apply(.decline, at: now)
                let sequence = try await commit(&state, kind: .signerDeclined, detail: "\(recipient.recipientId): \(reason)")
                publish(.signingCancelled(SigningCancelled(envelope: ids, recipientId: recipient.recipientId, exitReason: .decline,
                                                           signingMode: mode, declineReason: reason)))
                guard let sequence else {
                    throw DeviceNodeError(.storeFailure, "a declined envelope was not queued for sync", envelope: ids)
                }
                return .declined(recipientId: recipient.recipientId, sequence: sequence, signed: state.signed)
            }
        }
        // Only reached when the first decision was not `.sign` (checked by the caller) — defensive.
        throw DeviceNodeError(.noIncompleteLocalSigner, state.envelope.syncEligibility(user: signingUser).message, envelope: ids)
    }

    /// Checks a signer's inputs against their tabs and applies them: tab values into the envelope,
    /// signatures bound to their document and signed with the device key.
    private func apply(
        _ inputs: [TabInput], to envelope: inout Envelope, tabs: [(offset: Int, element: Tab)], recipient: Recipient, at now: Date
    ) throws -> [StoredSignature] {
        let ids = EnvelopeIDs(envelope)
        func invalid(_ message: String) -> DeviceNodeError {
            DeviceNodeError(.invalidSignerInput, "signer '\(recipient.name)' (\(recipient.recipientId)): \(message)", envelope: ids)
        }
        guard inputs.count == tabs.count else {
            throw invalid("gave \(inputs.count) input(s) for \(tabs.count) tab(s); answer each tab once, in order")
        }
        // Work on a copy: a bad input later in the list must leave no earlier tab changed.
        var updated = envelope
        var signatures: [StoredSignature] = []
        for ((index, tab), input) in zip(tabs, inputs) {
            let label = "tab \(index) (\(tab.type.rawValue)\(tab.tabId.map { " '\($0)'" } ?? ""))"
            switch (tab.type, input) {
            case (.signHere, .signature(let captured)), (.initialHere, .signature(let captured)):
                guard let document = envelope.document(id: tab.documentId) else {
                    throw invalid("\(label) names document '\(tab.documentId)', which the envelope lacks")
                }
                guard !captured.isoRecord.isEmpty else { throw invalid("\(label) got an empty signature") }
                let binding = SignatureBinding(document: Array(document.pdfBytes), signature: captured).canonicalBytes()
                let deviceSignature: Data
                do {
                    deviceSignature = try store.privateKey.signature(for: binding)
                } catch {
                    throw DeviceNodeError(.signerFailed, "the device key could not sign \(label)", envelope: ids, underlying: error)
                }
                signatures.append(StoredSignature(
                    envelopeId: envelope.envelopeId, tabIndex: index, recipientId: recipient.recipientId,
                    documentId: tab.documentId, fieldId: captured.fieldID, isoRecord: captured.isoRecord, svg: captured.svg(),
                    binding: binding, deviceSignature: Array(deviceSignature), signedAt: now))
            case (.signHere, .keep), (.initialHere, .keep):
                guard tab.optional else { throw invalid("\(label) is required: give a signature") }
            case (_, .signature):
                throw invalid("\(label) takes no signature")
            case (.signHere, _), (.initialHere, _):
                throw invalid("\(label) takes a signature")
            case (.checkbox, .selected(let on)), (.radio, .selected(let on)):
                guard !tab.locked else { throw invalid("\(label) is locked") }
                updated.tabs[index].selected = on
            case (_, .selected):
                throw invalid("\(label) is not a checkbox or radio button")
            case (.checkbox, .text), (.radio, .text):
                throw invalid("\(label) takes selected(true/false), not text")
            case (_, .text(let value)):
                guard !tab.locked else { throw invalid("\(label) is locked") }
                guard value.count <= 10_000 else { throw invalid("\(label) value is longer than 10,000 characters") }
                updated.tabs[index].value = value
            case (_, .keep):
                let empty = (tab.value ?? "").trimmingCharacters(in: .whitespaces).isEmpty
                if [.text, .company, .title, .fullName].contains(tab.type), empty, !tab.optional, !tab.locked {
                    throw invalid("\(label) is required: give a value")
                }
            }
        }
        envelope = updated
        return signatures
    }
}
