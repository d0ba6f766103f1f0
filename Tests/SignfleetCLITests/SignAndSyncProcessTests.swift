import Foundation
import FleetTesting
import Testing

/// The whole path between real processes: devices sign offline and sync; the
/// coordinator is killed with SIGKILL and restarted on the same store; at the end
/// its store holds every envelope once, in each device's order.
@Suite struct SignAndSyncProcessTests {
    @Test func envelopesSurviveACoordinatorCrashExactlyOnce() async throws {
        let binary = try signfleetBinary()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("sign-sync-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = directory.appendingPathComponent("coordinator.sqlite").path
        func coordinator(_ bind: String) async throws -> (ChildProcess, String) {
            let child = try ChildProcess.launch(
                binary, ["coordinator", "--bind", bind, "--heartbeat-ms", "200", "--store", store, "--seed-demo"], name: "coordinator")
            let line = try await child.waitForLine(in: .standardOutput, timeout: .seconds(30)) { $0.hasPrefix("listening ") }
            return (child, String(line.dropFirst("listening ".count)))
        }

        let (first, endpoint) = try await coordinator("tcp://127.0.0.1:*")
        defer { Task { await first.terminate() } }
        let key = try await curvePublicKey(of: first)
        let seed = "\(testSeed("SignAndSyncProcessTests"))"
        print("sign-and-sync seed \(seed) (replay with SIGNFLEET_SEED=\(seed))")
        let node = try ChildProcess.launch(
            binary,
            [
                "node", "--connect", endpoint, "--server-key=\(key)", "--devices", "3", "--envelopes", "6", "--interval-ms", "400",
                "--request-timeout-ms", "300", "--data-dir", directory.appendingPathComponent("devices").path, "--seed", seed,
            ], name: "node")
        defer { Task { await node.terminate() } }

        // The kill lands as the third sync is printed (from the output thread), so the node
        // still has envelopes to sync however late this test's own task runs.
        node.onLines(3, where: { $0.contains("] synced") }) { first.signal(SIGKILL) }
        try await node.waitForLines(3, timeout: .seconds(60)) { $0.contains("] synced") }
        _ = try await first.waitForExit(timeout: .seconds(30))
        try await node.waitForLines(2, timeout: .seconds(60)) { $0.contains("sync deferred") }

        let (second, _) = try await coordinator(endpoint)
        defer { Task { await second.terminate() } }
        #expect(try await node.waitForExit(timeout: .seconds(120)) == 0, "\(node.output)")
        #expect(node.count { $0.contains("] drained") } == 3, "\(node.output)")

        let check = try ChildProcess.launch(
            binary, ["admin", "envelopes", "--store", store, "--expect-per-device", "6", "--expect-devices", "3"], name: "admin")
        #expect(try await check.waitForExit(timeout: .seconds(30)) == 0, "\(check.output)\n\(node.output)")
        #expect(check.lines(.standardOutput).last?.hasPrefix("valid: 18 envelopes from 3 devices") == true, "\(check.output)")
    }

    /// The SDK users' trap, with a real process: the coordinator commits a push and is
    /// killed (SIGKILL, by an armed failpoint) before it can reply. The device's retry
    /// reaches the restarted coordinator, which answers from its stored results.
    /// `--duration` bounds a node's run; it does not end it when the first device is done (it
    /// cancelled every other device then: one drained, the rest stopped mid-way).
    @Test func withADurationEveryDeviceFinishesItsEnvelopesBeforeTheNodeStops() async throws {
        let binary = try signfleetBinary()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("duration-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = directory.appendingPathComponent("coordinator.sqlite").path
        let coordinator = try ChildProcess.launch(
            binary, ["coordinator", "--bind", "tcp://127.0.0.1:*", "--store", store, "--seed-demo"], name: "coordinator")
        defer { Task { await coordinator.terminate() } }
        let endpoint = String(
            try await coordinator.waitForLine(in: .standardOutput, timeout: .seconds(30)) { $0.hasPrefix("listening ") }.dropFirst("listening ".count))
        let key = try await curvePublicKey(of: coordinator)
        let node = try ChildProcess.launch(
            binary,
            [
                "node", "--connect", endpoint, "--server-key=\(key)", "--devices", "4", "--envelopes", "3", "--interval-ms", "100",
                "--duration", "600", "--data-dir", directory.appendingPathComponent("devices").path, "--seed", "5",
            ], name: "node")
        defer { Task { await node.terminate() } }
        // Done long before the duration: it stops when the last device is done.
        #expect(try await node.waitForExit(timeout: .seconds(120)) == 0, "\(node.output)")
        #expect(node.count { $0.contains("] drained") && $0.contains("signed=3") } == 4, "\(node.output)")
        let check = try ChildProcess.launch(
            binary, ["admin", "envelopes", "--store", store, "--expect-per-device", "3", "--expect-devices", "4"], name: "admin")
        #expect(try await check.waitForExit(timeout: .seconds(30)) == 0, "\(check.output)")
    }

    @Test func aCoordinatorKilledBetweenCommitAndReplyStillEndsExactlyOnce() async throws {
        let binary = try signfleetBinary()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("failpoint-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = directory.appendingPathComponent("coordinator.sqlite").path
        func coordinator(_ bind: String, failpoint: Bool) async throws -> (ChildProcess, String) {
            let child = try ChildProcess.launch(
                binary, ["coordinator", "--bind", bind, "--heartbeat-ms", "200", "--store", store, "--seed-demo"], name: "coordinator",
                environment: failpoint ? ["SIGNFLEET_FAILPOINTS": "sync.after-commit=kill"] : [:])
            let line = try await child.waitForLine(in: .standardOutput, timeout: .seconds(30)) { $0.hasPrefix("listening ") }
            return (child, String(line.dropFirst("listening ".count)))
        }

        let (first, endpoint) = try await coordinator("tcp://127.0.0.1:*", failpoint: true)
        defer { Task { await first.terminate() } }
        let key = try await curvePublicKey(of: first)
        let node = try ChildProcess.launch(
            binary,
            [
                "node", "--connect", endpoint, "--server-key=\(key)", "--devices", "1", "--envelopes", "3", "--interval-ms", "50",
                "--request-timeout-ms", "300", "--data-dir", directory.appendingPathComponent("devices").path, "--seed", "11",
            ], name: "node")
        defer { Task { await node.terminate() } }

        // The first push commits, then the coordinator dies before replying.
        let status = try await first.waitForExit(timeout: .seconds(60))
        #expect(status == SIGKILL, "the failpoint kills the coordinator: \(first.output)")
        let committed = try ChildProcess.launch(binary, ["admin", "envelopes", "--store", store], name: "admin")
        _ = try await committed.waitForExit(timeout: .seconds(30))
        #expect(committed.lines(.standardOutput).contains("device device-1: 1 envelopes, 0 rejected, last applied 1"), "\(committed.output)")
        try await node.waitForLine(timeout: .seconds(60)) { $0.contains("sync deferred") }

        let (second, _) = try await coordinator(endpoint, failpoint: false)
        defer { Task { await second.terminate() } }
        #expect(try await node.waitForExit(timeout: .seconds(120)) == 0, "\(node.output)")
        let check = try ChildProcess.launch(
            binary, ["admin", "envelopes", "--store", store, "--expect-per-device", "3", "--expect-devices", "1"], name: "admin")
        #expect(try await check.waitForExit(timeout: .seconds(30)) == 0, "\(check.output)\n\(node.output)")
        #expect(check.lines(.standardOutput).last?.hasPrefix("valid: 3 envelopes from 1 devices") == true, "\(check.output)")
    }

    /// A node killed with SIGKILL at a seeded moment while its devices sign and push, then
    /// restarted on the same stores: the devices carry on from disk and every envelope
    /// reaches the coordinator exactly once, in order.
    @Test func devicesKilledMidPushCarryOnAfterARestart() async throws {
        let binary = try signfleetBinary()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("node-kill-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = directory.appendingPathComponent("coordinator.sqlite").path
        let coordinator = try ChildProcess.launch(
            binary, ["coordinator", "--bind", "tcp://127.0.0.1:*", "--heartbeat-ms", "200", "--store", store, "--seed-demo"],
            name: "coordinator")
        defer { Task { await coordinator.terminate() } }
        let endpoint = String(
            try await coordinator.waitForLine(in: .standardOutput, timeout: .seconds(30)) { $0.hasPrefix("listening ") }
                .dropFirst("listening ".count))
        let key = try await curvePublicKey(of: coordinator)

        let seed = testSeed("SignAndSyncProcessTests")
        print("node-kill seed \(seed) (replay with SIGNFLEET_SEED=\(seed))")
        let arguments = [
            "node", "--connect", endpoint, "--server-key=\(key)", "--devices", "2", "--envelopes", "8", "--interval-ms", "40",
            "--request-timeout-ms", "300", "--data-dir", directory.appendingPathComponent("devices").path, "--seed", "\(seed)",
        ]
        let first = try ChildProcess.launch(binary, arguments, name: "node-1")
        defer { Task { await first.terminate() } }
        // The kill point: after 1-6 syncs, then a seeded 0-15 ms further into the next envelope or push.
        try await first.waitForLines(Int(1 + seed % 6), timeout: .seconds(60)) { $0.contains("] synced") }
        // Not synchronisation: seeded jitter that spreads the kill over the signing and push paths.
        try await Task.sleep(for: .microseconds(Int(seed % 15_000)))
        first.signal(SIGKILL)
        let firstStatus = try await first.waitForExit(timeout: .seconds(30))
        // Normally SIGKILL. Once, on a machine loaded by parallel builds, the node was seen
        // stopping gracefully (status 0) just before; the restart must cope with that too.
        #expect(firstStatus == SIGKILL || firstStatus == 0, "node exited with \(firstStatus) (seed \(seed))\n\(first.output)")

        let second = try ChildProcess.launch(binary, arguments, name: "node-2")
        defer { Task { await second.terminate() } }
        #expect(try await second.waitForExit(timeout: .seconds(120)) == 0, "\(first.output)\n\(second.output)")
        #expect(second.count { $0.contains("] drained") && $0.contains("signed=8") } == 2, "\(second.output)")
        let check = try ChildProcess.launch(
            binary, ["admin", "envelopes", "--store", store, "--expect-per-device", "8", "--expect-devices", "2"], name: "admin")
        #expect(try await check.waitForExit(timeout: .seconds(30)) == 0, "\(check.output)\n\(second.output) (seed \(seed))")
    }
}

/// A node restarted with fewer devices than its data directory holds stores for must not leave
/// signed, unsynced items behind and exit 0 (issue #14): it refuses and says how to run.
@Suite struct OrphanedStoresTests {
    @Test func aNodeAskedForFewerDevicesThanHoldSignedItemsRefuses() async throws {
        let binary = try signfleetBinary()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("orphans-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = directory.appendingPathComponent("coordinator.sqlite").path
        let coordinator = try ChildProcess.launch(
            binary, ["coordinator", "--bind", "tcp://127.0.0.1:*", "--store", store, "--seed-demo", "--http", "off"], name: "coordinator")
        defer { Task { await coordinator.terminate() } }
        let endpoint = String(
            try await coordinator.waitForLine(in: .standardOutput, timeout: .seconds(30)) { $0.hasPrefix("listening ") }
                .dropFirst("listening ".count))
        let key = try await curvePublicKey(of: coordinator)
        let data = directory.appendingPathComponent("devices").path
        let common = [
            "--connect", endpoint, "--server-key=\(key)", "--envelopes", "4", "--interval-ms", "300", "--request-timeout-ms", "300",
            "--data-dir", data,
        ]
        let first = try ChildProcess.launch(binary, ["node", "--devices", "2"] + common, name: "node-2")
        defer { Task { await first.terminate() } }
        // Once device-2 has synced one envelope the coordinator goes away; what it signs next stays queued.
        first.onLines(1, where: { $0.contains("] synced") && $0.contains("device-2") }) { coordinator.signal(SIGKILL) }
        try await first.waitForLines(1, timeout: .seconds(60)) { $0.contains("] synced") && $0.contains("device-2") }
        try await first.waitForLines(1, timeout: .seconds(60)) { $0.contains("signed") && $0.contains("device-2") && $0.contains("sequence=2") }
        first.signal(SIGTERM)
        _ = try await first.waitForExit(timeout: .seconds(30))

        let second = try ChildProcess.launch(binary, ["node", "--devices", "1", "--duration", "30"] + common, name: "node-1")
        let status = try await second.waitForExit(timeout: .seconds(60))
        #expect(status != 0, "\(second.output)")
        #expect(second.output.contains("device-2") && second.output.contains("--devices 2"), "\(second.output)")
    }
}
