import ArgumentParser
import FleetProtocol
import Foundation
import Logging
import ZeroMQ

/// `signfleet node`: hosts simulated devices. For now each device keeps a
/// connection (hello, heartbeats, reconnect with back-off) and logs liveness;
/// signing and sync come with the device-node and fleet issues.
struct NodeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "node",
        abstract: "Run a device node hosting one or more simulated devices.",
        discussion: """
            All devices of one node share one ZeroMQ I/O thread; each has its own DEALER socket whose \
            routing id is its device id. Stops cleanly on SIGINT or SIGTERM, or after --duration.
            """
    )

    @Option(help: "The coordinator's ZeroMQ endpoint.")
    var connect: String = "tcp://127.0.0.1:5555"

    @Option(help: "How many devices this node hosts.")
    var devices: Int = 1

    @Option(help: "Device ids are <prefix>-<n>.")
    var devicePrefix: String = "device"

    @Option(help: "Stop after this many seconds (default: run until signalled).")
    var duration: Double?

    @Option(help: "Per-request reply timeout in milliseconds.")
    var requestTimeoutMs: Int = 2000

    @OptionGroup var logging: LoggingOptions

    func validate() throws {
        guard (1...10_000).contains(devices) else { throw ValidationError("--devices must be between 1 and 10000") }
        guard !devicePrefix.isEmpty, devicePrefix.utf8.count <= 200 else {
            throw ValidationError("--device-prefix must be 1 to 200 bytes")
        }
        if let duration, duration <= 0 { throw ValidationError("--duration must be positive") }
        guard requestTimeoutMs >= 10 else { throw ValidationError("--request-timeout-ms must be at least 10") }
    }

    func run() async throws {
        let logger = try logging.makeLogger(label: "node")
        let context = try ZMQContext()
        let loop = try ZMQIOLoop(context: context, label: "node-io")
        let clients = (1...devices).map { index in
            var deviceLogger = logger
            deviceLogger[metadataKey: "device"] = "\(devicePrefix)-\(index)"
            return FleetClient(
                configuration: FleetClientConfiguration(
                    endpoint: connect, deviceID: "\(devicePrefix)-\(index)",
                    requestTimeout: .milliseconds(requestTimeoutMs)),
                loop: loop, logger: deviceLogger)
        }
        announce("node started devices=\(devices) endpoint=\(connect)")
        let duration = self.duration
        try await runUntilSignalled {
            await withTaskGroup(of: Void.self) { group in
                for client in clients {
                    group.addTask { await client.run() }
                }
                if let duration {
                    group.addTask { try? await Task.sleep(for: .milliseconds(Int64(duration * 1000))) }
                    await group.next()
                    group.cancelAll()
                }
            }
        }
        await loop.shutdown()
        context.shutdown()
        announce("node stopped")
    }
}
