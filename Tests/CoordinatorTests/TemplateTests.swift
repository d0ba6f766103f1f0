import DeviceNode
import Envelopes
import FleetProtocol
import FleetZeroMQTransport
import FleetTesting
import Foundation
import Logging
import MessagePack
import Testing
import ZeroMQ

@testable import Coordinator

/// Two accounts (acme with Ann, globex with Gus), a hand-moved clock, and the catalog.
struct TemplateFixture {
    let temporary: TemporaryStore
    let clock: TestClock
    let services: CoordinatorServices
    let annToken: String
    let gusToken: String

    var catalog: TemplateCatalog { services.templates }

    init() async throws {
        temporary = try TemporaryStore()
        let clock = TestClock()
        self.clock = clock
        services = CoordinatorServices(store: temporary.store, now: { clock.now() })
        _ = try await services.accounts.createAccount(id: "acme", name: "Acme")
        _ = try await services.accounts.createUser(accountID: "acme", name: "Ann", email: "ann@acme.example", secret: "secret-123")
        _ = try await services.accounts.createAccount(id: "globex", name: "Globex")
        _ = try await services.accounts.createUser(accountID: "globex", name: "Gus", email: "gus@globex.example", secret: "secret-456")
        annToken = try await services.auth.issueToken(email: "ann@acme.example", secret: "secret-123").accessToken
        gusToken = try await services.auth.issueToken(email: "gus@globex.example", secret: "secret-456").accessToken
    }

    /// Acme: five templates in three folders; Globex: one NDA of its own.
    func seedCatalog() async throws {
        for (id, name, folder) in [
            ("t-mutual", "Mutual NDA", "Legal"), ("t-addendum", "NDA Addendum", "Legal"), ("t-onboard", "Employee Onboarding", "HR"),
            ("t-sales", "Sales NDA", "Sales"), ("t-lease", "Lease 50%_off", "Housing"),
        ] {
            try await catalog.create(accountID: "acme", template: TemplateCatalog.sampleTemplate(id: id, name: name, folder: folder))
            clock.advance(1)
        }
        try await catalog.create(accountID: "globex", template: TemplateCatalog.sampleTemplate(id: "g-nda", name: "Globex NDA", folder: "Legal"))
    }

    func names(_ search: String?, _ match: NameMatch = .contains, folder: String? = nil, token: String? = nil) async throws -> [String] {
        try await catalog.list(TemplateListRequest(accessToken: token ?? annToken, searchText: search, nameMatch: match, folder: folder, count: 100))
            .templates.map(\.name)
    }
}

@Suite struct TemplateCatalogTests {
    @Test func listMatchesNamesByEachModeSearchTextAndFolder() async throws {
        let fixture = try await TemplateFixture()
        defer { fixture.temporary.remove() }
        try await fixture.seedCatalog()

        // Ordered by name, case-insensitively; no search text lists everything of the account.
        #expect(try await fixture.names(nil) == ["Employee Onboarding", "Lease 50%_off", "Mutual NDA", "NDA Addendum", "Sales NDA"])
        #expect(try await fixture.names("  ") == fixture.names(nil), "blank search text matches every name")
        #expect(try await fixture.names("nda", .contains) == ["Mutual NDA", "NDA Addendum", "Sales NDA"])
        #expect(try await fixture.names("mutual nda", .exact) == ["Mutual NDA"])
        #expect(try await fixture.names("mutual", .exact).isEmpty, "exact is the whole name")
        #expect(try await fixture.names("NDA", .prefix) == ["NDA Addendum"])
        #expect(try await fixture.names("nda", .suffix) == ["Mutual NDA", "Sales NDA"])
        #expect(try await fixture.names("lease", .prefix) == ["Lease 50%_off"])
        // LIKE wildcards in the search text are literal characters.
        #expect(try await fixture.names("%_", .contains) == ["Lease 50%_off"])
        #expect(try await fixture.names("_", .suffix).isEmpty)
        #expect(try await fixture.names("%", .exact).isEmpty)
        // Folder filter, alone and with a search.
        #expect(try await fixture.names(nil, folder: "Legal") == ["Mutual NDA", "NDA Addendum"])
        #expect(try await fixture.names(nil, folder: "legal") == ["Mutual NDA", "NDA Addendum"], "folders match case-insensitively")
        #expect(try await fixture.names("addendum", folder: "Legal") == ["NDA Addendum"])
        #expect(try await fixture.names("nda", folder: "HR").isEmpty)
        #expect(try await fixture.names(nil, folder: "Nowhere").isEmpty)
    }

