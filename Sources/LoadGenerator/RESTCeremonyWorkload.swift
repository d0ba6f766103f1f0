import Envelopes
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

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

/// One backend's HTTP session: JSON calls with its bearer token, raw calls for the signing page;
/// redirects are answers, not followed. Also the fleet's backend groups' client (module Fleet).
public final class RESTLoadClient: Sendable {
    let configuration: RESTCeremonyConfiguration
    let session: URLSession

    public init(configuration: RESTCeremonyConfiguration) {
        self.configuration = configuration
        let settings = URLSessionConfiguration.ephemeral
        settings.httpCookieStorage = nil
        settings.timeoutIntervalForRequest = Double(configuration.requestTimeout.components.seconds)
        // The request timeout is an idle timeout; this bounds a whole answer that trickles in.
        settings.timeoutIntervalForResource = 3 * settings.timeoutIntervalForRequest
        session = URLSession(configuration: settings, delegate: NoRedirects(), delegateQueue: nil)
    }

    public func close() { session.finishTasksAndInvalidate() }

    /// The signing form's CSRF token (`name="csrf" value="…"`).
    public static func csrf(in html: String) -> String? {
        guard let range = html.range(of: "name=\"csrf\" value=\"") else { return nil }
        return html[range.upperBound...].split(separator: "\"", maxSplits: 1).first.map(String.init)
    }

    public struct Answer: Sendable {
        public var status: Int
        public var body: [UInt8]
        public var headers: [String: String]
    }

    /// A JSON request with the bearer token; the answer's JSON object, or a ``CeremonyFailure``
    /// (`rest.<status>` with DocuSign's errorCode) when the status is not `expect`.
    public func json(_ method: String, _ path: String, body: [String: Any]? = nil, expect: Int) async throws -> [String: Any] {
        let answer = try await raw(method, path, json: body, authorized: true)
        let object = (try? JSONSerialization.jsonObject(with: Data(answer.body))) as? [String: Any] ?? [:]
        guard answer.status == expect else {
            throw CeremonyFailure(kind: "rest.\(answer.status)", "\(method) \(path): \(object["errorCode"] ?? "") \(object["message"] ?? "")")
        }
        return object
    }

    public func raw(
        _ method: String, _ target: String, json: [String: Any]? = nil, form: String? = nil, cookie: String? = nil, authorized: Bool = false
    ) async throws -> Answer {
        guard let url = URL(string: target.hasPrefix("http") ? target : configuration.baseURL + target) else {
            throw CeremonyFailure(kind: "rest.url", "not a URL: \(target)")
        }
        var request = URLRequest(url: url)
        request.httpMethod = method
        if authorized { request.setValue("Bearer \(configuration.token)", forHTTPHeaderField: "Authorization") }
        if let json {
            request.httpBody = try JSONSerialization.data(withJSONObject: json)
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        if let form {
            request.httpBody = Data(form.utf8)
            request.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
        }
        if let cookie { request.setValue(cookie, forHTTPHeaderField: "Cookie") }
        let (data, response) = try await session.data(for: request)
        guard let http = response as? HTTPURLResponse else { throw CeremonyFailure(kind: "rest.response", "no HTTP response for \(target)") }
        var headers: [String: String] = [:]
        for (key, value) in http.allHeaderFields {
            if let key = key as? String, let value = value as? String { headers[key.lowercased()] = value }
        }
        return Answer(status: http.statusCode, body: [UInt8](data), headers: headers)
    }
}

/// Answers a redirect with the redirect itself (the signing page's `303` is what is checked).
/// Unchecked because NSObject is not Sendable; it has no state at all.
private final class NoRedirects: NSObject, URLSessionTaskDelegate, @unchecked Sendable {
    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse, newRequest request: URLRequest,
        completionHandler: @escaping (URLRequest?) -> Void
    ) {
        completionHandler(nil)
    }
}
