import FleetProtocol
import Foundation
import SignatureCapture
import Synchronization

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A minimal browser for captive signing pages: real HTTP (URLSession) to the coordinator's
/// listener, redirects not followed (the redirect carries the `event`), cookies kept per
/// device in a ``WebCookieJar``.
struct HeadlessBrowser: Sendable {
    struct Reply: Sendable {
        var status: Int
        var location: String?
        var body: String
        var url: URL
    }

    let jar: WebCookieJar
    /// Seconds one request may take.
    var timeout: TimeInterval = 30

    func get(_ url: URL) async throws -> Reply {
        try await send(URLRequest(url: url))
    }

    func post(_ url: URL, form: [(String, String)]) async throws -> Reply {
        var request = URLRequest(url: url)
        request.httpMethod = "POST"
        request.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
        request.httpBody = Data(form.map { "\(Self.formEncode($0.0))=\(Self.formEncode($0.1))" }.joined(separator: "&").utf8)
        return try await send(request)
    }

    private func send(_ original: URLRequest) async throws -> Reply {
        var request = original
        request.timeoutInterval = timeout
        request.httpShouldHandleCookies = false
        if let url = request.url, let cookie = jar.header(for: url) { request.setValue(cookie, forHTTPHeaderField: "Cookie") }
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpCookieStorage = nil
        configuration.httpShouldSetCookies = false
        let delegate = NoRedirectDelegate()
        let session = URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
        defer { session.finishTasksAndInvalidate() }
        let (data, response) = try await delegate.run(request, in: session)
        guard let http = response as? HTTPURLResponse, let url = request.url else {
            throw HeadlessSigningSession.Failure(reason: .unreadableReply, message: "the signing server did not answer with HTTP")
        }
        var location: String?
        for (key, value) in http.allHeaderFields {
            guard let name = (key as? String)?.lowercased(), let value = value as? String else { continue }
            if name == "set-cookie" { jar.store(value, from: url) }
            if name == "location" { location = value }
        }
        return Reply(status: http.statusCode, location: location, body: String(decoding: data, as: UTF8.self), url: url)
    }

    /// `application/x-www-form-urlencoded` for a value: the UTF-8 bytes, with every byte but ASCII
    /// letters, digits and `-._~` written `%XX`. By hand over the bytes: Foundation's
    /// `addingPercentEncoding` took a quarter of the captive signer's CPU in a node's profile
    /// (docs/performance.md), for a drawing of a few thousand characters.
    static func formEncode(_ text: String) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(text.utf8.count * 2)
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.append(byte)
            default:
                out.append(UInt8(ascii: "%"))
                out.append(hex[Int(byte >> 4)])
                out.append(hex[Int(byte & 0x0F)])
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// A URLSession delegate that answers one request at a time with its bytes and refuses
/// redirects, so a `303` and its `Location` come back to the caller (the captive-signing
/// return event is read from there). Shared by the headless signer, the captive-signing
/// tests and the captive benchmark; one session runs one request at a time through it.
public final class NoRedirectDelegate: NSObject, URLSessionDataDelegate, Sendable {
    private struct State {
        var data = Data()
        var continuation: CheckedContinuation<(Data, URLResponse), any Error>?
    }
    private let state = Mutex(State())

    public override init() {}

    /// Runs `request` on `session` (whose delegate is this object) and returns its reply.
    public func run(_ request: URLRequest, in session: URLSession) async throws -> (Data, URLResponse) {
        try await withCheckedThrowingContinuation { continuation in
            state.withLock {
                $0.data = Data()
                $0.continuation = continuation
            }
            session.dataTask(with: request).resume()
        }
    }

    public func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        completionHandler(nil)
    }

    public func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        state.withLock { $0.data.append(data) }
    }

    public func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        let (continuation, data) = state.withLock { state -> (CheckedContinuation<(Data, URLResponse), any Error>?, Data) in
            defer { state.continuation = nil }
            return (state.continuation, state.data)
        }
        if let error {
            continuation?.resume(throwing: error)
        } else if let response = task.response {
            continuation?.resume(returning: (data, response))
        } else {
            continuation?.resume(throwing: DeviceNodeError(.captiveSigningFailed, "the signing server closed the connection without a response"))
        }
    }
}

/// The web cookies of one device's captive signing sessions (what the SDK's
/// `clearAllWebCookies` clears). Cookies are kept by host and path, as a browser does.
final class WebCookieJar: Sendable {
    private struct Cookie: Sendable {
        var host: String
        var path: String
        var name: String
        var value: String
    }
    private let cookies = Mutex<[Cookie]>([])

