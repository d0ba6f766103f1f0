import FleetProtocol
import Foundation
import Testing

@testable import Coordinator

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Where a signing ceremony may send the browser (issue #18 part 4): http or https only, no user
/// info, nothing a browser reads differently from a parser, and the account's allow-list.
@Suite struct ReturnURLPolicyTests {
    @Test(arguments: [
        ("file:///etc/passwd", "must use http or https (got file:)"),
        ("vbscript:msgbox(1)", "must use http or https (got vbscript:)"),
        ("javascript:alert(1)", "must use http or https (got javascript:)"),
        ("chrome://settings", "must use http or https (got chrome:)"),
        ("myapp://done", "must use http or https (got myapp:)"),
        ("data:text/html,<b>", "must be an absolute http or https URL"),
        (#"https://evil\@app.example/"#, "must be an absolute http or https URL"),
        ("https://user@app.example/", "must not carry user info"),
        ("https://user:pass@app.example/", "must not carry user info"),
        ("https:///nohost", "has no host"),
        ("https://app.example/ x", "must be an absolute http or https URL"),
        ("/relative/path", "must be an absolute http or https URL"),
    ])
    func aReturnURLThatIsNotPlainHTTPIsRefusedAndSaysWhy(url: String, says: String) {
        let error = #expect(throws: FleetError.self) { try ReturnURLPolicy.check(url, allowed: [], account: "acme") }
        #expect(error?.code == .invalidRequest)
        #expect(error?.message.contains(says) == true, "\(String(describing: error?.message))")
    }

    @Test func originsAreNormalisedAndTheAllowListIsExact() throws {
        #expect(try ReturnURLPolicy.origin(of: "HTTPS://App.Example:443/done?x=1") == "https://app.example")
        #expect(try ReturnURLPolicy.origin(of: "http://app.example:8080/") == "http://app.example:8080")
        #expect(try ReturnURLPolicy.origin(of: "https://xn--bcher-kva.example/done") == "https://xn--bcher-kva.example")
        #expect(try ReturnURLPolicy.origin(of: "https://Bücher.example/done") == "https://xn--bcher-kva.example", "one origin, either spelling")
        try ReturnURLPolicy.check("https://app.example/done", allowed: ["https://app.example"], account: "acme")
        for other in ["https://app.example.evil.example/", "http://app.example/", "https://app.example:8443/"] {
            let error = #expect(throws: FleetError.self) { try ReturnURLPolicy.check(other, allowed: ["https://app.example"], account: "acme") }
            #expect(error?.message.contains("not in account acme's allowed return origins (https://app.example)") == true, "\(other)")
        }
    }

    /// Against a real coordinator: the account's list (set through the admin HTTP API) decides which
    /// signing URLs are issued; the coordinator's own landing page is always allowed.
    @Test func anAccountsAllowListDecidesWhichSigningURLsAreIssued() async throws {
        let rig = try await CaptiveRig()
        let signer = EmbeddedSigner(id: "r1", name: "Bea Buyer", email: "bea@example.com", clientUserId: "cu-bea", order: 1)
        let id = try await rig.sync(try CaptiveRig.envelope([signer]))
        // No list: any http(s) origin.
        _ = try await rig.url(id, .clientUserID("cu-bea"), returnURL: "https://anywhere.example/done")

        func admin(_ method: String, _ path: String, _ body: String? = nil) async throws -> (Int, String) {
            var request = URLRequest(url: try #require(URL(string: "http://\(rig.http)\(path)")))
            request.httpMethod = method
            request.httpBody = body.map { Data($0.utf8) }
            request.setValue("Bearer \(CaptiveRig.adminToken)", forHTTPHeaderField: "Authorization")
            let (data, response) = try await URLSession.shared.data(for: request)
            return ((response as? HTTPURLResponse)?.statusCode ?? 0, String(decoding: data, as: UTF8.self))
        }
        let added = try await admin("POST", "/admin/accounts/acme/return-origins", #"{"add":["https://app.example/any/path","http://localhost:3000"]}"#)
        #expect(added.0 == 200)
        #expect(added.1 == #"{"accountID":"acme","origins":["http://localhost:3000","https://app.example"]}"#, "\(added.1)")
        let refusedScheme = try await admin("POST", "/admin/accounts/acme/return-origins", #"{"add":["myapp://x"]}"#)
        #expect(refusedScheme.0 == 400 && refusedScheme.1.contains("http or https"), "\(refusedScheme)")
        let unknownAccount = try await admin("GET", "/admin/accounts/nobody/return-origins")
        #expect(unknownAccount.0 == 404)

        _ = try await rig.url(id, .clientUserID("cu-bea"), returnURL: "https://app.example/done")
        _ = try await rig.url(id, .clientUserID("cu-bea"), returnURL: "")  // the coordinator's own page
        do {
            _ = try await rig.url(id, .clientUserID("cu-bea"), returnURL: "https://anywhere.example/done")
            Issue.record("a return URL outside the list was accepted")
        } catch let error as FleetError {
            #expect(error.code == .invalidRequest && error.message.contains("allowed return origins"), "\(error)")
        }

        let removed = try await admin("POST", "/admin/accounts/acme/return-origins", #"{"remove":["https://app.example","http://localhost:3000"]}"#)
        #expect(removed.1 == #"{"accountID":"acme","origins":[]}"#, "\(removed.1)")
        _ = try await rig.url(id, .clientUserID("cu-bea"), returnURL: "https://anywhere.example/done")
        await rig.tearDown()
    }
}
