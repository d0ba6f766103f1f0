import Envelopes
import Foundation

extension REST.EnvelopeDefinition {
    /// The most documents, recipients and tabs one envelope may hold over REST.
    static let maxDocuments = 50
    static let maxRecipients = 100
    static let maxTabs = 1000

    /// DocuSign's default tab sizes, in points, where the definition gives none.
    static func defaultSize(_ type: TabType) -> (width: Double, height: Double) {
        switch type {
        case .signHere: (120, 44)
        case .initialHere: (60, 32)
        case .checkbox, .radio: (14, 14)
        default: (140, 18)
        }
    }

    /// The envelope this definition describes, checked by the envelope model's own rules; what
    /// this server does not serve yet is refused by name (docs/rest-api.md).
    /// The status the envelope is created with: `sent`, or `created` (a draft; DocuSign's default).
    func creationStatus() throws(RESTRoutes.Failure) -> String {
        let status = (status ?? "created").lowercased()
        guard status == "sent" || status == "created" else {
            throw .badBody("status \"\(status)\" cannot be set at creation: give \"sent\" or \"created\" (a draft)")
        }
        return status
    }

    func envelope(transactionID: String, at now: Date) throws(RESTRoutes.Failure) -> Envelope {
        if templateId != nil || compositeTemplates != nil { throw .unsupported("envelopes from templates (templateId, compositeTemplates) are not served yet") }
        if let groups = recipients {
            for (name, list) in [
                ("inPersonSigners", groups.inPersonSigners), ("agents", groups.agents), ("editors", groups.editors),
                ("intermediaries", groups.intermediaries), ("witnesses", groups.witnesses),
            ] where !(list ?? []).isEmpty {
                throw .unsupported("\(name) are not served over REST yet; signers, carbonCopies and certifiedDeliveries are")
            }
        }
        let documents = self.documents ?? []
        guard !documents.isEmpty else {
            throw RESTRoutes.Failure(
                status: .badRequest, code: "ENVELOPE_IS_INCOMPLETE",
                message: "The Envelope is not Complete. A Complete Envelope Requires Documents, Recipients, Tabs, and a Subject Line.")
        }
        guard documents.count <= Self.maxDocuments else { throw .badBody("at most \(Self.maxDocuments) documents") }
        var builder = EnvelopeBuilder().envelopeName(emailSubject ?? "").emailSubject(emailSubject ?? "").emailMessage(emailBlurb ?? "")
            .transactionId(transactionID)
        for (index, document) in documents.enumerated() {
            let id = document.documentId?.value ?? ""
            if document.remoteUrl != nil { throw .unsupported("document \(id): remoteUrl is not served; send documentBase64") }
            if let kind = document.fileExtension?.lowercased(), kind != "pdf" {
                throw RESTRoutes.Failure(
                    status: .badRequest, code: "FORMAT_CONVERSION_ERROR",
                    message: "document \(id): only PDF documents are served (fileExtension \"\(kind)\")")
            }
            guard let base64 = document.documentBase64, let bytes = Data(base64Encoded: base64, options: .ignoreUnknownCharacters) else {
                throw .badBody("documents[\(index)] (documentId \(id)): documentBase64 is missing or not base64")
            }
            do {
                builder = builder.addDocument(try DocumentBuilder().documentId(id).name(document.name ?? "").pdfBytes(bytes).build())
            } catch {
                throw Self.failure(error)
            }
        }
        let groups = recipients ?? REST.EnvelopeDefinition.RecipientGroups()
        let all: [(RecipientType, RecipientDefinition)] =
            (groups.signers ?? []).map { (.signer, $0) } + (groups.carbonCopies ?? []).map { (.carbonCopy, $0) }
            + (groups.certifiedDeliveries ?? []).map { (.certifiedDelivery, $0) }
        guard all.count <= Self.maxRecipients else { throw .badBody("at most \(Self.maxRecipients) recipients") }
        var tabCount = 0
        for (type, definition) in all {
            let recipientID = definition.recipientId?.value ?? ""
            var recipient = RecipientBuilder(type: type).recipientId(recipientID).name(definition.name ?? "").email(definition.email ?? "")
            if let order = definition.routingOrder {
                guard let number = Int(order.value) else { throw .badBody("recipient \(recipientID): routingOrder \"\(order.value)\" is not a number") }
                recipient = recipient.routingOrder(number)
            }
            if let client = definition.clientUserId, !client.isEmpty { recipient = recipient.clientUserId(client) }
            var tabs: [Tab] = []
            let given = definition.tabs
            for (type, list) in [
                (TabType.signHere, given?.signHereTabs), (.initialHere, given?.initialHereTabs), (.dateSigned, given?.dateSignedTabs),
                (.fullName, given?.fullNameTabs), (.text, given?.textTabs), (.checkbox, given?.checkboxTabs), (.company, given?.companyTabs),
                (.title, given?.titleTabs),
            ] {
                for tab in list ?? [] {
                    tabCount += 1
                    guard tabCount <= Self.maxTabs else { throw .badBody("at most \(Self.maxTabs) tabs") }
                    tabs.append(try Self.tab(tab, type: type, recipientID: recipientID))
                }
            }
            do {
                builder = builder.addRecipient(try recipient.build(), tabs: tabs)
            } catch {
                throw Self.failure(error)
            }
        }
        do {
            var envelope = try builder.build(envelopeId: UUID().uuidString, createdAt: now)
            try envelope.apply(.compose, at: now)
            try envelope.apply(.queueForSync, at: now)
            return envelope
        } catch let error as EnvelopeValidationError {
            throw Self.failure(error)
        } catch {
            throw .badBody("the envelope cannot be sent: \(error)")
        }
    }

