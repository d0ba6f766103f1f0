import Envelopes
import FleetProtocol
import Foundation
import GRDB
import MessagePack

/// What to do with tabs on pages that a replacement document no longer has.
public enum TabPageRule: String, Sendable, Hashable, CaseIterable {
    /// Refuse the edit (`invalid_request`) and name the tabs; nothing changes. The default.
    case refuse
    /// Keep each such tab at its position on the new document's last page.
    case moveToLastPage = "move-to-last-page"
    /// Remove each such tab from the template.
    case remove
}

/// Names one tab of a template for ``TemplateCatalog/editTab(accountID:templateID:tab:change:)``.
public enum TabReference: Sendable, Hashable, CustomStringConvertible {
    /// The tab whose `tabId` is this.
    case tabId(String)
    /// The tab at this 0-based index of the template's `tabs`.
    case index(Int)

    public var description: String {
        switch self {
        case .tabId(let id): "tab '\(id)'"
        case .index(let index): "tab #\(index)"
        }
    }
}

/// The fields a tab edit changes; `nil` leaves a field as it is.
public struct TabChange: Sendable, Hashable {
    /// The new value.
    public var value: String?
    /// The new label.
    public var label: String?
    /// The new page (1 ... the document's page count).
    public var pageNumber: Int?
    /// The new distance from the left edge.
    public var x: Double?
    /// The new distance from the top edge.
    public var y: Double?

    /// Creates a change; see the properties.
    public init(value: String? = nil, label: String? = nil, pageNumber: Int? = nil, x: Double? = nil, y: Double? = nil) {
        self.value = value
        self.label = label
        self.pageNumber = pageNumber
        self.x = x
        self.y = y
    }

    /// Whether the change changes nothing.
    public var isEmpty: Bool { value == nil && label == nil && pageNumber == nil && x == nil && y == nil }
}

/// What an edit did.
public struct TemplateEditResult: Sendable, Hashable {
    /// The template's listing after the edit (with the bumped `lastModified`).
    public var summary: FleetProtocol.TemplateSummary
    /// Indexes (before the edit) of tabs moved to the new last page.
    public var movedTabs: [Int]
    /// Indexes (before the edit) of tabs removed.
    public var removedTabs: [Int]
}

/// The coordinator's per-account envelope templates: created and edited by an administrator,
/// listed and fetched by devices (`templates.list`, `templates.fetch`).
///
/// Each template is one row: its id, account, name, folder, `lastModified` (milliseconds since
/// 1970) and its definition, the MessagePack encoding of `EnvelopeTemplate` whose
/// `templateId`, `name`, `folder` and `lastModified` equal the row's. Every edit bumps
/// `lastModified` to a strictly later time, so a device's auto-update re-caches the template.
///
/// A replaced document keeps its `documentId`, so the tabs on it still find it; tabs on pages
/// the new document lacks follow a ``TabPageRule``.
public struct TemplateCatalog: Sendable {
    let store: any CoordinatorStorage
    let auth: AuthService
    let now: @Sendable () -> Date

    /// The largest page `templates.list` returns.
    public static let maxPageSize: UInt32 = 100
    /// The longest search text, in characters.
    public static let maxSearchTextLength = 200
    /// The largest PDF a template document may be.
    public static let maxDocumentBytes = 8 << 20
    /// The largest encoded definition (it must fit in one reply frame with room to spare).
    public static let maxDefinitionBytes = 12 << 20
    /// The most documents a template may have.
    public static let maxDocuments = 20
    /// The most tabs a template may have.
    public static let maxTabs = 2_000

    /// Creates the catalog over `store`; `auth` checks the access tokens of device requests.
    public init(store: CoordinatorStore, auth: AuthService, now: @escaping @Sendable () -> Date = WallClock.system.now) {
        self.init(storage: store, auth: auth, now: now)
    }

    package init(storage store: any CoordinatorStorage, auth: AuthService, now: @escaping @Sendable () -> Date = WallClock.system.now) {
        self.store = store
        self.auth = auth
        self.now = now
    }

    // MARK: Device requests

    /// Serves `templates.list`: the token's account's templates matching the request, one page.
    /// - Throws: `FleetError` `unauthenticated` / `token_expired`, or `invalid_request` for a
    ///   count outside 1...100 or a search text over 200 characters.
    public func list(
        _ request: TemplateListRequest, meter: (Account) throws -> Void = { _ in }
    ) async throws -> TemplateListReply {
        let (_, account) = try await auth.authenticate(request.accessToken)
        try meter(account)
        return try await list(
            accountID: account.id, searchText: request.searchText, nameMatch: request.nameMatch, folder: request.folder,
            start: request.start, count: request.count)
    }

