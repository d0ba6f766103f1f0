import DeviceNode
import Envelopes
import FleetTesting
import Foundation
import Testing

@testable import Coordinator

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The eSignature REST API subset (docs/rest-api.md) on a real coordinator, over envelopes a real
/// device synced: through DocuSign's official Python SDK (docusign-esign 6.x, unchanged), and
/// as a hostile client would call it.
@Suite struct RESTAPITests {
    static let script = SyncPayloadInteropTests.repository.appendingPathComponent("Tests/interop/rest_sdk.py")
    /// The operations (DocuSign's operationIds) whose answers rest_sdk.py checks against the published definition.
    static let operationsChecked: Set<String> = [
        "Envelopes_PostEnvelopes", "Envelopes_GetEnvelope", "Envelopes_PutEnvelope", "Envelopes_GetEnvelopes",
        "Recipients_GetRecipients", "Recipients_GetRecipientTabs", "Documents_GetDocuments", "Documents_GetDocument",
        "Views_PostEnvelopeRecipientView", "Recipients_PutRecipients", "Recipients_PutRecipientTabs", "Accounts_GetAccount",
        "CustomFields_GetCustomFields"]

    /// One request with a bearer token and an optional JSON body.
    static func call(_ rig: CaptiveRig, _ method: String, _ path: String, token: String?, body: String? = nil) async throws
        -> (status: Int, json: [String: Any])
    {
        let answer = try await exchange(rig, method, path, token: token, body: body)
        return (answer.status, answer.json)
    }

