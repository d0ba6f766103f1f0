import Foundation
import Hummingbird
import Logging
import ServiceLifecycle
import Synchronization

/// The fault proxy's HTTP control API, accepting Toxiproxy's JSON shapes and answering with
/// Toxiproxy's status codes, so existing Toxiproxy clients work against it.
///
/// | route | answer |
/// |---|---|
/// | `GET /version` | `200` `{"version": …}` |
/// | `POST /reset` | `204`: every proxy enabled, every toxic removed |
/// | `GET /proxies` | `200` `{name: proxy}` |
/// | `POST /proxies` | `201` proxy; `409` name taken |
/// | `POST /populate` | `201` `{"proxies": [proxy]}` (body: an array of proxies) |
/// | `GET /proxies/{proxy}` | `200` proxy |
/// | `POST`/`PATCH /proxies/{proxy}` | `200` proxy (`listen`, `upstream`, `enabled`) |
/// | `DELETE /proxies/{proxy}` | `204` |
/// | `GET /proxies/{proxy}/toxics` | `200` `[toxic]` |
/// | `POST /proxies/{proxy}/toxics` | `200` toxic; `409` name taken |
/// | `GET /proxies/{proxy}/toxics/{toxic}` | `200` toxic |
/// | `POST`/`PATCH /proxies/{proxy}/toxics/{toxic}` | `200` toxic (`attributes`, `toxicity`) |
/// | `DELETE /proxies/{proxy}/toxics/{toxic}` | `204` |
///
/// Refusals answer `{"error": message, "status": code}`: `400` for a bad body (the message names
/// the field), `404` for an unknown proxy or toxic, `409` for a taken name, `500` when a listen
/// address cannot be bound. Bodies over ``maxBodyBytes`` answer `413`.
public struct FaultProxyAPI: Sendable {
    /// The largest accepted request body, in bytes.
    public static let maxBodyBytes = 1024 * 1024
    /// What `GET /version` reports.
    public static let version = "signfleet-proxy 0.1.0 (Toxiproxy API 2)"

    struct Version: Codable { var version: String }
    struct Populated: Codable { var proxies: [ProxyDefinition] }
    struct Failure: Codable {
        var error: String
        var status: Int
    }

    let server: FaultProxyServer

    public init(server: FaultProxyServer) {
        self.server = server
    }

    /// The routes on a new router.
    public func makeRouter() -> Router<BasicRequestContext> {
        let router = Router()
        register(on: router)
        return router
    }

    /// Adds the routes to `router`.
    public func register(on router: Router<BasicRequestContext>) {
        let server = self.server
        router.get("version") { _, _ in try Self.json(Version(version: Self.version)) }
        router.post("reset") { _, _ in
            try await Self.handle {
                try await server.reset()
                return Response(status: .noContent)
            }
        }
        router.get("proxies") { _, _ in try await Self.handle { try Self.json(await server.all()) } }
        router.post("proxies") { request, _ in
            try await Self.handle {
                let definition = try await Self.decode(ProxyDefinition.self, from: request)
                return try Self.json(try await server.create(definition), status: .created)
            }
        }
        router.post("populate") { request, _ in
            try await Self.handle {
                let definitions = try await Self.decode([ProxyDefinition].self, from: request, what: "an array of proxies")
                return try Self.json(Populated(proxies: try await server.populate(definitions)), status: .created)
            }
        }
        router.get("proxies/:proxy") { _, context in
            try await Self.handle { try Self.json(try await server.proxy(named: try context.parameters.require("proxy"))) }
        }
        let updateProxy: @Sendable (Request, BasicRequestContext) async throws -> Response = { request, context in
            try await Self.handle {
                let name = try context.parameters.require("proxy")
                _ = try await server.proxy(named: name)
                let update = try await Self.decode(ProxyUpdate.self, from: request)
                return try Self.json(try await server.update(name, update))
            }
        }
        router.post("proxies/:proxy", use: updateProxy)
        router.patch("proxies/:proxy", use: updateProxy)
        router.delete("proxies/:proxy") { _, context in
            try await Self.handle {
                try await server.delete(try context.parameters.require("proxy"))
                return Response(status: .noContent)
            }
        }
        router.get("proxies/:proxy/toxics") { _, context in
            try await Self.handle { try Self.json(try await server.toxics(of: try context.parameters.require("proxy"))) }
        }
        router.post("proxies/:proxy/toxics") { request, context in
            try await Self.handle {
                let proxy = try context.parameters.require("proxy")
                _ = try await server.proxy(named: proxy)
                let toxic = try await Self.decode(Toxic.self, from: request)
                return try Self.json(try await server.addToxic(toxic, to: proxy))
            }
        }
        router.get("proxies/:proxy/toxics/:toxic") { _, context in
            try await Self.handle {
                try Self.json(
                    try await server.toxic(try context.parameters.require("toxic"), of: try context.parameters.require("proxy")))
            }
        }
        let updateToxic: @Sendable (Request, BasicRequestContext) async throws -> Response = { request, context in
            try await Self.handle {
                let proxy = try context.parameters.require("proxy")
                let name = try context.parameters.require("toxic")
                let current = try await server.toxic(name, of: proxy)
                let update = try await Self.decodeUpdate(for: current.type, from: request)
                return try Self.json(try await server.updateToxic(name, of: proxy, update))
            }
        }
        router.post("proxies/:proxy/toxics/:toxic", use: updateToxic)
        router.patch("proxies/:proxy/toxics/:toxic", use: updateToxic)
        router.delete("proxies/:proxy/toxics/:toxic") { _, context in
            try await Self.handle {
                try await server.removeToxic(try context.parameters.require("toxic"), from: try context.parameters.require("proxy"))
                return Response(status: .noContent)
            }
        }
    }

