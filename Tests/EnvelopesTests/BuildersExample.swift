import Envelopes
import FleetTesting
import Foundation
import Testing

/// docs/envelopes.md's "Builders" (the doc shows this function's body, up to the envelope).
func buildersExample() throws -> Envelope {
    // BEGIN EXAMPLE builders
    let document = try DocumentBuilder().documentId("doc1").name("NDA")
        .pdfBytes(SamplePDF.make(pages: 2)).build()
    let signer = try RecipientBuilder(type: .inPersonSigner).recipientId("1")
        .hostName("Ann Host").hostEmail("ann@example.com").signerName("Bob Walk-in").build()
    let signHere = try TabBuilder(type: .signHere).documentId("doc1").recipientId("1")
        .pageNumber(2).frame(x: 100, y: 300, width: 40, height: 50).build()
    let envelope = try EnvelopeBuilder().envelopeName("NDA").emailSubject("Please sign")
        .addDocument(document).addRecipient(signer, tabs: [signHere])
        .customFields(try CustomFieldsBuilder().addText(name: "case", value: "42").build())
        .build()
    // END EXAMPLE
    return envelope
}

@Suite("docs/envelopes.md: builders")
struct BuildersExampleTests {
    @Test("the builders example in docs/envelopes.md is this file's code, verbatim")
    func docMatchesCode() throws {
        let example = try DocExample.compare("builders", in: "docs/envelopes.md", file: #filePath)
        #expect(example.shown == example.code)
    }

    @Test("the example builds a valid envelope with what it names")
    func runs() throws {
        let envelope = try buildersExample()
        #expect(envelope.validate().isEmpty)
        #expect(envelope.documents.map(\.documentId) == ["doc1"])
        #expect(envelope.documents.first?.pageCount == 2)
        #expect(envelope.recipients.map(\.recipientId) == ["1"])
        #expect(envelope.recipients.first?.name == "Bob Walk-in" && envelope.recipients.first?.hostName == "Ann Host")
        #expect(envelope.tabs.map(\.pageNumber) == [2])
        #expect(envelope.tabs.first?.recipientId == "1")
        #expect(envelope.customFields.text.map(\.name) == ["case"])
        #expect(envelope.customFields.text.map(\.value) == ["42"])
    }
}
