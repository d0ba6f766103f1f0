import DeviceNode
import FleetProtocol
import FleetTesting
import Foundation
import Testing

@testable import Coordinator

/// docs/captive-signing.md's "Device library" calls (the doc shows this function's body): a
/// logged-in `node`, its transport `client`, a synced envelope `id` with three embedded signers,
/// and a signing `url` an integrator's backend created for the third.
func captiveSigningExample(node: DeviceNode, client: any ClientTransport, id: String, url: String) async throws {
    // BEGIN EXAMPLE captive-signing
    let views = RemoteRecipientViewService(client: client)
    // The recipient with client user id cu-1; the coordinator looks them up.
    try await node.presentCaptiveSigning(envelopeId: id, recipientClientUserId: "cu-1",
                                         service: views, signer: CaptiveSigner(seed: 7))
    // The recipient with this name, email and client user id.
    try await node.presentCaptiveSigning(envelopeId: id, recipientUserName: "Bea", recipientEmail: "bea@example.com",
                                         recipientClientUserId: "cu-2", service: views, signer: CaptiveSigner(seed: 7))
    // A signing URL from an integrator's backend (no login needed); this signer declines.
    try await node.presentCaptiveSigning(signingURL: url, envelopeId: id, recipientId: "r3",
                                         signer: CaptiveSigner(seed: 7, behaviour: .decline(reason: "wrong amount")))
    node.clearAllWebCookies()
    // END EXAMPLE
}

@Suite("docs/captive-signing.md: the device library", .serialized, .timeLimit(.minutes(3)))
struct CaptiveSigningExampleTests {
    @Test("the device library example in docs/captive-signing.md is this file's code, verbatim")
    func docMatchesCode() throws {
        let example = try DocExample.compare("captive-signing", in: "docs/captive-signing.md", file: #filePath)
        #expect(example.shown == example.code)
    }

    @Test("the example signs twice and declines once on a real coordinator's signing pages")
    func runs() async throws {
        let rig = try await CaptiveRig()
        // Three embedded signers, in parallel (all at routing order 1).
        let id = try await rig.sync(try CaptiveRig.envelope([
            EmbeddedSigner(id: "r1", name: "Al", email: "al@example.com", clientUserId: "cu-1", order: 1),
            EmbeddedSigner(id: "r2", name: "Bea", email: "bea@example.com", clientUserId: "cu-2", order: 1),
            EmbeddedSigner(id: "r3", name: "Cy", email: "cy@example.com", clientUserId: "cu-3", order: 1),
        ]))
        let url = try await rig.url(id, .recipientID("r3"), returnURL: "https://app.example/done")
        let events = rig.node.events()

        try await captiveSigningExample(node: rig.node, client: rig.client, id: id, url: url.url)

        let envelope = try await rig.envelope(id)
        #expect(envelope.recipients.map(\.status) == ["signed", "signed", "declined"], "\(envelope.recipients)")
        #expect(envelope.recipients[2].declineReason == "wrong amount")
        #expect(envelope.status == "declined")
        #expect(!rig.node.hasWebCookies)
        var completed: [String] = []
        while completed.count < 2 {
            let event = try await captiveEvent(events, "signing completed") { if case .signingCompleted = $0 { true } else { false } }
            if case .signingCompleted(let done) = event { completed += done.recipientIds }
        }
        #expect(completed == ["r1", "r2"])
        let declined = try await captiveEvent(events, "declined") { if case .signingCancelled = $0 { true } else { false } }
        guard case .signingCancelled(let cancelled) = declined else { return }
        #expect(cancelled.exitReason == .decline && cancelled.declineReason == "wrong amount")
        await rig.tearDown()
    }
}
