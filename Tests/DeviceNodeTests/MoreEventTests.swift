import DeviceNode
import Envelopes
import Foundation
import Testing

@Suite("More events and local signers")
struct MoreEventTests {
    @Test("cache failed, removed and logout-dropped envelopes are announced with their ids")
    func cacheEvents() async throws {
        let fixture = try await Fixture.make()
        let node = fixture.node
        let events = node.events()
        var invalid = try SampleEnvelope.inPerson(signers: 1, transactionId: "tx-invalid")
        invalid.tabs[0].pageNumber = 9
        await expectDeviceError(.invalidEnvelope) { _ = try await node.compose(invalid) }
        let removed = try await node.compose(try SampleEnvelope.inPerson(signers: 1, transactionId: "tx-removed"))
        try await node.removeCachedEnvelope(envelopeId: removed)
        let dropped = try await node.compose(try SampleEnvelope.inPerson(signers: 1, transactionId: "tx-dropped"))
        try await node.resumeSigning(envelopeId: dropped, driver: SyntheticSigner(seed: 1))
        try await node.logout(force: true)

        let seen = try await collect(events) {
            if case .envelopeUncached(let e) = $0 { return e.reason == .logout } else { return false }
        }
        let failed = seen.compactMap { if case .envelopeCacheFailed(let f) = $0 { return f } else { return nil } }
        #expect(failed.count == 1)
        #expect(failed.first?.envelope?.transactionId == "tx-invalid")
        #expect(failed.first?.error.validationErrors.first?.code == .tabPageOutOfRange)
        let uncached = seen.compactMap { if case .envelopeUncached(let e) = $0 { return e } else { return nil } }
        #expect(uncached == [
            EnvelopeUncached(envelope: EnvelopeIDs(localId: removed, transactionId: "tx-removed"), reason: .removed),
            EnvelopeUncached(envelope: EnvelopeIDs(localId: dropped, transactionId: "tx-dropped"), reason: .logout),
        ])
        // Events after close: a new subscription ends at once.
        try await node.close()
        var afterClose = node.events().makeAsyncIterator()
        #expect(await afterClose.next() == nil)
    }

    @Test("a self signer (the logged-in user) signs on the device; a remote signer after them waits for sync")
    func selfSigner() async throws {
        let fixture = try await Fixture.make()
        let node = fixture.node
        let document = try DocumentBuilder().documentId("d").name("Offer").pdfBytes(SamplePDF.make(pages: 1)).build()
        let me = try RecipientBuilder(type: .signer).recipientId("me").name("Ann Host").email("HOST@Example.com").routingOrder(1).build()
        let them = try RecipientBuilder(type: .signer).recipientId("them").name("Zed").email("zed@example.com").routingOrder(2).build()
        let tab = { (id: String) in
            try TabBuilder(type: .signHere).documentId("d").recipientId(id).pageNumber(1).frame(x: 10, y: 10, width: 100, height: 40).build()
        }
        let envelope = try EnvelopeBuilder().envelopeName("Offer").addDocument(document)
            .addRecipient(me, tabs: [try tab("me")]).addRecipient(them, tabs: [try tab("them")]).transactionId("tx-self").build()
        let id = try await node.compose(envelope)
        #expect(try await node.cachedEnvelopes().first?.nextLocalSigner?.recipientId == "me")
        #expect(try await node.resumeSigning(envelopeId: id, driver: SyntheticSigner(seed: 8)) == .completed(signed: ["me"], sequence: 1))
        let payload = try #require(try await node.pendingOutboxItems().first).decodedPayload()
        #expect(payload.recipients.map(\.status) == ["signed", "created"])
    }

    @Test("a second session on the same envelope is refused while the first runs")
    func concurrentSessions() async throws {
        let fixture = try await Fixture.make()
        let node = fixture.node
        let id = try await node.compose(try SampleEnvelope.inPerson(signers: 1, transactionId: "tx-busy"))
        /// A driver that waits until the test lets it sign.
        final class Gate: SignerDriver {
            let entered: AsyncStream<Void>.Continuation
            let release: AsyncStream<Void>
            init(entered: AsyncStream<Void>.Continuation, release: AsyncStream<Void>) {
                self.entered = entered
                self.release = release
            }
            func act(in session: SigningSession) async throws -> SignerAction {
                entered.yield()
                for await _ in release { break }
                return try await SyntheticSigner(seed: 1).act(in: session)
            }
        }
        let (entered, enteredContinuation) = AsyncStream.makeStream(of: Void.self)
        let (release, releaseContinuation) = AsyncStream.makeStream(of: Void.self)
        let gate = Gate(entered: enteredContinuation, release: release)
        async let first = node.resumeSigning(envelopeId: id, driver: gate)
        for await _ in entered { break }
        #expect(try await node.cacheState(envelopeId: id) == .signing)
        #expect(try await node.canResume(envelopeId: id) == false)
        await expectDeviceError(.signingInProgress) { _ = try await node.resumeSigning(envelopeId: id, driver: SyntheticSigner(seed: 2)) }
        await expectDeviceError(.signingInProgress) { try await node.removeCachedEnvelope(envelopeId: id) }
        releaseContinuation.yield()
        #expect(try await first == .completed(signed: ["1"], sequence: 1))
    }
}

