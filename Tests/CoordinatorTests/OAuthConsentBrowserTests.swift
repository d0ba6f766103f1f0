import FleetTesting
import Foundation
import Testing

@testable import Coordinator

/// The OAuth consent page (docs/rest-api.md, "The authorization code grant") in a real browser:
/// headless Chromium through Selenium, installed by scripts/install-deps.sh. Set
/// SIGNFLEET_SKIP_BROWSER=1 to leave it out on a machine without a browser; otherwise a missing
/// browser fails the test.
@Suite(.timeLimit(.minutes(3))) struct OAuthConsentBrowserTests {
    static let skip = ProcessInfo.processInfo.environment["SIGNFLEET_SKIP_BROWSER"] == "1"

    static var script: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("browser/oauth_consent.py")
    }

    /// A user reads who asks (an HTML-hostile key name shown as text), mistypes the password, then
    /// allows; the browser lands on the app's redirect URI with a code the app can exchange.
    @Test(.disabled(if: skip, "SIGNFLEET_SKIP_BROWSER=1"))
    func aUserAllowsAnAppInHeadlessChromium() async throws {
        for tool in ["/usr/bin/chromium", "/usr/bin/chromedriver"] {
            try #require(FileManager.default.isExecutableFile(atPath: tool), "\(tool) is missing: run scripts/install-deps.sh")
        }
        let rig = try await CaptiveRig()
        let redirect = "http://\(rig.http)/signing-return"
        let registered = try await rig.services.oauth.register(
            accountID: "acme", name: "<img src=x onerror=alert(1)>Acme app", publicKeyPEM: nil, redirectURIs: [redirect], secret: true)
        let encoded = redirect.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
        let url = "http://\(rig.http)/oauth/auth?response_type=code&client_id=\(registered.key.id)&redirect_uri=\(encoded)&scope=signature&state=xyz"
        let python = ProcessInfo.processInfo.environment["SIGNFLEET_PYTHON"] ?? "python3"
        let browser = try ChildProcess.launch(
            "/usr/bin/env", [python, Self.script.path, url, "ann@acme.example", "secret-123", redirect], name: "selenium")
        let status: Int32
        do {
            status = try await browser.waitForExit(timeout: .seconds(150))
        } catch {
            await browser.terminate()
            throw error
        }
        #expect(status == 0, "\(browser.output)")
        let line = try #require(browser.lines(.standardOutput).last { $0.hasPrefix("{") }, "\(browser.output)")
        let out = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        try #require(out["error"] == nil, "\(out["error"] ?? "") at \(out["current_url"] ?? "")")
        #expect(out["client_name"] as? String == "<img src=x onerror=alert(1)>Acme app", "the key's name is text, not markup")
        #expect((out["axe"] as? [Any])?.isEmpty == true, "axe-core finds nothing serious: \(out["axe"] ?? "")")
        #expect(out["problem"] as? String == "Wrong email or password.")
        #expect((out["after_wrong_url"] as? String)?.hasPrefix(redirect) == false, "no code after a wrong password")
        let landed = try #require(URLComponents(string: out["final_url"] as? String ?? ""), "\(out)")
        #expect(landed.queryItems?.first { $0.name == "state" }?.value == "xyz")
        let code = try #require(landed.queryItems?.first { $0.name == "code" }?.value, "\(out)")
        let grant = try await rig.services.oauth.grant(
            authorizationCode: code, clientID: registered.key.id, clientSecret: registered.secret, codeVerifier: nil, redirectURI: redirect)
        #expect(grant.scope == "signature" && !grant.accessToken.isEmpty)
        await rig.tearDown()
    }
}
