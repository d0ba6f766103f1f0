@testable import DeviceNode
import Envelopes
import FleetProtocol
import Foundation
import Testing

@Suite("Outbox, sync hooks, events, reopening")
struct OutboxAndStoreTests {
    @Test("sync hooks: started, failed (will retry), succeeded with the server id, duplicate ack changes nothing")
    func syncHooksAndEvents() async throws {
        let fixture = try await Fixture.make()
        let node = fixture.node
        let first = node.events()
        let second = node.events()
        let id = try await node.compose(try SampleEnvelope.inPerson(signers: 1, transactionId: "tx-sync"))
        try await node.resumeSigning(envelopeId: id, driver: SyntheticSigner(seed: 1))
        let local = EnvelopeIDs(localId: id, transactionId: "tx-sync")

        try await node.beginSync(sequences: [1])
        #expect(try await node.cacheState(envelopeId: id) == .syncing)
        try await node.recordSyncFailure(sequences: [1], error: "timeout")
        #expect(try await node.cacheState(envelopeId: id) == .syncFailed)
        try await node.beginSync(sequences: [1])
        try await node.cancelSync(sequences: [1])
        #expect(try await node.cacheState(envelopeId: id) == .pendingSync)
        try await node.beginSync(sequences: [1])
        try await node.recordReceipt(sequence: 1, SyncReceipt(outcome: .applied, serverEnvelopeId: "srv-42"))
        // The retried acknowledgement of the same item: nothing changes, no second event.
        try await node.recordReceipt(sequence: 1, SyncReceipt(outcome: .duplicate, serverEnvelopeId: "srv-42"))
        await node.endSync(SyncSummary(attempted: 1, succeeded: 1, failed: 0, remaining: 0))
        await expectDeviceError(.unknownSequence) { try await node.recordReceipt(sequence: 9, SyncReceipt(outcome: .applied)) }

        #expect(try await node.pendingOutboxItems().isEmpty)
        #expect(try await node.cacheState(envelopeId: id) == nil)
        let receipt = try #require(try await node.outboxItems().first)
        #expect(receipt.status == .synced)
        #expect(receipt.payload == nil)
        #expect(receipt.receipt?.serverEnvelopeId == "srv-42")
        #expect(receipt.receipt?.outcome == .applied)
        #expect(receipt.envelope.serverId == "srv-42")
        #expect(receipt.attempts == 3)
        // Compose again after sync: recognised, nothing new.
        #expect(try await node.compose(try SampleEnvelope.inPerson(signers: 1, transactionId: "tx-sync")) == id)
        #expect(try await node.outboxItems().count == 1)
        #expect(try await node.journal(envelopeId: id).map(\.kind) == [
            .composed, .signerSigned, .queued, .syncStarted, .syncFailed, .syncStarted, .syncCancelled, .syncStarted, .synced,
        ])

        let expected: [DeviceEvent] = [
            .syncStarted(SyncProgress(envelope: local, sequence: 1)),
            .syncFailed(SyncProgress(envelope: local, sequence: 1, error: "timeout", willRetry: true)),
            .syncStarted(SyncProgress(envelope: local, sequence: 1)),
            .syncStarted(SyncProgress(envelope: local, sequence: 1)),
            .syncSucceeded(SyncProgress(envelope: EnvelopeIDs(localId: id, transactionId: "tx-sync", serverId: "srv-42"), sequence: 1)),
            .envelopeUncached(EnvelopeUncached(envelope: EnvelopeIDs(localId: id, transactionId: "tx-sync", serverId: "srv-42"), reason: .synced)),
            .syncEnded(SyncSummary(attempted: 1, succeeded: 1, failed: 0, remaining: 0)),
        ]
        // Every subscriber sees every event.
        for stream in [first, second] {
            let seen = try await collect(stream) { if case .syncEnded = $0 { return true } else { return false } }
            let syncEvents = seen.filter {
                switch $0 {
                case .syncStarted, .syncFailed, .syncSucceeded, .syncEnded, .envelopeUncached: return true
                default: return false
                }
            }
            #expect(syncEvents == expected)
        }
        #expect(try await node.auditStore().isConsistent)
    }

    /// A store call in a cancelled task (a sync pass stopped by going offline) ends with the
    /// cancellation, not with a `store.failure` that would be logged as a broken store.
    @Test("a cancelled store call throws CancellationError, not store.failure")
    func cancelledStoreCall() async throws {
        let fixture = try await Fixture.make()
        let node = fixture.node
        let call = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await node.outboxItems()
        }
        do {
            _ = try await call.value
            Issue.record("a cancelled call returned")
        } catch {
            #expect(error is CancellationError, "\(error)")
        }
        #expect(try await node.outboxItems().isEmpty, "the store still works")
    }

    @Test("a rejected item settles (the device moves on) and keeps its payload for inspection")
    func rejected() async throws {
        let fixture = try await Fixture.make()
        let node = fixture.node
        let events = node.events()
        let id = try await node.compose(try remoteOnlyEnvelope(transactionId: "tx-rejected"))
        try await node.beginSync(sequences: [1])
        try await node.recordReceipt(sequence: 1, SyncReceipt(outcome: .rejected, reason: "offline signing disabled"))
        let item = try #require(try await node.outboxItems().first)
        #expect(item.status == .rejected)
        #expect(item.hasValidSignature(publicKey: node.publicKey))
        #expect(try await node.cacheState(envelopeId: id) == nil)
        let seen = try await collect(events) { if case .syncFailed = $0 { return true } else { return false } }
        #expect(seen.last == .syncFailed(SyncProgress(
            envelope: EnvelopeIDs(localId: id, transactionId: "tx-rejected"), sequence: 1, error: "offline signing disabled", willRetry: false)))
        // The next envelope continues the numbering.
        _ = try await node.compose(try remoteOnlyEnvelope(transactionId: "tx-after"))
        #expect(try await node.pendingOutboxItems().map(\.sequence) == [2])
    }

    @Test("a transaction conflict in an acknowledgement settles as a refusal and keeps the signed payload")
    func transactionConflict() async throws {
        let fixture = try await Fixture.make()
        let node = fixture.node
        let events = node.events()
        let id = try await node.compose(try remoteOnlyEnvelope(transactionId: "tx-reused"))
        try await node.beginSync(sequences: [1])
        let reason = "transaction tx-reused already names another envelope (item 1 of device d, its envelope e); this item is envelope \(id): use a new transaction id"
        let settled = try await node.recordAcknowledgement(
            SyncAck(status: .ok, lastApplied: 1, results: [SyncItemResult(sequence: 1, outcome: .transactionConflict, reason: reason)]))
        #expect(settled == [1], "settled for good: never pushed again")
        let item = try #require(try await node.outboxItems().first)
        #expect(item.status == .rejected && item.receipt?.outcome == .transactionConflict && item.receipt?.serverEnvelopeId == nil)
        #expect(item.syncItem != nil && item.hasValidSignature(publicKey: node.publicKey), "the signed payload is kept: nothing is lost")
        #expect(try await node.pendingOutboxItems().isEmpty)
        let seen = try await collect(events) { if case .syncFailed = $0 { return true } else { return false } }
        #expect(seen.last == .syncFailed(SyncProgress(
            envelope: EnvelopeIDs(localId: id, transactionId: "tx-reused"), sequence: 1, error: reason, willRetry: false)))
        #expect(try await node.auditStore().isConsistent)
    }

    @Test("reopening a store after a normal close finds everything")
    func reopen() async throws {
        let directory = try TempDirectory()
        let fixture = try await Fixture.make(directory: directory)
        let node = fixture.node
        let signed = try await node.compose(try SampleEnvelope.inPerson(signers: 2, transactionId: "tx-signed"))
        try await node.resumeSigning(envelopeId: signed, driver: SyntheticSigner(seed: 1))
        let partial = try await node.compose(try SampleEnvelope.inPerson(signers: 2, transactionId: "tx-partial"))
        try await node.resumeSigning(envelopeId: partial, driver: SyntheticSigner(seed: 2, behaviour: ["2": .finishLater]))
        try await node.beginSync(sequences: [1])                 // left "syncing" at close
        try await node.saveDraft(try SampleEnvelope.inPerson(signers: 1, transactionId: "tx-draft"))
        try await node.cacheTemplate(try AccountDraftTemplateTests.template(lastModified: Date(timeIntervalSince1970: 0)))
        let before = try await node.outboxItems()
        let envelopesBefore = try await node.cachedEnvelope(id: partial)
        let deviceId = node.deviceId
        let publicKey = node.publicKey
        try await node.close()
        await expectDeviceError(.storeFailure) { _ = try await node.cachedEnvelopes() }

        let reopened = try await Fixture.make(login: false, directory: directory)
        let again = reopened.node
        #expect(again.deviceId == deviceId)
        #expect(again.publicKey == publicKey)
        #expect(try await again.loginOffline().user == hostUser)
        #expect(try await again.outboxItems() == before)
        #expect(try await again.cachedEnvelope(id: partial) == envelopesBefore)
        #expect(try await again.signatures(envelopeId: partial).count == 1)
        // Interrupted sync resumes from the last durable state.
        #expect(try await again.cacheState(envelopeId: signed) == .pendingSync)
        #expect(try await again.canResume(envelopeId: partial))
        #expect(try await again.cachedDraft()?.transactionId == "tx-draft")
        #expect(try await again.cachedTemplates().map(\.template.templateId) == ["tpl-lease"])
        #expect(try await again.journal(envelopeId: signed).last?.kind == .recovered)
        let audit = try await again.auditStore()
        #expect(audit.isConsistent, "\(audit)")
        // Continue where it stopped.
        #expect(try await again.resumeSigning(envelopeId: partial, driver: SyntheticSigner(seed: 2)) == .completed(signed: ["2"], sequence: 2))
    }

    @Test("a store belongs to one device id")
    func storeDeviceId() async throws {
        let directory = try TempDirectory()
        let accounts = InMemoryAccountService()
        let node = try await DeviceNode.open(configuration: DeviceConfiguration(storePath: directory.storePath, deviceId: "dev-a"),
                                             accountService: accounts)
        #expect(node.deviceId == "dev-a")
        try await node.close()
        await expectDeviceError(.invalidConfiguration) {
            _ = try await DeviceNode.open(configuration: DeviceConfiguration(storePath: directory.storePath, deviceId: "dev-b"),
                                          accountService: accounts)
        }
        await expectDeviceError(.storeFailure) {
            _ = try await DeviceNode.open(configuration: DeviceConfiguration(storePath: directory.path + "/missing/dir/store.sqlite"),
                                          accountService: accounts)
        }
    }
}
