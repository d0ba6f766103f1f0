import DeviceNode
import Envelopes
import FleetTesting
import Foundation
import SignatureCapture
import Testing

// The code between the markers is docs/embedding.md's `SignerDriver` sketch, verbatim but for the
// list item's two-space indent (a test compares them). `capture` stands for the app's signature UI.
// BEGIN EXAMPLE kiosk-signer
struct KioskSigner: SignerDriver {
    func act(in session: SigningSession) async throws -> SignerAction {
        // show session.snapshot's documents; collect one TabInput per tab of session.tabs, in order
        .sign(try session.tabs.map { tab in
            switch tab.type {
            case .signHere, .initialHere: .signature(try capture(tab))
            case .fullName, .text: .text(session.recipient.name)
            default: .keep
            }
        })
    }
}
// END EXAMPLE

/// The app's signature pad, here a synthetic hand (SignatureCapture).
private func capture(_ tab: Tab) throws -> CapturedSignature {
    try SignatureCapturer(pen: .signaturePad).capture(
        signer: SignerProfile(seed: 11, identifier: "Walk-in"), signing: 1, fieldID: tab.tabId ?? "sign", startedAt: .epoch)
}

@Suite("docs/embedding.md: a SignerDriver")
struct KioskSignerExampleTests {
    @Test("the SignerDriver sketch in docs/embedding.md is this file's code, verbatim")
    func docMatchesCode() throws {
        let example = try DocExample.compare("kiosk-signer", in: "docs/embedding.md", file: #filePath)
        #expect(example.shown == example.code)
    }

    @Test("the sketch signs an envelope")
    func signs() async throws {
        let directory = try TempDirectory()
        let user = UserInfo(accountId: "acct-1", accountName: "Acme", userId: "user-1", userName: "Ann Host",
                            email: "ann@example.com", host: "https://coordinator.example")
        let node = try await DeviceNode.open(configuration: DeviceConfiguration(storePath: directory.storePath),
                                             accountService: InMemoryAccountService(tokens: ["kiosk-token": user]))
        try await node.login(accessToken: "kiosk-token")
        let id = try await node.compose(try SampleEnvelope.inPerson(signers: 2, transactionId: "kiosk-1"), mode: .offline)
        let outcome = try await node.resumeSigning(envelopeId: id, driver: KioskSigner())
        guard case .completed(let signed, let sequence) = outcome else {
            Issue.record("not signed: \(outcome)")
            return
        }
        #expect(signed == ["1", "2"])
        let item = try #require(try await node.outboxItems().first { $0.sequence == sequence })
        #expect(try item.decodedPayload().signatures.count == 2)
        try await node.close()
    }
}
