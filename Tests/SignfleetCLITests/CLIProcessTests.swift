import Foundation
import FleetTesting
import Testing

/// The built `signfleet` binary: `SIGNFLEET_BIN` (set by `make test`) or the
/// default debug build path.
func signfleetBinary() throws -> String {
    let path = ProcessInfo.processInfo.environment["SIGNFLEET_BIN"] ?? FileManager.default.currentDirectoryPath + "/.build/debug/signfleet"
    guard FileManager.default.isExecutableFile(atPath: path) else {
        throw CLITestError("signfleet binary not found at \(path); run `swift build` first or set SIGNFLEET_BIN")
    }
    return path
}

struct CLITestError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

@Suite struct CLIBasicsTests {
    @Test func versionAndHelp() async throws {
        let binary = try signfleetBinary()
        let version = try ChildProcess.launch(binary, ["--version"])
        #expect(try await version.waitForExit(timeout: .seconds(30)) == 0)
        #expect(version.lines(.standardOutput).first?.range(of: #"^\d+\.\d+\.\d+$"#, options: .regularExpression) != nil, "\(version.output)")

        let help = try ChildProcess.launch(binary, ["--help"])
        #expect(try await help.waitForExit(timeout: .seconds(30)) == 0)
        let text = help.lines(.standardOutput).joined(separator: "\n")
        for subcommand in ["coordinator", "node", "sign"] {
            #expect(text.contains(subcommand), "help does not list \(subcommand):\n\(text)")
        }
    }

    @Test(arguments: [
        (["node", "--devices", "0"], "--devices"),
        (["coordinator", "--heartbeat-ms", "1"], "--heartbeat-ms"),
        (["node", "--log-level", "loud"], "log level"),
    ])
    func badOptionsAreNamedInTheError(arguments: [String], mentions: String) async throws {
        let child = try ChildProcess.launch(try signfleetBinary(), arguments)
        let status = try await child.waitForExit(timeout: .seconds(30))
        #expect(status != 0)
        #expect(child.output.contains(mentions), "\(child.output)")
    }
}

/// Whether a log line reports `event` for `device` (swift-log's `device=...` metadata).
/// The CURVE public key a coordinator printed (`curve-public-key <Z85>`), for `--server-key`.
func curvePublicKey(of coordinator: ChildProcess) async throws -> String {
    let line = try await coordinator.waitForLine(in: .standardOutput, timeout: .seconds(30)) { $0.hasPrefix("curve-public-key ") }
    return String(line.dropFirst("curve-public-key ".count))
}

@Sendable func isLine(_ line: String, _ event: String, device: String) -> Bool {
    line.contains(event) && line.contains("device=\(device)")
}

@Suite struct CLIWireTests {
    /// Starts a coordinator (logging at debug, so heartbeats show) and returns it with its endpoint.
    /// A restart on the same `store` serves the same CURVE key, which the devices pinned.
    func startCoordinator(
        _ binary: String, bind: String = "tcp://127.0.0.1:*",
        store: String = FileManager.default.temporaryDirectory.appendingPathComponent("coordinator-\(UUID().uuidString).sqlite").path
    ) async throws -> (ChildProcess, String, key: String) {
        let coordinator = try ChildProcess.launch(
            binary,
            ["coordinator", "--bind", bind, "--heartbeat-ms", "200", "--liveness", "3", "--log-level", "debug", "--store", store],
            name: "coordinator")
        let line = try await coordinator.waitForLine(in: .standardOutput, timeout: .seconds(30)) { $0.hasPrefix("listening ") }
        return (coordinator, String(line.dropFirst("listening ".count)), try await curvePublicKey(of: coordinator))
    }


