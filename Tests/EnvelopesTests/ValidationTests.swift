import FleetTesting
import Foundation
import Testing
@testable import Envelopes

struct ValidationCase: CustomTestStringConvertible, Sendable {
    let name: String
    let code: EnvelopeValidationError.Code
    let field: String
    let change: @Sendable (inout Envelope) -> Void

    init(_ name: String, _ code: EnvelopeValidationError.Code, _ field: String, _ change: @escaping @Sendable (inout Envelope) -> Void) {
        self.name = name
        self.code = code
        self.field = field
        self.change = change
    }

    var testDescription: String { name }
}

let long101 = String(repeating: "x", count: 101)
let longEmail = String(repeating: "a", count: 89) + "@example.com" // 101 characters

let validationCases: [ValidationCase] = [
    .init("no documents", .noDocuments, "documents") { $0.documents = []; $0.tabs = [] ; $0.recipients = [recipient("9", .carbonCopy)] },
    .init("no recipients", .noRecipients, "recipients") { $0.recipients = []; $0.tabs = [] },
    .init("tab for unknown recipient", .tabUnknownRecipient, "tabs[2].recipientId") { $0.tabs.append(Fixture.tab(recipient: "nobody")) },
    .init("tab on unknown document", .tabUnknownDocument, "tabs[2].documentId") { $0.tabs.append(Fixture.tab(recipient: "1", document: "dX")) },
    .init("page past the end", .tabPageOutOfRange, "tabs[1].pageNumber") { $0.tabs[1].pageNumber = 3 },
    .init("page zero", .tabPageOutOfRange, "tabs[0].pageNumber") { $0.tabs[0].pageNumber = 0 },
    .init("signer without tabs", .signerWithoutTabs, "recipients[3].tabs") { $0.recipients.append(recipient("4")) },
    .init("in-person signer without tabs", .signerWithoutTabs, "recipients[0].tabs") { $0.tabs.removeFirst() },
    .init("document not a PDF", .documentNotPDF, "documents[0].pdfBytes") { $0.documents[0].pdfBytes = Data("hello world".utf8) },
    .init("PDF without page tree", .documentUnreadable, "documents[0].pdfBytes") {
        $0.documents[0].pdfBytes = Data("%PDF-1.4\nnothing to see here\n%%EOF\n".utf8)
    },
    .init("truncated PDF", .documentUnreadable, "documents[0].pdfBytes") { $0.documents[0].pdfBytes = Fixture.pdf2.prefix(300) },
    .init("page count disagrees with PDF", .documentUnreadable, "documents[0].pageCount") { $0.documents[0].pageCount = 5 },
    .init("two radios selected in a group", .radioGroupMultipleSelected, "tabs[3].selected") {
        $0.tabs.append(Fixture.tab(.radio, recipient: "1", group: "g", selected: true))
        $0.tabs.append(Fixture.tab(.radio, recipient: "1", group: "g", selected: true))
    },
    .init("radio without group", .radioWithoutGroup, "tabs[2].groupName") { $0.tabs.append(Fixture.tab(.radio, recipient: "1")) },
    .init("envelope name too long", .tooLong, "name") { $0.name = long101 },
    .init("email subject too long", .tooLong, "emailSubject") { $0.emailSubject = long101 },
    .init("email message too long", .tooLong, "emailMessage") { $0.emailMessage = String(repeating: "m", count: 10_001) },
    .init("document name too long", .tooLong, "documents[0].name") { $0.documents[0].name = long101 },
    .init("document id too long", .tooLong, "documents[0].documentId") {
        $0.documents[0].documentId = long101
        $0.tabs = $0.tabs.map { var t = $0; t.documentId = long101; return t }
    },
    .init("recipient name too long", .tooLong, "recipients[1].name") { $0.recipients[1].name = long101 },
    .init("recipient email too long", .tooLong, "recipients[1].email") { $0.recipients[1].email = longEmail },
    .init("host name too long", .tooLong, "recipients[0].hostName") { $0.recipients[0].hostName = long101 },
    .init("host email too long", .tooLong, "recipients[0].hostEmail") { $0.recipients[0].hostEmail = longEmail },
    .init("tab name too long", .tooLong, "tabs[0].name") { $0.tabs[0].name = long101 },
    .init("tab label too long", .tooLong, "tabs[0].label") { $0.tabs[0].label = long101 },
    .init("custom field name too long", .tooLong, "customFields.text[0].name") { $0.customFields.text[0].name = long101 },
    .init("client user id too long", .tooLong, "recipients[1].clientUserId") { $0.recipients[1].clientUserId = long101 },
    .init("duplicate document id", .duplicateId, "documents[1].documentId") { $0.documents.append(Fixture.document()) },
    .init("duplicate recipient id", .duplicateId, "recipients[3].recipientId") { $0.recipients.append(recipient("2")) },
    .init("duplicate tab id", .duplicateId, "tabs[1].tabId") { $0.tabs[0].tabId = "t"; $0.tabs[1].tabId = "t" },
    .init("duplicate custom field name", .duplicateId, "customFields.list[0].name") { $0.customFields.list[0].name = "case" },
    .init("routing order zero", .invalidRoutingOrder, "recipients[1].routingOrder") { $0.recipients[1].routingOrder = 0 },
    .init("routing order negative", .invalidRoutingOrder, "recipients[2].routingOrder") { $0.recipients[2].routingOrder = -1 },
    .init("signer without email", .missingValue, "recipients[1].email") { $0.recipients[1].email = nil },
    .init("signer with blank name", .missingValue, "recipients[1].name") { $0.recipients[1].name = "  " },
    .init("malformed email", .invalidEmail, "recipients[2].email") { $0.recipients[2].email = "carl.example.com" },
    .init("in-person without host name", .missingValue, "recipients[0].hostName") { $0.recipients[0].hostName = nil },
    .init("in-person without host email", .missingValue, "recipients[0].hostEmail") { $0.recipients[0].hostEmail = "" },
    .init("tab for a carbon copy", .tabRecipientCannotSign, "tabs[2].recipientId") { $0.tabs.append(Fixture.tab(recipient: "3")) },
    .init("zero-size frame", .tabInvalidFrame, "tabs[0].frame") { $0.tabs[0].frame.width = 0 },
    .init("negative origin", .tabInvalidFrame, "tabs[1].frame") { $0.tabs[1].frame.y = -1 },
    .init("NaN frame", .tabInvalidFrame, "tabs[0].frame") { $0.tabs[0].frame.x = .nan },
    .init("scale too big", .tabInvalidScale, "tabs[0].scale") { $0.tabs[0].scale = 2.5 },
    .init("list value not an item", .listValueNotInItems, "customFields.list[0].value") { $0.customFields.list[0].value = "APAC" },
    .init("empty transaction id", .missingValue, "transactionId") { $0.transactionId = "" },
    .init("tab without document id", .missingValue, "tabs[0].documentId") { $0.tabs[0].documentId = "" },
]

