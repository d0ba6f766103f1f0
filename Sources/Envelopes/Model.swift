import Foundation

/// The kinds of recipient an envelope can route to (the SDK's `DSMRecipientType`).
public enum RecipientType: String, Hashable, Sendable, Codable, CaseIterable {
    /// Signs remotely, or locally when they are the logged-in user ("self").
    case signer
    /// Signs on the host's device, in front of the host.
    case inPersonSigner
    /// Receives a copy once routing reaches them; never blocks routing.
    case carbonCopy
    /// Must open (view) the envelope for routing to continue.
    case certifiedDelivery
    /// May change the envelope before routing continues.
    case editor
    /// Names the next recipient before routing continues.
    case agent
    /// Forwards to a recipient they name before routing continues.
    case intermediary

    /// Whether this recipient type fills tabs (and so must have some).
    public var fillsTabs: Bool { self == .signer || self == .inPersonSigner }

    /// Whether routing waits for this recipient to finish before moving to the next order.
    ///
    /// Carbon copies receive a copy when routing reaches their order and never hold it up.
    public var blocksRouting: Bool { self != .carbonCopy }
}

/// A recipient's progress, as the e-signature server reports it.
public enum RecipientStatus: String, Hashable, Sendable, Codable, CaseIterable {
    /// Added to an envelope that has not been sent yet.
    case created
    /// Routing has reached the recipient and they have been notified.
    case sent
    /// The recipient has opened the envelope.
    case delivered
    /// The recipient has signed (signers) — their part is done.
    case signed
    /// The recipient's part is complete (all recipient types).
    case completed
    /// The recipient declined; routing of the whole envelope stops.
    case declined
    /// Notification bounced; the recipient has not acted.
    case autoResponded

    /// Whether the recipient has finished their part (signed or completed).
    public var isDone: Bool { self == .signed || self == .completed }

    /// Whether a recipient may move from this status to `next`.
    ///
    /// Statuses only move forward: `created → sent → delivered → signed → completed`, where steps
    /// may be skipped (an in-person signer goes from `created` straight to `signed` offline).
    /// `declined` and `completed` are final; an auto-responded recipient can be sent again.
    /// Repeating the current status is allowed, so duplicate reports are harmless.
    public func canChange(to next: RecipientStatus) -> Bool {
        if next == self { return true }
        switch self {
        case .created: return next != .autoResponded
        case .sent: return next != .created
        case .delivered: return next == .signed || next == .completed || next == .declined
        case .signed: return next == .completed
        case .autoResponded: return next == .sent
        case .completed, .declined: return false
        }
    }
}

/// The envelope's status on the server (created … completed, declined, voided): the one
/// declaration the device, the coordinator's lifecycle (`EnvelopeLifecycle.Status`) and the fleet use.
public enum EnvelopeStatus: String, Hashable, Sendable, Codable, CaseIterable {
    /// Known to the server but not yet routed (before it is synced).
    case created
    /// Routing has reached the current recipients; none of them has opened it yet.
    case sent
    /// Every current recipient has opened the envelope.
    case delivered
    /// Every signer has signed and completion is pending. The coordinator completes in the same
    /// transition, so a stored envelope never rests in this status; every event is refused from it.
    case signed
    /// Every recipient who must act is done. Terminal.
    case completed
    /// A recipient declined. Terminal.
    case declined
    /// Voided by the sender or an administrator, with a reason. Terminal.
    case voided

    /// Whether no event may change the envelope any more (`signed` included: see its comment).
    public var isTerminal: Bool { self == .completed || self == .declined || self == .voided || self == .signed }
}

/// A rectangle on a document page, in PDF points from the page's top-left corner.
public struct TabFrame: Hashable, Sendable, Codable {
    /// Distance from the left edge.
    public var x: Double
    /// Distance from the top edge.
    public var y: Double
    /// Width, positive.
    public var width: Double
    /// Height, positive.
    public var height: Double

    /// Creates a frame.
    public init(x: Double, y: Double, width: Double, height: Double) {
        self.x = x
        self.y = y
        self.width = width
        self.height = height
    }
}

/// A PDF document in an envelope. Its page count is read from the PDF itself.
public struct Document: Hashable, Sendable, Codable {
    /// The document id, unique within the envelope (the SDK's `documentId`, a string).
    public var documentId: String
    /// The document's display name.
    public var name: String
    /// The PDF bytes.
    public var pdfBytes: Data
    /// Where the bytes were read from, when they came from a file (kept for display and logs).
    public var sourcePath: String?
    /// The number of pages, as read from the PDF's page tree.
    public var pageCount: Int

    /// Creates a document. Prefer ``DocumentBuilder``, which reads ``pageCount`` from the PDF.
    public init(documentId: String, name: String, pdfBytes: Data, sourcePath: String? = nil, pageCount: Int) {
        self.documentId = documentId
        self.name = name
        self.pdfBytes = pdfBytes
        self.sourcePath = sourcePath
        self.pageCount = pageCount
    }
}

