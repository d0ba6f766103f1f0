import Foundation
import FleetTesting
import Testing

/// Two coordinator processes on one PostgreSQL store (docs/storage.md): both serve at once with
/// one CURVE key, a device that synced through one carries on through the other after the first
/// is killed, and the store ends with every envelope once, in each device's order.
@Suite struct PostgresCoordinatorProcessTests {
    @Test func twoCoordinatorsShareOneStoreAndADeviceMovesBetweenThem() async throws {
        let binary = try signfleetBinary()
        let schema = "p_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        let store = try await PostgresTestServer.url() + "?schema=\(schema)"
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pg-coordinators-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let seed = "\(testSeed("PostgresCoordinatorProcessTests"))"
        print("postgres coordinators seed \(seed) (replay with SIGNFLEET_SEED=\(seed))")

        func coordinator(_ name: String) async throws -> (ChildProcess, String, String) {
            let child = try ChildProcess.launch(
                binary, ["coordinator", "--bind", "tcp://127.0.0.1:*", "--heartbeat-ms", "200", "--store", store, "--seed-demo"], name: name)
            let line = try await child.waitForLine(in: .standardOutput, timeout: .seconds(60)) { $0.hasPrefix("listening ") }
            return (child, String(line.dropFirst("listening ".count)), try await curvePublicKey(of: child))
        }
        func node(_ endpoint: String, key: String, prefix: String, envelopes: Int) throws -> ChildProcess {
            try ChildProcess.launch(
                binary,
                [
                    "node", "--connect", endpoint, "--server-key=\(key)", "--devices", "2", "--device-prefix", prefix,
                    "--envelopes", "\(envelopes)", "--interval-ms", "300", "--request-timeout-ms", "300",
                    "--data-dir", directory.appendingPathComponent(prefix).path, "--seed", seed,
                ], name: "node-\(prefix)")
        }

        let (first, firstEndpoint, key) = try await coordinator("coordinator-1")
        defer { Task { await first.terminate() } }
        let (second, secondEndpoint, secondKey) = try await coordinator("coordinator-2")
        defer { Task { await second.terminate() } }
        #expect(secondKey == key, "every coordinator on the store serves with its one CURVE key")

        // Devices a-* sync through the first coordinator, b-* through the second, at the same time.
        let movers = try node(firstEndpoint, key: key, prefix: "a", envelopes: 6)
        defer { Task { await movers.terminate() } }
        let stayers = try node(secondEndpoint, key: key, prefix: "b", envelopes: 4)
        defer { Task { await stayers.terminate() } }
        try await movers.waitForLines(3, timeout: .seconds(90)) { $0.contains("] synced") }
        // The first coordinator dies; the a-* devices restart against the second one.
        first.signal(SIGKILL)
        movers.signal(SIGKILL)
        _ = try await first.waitForExit(timeout: .seconds(30))
        _ = try await movers.waitForExit(timeout: .seconds(30))
        let moved = try node(secondEndpoint, key: key, prefix: "a", envelopes: 6)
        defer { Task { await moved.terminate() } }
        #expect(try await moved.waitForExit(timeout: .seconds(180)) == 0, "\(moved.output)")
        #expect(try await stayers.waitForExit(timeout: .seconds(180)) == 0, "\(stayers.output)")
        #expect(moved.count { $0.contains("] drained") } == 2, "\(moved.output)")

        let check = try ChildProcess.launch(binary, ["admin", "envelopes", "--store", store, "--expect-devices", "4"], name: "admin")
        #expect(try await check.waitForExit(timeout: .seconds(60)) == 0, "\(check.output)")
        let lines = check.lines(.standardOutput)
        for device in ["a-1", "a-2"] {
            #expect(lines.contains { $0.hasPrefix("device \(device): 6 envelopes, 0 rejected") }, "\(check.output)")
        }
        for device in ["b-1", "b-2"] {
            #expect(lines.contains { $0.hasPrefix("device \(device): 4 envelopes, 0 rejected") }, "\(check.output)")
        }
        #expect(lines.last?.hasPrefix("valid: 20 envelopes from 4 devices") == true, "\(check.output)")
    }
}
