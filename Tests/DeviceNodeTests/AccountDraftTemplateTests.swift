@testable import DeviceNode
import Envelopes
import Foundation
import Logging
import Testing

@Suite("Account, drafts, templates, configuration")
struct AccountDraftTemplateTests {
    @Test("API timeout is clamped to 30...1200 s, from properties and from SDK keys")
    func apiTimeoutClamping() throws {
        var configuration = DeviceConfiguration(storePath: "/tmp/x")
        #expect(configuration.apiTimeout == 60)
        #expect(configuration.saveProgressAfterEachLocalSigner)
        configuration.apiTimeout = 5
        #expect(configuration.apiTimeout == 30)
        configuration.apiTimeout = 5000
        #expect(configuration.apiTimeout == 1200)
        configuration.apiTimeout = 90
        #expect(configuration.apiTimeout == 90)
        #expect(DeviceConfiguration(storePath: "/tmp/x", apiTimeout: -1).apiTimeout == 30)
        #expect(DeviceConfiguration(storePath: "/tmp/x", apiTimeout: .nan).apiTimeout == 60)

        var keys = DeviceConfiguration.defaultConfigurations()
        #expect(keys[DeviceConfiguration.Key.saveEnvelopeProgress] == "true")
        keys[DeviceConfiguration.Key.apiTimeout] = "5"
        keys[DeviceConfiguration.Key.saveEnvelopeProgress] = "false"
        let fromKeys = try DeviceConfiguration(storePath: "/tmp/x", configurations: keys)
        #expect(fromKeys.apiTimeout == 30)
        #expect(!fromKeys.saveProgressAfterEachLocalSigner)
        keys[DeviceConfiguration.Key.apiTimeout] = "2000"
        #expect(try DeviceConfiguration(storePath: "/tmp/x", configurations: keys).apiTimeout == 1200)
        keys[DeviceConfiguration.Key.apiTimeout] = "soon"
        #expect(throws: DeviceNodeError.self) { try DeviceConfiguration(storePath: "/tmp/x", configurations: keys) }
    }

    @Test("offline login uses the persisted account; logout clears it")
    func offlineLogin() async throws {
        let directory = try TempDirectory()
        let first = try await Fixture.make(directory: directory)
        #expect(await first.node.currentAccount?.user == hostUser)
        #expect(await first.node.currentAccount?.isOffline == false)
        try await first.node.close()

        let second = try await Fixture.make(login: false, directory: directory)
        second.accounts.setReachable(false)
        await expectDeviceError(.loginFailed) { try await second.node.login(accessToken: "token-1") }
        #expect(await second.node.currentAccount == nil)
        let account = try await second.node.loginOffline()
        #expect(account.user == hostUser)
        #expect(account.isOffline)
        #expect(account.accessToken == "token-1")
        // Offline login is enough to compose and sign.
        let id = try await second.node.compose(try SampleEnvelope.inPerson(signers: 1))
        #expect(try await second.node.resumeSigning(envelopeId: id, driver: SyntheticSigner(seed: 3)) == .completed(signed: ["1"], sequence: 1))
        try await second.node.logout(force: true)
        await expectDeviceError(.noPersistedAccount) { try await second.node.loginOffline() }
        await expectDeviceError(.accountNotLoggedIn) { _ = try await second.node.compose(try SampleEnvelope.inPerson(signers: 1)) }
    }

