import Foundation

/// Builds a ``Document`` from PDF bytes (or a file read through a reader you supply), reading its
/// page count from the PDF.
///
/// ```swift
/// let document = try DocumentBuilder()
///     .documentId("doc1")
///     .name("NDA")
///     .pdfBytes(SamplePDF.make(pages: 2))
///     .build()
/// ```
public struct DocumentBuilder: Sendable {
    private var documentId = ""
    private var name = ""
    private var bytes: Data?
    private var filePath: String?

    /// Starts an empty builder.
    public init() {}

    /// Sets the document id (a string, unique in the envelope).
    public func documentId(_ id: String) -> Self { with { $0.documentId = id } }
    /// Sets the display name.
    public func name(_ name: String) -> Self { with { $0.name = name } }
    /// Sets the PDF bytes.
    public func pdfBytes(_ bytes: Data) -> Self { with { $0.bytes = bytes } }
    /// Sets a file to read the PDF from; use ``build(readingFilesWith:)``.
    public func filePath(_ path: String) -> Self { with { $0.filePath = path } }

    /// Builds the document from its bytes.
    ///
    /// - Throws: ``EnvelopeValidationError`` naming `documentId`, `name` or `pdfBytes`.
    public func build() throws(EnvelopeValidationError) -> Document {
        try build(readingFilesWith: nil)
    }

    /// Builds the document, reading ``filePath(_:)`` with `reader` when no bytes were set.
    ///
    /// The module does no I/O itself; pass `{ try Data(contentsOf: URL(fileURLWithPath: $0)) }`.
    /// - Parameter reader: Reads a file's bytes.
    /// - Throws: ``EnvelopeValidationError`` naming the field at fault.
    public func build(readingFilesWith reader: ((String) throws -> Data)?) throws(EnvelopeValidationError) -> Document {
        var pdf = bytes
        if pdf == nil, let filePath {
            guard let reader else {
                throw EnvelopeValidationError(
                    code: .missingValue, field: "pdfBytes",
                    message: "only a file path was given; call build(readingFilesWith:) with a file reader or set pdfBytes")
            }
            do {
                pdf = try reader(filePath)
            } catch {
                throw EnvelopeValidationError(
                    code: .documentUnreadable, field: "filePath",
                    message: "the file '\(filePath)' could not be read (\(error)); check the path")
            }
        }
        guard let pdf else {
            throw EnvelopeValidationError(code: .missingValue, field: "pdfBytes", message: "the document has no PDF; set pdfBytes or filePath")
        }
        var errors: [EnvelopeValidationError] = []
        EnvelopeValidator.required(documentId, "documentId", what: "the document id", max: EnvelopeValidator.maxNameLength, into: &errors)
        EnvelopeValidator.required(name, "name", what: "the document name", max: EnvelopeValidator.maxNameLength, into: &errors)
        if let first = errors.first { throw first }
        switch EnvelopeValidator.pdfPageCount(pdf, field: "pdfBytes") {
        case .success(let pages):
            return Document(documentId: documentId, name: name, pdfBytes: pdf, sourcePath: filePath, pageCount: pages)
        case .failure(let error):
            throw error
        }
    }

    private func with(_ change: (inout Self) -> Void) -> Self {
        var copy = self
        change(&copy)
        return copy
    }
}

/// Builds a ``Recipient`` of one type (the SDK's `builderForType:`).
///
/// ```swift
/// let host = try RecipientBuilder(type: .inPersonSigner)
///     .recipientId("1")
///     .hostName("Ann Host").hostEmail("ann@example.com")
///     .signerName("Bob Walk-in")
///     .build()
/// ```
public struct RecipientBuilder: Sendable {
    private var recipient: Recipient

    /// Starts a recipient of `type` with routing order 1.
    public init(type: RecipientType) {
        recipient = Recipient(recipientId: "", type: type, name: "")
    }

    /// Sets the recipient id (a string, unique in the envelope).
    public func recipientId(_ id: String) -> Self { with { $0.recipient.recipientId = id } }
    /// Sets the recipient's name (for in-person signers, the signer's name).
    public func name(_ name: String) -> Self { with { $0.recipient.name = name } }
    /// Sets the recipient's email.
    public func email(_ email: String) -> Self { with { $0.recipient.email = email } }
    /// The SDK's `addSignerName`: same as ``name(_:)``.
    public func signerName(_ name: String) -> Self { self.name(name) }
    /// The SDK's `addSignerEmail`: same as ``email(_:)``.
    public func signerEmail(_ email: String) -> Self { self.email(email) }
    /// In-person signers: the host's name.
    public func hostName(_ name: String) -> Self { with { $0.recipient.hostName = name } }
    /// In-person signers: the host's email.
    public func hostEmail(_ email: String) -> Self { with { $0.recipient.hostEmail = email } }
    /// Sets the routing order (1 or more; equal orders are parallel).
    public func routingOrder(_ order: Int) -> Self { with { $0.recipient.routingOrder = order } }
    /// Marks the recipient as embedded (captive) with this client user id.
    public func clientUserId(_ id: String) -> Self { with { $0.recipient.clientUserId = id } }