@Suite("Envelope validation")
struct ValidationTests {
    @Test func fixtureIsValid() {
        #expect(Fixture.envelope().validate() == [])
    }

    @Test(arguments: validationCases)
    func eachRuleNamesItsField(_ rule: ValidationCase) throws {
        var envelope = Fixture.envelope()
        rule.change(&envelope)
        let first = try #require(envelope.validate().first, "expected an error for \(rule.name)")
        #expect(first.code == rule.code, "\(first)")
        #expect(first.field == rule.field, "\(first)")
        #expect(!first.message.isEmpty)
    }

    @Test func limitsAreInclusiveAt100() {
        var envelope = Fixture.envelope()
        let hundred = String(repeating: "n", count: 100)
        envelope.name = hundred
        envelope.recipients[1].name = hundred
        envelope.recipients[1].email = String(repeating: "a", count: 88) + "@example.com"
        #expect(envelope.recipients[1].email?.count == 100)
        envelope.recipients[0].hostName = hundred
        envelope.tabs[0].name = hundred
        #expect(envelope.validate() == [])
    }

    @Test func inPersonSignerNeedsNoEmailAndRadiosInOtherGroupsAreFine() {
        var envelope = Fixture.envelope()
        envelope.recipients[0].email = nil
        envelope.tabs.append(Fixture.tab(.radio, recipient: "1", group: "a", selected: true))
        envelope.tabs.append(Fixture.tab(.radio, recipient: "1", group: "b", selected: true))
        envelope.tabs.append(Fixture.tab(.radio, recipient: "2", group: "a", selected: true))
        envelope.tabs.append(Fixture.tab(.radio, recipient: "1", group: "a", selected: false))
        #expect(envelope.validate() == [])
    }

