import Foundation

/// A recipient placeholder in a template, filled when an envelope is composed from it.
public struct TemplateRole: Hashable, Sendable, Codable {
    /// The role's name, for example `"Client"`; compositions refer to roles by it.
    public var roleName: String
    /// The recipient id the role's tabs use.
    public var recipientId: String
    /// What the role does.
    public var type: RecipientType
    /// The role's routing order.
    public var routingOrder: Int
    /// Used when the composition gives no name.
    public var defaultName: String?
    /// Used when the composition gives no email.
    public var defaultEmail: String?
    /// In-person roles: the default host.
    public var defaultHostName: String?
    /// In-person roles: the default host email.
    public var defaultHostEmail: String?

    /// Creates a value; see the properties.
    public init(
        roleName: String, recipientId: String, type: RecipientType, routingOrder: Int = 1,
        defaultName: String? = nil, defaultEmail: String? = nil,
        defaultHostName: String? = nil, defaultHostEmail: String? = nil
    ) {
        self.roleName = roleName
        self.recipientId = recipientId
        self.type = type
        self.routingOrder = routingOrder
        self.defaultName = defaultName
        self.defaultEmail = defaultEmail
        self.defaultHostName = defaultHostName
        self.defaultHostEmail = defaultHostEmail
    }
}

/// The lightweight listing of a template (the SDK's `DSMEnvelopeTemplateDefinition`).
public struct TemplateSummary: Hashable, Sendable, Codable {
    /// The server's template id.
    public var templateId: String
    /// The display name.
    public var name: String
    /// The folder the template is filed in.
    public var folder: String?
    /// When the template last changed on the server.
    public var lastModified: Date

    /// Creates a value; see the properties.
    public init(templateId: String, name: String, folder: String? = nil, lastModified: Date) {
        self.templateId = templateId
        self.name = name
        self.folder = folder
        self.lastModified = lastModified
    }

    /// Whether a copy cached at `cachedAt` is older than the server's and should be re-cached.
    public func isNewer(thanCachedAt cachedAt: Date) -> Bool { cachedAt < lastModified }
}

/// An envelope template: documents, recipient roles and labelled tabs.
public struct EnvelopeTemplate: Hashable, Sendable, Codable {
    /// The server's template id.
    public var templateId: String
    /// The display name.
    public var name: String
    /// The folder the template is filed in.
    public var folder: String?
    /// When the template last changed on the server.
    public var lastModified: Date
    /// The default email subject.
    public var emailSubject: String
    /// The default email message (blurb).
    public var emailMessage: String
    /// The template's documents.
    public var documents: [Document]
    /// The recipient roles.
    public var roles: [TemplateRole]
    /// Tabs; each names a role's ``TemplateRole/recipientId``.
    public var tabs: [Tab]
    /// Default custom fields.
    public var customFields: CustomFields

    /// Creates a value; see the properties.
    public init(
        templateId: String, name: String, folder: String? = nil, lastModified: Date,
        emailSubject: String = "", emailMessage: String = "",
        documents: [Document], roles: [TemplateRole], tabs: [Tab], customFields: CustomFields = CustomFields()
    ) {
        self.templateId = templateId
        self.name = name
        self.folder = folder
        self.lastModified = lastModified
        self.emailSubject = emailSubject
        self.emailMessage = emailMessage
        self.documents = documents
        self.roles = roles
        self.tabs = tabs
        self.customFields = customFields
    }

    /// The listing entry for this template.
    public var summary: TemplateSummary {
        TemplateSummary(templateId: templateId, name: name, folder: folder, lastModified: lastModified)
    }
}

/// Who fills a template role.
public struct RoleAssignment: Hashable, Sendable, Codable {
    /// The name.
    public var name: String?
    /// The email.
    public var email: String?
    /// In-person roles: the host's name.
    public var hostName: String?
    /// In-person roles: the host's email.
    public var hostEmail: String?
    /// Makes the recipient embedded (captive).
    public var clientUserId: String?

    /// Creates a value; see the properties.
    public init(name: String? = nil, email: String? = nil, hostName: String? = nil, hostEmail: String? = nil, clientUserId: String? = nil) {
        self.name = name
        self.email = email
        self.hostName = hostName
        self.hostEmail = hostEmail
        self.clientUserId = clientUserId
    }
}

