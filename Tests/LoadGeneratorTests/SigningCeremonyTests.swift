import FleetTesting
import Coordinator
import FleetProtocol
import Foundation
import Logging
import Testing
import ZeroMQ

@testable import LoadGenerator

/// Real ceremonies (DeviceNode, SQLite, Ed25519, sync) against a real coordinator over ZeroMQ.
@Suite struct SigningCeremonyTests {
    @Test func realCeremoniesReachTheCoordinatorAndTheReportsAreWritten() async throws {
        let seed = testSeed("SigningCeremonyTests")
        print("seed \(seed)")
        let coordinator = try await ServedCoordinator(label: "load-ceremony")
        defer { coordinator.remove() }
        let (directory, store, endpoint, loop, logger) = (coordinator.directory, coordinator.store, coordinator.endpoint, coordinator.loop, coordinator.logger)

        let workload = SigningCeremonyWorkload(
            configuration: SigningCeremonyConfiguration(
                endpoint: endpoint, email: "user1@demo.example", secret: "demo-secret", storeDirectory: directory,
                requestTimeout: .seconds(30), durability: .processCrash),
            loop: loop, logger: logger)
        let steps = workload.steps
        let configuration = LoadConfiguration(
            profile: try .constant(rate: 10, duration: .seconds(2)), process: .uniform, devices: 3, seed: seed,
            thresholds: try ["errors.count < 1", "syncAck.p99 < 60s", "throughput > 1000/s"].map { try Threshold.parse($0, steps: steps) },
            drainTimeout: .seconds(120))
        let run = try await LoadRunner(configuration: configuration, workload: workload).run()
        let counts = try await store.counts()
        await coordinator.stop()

        let summary = run.summary
        #expect(summary.arrivals == 20 && summary.completed == 20 && summary.errorCount == 0, "\(summary.text)")
        #expect(counts.envelopes == 20, "the coordinator holds \(counts.envelopes) envelopes")
        #expect(counts.devicesEnrolled == 3)
        for step in SigningCeremonyWorkload.stepNames {
            #expect(summary.steps[step]?.count == 20, "step \(step)")
        }
        #expect(summary.steps["capture"]!.p50 > 0 && summary.steps["syncAck"]!.p50 > 0)
        // Each ceremony's corrected latency includes its steps.
        #expect(summary.corrected.max >= summary.steps["syncAck"]!.max)
        #expect(summary.thresholds.map(\.passed) == [true, true, false])
        #expect(!summary.passed)
        // The end-of-run audit: every completed ceremony's item is on the coordinator, once, in order.
        let audit = try #require(summary.audit)
        #expect(audit.devicesAudited == 3 && audit.errors.isEmpty)
        #expect(audit.itemsChecked == summary.completed && audit.acknowledged == summary.completed)
        #expect(audit.counts.values.allSatisfy { $0 == 0 }, "\(audit.lines)")
        #expect(audit.passed)
        #expect(summary.text.contains("audit PASS  3 devices, 20 items checked"), "\(summary.text)")

        let out = directory + "/report"
        try LoadReportWriter.write(run, to: out, command: "test")
        let json = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: out + "/summary.json"))) as? [String: Any]
        #expect(json?["completed"] as? Int == 20)
        #expect(json?["seed"] as? UInt64 == seed)
        let auditJSON = json?["audit"] as? [String: Any]
        #expect(auditJSON?["itemsChecked"] as? Int == 20 && auditJSON?["passed"] as? Bool == true)
        #expect((auditJSON?["counts"] as? [String: Int])?["lost"] == 0)
        let hlog = try String(contentsOfFile: out + "/latency.hlog", encoding: .utf8)
        #expect(hlog.contains("#[Histogram log format version 1.3]"))
        let logged = hlog.split(separator: "\n").filter { $0.hasPrefix("Tag=corrected,") }
        let loggedCount = try logged.reduce(UInt64(0)) { sum, line in
            let base64 = String(line.split(separator: ",")[4])
            let bytes = try HistogramEncoding.decompress(Array(try #require(Data(base64Encoded: base64))))
            return sum + (try HistogramEncoding.decodeCounts(bytes)).counts.values.reduce(0, +)
        }
        #expect(loggedCount == 20)
        let html = try String(contentsOfFile: out + "/report.html", encoding: .utf8)
        #expect(html.components(separatedBy: "<svg").count - 1 == 3)
        #expect(html.contains("Latency by percentile") && html.contains("uncorrected p99"))
        #expect(html.contains("Integrity audit <span class=\"pass\">PASS</span>"))
        for external in ["src=", "href=", "<link", "@import", "url("] {
            #expect(!html.contains(external), "the report loads \(external) from outside")
        }
    }
}
