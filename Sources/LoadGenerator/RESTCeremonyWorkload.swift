import Envelopes
import Foundation

/// Settings of the REST ceremony: which server, and the access token its virtual backends use.
public struct RESTCeremonyConfiguration: Sendable {
    /// The server's base URL (`http://127.0.0.1:8080`); the REST API is under `/restapi`.
    public var baseURL: String
    /// A bearer token of a user of the account the envelopes are created in.
    public var token: String
    /// Where captive signers are sent back to (must be one of the account's allowed return origins).
    public var returnURL: String
    /// Per-request timeout.
    public var requestTimeout: Duration

    public init(baseURL: String, token: String, returnURL: String = "http://127.0.0.1/signfleet-load-return", requestTimeout: Duration = .seconds(10)) {
        var base = baseURL
        while base.hasSuffix("/") { base.removeLast() }
        self.baseURL = base
        self.token = token
        self.returnURL = returnURL
        self.requestTimeout = requestTimeout
    }
}

/// The embedded-signing ceremony a backend runs against the eSignature REST API (docs/rest-api.md;
/// docs/load-testing.md, "The REST ceremony"), against any server that speaks that subset: create
/// an envelope with one embedded signer (a one-page PDF, a sign-here tab), ask for the recipient
/// view, open the signing page, sign it (a typed signature), and fetch the combined document.
///
/// Steps timed: `create`, `view`, `open`, `sign`, `combined`. Each virtual device is one backend
/// with its own HTTP session (no cookies shared, redirects not followed).
public struct RESTCeremonyWorkload: LoadWorkload {
    public static let stepNames = ["create", "view", "open", "sign", "combined"]
    public let configuration: RESTCeremonyConfiguration
    /// The document every envelope carries, base64.
    let document = SamplePDF.make(pages: 1, title: "SignFleet REST load").base64EncodedString()

    public init(configuration: RESTCeremonyConfiguration) {
        self.configuration = configuration
    }

    public var steps: [String] { Self.stepNames }

    public func makeDevice(index: Int, seed: UInt64) async throws -> any LoadDevice {
        let client = RESTLoadClient(configuration: configuration)
        // The token's account, as an integration learns it (GET /oauth/userinfo).
        let info = try await client.json("GET", "/oauth/userinfo", expect: 200)
        guard let account = (info["accounts"] as? [[String: Any]])?.first?["account_id"] as? String else {
            throw CeremonyFailure(kind: "rest.userinfo", "GET /oauth/userinfo named no account")
        }
        return RESTBackend(client: client, account: account, index: index, seed: seed, document: document, returnURL: configuration.returnURL)
    }
}

final class RESTBackend: LoadDevice {
    let client: RESTLoadClient
    let account: String
    let index: Int
    let seed: UInt64
    let document: String
    let returnURL: String

    init(client: RESTLoadClient, account: String, index: Int, seed: UInt64, document: String, returnURL: String) {
        self.client = client
        self.account = account
        self.index = index
        self.seed = seed
        self.document = document
        self.returnURL = returnURL
    }

    func perform(ceremony: Int) async throws -> [StepTiming] {
        let clock = ContinuousClock()
        let base = "/restapi/v2.1/accounts/\(account)"
        let clientUserID = "load-\(seed)-\(index)-\(ceremony)"
        let name = "Signer \(index)-\(ceremony)", email = "signer-\(index)-\(ceremony)@load.example"
        let definition: [String: Any] = [
            "emailSubject": "Load ceremony \(index)-\(ceremony)", "status": "sent",
            "documents": [["documentId": "1", "name": "Load", "fileExtension": "pdf", "documentBase64": document]],
            "recipients": [
                "signers": [[
                    "recipientId": "1", "name": name, "email": email, "clientUserId": clientUserID,
                    "tabs": ["signHereTabs": [["documentId": "1", "pageNumber": "1", "xPosition": "100", "yPosition": "500"]]],
                ]]
            ],
        ]
        let start = clock.now
        let created = try await client.json("POST", "\(base)/envelopes", body: definition, expect: 201)
        guard let envelopeID = created["envelopeId"] as? String else { throw CeremonyFailure(kind: "rest.create", "no envelopeId in \(created)") }
        let afterCreate = clock.now
        let view = try await client.json(
            "POST", "\(base)/envelopes/\(envelopeID)/views/recipient",
            body: ["returnUrl": returnURL, "userName": name, "email": email, "clientUserId": clientUserID, "authenticationMethod": "none"], expect: 201)
        guard let url = view["url"] as? String else { throw CeremonyFailure(kind: "rest.view", "no url in \(view)") }
        let afterView = clock.now
        let page = try await client.raw("GET", url)
        guard page.status == 200, let cookie = page.headers["set-cookie"]?.split(separator: ";").first.map(String.init),
            let csrf = Self.csrf(in: String(decoding: page.body, as: UTF8.self))
        else { throw CeremonyFailure(kind: "rest.open", "the signing page answered \(page.status) without a session") }
        let afterOpen = clock.now
        let typed = "{\"typed\":\"\(name)\"}".addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
        let signed = try await client.raw(
            "POST", url, form: "action=finish&csrf=\(csrf)&sig-0=\(typed)", cookie: cookie)
        guard signed.status == 303, signed.headers["location"]?.contains("event=signing_complete") == true else {
            throw CeremonyFailure(kind: "rest.sign", "finishing the page answered \(signed.status) \(signed.headers["location"] ?? "")")
        }
        let afterSign = clock.now
        let combined = try await client.raw("GET", "\(base)/envelopes/\(envelopeID)/documents/combined", authorized: true)
        guard combined.status == 200, combined.body.starts(with: Array("%PDF-".utf8)) else {
            throw CeremonyFailure(kind: "rest.combined", "the combined document answered \(combined.status)")
        }
        let done = clock.now
        return [
            StepTiming("create", afterCreate - start), StepTiming("view", afterView - afterCreate), StepTiming("open", afterOpen - afterView),
            StepTiming("sign", afterSign - afterOpen), StepTiming("combined", done - afterSign),
        ]
    }

    func close() async { client.close() }

    /// The signing form's CSRF token (`name="csrf" value="…"`).
    static func csrf(in html: String) -> String? { RESTLoadClient.csrf(in: html) }
}
