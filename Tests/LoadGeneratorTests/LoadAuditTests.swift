import FleetTesting
import FleetProtocol
import Foundation
import GRDB
import Logging
import Testing
import ZeroMQ

@testable import Coordinator
@testable import LoadGenerator

/// The end-of-run audit against a real coordinator whose store the test damages after the load
/// and before the audit: the audit must notice, over the wire, and fail the run.
@Suite struct LoadAuditTests {
    @Test func anEnvelopeRemovedFromTheCoordinatorAfterItsAckIsReportedLostAndFailsTheRun() async throws {
        let seed = testSeed("LoadAuditTests")
        print("seed \(seed)")
        let coordinator = try await ServedCoordinator(label: "load-audit")
        defer { coordinator.remove() }
        let (directory, store, endpoint, loop, logger) = (coordinator.directory, coordinator.store, coordinator.endpoint, coordinator.loop, coordinator.logger)

        let prefix = "audit-\(UUID().uuidString.prefix(6).lowercased())"
        let base = SigningCeremonyWorkload(
            configuration: SigningCeremonyConfiguration(
                endpoint: endpoint, email: "user1@demo.example", secret: "demo-secret", storeDirectory: directory,
                requestTimeout: .seconds(30), deviceIDPrefix: prefix, durability: .processCrash),
            loop: loop, logger: logger)
        // Device 0's first envelope disappears from the coordinator just before device 0 is audited.
        let workload = TamperingWorkload(base: base) { index in
            guard index == 0 else { return }
            try await store.database.write { db in
                try db.execute(sql: "DELETE FROM envelope WHERE deviceID = ? AND sequence = 1", arguments: ["\(prefix)-0"])
            }
        }
        let configuration = LoadConfiguration(
            profile: try .constant(rate: 10, duration: .seconds(1)), process: .uniform, devices: 2, seed: seed,
            thresholds: [try Threshold.parse("errors.count < 1", steps: base.steps)], drainTimeout: .seconds(120))
        let run = try await LoadRunner(configuration: configuration, workload: workload).run()
        await coordinator.stop()

        let summary = run.summary
        #expect(summary.completed == 10 && summary.errorCount == 0, "\(summary.text)")
        #expect(summary.thresholds.map(\.passed) == [true])
        let audit = try #require(summary.audit)
        print(audit.lines.joined(separator: "\n"))
        #expect(audit.itemsChecked == 10)
        #expect(audit.counts["lost"] == 1 && audit.failures == 1, "\(audit.lines)")
        let witness = try #require(audit.witnesses.first)
        #expect(witness.kind == .lost && witness.device == "\(prefix)-0" && witness.sequence == 1)
        #expect(witness.coordinatorHolds.contains("no such envelope"), "\(witness.line)")
        #expect(!audit.passed && !summary.passed, "a failed audit fails the run")
        #expect(summary.text.contains("audit FAIL"))
    }

    @Test func withTheAuditOffTheSummaryHasNone() async throws {
        let server = try await StallingServer(stallAt: 0, stall: .zero)
        let configuration = LoadConfiguration(
            profile: try .constant(rate: 20, duration: .milliseconds(500)), process: .uniform, devices: 2, seed: 3,
            // A generous drain: a machine starved by the rest of the suite still completes every arrival.
            drainTimeout: .seconds(120), audit: false)
        let workload = TamperingWorkload(base: RequestWorkload(endpoint: server.endpoint, loop: server.loop, requestTimeout: .seconds(30))) { _ in
            Issue.record("the audit ran although it was turned off")
        }
        let run = try await LoadRunner(configuration: configuration, workload: workload).run()
        await server.stop()
        #expect(run.summary.completed == 10)
        #expect(run.summary.audit == nil && run.summary.passed)
        #expect(HTMLReport.render(run.summary, command: nil).contains("Not run (<code>--no-audit</code>)"))
    }
}

/// Wraps a workload; calls `beforeAudit(index)` just before device `index` is audited.
struct TamperingWorkload: LoadWorkload {
    let base: any LoadWorkload
    let beforeAudit: @Sendable (Int) async throws -> Void

    var steps: [String] { base.steps }

    func makeDevice(index: Int, seed: UInt64) async throws -> any LoadDevice {
        TamperingDevice(base: try await base.makeDevice(index: index, seed: seed), index: index, beforeAudit: beforeAudit)
    }
}

final class TamperingDevice: LoadDevice {
    let base: any LoadDevice
    let index: Int
    let beforeAudit: @Sendable (Int) async throws -> Void

    init(base: any LoadDevice, index: Int, beforeAudit: @escaping @Sendable (Int) async throws -> Void) {
        self.base = base
        self.index = index
        self.beforeAudit = beforeAudit
    }

    func perform(ceremony: Int) async throws -> [StepTiming] { try await base.perform(ceremony: ceremony) }
    func close() async { await base.close() }
    func auditInput() async throws -> DeviceAuditInput? {
        try await beforeAudit(index)
        return try await base.auditInput()
    }
}