    @Test("logout refuses while signed envelopes are unsynced; force drops them and says what")
    func logoutGuard() async throws {
        let fixture = try await Fixture.make()
        let node = fixture.node
        // Nothing signed: logout is allowed.
        try await node.logout()
        try await node.login(accessToken: "token-1")

        let pushed = try await node.compose(try SampleEnvelope.inPerson(signers: 1, transactionId: "tx-pushed"))
        try await node.resumeSigning(envelopeId: pushed, driver: SyntheticSigner(seed: 1))
        try await node.beginSync(sequences: [1])          // a push carried item 1 (the server may have it)
        let queued = try await node.compose(try SampleEnvelope.inPerson(signers: 1, transactionId: "tx-queued"))
        try await node.resumeSigning(envelopeId: queued, driver: SyntheticSigner(seed: 2))
        let partial = try await node.compose(try SampleEnvelope.inPerson(signers: 2, transactionId: "tx-partial"))
        try await node.resumeSigning(envelopeId: partial, driver: SyntheticSigner(seed: 3, behaviour: ["2": .finishLater]))
        let untouched = try await node.compose(try SampleEnvelope.inPerson(signers: 1, transactionId: "tx-untouched"))

        let refused = await expectDeviceError(.unsyncedEnvelopes) { try await node.logout() }
        #expect(refused?.message.contains(partial) == true)
        #expect(refused?.message.contains(queued) == true)
        #expect(await node.currentAccount != nil)

        let report = try await node.logout(force: true)
        #expect(Set(report.droppedEnvelopes.map(\.transactionId)) == ["tx-queued", "tx-partial"], "signed work lost")
        #expect(report.clearedEnvelopes.map(\.transactionId) == ["tx-untouched"], "composed, never signed: nothing lost")
        #expect(report.droppedSequences == [2])
        #expect(report.keptInFlight == [1])
        #expect(try await node.cacheState(envelopeId: untouched) == nil)
        #expect(await node.currentAccount == nil)

        // Numbering stays gapless: the next envelope takes 2 again (never pushed before).
        try await node.login(accessToken: "token-1")
        let next = try await node.compose(try SampleEnvelope.inPerson(signers: 1, transactionId: "tx-next"))
        #expect(try await node.resumeSigning(envelopeId: next, driver: SyntheticSigner(seed: 4)) == .completed(signed: ["1"], sequence: 2))
        let audit = try await node.auditStore()
        #expect(audit.isConsistent, "\(audit)")
        #expect(audit.sequences == [1, 2])
    }

    @Test("one draft at a time: save, refuse a second, replace, compose (resume) or discard")
    func drafts() async throws {
        let fixture = try await Fixture.make()
        let node = fixture.node
        #expect(try await node.hasCachedDraft() == false)
        let draft = try SampleEnvelope.inPerson(signers: 1, transactionId: "tx-draft-1")
        try await node.saveDraft(draft)
        #expect(try await node.hasCachedDraft())
        #expect(try await node.cachedDraft()?.documents.first?.pdfBytes == draft.documents.first?.pdfBytes)
        let second = try SampleEnvelope.inPerson(signers: 2, transactionId: "tx-draft-2")
        await expectDeviceError(.draftExists) { try await node.saveDraft(second) }
        try await node.saveDraft(second, replacingExisting: true)
        #expect(try await node.cachedDraft()?.transactionId == "tx-draft-2")

        let id = try await node.composeDraft()
        #expect(try await node.hasCachedDraft() == false)
        #expect(try await node.cacheState(envelopeId: id) == .cached)
        #expect(try await node.cachedEnvelope(id: id)?.recipients.count == 2)
        await expectDeviceError(.noDraft) { _ = try await node.composeDraft() }
        await expectDeviceError(.noDraft) { try await node.discardDraft() }

        // An invalid draft stays a draft when composing it fails.
        var broken = draft
        broken.transactionId = "tx-draft-3"
        broken.tabs = []
        try await node.saveDraft(broken)
        await expectDeviceError(.invalidEnvelope) { _ = try await node.composeDraft() }
        #expect(try await node.hasCachedDraft())
        try await node.discardDraft()
        #expect(try await node.hasCachedDraft() == false)
    }