    /// Serves `templates.fetch`: one template of the token's account, with its definition bytes.
    /// - Throws: `FleetError` `unauthenticated` / `token_expired`, or `not_found` when the
    ///   account has no such template (also for another account's template).
    public func fetch(
        _ request: TemplateFetchRequest, meter: (Account) throws -> Void = { _ in }
    ) async throws -> TemplateFetchReply {
        let (_, account) = try await auth.authenticate(request.accessToken)
        try meter(account)
        let record = try await record(accountID: account.id, id: request.templateID)
        return TemplateFetchReply(summary: record.summary, definition: Array(record.definition))
    }

    // MARK: Queries

    /// One page of an account's templates, ordered by name (case-insensitively), then id.
    ///
    /// `searchText` (trimmed; empty or `nil` matches every name) is compared with the name
    /// case-insensitively (ASCII letters) as `nameMatch` says. `folder`, when given, keeps only
    /// templates in exactly that folder (case-insensitively).
    /// - Returns: the page, the number of matches in all, and the next page's `start` unless
    ///   this is the last page.
    public func list(
        accountID: String, searchText: String? = nil, nameMatch: NameMatch = .contains, folder: String? = nil,
        start: UInt32 = 0, count: UInt32 = 20
    ) async throws -> TemplateListReply {
        guard (1...Self.maxPageSize).contains(count) else {
            throw FleetError(.invalidRequest, "count is \(count); ask for 1 to \(Self.maxPageSize) templates a page")
        }
        let text = searchText?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
        guard text.count <= Self.maxSearchTextLength else {
            throw FleetError(.invalidRequest, "searchText has \(text.count) characters; use at most \(Self.maxSearchTextLength)")
        }
        if let folder { try Self.checkText(folder, "folder", max: 100) }
        let (total, rows) = try await store.templates(
            accountID: accountID, filter: TemplateFilter(text: text, match: nameMatch, folder: folder), start: Int(start), count: Int(count))
        let end = Int(start) + rows.count
        return TemplateListReply(
            templates: rows.map(\.summary), total: UInt32(clamping: total),
            nextStart: end < total && !rows.isEmpty ? UInt32(clamping: end) : nil)
    }

    /// One template of an account, decoded.
    /// - Throws: `FleetError` `not_found`.
    public func template(accountID: String, id: String) async throws -> EnvelopeTemplate {
        try Self.decode(try await record(accountID: accountID, id: id))
    }

    // MARK: Administration

