import Hummingbird
import Logging
import ServiceLifecycle

/// A second HTTP listener that serves only `GET /health` and `GET /metrics`, with connections of
/// its own (docs/coordinator.md, "HTTP limits").
///
/// The main listener stops accepting once its connection budget is spent, so that HTTP never
/// takes the file descriptors sync needs; 1,100 idle connections then left `/health` waiting in
/// the kernel's accept queue, and an orchestrator restarted a healthy coordinator. Probes and
/// scrapes sent here are answered whatever the main listener holds: a small budget of its own
/// (beyond it `503`, then no accepts), and a short idle timeout so a stuck probe frees its slot.
public struct CoordinatorProbeListener: Service {
    public let host: String
    public let port: Int
    /// Connections served at once (a few probes and a scraper).
    public let maxConnections: Int
    public let idleTimeout: Duration
    let server: CoordinatorHTTPServer
    let onListening: @Sendable (String) async -> Void

    /// - Parameters:
    ///   - host: the address to listen on.
    ///   - port: the port; 0 picks a free one.
    ///   - server: the main listener, whose `/health` and `/metrics` this serves.
    ///   - maxConnections: connections served at once (its budget is its own).
    ///   - idleTimeout: how long an idle connection stays open.
    ///   - onListening: called once bound, with `host:port` (the real port when `port` is 0).
    public init(
        host: String, port: Int, server: CoordinatorHTTPServer, maxConnections: Int = 16, idleTimeout: Duration = .seconds(5),
        onListening: @escaping @Sendable (String) async -> Void = { _ in }
    ) {
        self.host = host
        self.port = port
        self.server = server
        self.maxConnections = maxConnections
        self.idleTimeout = idleTimeout
        self.onListening = onListening
    }

    public func run() async throws {
        let budget = HTTPConnectionBudget(limit: maxConnections, headroom: maxConnections)
        let router = Router()
        router.add(middleware: HTTPConnectionBudget.Middleware(budget: budget, refusals: server.refusals, exempt: []))
        server.registerProbes(on: router)
        let onListening = self.onListening
        try await CoordinatorHTTPServer.serve(
            router, host: host, port: port, idleTimeout: idleTimeout, budget: budget, logger: server.logger,
            what: "HTTP probes", hint: "choose another --probe-http address or leave it off"
        ) { address, _ in await onListening(address) }
    }
}
