import ArgumentParser
import Coordinator
import FleetProtocol
import Foundation
import ZeroMQ

/// `signfleet coordinator`: the server side. It answers hello and heartbeats,
/// logs device liveness, and serves access tokens, user info and device
/// enrollment from its SQLite store; sync ingest and templates come with the
/// rest of the coordinator issue.
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

    @Option(help: "Path of the coordinator's SQLite store (created if missing).")
    var store: String = "signfleet-coordinator.sqlite"

    @Flag(help: "Create the demo account and user (user1@demo.example, secret demo-secret) if missing.")
    var seedDemo = false

    @Option(help: "Access tokens expire after this many seconds.")
    var tokenLifetime: Int = 3600

    @Option(help: "Largest accepted frame, in bytes.")
    var maxMessageSize: Int = 16 << 20

    @OptionGroup var logging: LoggingOptions

    func validate() throws {
        guard heartbeatMs >= 10 else { throw ValidationError("--heartbeat-ms must be at least 10") }
        guard liveness >= 1 else { throw ValidationError("--liveness must be at least 1") }
        guard maxMessageSize >= 1024 else { throw ValidationError("--max-message-size must be at least 1024") }
        guard tokenLifetime >= 1 else { throw ValidationError("--token-lifetime must be at least 1") }
    }

    func run() async throws {
        let logger = try logging.makeLogger(label: "coordinator")
        let configuration = FleetServerConfiguration(
            endpoint: bind,
            heartbeatInterval: .milliseconds(heartbeatMs),
            heartbeatLiveness: liveness,
            limits: WireLimits(maxMessageSize: maxMessageSize)
        )
        let coordinatorStore: CoordinatorStore
        do {
            coordinatorStore = try CoordinatorStore(path: store)
        } catch {
            throw ValidationError("cannot open the store at \(store): \(error)")
        }
        let services = CoordinatorServices(store: coordinatorStore, tokenLifetime: .seconds(tokenLifetime))
        if seedDemo {
            let (account, users) = try await services.accounts.seedDemo()
            logger.info("demo data ready", metadata: ["account": "\(account.id)", "users": "\(users.map(\.email))"])
        }
        var router = RequestRouter(codec: WireCodec(limits: configuration.limits))
        services.register(in: &router)
        let context = try ZMQContext()
        let loop = try ZMQIOLoop(context: context, label: "coordinator-io")
        let server = FleetServer(configuration: configuration, router: router, loop: loop, logger: logger)
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