/// What to fill in when composing an envelope from a template.
public struct TemplateComposition: Hashable, Sendable, Codable {
    /// Assignments by role name; roles not listed use their defaults.
    public var roles: [String: RoleAssignment]
    /// Values by tab label (text-like tabs get the value; checkboxes are selected by
    /// `"true"`, `"yes"`, `"on"`, `"x"` or `"1"`). A radio group's name selects the button with
    /// that value.
    public var tabValues: [String: String]
    /// Replaces the template's subject when set.
    public var emailSubject: String?
    /// Replaces the template's message (blurb) when set.
    public var emailMessage: String?
    /// The envelope name (default: the template name).
    public var envelopeName: String?

    /// Creates a value; see the properties.
    public init(
        roles: [String: RoleAssignment] = [:], tabValues: [String: String] = [:],
        emailSubject: String? = nil, emailMessage: String? = nil, envelopeName: String? = nil
    ) {
        self.roles = roles
        self.tabValues = tabValues
        self.emailSubject = emailSubject
        self.emailMessage = emailMessage
        self.envelopeName = envelopeName
    }
}

extension EnvelopeTemplate {
    /// Composes a validated envelope from the template.
    ///
    /// Each role takes the composition's assignment, falling back field by field to the role's
    /// defaults. A role left with neither a name nor an email is dropped with its tabs (an unused
    /// optional role). Then the envelope passes every ``EnvelopeBuilder`` rule.
    ///
    /// - Parameters:
    ///   - composition: Role assignments, tab values, subject and blurb.
    ///   - envelopeId: The device-local id.
    ///   - createdAt: The creation time.
    ///   - transactionId: The sync transaction id (default: a new UUID).
    /// - Returns: The envelope, in the ``EnvelopeLocalState/draft`` state.
    /// - Throws: ``EnvelopeValidationError``: `roles["X"]` or `tabValues["L"]` for names the
    ///   template lacks, or the first envelope rule broken.
    public func compose(
        _ composition: TemplateComposition,
        envelopeId: String = UUID().uuidString,
        createdAt: Date = Date(),
        transactionId: String = UUID().uuidString
    ) throws(EnvelopeValidationError) -> Envelope {
        let roleNames = Set(roles.map(\.roleName))
        for name in composition.roles.keys.sorted() where !roleNames.contains(name) {
            throw EnvelopeValidationError(
                code: .unknownTemplateRole, field: "roles[\"\(name)\"]",
                message: "template '\(templateId)' has no role '\(name)'; use one of \(roleNames.sorted())")
        }
        let labels = Set(tabs.filter { $0.type != .radio }.compactMap(\.label) + tabs.filter { $0.type == .radio }.compactMap(\.groupName))
        for label in composition.tabValues.keys.sorted() where !labels.contains(label) {
            throw EnvelopeValidationError(
                code: .unknownTemplateTabLabel, field: "tabValues[\"\(label)\"]",
                message: "template '\(templateId)' has no tab labelled '\(label)'; use one of \(labels.sorted())")
        }

        var builder = EnvelopeBuilder()
            .envelopeName(composition.envelopeName ?? name)
            .emailSubject(composition.emailSubject ?? emailSubject)
            .emailMessage(composition.emailMessage ?? emailMessage)
            .customFields(customFields)
            .templateId(templateId)
            .transactionId(transactionId)
        for document in documents { builder = builder.addDocument(document) }
        var kept: Set<String> = []
        for role in roles {
            let given = composition.roles[role.roleName] ?? RoleAssignment()
            let name = given.name ?? role.defaultName
            let email = given.email ?? role.defaultEmail
            if EnvelopeValidator.isBlank(name), EnvelopeValidator.isBlank(email) { continue }
            kept.insert(role.recipientId)
            builder = builder.addRecipient(Recipient(
                recipientId: role.recipientId, type: role.type, name: name ?? "", email: email,
                routingOrder: role.routingOrder, clientUserId: given.clientUserId,
                hostName: given.hostName ?? role.defaultHostName, hostEmail: given.hostEmail ?? role.defaultHostEmail))
        }
        for tab in tabs where kept.contains(tab.recipientId) {
            builder = builder.addTab(Self.fill(tab, with: composition.tabValues))
        }
        return try builder.build(envelopeId: envelopeId, createdAt: createdAt)
    }

    static func fill(_ tab: Tab, with values: [String: String]) -> Tab {
        var tab = tab
        if tab.type == .radio {
            if let group = tab.groupName, let chosen = values[group] { tab.selected = tab.value == chosen }
            return tab
        }
        guard let label = tab.label, let value = values[label] else { return tab }
        if tab.type == .checkbox {
            tab.selected = ["true", "yes", "on", "x", "1"].contains(value.lowercased())
        } else {
            tab.value = value
        }
        return tab
    }
}