    @Test func pagingReportsTotalAndNextStartAndEndsOnTheLastPage() async throws {
        let fixture = try await TemplateFixture()
        defer { fixture.temporary.remove() }
        try await fixture.seedCatalog()

        var seen: [String] = []
        var starts: [UInt32?] = []
        var start: UInt32? = 0
        while let from = start {
            let page = try await fixture.catalog.list(TemplateListRequest(accessToken: fixture.annToken, start: from, count: 2))
            #expect(page.total == 5)
            seen += page.templates.map(\.templateID)
            start = page.nextStart
            starts.append(page.nextStart)
            #expect(starts.count <= 3)
        }
        #expect(starts == [2, 4, nil])
        #expect(seen == ["t-onboard", "t-lease", "t-mutual", "t-addendum", "t-sales"], "pages join to the full, stable order")

        let exact = try await fixture.catalog.list(TemplateListRequest(accessToken: fixture.annToken, start: 3, count: 2))
        #expect(exact.templates.count == 2 && exact.nextStart == nil, "a page ending at the total is the last")
        let past = try await fixture.catalog.list(TemplateListRequest(accessToken: fixture.annToken, start: 50, count: 10))
        #expect(past.templates.isEmpty && past.total == 5 && past.nextStart == nil)
        let filtered = try await fixture.catalog.list(TemplateListRequest(accessToken: fixture.annToken, searchText: "nda", count: 1))
        #expect(filtered.total == 3 && filtered.nextStart == 1)

        await expectFleetError(.invalidRequest) {
            _ = try await fixture.catalog.list(TemplateListRequest(accessToken: fixture.annToken, count: 0))
        }
        await expectFleetError(.invalidRequest) {
            _ = try await fixture.catalog.list(TemplateListRequest(accessToken: fixture.annToken, count: 101))
        }
        await expectFleetError(.invalidRequest) {
            _ = try await fixture.catalog.list(TemplateListRequest(accessToken: fixture.annToken, searchText: String(repeating: "a", count: 201)))
        }
        let largest = try await fixture.catalog.list(TemplateListRequest(accessToken: fixture.annToken, count: 100))
        #expect(largest.templates.count == 5)
    }

    @Test func eachAccountSeesOnlyItsOwnTemplatesAndTokensAreChecked() async throws {
        let fixture = try await TemplateFixture()
        defer { fixture.temporary.remove() }
        try await fixture.seedCatalog()

        #expect(try await fixture.names("nda", token: fixture.gusToken) == ["Globex NDA"])
        #expect(try await !fixture.names("nda").contains("Globex NDA"))
        let own = try await fixture.catalog.fetch(TemplateFetchRequest(accessToken: fixture.gusToken, templateID: "g-nda"))
        #expect(own.summary.name == "Globex NDA")
        await expectFleetError(.notFound) {
            _ = try await fixture.catalog.fetch(TemplateFetchRequest(accessToken: fixture.annToken, templateID: "g-nda"))
        }
        await expectFleetError(.notFound) {
            _ = try await fixture.catalog.fetch(TemplateFetchRequest(accessToken: fixture.annToken, templateID: "no-such-template"))
        }
        await expectFleetError(.notFound) {
            try await fixture.catalog.editTab(accountID: "acme", templateID: "g-nda", tab: .index(0), change: TabChange(value: "x"))
        }
        await expectFleetError(.unauthenticated) {
            _ = try await fixture.catalog.list(TemplateListRequest(accessToken: "not-a-token"))
        }
        await expectFleetError(.unauthenticated) {
            _ = try await fixture.catalog.fetch(TemplateFetchRequest(accessToken: "not-a-token", templateID: "t-mutual"))
        }
    }