    /// The jars, by device id: one device's cookies outlive a presentation, like a web view's.
    private static let jars = Mutex<[String: WebCookieJar]>([:])

    static func jar(for deviceId: String) -> WebCookieJar {
        jars.withLock { jars in
            if let jar = jars[deviceId] { return jar }
            let jar = WebCookieJar()
            jars[deviceId] = jar
            return jar
        }
    }

    func clear() {
        cookies.withLock { $0.removeAll() }
    }

    var isEmpty: Bool { cookies.withLock { $0.isEmpty } }

    /// Stores a `Set-Cookie` value received from `url`.
    func store(_ header: String, from url: URL) {
        let attributes = header.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }
        guard let first = attributes.first, let equals = first.firstIndex(of: "=") else { return }
        let name = String(first[..<equals]), value = String(first[first.index(after: equals)...])
        var path = "/"
        var expired = false
        for attribute in attributes.dropFirst() {
            let lower = attribute.lowercased()
            if lower.hasPrefix("path=") { path = String(attribute.dropFirst(5)) }
            if lower == "max-age=0" { expired = true }
        }
        let host = url.host ?? ""
        cookies.withLock { cookies in
            cookies.removeAll { $0.host == host && $0.path == path && $0.name == name }
            if !expired { cookies.append(Cookie(host: host, path: path, name: name, value: value)) }
        }
    }

    /// The `Cookie` header for a request to `url`, most specific path first.
    func header(for url: URL) -> String? {
        let host = url.host ?? "", path = url.path.isEmpty ? "/" : url.path
        let matching = cookies.withLock { cookies in
            cookies.filter { $0.host == host && (path == $0.path || path.hasPrefix($0.path.hasSuffix("/") ? $0.path : $0.path + "/")) }
        }
        guard !matching.isEmpty else { return nil }
        return matching.sorted { $0.path.count > $1.path.count }.map { "\($0.name)=\($0.value)" }.joined(separator: "; ")
    }
}

/// Drives one signing URL headlessly (``DeviceNode/presentCaptiveSigning(signingURL:envelopeId:recipientId:signer:)``).
struct HeadlessSigningSession: Sendable {
    /// A request of the session that failed, with what ``OnlineSendFailed`` reports about it.
    struct Failure: Error, CustomStringConvertible {
        var reason: OnlineSendFailed.Reason
        var serverCode: String?
        var message: String
        var description: String { message }
    }

    /// How the session ended, before events are published.
    enum Ending: Sendable {
        case event(SigningViewEvent, redirect: String)
        case leftOpen
        case refused(status: Int, message: String)
    }

    let browser: HeadlessBrowser
    let signer: CaptiveSigner

    func run(url: URL) async throws -> (Ending, SigningPageData?) {
        let opened = try await browser.get(url)
        if let ending = Self.ending(opened) { return (ending, nil) }
        let page = try Self.pageData(opened.body)
        guard let csrf = Self.hiddenValue("csrf", in: opened.body) else {
            throw Failure(reason: .unreadableReply, message: "the signing page has no CSRF token")
        }
        var form: [(String, String)] = [("csrf", csrf)]
        switch signer.behaviour {
        case .leaveOpen:
            return (.leftOpen, page)
        case .finishLater:
            form.append(("action", "later"))
        case .decline(let reason):
            form += [("action", "decline"), ("reason", reason)]
        case .sign:
            form.append(("action", "finish"))
            form += try fill(page)
        }
        let posted = try await browser.post(url, form: form)
        if let ending = Self.ending(posted) { return (ending, page) }
        let message = Self.errorText(posted.body) ?? "the page answered \(posted.status)"
        throw Failure(reason: .refused, serverCode: "http \(posted.status)", message: "the signing page refused the input: \(message)")
    }

    /// The form fields for every tab of the page.
    func fill(_ page: SigningPageData) throws -> [(String, String)] {
        var fields: [(String, String)] = []
        let width = Double(page.canvas["width"] ?? 600), height = Double(page.canvas["height"] ?? 200)
        var chosenGroups: Set<String> = []
        var signing = 0
        for tab in page.tabs where !tab.locked {
            switch tab.type {
            case "signHere", "initialHere":
                signing += 1
                let drawn = try signer.pointerSignature(
                    signerName: page.recipientName.isEmpty ? page.recipientID : page.recipientName, fieldID: "tab-\(tab.index)", signing: signing, width: width,
                    height: height)
                fields.append(("sig-\(tab.index)", Self.json(drawn)))
            case "checkbox":
                if tab.selected || signer.tickCheckboxes { fields.append(("tab-\(tab.index)", "on")) }
            case "radio":
                let group = tab.group ?? "\(tab.index)"
                if (tab.selected || signer.tickCheckboxes) && !chosenGroups.contains(group) {
                    chosenGroups.insert(group)
                    fields.append(("radio-\(group)", "\(tab.index)"))
                }
            case "text", "company", "title":
                let value = (tab.value?.isEmpty == false ? tab.value : nil) ?? signer.text ?? (page.recipientName.isEmpty ? "signed" : page.recipientName)
                fields.append(("tab-\(tab.index)", value))
            default:
                break
            }
        }
        return fields
    }

