import Hummingbird
import Logging
import ServiceLifecycle
import Synchronization

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
    ///   - server: the main listener, whose `/health` and `/metrics` this serves.
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
        let (host, logger, onListening) = (self.host, server.logger, self.onListening)
        let listening = Mutex(false)
        let idle = idleTimeout.components
        let application = Application(
            router: router,
            server: .http1(configuration: .init(idleTimeout: .nanoseconds(idle.seconds * 1_000_000_000 + idle.attoseconds / 1_000_000_000))),
            configuration: ApplicationConfiguration(
                address: .hostname(host, port: port), serverName: nil,
                availableConnectionsDelegate: HTTPConnectionBudget.Delegate(budget: budget)),
            onServerRunning: { channel in
                let address = "\(host):\(channel.localAddress?.port ?? 0)"
                logger.info("http probe listening", metadata: ["address": "\(address)"])
                listening.withLock { $0 = true }
                await onListening(address)
            },
            logger: logger)
        do {
            try await application.run()
        } catch {
            guard listening.withLock({ $0 }) else {
                throw HTTPListenerError(
                    description: "cannot listen for HTTP probes on \(host):\(port): \(error); choose another --probe-http address or leave it off")
            }
            throw error
        }
    }
}