    @Test func fetchReturnsTheSummaryAndADefinitionThatDecodesToTheTemplate() async throws {
        let fixture = try await TemplateFixture()
        defer { fixture.temporary.remove() }
        let created = try await fixture.catalog.create(
            accountID: "acme", template: TemplateCatalog.sampleTemplate(id: "t-three", name: "Three pages", folder: "Legal", pages: 3))
        #expect(created.lastModified == fixture.clock.now())

        let reply = try await fixture.catalog.fetch(TemplateFetchRequest(accessToken: fixture.annToken, templateID: "t-three"))
        #expect(reply.summary == created)
        let template = try MessagePackDecoder().decode(EnvelopeTemplate.self, from: reply.definition)
        #expect(template.templateId == "t-three" && template.name == "Three pages" && template.folder == "Legal")
        #expect(abs(template.lastModified.timeIntervalSince(created.lastModified)) < 0.001)
        #expect(template.documents.map(\.pageCount) == [3])
        #expect(template.tabs.map(\.pageNumber) == [1, 3, 3])
        #expect(try await fixture.catalog.list(accountID: "acme").templates == [created])

        // Invalid templates and duplicate ids are refused with what to fix.
        await expectFleetError(.invalidRequest) {
            try await fixture.catalog.create(accountID: "acme", template: TemplateCatalog.sampleTemplate(id: "t-three", name: "Again"))
        }
        var broken = TemplateCatalog.sampleTemplate(id: "t-broken", name: "Broken")
        broken.tabs[0].documentId = "doc9"
        await expectFleetError(.invalidRequest) { try await fixture.catalog.create(accountID: "acme", template: broken) }
        broken = TemplateCatalog.sampleTemplate(id: "t-broken", name: "Broken")
        broken.documents[0].pdfBytes = Data("not a pdf".utf8)
        await expectFleetError(.invalidRequest) { try await fixture.catalog.create(accountID: "acme", template: broken) }
        await expectFleetError(.invalidRequest) {
            try await fixture.catalog.create(accountID: "acme", template: TemplateCatalog.sampleTemplate(id: "bad id!", name: "X"))
        }
        await expectFleetError(.notFound) {
            try await fixture.catalog.create(accountID: "nobody", template: TemplateCatalog.sampleTemplate(id: "t-x", name: "X"))
        }
    }

