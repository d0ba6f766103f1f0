import DeviceNode
import Envelopes
import Foundation
import SignatureCapture
import Testing

@Suite("Signing flows")
struct SigningFlowTests {
    @Test("two in-person signers sign in order; envelopes enter the outbox as 1, 2, 3")
    func twoSignersInOrderThenOutbox() async throws {
        let fixture = try await Fixture.make()
        let node = fixture.node
        let events = node.events()
        var transactionIds: [String] = []
        for index in 0..<3 {
            let envelope = try SampleEnvelope.inPerson(signers: 2, transactionId: "tx-\(index)")
            transactionIds.append(envelope.transactionId)
            let id = try await node.compose(envelope)
            #expect(try await node.canResume(envelopeId: id))
            let outcome = try await node.resumeSigning(envelopeId: id, driver: SyntheticSigner(seed: UInt64(index)))
            #expect(outcome == .completed(signed: ["1", "2"], sequence: UInt64(index + 1)))
            #expect(try await node.cacheState(envelopeId: id) == .pendingSync)
            #expect(try await node.canResume(envelopeId: id) == false)
        }
        let items = try await node.pendingOutboxItems()
        #expect(items.map(\.sequence) == [1, 2, 3])
        #expect(items.map(\.envelope.transactionId) == transactionIds)
        for item in items {
            #expect(item.hasValidSignature(publicKey: node.publicKey))
            let payload = try item.decodedPayload()
            #expect(payload.sequence == item.sequence)
            #expect(payload.deviceId == node.deviceId)
            #expect(payload.recipients.map(\.status) == ["signed", "signed"])
            // In order: signer 1's status changed before signer 2's.
            let times = payload.recipients.compactMap(\.statusChangedAtNanos)
            #expect(times.count == 2 && times[0] < times[1])
            #expect(payload.signatures.map(\.recipientId) == ["1", "2"])
            #expect(payload.tabs.filter { $0.type == .text }.allSatisfy { $0.value?.isEmpty == false })
            #expect(item.syncItem?.sequence == item.sequence)
        }
        // Journal: signer 1 then signer 2, then queued with the sequence.
        let firstId = items[0].envelope.localId
        let journal = try await node.journal(envelopeId: firstId)
        #expect(journal.map(\.kind) == [.composed, .signerSigned, .signerSigned, .queued])
        #expect(journal.map(\.detail).prefix(3).dropFirst().map { $0 } == ["1", "2"])
        #expect(journal.last?.sequence == 1)

        let seen = try await collect(events) {
            if case .signingCompleted(let done) = $0 { return done.envelope.transactionId == "tx-2" }
            return false
        }
        let first = seen.filter { $0.envelope?.transactionId == "tx-0" }
        #expect(first.count == 6)
        guard first.count == 6 else { return }
        #expect(first[0] == .envelopeCachingStarted(EnvelopeIDs(localId: firstId, transactionId: "tx-0")))
        #expect(first[1] == .envelopeCached(EnvelopeCached(envelope: EnvelopeIDs(localId: firstId, transactionId: "tx-0"), isUpdate: false, templateId: nil)))
        #expect(first[2] == .envelopeCached(EnvelopeCached(envelope: EnvelopeIDs(localId: firstId, transactionId: "tx-0"), isUpdate: true, templateId: nil)))
        #expect(first[4] == .envelopeQueuedForSync(EnvelopeQueued(envelope: EnvelopeIDs(localId: firstId, transactionId: "tx-0"), sequence: 1)))
        #expect(first[5] == .signingCompleted(SigningCompleted(
            envelope: EnvelopeIDs(localId: firstId, transactionId: "tx-0"), recipientIds: ["1", "2"], signingMode: .offline, sequence: 1)))
        try await node.close()
    }

    @Test("signatures verify: Ed25519 over the canonical payload, bindings match their documents")
    func signaturesVerify() async throws {
        let fixture = try await Fixture.make()
        let node = fixture.node
        let id = try await node.compose(try SampleEnvelope.inPerson(signers: 2))
        try await node.resumeSigning(envelopeId: id, driver: SyntheticSigner(seed: 11))
        let item = try #require(try await node.pendingOutboxItems().first)
        let payloadBytes = try #require(item.payload)
        #expect(DeviceSignature.isValid(item.signature, for: payloadBytes, publicKey: node.publicKey))
        var tampered = payloadBytes
        tampered[tampered.count / 2] ^= 0x01
        #expect(!DeviceSignature.isValid(item.signature, for: tampered, publicKey: node.publicKey))
        // Canonical: the decoded payload encodes back to the same bytes.
        let payload = try item.decodedPayload()
        #expect(try payload.canonicalBytes() == payloadBytes)

        let document = try #require(payload.documents.first)
        #expect(payload.signatures.count == 2)
        for signature in payload.signatures {
            let binding = try SignatureBinding(canonicalBytes: signature.binding)
            #expect(binding.documentSHA256 == document.sha256)
            #expect(binding.matches(document: Array(document.pdf), iso: signature.isoRecord))
            #expect(DeviceSignature.isValid(signature.bindingSignature, for: signature.binding, publicKey: node.publicKey))
            _ = try ISOSignatureRecord(bytes: signature.isoRecord)
        }
        let stored = try await node.signatures(envelopeId: id)
        #expect(stored.map(\.tabIndex) == payload.signatures.map(\.tabIndex))
        #expect(stored.allSatisfy { $0.svg.hasPrefix("<svg") || $0.svg.contains("<svg") })
        #expect(try await node.auditStore().isConsistent)
    }

    @Test("finish later keeps the first signer's work; resuming later completes the envelope")
    func cancelAndResumeLater() async throws {
        let fixture = try await Fixture.make()
        let node = fixture.node
        let events = node.events()
        let id = try await node.compose(try SampleEnvelope.inPerson(signers: 2, transactionId: "tx-later"))
        let outcome = try await node.resumeSigning(envelopeId: id, driver: SyntheticSigner(seed: 5, behaviour: ["2": .finishLater]))
        #expect(outcome == .cancelled(recipientId: "2", reason: .cancel, signed: ["1"]))
        #expect(try await node.cacheState(envelopeId: id) == .cached)
        #expect(try await node.canResume(envelopeId: id))
        #expect(try await node.signatures(envelopeId: id).map(\.recipientId) == ["1"])
        #expect(try await node.pendingOutboxItems().isEmpty)
        let listed = try #require(try await node.cachedEnvelopes().first)
        #expect(listed.nextLocalSigner?.recipientId == "2")

        let cancelled = try await collect(events) { if case .signingCancelled = $0 { return true } else { return false } }
        #expect(cancelled.last == .signingCancelled(SigningCancelled(
            envelope: EnvelopeIDs(localId: id, transactionId: "tx-later"), recipientId: "2", exitReason: .cancel,
            signingMode: .offline, declineReason: nil)))

        let resumed = try await node.resumeSigning(envelopeId: id, driver: SyntheticSigner(seed: 5))
        #expect(resumed == .completed(signed: ["2"], sequence: 1))
        let payload = try #require(try await node.pendingOutboxItems().first).decodedPayload()
        #expect(payload.signatures.map(\.recipientId) == ["1", "2"])
        #expect(try await node.auditStore().isConsistent)
    }

    @Test("without per-signer saves, a session commits once at its end and still keeps work on finish later")
    func progressSavedAtSessionEnd() async throws {
        let fixture = try await Fixture.make(saveProgress: false)
        let node = fixture.node
        let events = node.events()
        let id = try await node.compose(try SampleEnvelope.inPerson(signers: 3, transactionId: "tx-end"))
        let outcome = try await node.resumeSigning(envelopeId: id, driver: SyntheticSigner(seed: 1, behaviour: ["3": .sessionExpired]))
        #expect(outcome == .cancelled(recipientId: "3", reason: .tokenExpired, signed: ["1", "2"]))
        #expect(try await node.signatures(envelopeId: id).map(\.recipientId) == ["1", "2"])
        let seen = try await collect(events) { if case .signingCancelled = $0 { return true } else { return false } }
        let updates = seen.filter { if case .envelopeCached(let e) = $0 { return e.isUpdate } else { return false } }
        #expect(updates.count == 1)
        #expect(try await node.journal(envelopeId: id).map(\.kind) == [.composed, .signerSigned])
    }

    @Test("decline stops routing and queues the envelope so the server records it")
    func decline() async throws {
        let fixture = try await Fixture.make()
        let node = fixture.node
        let events = node.events()
        let id = try await node.compose(try SampleEnvelope.inPerson(signers: 2, transactionId: "tx-decline"))
        let outcome = try await node.resumeSigning(
            envelopeId: id, driver: SyntheticSigner(seed: 2, behaviour: ["1": .decline(reason: "wrong address")]))
        #expect(outcome == .declined(recipientId: "1", sequence: 1, signed: []))
        let payload = try #require(try await node.pendingOutboxItems().first).decodedPayload()
        #expect(payload.recipients.map(\.status) == ["declined", "created"])
        #expect(payload.recipients.first?.declineReason == "wrong address")
        #expect(payload.completedLocallyAtNanos != nil)
        let seen = try await collect(events) { if case .signingCancelled = $0 { return true } else { return false } }
        guard case .signingCancelled(let cancelled) = seen.last else { Issue.record("no cancel event"); return }
        #expect(cancelled.exitReason == .decline)
        #expect(cancelled.declineReason == "wrong address")
        #expect(cancelled.envelope == EnvelopeIDs(localId: id, transactionId: "tx-decline"))
        // Resuming a declined envelope is a clear "ready for sync", not an error.
        let again = try await node.resumeSigning(envelopeId: id, driver: SyntheticSigner(seed: 2))
        guard case .readyForSync(1, let message) = again else { Issue.record("\(again)"); return }
        #expect(message.contains("ready for sync"))
    }

    @Test("resume right after composing an envelope with no local signer answers ready for sync; retries are safe")
    func resumeWithoutLocalSigner() async throws {
        let fixture = try await Fixture.make()
        let node = fixture.node
        let events = node.events()
        let envelope = try remoteOnlyEnvelope(transactionId: "tx-remote")
        let id = try await node.compose(envelope)
        #expect(try await node.cacheState(envelopeId: id) == .pendingSync)
        let outcome = try await node.resumeSigning(envelopeId: id, driver: SyntheticSigner(seed: 1))
        #expect(outcome == .readyForSync(sequence: 1, message: "ready for sync: nobody signs on this device now, only remote recipients are pending"))
        #expect(try await node.resumeSigning(envelopeId: id, driver: SyntheticSigner(seed: 1)) == outcome)

        // Compose again with the same transaction id: same envelope, nothing new.
        #expect(try await node.compose(envelope) == id)
        var rebuilt = envelope
        rebuilt.envelopeId = UUID().uuidString
        #expect(try await node.compose(rebuilt) == id)
        #expect(try await node.outboxItems().count == 1)
        // A different envelope (its own local id, other content) under the used transaction id:
        // the error and its event both name the envelope that holds the id, never the new local
        // id, which was not stored.
        var changed = envelope
        changed.envelopeId = UUID().uuidString
        changed.emailSubject = "Something else"
        let conflict = await expectDeviceError(.transactionIdConflict) { _ = try await node.compose(changed) }
        #expect(conflict?.envelope?.localId == id)

        let seen = try await collect(events) { if case .envelopeCacheFailed = $0 { return true } else { return false } }
        let stored = EnvelopeIDs(localId: id, transactionId: "tx-remote")
        #expect(seen.contains(.envelopeQueuedForSync(EnvelopeQueued(envelope: stored, sequence: 1))))
        #expect(seen.last?.envelope == stored, "the failure's ids: \(String(describing: seen.last))")
    }

    @Test("typed errors carry the SDK's meanings")
    func errors() async throws {
        let fixture = try await Fixture.make(login: false)
        let node = fixture.node
        let events = node.events()
        let envelope = try SampleEnvelope.inPerson(signers: 1, transactionId: "tx-errors")
        await expectDeviceError(.accountNotLoggedIn) { _ = try await node.compose(envelope) }
        try await node.login(accessToken: "token-1")
        await expectDeviceError(.envelopeNotCached) { _ = try await node.resumeSigning(envelopeId: "nope", driver: SyntheticSigner(seed: 1)) }

        // A signer without tabs is refused at compose, naming the rule.
        var noTabs = envelope
        noTabs.tabs = []
        noTabs.transactionId = "tx-no-tabs"
        let invalid = await expectDeviceError(.invalidEnvelope) { _ = try await node.compose(noTabs) }
        #expect(invalid?.validationErrors.contains { $0.code == .signerWithoutTabs } == true)

        // A driver answering the wrong number of tabs: a signing error, nothing saved.
        struct Sloppy: SignerDriver {
            func act(in session: SigningSession) async throws -> SignerAction { .sign([]) }
        }
        let id = try await node.compose(envelope)
        await expectDeviceError(.invalidSignerInput) { _ = try await node.resumeSigning(envelopeId: id, driver: Sloppy()) }
        #expect(try await node.cacheState(envelopeId: id) == .cached)
        let failed = try await collect(events) { if case .signingError = $0 { return true } else { return false } }
        guard case .signingError(let failure) = failed.last else { return }
        #expect(failure.envelope == EnvelopeIDs(localId: id, transactionId: "tx-errors"))
        #expect(failure.recipientId == "1")

        try await node.resumeSigning(envelopeId: id, driver: SyntheticSigner(seed: 1))
        await expectDeviceError(.envelopeReadyForSync) { try await node.removeCachedEnvelope(envelopeId: id) }

        // A cached (unsigned) envelope can be removed.
        let other = try await node.compose(try SampleEnvelope.inPerson(signers: 1, transactionId: "tx-remove"))
        try await node.removeCachedEnvelope(envelopeId: other)
        #expect(try await node.cacheState(envelopeId: other) == nil)
        await expectDeviceError(.envelopeNotCached) { try await node.removeCachedEnvelope(envelopeId: other) }
        #expect(try await node.auditStore().isConsistent)
    }
}
