import FleetProtocol
import Foundation
import Hummingbird
import HummingbirdCore
import HummingbirdTLS
import NIOSSL
import Logging
import Prometheus
import ServiceLifecycle
import Synchronization

/// The coordinator's HTTP listener (hummingbird): health, Prometheus metrics and a JSON status.
///
/// | route | answer |
/// |---|---|
/// | `GET /health` | `200` and `{"status": "ok", "reasons": [], "instance": …, "uptime": seconds}`; `"degraded"` with reasons such as `store_disk_full` (still `200`: docs/coordinator.md) |
/// | `GET /metrics` | the Prometheus text exposition of `registry` |
/// | `GET /status` | ``CoordinatorStatus`` as JSON; `503` when the store cannot be read |
/// | `/admin/…` | with an `admin` token: ``CoordinatorAdminRoutes``; without: `404` |
/// | `/signing/…` | with `captive`: the captive-signing pages (``CaptiveSigningRoutes``) |
/// | `/restapi/…`, `/oauth/userinfo` | with `rest`: the eSignature REST API subset (`RESTRoutes`, docs/rest-api.md) |
///
/// It is a swift-service-lifecycle `Service`: run it in the coordinator's `ServiceGroup`
/// and it stops accepting connections on graceful shutdown.
///
/// ```swift
/// let http = CoordinatorHTTPServer(
///     configuration: .init(host: "127.0.0.1", port: 0), registry: registry,
///     instance: instance, status: { try await makeStatus() }, logger: logger,
///     onListening: { address in print("http \(address)") })
/// ```
public struct CoordinatorHTTPServer: Service {
    /// Where the listener binds.
    public struct Configuration: Sendable, Hashable {
        public var host: String
        /// `0` lets the system pick a free port; `init(configuration:registry:instance:status:logger:admin:onListening:)`'s
        /// `onListening` reports the real one.
        public var port: Int
        /// A connection that sends nothing for this long is closed, unfinished headers included: idle
        /// connections must not pile up until the process runs out of file descriptors (issue #14).
        public var idleTimeout: Duration
        /// Connections served at once; beyond, `503` (``HTTPConnectionBudget``). Nil: a quarter of
        /// the open-file limit, between 16 and 1,024.
        public var maxConnections: Int?

        public init(host: String = "127.0.0.1", port: Int = 8080, idleTimeout: Duration = .seconds(30), maxConnections: Int? = nil) {
            self.maxConnections = maxConnections
            self.host = host
            self.port = port
            self.idleTimeout = idleTimeout
        }
    }

    /// The `GET /health` body.
    public struct Health: Sendable, Hashable, Codable {
        /// `ok`, or `degraded` while something in `reasons` is wrong (the process still serves).
        public var status: String
        /// Why it is degraded: `store_disk_full`, `store_io_error` (``StoreFaultKind/healthReason``); empty when ok.
        public var reasons: [String]
        public var instance: String
        /// Seconds since the server was created.
        public var uptime: Double
    }

    public let configuration: Configuration
    let registry: PrometheusCollectorRegistry
    let instance: String
    let status: @Sendable () async throws -> CoordinatorStatus
    let logger: Logger
    let onListening: @Sendable (String) async -> Void
    let admin: CoordinatorAdminRoutes?
    let captive: CaptiveSigningRoutes?
    let rest: RESTRoutes?
    let storeFaults: StoreFaultMonitor?
    let storeRegressions: StoreRegressionMonitor?
    /// Refused admin and signing requests, logged rate-limited.
    let refusals: HTTPRefusals
    /// Connections open, and how many are served.
    let budget: HTTPConnectionBudget
    let started = ContinuousClock.now

    /// - Parameters:
    ///   - configuration: the bind address.
    ///   - registry: the Prometheus registry `GET /metrics` exposes (the one the process's
    ///     metrics factory writes to).
    ///   - instance: identifies this coordinator run in `GET /health`.
    ///   - status: makes the `GET /status` snapshot.
    ///   - logger: for the HTTP server's own logs.
    ///   - admin: the admin endpoints with their token; `nil` leaves them out (`404`).
    ///   - captive: the captive-signing pages; once bound, their service learns the listener's URL.
    ///   - rest: the eSignature REST API subset under `/restapi` (docs/rest-api.md).
    ///   - storeFaults: the store's disk-fault monitor; while it has an episode, `GET /health` is `degraded`.
    ///   - storeRegressions: devices ahead of the store; while there is one, `GET /health` is `degraded`.
    ///   - refusals: where refused admin and signing requests are logged (rate-limited); by default on `logger`.
    ///   - onListening: called once bound, with `host:port` (the real port when `port` is 0).
    public init(
        configuration: Configuration, registry: PrometheusCollectorRegistry, instance: String,
        status: @escaping @Sendable () async throws -> CoordinatorStatus, logger: Logger,
        admin: CoordinatorAdminRoutes? = nil,
        captive: CaptiveSigningRoutes? = nil,
        rest: RESTRoutes? = nil,
        storeFaults: StoreFaultMonitor? = nil,
        storeRegressions: StoreRegressionMonitor? = nil,
        refusals: HTTPRefusals? = nil,
        onListening: @escaping @Sendable (String) async -> Void = { _ in }
    ) {
        self.storeFaults = storeFaults
        self.storeRegressions = storeRegressions
        self.refusals = refusals ?? HTTPRefusals(logger: logger)
        budget = HTTPConnectionBudget(limit: configuration.maxConnections ?? HTTPConnectionBudget.defaultLimit())
        self.admin = admin
        self.captive = captive
        self.rest = rest
        self.configuration = configuration
        self.registry = registry
        self.instance = instance
        self.status = status
        self.logger = logger
        self.onListening = onListening
    }