    @Test func editsBumpLastModifiedAndFollowTheTabPageRule() async throws {
        let fixture = try await TemplateFixture()
        defer { fixture.temporary.remove() }
        let catalog = fixture.catalog
        let created = try await catalog.create(accountID: "acme", template: TemplateCatalog.sampleTemplate(id: "t1", name: "Deal", pages: 3))

        // A later edit takes the clock's time.
        fixture.clock.advance(10)
        let bigger = try await catalog.replaceDocument(accountID: "acme", templateID: "t1", documentID: "doc1", pdf: SamplePDF.make(pages: 5))
        #expect(bigger.summary.lastModified == fixture.clock.now())
        #expect(bigger.summary.lastModified > created.lastModified)
        var template = try await catalog.template(accountID: "acme", id: "t1")
        #expect(template.documents[0].documentId == "doc1", "the replaced document keeps its id, so its tabs still find it")
        #expect(template.documents[0].pageCount == 5)
        #expect(template.documents[0].pdfBytes == SamplePDF.make(pages: 5))

        // With the clock standing still, an edit still moves lastModified forward (by 1 ms).
        let sameInstant = try await catalog.editTab(accountID: "acme", templateID: "t1", tab: .tabId("company"), change: TabChange(value: "Acme Ltd"))
        #expect(sameInstant.summary.lastModified > bigger.summary.lastModified)
        #expect(sameInstant.summary.lastModified.timeIntervalSince(bigger.summary.lastModified) < 0.01)

        // Fewer pages than the tabs use: refused by default, nothing changes.
        fixture.clock.advance(10)
        await expectFleetError(.invalidRequest) {
            try await catalog.replaceDocument(accountID: "acme", templateID: "t1", documentID: "doc1", pdf: SamplePDF.make(pages: 2))
        }
        #expect(try await catalog.list(accountID: "acme").templates[0].lastModified == sameInstant.summary.lastModified)
        #expect(try await catalog.template(accountID: "acme", id: "t1").documents[0].pageCount == 5)

        // Moved to the new last page: the two sign-here tabs were on page 3.
        let moved = try await catalog.replaceDocument(
            accountID: "acme", templateID: "t1", documentID: "doc1", pdf: SamplePDF.make(pages: 2), rule: .moveToLastPage)
        #expect(moved.movedTabs == [1, 2] && moved.removedTabs.isEmpty)
        template = try await catalog.template(accountID: "acme", id: "t1")
        #expect(template.tabs.map(\.pageNumber) == [1, 2, 2])
        #expect(template.tabs[1].frame == TabFrame(x: 72, y: 600, width: 150, height: 40), "a moved tab keeps its position")

        // Removed: one page left, the page-2 tabs go.
        fixture.clock.advance(10)
        let removed = try await catalog.replaceDocument(
            accountID: "acme", templateID: "t1", documentID: "doc1", pdf: SamplePDF.make(pages: 1), rule: .remove)
        #expect(removed.removedTabs == [1, 2])
        template = try await catalog.template(accountID: "acme", id: "t1")
        #expect(template.tabs.map(\.tabId) == ["company"])
        #expect(template.tabs[0].value == "Acme Ltd")

        // Tab edits: label and position; bad page, unknown tab, empty change.
        fixture.clock.advance(10)
        let relabelled = try await catalog.editTab(
            accountID: "acme", templateID: "t1", tab: .index(0), change: TabChange(label: "employer", x: 90, y: 140))
        #expect(relabelled.summary.lastModified == fixture.clock.now())
        template = try await catalog.template(accountID: "acme", id: "t1")
        #expect(template.tabs[0].label == "employer" && template.tabs[0].frame.x == 90 && template.tabs[0].frame.y == 140)
        #expect(abs(template.lastModified.timeIntervalSince(relabelled.summary.lastModified)) < 0.001, "the definition carries the bumped time")
        await expectFleetError(.invalidRequest) {
            try await catalog.editTab(accountID: "acme", templateID: "t1", tab: .index(0), change: TabChange(pageNumber: 2))
        }
        await expectFleetError(.notFound) {
            try await catalog.editTab(accountID: "acme", templateID: "t1", tab: .tabId("nope"), change: TabChange(value: "v"))
        }
        await expectFleetError(.invalidRequest) {
            try await catalog.editTab(accountID: "acme", templateID: "t1", tab: .index(0), change: TabChange())
        }
        await expectFleetError(.notFound) {
            try await catalog.replaceDocument(accountID: "acme", templateID: "t1", documentID: "doc2", pdf: SamplePDF.make(pages: 1))
        }
        await expectFleetError(.invalidRequest) {
            try await catalog.replaceDocument(accountID: "acme", templateID: "t1", documentID: "doc1", pdf: Data("%PDF-broken".utf8))
        }
        await expectFleetError(.invalidRequest) {
            try await catalog.replaceDocument(
                accountID: "acme", templateID: "t1", documentID: "doc1", pdf: Data(count: TemplateCatalog.maxDocumentBytes + 1))
        }
    }

    @Test func templatesSurviveReopeningTheStoreAndDemoSeedingAddsThemOnce() async throws {
        let fixture = try await TemplateFixture()
        defer { fixture.temporary.remove() }
        try await fixture.seedCatalog()
        let reopened = try CoordinatorStore(path: fixture.temporary.store.path)
        let catalog = TemplateCatalog(store: reopened, auth: AuthService(store: reopened))
        #expect(try await catalog.list(accountID: "acme").total == 5)

        let directory = AccountDirectory(store: reopened)
        _ = try await directory.seedDemo()
        _ = try await directory.seedDemo()
        let demo = try await catalog.list(accountID: "demo")
        #expect(demo.templates.map(\.templateID) == ["demo-onboarding", "demo-nda"])
        #expect(demo.templates.map(\.folder) == ["HR", "Legal"])
    }
}

/// A coordinator on a free TCP port and a device node whose account and template services
/// talk to it through a real FleetClient.
final class TemplateWireRig: Sendable {
    let fixture: TemplateFixture
    let context: ZMQContext
    let loop: ZMQIOLoop
    let serving: Task<Void, Never>
    let client: FleetClient
    let connection: Task<Void, Never>
    let node: DeviceNode