    @Test func validateReportsEveryErrorInOrder() {
        var envelope = Fixture.envelope()
        envelope.name = long101
        envelope.recipients[1].routingOrder = 0
        envelope.tabs[0].pageNumber = 9
        let fields = envelope.validate().map(\.field)
        #expect(fields == ["name", "recipients[1].routingOrder", "tabs[0].pageNumber"])
    }

    @Test func envelopeBuilderThrowsTheFirstError() throws {
        let document = try DocumentBuilder().documentId("d1").name("NDA").pdfBytes(SamplePDF.make(pages: 1)).build()
        let signer = try RecipientBuilder(type: .signer).recipientId("1").signerName("Jane").signerEmail("jane@example.com").build()
        let tab = try TabBuilder(type: .signHere).documentId("d1").recipientId("1").pageNumber(2)
            .frame(x: 1, y: 1, width: 10, height: 10).build()
        let builder = EnvelopeBuilder().envelopeName("NDA").addDocument(document).addRecipient(signer, tabs: [tab])
        #expect(builder.validate().map(\.field) == ["tabs[0].pageNumber"])
        let error = #expect(throws: EnvelopeValidationError.self) { try builder.build() }
        #expect(error?.code == .tabPageOutOfRange)
        #expect(error?.message.contains("1 pages") == true)

        let fixed = EnvelopeBuilder().envelopeName("NDA").emailSubject("s").emailMessage("m")
            .addDocument(document).addRecipient(signer).addTab(try TabBuilder(type: .signHere)
                .documentId("d1").recipientId("1").frame(x: 1, y: 1, width: 10, height: 10).build())
            .customFields(try CustomFieldsBuilder().addText(name: "a", value: "b").addList(name: "c", value: "", items: ["x"]).build())
            .transactionId("tx").templateId("tpl")
        let envelope = try fixed.build(envelopeId: "e9", createdAt: Fixture.created)
        #expect(envelope.envelopeId == "e9")
        #expect(envelope.transactionId == "tx")
        #expect(envelope.templateId == "tpl")
        #expect(envelope.localState == .draft)
        #expect(envelope.status == .created)
        #expect(envelope.documents[0].pageCount == 1)
        #expect(envelope.lastModifiedAt == Fixture.created)
        #expect(envelope.customFields.list.count == 1)
    }

    @Test func defaultTransactionIdsAreUnique() throws {
        let envelope = Fixture.envelope()
        var builder = EnvelopeBuilder().addDocument(envelope.documents[0])
        for r in envelope.recipients { builder = builder.addRecipient(r) }
        for t in envelope.tabs { builder = builder.addTab(t) }
        let a = try builder.build()
        let b = try builder.build()
        #expect(a.transactionId != b.transactionId)
        #expect(a.envelopeId != b.envelopeId)
    }
}

@Suite("Part builders")
struct PartBuilderTests {
    struct ReadFailure: Error {}

    @Test func documentBuilderRules() throws {
        let pdf = SamplePDF.make(pages: 3)
        let ok = try DocumentBuilder().documentId("d").name("n").pdfBytes(pdf).build()
        #expect(ok.pageCount == 3)

        func field(_ b: DocumentBuilder) -> String? {
            do { _ = try b.build(); return nil } catch { return "\(error.code) \(error.field)" }
        }
        #expect(field(DocumentBuilder().name("n").pdfBytes(pdf)) == "value.missing documentId")
        #expect(field(DocumentBuilder().documentId("d").pdfBytes(pdf)) == "value.missing name")
        #expect(field(DocumentBuilder().documentId("d").name(long101).pdfBytes(pdf)) == "value.tooLong name")
        #expect(field(DocumentBuilder().documentId("d").name("n")) == "value.missing pdfBytes")
        #expect(field(DocumentBuilder().documentId("d").name("n").pdfBytes(Data("GIF89a".utf8))) == "document.notPDF pdfBytes")
        #expect(field(DocumentBuilder().documentId("d").name("n").pdfBytes(SamplePDF.make(pages: 0))) == "document.unreadable pdfBytes")
        #expect(field(DocumentBuilder().documentId("d").name("n").filePath("/x.pdf")) == "value.missing pdfBytes")
    }