    @Test func devicesSayHelloKeepAliveAndAreLostWhenTheirNodeStops() async throws {
        let binary = try signfleetBinary()
        let (coordinator, endpoint, key) = try await startCoordinator(binary)
        defer { Task { await coordinator.terminate() } }
        #expect(endpoint.hasPrefix("tcp://127.0.0.1:") && !endpoint.hasSuffix(":*"))

        let node = try ChildProcess.launch(
            binary, ["node", "--connect", endpoint, "--server-key=\(key)", "--devices", "3", "--device-prefix", "t"], name: "node")
        defer { Task { await node.terminate() } }
        let devices = ["t-1", "t-2", "t-3"]
        for device in devices {
            try await coordinator.waitForLine(timeout: .seconds(30)) { isLine($0, "device alive", device: device) }
            try await node.waitForLine(timeout: .seconds(30)) { isLine($0, "connected", device: device) }
        }
        // Heartbeats keep an idle device alive: wait until one has sent three.
        let start = coordinator.count { isLine($0, "heartbeat", device: "t-1") }
        try await coordinator.waitForLines(start + 3, timeout: .seconds(30)) { isLine($0, "heartbeat", device: "t-1") }
        #expect(coordinator.count { $0.contains("device lost") } == 0, "\(coordinator.output)")

        // SIGTERM stops the node cleanly; the coordinator notices every device's silence.
        node.signal(SIGTERM)
        #expect(try await node.waitForExit(timeout: .seconds(30)) == 0, "\(node.output)")
        #expect(node.lines(.standardOutput).contains("node stopped"))
        for device in devices {
            try await coordinator.waitForLine(timeout: .seconds(30)) { isLine($0, "device lost", device: device) }
        }
        coordinator.signal(SIGTERM)
        #expect(try await coordinator.waitForExit(timeout: .seconds(30)) == 0, "\(coordinator.output)")
    }

    /// A node whose devices sign (they do not watch their handshakes) checks the pinned key with
    /// one connection first: a wrong key ends it at once with what is wrong, instead of devices
    /// retrying in silence.
    @Test func aNodeWithAWrongServerKeySaysSoAndStops() async throws {
        let binary = try signfleetBinary()
        let (coordinator, endpoint, key) = try await startCoordinator(binary)
        defer { Task { await coordinator.terminate() } }
        let (other, _, otherKey) = try await startCoordinator(binary)
        await other.terminate()
        #expect(otherKey != key)
        let data = FileManager.default.temporaryDirectory.appendingPathComponent("node-\(UUID().uuidString)").path
        let node = try ChildProcess.launch(
            binary,
            ["node", "--connect", endpoint, "--server-key=\(otherKey)", "--devices", "2", "--envelopes", "1", "--data-dir", data],
            name: "node")
        defer { Task { await node.terminate() } }
        // The line, then the exit: the exit can be seen before the last output is read.
        let said = try await node.waitForLine(timeout: .seconds(60)) { $0.contains("cannot use the coordinator at \(endpoint)") }
        #expect(said.contains("not the pinned one"), "\(said)")
        #expect(try await node.waitForExit(timeout: .seconds(60)) != 0)
        #expect(!FileManager.default.fileExists(atPath: data), "no device store was made")
    }

    @Test func devicesReconnectAfterTheCoordinatorIsKilledAndRestarted() async throws {
        let binary = try signfleetBinary()
        let store = FileManager.default.temporaryDirectory.appendingPathComponent("coordinator-\(UUID().uuidString).sqlite").path
        let (first, endpoint, key) = try await startCoordinator(binary, store: store)
        defer { Task { await first.terminate() } }
        let node = try ChildProcess.launch(
            binary,
            ["node", "--connect", endpoint, "--server-key=\(key)", "--devices", "2", "--device-prefix", "r", "--request-timeout-ms", "300"],
            name: "node")
        defer { Task { await node.terminate() } }
        for device in ["r-1", "r-2"] {
            try await node.waitForLine(timeout: .seconds(30)) { isLine($0, "connected", device: device) }
        }

        first.signal(SIGKILL)
        _ = try await first.waitForExit(timeout: .seconds(30))
        for device in ["r-1", "r-2"] {
            try await node.waitForLine(timeout: .seconds(30)) { isLine($0, "server lost", device: device) }
        }

        let (second, sameEndpoint, sameKey) = try await startCoordinator(binary, bind: endpoint, store: store)
        #expect(sameKey == key, "the key is the store's")
        defer { Task { await second.terminate() } }
        #expect(sameEndpoint == endpoint)
        for device in ["r-1", "r-2"] {
            try await second.waitForLine(timeout: .seconds(60)) { isLine($0, "device alive", device: device) }
            try await node.waitForLines(2, timeout: .seconds(60)) { isLine($0, "connected", device: device) }
        }
    }
}
