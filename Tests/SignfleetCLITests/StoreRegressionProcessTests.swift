import FleetTesting
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Issue #14's case, as an operator would meet it: the coordinator's `-wal` file is deleted while it
/// is down, so it restarts on a store that lost what it acknowledged (the enrollments and items of
/// the last run). The devices' stores still hold their receipts and, as fleet devices do, the
/// signed payloads: at their next session they enroll again, find the coordinator behind and send
/// those items again. Nothing is lost, and nobody retries in silence for ever.
@Suite(.serialized) struct StoreRegressionProcessTests {
    @Test(.timeLimit(.minutes(3))) func aCoordinatorWhoseWALWasDeletedIsHealedByItsDevices() async throws {
        let binary = try signfleetBinary()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("wal-lost-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = directory.appendingPathComponent("coordinator.sqlite").path
        let keyFile = directory.appendingPathComponent("coordinator.pub").path

        func startCoordinator(bind: String) async throws -> (ChildProcess, String) {
            let coordinator = try ChildProcess.launch(
                binary,
                ["coordinator", "--bind", bind, "--heartbeat-ms", "200", "--store", store, "--seed-demo", "--public-key-file", keyFile],
                name: "coordinator")
            let endpoint = String(
                try await coordinator.waitForLine(in: .standardOutput, timeout: .seconds(30)) { $0.hasPrefix("listening ") }
                    .dropFirst("listening ".count))
            return (coordinator, endpoint)
        }
        // First start makes the store (its CURVE key, the demo account); a clean stop checkpoints
        // them into the main file, so losing the WAL later loses only what the devices did.
        var (coordinator, endpoint) = try await startCoordinator(bind: "tcp://127.0.0.1:*")
        coordinator.signal(SIGTERM)
        let stopped = try await coordinator.waitForExit(timeout: .seconds(30))
        #expect(stopped == 0 || stopped == SIGTERM, "exit \(stopped): \(coordinator.output)")
        // Each start binds a free port: the store, not the port, is what the devices come back to,
        // and the old port may meanwhile be another test's ephemeral port (EADDRINUSE seen in CI).
        (coordinator, endpoint) = try await startCoordinator(bind: "tcp://127.0.0.1:*")

        func node(envelopes: Int) throws -> ChildProcess {
            try ChildProcess.launch(
                binary,
                [
                    "node", "--connect", endpoint, "--server-key-file", keyFile, "--devices", "2", "--envelopes", "\(envelopes)",
                    "--interval-ms", "30", "--data-dir", directory.appendingPathComponent("devices").path, "--seed", "5",
                ],
                name: "node")
        }
        let first = try node(envelopes: 4)
        #expect(try await first.waitForExit(timeout: .seconds(60)) == 0, "\(first.output)")

        // Killed (no checkpoint at close), and the WAL with everything the devices did is lost.
        coordinator.signal(SIGKILL)
        _ = try await coordinator.waitForExit(timeout: .seconds(30))
        for suffix in ["-wal", "-shm"] { try? FileManager.default.removeItem(atPath: store + suffix) }
        (coordinator, endpoint) = try await startCoordinator(bind: "tcp://127.0.0.1:*")
        let restarted = coordinator
        defer { Task { await restarted.terminate() } }

        let second = try node(envelopes: 6)
        defer { Task { await second.terminate() } }
        #expect(try await second.waitForExit(timeout: .seconds(60)) == 0, "\(second.output)\n\(coordinator.output)")
        #expect(second.count { $0.contains("the coordinator lost items this device holds receipts for") } == 2, "\(second.output)")
        #expect(coordinator.count { $0.contains("this store lost items it had acknowledged") } == 2, "\(coordinator.output)")
        #expect(coordinator.count { $0.contains("sent its lost items again") } == 2, "\(coordinator.output)")
        let check = try ChildProcess.launch(
            binary, ["admin", "envelopes", "--store", store, "--expect-per-device", "6", "--expect-devices", "2"], name: "admin")
        #expect(try await check.waitForExit(timeout: .seconds(30)) == 0, "\(check.output)")
    }
}