    /// ``call(_:_:_:token:body:)`` with the answer's headers.
    static func exchange(_ rig: CaptiveRig, _ method: String, _ path: String, token: String?, body: String? = nil) async throws
        -> (status: Int, json: [String: Any], headers: [String: String])
    {
        var request = URLRequest(url: try #require(URL(string: "http://\(rig.http)\(path)")))
        request.httpMethod = method
        if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        if let body {
            request.httpBody = Data(body.utf8)
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        let (data, response) = try await URLSession(configuration: .ephemeral).data(for: request)
        let json = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:]
        let http = try #require(response as? HTTPURLResponse)
        var headers: [String: String] = [:]
        for (key, value) in http.allHeaderFields {
            if let key = key as? String, let value = value as? String { headers[key.lowercased()] = value }
        }
        return (http.statusCode, json, headers)
    }

    /// Creates arriving together each take their own number of the account's REST sender (the
    /// sender is an actor, re-entered at every await: without its per-account turn they collided).
    @Test func concurrentCreatesEachBecomeAnEnvelope() async throws {
        let rig = try await CaptiveRig()
        let pdf = SamplePDF.make(pages: 1).base64EncodedString()
        let body = #"{"emailSubject": "x", "status": "sent", "documents": [{"documentId": "1", "name": "x", "documentBase64": "\#(pdf)"}], "recipients": {"signers": [{"recipientId": "1", "name": "A", "email": "a@example.com", "clientUserId": "c", "tabs": {"signHereTabs": [{"documentId": "1", "pageNumber": "1", "xPosition": "10", "yPosition": "10"}]}}]}}"#
        let answers = try await withThrowingTaskGroup(of: (Int, String?).self) { group in
            for _ in 0..<8 {
                group.addTask {
                    let answer = try await Self.call(rig, "POST", "/restapi/v2.1/accounts/acme/envelopes", token: rig.token, body: body)
                    return (answer.status, answer.json["envelopeId"] as? String)
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(answers.allSatisfy { $0.0 == 201 }, "\(answers)")
        #expect(Set(answers.compactMap(\.1)).count == 8, "eight envelopes: \(answers)")
        let list = try await Self.call(rig, "GET", "/restapi/v2.1/accounts/acme/envelopes?from_date=2000-01-01", token: rig.token)
        #expect(list.json["totalSetSize"] as? String == "8")
        await rig.tearDown()
    }

    /// The account's own rate limits, shared with its devices, in DocuSign's headers and error.
    @Test func everyAnswerCarriesTheAccountsRateLimitsAndPastThemItIs429() async throws {
        let rig = try await CaptiveRig()
        _ = try await rig.services.accounts.createAccount(
            id: "small", name: "Small", offlineSigning: true, rateLimits: RateLimits(hourly: 3, burst: 100, burstWindowSeconds: 30))
        _ = try await rig.services.accounts.createUser(accountID: "small", name: "Sam", email: "sam@small.example", secret: "secret-789")
        let token = try await rig.services.auth.issueToken(email: "sam@small.example", secret: "secret-789").accessToken
        let path = "/restapi/v2.1/accounts/small/envelopes?from_date=2000-01-01"
        for remaining in [2, 1, 0] {
            let answer = try await Self.exchange(rig, "GET", path, token: token)
            #expect(answer.status == 200)
            #expect(answer.headers["x-ratelimit-limit"] == "3" && answer.headers["x-ratelimit-remaining"] == String(remaining), "\(answer.headers)")
            #expect(answer.headers["x-burstlimit-limit"] == "100" && answer.headers["x-ratelimit-reset"].flatMap(Int64.init) != nil)
        }
        let refused = try await Self.exchange(rig, "GET", path, token: token)
        #expect(refused.status == 429 && refused.json["errorCode"] as? String == "HOURLY_APIINVOCATION_LIMIT_EXCEEDED", "\(refused.json)")
        #expect(refused.headers["x-ratelimit-remaining"] == "0")
        await rig.tearDown()
    }

    @Test(.timeLimit(.minutes(3))) func theOfficialPythonSDKReadsDeviceEnvelopesOpensAViewAndVoids() async throws {
        let rig = try await CaptiveRig()
        let embedded = try await rig.sync(
            CaptiveRig.envelope([EmbeddedSigner(id: "1", name: "Bea Buyer", email: "bea@example.com", clientUserId: "cu-1", order: 1)]))
        let remote = try await rig.sync(
            CaptiveRig.envelope([EmbeddedSigner(id: "1", name: "Carl Remote", email: "carl@example.com", clientUserId: nil, order: 1)]))
        let returnURL = "http://\(rig.http)/signing-return"
        let pdf = rig.temporary.directory.appendingPathComponent("nda.pdf")
        try SamplePDF.make(pages: 2, title: "NDA").write(to: pdf)
        let python = ProcessInfo.processInfo.environment["SIGNFLEET_PYTHON"] ?? "python3"
        let (status, output, errors) = try await ChildProcess.run(
            "/usr/bin/env",
            [
                python, Self.script.path, "--base-url", "http://\(rig.http)", "--token=\(rig.token)", "--account", "acme",
                "--envelope", embedded, "--client-user-id", "cu-1", "--user-name", "Bea Buyer", "--email", "bea@example.com",
                "--return-url", returnURL, "--void-envelope", remote, "--from-date", "2027-01-15T07:00:00Z", "--pdf", pdf.path,
            ])
        try #require(status == 0, "the SDK run failed (it needs `\(python) -m pip install docusign-esign`): \(errors)")
        let out = try #require(try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any], "\(output)")

        #expect((out["account"] as? [String: String])?["accountIdGuid"] == "acme", "\(out["account"] ?? "")")
        let envelope = try #require(out["envelope"] as? [String: Any])
        #expect(envelope["envelopeId"] as? String == embedded)
        #expect(envelope["status"] as? String == "sent")
        #expect(envelope["emailSubject"] as? String == "Please sign the lease")
        #expect((envelope["createdDateTime"] as? String)?.hasPrefix("2027-01-15T08:00:00.0000000Z") == true, "\(envelope)")
        #expect(envelope["recipientsUri"] as? String == "/envelopes/\(embedded)/recipients")
        let signers = try #require(envelope["signers"] as? [[String: Any]])
        #expect(signers.count == 1)
        #expect(signers.first?["clientUserId"] as? String == "cu-1" && signers.first?["email"] as? String == "bea@example.com")
        #expect(signers.first?["routingOrder"] as? String == "1", "numbers are strings, as DocuSign sends them")
        #expect(out["recipientCount"] as? String == "1")
        let documents = try #require(out["documents"] as? [[String: Any]])
        #expect(documents.count == 2 && documents.first?["documentId"] as? String == "doc1" && documents.first?["name"] as? String == "Lease")
        #expect(documents.first?["uri"] as? String == "/envelopes/\(embedded)/documents/doc1")
        let pages = try #require(documents.first?["pages"] as? [[Any]], "\(documents)")
        #expect(pages.count == 2, "the sample PDF has two pages: \(pages)")
        #expect(pages.first?.map { "\($0)" } == ["1", "612", "792"], "Letter, in points: \(pages)")

        // Anchor tabs, placed where the sample PDF prints its text: each page has "NDA" at x 72,
        // baseline 720, 24 pt, and "Page N of 2" at x 72, baseline 684, 14 pt, in Helvetica, whose
        // ascender (0.718 em) puts a word's top at 792 − baseline − 0.718 × size.
        let anchored = try #require(out["anchored"] as? [String: Any], "\(out)")
        let pageTop = 792 - 684 - 0.718 * 14
        let signHere = try #require(anchored["signHere"] as? [[String]], "\(anchored)")
        #expect(signHere.map { $0[0] + "/" + $0[1] } == ["1/1", "1/2"], "one per page: \(signHere)")
        for tab in signHere {
            #expect(abs((Double(tab[2]) ?? 0) - (72 + 10)) < 0.5 && abs((Double(tab[3]) ?? 0) - (pageTop - 5)) < 0.5, "\(tab)")
        }
        let initials = try #require(anchored["initialHere"] as? [[String]], "\(anchored)")
        #expect(initials.count == 2, "\(initials)")
        // "NDA" in 24 pt Helvetica is 50.664 pt wide (N 722, D 722, A 667 thousandths of an em).
        let ndaRight = 72 + 24 * (0.722 + 0.722 + 0.667), ndaTop = 792 - 720 - 0.718 * 24
        for tab in initials {
            #expect(abs((Double(tab[2]) ?? 0) - (ndaRight + 36)) < 0.5 && abs((Double(tab[3]) ?? 0) - ndaTop) < 0.5, "\(tab)")
        }
        #expect(anchored["dateSigned"] as? Int == 0, "an absent anchor with anchorIgnoreIfNotPresent places nothing")
        #expect(anchored["listTabs"] as? [[String]] == signHere, "list_tabs shows the tabs include_tabs shows")
        let customFields = try #require(out["customFields"] as? [String: Any], "\(out)")
        #expect(customFields["text"] as? Int == 0 && customFields["list"] as? Int == 0, "a REST envelope has no custom fields: \(customFields)")
        #expect(customFields["keys"] as? [String] == ["list_custom_fields", "text_custom_fields"], "both lists, as the SDK reads them: \(customFields)")
        let listTabs = try #require(out["listTabs"] as? [String: Any], "\(out)")
        #expect(listTabs["text"] as? [[String]] == [["city", "Bern", "true", "1", "100", "300"]], "\(listTabs)")
        #expect((listTabs["carbonCopy"] as? [String])?.isEmpty == true, "a carbon copy has no tabs: \(listTabs)")
        #expect(listTabs["draftSignHere"] as? [[String]] == [["2", "100", "150"]], "a draft's tabs as sending would place them: \(listTabs)")

        // Files through the SDK: the device envelope's document (its signer signs in a captive
        // view, not yet: nothing drawn), combined with and without its certificate, the certificate.
        let downloads = try #require(out["downloads"] as? [String: String], "\(out)")
        let document = try Data(contentsOf: URL(fileURLWithPath: try #require(downloads["document"])))
        #expect(try CompletedDocumentTests.pageCount(document) == 2)
        let combined = try Data(contentsOf: URL(fileURLWithPath: try #require(downloads["combined"])))
        let bare = try Data(contentsOf: URL(fileURLWithPath: try #require(downloads["combinedBare"])))
        #expect(try CompletedDocumentTests.pageCount(bare) == 2 && CompletedDocumentTests.pageCount(combined) == 3, "the certificate is one more page")
        let certificate = try await CompletedDocumentTests.text(try Data(contentsOf: URL(fileURLWithPath: try #require(downloads["certificate"]))))
        #expect(certificate.contains("Certificate of Completion") && certificate.contains(embedded) && certificate.contains("Bea Buyer"), "\(certificate)")
        #expect(documents.last?["documentId"] as? String == "certificate" && documents.last?["type"] as? String == "summary", "\(documents)")

        let list = try #require(out["list"] as? [String: Any])
        #expect(list["totalSetSize"] as? String == "2")
        #expect(Set(list["ids"] as? [String] ?? []) == [embedded, remote])
        #expect(out["listById"] as? [String] == [embedded])
        #expect(out["search"] as? [String] == [embedded], "search_text finds a recipient's name, any case: \(out["search"] ?? "")")

        // The view is the captive signing page itself.
        let url = try #require(out["viewUrl"] as? String)
        #expect(url.hasPrefix("http://\(rig.http)/signing/"), "\(url)")
        let page = try await rig.request("GET", url)
        #expect(page.status == 200 && page.body.contains("Bea Buyer"), "\(page.status)")

        let voided = try #require(out["voided"] as? [String: Any])
        #expect(voided["status"] as? String == "voided" && voided["voidedReason"] as? String == "sent in error")
        #expect(try await rig.envelope(remote).status == "voided", "the void reached the store the devices sync with")

        // Created over REST, as DocuSign's embedded-signing quick start does, then signed in the view.
        let created = try #require(out["created"] as? [String: Any])
        let createdID = try #require(created["envelopeId"] as? String)
        #expect(created["status"] as? String == "sent" && created["uri"] as? String == "/envelopes/\(createdID)")
        #expect(created["emailSubject"] as? String == "Please sign this NDA" && created["emailBlurb"] as? String == "Sent over REST")
        let createdSigners = try #require(created["signers"] as? [[String: Any]])
        #expect(createdSigners.first?["clientUserId"] as? String == "cu-rest" && createdSigners.first?["status"] as? String == "sent")
        #expect((created["carbonCopies"] as? [[String: Any]])?.first?["name"] as? String == "Legal")
        let createdView = try #require(created["viewUrl"] as? String)
        let opened = try await rig.request("GET", createdView)
        #expect(opened.status == 200 && opened.body.contains("Dora Embedded"), "\(opened.status)")
        let session = try #require(opened.headers["set-cookie"]?.split(separator: ";").first.map(String.init))
        let csrf = try #require(opened.body.range(of: "name=\"csrf\" value=\"").flatMap { opened.body[$0.upperBound...].split(separator: "\"").first })
        let signed = try await rig.request(
            "POST", createdView, body: "action=finish&csrf=\(csrf)&sig-0=%7B%22typed%22%3A%22Dora%20Embedded%22%7D", cookie: session)
        #expect(signed.status == 303 && signed.headers["location"]?.hasSuffix("event=signing_complete") == true, "\(signed.status) \(signed.body.prefix(400))")
        let after = try await Self.call(rig, "GET", "/restapi/v2.1/accounts/acme/envelopes/\(createdID)?include=recipients", token: rig.token)
        #expect(after.json["status"] as? String == "completed", "the carbon copy never blocks: \(after.json)")
        #expect(after.json["completedDateTime"] != nil)

        // In person: the view the host asked for signs the walk-in signer; the envelope completes.
        let inPerson = try #require(out["inPerson"] as? [String: Any], "\(out)")
        #expect(inPerson["recipient"] as? [String] == ["Hana Host", "hana@example.com", "Walt Walkin", "inPersonSigner", "sent"], "\(inPerson)")
        let hostView = try #require(inPerson["viewUrl"] as? String)
        let hostPage = try await rig.request("GET", hostView)
        #expect(hostPage.status == 200 && hostPage.body.contains("Walt Walkin"), "\(hostPage.status)")
        let hostSession = try #require(hostPage.headers["set-cookie"]?.split(separator: ";").first.map(String.init))
        let hostCSRF = try #require(hostPage.body.range(of: "name=\"csrf\" value=\"").flatMap { hostPage.body[$0.upperBound...].split(separator: "\"").first })
        let hostSigned = try await rig.request(
            "POST", hostView, body: "action=finish&csrf=\(hostCSRF)&sig-0=%7B%22typed%22%3A%22Walt%20Walkin%22%7D", cookie: hostSession)
        #expect(hostSigned.status == 303, "\(hostSigned.status) \(hostSigned.body.prefix(300))")
        let inPersonID = try #require(inPerson["envelopeId"] as? String)
        let inPersonAfter = try await Self.call(rig, "GET", "/restapi/v2.1/accounts/acme/envelopes/\(inPersonID)", token: rig.token)
        #expect(inPersonAfter.json["status"] as? String == "completed" && inPersonAfter.json["signingLocation"] as? String == "inPerson", "\(inPersonAfter.json)")

        let edits = try #require(out["edits"] as? [String: Any], "\(out)")
        #expect(edits["updated"] as? [String] == ["1"] && edits["city"] as? [String] == ["Basel"], "\(edits)")
        #expect(edits["sentSigner"] as? [String] == ["Dora Edited", "dora.edited@example.com"] && edits["sentCity"] as? [String] == ["Basel"],
            "the draft's edits are what is sent: \(edits)")
        #expect("\((edits["afterSent"] as? [String: Any])?["message"] ?? "")".contains("is sent"), "\(edits)")
        #expect((edits["unknownRecipient"] as? [String: Any])?["errorCode"] as? String == "ENVELOPE_DOES_NOT_EXIST", "\(edits)")

        let draft = try #require(out["draft"] as? [String: Any])
        #expect(draft["created"] as? String == "created" && draft["before"] as? String == "created" && draft["after"] as? String == "sent", "\(draft)")

        let failures = try #require(out["errors"] as? [String: [String: Any]])
        #expect(failures["notAPDF"]?["errorCode"] as? String == "FORMAT_CONVERSION_ERROR", "\(failures["notAPDF"] ?? [:])")
        #expect(failures["anchorTab"]?["status"] as? Int == 400 && failures["anchorTab"]?["errorCode"] as? String == "ANCHOR_TAB_STRING_NOT_FOUND", "\(failures["anchorTab"] ?? [:])")
        #expect(failures["pageOutOfRange"]?["errorCode"] as? String == "TAB_PAGENUMBER_IS_NOT_IN_DOCUMENT", "\(failures["pageOutOfRange"] ?? [:])")
        #expect(failures["noDocuments"]?["errorCode"] as? String == "ENVELOPE_IS_INCOMPLETE")
        #expect(failures["unknownEnvelope"]?["status"] as? Int == 400 && failures["unknownEnvelope"]?["errorCode"] as? String == "ENVELOPE_DOES_NOT_EXIST")
        #expect(failures["otherAccount"]?["errorCode"] as? String == "USER_LACKS_MEMBERSHIP")
        #expect(failures["unknownRecipient"]?["errorCode"] as? String == "UNKNOWN_ENVELOPE_RECIPIENT")
        #expect(failures["noFromDate"]?["errorCode"] as? String == "INVALID_REQUEST_PARAMETER")
        let schema = try #require(out["schema"] as? [String: Any], "\(out)")
        #expect((schema["problems"] as? [String])?.isEmpty == true,
            "every answer has only the properties DocuSign's published definition declares, of its JSON types: \(schema)")
        #expect(Set(schema["operations"] as? [String] ?? []).isSuperset(of: Self.operationsChecked), "\(schema)")
        #expect(failures["noDocument"]?["status"] as? Int == 400 && failures["noDocument"]?["errorCode"] as? String == "DOCUMENT_DOES_NOT_EXIST", "\(failures["noDocument"] ?? [:])")
        #expect(failures["tabsOfNoOne"]?["status"] as? Int == 400 && failures["tabsOfNoOne"]?["errorCode"] as? String == "UNKNOWN_ENVELOPE_RECIPIENT")
        #expect(failures["badToken"]?["status"] as? Int == 401 && failures["badToken"]?["errorCode"] as? String == "AUTHORIZATION_INVALID_TOKEN")
        await rig.tearDown()
    }

    @Test func hostileRequestsGetDocuSignsErrorsAndNoOtherAccountsData() async throws {
        let rig = try await CaptiveRig()
        let id = try await rig.sync(
            CaptiveRig.envelope([EmbeddedSigner(id: "1", name: "Bea Buyer", email: "bea@example.com", clientUserId: "cu-1", order: 1)]))
        // Another account's user, with a valid token of its own.
        _ = try await rig.services.accounts.createAccount(id: "rival", name: "Rival", offlineSigning: true)
        _ = try await rig.services.accounts.createUser(accountID: "rival", name: "Rex", email: "rex@rival.example", secret: "secret-456")
        let rival = try await rig.services.auth.issueToken(email: "rex@rival.example", secret: "secret-456").accessToken
        let base = "/restapi/v2.1/accounts"

        // Who the token is, and its account, as the SDK's get_user_info and the account route ask.
        var answer = try await Self.call(rig, "GET", "/oauth/userinfo", token: rig.token)
        let accounts = try #require(answer.json["accounts"] as? [[String: Any]], "\(answer.json)")
        #expect(answer.json["email"] as? String == "ann@acme.example" && accounts.count == 1)
        #expect(accounts.first?["account_id"] as? String == "acme" && accounts.first?["base_uri"] as? String == "http://\(rig.http)")
        answer = try await Self.call(rig, "GET", "\(base)/acme", token: rig.token)
        #expect(answer.json["accountIdGuid"] as? String == "acme" && answer.json["accountName"] as? String == "Acme", "\(answer.json)")
        answer = try await Self.call(rig, "GET", "/oauth/userinfo", token: "forged")
        #expect(answer.status == 401)

        answer = try await Self.call(rig, "GET", "\(base)/acme/envelopes/\(id)", token: nil)
        #expect(answer.status == 401 && answer.json["errorCode"] as? String == "AUTHORIZATION_INVALID_TOKEN")
        answer = try await Self.call(rig, "GET", "\(base)/acme/envelopes/\(id)", token: rival)
        #expect(answer.status == 400 && answer.json["errorCode"] as? String == "USER_LACKS_MEMBERSHIP")
        answer = try await Self.call(rig, "GET", "\(base)/rival/envelopes/\(id)", token: rival)
        #expect(answer.json["errorCode"] as? String == "ENVELOPE_DOES_NOT_EXIST", "another account's envelope does not exist for it")
        answer = try await Self.call(rig, "GET", "\(base)/rival/envelopes/\(id)/documents", token: rival)
        #expect(answer.json["errorCode"] as? String == "ENVELOPE_DOES_NOT_EXIST", "nor do its documents")
        for document in ["doc1", "combined", "certificate"] {
            answer = try await Self.call(rig, "GET", "\(base)/rival/envelopes/\(id)/documents/\(document)", token: rival)
            #expect(answer.status == 400 && answer.json["errorCode"] as? String == "ENVELOPE_DOES_NOT_EXIST", "nor their bytes (\(document))")
        }
        answer = try await Self.call(rig, "GET", "\(base)/rival/envelopes?from_date=2000-01-01", token: rival)
        #expect(answer.status == 200 && answer.json["totalSetSize"] as? String == "0", "\(answer.json)")
        answer = try await Self.call(rig, "GET", "\(base)/rival/envelopes?envelope_ids=\(id)", token: rival)
        #expect(answer.json["resultSetSize"] as? String == "0", "asking by id finds nothing of another account")

        // Lists: the window and the paging are honoured, bad values named.
        answer = try await Self.call(rig, "GET", "\(base)/acme/envelopes?from_date=2027-01-15T09:00:00Z", token: rig.token)
        #expect(answer.json["totalSetSize"] as? String == "0", "nothing changed after from_date")
        answer = try await Self.call(rig, "GET", "\(base)/acme/envelopes?from_date=2027-01-15&status=completed", token: rig.token)
        #expect(answer.json["totalSetSize"] as? String == "0", "the envelope is sent, not completed")
        answer = try await Self.call(rig, "GET", "\(base)/acme/envelopes?from_date=yesterday", token: rig.token)
        #expect(answer.status == 400 && answer.json["errorCode"] as? String == "INVALID_REQUEST_PARAMETER")
        answer = try await Self.call(rig, "GET", "\(base)/acme/envelopes?from_date=2027-01-15&count=0", token: rig.token)
        #expect(answer.status == 400 && (answer.json["message"] as? String)?.contains("count") == true)

        // Bodies: not JSON, too large, a void without a reason, an update this server does not serve.
        let view = "\(base)/acme/envelopes/\(id)/views/recipient"
        answer = try await Self.call(rig, "POST", view, token: rig.token, body: "{not json")
        #expect(answer.status == 400 && answer.json["errorCode"] as? String == "INVALID_REQUEST_BODY")
        answer = try await Self.call(rig, "POST", view, token: rig.token, body: String(repeating: " ", count: RESTRoutes.maxBodyBytes + 1))
        #expect(answer.status == 413 && answer.json["errorCode"] as? String == "INVALID_REQUEST_BODY")
        answer = try await Self.call(rig, "POST", view, token: rig.token, body: #"{"clientUserId": "cu-1"}"#)
        #expect(answer.status == 400 && (answer.json["message"] as? String)?.contains("returnUrl") == true)
        // An account that lists its return origins (none listed: any origin, docs/captive-signing.md).
        _ = try await rig.temporary.store.changeReturnOrigins(accountID: "acme", add: ["http://\(rig.http)"], remove: [])
        answer = try await Self.call(
            rig, "POST", view, token: rig.token,
            body: #"{"clientUserId": "cu-1", "userName": "Bea Buyer", "email": "bea@example.com", "returnUrl": "https://evil.example/x"}"#)
        #expect(answer.status == 400 && answer.json["errorCode"] as? String == "INVALID_REQUEST_BODY", "a return URL outside the account's origins: \(answer)")
        answer = try await Self.call(rig, "PUT", "\(base)/acme/envelopes/\(id)", token: rig.token, body: #"{"status": "voided"}"#)
        #expect(answer.json["errorCode"] as? String == "VOIDED_REASON_REQUIRED")
        answer = try await Self.call(rig, "PUT", "\(base)/acme/envelopes/\(id)", token: rig.token, body: #"{"status": "sent"}"#)
        #expect(answer.status == 400 && answer.json["errorCode"] as? String == "INVALID_REQUEST_BODY")
        #expect(try await rig.envelope(id).status == "sent", "no refused request changed the envelope")

        // Creating: drafts, bad base64, an unknown recipient on a tab, another account's path.
        let pdf = SamplePDF.make(pages: 1).base64EncodedString()
        func definition(status: String = "sent", base64: String = pdf, tabRecipient: String = "1") -> String {
            #"{"emailSubject": "x", "status": "\#(status)", "documents": [{"documentId": "1", "name": "x", "documentBase64": "\#(base64)"}], "recipients": {"signers": [{"recipientId": "1", "name": "A", "email": "a@example.com", "tabs": {"signHereTabs": [{"documentId": "1", "pageNumber": 1, "xPosition": 10, "yPosition": 10}]}}]}}"#
        }
        let create = "\(base)/acme/envelopes"
        answer = try await Self.call(rig, "POST", create, token: rig.token, body: definition(status: "voided"))
        #expect(answer.status == 400 && (answer.json["message"] as? String)?.contains("cannot be set at creation") == true, "\(answer.json)")
        answer = try await Self.call(rig, "POST", create, token: rig.token, body: definition(base64: "%%%not-base64"))
        #expect(answer.status == 400 && (answer.json["message"] as? String)?.contains("documentBase64") == true, "\(answer.json)")
        answer = try await Self.call(rig, "POST", create, token: rig.token, body: #"{"emailSubject": "x", "status": "sent", "documents": 7}"#)
        #expect(answer.status == 400 && answer.json["errorCode"] as? String == "INVALID_REQUEST_BODY")
        answer = try await Self.call(rig, "POST", "\(base)/acme/envelopes", token: rival, body: definition())
        #expect(answer.json["errorCode"] as? String == "USER_LACKS_MEMBERSHIP")
        answer = try await Self.call(rig, "GET", "\(base)/acme/envelopes?from_date=2000-01-01", token: rig.token)
        #expect(answer.json["totalSetSize"] as? String == "1", "no refused create made an envelope: \(answer.json)")
        // Numbers where DocuSign has strings are read too (SDK users pass both).
        answer = try await Self.call(rig, "POST", create, token: rig.token, body: definition())
        #expect(answer.status == 201 && answer.json["status"] as? String == "sent", "\(answer.json)")

        // A draft: not signable, not another account's, sent once.
        answer = try await Self.call(rig, "POST", create, token: rig.token, body: definition(status: "created"))
        let draft = try #require(answer.json["envelopeId"] as? String, "\(answer.json)")
        #expect(answer.status == 201 && answer.json["status"] as? String == "created")
        answer = try await Self.call(
            rig, "POST", "\(base)/acme/envelopes/\(draft)/views/recipient", token: rig.token,
            body: #"{"recipientId": "1", "returnUrl": "http://\#(rig.http)/signing-return"}"#)
        #expect(answer.json["errorCode"] as? String == "ENVELOPE_HAS_NOT_BEEN_SENT", "\(answer.json)")
        answer = try await Self.call(rig, "PUT", "\(base)/rival/envelopes/\(draft)", token: rival, body: #"{"status": "sent"}"#)
        #expect(answer.json["errorCode"] as? String == "ENVELOPE_DOES_NOT_EXIST", "another account cannot send it")
        answer = try await Self.call(rig, "PUT", "\(base)/acme/envelopes/\(draft)", token: rig.token, body: #"{"status": "sent"}"#)
        #expect(answer.status == 200 && answer.json["envelopeId"] as? String == draft, "\(answer.json)")
        answer = try await Self.call(rig, "PUT", "\(base)/acme/envelopes/\(draft)", token: rig.token, body: #"{"status": "sent"}"#)
        #expect(answer.status == 400 && (answer.json["message"] as? String)?.contains("sent already") == true, "\(answer.json)")
        #expect(try await rig.envelope(draft).status == "sent", "the draft became an envelope with its id")
        await rig.tearDown()
    }
}
