import FleetTesting
import Foundation
import Testing

/// The shipped coordinator-cluster scenario (issue #15 part 4), run as a user runs it: three
/// coordinators on the run's own PostgreSQL, each killed in turn, PostgreSQL crashed and
/// restarted; devices fail over between the coordinators and the checker reads the PostgreSQL
/// store. (In the serialized suite: one fleet at a time.)
extension FleetRunProcessTests {
    @Test(.timeLimit(.minutes(3))) func threeCoordinatorsOnPostgresEachKilledInTurnEndValidAndEachServedDevices() async throws {
        let binary = try signfleetBinary()
        let directory = try FleetRunProcessTests.temporaryDirectory("cluster-run")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let scenario = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("scenarios/coordinator-cluster.yaml").path
        let started = Date()
        let launcher = try ChildProcess.launch(
            binary, ["fleet", "run", scenario, "--seed", "1515", "--runs", directory + "/runs"], name: "fleet")
        let status = try await launcher.waitForExit(timeout: .seconds(170))
        print("coordinator-cluster run: \(String(format: "%.1f", Date().timeIntervalSince(started))) s, exit \(status)")
        #expect(status == 0, "\(launcher.output)")
        #expect(launcher.lines(.standardOutput).contains("verdict: valid (0 anomalies)"), "\(launcher.output)")
        #expect(launcher.output.contains("PostgreSQL listening on postgres://signfleet@127.0.0.1:"), "\(launcher.output)")

        let run = directory + "/runs/latest"
        // The store was PostgreSQL: coordinator.json names it, and there is no SQLite store.
        let configuration = try FleetRunProcessTests.json(run + "/coordinator.json")
        let store = try #require(configuration["store"] as? String)
        #expect(store.hasPrefix("postgres://signfleet@127.0.0.1:") && store.hasSuffix("?schema=fleet"), "\(store)")
        #expect(!FileManager.default.fileExists(atPath: run + "/coordinator.sqlite"))
        // The cluster was stopped at the end, its data kept.
        #expect(FileManager.default.fileExists(atPath: run + "/postgres/data/PG_VERSION"))
        #expect(!FileManager.default.fileExists(atPath: run + "/postgres/data/postmaster.pid"), "PostgreSQL still running after the run")

        // Every coordinator was killed and restarted on schedule, and PostgreSQL restarted.
        let history = try FleetRunProcessTests.lines(run + "/history/launcher.jsonl")
        for name in ["coordinator", "coordinator-2", "coordinator-3", "postgres"] {
            let ops = history.filter { event in
                event["type"] as? String == "ok" && (event["details"] as? [String: String])?["targets"] == name
            }.compactMap { $0["op"] as? String }
            #expect(ops.contains("kill") && ops.contains("restart"), "\(name): \(ops)")
        }
        // Each coordinator served devices: its log has devices saying hello.
        var served: [String: Int] = [:]
        for name in ["coordinator", "coordinator-2", "coordinator-3"] {
            let log = try String(contentsOfFile: run + "/logs/\(name).log", encoding: .utf8)
            served[name] = log.components(separatedBy: "device alive").count - 1
        }
        print("device hellos per coordinator: \(served.sorted { $0.key < $1.key })")
        #expect(served.values.allSatisfy { $0 > 0 }, "every coordinator served devices: \(served)")

        let summary = try FleetRunProcessTests.json(run + "/summary.json")
        let counts = try #require(summary["counts"] as? [String: Any])
        print("coordinator-cluster counts: \(counts)")
        #expect(counts["pending"] as? Int == 0 && (counts["synced"] as? Int ?? 0) > 10, "\(counts)")
        let check = try FleetRunProcessTests.json(run + "/check.json")
        let checkCounts = try #require(check["counts"] as? [String: Any])
        #expect((checkCounts["serverEnvelopes"] as? Int ?? 0) == counts["synced"] as? Int, "the checker read the PostgreSQL store: \(checkCounts)")
    }
}
