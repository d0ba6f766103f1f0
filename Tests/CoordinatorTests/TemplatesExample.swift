import DeviceNode
import FleetProtocol
import FleetTesting
import Foundation
import Testing

@testable import Coordinator

/// docs/templates.md's device example (the doc shows this function's body): a node on
/// `configuration`'s store, its account and template services over `client`, logged in with `token`.
func templatesExample(configuration: DeviceConfiguration, client: any ClientTransport, token: String) async throws
    -> (node: DeviceNode, decisions: [TemplateUpdateDecision])
{
    // BEGIN EXAMPLE templates-device
    let node = try await DeviceNode.open(configuration: configuration,
                                         accountService: RemoteAccountService(client: client),
                                         templateService: RemoteTemplateService(client: client))
    try await node.login(accessToken: token)
    try await node.cacheTemplate(id: "demo-nda")
    let decisions = try await node.autoUpdateCachedTemplates()   // .recached for edited ones
    // END EXAMPLE
    return (node, decisions)
}

@Suite("docs/templates.md: devices")
struct TemplatesExampleTests {
    @Test("the device example in docs/templates.md is this file's code, verbatim")
    func docMatchesCode() throws {
        let example = try DocExample.compare("templates-device", in: "docs/templates.md", file: #filePath)
        #expect(example.shown == example.code)
    }

    @Test("the example caches a template over the wire and re-caches one edited on the server since")
    func runs() async throws {
        let rig = try await TemplateWireRig()
        let catalog = rig.fixture.catalog
        let clock = rig.fixture.clock
        _ = try await catalog.seedDemo(accountID: "acme")
        try await catalog.create(accountID: "acme", template: TemplateCatalog.sampleTemplate(id: "t-deal", name: "Deal", folder: "Sales", pages: 3))
        var configuration = DeviceConfiguration(storePath: rig.fixture.temporary.directory.appendingPathComponent("example.sqlite").path)
        configuration.clock = { clock.now() }

        // An earlier session on the same store cached t-deal; the administrator edited it since.
        clock.advance(5)
        let earlier = try await DeviceNode.open(
            configuration: configuration, accountService: RemoteAccountService(client: rig.client),
            templateService: RemoteTemplateService(client: rig.client))
        try await earlier.login(accessToken: rig.fixture.annToken)
        try await earlier.cacheTemplate(id: "t-deal")
        try await earlier.close()
        clock.advance(60)
        try await catalog.editTab(accountID: "acme", templateID: "t-deal", tab: .tabId("company"), change: TabChange(label: "employer"))
        clock.advance(5)

        let (node, decisions) = try await templatesExample(configuration: configuration, client: rig.client, token: rig.fixture.annToken)
        let actions = Dictionary(uniqueKeysWithValues: decisions.map { ($0.templateId, $0.action) })
        #expect(actions == ["demo-nda": .upToDate, "t-deal": .recached], "\(decisions)")
        let cached = try await node.cachedTemplates()
        #expect(Set(cached.map(\.template.templateId)) == ["demo-nda", "t-deal"])
        #expect(cached.first { $0.template.templateId == "t-deal" }?.template.tabs.contains { $0.label == "employer" } == true)
        try await node.close()
        await rig.tearDown()
    }
}
