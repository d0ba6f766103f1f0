import FleetProtocol
import Logging
import ZeroMQ

/// A ``FleetClient`` with the task that keeps its connection up, from
/// `open(configuration:loop:logger:)` to `close()`, both called by its owner: the connection
/// starts when asked, never from an initializer, and ends before `close()` returns.
///
/// A simulated device opens one each time it comes online (a stopped client cannot be
/// restarted); a load-test device opens one for its run.
///
/// ```swift
/// let connection = FleetClientConnection.open(configuration: configuration, loop: loop, logger: logger)
/// defer { Task { await connection.close() } }
/// let reply = try await connection.client.request(Heartbeat())
/// ```
public struct FleetClientConnection: Sendable {
    /// The client; requests sent before its `hello` is answered wait for it.
    public let client: FleetClient
    private let task: Task<Void, Never>

    private init(client: FleetClient, task: Task<Void, Never>) {
        self.client = client
        self.task = task
    }

    /// Starts connecting; the caller owns the connection and must `close()` it.
    public static func open(
        configuration: FleetClientConfiguration, loop: ZMQIOLoop, logger: Logger, clock: any FleetClock = ContinuousClock()
    ) -> FleetClientConnection {
        let client = FleetClient(configuration: configuration, loop: loop, logger: logger, clock: clock)
        return FleetClientConnection(client: client, task: Task { await client.run() })
    }

    /// Closes the socket (requests waiting on it throw `CancellationError`) and waits until the
    /// connection task has ended.
    public func close() async {
        task.cancel()
        await client.stop()
        await task.value
    }
}