    init() async throws {
        fixture = try await TemplateFixture()
        var router = RequestRouter()
        fixture.services.register(in: &router)
        var logger = Logger(label: "template-rig")
        logger.logLevel = .critical
        context = try ZMQContext()
        loop = try ZMQIOLoop(context: context, label: "template-rig")
        let server = FleetServer(configuration: FleetServerConfiguration(endpoint: "tcp://127.0.0.1:*"), router: router, loop: loop, logger: logger)
        let endpoint = try await server.bind()
        serving = Task { try? await server.run() }
        let deviceID = "tablet-\(UUID().uuidString.prefix(8))"
        client = FleetClient(configuration: FleetClientConfiguration(endpoint: endpoint, deviceID: deviceID), loop: loop, logger: logger, clock: ManualClock())
        let client = self.client
        connection = Task { await client.run() }
        var configuration = DeviceConfiguration(storePath: fixture.temporary.directory.appendingPathComponent("\(deviceID).sqlite").path)
        configuration.deviceId = deviceID
        let clock = fixture.clock
        configuration.clock = { clock.now() }
        node = try await DeviceNode.open(
            configuration: configuration, accountService: RemoteAccountService(client: client),
            templateService: RemoteTemplateService(client: client), logger: logger)
    }

    func tearDown() async {
        try? await node.close()
        connection.cancel()
        await connection.value
        serving.cancel()
        await serving.value
        await loop.shutdown()
        context.shutdown()
        fixture.temporary.remove()
    }
}