    /// Turns a ``FaultProxyError`` into Toxiproxy's error body.
    static func handle(_ body: () async throws -> Response) async throws -> Response {
        do {
            return try await body()
        } catch let error as FaultProxyError {
            return try json(
                Failure(error: error.message, status: error.status), status: HTTPResponse.Status(code: error.status))
        } catch let error as any HTTPResponseError where error.status == .contentTooLarge {
            // An over-long body answers 413 with the error body every other refusal has.
            return try json(
                Failure(error: "bad request body: over \(maxBodyBytes) bytes", status: 413), status: .contentTooLarge)
        }
    }

    static func body(of request: Request) async throws -> Data {
        let buffer = try await request.body.collect(upTo: maxBodyBytes)
        return Data(buffer.readableBytesView)
    }

    /// Decodes JSON; anything but a ``FaultProxyError`` from the types' own checks becomes a `400`.
    static func decode<T: Decodable>(_ type: T.Type, from request: Request, what: String = "a JSON object") async throws -> T {
        try decode(T.self, from: try await body(of: request), what: what)
    }

    /// Decodes a request body already read; every refusal is a ``FaultProxyError`` (400).
    static func decode<T: Decodable>(_ type: T.Type, from data: Data, what: String = "a JSON object") throws(FaultProxyError) -> T {
        do {
            return try JSONDecoder().decode(T.self, from: data)
        } catch let error as FaultProxyError {
            throw error
        } catch {
            throw FaultProxyError.badRequestBody("expected \(what): \(describe(error))")
        }
    }

    static func decodeUpdate(for type: String, from request: Request) async throws -> ToxicUpdate {
        try decodeUpdate(for: type, from: try await body(of: request))
    }

    /// Decodes a toxic update body already read, for a toxic of `type`; refusals are ``FaultProxyError``s.
    static func decodeUpdate(for type: String, from data: Data) throws(FaultProxyError) -> ToxicUpdate {
        do {
            let decoder = JSONDecoder()
            decoder.userInfo[ToxicUpdateBody.typeKey] = type
            return try decoder.decode(ToxicUpdateBody.self, from: data).update
        } catch let error as FaultProxyError {
            throw error
        } catch {
            throw FaultProxyError.badRequestBody("expected a JSON object: \(describe(error))")
        }
    }

    /// A short, field-naming account of a JSON decoding error.
    static func describe(_ error: any Error) -> String {
        guard let error = error as? DecodingError else { return "\(error)" }
        switch error {
        case .dataCorrupted(let context), .typeMismatch(_, let context), .valueNotFound(_, let context), .keyNotFound(_, let context):
            let path = context.codingPath.map(\.stringValue).joined(separator: ".")
            let underlying = (context.underlyingError as? NSError)?.userInfo[NSDebugDescriptionErrorKey] as? String
            return (path.isEmpty ? "" : "at \(path): ") + (underlying ?? context.debugDescription)
        @unknown default:
            return "\(error)"
        }
    }

    static func json(_ value: some Encodable, status: HTTPResponse.Status = .ok) throws -> Response {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        var buffer = ByteBuffer()
        buffer.writeBytes(try encoder.encode(value))
        return Response(status: status, headers: [.contentType: "application/json"], body: ResponseBody(byteBuffer: buffer))
    }
}

/// A toxic update body decoded knowing the toxic's type (to check attribute names).
struct ToxicUpdateBody: Decodable {
    static let typeKey = CodingUserInfoKey(rawValue: "signfleet.toxicType")!
    var update: ToxicUpdate

    init(from decoder: any Decoder) throws {
        update = try ToxicUpdate.decode(decoder, type: decoder.userInfo[Self.typeKey] as? String ?? "")
    }
}

/// Serves ``FaultProxyAPI`` over HTTP (hummingbird) as a swift-service-lifecycle `Service`;
/// graceful shutdown stops it.
public struct FaultProxyHTTPService: Service {
    let api: FaultProxyAPI
    let host: String
    let port: Int
    let logger: Logger
    let onListening: @Sendable (String) async -> Void

    /// - Parameters:
    ///   - api: the control API to serve.
    ///   - host: the address to listen on.
    ///   - port: `0` picks a free port; `onListening` reports the real `host:port`.
    ///   - logger: where the server logs.
    ///   - onListening: called once the server listens, with its `host:port`.
    public init(
        api: FaultProxyAPI, host: String, port: Int, logger: Logger, onListening: @escaping @Sendable (String) async -> Void = { _ in }
    ) {
        self.api = api
        self.host = host
        self.port = port
        self.logger = logger
        self.onListening = onListening
    }

    public func run() async throws {
        let host = self.host
        let onListening = self.onListening
        let listening = Mutex(false)
        let application = Application(
            router: api.makeRouter(),
            configuration: ApplicationConfiguration(address: .hostname(host, port: port), serverName: nil),
            onServerRunning: { channel in
                listening.withLock { $0 = true }
                await onListening("\(host):\(channel.localAddress?.port ?? 0)")
            },
            logger: logger)
        do {
            try await application.run()
        } catch {
            guard listening.withLock({ $0 }) else {
                throw FaultProxyError("cannot listen for the control API on \(host):\(port): \(error)", status: 500)
            }
            throw error
        }
    }
}