    static func json(_ drawn: PointerSignature) -> String {
        func number(_ value: Double) -> String { decimal3(value) }
        let points = drawn.points.map { "[\(number($0.x)),\(number($0.y)),\(number($0.pressure)),\(number($0.time)),\($0.stroke)]" }
        return "{\"pointerType\":\"\(drawn.pointerType)\",\"width\":\(number(drawn.canvasWidth)),\"height\":\(number(drawn.canvasHeight)),\"points\":[\(points.joined(separator: ","))]}"
    }

    /// `value` with three decimals (`12.345`, `-0.500`), as `String(format: "%.3f")` writes it
    /// (within the last digit's rounding), without Foundation's formatter: a drawing has a few
    /// hundred points of four numbers each, and `String(format:)` was most of the captive signer's
    /// CPU in a node's profile (docs/performance.md). A value that is not finite, which JSON
    /// cannot carry, is written `0`.
    static func decimal3(_ value: Double) -> String {
        guard value.isFinite else { return "0" }
        // A whole number below 9e15 converts exactly; anything larger keeps Foundation's formatter.
        guard let thousandths = Int64(exactly: (abs(value) * 1000).rounded()), thousandths < 9_000_000_000_000_000 else {
            return String(format: "%.3f", value)
        }
        let fraction = thousandths % 1000
        let sign = value < 0 && thousandths != 0 ? "-" : ""
        let digits = fraction < 10 ? "00\(fraction)" : fraction < 100 ? "0\(fraction)" : "\(fraction)"
        return "\(sign)\(thousandths / 1000).\(digits)"
    }

    /// A redirect with `event=`, or a refusal; `nil` for a page.
    static func ending(_ reply: HeadlessBrowser.Reply) -> Ending? {
        if (300..<400).contains(reply.status) {
            guard let location = reply.location else { return .refused(status: reply.status, message: "a redirect without a location") }
            let event = URLComponents(string: location)?.queryItems?.last { $0.name == "event" }?.value
            guard let event, !event.isEmpty else {
                return .refused(status: reply.status, message: "a redirect without an event: \(location)")
            }
            // Events this version does not name are passed on (a newer coordinator may send them).
            return .event(SigningViewEvent(rawValue: event), redirect: location)
        }
        if reply.status == 200 || reply.status == 422 { return nil }
        let text = noticeText(reply.body) ?? "HTTP \(reply.status)"
        return .refused(status: reply.status, message: text)
    }

    static func pageData(_ html: String) throws -> SigningPageData {
        guard let start = html.range(of: "<script type=\"application/json\" id=\"sf-data\">"),
            let end = html.range(of: "</script>", range: start.upperBound..<html.endIndex)
        else { throw Failure(reason: .unreadableReply, message: "the signing page has no data block") }
        do {
            return try JSONDecoder().decode(SigningPageData.self, from: Data(html[start.upperBound..<end.lowerBound].utf8))
        } catch {
            throw Failure(reason: .unreadableReply, message: "the signing page's data block is unreadable: \(error)")
        }
    }

    static func hiddenValue(_ name: String, in html: String) -> String? {
        guard let start = html.range(of: "name=\"\(name)\" value=\"") else { return nil }
        guard let end = html[start.upperBound...].firstIndex(of: "\"") else { return nil }
        return String(html[start.upperBound..<end])
    }

    static func errorText(_ html: String) -> String? {
        element(withID: "error", in: html)
    }

    static func noticeText(_ html: String) -> String? {
        element(withID: "notice", in: html)
    }

    /// The text of `<… id="id">text</…>`, HTML entities decoded.
    static func element(withID id: String, in html: String) -> String? {
        guard let open = html.range(of: "id=\"\(id)\""), let close = html[open.upperBound...].firstIndex(of: ">"),
            let end = html[close...].range(of: "</")
        else { return nil }
        let text = String(html[html.index(after: close)..<end.lowerBound])
        return text.replacingOccurrences(of: "&lt;", with: "<").replacingOccurrences(of: "&gt;", with: ">")
            .replacingOccurrences(of: "&quot;", with: "\"").replacingOccurrences(of: "&#39;", with: "'")
            .replacingOccurrences(of: "&amp;", with: "&")
    }
}