    /// Adds a template to an account (administrators only; not reachable over the wire).
    ///
    /// The template's `lastModified` is set to now; each document's page count is read from its PDF.
    /// - Throws: `FleetError` `not_found` for an unknown account, `invalid_request` for an
    ///   invalid template (the message names the field) or an id already used.
    @discardableResult
    public func create(accountID: String, template: EnvelopeTemplate) async throws -> FleetProtocol.TemplateSummary {
        var template = template
        try Self.checkText(template.templateId, "templateId", max: 100)
        guard template.templateId.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "-_.".contains($0)) }) else {
            throw FleetError(.invalidRequest, "templateId '\(template.templateId)' may hold only letters, digits, '-', '_' and '.'")
        }
        let stamp = Self.millisecondDate(now())
        template.lastModified = stamp
        template = try Self.validated(template)
        let definition = try Self.encode(template)
        let record = TemplateRecord(
            id: template.templateId, accountID: accountID, name: template.name, folder: template.folder,
            lastModified: Self.milliseconds(stamp), definition: definition)
        do {
            try await store.insertTemplate(record)
        } catch let error as FleetError where error.code == .notFound {
            throw FleetError(.notFound, "no account '\(accountID)'; create it first (signfleet admin create-account)")
        }
        return record.summary
    }

    /// Replaces one document's PDF, keeping its `documentId` (so tabs still find it) and bumping
    /// `lastModified`.
    ///
    /// The page count is read from the new PDF. Tabs on the document's pages past the new count
    /// follow `rule`: ``TabPageRule/refuse`` (the default) changes nothing and throws;
    /// ``TabPageRule/moveToLastPage`` keeps them at their position on the new last page;
    /// ``TabPageRule/remove`` drops them.
    /// - Throws: `FleetError` `not_found` (template or document), `invalid_request` (not a
    ///   PDF, too large, or tabs past the new last page with ``TabPageRule/refuse``).
    @discardableResult
    public func replaceDocument(
        accountID: String, templateID: String, documentID: String, pdf: Data, name: String? = nil, rule: TabPageRule = .refuse
    ) async throws -> TemplateEditResult {
        let pages = try Self.pageCount(of: pdf, field: "pdf")
        if let name { try Self.checkText(name, "name", max: 200) }
        return try await edit(accountID: accountID, templateID: templateID) { template in
            guard let position = template.documents.firstIndex(where: { $0.documentId == documentID }) else {
                throw FleetError(.notFound, "template '\(templateID)' has no document '\(documentID)'; its documents are \(template.documents.map(\.documentId))")
            }
            template.documents[position].pdfBytes = pdf
            template.documents[position].pageCount = pages
            template.documents[position].sourcePath = nil
            if let name { template.documents[position].name = name }
            let overflowing = template.tabs.indices.filter { template.tabs[$0].documentId == documentID && template.tabs[$0].pageNumber > pages }
            var moved: [Int] = []
            var removed: [Int] = []
            if !overflowing.isEmpty {
                switch rule {
                case .refuse:
                    throw FleetError(
                        .invalidRequest,
                        "the new PDF has \(pages) pages but tabs \(overflowing) of template '\(templateID)' are on later pages of document '\(documentID)'; "
                            + "move or remove them (rule move-to-last-page or remove), or upload a PDF with enough pages")
                case .moveToLastPage:
                    for index in overflowing { template.tabs[index].pageNumber = pages }
                    moved = overflowing
                case .remove:
                    let drop = Set(overflowing)
                    template.tabs = template.tabs.enumerated().filter { !drop.contains($0.offset) }.map(\.element)
                    removed = overflowing
                }
            }
            return (moved, removed)
        }
    }

    /// Changes one tab's value, label, page or position, bumping `lastModified`.
    /// - Throws: `FleetError` `not_found` (template or tab), `invalid_request` (nothing to
    ///   change, a page past the document's end, a negative position).
    @discardableResult
    public func editTab(accountID: String, templateID: String, tab reference: TabReference, change: TabChange) async throws -> TemplateEditResult {
        guard !change.isEmpty else {
            throw FleetError(.invalidRequest, "the tab edit changes nothing; give a value, label, page or position")
        }
        if let value = change.value, value.count > 4_000 {
            throw FleetError(.invalidRequest, "the value has \(value.count) characters; use at most 4000")
        }
        if let label = change.label { try Self.checkText(label, "label", max: 100) }
        return try await edit(accountID: accountID, templateID: templateID) { template in
            let index: Int
            switch reference {
            case .tabId(let id):
                guard let found = template.tabs.firstIndex(where: { $0.tabId == id }) else {
                    throw FleetError(.notFound, "template '\(templateID)' has no tab with tabId '\(id)'")
                }
                index = found
            case .index(let position):
                guard template.tabs.indices.contains(position) else {
                    throw FleetError(.notFound, "template '\(templateID)' has \(template.tabs.count) tabs; there is no tab #\(position)")
                }
                index = position
            }
            if let value = change.value { template.tabs[index].value = value }
            if let label = change.label { template.tabs[index].label = label }
            if let page = change.pageNumber { template.tabs[index].pageNumber = page }
            if let x = change.x { template.tabs[index].frame.x = x }
            if let y = change.y { template.tabs[index].frame.y = y }
            return ([], [])
        }
    }

    /// A small valid template: one generated PDF of `pages` pages (`doc1`), an in-person
    /// "Client" role hosted by a demo host and a remote "Manager" role, a sign-here tab for each
    /// on the last page and a text tab labelled `company` on page 1.
    public static func sampleTemplate(id: String, name: String, folder: String? = nil, pages: Int = 1) -> EnvelopeTemplate {
        let pages = min(max(pages, 1), 50)
        let pdf = SamplePDF.make(pages: pages, title: name)
        return EnvelopeTemplate(
            templateId: id, name: name, folder: folder, lastModified: Date(timeIntervalSince1970: 0),
            emailSubject: "Please sign: \(name)", emailMessage: "Sent from the \(name) template",
            documents: [Document(documentId: "doc1", name: name, pdfBytes: pdf, pageCount: pages)],
            roles: [
                TemplateRole(roleName: "Client", recipientId: "1", type: .inPersonSigner, routingOrder: 1,
                             defaultName: "Client", defaultHostName: "Demo Host", defaultHostEmail: "host@demo.example"),
                TemplateRole(roleName: "Manager", recipientId: "2", type: .signer, routingOrder: 2,
                             defaultName: "Demo Manager", defaultEmail: "manager@demo.example"),
            ],
            tabs: [
                Tab(type: .text, tabId: "company", documentId: "doc1", recipientId: "1", pageNumber: 1,
                    frame: TabFrame(x: 72, y: 120, width: 200, height: 20), label: "company"),
                Tab(type: .signHere, tabId: "client-sign", documentId: "doc1", recipientId: "1", pageNumber: pages,
                    frame: TabFrame(x: 72, y: 600, width: 150, height: 40)),
                Tab(type: .signHere, tabId: "manager-sign", documentId: "doc1", recipientId: "2", pageNumber: pages,
                    frame: TabFrame(x: 320, y: 600, width: 150, height: 40)),
            ])
    }

    /// Creates the demo templates (`demo-nda` in folder Legal, `demo-onboarding` in folder HR)
    /// in `accountID` unless they exist.
    /// - Returns: the ids created now.
    @discardableResult
    public func seedDemo(accountID: String) async throws -> [String] {
        var created: [String] = []
        for (id, name, folder, pages) in [("demo-nda", "Mutual NDA", "Legal", 2), ("demo-onboarding", "Employee Onboarding", "HR", 1)] {
            if try await store.templateExists(id: id) { continue }
            do {
                try await create(accountID: accountID, template: Self.sampleTemplate(id: id, name: name, folder: folder, pages: pages))
            } catch let error as FleetError where error.code == .invalidRequest {
                // Another coordinator on the same store seeded it in between.
                if try await store.templateExists(id: id) { continue }
                throw error
            }
            created.append(id)
        }
        return created
    }

    // MARK: Internals

    /// Reads, edits, validates and stores a template in one transaction, bumping `lastModified`
    /// to `max(now, previous + 1 ms)` so that it always moves forward.
    private func edit(
        accountID: String, templateID: String,
        _ change: @escaping @Sendable (inout EnvelopeTemplate) throws -> (moved: [Int], removed: [Int])
    ) async throws -> TemplateEditResult {
        let at = now()
        let stamp = Self.milliseconds(at)
        let result = try await store.updateTemplate(accountID: accountID, id: templateID, at: at) { record in
            var template = try Self.decode(record)
            let (moved, removed) = try change(&template)
            let bumped = max(stamp, record.lastModified + 1)
            template.lastModified = Date(timeIntervalSince1970: Double(bumped) / 1000)
            template = try Self.validated(template)
            record.lastModified = bumped
            record.definition = try Self.encode(template)
            return TemplateEditResult(summary: record.summary, movedTabs: moved, removedTabs: removed)
        }
        guard let result else { throw Self.notFound(templateID) }
        return result
    }

    private func record(accountID: String, id: String) async throws -> TemplateRecord {
        guard let record = try await store.template(accountID: accountID, id: id) else { throw Self.notFound(id) }
        return record
    }

    static func notFound(_ id: String) -> FleetError {
        // Another account's template is reported the same way, so ids cannot be probed.
        FleetError(.notFound, "no template '\(id)' in this account; list the templates (templates.list) for valid ids")
    }

    /// Checks a template's structure and sets each document's page count from its PDF.
    static func validated(_ template: EnvelopeTemplate) throws -> EnvelopeTemplate {
        var template = template
        try checkText(template.name, "name", max: 200)
        if let folder = template.folder { try checkText(folder, "folder", max: 100) }
        guard (1...maxDocuments).contains(template.documents.count) else {
            throw FleetError(.invalidRequest, "the template has \(template.documents.count) documents; give 1 to \(maxDocuments)")
        }
        guard template.tabs.count <= maxTabs else {
            throw FleetError(.invalidRequest, "the template has \(template.tabs.count) tabs; use at most \(maxTabs)")
        }
        var pages: [String: Int] = [:]
        for index in template.documents.indices {
            let document = template.documents[index]
            try checkText(document.documentId, "documents[\(index)].documentId", max: 100)
            guard pages[document.documentId] == nil else {
                throw FleetError(.invalidRequest, "documents[\(index)]: documentId '\(document.documentId)' is used twice; ids must be unique")
            }
            let count = try pageCount(of: document.pdfBytes, field: "documents[\(index)].pdfBytes")
            template.documents[index].pageCount = count
            pages[document.documentId] = count
        }
        var recipients: Set<String> = []
        var roleNames: Set<String> = []
        for (index, role) in template.roles.enumerated() {
            guard roleNames.insert(role.roleName).inserted, recipients.insert(role.recipientId).inserted else {
                throw FleetError(.invalidRequest, "roles[\(index)]: role name '\(role.roleName)' or recipient id '\(role.recipientId)' is used twice")
            }
        }
        for (index, tab) in template.tabs.enumerated() {
            guard let count = pages[tab.documentId] else {
                throw FleetError(.invalidRequest, "tabs[\(index)] is on document '\(tab.documentId)', which the template does not have")
            }
            guard recipients.contains(tab.recipientId) else {
                throw FleetError(.invalidRequest, "tabs[\(index)] is for recipient '\(tab.recipientId)', which no role has")
            }
            guard (1...count).contains(tab.pageNumber) else {
                throw FleetError(.invalidRequest, "tabs[\(index)] is on page \(tab.pageNumber) of document '\(tab.documentId)', which has \(count) pages")
            }
            guard tab.frame.x >= 0, tab.frame.y >= 0, tab.frame.x.isFinite, tab.frame.y.isFinite else {
                throw FleetError(.invalidRequest, "tabs[\(index)] has position (\(tab.frame.x), \(tab.frame.y)); use non-negative numbers")
            }
        }
        return template
    }

    static func pageCount(of pdf: Data, field: String) throws -> Int {
        guard pdf.count <= maxDocumentBytes else {
            throw FleetError(.invalidRequest, "\(field) is \(pdf.count) bytes; a template document may be at most \(maxDocumentBytes) bytes")
        }
        do {
            return try PDFInspector(limits: PDFInspector.Limits(maxBytes: maxDocumentBytes)).inspect(pdf).pageCount
        } catch {
            throw FleetError(.invalidRequest, "\(field) is not a usable PDF: \(error)")
        }
    }

    static func encode(_ template: EnvelopeTemplate) throws -> Data {
        let bytes = try MessagePackEncoder().encodeData(template)
        guard bytes.count <= maxDefinitionBytes else {
            throw FleetError(.invalidRequest, "the template encodes to \(bytes.count) bytes; the limit is \(maxDefinitionBytes); use smaller PDFs")
        }
        return bytes
    }

    static func decode(_ record: TemplateRecord) throws -> EnvelopeTemplate {
        do {
            return try MessagePackDecoder().decode(EnvelopeTemplate.self, from: record.definition)
        } catch {
            throw FleetError(.internal, "the stored definition of template '\(record.id)' is unreadable: \(error)")
        }
    }

    static func checkText(_ value: String, _ field: String, max: Int) throws {
        guard !value.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty, value.count <= max else {
            throw FleetError(.invalidRequest, "\(field) must be 1 to \(max) characters, not blank")
        }
    }

    static func milliseconds(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded(.down)) }

    static func millisecondDate(_ date: Date) -> Date { Date(timeIntervalSince1970: Double(milliseconds(date)) / 1000) }
}

/// A row of the `template` table (migration `v3-templates`).
package struct TemplateRecord: Codable, FetchableRecord, PersistableRecord, Sendable {
    package static let databaseTableName = "template"
    package var id: String
    package var accountID: String
    package var name: String
    package var folder: String?
    /// Milliseconds since 1970.
    package var lastModified: Int64
    /// MessagePack of `EnvelopeTemplate`.
    package var definition: Data

    /// `lastModified` (milliseconds since 1970) as a date.
    package var lastModifiedDate: Date { Date(timeIntervalSince1970: Double(lastModified) / 1000) }

    package var summary: FleetProtocol.TemplateSummary {
        FleetProtocol.TemplateSummary(
            templateID: id, name: name, folder: folder, lastModified: Date(timeIntervalSince1970: Double(lastModified) / 1000))
    }

    package init(id: String, accountID: String, name: String, folder: String?, lastModified: Int64, definition: Data) {
        self.id = id
        self.accountID = accountID
        self.name = name
        self.folder = folder
        self.lastModified = lastModified
        self.definition = definition
    }
}