    /// Builds the recipient.
    ///
    /// Rules that need the whole envelope (tabs, duplicate ids) are checked by ``EnvelopeBuilder``.
    /// - Throws: ``EnvelopeValidationError`` naming the field at fault (`email`, `routingOrder`, …).
    public func build() throws(EnvelopeValidationError) -> Recipient {
        var errors: [EnvelopeValidationError] = []
        EnvelopeValidator.recipient(recipient, prefix: "", into: &errors)
        if let first = errors.first { throw first }
        return recipient
    }

    private func with(_ change: (inout Self) -> Void) -> Self {
        var copy = self
        change(&copy)
        return copy
    }
}

/// Builds a ``Tab`` of one type.
///
/// ```swift
/// let sign = try TabBuilder(type: .signHere)
///     .documentId("doc1").recipientId("1")
///     .pageNumber(1).frame(x: 100, y: 300, width: 40, height: 50)
///     .build()
/// ```
public struct TabBuilder: Sendable {
    private var tab: Tab

    /// Starts a tab of `type` on page 1 with an empty frame (set one).
    public init(type: TabType) {
        tab = Tab(type: type, documentId: "", recipientId: "", pageNumber: 1, frame: TabFrame(x: 0, y: 0, width: 0, height: 0))
    }

    /// Sets an optional tab id, unique in the envelope.
    public func tabId(_ id: String) -> Self { with { $0.tab.tabId = id } }
    /// Sets the document the tab is on.
    public func documentId(_ id: String) -> Self { with { $0.tab.documentId = id } }
    /// Sets the recipient who fills the tab.
    public func recipientId(_ id: String) -> Self { with { $0.tab.recipientId = id } }
    /// Sets the page, starting at 1.
    public func pageNumber(_ page: Int) -> Self { with { $0.tab.pageNumber = page } }
    /// Sets where on the page the tab sits, in PDF points.
    public func frame(_ frame: TabFrame) -> Self { with { $0.tab.frame = frame } }
    /// Sets the frame from its origin and size, in PDF points.
    public func frame(x: Double, y: Double, width: Double, height: Double) -> Self {
        frame(TabFrame(x: x, y: y, width: width, height: height))
    }
    /// Sets the label; templates fill tab values by label.
    public func label(_ label: String) -> Self { with { $0.tab.label = label } }
    /// Sets the name shown to the signer.
    public func name(_ name: String) -> Self { with { $0.tab.name = name } }
    /// Sets the value (text, formula expression, radio button value, …).
    public func value(_ value: String) -> Self { with { $0.tab.value = value } }
    /// Sets the radio (or checkbox) group.
    public func groupName(_ group: String) -> Self { with { $0.tab.groupName = group } }
    /// Sets the size relative to the default (0.5…2.0).
    public func scale(_ scale: Double) -> Self { with { $0.tab.scale = scale } }
    /// Marks the value as read-only for the signer.
    public func locked(_ locked: Bool = true) -> Self { with { $0.tab.locked = locked } }
    /// Lets the signer leave the tab empty.
    public func optional(_ optional: Bool = true) -> Self { with { $0.tab.optional = optional } }
    /// Selects a checkbox or radio button.
    public func selected(_ selected: Bool = true) -> Self { with { $0.tab.selected = selected } }

    /// Builds the tab.
    ///
    /// Whether the document, page and recipient exist is checked by ``EnvelopeBuilder``.
    /// - Throws: ``EnvelopeValidationError`` naming the field at fault (`frame`, `scale`, …).
    public func build() throws(EnvelopeValidationError) -> Tab {
        var errors: [EnvelopeValidationError] = []
        EnvelopeValidator.tab(tab, prefix: "", into: &errors)
        if let first = errors.first { throw first }
        return tab
    }

    private func with(_ change: (inout Self) -> Void) -> Self {
        var copy = self
        change(&copy)
        return copy
    }
}

/// Builds the envelope's text and list ``CustomFields``.
public struct CustomFieldsBuilder: Sendable {
    private var fields = CustomFields()

    /// Starts an empty builder.
    public init() {}

    /// Adds a free-text field.
    public func addText(name: String, value: String, required: Bool = false, show: Bool = true) -> Self {
        var copy = self
        copy.fields.text.append(TextCustomField(name: name, value: value, required: required, show: show))
        return copy
    }

