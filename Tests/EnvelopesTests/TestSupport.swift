import FleetTesting
import Foundation
@testable import Envelopes



enum Fixture {
    static let created = Date(timeIntervalSince1970: 1_800_000_000)
    static let pdf2 = SamplePDF.make(pages: 2, title: "Fixture")

    static func document(id: String = "d1", pages: Int = 2) -> Document {
        let bytes = pages == 2 ? pdf2 : SamplePDF.make(pages: pages)
        return Document(documentId: id, name: "Document \(id)", pdfBytes: bytes, pageCount: pages)
    }

    static func tab(
        _ type: TabType = .signHere, recipient: String, document: String = "d1", page: Int = 1,
        group: String? = nil, selected: Bool = false, id: String? = nil
    ) -> Tab {
        Tab(type: type, tabId: id, documentId: document, recipientId: recipient, pageNumber: page,
            frame: TabFrame(x: 100, y: 300, width: 40, height: 50), groupName: group, selected: selected)
    }

    /// A valid envelope: in-person signer "1" (order 1), remote signer "2" (order 2), CC "3" (order 3).
    static func envelope() -> Envelope {
        Envelope(
            envelopeId: "e1", name: "NDA", emailSubject: "Please sign", emailMessage: "Hi",
            documents: [document()],
            recipients: [
                Recipient(recipientId: "1", type: .inPersonSigner, name: "Walk In", routingOrder: 1,
                          hostName: "Host", hostEmail: "host@example.com"),
                Recipient(recipientId: "2", type: .signer, name: "Jane Wood", email: "jane@example.com", routingOrder: 2),
                Recipient(recipientId: "3", type: .carbonCopy, name: "Carl Copy", email: "carl@example.com", routingOrder: 3),
            ],
            tabs: [tab(recipient: "1"), tab(.text, recipient: "2", page: 2)],
            customFields: CustomFields(
                text: [TextCustomField(name: "case", value: "42")],
                list: [ListCustomField(name: "region", value: "EU", items: ["EU", "US"])]),
            transactionId: "tx-1", createdAt: created)
    }
}

func recipient(
    _ id: String, _ type: RecipientType = .signer, order: Int = 1, email: String? = nil,
    status: RecipientStatus = .created
) -> Recipient {
    Recipient(recipientId: id, type: type, name: "R\(id)", email: email ?? "r\(id)@example.com",
              routingOrder: order, hostName: type == .inPersonSigner ? "Host" : nil,
              hostEmail: type == .inPersonSigner ? "host@example.com" : nil, status: status)
}