/// A person the envelope routes to.
public struct Recipient: Hashable, Sendable, Codable {
    /// The recipient id, unique within the envelope (a string, as in the SDK).
    public var recipientId: String
    /// What the recipient does.
    public var type: RecipientType
    /// The recipient's name; for an in-person signer, the signer's name.
    public var name: String
    /// The recipient's email; optional for in-person signers (they sign on the host's device).
    public var email: String?
    /// Routing order, 1 or more; recipients with the same order are routed in parallel.
    public var routingOrder: Int
    /// Set for embedded (captive) recipients, who sign in the integrating app.
    public var clientUserId: String?
    /// In-person signers only: the host's name.
    public var hostName: String?
    /// In-person signers only: the host's email.
    public var hostEmail: String?
    /// The recipient's progress.
    public var status: RecipientStatus
    /// When ``status`` last changed.
    public var statusChangedAt: Date?
    /// Why the recipient declined, when they did.
    public var declineReason: String?

    /// Creates a recipient. Prefer ``RecipientBuilder``.
    public init(
        recipientId: String,
        type: RecipientType,
        name: String,
        email: String? = nil,
        routingOrder: Int = 1,
        clientUserId: String? = nil,
        hostName: String? = nil,
        hostEmail: String? = nil,
        status: RecipientStatus = .created,
        statusChangedAt: Date? = nil,
        declineReason: String? = nil
    ) {
        self.recipientId = recipientId
        self.type = type
        self.name = name
        self.email = email
        self.routingOrder = routingOrder
        self.clientUserId = clientUserId
        self.hostName = hostName
        self.hostEmail = hostEmail
        self.status = status
        self.statusChangedAt = statusChangedAt
        self.declineReason = declineReason
    }

    /// Whether this is an embedded (captive) recipient.
    public var isEmbedded: Bool { clientUserId != nil }
}

/// The kinds of tab (the SDK's `DSMTabType`).
public enum TabType: String, Hashable, Sendable, Codable, CaseIterable {
    case signHere, initialHere, text, checkbox, company, title, fullName, dateSigned, formula, radio
}

/// A field on a document page that a recipient fills.
public struct Tab: Hashable, Sendable, Codable {
    /// What kind of field this is.
    public var type: TabType
    /// Optional tab id, unique within the envelope when given.
    public var tabId: String?
    /// The document the tab is on.
    public var documentId: String
    /// The recipient who fills the tab.
    public var recipientId: String
    /// The page, starting at 1.
    public var pageNumber: Int
    /// Where on the page.
    public var frame: TabFrame
    /// A label shared by tabs that carry the same value (templates fill tabs by label).
    public var label: String?
    /// The tab's name, shown to the signer.
    public var name: String?
    /// The value (text, formula expression, radio value, …).
    public var value: String?
    /// The group a radio button (or checkbox) belongs to.
    public var groupName: String?
    /// Size relative to the default (0.5...2.0).
    public var scale: Double
    /// Whether the signer may not change the value.
    public var locked: Bool
    /// Whether the signer may leave the tab empty.
    public var optional: Bool
    /// For checkboxes and radio buttons: whether it is selected.
    public var selected: Bool

    /// Creates a tab. Prefer ``TabBuilder``.
    public init(
        type: TabType,
        tabId: String? = nil,
        documentId: String,
        recipientId: String,
        pageNumber: Int,
        frame: TabFrame,
        label: String? = nil,
        name: String? = nil,
        value: String? = nil,
        groupName: String? = nil,
        scale: Double = 1,
        locked: Bool = false,
        optional: Bool = false,
        selected: Bool = false
    ) {
        self.type = type
        self.tabId = tabId
        self.documentId = documentId
        self.recipientId = recipientId
        self.pageNumber = pageNumber
        self.frame = frame
        self.label = label
        self.name = name
        self.value = value
        self.groupName = groupName
        self.scale = scale
        self.locked = locked
        self.optional = optional
        self.selected = selected
    }
}

/// A free-text custom field on the envelope (envelope metadata, not shown on documents).
public struct TextCustomField: Hashable, Sendable, Codable {
    /// The field's name, unique among the envelope's custom fields.
    public var name: String
    /// The value.
    public var value: String
    /// Whether the sender must fill it.
    public var required: Bool
    /// Whether recipients see it.
    public var show: Bool

    /// Creates a text custom field.
    public init(name: String, value: String, required: Bool = false, show: Bool = true) {
        self.name = name
        self.value = value
        self.required = required
        self.show = show
    }
}

/// A custom field whose value is one of a list of items.
public struct ListCustomField: Hashable, Sendable, Codable {
    /// The field's name, unique among the envelope's custom fields.
    public var name: String
    /// The chosen item (or empty).
    public var value: String
    /// The allowed values.
    public var items: [String]
    /// Whether the sender must fill it.
    public var required: Bool
    /// Whether recipients see it.
    public var show: Bool