    static func tab(_ tab: TabDefinition, type: TabType, recipientID: String) throws(RESTRoutes.Failure) -> Tab {
        if let anchor = tab.anchorString, !anchor.isEmpty {
            throw .unsupported("anchor tabs (anchorString \"\(anchor)\") are not served yet; give documentId, pageNumber, xPosition and yPosition")
        }
        func number(_ text: RESTText?, _ name: String, default value: Double? = nil) throws(RESTRoutes.Failure) -> Double {
            guard let text else {
                if let value { return value }
                throw .badBody("a \(type.rawValue) tab of recipient \(recipientID) has no \(name)")
            }
            guard let number = Double(text.value), number.isFinite else {
                throw .badBody("a \(type.rawValue) tab of recipient \(recipientID): \(name) \"\(text.value)\" is not a number")
            }
            return number
        }
        let size = defaultSize(type)
        let page = try number(tab.pageNumber, "pageNumber")
        guard page >= 1, page <= 100_000, page == page.rounded() else {
            throw RESTRoutes.Failure(status: .badRequest, code: "TAB_PAGENUMBER_IS_NOT_IN_DOCUMENT", message: "pageNumber \(page) is not a page of the document")
        }
        var builder = TabBuilder(type: type).documentId(tab.documentId?.value ?? "").recipientId(recipientID).pageNumber(Int(page))
            .frame(
                x: try number(tab.xPosition, "xPosition"), y: try number(tab.yPosition, "yPosition"),
                width: try number(tab.width, "width", default: size.width), height: try number(tab.height, "height", default: size.height))
        if let id = tab.tabId { builder = builder.tabId(id) }
        if let label = tab.tabLabel { builder = builder.label(label) }
        if let name = tab.name { builder = builder.name(name) }
        if let value = tab.value { builder = builder.value(value) }
        if tab.optional?.value == "true" || tab.required?.value == "false" { builder = builder.optional() }
        if tab.locked?.value == "true" { builder = builder.locked() }
        if tab.selected?.value == "true" { builder = builder.selected() }
        do {
            return try builder.build()
        } catch {
            throw failure(error)
        }
    }

    /// The envelope model's refusal as DocuSign names it.
    static func failure(_ error: EnvelopeValidationError) -> RESTRoutes.Failure {
        let code: String =
            switch error.code {
            case .noDocuments, .noRecipients, .signerWithoutTabs: "ENVELOPE_IS_INCOMPLETE"
            case .documentNotPDF, .documentUnreadable: "FORMAT_CONVERSION_ERROR"
            case .invalidEmail: "INVALID_EMAIL_ADDRESS_FOR_RECIPIENT"
            case .tabPageOutOfRange: "TAB_PAGENUMBER_IS_NOT_IN_DOCUMENT"
            default: "INVALID_REQUEST_BODY"
            }
        return RESTRoutes.Failure(status: .badRequest, code: code, message: "\(error.field): \(error.message)")
    }
}

extension RESTRoutes.Failure {
    /// A part of DocuSign's API this server does not serve yet.
    static func unsupported(_ message: String) -> Self {
        Self(status: .badRequest, code: "INVALID_REQUEST_BODY", message: "\(message) (docs/rest-api.md)")
    }
}