    @Test func documentBuilderReadsFilesThroughTheReader() throws {
        let pdf = SamplePDF.make(pages: 4)
        let doc = try DocumentBuilder().documentId("d").name("n").filePath("/docs/a.pdf")
            .build(readingFilesWith: { path in
                #expect(path == "/docs/a.pdf")
                return pdf
            })
        #expect(doc.pageCount == 4)
        #expect(doc.sourcePath == "/docs/a.pdf")
        let error = #expect(throws: EnvelopeValidationError.self) {
            try DocumentBuilder().documentId("d").name("n").filePath("/missing.pdf").build(readingFilesWith: { _ in throw ReadFailure() })
        }
        #expect(error?.code == .documentUnreadable)
        #expect(error?.field == "filePath")
    }

    @Test func recipientBuilderRules() throws {
        let host = try RecipientBuilder(type: .inPersonSigner).recipientId("1").hostName("Ann").hostEmail("ann@example.com")
            .signerName("Bob").routingOrder(2).build()
        #expect(host.type == .inPersonSigner)
        #expect(host.routingOrder == 2)
        #expect(host.email == nil)
        let embedded = try RecipientBuilder(type: .signer).recipientId("2").name("C").email("c@example.com").clientUserId("u1").build()
        #expect(embedded.isEmbedded)

        func field(_ b: RecipientBuilder) -> String? {
            do { _ = try b.build(); return nil } catch { return error.field }
        }
        #expect(field(RecipientBuilder(type: .signer).name("a").email("a@example.com")) == "recipientId")
        #expect(field(RecipientBuilder(type: .signer).recipientId("1").name("a").email("bad")) == "email")
        #expect(field(RecipientBuilder(type: .carbonCopy).recipientId("1").name("a")) == "email")
        #expect(field(RecipientBuilder(type: .inPersonSigner).recipientId("1").name("a").hostEmail("h@example.com")) == "hostName")
        #expect(field(RecipientBuilder(type: .signer).recipientId("1").name("a").email("a@example.com").routingOrder(0)) == "routingOrder")
    }

    @Test func tabBuilderRules() throws {
        let base = TabBuilder(type: .checkbox).documentId("d").recipientId("r").frame(x: 0, y: 0, width: 10, height: 10)
        let tab = try base.tabId("t1").label("L").name("N").value("v").groupName("g").scale(1.5).locked().optional().selected().pageNumber(2).build()
        #expect(tab == Tab(type: .checkbox, tabId: "t1", documentId: "d", recipientId: "r", pageNumber: 2,
                           frame: TabFrame(x: 0, y: 0, width: 10, height: 10), label: "L", name: "N", value: "v",
                           groupName: "g", scale: 1.5, locked: true, optional: true, selected: true))
        func field(_ b: TabBuilder) -> String? {
            do { _ = try b.build(); return nil } catch { return error.field }
        }
        #expect(field(TabBuilder(type: .signHere).documentId("d").recipientId("r")) == "frame")
        #expect(field(base.documentId("")) == "documentId")
        #expect(field(base.recipientId("")) == "recipientId")
        #expect(field(base.pageNumber(0)) == "pageNumber")
        #expect(field(base.scale(0.4)) == "scale")
        #expect(field(TabBuilder(type: .radio).documentId("d").recipientId("r").frame(x: 0, y: 0, width: 1, height: 1)) == "groupName")
    }

    @Test func customFieldsBuilderRules() {
        func field(_ b: CustomFieldsBuilder) -> String? {
            do { _ = try b.build(); return nil } catch { return error.field }
        }
        #expect(field(CustomFieldsBuilder().addText(name: "a", value: "1").addList(name: "b", value: "x", items: ["x"])) == nil)
        #expect(field(CustomFieldsBuilder().addText(name: "", value: "1")) == "text[0].name")
        #expect(field(CustomFieldsBuilder().addText(name: "a", value: "1").addText(name: "a", value: "2")) == "text[1].name")
        #expect(field(CustomFieldsBuilder().addList(name: "b", value: "y", items: ["x"])) == "list[0].value")
    }

    @Test func errorsDescribeThemselvesAndEncodeTheirCode() throws {
        let error = EnvelopeValidationError(code: .tabUnknownDocument, field: "tabs[0].documentId", message: "m")
        #expect(error.description == "tabs[0].documentId: m [tab.unknownDocument]")
        let json = String(decoding: try JSONEncoder().encode(error.code), as: UTF8.self)
        #expect(json == "\"tab.unknownDocument\"")
        #expect(try JSONDecoder().decode(EnvelopeValidationError.self, from: JSONEncoder().encode(error)) == error)
    }

    @Test func envelopeRoundTripsThroughCodable() throws {
        var envelope = Fixture.envelope()
        envelope.setStatus(.declined, forRecipient: "1", at: Fixture.created, declineReason: "no")
        let decoded = try JSONDecoder().decode(Envelope.self, from: JSONEncoder().encode(envelope))
        #expect(decoded == envelope)
        #expect(decoded.recipient(id: "1")?.declineReason == "no")
        #expect(decoded.document(id: "d1")?.pageCount == 2)
        #expect(decoded.tabs(forRecipient: "2").count == 1)
        let changed = envelope.setStatus(.signed, forRecipient: "nobody", at: Fixture.created)
        #expect(!changed)
    }
}

