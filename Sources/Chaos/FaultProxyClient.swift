import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A client of the fault proxy's control API (and of Toxiproxy's: the shapes are the same), for
/// the fleet launcher and tests.
///
/// ```swift
/// let client = FaultProxyClient(address: "127.0.0.1:8474")
/// let proxy = try await client.create(ProxyDefinition(name: "coordinator", upstream: "127.0.0.1:5555"))
/// try await client.addToxic(Toxic(name: "slow", kind: .latency(latency: 300, jitter: 50)), to: "coordinator")
/// try await client.setEnabled("coordinator", false)   // the coordinator is unreachable
/// try await client.reset()
/// ```
///
/// Refusals throw ``FaultProxyError`` with the server's message and status.
public struct FaultProxyClient: Sendable {
    /// `http://host:port` of the control API.
    public let baseURL: URL
    private let session: URLSession

    /// - Parameters:
    ///   - address: `host:port` of the control API, as `signfleet proxy` prints it after `api`.
    ///   - timeout: how long one request may take (whole seconds).
    public init(address: String, timeout: Duration = .seconds(10)) {
        baseURL = URL(string: "http://\(address)") ?? URL(fileURLWithPath: "/")
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = Double(timeout.components.seconds)
        session = URLSession(configuration: configuration)
    }

    public func version() async throws -> String {
        struct Version: Decodable { var version: String }
        return try await send("GET", "version", as: Version.self).version
    }

    /// Every proxy, by name.
    public func proxies() async throws -> [String: ProxyDefinition] {
        try await send("GET", "proxies", as: [String: ProxyDefinition].self)
    }

    public func proxy(_ name: String) async throws -> ProxyDefinition {
        try await send("GET", "proxies/\(name)", as: ProxyDefinition.self)
    }

    /// Creates a proxy; the answer has the real listen address.
    @discardableResult
    public func create(_ proxy: ProxyDefinition) async throws -> ProxyDefinition {
        try await send("POST", "proxies", body: proxy, as: ProxyDefinition.self)
    }

    /// Creates or replaces several proxies.
    @discardableResult
    public func populate(_ proxies: [ProxyDefinition]) async throws -> [ProxyDefinition] {
        struct Populated: Decodable { var proxies: [ProxyDefinition] }
        return try await send("POST", "populate", body: proxies, as: Populated.self).proxies
    }

    /// Takes a proxy down (`false`: connections closed, new ones refused) or back up.
    @discardableResult
    public func setEnabled(_ name: String, _ enabled: Bool) async throws -> ProxyDefinition {
        try await send("POST", "proxies/\(name)", body: ProxyUpdate(enabled: enabled), as: ProxyDefinition.self)
    }

    public func delete(_ name: String) async throws {
        try await send("DELETE", "proxies/\(name)")
    }

    public func toxics(of proxy: String) async throws -> [Toxic] {
        try await send("GET", "proxies/\(proxy)/toxics", as: [Toxic].self)
    }

    @discardableResult
    public func addToxic(_ toxic: Toxic, to proxy: String) async throws -> Toxic {
        try await send("POST", "proxies/\(proxy)/toxics", body: toxic, as: Toxic.self)
    }

    @discardableResult
    public func updateToxic(_ name: String, of proxy: String, _ update: ToxicUpdate) async throws -> Toxic {
        try await send("POST", "proxies/\(proxy)/toxics/\(name)", body: update, as: Toxic.self)
    }

    public func removeToxic(_ name: String, from proxy: String) async throws {
        try await send("DELETE", "proxies/\(proxy)/toxics/\(name)")
    }

    /// Enables every proxy and removes every toxic.
    public func reset() async throws {
        try await send("POST", "reset")
    }

    // MARK: - Transport

    private struct Failure: Decodable {
        var error: String
        var status: Int
    }

    private struct Empty: Encodable {}

    @discardableResult
    private func send(_ method: String, _ path: String) async throws -> Data {
        try await exchange(method, path, body: Optional<Empty>.none)
    }

    private func send<Answer: Decodable>(_ method: String, _ path: String, as: Answer.Type) async throws -> Answer {
        try decode(Answer.self, try await exchange(method, path, body: Optional<Empty>.none))
    }

    private func send<Body: Encodable, Answer: Decodable>(
        _ method: String, _ path: String, body: Body, as: Answer.Type
    ) async throws -> Answer {
        try decode(Answer.self, try await exchange(method, path, body: body))
    }

    private func decode<Answer: Decodable>(_ type: Answer.Type, _ data: Data) throws -> Answer {
        do {
            return try JSONDecoder().decode(Answer.self, from: data)
        } catch {
            throw FaultProxyError("unexpected answer from the fault proxy at \(baseURL): \(error)", status: 502)
        }
    }

    private func exchange<Body: Encodable>(_ method: String, _ path: String, body: Body?) async throws -> Data {
        var request = URLRequest(url: baseURL.appendingPathComponent(path))
        request.httpMethod = method
        if let body {
            request.httpBody = try JSONEncoder().encode(body)
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        let (data, response) = try await session.data(for: request)
        guard let http = response as? HTTPURLResponse else {
            throw FaultProxyError("no HTTP answer from the fault proxy at \(baseURL)", status: 502)
        }
        guard (200..<300).contains(http.statusCode) else {
            let failure = try? JSONDecoder().decode(Failure.self, from: data)
            throw FaultProxyError(
                failure?.error ?? "\(method) /\(path) answered \(http.statusCode): \(String(decoding: data, as: UTF8.self))",
                status: http.statusCode)
        }
        return data
    }
}