    static func template(lastModified: Date) throws -> EnvelopeTemplate {
        let document = try DocumentBuilder().documentId("doc1").name("Lease").pdfBytes(SamplePDF.make(pages: 1)).build()
        return EnvelopeTemplate(
            templateId: "tpl-lease", name: "Lease", folder: "Housing", lastModified: lastModified,
            emailSubject: "Lease", emailMessage: "Template blurb", documents: [document],
            roles: [
                TemplateRole(roleName: "Tenant", recipientId: "1", type: .inPersonSigner, routingOrder: 1,
                             defaultName: "Default Tenant", defaultHostName: "Ann Host", defaultHostEmail: "host@example.com"),
                TemplateRole(roleName: "Landlord", recipientId: "2", type: .signer, routingOrder: 2,
                             defaultName: "Lou Landlord", defaultEmail: "lou@example.com"),
            ],
            tabs: [
                Tab(type: .signHere, documentId: "doc1", recipientId: "1", pageNumber: 1, frame: TabFrame(x: 50, y: 600, width: 150, height: 40)),
                Tab(type: .text, documentId: "doc1", recipientId: "1", pageNumber: 1, frame: TabFrame(x: 50, y: 100, width: 150, height: 20), label: "rent"),
                Tab(type: .signHere, documentId: "doc1", recipientId: "2", pageNumber: 1, frame: TabFrame(x: 300, y: 600, width: 150, height: 40)),
            ])
    }

    @Test("templates: cache with cached time, compose with defaults, auto-update re-caches only newer ones")
    func templates() async throws {
        let fixture = try await Fixture.make()
        let node = fixture.node
        let events = node.events()
        let start = fixture.clock.now
        fixture.templates.upsert(try Self.template(lastModified: start.addingTimeInterval(-3600)))
        #expect(try await node.listTemplates().map(\.templateId) == ["tpl-lease"])
        let cached = try await node.cacheTemplate(id: "tpl-lease")
        #expect(cached.cachedAt > start)
        #expect(try await node.cachedTemplates().map(\.cachedAt) == [cached.cachedAt])

        // Compose with envelope defaults: role defaults, tab values by label, subject and blurb.
        let id = try await node.compose(fromTemplate: "tpl-lease", TemplateComposition(
            roles: ["Tenant": RoleAssignment(name: "Tina Tenant")], tabValues: ["rent": "1200"],
            emailSubject: "Your lease", emailMessage: "Please sign"), transactionId: "tx-lease")
        let envelope = try #require(try await node.cachedEnvelope(id: id))
        #expect(envelope.templateId == "tpl-lease")
        #expect(envelope.emailSubject == "Your lease")
        #expect(envelope.emailMessage == "Please sign")
        #expect(envelope.recipient(id: "1")?.name == "Tina Tenant")
        #expect(envelope.recipient(id: "1")?.hostEmail == "host@example.com")
        #expect(envelope.recipient(id: "2")?.email == "lou@example.com")
        #expect(envelope.tabs.first { $0.label == "rent" }?.value == "1200")
        // The in-person tenant signs; the landlord is remote, so it is ready for sync.
        #expect(try await node.resumeSigning(envelopeId: id, driver: SyntheticSigner(seed: 9)) == .completed(signed: ["1"], sequence: 1))
        await expectDeviceError(.templateNotCached) { _ = try await node.compose(fromTemplate: "tpl-none") }

        // The decision itself.
        let summary = try Self.template(lastModified: start).summary
        #expect(DeviceNode.shouldRecache(cachedAt: start.addingTimeInterval(-1), server: summary))
        #expect(!DeviceNode.shouldRecache(cachedAt: start, server: summary))
        #expect(!DeviceNode.shouldRecache(cachedAt: start.addingTimeInterval(1), server: summary))

        // Server copy older than the cached one: nothing to do.
        let quiet = try await node.autoUpdateCachedTemplates()
        #expect(quiet.map(\.action) == [.upToDate])
        // Edited on the server after caching: re-cached.
        var edited = try Self.template(lastModified: fixture.clock.now.addingTimeInterval(60))
        edited.emailMessage = "New blurb"
        fixture.templates.upsert(edited)
        let update = try await node.autoUpdateCachedTemplates()
        #expect(update.map(\.action) == [.recached])
        let recached = try #require(try await node.cachedTemplates().first)
        #expect(recached.template.emailMessage == "New blurb")
        #expect(recached.cachedAt > cached.cachedAt)

        let seen = try await collect(events) { if case .templateCached(let t) = $0 { return t.isUpdate } else { return false } }
        let templateEvents = seen.compactMap { if case .templateCached(let t) = $0 { return t.isUpdate } else { return nil } }
        #expect(templateEvents == [false, true])
    }
}
