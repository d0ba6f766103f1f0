import ArgumentParser
import FleetProtocol
import Foundation
import ZeroMQ

/// `signfleet coordinator`: the server side. For now it answers hello and
/// heartbeats and logs device liveness; sync, accounts and templates come
/// with the coordinator issue.
struct CoordinatorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "coordinator",
        abstract: "Run the coordinator (the e-signature server devices sync with).",
        discussion: """
            Binds a ZeroMQ ROUTER and prints `listening <endpoint>` on standard output once bound. \
            Use `tcp://127.0.0.1:*` to let the system pick a free port. Stops cleanly on SIGINT or SIGTERM.
            """
    )

    @Option(help: "ZeroMQ endpoint to bind.")
    var bind: String = "tcp://127.0.0.1:5555"

    @Option(help: "Devices send a heartbeat after this many idle milliseconds.")
    var heartbeatMs: Int = 1000

    @Option(help: "A device silent for this many heartbeat intervals is reported lost.")
    var liveness: Int = 3

    @Option(help: "Largest accepted frame, in bytes.")
    var maxMessageSize: Int = 16 << 20

    @OptionGroup var logging: LoggingOptions

    func validate() throws {
        guard heartbeatMs >= 10 else { throw ValidationError("--heartbeat-ms must be at least 10") }
        guard liveness >= 1 else { throw ValidationError("--liveness must be at least 1") }
        guard maxMessageSize >= 1024 else { throw ValidationError("--max-message-size must be at least 1024") }
    }

    func run() async throws {
        let logger = try logging.makeLogger(label: "coordinator")
        let configuration = FleetServerConfiguration(
            endpoint: bind,
            heartbeatInterval: .milliseconds(heartbeatMs),
            heartbeatLiveness: liveness,
            limits: WireLimits(maxMessageSize: maxMessageSize)
        )
        let context = try ZMQContext()
        let loop = try ZMQIOLoop(context: context, label: "coordinator-io")
        let server = FleetServer(configuration: configuration, router: RequestRouter(), loop: loop, logger: logger)
        do {
            let endpoint = try await server.bind()
            announce("listening \(endpoint)")
            try await runUntilSignalled { try await server.run() }
        } catch {
            await loop.shutdown()
            context.shutdown()
            throw error
        }
        await loop.shutdown()
        context.shutdown()
    }
}
