import ArgumentParser
import Coordinator
import Envelopes
import FleetProtocol
import Foundation

/// `signfleet admin templates`: creates, lists and edits an account's templates in a coordinator store.
struct AdminTemplatesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "templates",
        abstract: "Create, list and edit an account's templates (devices re-cache edited ones).",
        subcommands: [CreateSample.self, List.self, ReplaceDocument.self, SetTab.self]
    )

    struct Target: ParsableArguments {
        @OptionGroup var store: AdminCommand.StoreOption
        @Option(help: "The account's id.") var account = "demo"

        func catalog() async throws -> TemplateCatalog {
            let storage = try await store.storage()
            return TemplateCatalog(storage: storage, auth: AuthService(storage: storage))
        }
    }

    static func describe(_ summary: FleetProtocol.TemplateSummary) -> String {
        let stamp = ISO8601DateFormatter.string(from: summary.lastModified, timeZone: .gmt, formatOptions: [.withInternetDateTime, .withFractionalSeconds])
        return "template \(summary.templateID) \"\(summary.name)\" folder=\(summary.folder ?? "-") lastModified=\(stamp)"
    }

    /// Runs a catalog call; a `FleetError` is printed to standard error and exits with status 1.
    static func run<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as FleetError {
            FileHandle.standardError.write(Data("error: \(error.code): \(error.message)\n".utf8))
            throw ExitCode.failure
        }
    }

    struct CreateSample: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "create-sample",
            abstract: "Create a template with a generated PDF, a 'Client' (in person) and a 'Manager' role.")
        @OptionGroup var target: Target
        @Option(help: "Template name (1 to 200 characters).") var name: String
        @Option(help: "Folder (1 to 100 characters).") var folder: String?
        @Option(help: "Template id (letters, digits, '-', '_', '.'; default: a new UUID).") var id: String?
        @Option(help: "Pages of the generated PDF (1 to 50).") var pages = 1

        func run() async throws {
            guard (1...50).contains(pages) else { throw ValidationError("--pages must be 1 to 50") }
            let template = TemplateCatalog.sampleTemplate(id: id ?? UUID().uuidString, name: name, folder: folder, pages: pages)
            let catalog = try await target.catalog()
            let summary = try await AdminTemplatesCommand.run { try await catalog.create(accountID: target.account, template: template) }
            print(AdminTemplatesCommand.describe(summary))
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "List an account's templates (all pages).")
        @OptionGroup var target: Target
        @Option(help: "Search text matched against names.") var search: String?
        @Option(help: "How --search matches: contains, exact, prefix or suffix.") var match = "contains"
        @Option(help: "Only templates in this folder.") var folder: String?

        func run() async throws {
            guard let nameMatch = NameMatch(rawValue: match) else {
                throw ValidationError("--match must be contains, exact, prefix or suffix")
            }
            let catalog = try await target.catalog()
            var start: UInt32? = 0
            var shown = 0
            while let from = start {
                let page = try await AdminTemplatesCommand.run {
                    try await catalog.list(accountID: target.account, searchText: search, nameMatch: nameMatch, folder: folder, start: from, count: 100)
                }
                page.templates.forEach { print(AdminTemplatesCommand.describe($0)) }
                shown += page.templates.count
                start = page.nextStart
                if start == nil { print("\(shown) of \(page.total) templates") }
            }
        }
    }

    struct ReplaceDocument: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "replace-document",
            abstract: "Replace a template document's PDF (the document id is kept; lastModified is bumped).")
        @OptionGroup var target: Target
        @Option(help: "The template's id.") var id: String
        @Option(help: "The document's id.") var document = "doc1"
        @Option(help: "A PDF file (at most 8 MiB).") var pdf: String?
        @Option(help: "Instead of --pdf: generate a PDF with this many pages (1 to 50).") var samplePages: Int?
        @Option(help: "Tabs on pages the new PDF lacks: refuse, move-to-last-page or remove.") var tabs = "refuse"

        func run() async throws {
            guard let rule = TabPageRule(rawValue: tabs) else {
                throw ValidationError("--tabs must be refuse, move-to-last-page or remove")
            }
            let bytes: Data
            switch (pdf, samplePages) {
            case (let path?, nil):
                let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0
                guard size <= TemplateCatalog.maxDocumentBytes else {
                    throw ValidationError("\(path) is \(size) bytes; a template document may be at most \(TemplateCatalog.maxDocumentBytes)")
                }
                do {
                    bytes = try Data(contentsOf: URL(fileURLWithPath: path))
                } catch {
                    throw ValidationError("cannot read \(path): \(error)")
                }
            case (nil, let pages?):
                guard (1...50).contains(pages) else { throw ValidationError("--sample-pages must be 1 to 50") }
                bytes = SamplePDF.make(pages: pages, title: "Replaced document")
            default:
                throw ValidationError("give exactly one of --pdf FILE or --sample-pages N")
            }
            let catalog = try await target.catalog()
            let result = try await AdminTemplatesCommand.run {
                try await catalog.replaceDocument(accountID: target.account, templateID: id, documentID: document, pdf: bytes, rule: rule)
            }
            print(AdminTemplatesCommand.describe(result.summary))
            if !result.movedTabs.isEmpty { print("moved tabs \(result.movedTabs) to the new last page") }
            if !result.removedTabs.isEmpty { print("removed tabs \(result.removedTabs)") }
        }
    }

    struct SetTab: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "set-tab", abstract: "Change a tab's value, label, page or position (lastModified is bumped).")
        @OptionGroup var target: Target
        @Option(help: "The template's id.") var id: String
        @Option(help: "The tab's tabId.") var tabId: String?
        @Option(help: "Instead of --tab-id: the tab's 0-based index.") var index: Int?
        @Option(help: "New value.") var value: String?
        @Option(help: "New label.") var label: String?
        @Option(help: "New page (1 ... the document's pages).") var page: Int?
        @Option(help: "New distance from the left edge.") var x: Double?
        @Option(help: "New distance from the top edge.") var y: Double?

        func run() async throws {
            let reference: TabReference
            switch (tabId, index) {
            case (let id?, nil): reference = .tabId(id)
            case (nil, let position?): reference = .index(position)
            default: throw ValidationError("give exactly one of --tab-id or --index")
            }
            let change = TabChange(value: value, label: label, pageNumber: page, x: x, y: y)
            let catalog = try await target.catalog()
            let result = try await AdminTemplatesCommand.run {
                try await catalog.editTab(accountID: target.account, templateID: id, tab: reference, change: change)
            }
            print(AdminTemplatesCommand.describe(result.summary))
        }
    }
}
