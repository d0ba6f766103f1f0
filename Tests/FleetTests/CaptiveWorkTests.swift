import DeviceNode
import Envelopes
import FleetProtocol
import Foundation
import Testing

@testable import Fleet

/// A restored device's ceremonies, checked against the coordinator's copy of the envelope.
@Suite struct CaptiveWorkTests {
    /// One in-person signer and three remote signers, the first two embedded.
    static func work() throws -> CaptiveWork {
        let transaction = "d-1-7"
        let envelope = try SampleEnvelope.inPerson(
            signers: 1, remoteSigners: 3, transactionId: transaction,
            remoteClientUserIds: [CaptiveWork.clientUserId(transaction: transaction, remote: 1), CaptiveWork.clientUserId(transaction: transaction, remote: 2), nil])
        var work = try #require(CaptiveWork(envelope: envelope, localId: "local-7", number: 7))
        work.serverEnvelope = "env-7"
        work.restored = true
        return work
    }

    static func server(_ status: String, _ recipients: [(String, String)]) -> EnvelopeQueryReply {
        EnvelopeQueryReply(
            envelopeID: "env-7", status: status, transactionID: "d-1-7", deviceID: "d-1", createdAt: Date(),
            recipients: recipients.enumerated().map { index, recipient in
                EnvelopeQueryReply.Recipient(recipientID: recipient.0, type: "signer", name: recipient.0, routingOrder: index + 1, status: recipient.1)
            })
    }

    @Test func signersTheServerHasSignedAreDropped() throws {
        let work = try Self.work()
        #expect(work.signers.map(\.recipientId) == ["r1", "r2"])
        let left = try #require(work.remaining(on: Self.server("sent", [("1", "signed"), ("r1", "signed"), ("r2", "sent"), ("r3", "created")])))
        #expect(left.signers.map(\.recipientId) == ["r2"])
        #expect(left.presented == 1, "the handwriting seed carries on from the signers already done")
        #expect(!left.restored)
        let untouched = try #require(work.remaining(on: Self.server("delivered", [("1", "signed"), ("r1", "delivered")])))
        #expect(untouched.signers.map(\.recipientId) == ["r1", "r2"] && untouched.presented == 0)
    }

    @Test func nothingIsLeftWhenEverySignerSignedOrTheEnvelopeIsNoLongerOpen() throws {
        let work = try Self.work()
        #expect(work.remaining(on: Self.server("sent", [("r1", "signed"), ("r2", "completed"), ("r3", "sent")])) == nil)
        for status in ["completed", "declined", "voided"] {
            #expect(work.remaining(on: Self.server(status, [("r1", "sent"), ("r2", "created")])) == nil, "\(status)")
        }
    }
}
