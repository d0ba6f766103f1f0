import Coordinator
import FleetProtocol
import Foundation
import Logging
import ZeroMQ

/// A real coordinator for the load tests: a SQLite store in a fresh temporary directory with
/// the demo account (user1@demo.example / demo-secret), served over ZeroMQ on a free port.
final class ServedCoordinator: Sendable {
    let directory: String
    let store: CoordinatorStore
    let endpoint: String
    let context: ZMQContext
    let loop: ZMQIOLoop
    let logger: Logger
    private let serving: Task<Void, Never>

    init(label: String) async throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("\(label)-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        var logger = Logger(label: label)
        logger.logLevel = .critical
        self.logger = logger
        store = try CoordinatorStore(path: directory + "/coordinator.sqlite")
        let services = CoordinatorServices(store: store)
        _ = try await services.accounts.seedDemo()
        var router = RequestRouter()
        services.register(in: &router)
        context = try ZMQContext()
        loop = try ZMQIOLoop(context: context, label: label)
        let server = FleetServer(configuration: FleetServerConfiguration(endpoint: "tcp://127.0.0.1:*"), router: router, loop: loop, logger: logger)
        endpoint = try await server.bind()
        serving = Task { try? await server.run() }
    }

    /// Stops serving and shuts the I/O loop down (the directory stays until ``remove()``).
    func stop() async {
        serving.cancel()
        await serving.value
        await loop.shutdown()
        context.shutdown()
    }

    func remove() {
        try? FileManager.default.removeItem(atPath: directory)
    }
}
