import DeviceNode
import Envelopes
import FleetTesting
import Foundation
import Logging
import Testing

// The code between the markers is docs/embedding.md's example, verbatim (a test compares them).
// BEGIN EXAMPLE embedding
/// Sets up a device, logs in, composes an envelope for an in-person signer, has them sign,
/// and returns the outbox item that the sync engine will push.
func embeddingExample(storePath: String) async throws -> OutboxItem? {
    // 1. Setup: the SDK's defaults, changed where needed, and the account service seam.
    var configuration = DeviceConfiguration(storePath: storePath)
    configuration.apiTimeout = 120                      // clamped to 30...1200 s
    let user = UserInfo(accountId: "acct-1", accountName: "Acme", userId: "user-1", userName: "Ann Host",
                        email: "ann@example.com", host: "https://coordinator.example")
    let accounts = InMemoryAccountService(tokens: ["token-from-your-oauth-flow": user])
    let node = try await DeviceNode.open(configuration: configuration, accountService: accounts,
                                         logger: Logger(label: "my-app.device"))

    // 2. Subscribe before acting; every subscriber gets its own stream of every event.
    let events = node.events()

    // 3. Log in with an access token (persisted, so `loginOffline()` works later without a network).
    try await node.login(accessToken: "token-from-your-oauth-flow")

    // 4. Build and compose an envelope.
    let document = try DocumentBuilder().documentId("doc1").name("NDA")
        .pdfBytes(SamplePDF.make(pages: 1, title: "NDA")).build()
    let walkIn = try RecipientBuilder(type: .inPersonSigner).recipientId("1")
        .hostName("Ann Host").hostEmail("ann@example.com").signerName("Bob Walk-in").build()
    let signHere = try TabBuilder(type: .signHere).documentId("doc1").recipientId("1")
        .pageNumber(1).frame(x: 100, y: 600, width: 160, height: 50).build()
    let envelope = try EnvelopeBuilder().envelopeName("NDA").emailSubject("Please sign the NDA")
        .addDocument(document).addRecipient(walkIn, tabs: [signHere])
        .transactionId("order-4711")                    // your id: composing again with it is a no-op
        .build()
    let envelopeId = try await node.compose(envelope, mode: .offline)

    // 5. Sign. A SyntheticSigner simulates the person; an app passes its own SignerDriver.
    let outcome = try await node.resumeSigning(envelopeId: envelopeId, driver: SyntheticSigner(seed: 42))
    guard case .completed(let signed, let sequence?) = outcome else { return nil }
    print("signed by \(signed), queued for sync as item \(sequence)")

    // 6. Events arrived meanwhile (buffered): wait for the completion notice.
    for await event in events {
        if case .signingCompleted(let done) = event {
            print("completed: local id \(done.envelope.localId), transaction \(done.envelope.transactionId)")
            break
        }
    }

    // 7. What the sync engine pushes: numbered, Ed25519-signed canonical payloads, in order.
    let item = try await node.pendingOutboxItems().first
    try await node.close()
    return item
}
// END EXAMPLE

@Suite("docs/embedding.md")
struct EmbeddingExampleTests {
    @Test("the example in docs/embedding.md is this file's code, verbatim")
    func docMatchesCode() throws {
        let example = try DocExample.compare("embedding", in: "docs/embedding.md", file: #filePath)
        #expect(example.shown == example.code)
    }

    @Test("the example runs")
    func runs() async throws {
        let directory = try TempDirectory()
        let item = try #require(try await embeddingExample(storePath: directory.storePath))
        #expect(item.sequence == 1)
        #expect(item.envelope.transactionId == "order-4711")
        let payload = try item.decodedPayload()
        #expect(payload.signatures.count == 1)
        // The node closed; the store keeps the item for the next run.
        let reopened = try await DeviceNode.open(configuration: DeviceConfiguration(storePath: directory.storePath),
                                                 accountService: InMemoryAccountService())
        #expect(try await reopened.pendingOutboxItems() == [item])
        #expect(item.hasValidSignature(publicKey: reopened.publicKey))
    }
}
