import Envelopes
import FleetProtocol
import Foundation

/// Ready-made envelopes for simulations, benchmarks and tests.
public enum SampleEnvelope {
    /// An envelope with one 2-page sample PDF and `signers` in-person signers hosted by `hostEmail`,
    /// signing in routing order 1, 2, …; each has a sign-here tab and a text tab.
    ///
    /// - Parameters:
    ///   - signers: in-person signers (1 or more).
    ///   - remoteSigners: remote signers after them (each with a sign-here tab).
    ///   - transactionId: the transaction id (pass a stable one to make compose idempotent).
    ///   - hostName: the host's name.
    ///   - hostEmail: the host's email (usually the logged-in user).
    ///   - remoteClientUserIds: a client user id per remote signer, in order (`nil` or missing:
    ///     not embedded); an embedded remote signer signs by captive signing (docs/captive-signing.md).
    ///   - createdAt: the envelope's creation time.
    /// - Throws: `EnvelopeValidationError` (only for invalid arguments, such as `signers < 1` with no remote signer).
    public static func inPerson(
        signers: Int, remoteSigners: Int = 0, transactionId: String = UUID().uuidString,
        hostName: String = "Ann Host", hostEmail: String = "host@example.com", remoteClientUserIds: [String?] = [],
        createdAt: Date = WallClock.system.now()
    ) throws -> Envelope {
        let document = try DocumentBuilder().documentId("doc1").name("Agreement")
            .pdfBytes(SamplePDF.make(pages: 2, title: "Agreement")).build()
        var builder = EnvelopeBuilder().envelopeName("Agreement \(transactionId.prefix(8))")
            .emailSubject("Please sign the agreement").emailMessage("Signed on a SignFleet device.")
            .addDocument(document).transactionId(transactionId)
        for index in 0..<max(0, signers) {
            let id = "\(index + 1)"
            let signer = try RecipientBuilder(type: .inPersonSigner).recipientId(id)
                .hostName(hostName).hostEmail(hostEmail).signerName("Walk-in Signer \(index + 1)").routingOrder(index + 1).build()
            let signHere = try TabBuilder(type: .signHere).tabId("sign-\(id)").documentId("doc1").recipientId(id)
                .pageNumber(2).frame(x: 72, y: 500 + Double(index) * 60, width: 160, height: 50).build()
            let text = try TabBuilder(type: .text).tabId("text-\(id)").documentId("doc1").recipientId(id).label("city-\(id)")
                .pageNumber(1).frame(x: 72, y: 200 + Double(index) * 40, width: 160, height: 24).build()
            builder = builder.addRecipient(signer, tabs: [signHere, text])
        }
        for index in 0..<max(0, remoteSigners) {
            let id = "r\(index + 1)"
            var remote = RecipientBuilder(type: .signer).recipientId(id).name("Remote Signer \(index + 1)")
                .email("remote\(index + 1)@example.com").routingOrder(max(0, signers) + index + 1)
            if index < remoteClientUserIds.count, let clientUserId = remoteClientUserIds[index] { remote = remote.clientUserId(clientUserId) }
            let signer = try remote.build()
            let signHere = try TabBuilder(type: .signHere).tabId("sign-\(id)").documentId("doc1").recipientId(id)
                .pageNumber(2).frame(x: 300, y: 500 + Double(index) * 60, width: 160, height: 50).build()
            builder = builder.addRecipient(signer, tabs: [signHere])
        }
        return try builder.build(createdAt: createdAt)
    }
}