    /// Adds a list field whose value must be one of `items` (or empty).
    public func addList(name: String, value: String, items: [String], required: Bool = false, show: Bool = true) -> Self {
        var copy = self
        copy.fields.list.append(ListCustomField(name: name, value: value, items: items, required: required, show: show))
        return copy
    }

    /// Builds the fields.
    /// - Throws: ``EnvelopeValidationError`` naming `text[i].name`, `list[i].value`, ….
    public func build() throws(EnvelopeValidationError) -> CustomFields {
        var errors: [EnvelopeValidationError] = []
        EnvelopeValidator.customFields(fields, prefix: "", into: &errors)
        if let first = errors.first { throw first }
        return fields
    }
}

/// Builds and validates an ``Envelope``.
///
/// `build()` checks every rule in `docs/envelopes.md` and throws the first error, in a stable
/// order (envelope fields, documents, recipients, tabs, custom fields); ``validate()`` returns all.
///
/// ```swift
/// let envelope = try EnvelopeBuilder()
///     .envelopeName("DocuSign NDA")
///     .emailSubject("DocuSign: NDA.pdf")
///     .addDocument(document)
///     .addRecipient(signer, tabs: [signHere])
///     .build()
/// ```
public struct EnvelopeBuilder: Sendable {
    private var name = ""
    private var emailSubject = ""
    private var emailMessage = ""
    private var documents: [Document] = []
    private var recipients: [Recipient] = []
    private var tabs: [Tab] = []
    private var customFields = CustomFields()
    private var transactionId: String?
    private var templateId: String?

    /// Starts an empty builder.
    public init() {}

    /// Sets the envelope name (≤ 100 characters).
    public func envelopeName(_ name: String) -> Self { with { $0.name = name } }
    /// Sets the email subject for remote recipients (≤ 100 characters).
    public func emailSubject(_ subject: String) -> Self { with { $0.emailSubject = subject } }
    /// Sets the email message (blurb) for remote recipients.
    public func emailMessage(_ message: String) -> Self { with { $0.emailMessage = message } }
    /// Adds a document.
    public func addDocument(_ document: Document) -> Self { with { $0.documents.append(document) } }
    /// Adds a recipient; add their tabs with ``addTab(_:)``.
    public func addRecipient(_ recipient: Recipient) -> Self { with { $0.recipients.append(recipient) } }
    /// Adds a recipient and their tabs (as the SDK's `addTab:` on a recipient builder does).
    public func addRecipient(_ recipient: Recipient, tabs: [Tab]) -> Self {
        with {
            $0.recipients.append(recipient)
            $0.tabs.append(contentsOf: tabs)
        }
    }
    /// Adds a tab (it names its document and recipient).
    public func addTab(_ tab: Tab) -> Self { with { $0.tabs.append(tab) } }
    /// Sets the envelope custom fields.
    public func customFields(_ fields: CustomFields) -> Self { with { $0.customFields = fields } }
    /// Sets the transaction id that identifies the envelope across sync retries (default: a UUID).
    public func transactionId(_ id: String) -> Self { with { $0.transactionId = id } }
    /// Records the template the envelope was composed from.
    public func templateId(_ id: String) -> Self { with { $0.templateId = id } }

    /// The envelope as it stands, without validation.
    public func unvalidated(envelopeId: String, createdAt: Date) -> Envelope {
        Envelope(
            envelopeId: envelopeId, name: name, emailSubject: emailSubject, emailMessage: emailMessage,
            documents: documents, recipients: recipients, tabs: tabs, customFields: customFields,
            transactionId: transactionId ?? UUID().uuidString, templateId: templateId, createdAt: createdAt)
    }

    /// Every rule the envelope breaks, in a stable order (empty when valid).
    public func validate() -> [EnvelopeValidationError] {
        unvalidated(envelopeId: "", createdAt: Date(timeIntervalSince1970: 0)).validate()
    }

    /// Builds the envelope in the ``EnvelopeLocalState/draft`` state.
    ///
    /// - Parameters:
    ///   - envelopeId: The device-local id (default: a new UUID).
    ///   - createdAt: The creation time (default: now).
    /// - Throws: The first ``EnvelopeValidationError``.
    public func build(envelopeId: String = UUID().uuidString, createdAt: Date = Date()) throws(EnvelopeValidationError) -> Envelope {
        let envelope = unvalidated(envelopeId: envelopeId, createdAt: createdAt)
        if let first = envelope.validate().first { throw first }
        return envelope
    }

    private func with(_ change: (inout Self) -> Void) -> Self {
        var copy = self
        change(&copy)
        return copy
    }
}