@Suite("Validation fuzz")
struct ValidationFuzzTests {
    @Test func randomEnvelopesNeverCrashAndValidateIsDeterministic() {
        let seed = testSeed("validation fuzz")
        var rng = SeededGenerator(seed: seed)
        let strings = ["", " ", "a", "1", "d1", "2", "x@y.z", "bad@", "é✍️", long101, String(repeating: "a", count: 100)]
        let ints = [Int.min, -1, 0, 1, 2, 3, 1000, Int.max]
        let doubles = [-.infinity, -1, 0, 0.4, 0.5, 1, 2, 2.1, .nan, .infinity, 1e300]
        for round in 0..<500 {
            var envelope = Fixture.envelope()
            for _ in 0..<Int.random(in: 1...6, using: &rng) {
                let s = strings.randomElement(using: &rng)!
                let i = ints.randomElement(using: &rng)!
                let d = doubles.randomElement(using: &rng)!
                switch Int.random(in: 0..<14, using: &rng) {
                case 0: envelope.name = s
                case 1: envelope.recipients[Int.random(in: 0..<3, using: &rng)].email = s
                case 2: envelope.recipients[Int.random(in: 0..<3, using: &rng)].routingOrder = i
                case 3: envelope.recipients[Int.random(in: 0..<3, using: &rng)].recipientId = s
                case 4: envelope.tabs[Int.random(in: 0..<2, using: &rng)].pageNumber = i
                case 5: envelope.tabs[Int.random(in: 0..<2, using: &rng)].frame.width = d
                case 6: envelope.tabs[Int.random(in: 0..<2, using: &rng)].scale = d
                case 7: envelope.tabs[Int.random(in: 0..<2, using: &rng)].recipientId = s
                case 8: envelope.tabs[Int.random(in: 0..<2, using: &rng)].documentId = s
                case 9: envelope.documents[0].pageCount = i
                case 10: envelope.recipients[Int.random(in: 0..<3, using: &rng)].type = RecipientType.allCases.randomElement(using: &rng)!
                case 11: envelope.tabs.append(Fixture.tab(.radio, recipient: s, group: Bool.random(using: &rng) ? s : nil, selected: true))
                case 12: envelope.customFields.list[0].value = s
                default: envelope.documents[0].pdfBytes = Data(envelope.documents[0].pdfBytes.prefix(max(0, min(i, 5000))))
                }
            }
            let errors = envelope.validate()
            for error in errors {
                #expect(!error.field.isEmpty && !error.message.isEmpty, "seed \(seed) round \(round)")
            }
            // Validation is deterministic.
            #expect(envelope.validate() == errors, "seed \(seed) round \(round)")
        }
    }
}

@Suite struct BlankTextTests {
    /// `isBlank` must agree with Foundation's trimming of `.whitespacesAndNewlines` for every
    /// scalar of the Basic Multilingual Plane, alone and beside a letter.
    @Test func blankIsWhatFoundationTrimsAway() {
        var disagreements: [String] = []
        for value in UInt32(0)...0xFFFF {
            guard let scalar = Unicode.Scalar(value) else { continue }
            for text in [String(scalar), " \(scalar)\t", "a\(scalar)"] {
                let foundation = text.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty
                if EnvelopeValidator.isBlank(text) != foundation { disagreements.append(String(value, radix: 16)) }
            }
        }
        #expect(disagreements.isEmpty, "scalars where isBlank differs from Foundation: \(disagreements.prefix(20))")
        #expect(EnvelopeValidator.isBlank(nil))
        #expect(EnvelopeValidator.isBlank(""))
    }
}
