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

    /// The recipients this server serves over REST, by type, in the definition's order.
    var servedRecipients: [(RecipientType, RecipientDefinition)] {
        let groups = recipients ?? RecipientGroups()
        return (groups.signers ?? []).map { (.signer, $0) } + (groups.inPersonSigners ?? []).map { (.inPersonSigner, $0) }
            + (groups.carbonCopies ?? []).map { (.carbonCopy, $0) } + (groups.certifiedDeliveries ?? []).map { (.certifiedDelivery, $0) }
    }

    /// A recipient of the definition, built: an in-person signer with its host (`hostName`,
    /// `hostEmail`) and its signer (`signerName`, else `name`; `signerEmail`, else `email`).
    static func recipient(_ type: RecipientType, _ definition: RecipientDefinition) throws(RESTRoutes.Failure) -> RecipientBuilder {
        let recipientID = definition.recipientId?.value ?? ""
        var recipient = RecipientBuilder(type: type).recipientId(recipientID).routingOrder(try routingOrder(definition))
        if type == .inPersonSigner {
            recipient = recipient.hostName(definition.hostName ?? "").hostEmail(definition.hostEmail ?? "")
                .signerName(definition.signerName ?? definition.name ?? "")
            if let email = definition.signerEmail ?? definition.email, !email.isEmpty { recipient = recipient.signerEmail(email) }
        } else {
            recipient = recipient.name(definition.name ?? "").email(definition.email ?? "")
        }
        if let client = definition.clientUserId, !client.isEmpty { recipient = recipient.clientUserId(client) }
        return recipient
    }

    /// Whether any tab is placed by an anchor string (its documents' text must then be read).
    var hasAnchorTabs: Bool {
        servedRecipients.contains { _, recipient in
            (recipient.tabs?.byType ?? []).contains { _, tabs in tabs.contains { !($0.anchorString ?? "").isEmpty } }
        }
    }

    /// The envelope this definition describes. `anchors` holds the words of each document (by
    /// `documentId`, in the definition's order) when a tab is placed by an anchor string. An
    /// envelope from a template is made by ``envelope(from:composition:transactionID:at:)``.
    func envelope(
        transactionID: String, at now: Date, anchors: [(documentID: String, words: [PDFTextLocator.Word])] = []
    ) throws(RESTRoutes.Failure) -> Envelope {
        if templateId != nil || compositeTemplates != nil { throw .unsupported("envelopes from templates are made from templateId and templateRoles alone") }
        try refuseUnservedRecipients()
        var builder = EnvelopeBuilder().envelopeName(emailSubject ?? "").emailSubject(emailSubject ?? "").emailMessage(emailBlurb ?? "")
            .transactionId(transactionID)
        for document in try builtDocuments() { builder = builder.addDocument(document) }
        let all = servedRecipients
        guard all.count <= Self.maxRecipients else { throw .badBody("at most \(Self.maxRecipients) recipients") }
        var tabCount = 0
        for (type, definition) in all {
            let recipientID = definition.recipientId?.value ?? ""
            let recipient = try Self.recipient(type, definition)
            let tabs = try builtTabs(definition, recipientID: recipientID, anchors: anchors, count: &tabCount)
            do {
                builder = builder.addRecipient(try recipient.build(), tabs: tabs)
            } catch {
                throw Self.failure(error)
            }
        }
        do {
            return try Self.queued(try builder.build(envelopeId: UUID().uuidString, createdAt: now), at: now)
        } catch let error as EnvelopeValidationError {
            throw Self.failure(error)
        } catch let error as RESTRoutes.Failure {
            throw error
        } catch {
            throw .badBody("the envelope cannot be sent: \(error)")
        }
    }

    /// An envelope composed from `template` with this definition's `templateRoles` (who fills
    /// each role; tab values by `tabLabel`), `emailSubject` and `emailBlurb` (replacing the
    /// template's when given), made ready to send.
    ///
    /// `replacement` (a composite template's `document`) takes the place of the template's one
    /// document: its bytes and name, under the template document's id, so the template's tabs fall
    /// on it at their pages and positions (a tab on a page it does not have is refused).
    func envelope(from given: EnvelopeTemplate, replacing replacement: Document? = nil, transactionID: String, at now: Date) throws(RESTRoutes.Failure) -> Envelope {
        guard (documents ?? []).isEmpty, recipients == nil, compositeTemplates == nil else {
            throw .unsupported("an envelope from templateId takes templateRoles, not documents, recipients or compositeTemplates of its own")
        }
        var template = given
        if let replacement {
            guard template.documents.count == 1, let original = template.documents.first else {
                throw .unsupported("a composite template's document replaces a server template's only document; template \(template.templateId) has \(template.documents.count)")
            }
            var carrier = self
            carrier.documents = [replacement]
            guard let built = try carrier.builtDocuments().first else { throw .badBody("the composite template's document could not be read") }
            var document = original
            document.pdfBytes = built.pdfBytes
            document.pageCount = built.pageCount
            document.sourcePath = nil
            document.name = built.name.isEmpty ? original.name : built.name
            template.documents = [document]
        }
        var composition = TemplateComposition(emailSubject: emailSubject, emailMessage: emailBlurb, envelopeName: emailSubject)
        for (index, role) in (templateRoles ?? []).enumerated() {
            guard let name = role.roleName, !name.isEmpty else { throw .badBody("templateRoles[\(index)] has no roleName") }
            guard composition.roles[name] == nil else { throw .badBody("templateRoles: role \"\(name)\" is given twice") }
            composition.roles[name] = RoleAssignment(name: role.name, email: role.email, clientUserId: role.clientUserId?.isEmpty == false ? role.clientUserId : nil)
            for (type, list) in role.tabs?.byType ?? [] {
                for tab in list {
                    guard let label = tab.tabLabel, !label.isEmpty else { throw .badBody("templateRoles[\(index)]: a \(type.rawValue) tab without tabLabel sets no value") }
                    composition.tabValues[label] = type == .checkbox ? (tab.selected?.value ?? tab.value ?? "false") : (tab.value ?? "")
                }
            }
        }
        do {
            return try Self.queued(try template.compose(composition, createdAt: now, transactionId: transactionID), at: now)
        } catch let error as EnvelopeValidationError {
            throw Self.failure(error)
        } catch {
            throw .badBody("the envelope cannot be sent: \(error)")
        }
    }

    /// A definition with one composite template — one server template whose roles its inline
    /// templates' recipients fill by `roleName`, and optionally a `document` that takes the place
    /// of the server template's — as the same envelope asked for by `templateId` and
    /// `templateRoles`, with that document (docs/rest-api.md, "Composite templates"). Nil without
    /// composite templates.
    func flattenedComposite() throws(RESTRoutes.Failure) -> (definition: Self, document: Document?)? {
        guard let composites = compositeTemplates, !composites.isEmpty else { return nil }
        guard templateId == nil, (documents ?? []).isEmpty, recipients == nil, templateRoles == nil else {
            throw .unsupported("compositeTemplates replace templateId, templateRoles, documents and recipients; give them inside the composite template")
        }
        guard composites.count == 1, let composite = composites.first else {
            throw .unsupported("one composite template is served (\(composites.count) given)")
        }
        guard let servers = composite.serverTemplates, servers.count == 1, let server = servers.first?.templateId, !server.isEmpty else {
            throw .unsupported("a composite template is served with exactly one serverTemplates entry naming a templateId")
        }
        guard (composite.inlineTemplates ?? []).allSatisfy({ ($0.documents ?? []).isEmpty }) else {
            throw .unsupported("documents in an inline template (adding to the server template's) are not served yet; a composite template's document replaces the server template's")
        }
        var roles: [TemplateRoleDefinition] = []
        for inline in composite.inlineTemplates ?? [] {
            let groups = inline.recipients ?? RecipientGroups()
            for (name, list) in [("agents", groups.agents), ("editors", groups.editors), ("intermediaries", groups.intermediaries), ("witnesses", groups.witnesses)]
            where !(list ?? []).isEmpty {
                throw .unsupported("\(name) in an inline template are not served")
            }
            for recipient in (groups.signers ?? []) + (groups.inPersonSigners ?? []) + (groups.carbonCopies ?? []) + (groups.certifiedDeliveries ?? []) {
                guard let role = recipient.roleName, !role.isEmpty else {
                    throw .unsupported("an inline template's recipient without a roleName (a recipient of its own) is not served; name the server template's role")
                }
                roles.append(
                    TemplateRoleDefinition(
                        roleName: role, name: recipient.signerName ?? recipient.name, email: recipient.signerEmail ?? recipient.email,
                        clientUserId: recipient.clientUserId, tabs: recipient.tabs))
            }
        }
        var flat = self
        flat.compositeTemplates = nil
        flat.templateId = server
        flat.templateRoles = roles
        return (flat, composite.document)
    }

    /// The template this definition describes (`POST …/templates`): its documents, each
    /// recipient a role (`roleName`, default name and email from `name` and `email`) with its tabs.
    func template(id: String, anchors: [(documentID: String, words: [PDFTextLocator.Word])] = []) throws(RESTRoutes.Failure) -> EnvelopeTemplate {
        try refuseUnservedRecipients()
        guard let name = name?.trimmingCharacters(in: .whitespacesAndNewlines), !name.isEmpty else { throw .badBody("a template needs a name") }
        let all = servedRecipients
        guard all.count <= Self.maxRecipients else { throw .badBody("at most \(Self.maxRecipients) recipients") }
        var roles: [TemplateRole] = []
        var tabs: [Tab] = []
        var tabCount = 0
        for (type, definition) in all {
            let recipientID = definition.recipientId?.value ?? ""
            guard let role = definition.roleName, !role.isEmpty else { throw .badBody("recipient \(recipientID) of a template has no roleName") }
            let name = type == .inPersonSigner ? definition.signerName ?? definition.name : definition.name
            let email = type == .inPersonSigner ? definition.signerEmail ?? definition.email : definition.email
            roles.append(
                TemplateRole(
                    roleName: role, recipientId: recipientID, type: type, routingOrder: try Self.routingOrder(definition),
                    defaultName: name?.isEmpty == false ? name : nil, defaultEmail: email?.isEmpty == false ? email : nil,
                    defaultHostName: definition.hostName?.isEmpty == false ? definition.hostName : nil,
                    defaultHostEmail: definition.hostEmail?.isEmpty == false ? definition.hostEmail : nil))
            tabs += try builtTabs(definition, recipientID: recipientID, anchors: anchors, count: &tabCount)
        }
        return EnvelopeTemplate(
            templateId: id, name: name, folder: folderName?.isEmpty == false ? folderName : nil, lastModified: Date(timeIntervalSince1970: 0),
            emailSubject: emailSubject ?? "", emailMessage: emailBlurb ?? "", documents: try builtDocuments(), roles: roles, tabs: tabs,
            customFields: CustomFields())
    }

    /// The recipient types not served over REST yet, refused by name.
    func refuseUnservedRecipients() throws(RESTRoutes.Failure) {
        guard let groups = recipients else { return }
        for (name, list) in [
            ("agents", groups.agents), ("editors", groups.editors), ("intermediaries", groups.intermediaries), ("witnesses", groups.witnesses),
        ] where !(list ?? []).isEmpty {
            throw .unsupported("\(name) are not served over REST yet; signers, inPersonSigners, carbonCopies and certifiedDeliveries are")
        }
    }

    /// The definition's documents: PDFs given as base64, at most ``maxDocuments``.
    func builtDocuments() throws(RESTRoutes.Failure) -> [Envelopes.Document] {
        let documents = self.documents ?? []
        guard !documents.isEmpty else {
            throw RESTRoutes.Failure(
                status: .badRequest, code: "ENVELOPE_IS_INCOMPLETE",
                message: "The Envelope is not Complete. A Complete Envelope Requires Documents, Recipients, Tabs, and a Subject Line.")
        }
        guard documents.count <= Self.maxDocuments else { throw .badBody("at most \(Self.maxDocuments) documents") }
        var built: [Envelopes.Document] = []
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
                built.append(try DocumentBuilder().documentId(id).name(document.name ?? "").pdfBytes(bytes).build())
            } catch {
                throw Self.failure(error)
            }
        }
        return built
    }

    /// One recipient's tabs, placed by position or anchor; `count` runs over the whole definition
    /// (at most ``maxTabs``, each placement of an anchor tab counted).
    func builtTabs(
        _ definition: RecipientDefinition, recipientID: String, anchors: [(documentID: String, words: [PDFTextLocator.Word])], count: inout Int
    ) throws(RESTRoutes.Failure) -> [Tab] {
        var tabs: [Tab] = []
        for (type, list) in definition.tabs?.byType ?? [] {
            for tab in list {
                let placed =
                    (tab.anchorString ?? "").isEmpty
                    ? [try Self.tab(tab, type: type, recipientID: recipientID)]
                    : try Self.anchoredTabs(tab, type: type, recipientID: recipientID, anchors: anchors)
                count += placed.count
                guard count <= Self.maxTabs else { throw .badBody("at most \(Self.maxTabs) tabs") }
                tabs += placed
            }
        }
        return tabs
    }

    static func routingOrder(_ definition: RecipientDefinition) throws(RESTRoutes.Failure) -> Int {
        guard let order = definition.routingOrder else { return 1 }
        guard let number = Int(order.value), (1...999).contains(number) else {
            throw .badBody("recipient \(definition.recipientId?.value ?? ""): routingOrder \"\(order.value)\" is not a number from 1 to 999")
        }
        return number
    }

    /// An envelope composed on the server: composed, then queued as its sender's next item.
    static func queued(_ envelope: Envelope, at now: Date) throws -> Envelope {
        var envelope = envelope
        try envelope.apply(.compose, at: now)
        try envelope.apply(.queueForSync, at: now)
        return envelope
    }

    /// One tab at each place `tab.anchorString` is printed, in every document, in document order
    /// (docs/rest-api.md, "Anchor tabs"): its top-left corner at the top-left corner of the anchor
    /// text's box (its top-right with `anchorHorizontalAlignment` `right`), moved by the offsets.
    static func anchoredTabs(
        _ tab: TabDefinition, type: TabType, recipientID: String, anchors: [(documentID: String, words: [PDFTextLocator.Word])]
    ) throws(RESTRoutes.Failure) -> [Tab] {
        let anchor = tab.anchorString ?? ""
        guard anchor.count <= 512 else { throw .badBody("anchorString is longer than 512 characters") }
        func flag(_ text: RESTText?, _ name: String) throws(RESTRoutes.Failure) -> Bool {
            switch text?.value.lowercased() {
            case nil, "", "false": return false
            case "true": return true
            case let other?: throw .badBody("\(name) \"\(other)\" is not true or false")
            }
        }
        let perUnit: Double
        switch (tab.anchorUnits ?? "pixels").lowercased() {
        case "pixels", "": perUnit = 1
        case "inches": perUnit = 72
        case "mms": perUnit = 72 / 25.4
        case "cms": perUnit = 72 / 2.54
        case let other: throw .badBody("anchorUnits \"\(other)\" is not pixels, inches, mms or cms")
        }
        func offset(_ text: RESTText?, _ name: String) throws(RESTRoutes.Failure) -> Double {
            guard let text, !text.value.isEmpty else { return 0 }
            guard let value = Double(text.value), value.isFinite, abs(value) <= 100_000 else {
                throw .badBody("\(name) \"\(text.value)\" is not a number")
            }
            return value * perUnit
        }
        let right: Bool
        switch (tab.anchorHorizontalAlignment ?? "left").lowercased() {
        case "left", "": right = false
        case "right": right = true
        case let other: throw .badBody("anchorHorizontalAlignment \"\(other)\" is not left or right")
        }
        let dx = try offset(tab.anchorXOffset, "anchorXOffset"), dy = try offset(tab.anchorYOffset, "anchorYOffset")
        let matching = PDFTextLocator.Matching(
            caseSensitive: try flag(tab.anchorCaseSensitive, "anchorCaseSensitive"),
            wholeWord: try flag(tab.anchorMatchWholeWord, "anchorMatchWholeWord"))
        var placed: [Tab] = []
        for document in anchors {
            for box in PDFTextLocator.occurrences(of: anchor, in: document.words, matching: matching) {
                var positioned = tab
                positioned.anchorString = nil
                positioned.documentId = RESTText(document.documentID)
                positioned.pageNumber = RESTText(String(box.page))
                positioned.xPosition = RESTText(String(max(0, (right ? box.right : box.left) + dx)))
                positioned.yPosition = RESTText(String(max(0, box.top + dy)))
                placed.append(try Self.tab(positioned, type: type, recipientID: recipientID))
            }
        }
        if placed.isEmpty, !(try flag(tab.anchorIgnoreIfNotPresent, "anchorIgnoreIfNotPresent")) {
            throw RESTRoutes.Failure(
                status: .badRequest, code: "ANCHOR_TAB_STRING_NOT_FOUND",
                message: "The specified Anchor Tab string was not found in the document. Anchor Tab String [\(anchor)] not found.")
        }
        if placed.count > 1, tab.tabId != nil {
            // One tab id cannot name several tabs: each placement gets its own.
            for index in placed.indices { placed[index].tabId = nil }
        }
        return placed
    }

    static func tab(_ tab: TabDefinition, type: TabType, recipientID: String) throws(RESTRoutes.Failure) -> Tab {
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
