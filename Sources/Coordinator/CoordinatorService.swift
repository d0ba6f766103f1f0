import FleetProtocol
import ServiceLifecycle

/// Runs a `FleetServer` (the ZeroMQ ROUTER devices talk to) as a
/// swift-service-lifecycle `Service`.
///
/// On graceful shutdown (SIGTERM or SIGINT in a `ServiceGroup`) the server stops
/// receiving, closes its socket (LINGER 0) and `run()` returns normally.
///
/// ```swift
/// let server = FleetServer(configuration: configuration, router: router, loop: loop, logger: logger)
/// let group = ServiceGroup(
///     services: [CoordinatorService(server: server), httpServer],
///     gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
/// try await group.run()
/// ```
public struct CoordinatorService: Service {
    /// The served ROUTER.
    public let server: FleetServer

    /// Wraps `server`; bind it first (`bind()`) to learn its endpoint.
    public init(server: FleetServer) {
        self.server = server
    }

    /// Serves until graceful shutdown or cancellation.
    /// - Throws: the server's error if its socket cannot be bound.
    public func run() async throws {
        let server = self.server
        try await cancelWhenGracefulShutdown {
            try await server.run()
        }
    }
}
