import Foundation

/// How a template name is matched by ``TemplateListRequest``.
public enum NameMatch: String, Sendable, Hashable, Codable {
    case contains, exact, prefix, suffix
}

/// Lists the account's templates, a page at a time.
public struct TemplateListRequest: FleetRequest, Hashable {
    public typealias Reply = TemplateListReply
    public static let messageType: MessageType = "templates.list"

    public var accessToken: String
    public var searchText: String?
    public var nameMatch: NameMatch
    public var folder: String?
    /// Index of the first template to return (0-based).
    public var start: UInt32
    /// Page size, 1...100.
    public var count: UInt32

    public init(
        accessToken: String, searchText: String? = nil, nameMatch: NameMatch = .contains, folder: String? = nil,
        start: UInt32 = 0, count: UInt32 = 20
    ) {
        self.accessToken = accessToken
        self.searchText = searchText
        self.nameMatch = nameMatch
        self.folder = folder
        self.start = start
        self.count = count
    }
}

public struct TemplateSummary: Sendable, Hashable, Codable {
    public var templateID: String
    public var name: String
    public var folder: String?
    public var lastModified: Date

    public init(templateID: String, name: String, folder: String?, lastModified: Date) {
        self.templateID = templateID
        self.name = name
        self.folder = folder
        self.lastModified = lastModified
    }
}

public struct TemplateListReply: FleetMessageBody, Hashable {
    public static let messageType: MessageType = "templates.list.reply"

    public var templates: [TemplateSummary]
    /// How many templates match in all.
    public var total: UInt32
    /// The `start` of the next page, absent on the last page.
    public var nextStart: UInt32?

    public init(templates: [TemplateSummary], total: UInt32, nextStart: UInt32?) {
        self.templates = templates
        self.total = total
        self.nextStart = nextStart
    }
}

/// Fetches one template in full, for caching on the device.
public struct TemplateFetchRequest: FleetRequest, Hashable {
    public typealias Reply = TemplateFetchReply
    public static let messageType: MessageType = "templates.fetch"

    public var accessToken: String
    public var templateID: String

    public init(accessToken: String, templateID: String) {
        self.accessToken = accessToken
        self.templateID = templateID
    }
}

public struct TemplateFetchReply: FleetMessageBody, Hashable {
    public static let messageType: MessageType = "templates.fetch.reply"

    public var summary: TemplateSummary
    /// The template's definition (documents, roles, tabs) in the `Envelopes`
    /// module's canonical encoding.
    public var definition: [UInt8]

    public init(summary: TemplateSummary, definition: [UInt8]) {
        self.summary = summary
        self.definition = definition
    }
}