    /// Creates a list custom field.
    public init(name: String, value: String, items: [String], required: Bool = false, show: Bool = true) {
        self.name = name
        self.value = value
        self.items = items
        self.required = required
        self.show = show
    }
}

/// The envelope's text and list custom fields.
public struct CustomFields: Hashable, Sendable, Codable {
    /// Free-text fields.
    public var text: [TextCustomField]
    /// List fields.
    public var list: [ListCustomField]

    /// Creates custom fields (empty by default).
    public init(text: [TextCustomField] = [], list: [ListCustomField] = []) {
        self.text = text
        self.list = list
    }
}

/// An envelope: documents, the recipients they route to, and the tabs those recipients fill.
///
/// Build one with ``EnvelopeBuilder``, which validates it. An envelope is a value: the device node
/// stores it, changes recipients' ``Recipient/status`` as they sign and moves ``localState`` with
/// ``EnvelopeLocalState/apply(_:)``.
public struct Envelope: Hashable, Sendable, Codable {
    /// The device-local envelope id.
    public var envelopeId: String
    /// The server's envelope id, once synced.
    public var serverEnvelopeId: String?
    /// The envelope name.
    public var name: String
    /// The email subject sent to remote recipients.
    public var emailSubject: String
    /// The email message (blurb) sent to remote recipients.
    public var emailMessage: String
    /// The documents, each with a unique id.
    public var documents: [Document]
    /// The recipients, each with a unique id.
    public var recipients: [Recipient]
    /// All tabs, each naming its document and recipient.
    public var tabs: [Tab]
    /// Text and list custom fields.
    public var customFields: CustomFields
    /// The server-side status.
    public var status: EnvelopeStatus
    /// The device-local state (draft … synced).
    public var localState: EnvelopeLocalState
    /// A client-chosen id that identifies this envelope across sync retries.
    public var transactionId: String
    /// The template the envelope was composed from, if any.
    public var templateId: String?
    /// When the envelope was built.
    public var createdAt: Date
    /// When it last changed (a recipient status, for example).
    public var lastModifiedAt: Date
    /// When the last local signer finished (or declined).
    public var completedLocallyAt: Date?
    /// When the server acknowledged the envelope.
    public var syncedAt: Date?

    /// Creates an envelope without validating it. Prefer ``EnvelopeBuilder``.
    public init(
        envelopeId: String,
        serverEnvelopeId: String? = nil,
        name: String,
        emailSubject: String,
        emailMessage: String,
        documents: [Document],
        recipients: [Recipient],
        tabs: [Tab],
        customFields: CustomFields = CustomFields(),
        status: EnvelopeStatus = .created,
        localState: EnvelopeLocalState = .draft,
        transactionId: String,
        templateId: String? = nil,
        createdAt: Date,
        lastModifiedAt: Date? = nil,
        completedLocallyAt: Date? = nil,
        syncedAt: Date? = nil
    ) {
        self.envelopeId = envelopeId
        self.serverEnvelopeId = serverEnvelopeId
        self.name = name
        self.emailSubject = emailSubject
        self.emailMessage = emailMessage
        self.documents = documents
        self.recipients = recipients
        self.tabs = tabs
        self.customFields = customFields
        self.status = status
        self.localState = localState
        self.transactionId = transactionId
        self.templateId = templateId
        self.createdAt = createdAt
        self.lastModifiedAt = lastModifiedAt ?? createdAt
        self.completedLocallyAt = completedLocallyAt
        self.syncedAt = syncedAt
    }

    /// The recipient with the given id.
    public func recipient(id: String) -> Recipient? {
        recipients.first { $0.recipientId == id }
    }

    /// The document with the given id.
    public func document(id: String) -> Document? {
        documents.first { $0.documentId == id }
    }

    /// The tabs a recipient fills, in envelope order.
    public func tabs(forRecipient id: String) -> [Tab] {
        tabs.filter { $0.recipientId == id }
    }

    /// Records a recipient's new status.
    ///
    /// - Returns: `false` when no recipient has that id (nothing changes).
    @discardableResult
    public mutating func setStatus(
        _ status: RecipientStatus,
        forRecipient id: String,
        at time: Date,
        declineReason: String? = nil
    ) -> Bool {
        guard let index = recipients.firstIndex(where: { $0.recipientId == id }) else { return false }
        recipients[index].status = status
        recipients[index].statusChangedAt = time
        if status == .declined { recipients[index].declineReason = declineReason }
        lastModifiedAt = time
        return true
    }

    /// Checks every rule ``EnvelopeBuilder`` checks, returning all errors (empty when valid).
    public func validate() -> [EnvelopeValidationError] {
        EnvelopeValidator.validate(self)
    }
}