@Suite struct TemplateWireTests {
    @Test func aDeviceCachesATemplateReCachesItAfterTheDocumentIsReplacedAndSignsFromIt() async throws {
        let rig = try await TemplateWireRig()
        let catalog = rig.fixture.catalog
        let clock = rig.fixture.clock
        try await catalog.create(accountID: "acme", template: TemplateCatalog.sampleTemplate(id: "t-deal", name: "Deal", folder: "Sales", pages: 3))
        try await catalog.create(accountID: "globex", template: TemplateCatalog.sampleTemplate(id: "g-secret", name: "Secret"))
        try await rig.node.login(accessToken: rig.fixture.annToken)

        // Listing over the wire: only Acme's template.
        let listed = try await rig.node.listTemplates()
        #expect(listed.map(\.templateId) == ["t-deal"])
        clock.advance(5)
        let first = try await rig.node.cacheTemplate(id: "t-deal")
        #expect(first.template.documents[0].pageCount == 3)
        #expect(first.template.documents[0].pdfBytes == SamplePDF.make(pages: 3, title: "Deal"))
        await #expect(throws: DeviceNodeError.self) { try await rig.node.cacheTemplate(id: "g-secret") }

        // Nothing changed on the server: auto-update downloads nothing.
        clock.advance(5)
        #expect(try await rig.node.autoUpdateCachedTemplates().map(\.action) == [.upToDate])

        // The administrator replaces the document with a 2-page PDF; the tabs on page 3 move.
        clock.advance(60)
        let replacement = SamplePDF.make(pages: 2, title: "Deal v2")
        let edit = try await catalog.replaceDocument(
            accountID: "acme", templateID: "t-deal", documentID: "doc1", pdf: replacement, rule: .moveToLastPage)
        #expect(edit.movedTabs == [1, 2])
        try await catalog.editTab(accountID: "acme", templateID: "t-deal", tab: .tabId("company"), change: TabChange(label: "employer"))

        clock.advance(5)
        let decisions = try await rig.node.autoUpdateCachedTemplates()
        #expect(decisions.map(\.action) == [.recached], "\(decisions)")
        let recached = try #require(try await rig.node.cachedTemplates().first)
        #expect(recached.cachedAt > first.cachedAt)
        #expect(recached.cachedAt == clock.now())
        #expect(recached.template.documents[0].documentId == "doc1")
        #expect(recached.template.documents[0].pdfBytes == replacement)
        #expect(recached.template.documents[0].pageCount == 2)
        #expect(recached.template.tabs.map(\.pageNumber) == [1, 2, 2])

        // Composing and signing from the re-cached template works: no "document not found".
        let envelopeID = try await rig.node.compose(
            fromTemplate: "t-deal",
            TemplateComposition(roles: ["Client": RoleAssignment(name: "Carla Client")], tabValues: ["employer": "Acme Ltd"]),
            transactionId: "tx-deal-1")
        let envelope = try #require(try await rig.node.cachedEnvelope(id: envelopeID))
        #expect(envelope.documents.map(\.pdfBytes) == [replacement])
        #expect(envelope.tabs.first { $0.label == "employer" }?.value == "Acme Ltd")
        let outcome = try await rig.node.resumeSigning(envelopeId: envelopeID, driver: SyntheticSigner(seed: 3))
        #expect(outcome == .completed(signed: ["1"], sequence: 1))

        // The old label is gone from the re-cached copy.
        await #expect(throws: DeviceNodeError.self) {
            try await rig.node.compose(fromTemplate: "t-deal", TemplateComposition(tabValues: ["company": "x"]), transactionId: "tx-deal-2")
        }
        await rig.tearDown()
    }

    @Test func listingOverTheWireWalksEveryPageAndFetchRefusesOtherAccounts() async throws {
        let rig = try await TemplateWireRig()
        for index in 0..<105 {
            try await rig.fixture.catalog.create(
                accountID: "acme", template: TemplateCatalog.sampleTemplate(id: String(format: "t-%03d", index), name: String(format: "Form %03d", index)))
        }
        try await rig.fixture.catalog.create(accountID: "globex", template: TemplateCatalog.sampleTemplate(id: "g-1", name: "Form 999"))
        let service = RemoteTemplateService(client: rig.client)
        let all = try await service.listTemplates(accessToken: rig.fixture.annToken)
        #expect(all.count == 105, "two pages of 100 and 5")
        #expect(all.first?.name == "Form 000" && all.last?.name == "Form 104")
        let page = try await rig.client.request(TemplateListRequest(accessToken: rig.fixture.annToken, searchText: "form 10", nameMatch: .prefix, count: 3))
        #expect(page.total == 5 && page.templates.map(\.templateID) == ["t-100", "t-101", "t-102"] && page.nextStart == 3)
        let fetched = try await service.fetchTemplate(id: "t-007", accessToken: rig.fixture.annToken)
        #expect(fetched.name == "Form 007")
        await expectFleetError(.notFound) { _ = try await service.fetchTemplate(id: "g-1", accessToken: rig.fixture.annToken) }
        await expectFleetError(.invalidRequest) {
            _ = try await rig.client.request(TemplateListRequest(accessToken: rig.fixture.annToken, count: 500))
        }
        await rig.tearDown()
    }
}

extension TemplateWireTests {
    @Test func anEditIsReCachedEvenWhenTheDeviceClockRunsAheadOfTheServers() async throws {
        let rig = try await TemplateWireRig()
        let catalog = rig.fixture.catalog
        try await catalog.create(accountID: "acme", template: TemplateCatalog.sampleTemplate(id: "t-skew", name: "Skew"))
        try await rig.node.login(accessToken: rig.fixture.annToken)
        // The device caches at server time + 30 min: its clock is half an hour ahead.
        rig.fixture.clock.advance(1800)
        let first = try await rig.node.cacheTemplate(id: "t-skew")
        rig.fixture.clock.advance(-1790)
        // The edit happens at server time + 10 s, long "before" the device's cached time.
        try await catalog.editTab(accountID: "acme", templateID: "t-skew", tab: .tabId("company"), change: TabChange(value: "Edited"))
        #expect(!DeviceNode.shouldRecache(cachedAt: first.cachedAt, server: try await rig.node.listTemplates()[0]), "the SDK's rule alone misses it")
        let decisions = try await rig.node.autoUpdateCachedTemplates()
        #expect(decisions.map(\.action) == [.recached])
        #expect(try await rig.node.cachedTemplates().first?.template.tabs.first { $0.tabId == "company" }?.value == "Edited")
        #expect(try await rig.node.autoUpdateCachedTemplates().map(\.action) == [.upToDate], "then it is current")
        await rig.tearDown()
    }
}
