import FleetTesting
import Foundation
import GRDB
import Testing

@testable import Fleet

/// `signfleet check <run dir>` as a real child process: its summary, check.json and exit codes.
@Suite struct CheckerCLITests {
    /// The built `signfleet` binary: `SIGNFLEET_BIN` or the default debug build path.
    static func binary() throws -> String {
        let path = ProcessInfo.processInfo.environment["SIGNFLEET_BIN"] ?? FileManager.default.currentDirectoryPath + "/.build/debug/signfleet"
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw FixtureError("signfleet binary not found at \(path); run `swift build` first or set SIGNFLEET_BIN")
        }
        return path
    }

    static func check(_ directory: String) async throws -> (status: Int32, output: String) {
        let child = try ChildProcess.launch(try binary(), ["check", directory], name: "check")
        let status = try await child.waitForExit(timeout: .seconds(60))
        return (status, child.output)
    }

    @Test func exitCodesAreZeroValidOneInvalidTwoUnknown() async throws {
        let fixture = try await CheckerRun.make(unsynced: ["a-1": 1])
        defer { fixture.remove() }
        let transaction = try #require(fixture.transactions["a-1"]?[2])

        // Unknown: a-1's last envelope never synced.
        let unknown = try await Self.check(fixture.run.path)
        #expect(unknown.status == 2, "\(unknown.output)")
        #expect(unknown.output.contains("verdict: unknown") && unknown.output.contains(transaction), "\(unknown.output)")
        #expect(try CheckReport.read(from: fixture.run.checkFile).verdict == .unknown)

        // Valid: the same run without that device's last item and its history (as if it had never been signed).
        let valid = try fixture.copy()
        try CheckerRun.edit(valid.deviceStore(device: "a-1")) { db in
            try db.execute(sql: "DELETE FROM outbox WHERE transactionId = ?", arguments: [transaction])
            try db.execute(sql: "DELETE FROM envelopes WHERE transactionId = ?", arguments: [transaction])
            try db.execute(sql: "DELETE FROM journal WHERE transactionId = ?", arguments: [transaction])
        }
        let historyPath = valid.historyFile(process: "node-a-1")
        let kept = try String(contentsOfFile: historyPath, encoding: .utf8).split(separator: "\n").filter { !$0.contains(transaction) }
        try (kept.joined(separator: "\n") + "\n").write(toFile: historyPath, atomically: true, encoding: .utf8)
        let clean = try await Self.check(valid.path)
        #expect(clean.status == 0, "\(clean.output)")
        #expect(clean.output.contains("verdict: valid") && clean.output.contains("no anomalies"), "\(clean.output)")
        #expect(try CheckReport.read(from: valid.checkFile).verdict == .valid)

        // Invalid: a server row deleted.
        let lost = try fixture.copy()
        let gone = try #require(fixture.transactions["b-1"]?[0])
        try CheckerRun.edit(lost.coordinatorStore) { db in
            try db.execute(sql: "DELETE FROM envelope WHERE transactionID = ?", arguments: [gone])
        }
        let invalid = try await Self.check(lost.path)
        #expect(invalid.status == 1, "\(invalid.output)")
        #expect(invalid.output.contains("lost: ") && invalid.output.contains(gone), "\(invalid.output)")
        let report = try CheckReport.read(from: lost.checkFile)
        #expect(report.anomalies(.lost).map(\.transaction) == [gone])
    }

    @Test func aDirectoryThatIsNotARunIsAClearError() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("not-a-run-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let result = try await Self.check(path)
        #expect(result.status == 64, "\(result.output)")
        #expect(result.output.contains("is not a run directory: it has no coordinator.sqlite"), "\(result.output)")
        #expect(!FileManager.default.fileExists(atPath: path + "/check.json"))
    }
}
