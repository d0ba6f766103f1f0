import DeviceNode
import Envelopes
import FleetTesting
import Foundation
import Testing

@testable import Coordinator

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Templates over REST (docs/rest-api.md, "Templates"): through DocuSign's official Python SDK,
/// then the device rule of seed 004 — a template changed over REST is re-cached by a real device.
@Suite struct RESTTemplateTests {
    /// A composite template's document replaces a server template's only document: the template's
    /// tabs must fit it (a tab on page 2 of a one-page replacement is refused by name), and a
    /// template of two documents is refused with one.
    @Test func aCompositeDocumentMustCarryTheTemplatesTabs() throws {
        func pdf(_ pages: Int) -> String { SamplePDF.make(pages: pages, title: "T").base64EncodedString() }
        func definition(_ json: String) throws -> REST.EnvelopeDefinition {
            try JSONDecoder().decode(REST.EnvelopeDefinition.self, from: Data(json.utf8))
        }
        let template = try definition("""
            {"name": "Two pages", "documents": [{"documentId": "1", "name": "T", "documentBase64": "\(pdf(2))"}],
             "recipients": {"signers": [{"recipientId": "1", "roleName": "Client",
               "tabs": {"signHereTabs": [{"documentId": "1", "pageNumber": "2", "xPosition": "100", "yPosition": "100"}]}}]}}
            """).template(id: "t1")
        let asked = try definition(#"{"status": "sent", "templateRoles": [{"roleName": "Client", "name": "C", "email": "c@example.com"}]}"#)
        func code(_ replacement: String, _ template: EnvelopeTemplate) -> String? {
            let document = try? JSONDecoder().decode(
                REST.EnvelopeDefinition.Document.self, from: Data(#"{"documentId": "9", "name": "Own", "documentBase64": "\#(replacement)"}"#.utf8))
            do {
                _ = try asked.envelope(from: template, replacing: document, transactionID: "tx", at: Date())
                return nil
            } catch {
                return error.code
            }
        }
        #expect(code(pdf(2), template) == nil)
        #expect(code(pdf(1), template) == "TAB_PAGENUMBER_IS_NOT_IN_DOCUMENT")
        var two = template
        two.documents.append(two.documents[0])
        two.documents[1].documentId = "2"
        #expect(code(pdf(2), two) == "INVALID_REQUEST_BODY")
    }

    static let script = SyncPayloadInteropTests.repository.appendingPathComponent("Tests/interop/rest_templates.py")

    @Test(.timeLimit(.minutes(3))) func theOfficialSDKsTemplatesAndAnEnvelopeFromOneThenADeviceRecachesTheChange() async throws {
        let rig = try await CaptiveRig()
        let first = rig.temporary.directory.appendingPathComponent("nda.pdf"), second = rig.temporary.directory.appendingPathComponent("nda2.pdf")
        try SamplePDF.make(pages: 1, title: "NDA").write(to: first)
        try SamplePDF.make(pages: 2, title: "NDA v2").write(to: second)
        let python = ProcessInfo.processInfo.environment["SIGNFLEET_PYTHON"] ?? "python3"
        let (status, output, errors) = try await ChildProcess.run(
            "/usr/bin/env",
            [python, Self.script.path, "--base-url", "http://\(rig.http)", "--token=\(rig.token)", "--account", "acme", "--pdf", first.path, "--pdf2", second.path])
        try #require(status == 0, "the SDK run failed (it needs `\(python) -m pip install docusign-esign`): \(errors)")
        let out = try #require(try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any], "\(output)")

        let created = try #require(out["created"] as? [String: Any])
        let id = try #require(created["templateId"] as? String)
        #expect(created["name"] as? String == "NDA template" && created["uri"] as? String == "/templates/\(id)")
        let list = try #require(out["list"] as? [String: Any])
        #expect(list["ids"] as? [String] == [id] && list["totalSetSize"] as? String == "1", "\(list)")
        let template = try #require(out["template"] as? [String: Any])
        #expect(template["documents"] as? [[String]] == [["1", "NDA", "1"]], "\(template)")
        #expect(template["signer"] as? [String] == ["Client", "1", "1"] && template["signerTabs"] as? [String] == ["company"], "\(template)")
        #expect(template["carbonCopy"] as? [String] == ["Legal"] && template["emailSubject"] as? String == "Please sign the NDA")

        let envelope = try #require(out["envelope"] as? [String: Any])
        #expect(envelope["status"] as? String == "sent" && envelope["emailSubject"] as? String == "Please sign the NDA", "\(envelope)")
        #expect(envelope["signers"] as? [[String]] == [["Dora Template", "dora@example.com", "cu-t"]], "\(envelope)")
        #expect(envelope["carbonCopies"] as? [[String]] == [["Legal", "legal@example.com"]], "the role's defaults fill a role not given")
        #expect(envelope["company"] as? [String] == ["Acme AG"], "a template role's tab value by label")
        let envelopeID = try #require(envelope["envelopeId"] as? String)
        let stored = try #require(try await rig.services.envelopes.store.envelope(id: envelopeID, accountID: "acme"))
        #expect(try CaptiveSigningService.payload(of: stored.envelope).templateId == id, "the synced payload names its template")

        let composite = try #require(out["composite"] as? [String: Any], "\(out)")
        #expect(composite["signers"] as? [[String]] == [["Cara Composite", "cara@example.com", "cu-c"]], "\(composite)")
        #expect(composite["company"] as? [String] == ["Composite AG"] && composite["emailSubject"] as? String == "Please sign the NDA", "\(composite)")

        let updated = try #require(out["updated"] as? [String: Any])
        #expect(updated["document"] as? [String] == ["1", "NDA v2", "2"] && updated["documents"] as? [[String]] == [["1", "NDA v2", "2"]], "\(updated)")

        let failures = try #require(out["errors"] as? [String: [String: Any]])
        #expect(failures["unknownTemplate"]?["errorCode"] as? String == "TEMPLATE_ID_INVALID", "\(failures)")
        #expect(failures["getUnknown"]?["status"] as? Int == 400 && failures["getUnknown"]?["errorCode"] as? String == "TEMPLATE_ID_INVALID")
        #expect(failures["unknownRole"]?["errorCode"] as? String == "INVALID_REQUEST_BODY" && "\(failures["unknownRole"] ?? [:])".contains("Nobody"))
        #expect(failures["noRoleName"]?["errorCode"] as? String == "INVALID_REQUEST_BODY")
        #expect(failures["notAPDF"]?["errorCode"] as? String == "INVALID_REQUEST_BODY")
        #expect("\(failures["compositeInlineDocument"]?["message"] ?? "")".contains("not served"), "\(failures["compositeInlineDocument"] ?? [:])")
        let own = try #require(out["compositeDocument"] as? [String: Any], "\(out)")
        #expect(own["documents"] as? [[String]] == [["1", "Our own NDA", "2"]], "the composite's document in the template document's place: \(own)")
        #expect(own["signHere"] as? [[String]] == [["1", "1"]], "the template's tab on it: \(own)")
        #expect(failures["noDocument"]?["errorCode"] as? String == "DOCUMENT_DOES_NOT_EXIST", "\(failures["noDocument"] ?? [:])")
        let schema = try #require(out["schema"] as? [String: Any])
        #expect((schema["problems"] as? [String])?.isEmpty == true, "answers as DocuSign's published definition declares: \(schema)")
        #expect(Set(schema["operations"] as? [String] ?? []).isSuperset(of: [
            "Templates_PostTemplates", "Templates_GetTemplates", "Templates_GetTemplate", "Documents_PutTemplateDocument",
            "Envelopes_PostEnvelopes"]), "\(schema)")

        // A device caches the template, the document changes over REST, the device re-caches it.
        var configuration = DeviceConfiguration(storePath: rig.temporary.directory.appendingPathComponent("tablet.sqlite").path)
        configuration.deviceId = "tablet-\(UUID().uuidString.prefix(8))"
        let tablet = try await DeviceNode.open(
            configuration: configuration, accountService: RemoteAccountService(client: rig.client), templateService: RemoteTemplateService(client: rig.client))
        try await tablet.login(accessToken: rig.token)
        let cached = try await tablet.cacheTemplate(id: id)
        #expect(cached.template.documents.first?.pageCount == 2)
        rig.clock.advance(5)
        let third = SamplePDF.make(pages: 3, title: "NDA v3").base64EncodedString()
        let put = try await RESTAPITests.call(
            rig, "PUT", "/restapi/v2.1/accounts/acme/templates/\(id)/documents/1", token: rig.token,
            body: #"{"documents": [{"documentId": "1", "name": "NDA v3", "documentBase64": "\#(third)"}]}"#)
        #expect(put.status == 200 && (put.json["pages"] as? [Any])?.count == 3 && put.json["name"] as? String == "NDA v3", "\(put)")
        let decisions = try await tablet.autoUpdateCachedTemplates()
        #expect(decisions.first { $0.templateId == id }?.action == .recached, "\(decisions)")
        let recached = try #require(try await tablet.cachedTemplates().first { $0.template.templateId == id })
        try await tablet.close()
        #expect(recached.template.documents.first?.pageCount == 3 && recached.template.documents.first?.name == "NDA v3")

        // Another account sees none of it.
        _ = try await rig.services.accounts.createAccount(id: "rival", name: "Rival")
        _ = try await rig.services.accounts.createUser(accountID: "rival", name: "Rita", email: "rita@rival.example", secret: "secret-789")
        let rival = try await rig.services.auth.issueToken(email: "rita@rival.example", secret: "secret-789").accessToken
        let theirs = try await RESTAPITests.call(rig, "GET", "/restapi/v2.1/accounts/rival/templates/\(id)", token: rival)
        #expect(theirs.status == 400 && theirs.json["errorCode"] as? String == "TEMPLATE_ID_INVALID")
        let theirList = try await RESTAPITests.call(rig, "GET", "/restapi/v2.1/accounts/rival/templates", token: rival)
        #expect(theirList.json["totalSetSize"] as? String == "0")
        await rig.tearDown()
    }
}
