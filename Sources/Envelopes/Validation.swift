import Foundation

/// The envelope rules, shared by the builders (relative field paths) and
/// ``Envelope/validate()`` (full paths). Errors come out in a stable order.
enum EnvelopeValidator {
    static let maxNameLength = 100
    static let maxEmailLength = 100
    static let maxSubjectLength = 100
    static let maxMessageLength = 10_000
    static let scaleRange = 0.5...2.0

    static func path(_ prefix: String, _ field: String) -> String {
        prefix.isEmpty ? field : "\(prefix).\(field)"
    }

    /// Empty or only white space: the same set as Foundation's `.whitespacesAndNewlines` (the
    /// Unicode White_Space property, and U+200B, which Foundation still counts), checked without
    /// Foundation's `trimmingCharacters`, which bridges through `NSString` on Linux and took 3% of
    /// a node's CPU at 10,000 devices (`BlankTextTests` compares the two).
    static func isBlank(_ text: String?) -> Bool {
        text?.unicodeScalars.allSatisfy { $0.properties.isWhitespace || $0 == "\u{200B}" } ?? true
    }

    /// A deliberately loose check: one `@`, something before it, a dotted domain, no spaces.
    static func isPlausibleEmail(_ email: String) -> Bool {
        let parts = email.split(separator: "@", omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty, !email.contains(where: \.isWhitespace) else { return false }
        let domain = parts[1]
        return domain.contains(".") && !domain.hasPrefix(".") && !domain.hasSuffix(".")
    }

    static func required(_ value: String?, _ field: String, what: String, max: Int, into errors: inout [EnvelopeValidationError]) {
        if isBlank(value) {
            errors.append(.init(code: .missingValue, field: field, message: "\(what) is missing; set it"))
        } else {
            limit(value, field, what: what, max: max, into: &errors)
        }
    }

    static func limit(_ value: String?, _ field: String, what: String, max: Int, into errors: inout [EnvelopeValidationError]) {
        guard let value, value.count > max else { return }
        errors.append(.init(
            code: .tooLong, field: field,
            message: "\(what) is \(value.count) characters; shorten it to \(max) or fewer"))
    }

    static func email(_ value: String?, _ field: String, what: String, required: Bool, into errors: inout [EnvelopeValidationError]) {
        if isBlank(value) {
            if required { errors.append(.init(code: .missingValue, field: field, message: "\(what) is missing; set it")) }
            return
        }
        guard let value else { return }
        if value.count > maxEmailLength {
            limit(value, field, what: what, max: maxEmailLength, into: &errors)
        } else if !isPlausibleEmail(value) {
            errors.append(.init(
                code: .invalidEmail, field: field,
                message: "\(what) '\(value)' is not an email address; use the form name@example.com"))
        }
    }

    // MARK: Parts

    static func document(_ document: Document, prefix: String, into errors: inout [EnvelopeValidationError]) {
        required(document.documentId, path(prefix, "documentId"), what: "the document id", max: maxNameLength, into: &errors)
        required(document.name, path(prefix, "name"), what: "the document name", max: maxNameLength, into: &errors)
        limit(document.sourcePath, path(prefix, "sourcePath"), what: "the document path", max: 4096, into: &errors)
        switch pdfPageCount(document.pdfBytes, field: path(prefix, "pdfBytes")) {
        case .success(let pages):
            if pages != document.pageCount {
                errors.append(.init(
                    code: .documentUnreadable, field: path(prefix, "pageCount"),
                    message: "the document says it has \(document.pageCount) pages but its PDF has \(pages); build it with DocumentBuilder"))
            }
        case .failure(let error):
            errors.append(error)
        }
    }

    static func pdfPageCount(_ bytes: Data, field: String) -> Result<Int, EnvelopeValidationError> {
        do {
            return .success(try PDFInspector().inspect(bytes).pageCount)
        } catch {
            let code: EnvelopeValidationError.Code = error.code == .notPDF ? .documentNotPDF : .documentUnreadable
            return .failure(.init(code: code, field: field, message: error.message))
        }
    }

    static func recipient(_ recipient: Recipient, prefix: String, into errors: inout [EnvelopeValidationError]) {
        required(recipient.recipientId, path(prefix, "recipientId"), what: "the recipient id", max: maxNameLength, into: &errors)
        let nameWhat = recipient.type == .inPersonSigner ? "the signer name" : "the recipient name"
        required(recipient.name, path(prefix, "name"), what: nameWhat, max: maxNameLength, into: &errors)
        // In-person signers sign on the host's device, so their own email is optional.
        email(recipient.email, path(prefix, "email"), what: "the recipient email",
              required: recipient.type != .inPersonSigner, into: &errors)
        if recipient.type == .inPersonSigner {
            required(recipient.hostName, path(prefix, "hostName"), what: "the in-person signer's host name", max: maxNameLength, into: &errors)
            email(recipient.hostEmail, path(prefix, "hostEmail"), what: "the in-person signer's host email", required: true, into: &errors)
        }
        if recipient.routingOrder < 1 {
            errors.append(.init(
                code: .invalidRoutingOrder, field: path(prefix, "routingOrder"),
                message: "the routing order is \(recipient.routingOrder); use 1 or more (equal orders sign in parallel)"))
        }
        limit(recipient.clientUserId, path(prefix, "clientUserId"), what: "the client user id", max: maxNameLength, into: &errors)
    }

    static func tab(_ tab: Tab, prefix: String, into errors: inout [EnvelopeValidationError]) {
        limit(tab.tabId, path(prefix, "tabId"), what: "the tab id", max: maxNameLength, into: &errors)
        if isBlank(tab.documentId) {
            errors.append(.init(code: .missingValue, field: path(prefix, "documentId"), message: "the tab has no document id; set the document it is on"))
        }
        if isBlank(tab.recipientId) {
            errors.append(.init(code: .missingValue, field: path(prefix, "recipientId"), message: "the tab has no recipient id; set who fills it"))
        }
        if tab.pageNumber < 1 {
            errors.append(.init(
                code: .tabPageOutOfRange, field: path(prefix, "pageNumber"),
                message: "the page number is \(tab.pageNumber); pages start at 1"))
        }
        let f = tab.frame
        if !(f.x >= 0 && f.y >= 0 && f.width > 0 && f.height > 0 && f.x.isFinite && f.y.isFinite && f.width.isFinite && f.height.isFinite) {
            errors.append(.init(
                code: .tabInvalidFrame, field: path(prefix, "frame"),
                message: "the frame (\(f.x), \(f.y), \(f.width)×\(f.height)) needs a non-negative origin and a positive size"))
        }
        if !scaleRange.contains(tab.scale) {
            errors.append(.init(
                code: .tabInvalidScale, field: path(prefix, "scale"),
                message: "the scale is \(tab.scale); use a value from 0.5 to 2.0"))
        }
        limit(tab.name, path(prefix, "name"), what: "the tab name", max: maxNameLength, into: &errors)
        limit(tab.label, path(prefix, "label"), what: "the tab label", max: maxNameLength, into: &errors)
        limit(tab.groupName, path(prefix, "groupName"), what: "the group name", max: maxNameLength, into: &errors)
        if tab.type == .radio, isBlank(tab.groupName) {
            errors.append(.init(
                code: .radioWithoutGroup, field: path(prefix, "groupName"),
                message: "a radio tab needs a group name so only one button of the group can be selected"))
        }
    }

    static func customFields(_ fields: CustomFields, prefix: String, into errors: inout [EnvelopeValidationError]) {
        var names: Set<String> = []
        for (i, field) in fields.text.enumerated() {
            let p = path(prefix, "text[\(i)]")
            required(field.name, path(p, "name"), what: "the custom field name", max: maxNameLength, into: &errors)
            if !isBlank(field.name), !names.insert(field.name).inserted {
                errors.append(duplicate(path(p, "name"), what: "custom field name", field.name))
            }
        }
        for (i, field) in fields.list.enumerated() {
            let p = path(prefix, "list[\(i)]")
            required(field.name, path(p, "name"), what: "the custom field name", max: maxNameLength, into: &errors)
            if !isBlank(field.name), !names.insert(field.name).inserted {
                errors.append(duplicate(path(p, "name"), what: "custom field name", field.name))
            }
            if !field.value.isEmpty, !field.items.contains(field.value) {
                errors.append(.init(
                    code: .listValueNotInItems, field: path(p, "value"),
                    message: "the value '\(field.value)' is not one of the list items; pick one of \(field.items)"))
            }
        }
    }

    static func duplicate(_ field: String, what: String, _ value: String) -> EnvelopeValidationError {
        .init(code: .duplicateId, field: field, message: "the \(what) '\(value)' is used twice; make it unique")
    }

    // MARK: Whole envelope

    static func validate(_ envelope: Envelope) -> [EnvelopeValidationError] {
        var errors: [EnvelopeValidationError] = []
        limit(envelope.name, "name", what: "the envelope name", max: maxNameLength, into: &errors)
        limit(envelope.emailSubject, "emailSubject", what: "the email subject", max: maxSubjectLength, into: &errors)
        limit(envelope.emailMessage, "emailMessage", what: "the email message", max: maxMessageLength, into: &errors)
        required(envelope.transactionId, "transactionId", what: "the transaction id", max: maxNameLength, into: &errors)

        // Documents.
        if envelope.documents.isEmpty {
            errors.append(.init(code: .noDocuments, field: "documents", message: "the envelope has no documents; add at least one PDF"))
        }
        var pageCounts: [String: Int] = [:]
        for (i, document) in envelope.documents.enumerated() {
            let p = "documents[\(i)]"
            Self.document(document, prefix: p, into: &errors)
            if !isBlank(document.documentId) {
                if pageCounts[document.documentId] != nil {
                    errors.append(duplicate("\(p).documentId", what: "document id", document.documentId))
                } else {
                    pageCounts[document.documentId] = document.pageCount
                }
            }
        }

        // Recipients.
        if envelope.recipients.isEmpty {
            errors.append(.init(code: .noRecipients, field: "recipients", message: "the envelope has no recipients; add at least one"))
        }
        var recipientTypes: [String: RecipientType] = [:]
        let tabbed = Set(envelope.tabs.map(\.recipientId))
        for (i, recipient) in envelope.recipients.enumerated() {
            let p = "recipients[\(i)]"
            Self.recipient(recipient, prefix: p, into: &errors)
            if !isBlank(recipient.recipientId) {
                if recipientTypes[recipient.recipientId] != nil {
                    errors.append(duplicate("\(p).recipientId", what: "recipient id", recipient.recipientId))
                } else {
                    recipientTypes[recipient.recipientId] = recipient.type
                }
            }
            if recipient.type.fillsTabs, !tabbed.contains(recipient.recipientId) {
                errors.append(.init(
                    code: .signerWithoutTabs, field: "\(p).tabs",
                    message: "the \(recipient.type.rawValue) '\(recipient.recipientId)' has no tabs; add at least one (a sign-here tab, usually)"))
            }
        }

        // Tabs.
        var tabIds: Set<String> = []
        var selectedRadio: Set<[String]> = []
        for (i, tab) in envelope.tabs.enumerated() {
            let p = "tabs[\(i)]"
            Self.tab(tab, prefix: p, into: &errors)
            if let id = tab.tabId, !isBlank(id), !tabIds.insert(id).inserted {
                errors.append(duplicate("\(p).tabId", what: "tab id", id))
            }
            if !isBlank(tab.documentId) {
                if let pages = pageCounts[tab.documentId] {
                    if tab.pageNumber > pages {
                        errors.append(.init(
                            code: .tabPageOutOfRange, field: "\(p).pageNumber",
                            message: "page \(tab.pageNumber) is past the end of document '\(tab.documentId)', which has \(pages) pages"))
                    }
                } else {
                    errors.append(.init(
                        code: .tabUnknownDocument, field: "\(p).documentId",
                        message: "the tab is on document '\(tab.documentId)', which is not in the envelope; add the document or fix the id"))
                }
            }
            if !isBlank(tab.recipientId) {
                if let type = recipientTypes[tab.recipientId] {
                    if !type.fillsTabs {
                        errors.append(.init(
                            code: .tabRecipientCannotSign, field: "\(p).recipientId",
                            message: "recipient '\(tab.recipientId)' is a \(type.rawValue), who never fills tabs; assign the tab to a signer"))
                    }
                } else {
                    errors.append(.init(
                        code: .tabUnknownRecipient, field: "\(p).recipientId",
                        message: "the tab is for recipient '\(tab.recipientId)', who is not in the envelope; add the recipient or fix the id"))
                }
            }
            // Radio groups belong to one recipient; only one button of each may start selected.
            if tab.type == .radio, tab.selected, let group = tab.groupName, !isBlank(group),
               !selectedRadio.insert([tab.recipientId, group]).inserted {
                errors.append(.init(
                    code: .radioGroupMultipleSelected, field: "\(p).selected",
                    message: "radio group '\(group)' already has a selected button; select at most one per group"))
            }
        }

        customFields(envelope.customFields, prefix: "customFields", into: &errors)
        return errors
    }
}
