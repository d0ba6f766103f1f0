import DeviceNode
import Envelopes
import FleetProtocol
import FleetTesting
import Foundation
import Testing

@testable import Coordinator

private let bea = EmbeddedSigner(id: "r1", name: "Bea Buyer", email: "bea@example.com", clientUserId: "cu-bea", order: 1)

private func completed(_ event: DeviceEvent) -> SigningCompleted? {
    if case .signingCompleted(let fields) = event { return fields }
    return nil
}

private func cancelled(_ event: DeviceEvent) -> SigningCancelled? {
    if case .signingCancelled(let fields) = event { return fields }
    return nil
}

private func sendFailed(_ event: DeviceEvent) -> OnlineSendFailed? {
    if case .onlineSendFailed(let fields) = event { return fields }
    return nil
}

/// Captive-signing events name the envelope with the three ids, each in its own field (issue #17
/// part 5): until then the server id was in `localId` and `transactionId` was empty.
@Suite(.serialized, .timeLimit(.minutes(3))) struct CaptiveEventIDsTests {
    @Test func eventsOfAnEnvelopeSyncedFromThisDeviceCarryItsLocalAndTransactionIds() async throws {
        let rig = try await CaptiveRig()
        let envelope = try CaptiveRig.envelope([bea])
        let serverId = try await rig.sync(envelope)
        let localId = try #require(try await rig.node.outboxItems().first { $0.envelope.transactionId == envelope.transactionId }?.envelope.localId)
        #expect(localId != serverId, "the device's id and the server's differ")
        let expected = EnvelopeIDs(localId: localId, transactionId: envelope.transactionId, serverId: serverId)
        let events = rig.node.events()

        // A refused recipient view: the failed request, then the end of the session, both with every id.
        await #expect(throws: DeviceNodeError.self) {
            try await rig.node.presentCaptiveSigning(
                envelopeId: serverId, recipientClientUserId: "cu-nobody", service: rig.views, signer: CaptiveSigner(seed: 1))
        }
        let failure = try #require(sendFailed(try await captiveEvent(events, "online send failed") { sendFailed($0) != nil }))
        #expect(failure.envelope == expected)
        #expect(failure.request == .recipientView)
        #expect(failure.reason == .refused)
        #expect(failure.serverCode == FleetErrorCode.notFound.rawValue)
        #expect(failure.message.contains("no recipient"), "\(failure.message)")
        let refused = try #require(cancelled(try await captiveEvent(events, "cancelled: no match") { cancelled($0) != nil }))
        #expect(refused.envelope == expected)
        #expect(refused.exitReason == .exception)

        // Signing: the result and the event name the same three ids.
        let result = try await rig.node.presentCaptiveSigning(
            envelopeId: serverId, recipientClientUserId: "cu-bea", service: rig.views, signer: CaptiveSigner(seed: 11))
        #expect(result.event == .signingComplete)
        #expect(result.envelope == expected)
        let done = try #require(completed(try await captiveEvent(events, "signing completed") { completed($0) != nil }))
        #expect(done.envelope == expected)
        await rig.tearDown()
    }

    @Test func anEnvelopeNeverOnThisDeviceHasAnEmptyLocalIdAndThePagesTransactionId() async throws {
        let rig = try await CaptiveRig()
        let envelope = try CaptiveRig.envelope([bea])
        let serverId = try await rig.sync(envelope)
        let url = try await rig.url(serverId, .clientUserID("cu-bea"))
        let kiosk = try await rig.anonymousDevice("kiosk")
        let events = kiosk.events()

        let result = try await kiosk.presentCaptiveSigning(signingURL: url.url, envelopeId: serverId, recipientId: "r1", signer: CaptiveSigner(seed: 5))
        #expect(result.event == .signingComplete)
        let expected = EnvelopeIDs(localId: "", transactionId: envelope.transactionId, serverId: serverId)
        #expect(result.envelope == expected)
        let done = try #require(completed(try await captiveEvent(events, "signing completed on the kiosk") { completed($0) != nil }))
        #expect(done.envelope == expected)

        // The used URL again: refused by the page (viewing complete is an ending, not a failure) ...
        let again = try await kiosk.presentCaptiveSigning(signingURL: url.url, envelopeId: serverId, recipientId: "r1", signer: CaptiveSigner(seed: 5))
        #expect(again.event == .viewingComplete)
        // ... and a URL that is not http(s): the failed send names the server id, nothing else is known.
        await #expect(throws: DeviceNodeError.self) {
            try await kiosk.presentCaptiveSigning(signingURL: "ftp://nowhere/x", envelopeId: serverId, recipientId: "r1", signer: CaptiveSigner(seed: 5))
        }
        let failure = try #require(sendFailed(try await captiveEvent(events, "online send failed") { sendFailed($0) != nil }))
        #expect(failure.envelope == EnvelopeIDs(localId: "", transactionId: "", serverId: serverId))
        #expect(failure.request == .signingPage)
        #expect(failure.reason == .invalidRequest)
        try await kiosk.close()
        await rig.tearDown()
    }

    @Test func aPageThatFailsOnFinishIsAnOnlineSendFailure() async throws {
        let rig = try await CaptiveRig()
        let envelope = try CaptiveRig.envelope([bea])
        let serverId = try await rig.sync(envelope)
        let events = rig.node.events()
        let url = try await rig.url(serverId, .clientUserID("cu-bea"), returnURL: "https://app.example/back")
        _ = try await rig.node.presentCaptiveSigning(
            signingURL: url.url, envelopeId: serverId, recipientId: "r1", signer: CaptiveSigner(seed: 1, behaviour: .leaveOpen))
        // Break the store under the open page: storing the tabs on Finish fails.
        try await rig.temporary.store.database.write { db in try db.execute(sql: "DROP TABLE captiveTab") }
        let result = try await rig.node.presentCaptiveSigning(signingURL: url.url, envelopeId: serverId, recipientId: "r1", signer: CaptiveSigner(seed: 1))
        #expect(result.event == .exception)
        let failure = try #require(sendFailed(try await captiveEvent(events, "online send failed") { sendFailed($0) != nil }))
        #expect(failure.request == .signingPage)
        #expect(failure.reason == .serverFailed)
        #expect(failure.serverCode == "exception")
        #expect(failure.envelope.transactionId == envelope.transactionId)
        #expect(!failure.envelope.localId.isEmpty && failure.envelope.localId != serverId)
        await rig.tearDown()
    }
}
