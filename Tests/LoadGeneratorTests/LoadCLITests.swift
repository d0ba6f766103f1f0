import FleetTesting
import Foundation
import Testing

/// `signfleet load` as a real process (it starts its own coordinator as a child).
@Suite struct LoadCLITests {
    func binary() throws -> String {
        let path = ProcessInfo.processInfo.environment["SIGNFLEET_BIN"] ?? FileManager.default.currentDirectoryPath + "/.build/debug/signfleet"
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw CocoaError(.fileNoSuchFile, userInfo: [NSLocalizedDescriptionKey: "signfleet binary not found at \(path); build first or set SIGNFLEET_BIN"])
        }
        return path
    }

    func temporaryDirectory() -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("load-cli-\(UUID().uuidString)").path
    }

    /// The REST ceremony (docs/load-testing.md): a coordinator child with its HTTP listener, a
    /// token issued for the demo user, every ceremony's five steps timed; a bad token cannot run.
    @Test func theRESTCeremonyTimesEachStepAgainstARealCoordinator() async throws {
        let out = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: out) }
        let run = try ChildProcess.launch(
            try binary(),
            ["load", "--workload", "rest-ceremony", "--rate", "8", "--duration", "2s", "--devices", "2", "--seed", "11", "--out", out,
             "--drain-timeout", "90s", "--request-timeout", "30s", "--threshold", "errors.rate < 1%", "--threshold", "combined.p99 < 60s"])
        #expect(try await run.waitForExit(timeout: .seconds(240)) == 0, "\(run.output)")
        let summary = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: out + "/summary.json"))) as? [String: Any]
        let completed = summary?["completed"] as? Int ?? 0
        #expect(completed > 0 && completed == summary?["arrivals"] as? Int && summary?["errorCount"] as? Int == 0, "\(run.output)")
        let steps = summary?["steps"] as? [String: [String: Any]] ?? [:]
        #expect(Set(steps.keys) == ["create", "view", "open", "sign", "combined"], "\(steps.keys)")
        for (name, step) in steps { #expect(step["count"] as? Int == completed, "\(name) timed once per ceremony") }

        let refused = try ChildProcess.launch(
            try binary(), ["load", "--workload", "rest-ceremony", "--base-url", "http://127.0.0.1:9", "--rate", "1", "--duration", "1s", "--out", out])
        #expect(try await refused.waitForExit(timeout: .seconds(60)) != 0, "--base-url without --token is refused")
        #expect(refused.output.contains("--base-url needs --token"), "\(refused.output)")
    }

    @Test func thresholdsSetTheExitCode() async throws {
        let out = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: out) }
        let failing = try ChildProcess.launch(
            try binary(),
            ["load", "--rate", "10", "--duration", "2s", "--devices", "2", "--seed", "7", "--out", out,
             "--drain-timeout", "90s", "--request-timeout", "30s",
             "--threshold", "errors.rate < 50%", "--threshold", "throughput > 100000/s"])
        #expect(try await failing.waitForExit(timeout: .seconds(240)) == 1, "\(failing.output)")
        #expect(failing.lines(.standardOutput).contains("seed 7"), "\(failing.output)")
        #expect(failing.output.contains("threshold FAIL  throughput > 100000/s"), "\(failing.output)")
        #expect(failing.output.contains("threshold PASS  errors.rate < 50%"), "\(failing.output)")
        #expect(failing.lines(.standardError).contains { $0.contains("outstanding") && $0.contains("dropped") }, "no progress line:\n\(failing.output)")
        let summary = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: out + "/summary.json"))) as? [String: Any]
        #expect(summary?["passed"] as? Bool == false)
        #expect(summary?["completed"] as? Int == summary?["arrivals"] as? Int)
        // The audit ran (on by default), found every completed ceremony's item and nothing wrong.
        let audit = summary?["audit"] as? [String: Any]
        #expect(audit?["itemsChecked"] as? Int == summary?["completed"] as? Int && audit?["passed"] as? Bool == true, "\(failing.output)")
        let completed = summary?["completed"] as? Int ?? -1
        #expect(failing.output.contains("audit PASS  2 devices, \(completed) items checked"), "\(failing.output)")
        for file in ["latency.hlog", "report.html"] { #expect(FileManager.default.fileExists(atPath: "\(out)/\(file)")) }

        let passing = try ChildProcess.launch(
            try binary(),
            ["load", "--stage", "1s:0-20", "--stage", "1s:20", "--devices", "2", "--out", out, "--threshold", "errors.rate < 50%",
             "--drain-timeout", "90s", "--request-timeout", "30s", "--no-audit"])
        #expect(try await passing.waitForExit(timeout: .seconds(240)) == 0, "\(passing.output)")
        #expect(passing.lines(.standardOutput).contains { $0.hasPrefix("seed ") })
        #expect(!passing.output.contains("audit "), "--no-audit still audited:\n\(passing.output)")
        let unaudited = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: out + "/summary.json"))) as? [String: Any]
        #expect(unaudited?["audit"] == nil && unaudited?["passed"] as? Bool == true)
    }

    /// SIGTERM to the load, or SIGINT to its whole process group as a terminal's Ctrl-C sends it,
    /// through the command's service group: the arrivals stop, the run drains, audits (its
    /// coordinator child, in a group of its own, still serves) and reports (interrupted, exit 1),
    /// and the coordinator child is gone.
    @Test(.timeLimit(.minutes(4)), arguments: [(SIGTERM, false), (SIGINT, true)])
    func aSignalStopsTheArrivalsAndStillReports(signal: Int32, toTheGroup: Bool) async throws {
        let out = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: out) }
        let load = try ChildProcess.launch(
            try binary(),
            ["load", "--rate", "5", "--duration", "10m", "--devices", "2", "--seed", "11", "--out", out,
             "--drain-timeout", "60s", "--request-timeout", "30s"], ownProcessGroup: toTheGroup)
        defer { Task { await load.terminate() } }
        let started = try await load.waitForLine(in: .standardOutput, timeout: .seconds(60)) { $0.hasPrefix("coordinator ") }
        let coordinator = try #require(started.split(separator: " ").firstIndex(of: "process").map { started.split(separator: " ")[$0 + 1] }
            .flatMap { Int32($0.filter(\.isNumber)) }, "\(started)")
        // Running: its first progress line.
        try await load.waitForLine(in: .standardError, timeout: .seconds(120)) { $0.contains("outstanding") && $0.contains("dropped") }
        if toTheGroup { kill(-load.processIdentifier, signal) } else { load.signal(signal) }
        #expect(try await load.waitForExit(timeout: .seconds(150)) == 1, "\(load.output)")
        #expect(load.output.contains("interrupted (SIGINT/SIGTERM): arrivals stopped early"), "\(load.output)")
        let summary = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: out + "/summary.json"))) as? [String: Any]
        #expect(summary?["interrupted"] as? Bool == true && summary?["passed"] as? Bool == false, "\(String(describing: summary))")
        #expect((summary?["seconds"] as? Double ?? .infinity) < 300, "stopped long before its 10 minutes")
        let audit = summary?["audit"] as? [String: Any]
        #expect(audit?["passed"] as? Bool == true, "what was done before the signal is all there: \(load.output)")
        #expect(kill(coordinator, 0) != 0, "the coordinator child \(coordinator) outlived the load")
    }

    @Test func aCoordinatorThatDoesNotAnswerExitsWithTwo() async throws {
        // Nothing listens there: the devices cannot log in, so no verdict can be given.
        let child = try ChildProcess.launch(
            try binary(),
            ["load", "--connect", "tcp://127.0.0.1:9", "--plaintext", "--rate", "10", "--duration", "1s", "--devices", "1",
             "--request-timeout", "200ms", "--out", temporaryDirectory()])
        #expect(try await child.waitForExit(timeout: .seconds(60)) == 2, "\(child.output)")
        #expect(child.output.contains("the load could not run"), "\(child.output)")
    }

    @Test(arguments: [
        (["--rate", "10", "--duration", "1s", "--threshold", "syncAck.p99 < soon"], "\"soon\" is not a duration"),
        (["--rate", "10", "--duration", "1s", "--threshold", "nonsense"], "has no comparison"),
        (["--stage", "10s"], "DURATION:RATE"),
        (["--rate", "10"], "--rate R --duration D"),
        (["--rate", "10", "--duration", "1s", "--arrivals", "bursty"], "--arrivals"),
    ])
    func badOptionsAreRefusedWithTheReason(arguments: [String], message: String) async throws {
        let child = try ChildProcess.launch(try binary(), ["load"] + arguments)
        let status = try await child.waitForExit(timeout: .seconds(30))
        #expect(status != 0 && status != 1, "\(child.output)")
        #expect(child.output.contains(message), "\(child.output)")
    }
}
