import Foundation
import Testing

@testable import Fleet

/// `summary.json`'s counts come from the stores and the histories, not from the nodes' last stats
/// lines, which miss whatever a node did in its last second before a kill -9 (issue #14 part 8).
@Suite struct SummaryCountsTests {
    @Test func countsComeFromTheStoresNotTheLastStatsLine() async throws {
        let fixture = try await CheckerRun.make(devices: ["a-1", "b-1"], envelopes: 3, unsynced: ["b-1": 1])
        defer { fixture.remove() }
        let report = try await Checker.check(run: fixture.run)
        #expect(report.counts.signed == 6 && report.counts.acknowledged == 5 && report.counts.pending == 1)
        // The nodes' last stats line, a second stale: one signing and one ack short.
        let stale = TimelineSample(
            time: 10, devices: 2, online: 2, offline: 0, composed: 5, signed: 5, cancelled: 0, declined: 0, synced: 4, pending: 1,
            syncFailures: 2, syncAckP50: nil, syncAckP99: nil, activeFaults: [])
        var history: [HistoryEvent] = []
        for index in 1...6 {
            history.append(HistoryEvent(process: "node", type: .ok, op: .compose, device: "a-1", transaction: "t\(index)"))
        }
        history.append(HistoryEvent(process: "node", type: .ok, op: .compose, device: "a-1", transaction: "t7"))
        history.append(HistoryEvent(process: "node", type: .ok, op: .sign, device: "a-1", transaction: "t7", details: ["outcome": "cancelled"]))
        let counts = Launcher.counts(stores: report.counts, history: history, lastSample: stale)
        #expect(counts.signed == 6 && counts.synced == 5 && counts.pending == 1, "from the stores: \(counts)")
        #expect(counts.composed == 7 && counts.cancelled == 1 && counts.declined == 0, "from the history: \(counts)")
        #expect(counts.syncFailures == 2, "push failures are only in the stats lines")
        // Without the checker's counts (it could not run), the stats line is all there is.
        #expect(Launcher.counts(stores: nil, history: history, lastSample: stale).signed == 5)
    }
}
