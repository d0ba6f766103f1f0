import Logging
import ServiceLifecycle
import UnixSignals

/// The one place `signfleet` handles SIGTERM and SIGINT: every long-running command (`coordinator`,
/// `proxy`, `node`, `fleet run`, `load`) runs its work as services of one `ServiceGroup` that shuts
/// them down gracefully on either signal. What "gracefully" means is each service's own business
/// (a node stops at once, a fleet stops its children and still writes the run, a load drains and
/// reports).
enum ShutdownSignals {
    static let graceful: [UnixSignal] = [.sigterm, .sigint]

    /// Runs `services` until they end (each one's end ends the group when `finishing`) or SIGTERM /
    /// SIGINT shuts them down gracefully.
    /// - Parameters:
    ///   - finishing: a service that returns has done the command's job: the group shuts down. Without
    ///     it, a service that returns before a signal is a failure (a server must not stop by itself).
    ///   - onRepeatedSignal: called on a second SIGTERM/SIGINT (the first one's shutdown taking too
    ///     long for whoever sent it), e.g. to kill children at once and exit.
    /// - Throws: what a service threw (an `ExitCode` passes through to the command's exit status).
    static func run(
        _ services: [any Service], logger: Logger, finishing: Bool = false, onRepeatedSignal: (@Sendable () -> Void)? = nil
    ) async throws {
        let configured = services.map {
            ServiceGroupConfiguration.ServiceConfiguration(
                service: $0, successTerminationBehavior: finishing ? .gracefullyShutdownGroup : .cancelGroup)
        }
        let group = ServiceGroup(configuration: ServiceGroupConfiguration(services: configured, gracefulShutdownSignals: graceful, logger: logger))
        guard let onRepeatedSignal else {
            try await group.run()
            return
        }
        // Trapped before the group traps its own, so this sees the first signal too and counts it.
        let signals = await UnixSignalsSequence(trapping: graceful)
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask {
                var seen = 0
                for await _ in signals {
                    seen += 1
                    if seen == 2 { onRepeatedSignal() }
                }
            }
            tasks.addTask { try await group.run() }
            // The service group ended (the signal watcher only ends when cancelled).
            try await tasks.next()
            tasks.cancelAll()
        }
    }
}

/// Work that stops at once on graceful shutdown: it is cancelled, and the `CancellationError`
/// that ends it then is a clean stop, not a failure.
struct CancellableWork: Service {
    let work: @Sendable () async throws -> Void

    init(_ work: @escaping @Sendable () async throws -> Void) {
        self.work = work
    }

    func run() async throws {
        do {
            try await cancelWhenGracefulShutdown(work)
        } catch is CancellationError where Task.isShuttingDownGracefully {
            return
        }
    }
}