    /// Serves until graceful shutdown or cancellation.
    /// - Throws: when the address cannot be bound (in use, or not an address of this host).
    public func run() async throws {
        let host = configuration.host
        let onListening = self.onListening
        let links = captive?.service.links
        logger.info("http connection limit", metadata: ["limit": "\(budget.limit)", "accepting": "\(budget.limit + budget.headroom)"])
        try await Self.serve(
            makeRouter(), host: host, port: configuration.port, idleTimeout: configuration.idleTimeout, budget: budget, logger: logger,
            what: "HTTP", hint: "choose another --http address (port 0 picks a free one) or --http off"
        ) { address, port in
            // A wildcard bind is not an address a browser can open: links use loopback then.
            let linkHost = (host == "0.0.0.0" || host == "::") ? "127.0.0.1" : (host.contains(":") ? "[\(host)]" : host)
            links?.publish(baseURL: "http://\(linkHost):\(port)")
            await onListening(address)
        }
    }

    /// Runs one hummingbird listener for `router` within `budget` until graceful shutdown or
    /// cancellation; `onRunning` gets `host:port` and the real port once bound.
    /// - Throws: ``HTTPListenerError`` naming `what` and `hint` when the address cannot be bound.
    static func serve(
        _ router: Router<BasicRequestContext>, host: String, port: Int, idleTimeout: Duration, budget: HTTPConnectionBudget,
        logger: Logger, what: String, hint: String, tls: TLSConfiguration? = nil, onRunning: @escaping @Sendable (String, Int) async -> Void
    ) async throws {
        let listening = Mutex(false)
        let idle = idleTimeout.components
        let http1 = HTTPServerBuilder.http1(configuration: .init(idleTimeout: .nanoseconds(idle.seconds * 1_000_000_000 + idle.attoseconds / 1_000_000_000)))
        let application = Application(
            router: router,
            server: try tls.map { try .tls(http1, tlsConfiguration: $0) } ?? http1,
            configuration: ApplicationConfiguration(
                address: .hostname(host, port: port), serverName: nil,
                availableConnectionsDelegate: HTTPConnectionBudget.Delegate(budget: budget)),
            onServerRunning: { channel in
                let port = channel.localAddress?.port ?? 0
                let address = "\(host):\(port)"
                logger.info("\(what) listening", metadata: ["address": "\(address)"])
                listening.withLock { $0 = true }
                await onRunning(address, port)
            },
            logger: logger)
        do {
            try await application.run()
        } catch {
            guard listening.withLock({ $0 }) else {
                throw HTTPListenerError(description: "cannot listen for \(what) on \(host):\(port): \(error); \(hint)")
            }
            throw error
        }
    }

    /// The routes, for tests that drive them without a socket.
    /// - Parameter secure: for the HTTPS listener (``CoordinatorHTTPSListener``): the REST API's
    ///   user info then names the HTTPS base URL.
    func makeRouter(secure: Bool = false) -> Router<BasicRequestContext> {
        let router = Router()
        // First: a route takes the middlewares added before it.
        router.add(middleware: HTTPConnectionBudget.Middleware(budget: budget, refusals: refusals))
        registerProbes(on: router)
        let status = self.status
        let logger = self.logger
        let refusals = self.refusals
        router.get("status") { _, _ -> Response in
            let snapshot: CoordinatorStatus
            do {
                snapshot = try await status()
            } catch {
                logger.error("status unavailable", metadata: ["error": "\(error)"])
                throw HTTPError(.serviceUnavailable, message: "the coordinator's store cannot be read: \(error)")
            }
            return try Self.json(snapshot)
        }
        admin?.register(on: router, refusals: refusals)
        captive?.register(on: router, admin: admin, refusals: refusals)
        rest?.register(on: router, secure: secure)
        return router
    }

    /// `GET /health` and `GET /metrics`, on the main listener and on the probe listener
    /// (``CoordinatorProbeListener``).
    func registerProbes(on router: Router<BasicRequestContext>) {
        let instance = self.instance
        let started = self.started
        let registry = self.registry
        let storeFaults = self.storeFaults
        let storeRegressions = self.storeRegressions
        router.get("health") { _, _ -> Response in
            let uptime = started.duration(to: .now)
            storeFaults?.probeDuringEpisode()
            let reasons = (storeFaults?.healthReasons ?? []) + (storeRegressions?.healthReasons ?? [])
            // Degraded stays 200: a restart frees no disk, and reads and signing pages still work
            // (docs/coordinator.md, "Health"); monitors read `status`, probes only the code.
            return try Self.json(
                Health(
                    status: reasons.isEmpty ? "ok" : "degraded", reasons: reasons, instance: instance,
                    uptime: uptime.seconds))
        }
        router.get("metrics") { _, _ -> Response in
            var buffer = ByteBuffer()
            buffer.writeBytes(registry.emitToBuffer())
            return Response(
                status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                body: ResponseBody(byteBuffer: buffer))
        }
    }

    /// The HTTP API's JSON: sorted keys, unescaped slashes (paths stay readable), and every time in
    /// ISO 8601 (`2026-11-25T18:05:00Z`), never Foundation's seconds since 2001.
    static func encoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        return encoder
    }

    /// A `200` JSON response in the HTTP API's JSON (``encoder()``).
    static func json(_ value: some Encodable) throws -> Response {
        var buffer = ByteBuffer()
        buffer.writeBytes(try encoder().encode(value))
        return Response(
            status: .ok, headers: [.contentType: "application/json; charset=utf-8"], body: ResponseBody(byteBuffer: buffer))
    }
}

/// The HTTP listener could not start (typically: the address is in use).
public struct HTTPListenerError: Error, Sendable, CustomStringConvertible {
    public var description: String
}
