import FleetTesting
import Foundation
import LoadGenerator
import Logging
import Testing
import ZeroMQ

/// docs/load-testing.md's "Using it as a library" (the doc shows this function's body): a load run
/// against the coordinator at `endpoint` as `email`, device stores in `dir`, the reports in `out`.
func loadLibraryExample(endpoint: String, email: String, secret: String, dir: String, out: String, loop: ZMQIOLoop, logger: Logger)
    async throws -> LoadRun
{
    // BEGIN EXAMPLE load-library
    let workload = SigningCeremonyWorkload(configuration: .init(endpoint: endpoint, email: email, secret: secret,
                                                                storeDirectory: dir), loop: loop, logger: logger)
    let configuration = LoadConfiguration(profile: try .parse(stages: ["1s:0-8", "2s:8"]), devices: 4, seed: 42,
                                          thresholds: [try Threshold.parse("syncAck.p99 < 200ms", steps: workload.steps)])
    let run = try await LoadRunner(configuration: configuration, workload: workload).run { print($0.line) }
    try LoadReportWriter.write(run, to: out)                // runs/mine, say
    // END EXAMPLE
    return run
}

@Suite("docs/load-testing.md: using it as a library")
struct LoadLibraryExampleTests {
    @Test("the library example in docs/load-testing.md is this file's code, verbatim")
    func docMatchesCode() throws {
        let example = try DocExample.compare("load-library", in: "docs/load-testing.md", file: #filePath)
        #expect(example.shown == example.code)
    }

    @Test("the example runs real ceremonies against a real coordinator and writes the reports")
    func runs() async throws {
        let coordinator = try await ServedCoordinator(label: "load-library-example")
        defer { coordinator.remove() }
        let out = coordinator.directory + "/report"
        let run = try await loadLibraryExample(
            endpoint: coordinator.endpoint, email: "user1@demo.example", secret: "demo-secret", dir: coordinator.directory, out: out,
            loop: coordinator.loop, logger: coordinator.logger)
        let counts = try await coordinator.store.counts()
        await coordinator.stop()

        // The run is on the real clock with the library's default timeouts (5 s a reply, 10 s to
        // drain), as the doc's: on a busy machine some ceremonies may not finish in time, so the
        // checks are those no timer changes. Every arrival is accounted for, every completed
        // ceremony's envelope is on the coordinator, and the integrity audit passes.
        let summary = run.summary
        #expect(summary.seed == 42)
        #expect(summary.arrivals > 0 && summary.completed > 0, "\(summary.text)")
        #expect(summary.completed + summary.errorCount + summary.dropped == summary.arrivals, "\(summary.text)")
        #expect(counts.envelopes >= summary.completed, "every completed ceremony's envelope is on the coordinator")
        #expect(summary.thresholds.map(\.threshold) == ["syncAck.p99 < 200ms"])
        #expect(summary.audit?.passed == true, "\(summary.text)")
        let json = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: out + "/summary.json"))) as? [String: Any]
        #expect(json?["arrivals"] as? Int == summary.arrivals)
        #expect(FileManager.default.fileExists(atPath: out + "/latency.hlog"))
        #expect(FileManager.default.fileExists(atPath: out + "/report.html"))
    }
}
