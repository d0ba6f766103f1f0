import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1

/// One backend's HTTP session: JSON calls with its bearer token, raw calls for the signing page;
/// redirects are answers, not followed. Also the fleet's backend groups' client (module Fleet).
///
/// On AsyncHTTPClient rather than URLSession: cancelling an async `URLSession.data(for:)` on Linux
/// can deadlock when the task completes at the same moment (the cancellation handler runs under
/// the task's status lock and waits synchronously for the session's queue, which is resuming the
/// task under that lock). A fleet's backend worker cancels its ceremony at the drain, and that
/// deadlock held a node's drain forever. AsyncHTTPClient's cancellation and deadlines are
/// asynchronous hops onto its event loop.
public final class RESTLoadClient: Sendable {
    let configuration: RESTCeremonyConfiguration
    private let client: HTTPClient
    /// The largest answer read (the combined PDF of a one-page envelope is far smaller).
    static let maxAnswerBytes = 64 * 1024 * 1024

    public init(configuration: RESTCeremonyConfiguration) {
        self.configuration = configuration
        let timeout = TimeAmount.nanoseconds(Self.nanoseconds(configuration.requestTimeout))
        var settings = HTTPClient.Configuration(
            redirectConfiguration: .disallow,
            // The request timeout bounds connecting and each silence while reading.
            timeout: .init(connect: timeout, read: timeout))
        settings.httpVersion = .http1Only
        client = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: settings)
    }

    /// Closes the session's connections; a request still running ends with an error.
    public func close() {
        // Not awaited: the shutdown only closes this client's connections on its event loop.
        _ = client.shutdown()
    }

    /// A client dropped without ``close()`` (a caller that threw first) is closed here: an
    /// AsyncHTTPClient released unclosed stops a debug build. A second shutdown only fails its
    /// own future.
    deinit { _ = client.shutdown() }

    /// The signing form's CSRF token (`name="csrf" value="…"`).
    public static func csrf(in html: String) -> String? {
        guard let range = html.range(of: "name=\"csrf\" value=\"") else { return nil }
        return html[range.upperBound...].split(separator: "\"", maxSplits: 1).first.map(String.init)
    }

    public struct Answer: Sendable {
        public var status: Int
        public var body: [UInt8]
        /// Header names in lower case; a header sent twice keeps its first value.
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

    /// One request; the whole answer (head and body) within three request timeouts, each silence
    /// within one. Throws `CancellationError` when the task is cancelled.
    public func raw(
        _ method: String, _ target: String, json: [String: Any]? = nil, form: String? = nil, cookie: String? = nil, authorized: Bool = false
    ) async throws -> Answer {
        let url = target.hasPrefix("http") ? target : configuration.baseURL + target
        guard URL(string: url) != nil else { throw CeremonyFailure(kind: "rest.url", "not a URL: \(target)") }
        var request = HTTPClientRequest(url: url)
        request.method = HTTPMethod(rawValue: method)
        if authorized { request.headers.add(name: "Authorization", value: "Bearer \(configuration.token)") }
        if let json {
            request.body = .bytes(ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: json)))
            request.headers.add(name: "Content-Type", value: "application/json")
        }
        if let form {
            request.body = .bytes(ByteBuffer(string: form))
            request.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
        }
        if let cookie { request.headers.add(name: "Cookie", value: cookie) }
        let deadline = NIODeadline.now() + .nanoseconds(3 * Self.nanoseconds(configuration.requestTimeout))
        do {
            // AsyncHTTPClient's deadline ends with the response head; the body is read against it here.
            let response = try await client.execute(request, deadline: deadline)
            var body = ByteBuffer()
            for try await chunk in response.body {
                guard NIODeadline.now() < deadline else { throw HTTPClientError.deadlineExceeded }
                guard body.readableBytes + chunk.readableBytes <= Self.maxAnswerBytes else {
                    throw CeremonyFailure(kind: "rest.response", "the answer to \(method) \(target) is over \(Self.maxAnswerBytes) bytes")
                }
                body.writeImmutableBuffer(chunk)
            }
            var headers: [String: String] = [:]
            for (name, value) in response.headers where headers[name.lowercased()] == nil { headers[name.lowercased()] = value }
            return Answer(status: Int(response.status.code), body: Array(buffer: body), headers: headers)
        } catch {
            if Task.isCancelled || (error as? HTTPClientError) == .cancelled { throw CancellationError() }
            throw error
        }
    }

    private static func nanoseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        // Clamped so that three of them still fit: a timeout of decades is "no timeout" in
        // practice, and must not trap.
        let limit = Int64.max / 4
        guard seconds < limit / 1_000_000_000 else { return limit }
        return max(0, seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
}