@Suite("Driver failures")
struct DriverFailureTests {
    /// Signs like a SyntheticSigner, except that recipient "2" fills its text tab (first) and then
    /// answers its sign-here tab with a checkbox value.
    struct Confused: SignerDriver {
        func act(in session: SigningSession) async throws -> SignerAction {
            guard session.recipient.recipientId == "2" else { return try await SyntheticSigner(seed: 4).act(in: session) }
            return .sign([.text("partial"), .selected(true)])
        }
    }

    struct Broken: SignerDriver {
        struct Failure: Error {}
        func act(in session: SigningSession) async throws -> SignerAction {
            if session.recipient.recipientId == "2" { throw Failure() }
            return try await SyntheticSigner(seed: 4).act(in: session)
        }
    }

    @Test("a bad input keeps earlier signers' work (saved at session end) and changes nothing of the failing signer")
    func badInputKeepsEarlierWork() async throws {
        let fixture = try await Fixture.make(saveProgress: false)
        let node = fixture.node
        let events = node.events()
        var definition = try SampleEnvelope.inPerson(signers: 2, transactionId: "tx-confused")
        // Text tabs first, so the failing signer's text is applied before the bad input is found.
        definition.tabs = definition.tabs.filter { $0.type == .text } + definition.tabs.filter { $0.type != .text }
        let id = try await node.compose(definition)
        await expectDeviceError(.invalidSignerInput) { _ = try await node.resumeSigning(envelopeId: id, driver: Confused()) }
        #expect(try await node.signatures(envelopeId: id).map(\.recipientId) == ["1"])
        let envelope = try #require(try await node.cachedEnvelope(id: id))
        #expect(envelope.recipient(id: "1")?.status == .signed)
        #expect(envelope.recipient(id: "2")?.status == .created)
        #expect(envelope.tabs(forRecipient: "2").allSatisfy { $0.value == nil && !$0.selected })
        #expect(try await node.cacheState(envelopeId: id) == .cached)
        let seen = try await collect(events) { if case .signingError = $0 { return true } else { return false } }
        guard case .signingError(let failure) = seen.last else { return }
        #expect(failure.recipientId == "2")
        #expect(failure.error.code == .invalidSignerInput)

        // A driver that throws: a signerFailed error, and resuming with a working driver finishes.
        let other = try await node.compose(try SampleEnvelope.inPerson(signers: 2, transactionId: "tx-broken"))
        await expectDeviceError(.signerFailed) { _ = try await node.resumeSigning(envelopeId: other, driver: Broken()) }
        #expect(try await node.signatures(envelopeId: other).map(\.recipientId) == ["1"])
        #expect(try await node.resumeSigning(envelopeId: other, driver: SyntheticSigner(seed: 4)) == .completed(signed: ["2"], sequence: 1))
        #expect(try await node.auditStore().isConsistent)
    }
}
