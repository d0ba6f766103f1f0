import Testing

@testable import FleetProtocol

/// The per-connection message budget (docs/protocol.md, section 4).
@Suite struct PeerBudgetsTests {
    @Test func aBurstThenTheRefillRateThenNothing() {
        var budgets = PeerBudgets(burst: 3, rate: 2)
        let peer: [UInt8] = [0, 1, 2, 3, 4]
        let start = ContinuousClock.now
        var taken = 0
        for _ in 0..<3 where budgets.take(peer, at: start) { taken += 1 }
        #expect(taken == 3)
        let fourth = budgets.take(peer, at: start)
        #expect(!fourth)
        // Half a second at 2/s gives one message back.
        let refilled = budgets.take(peer, at: start + .milliseconds(500))
        let spent = budgets.take(peer, at: start + .milliseconds(500))
        #expect(refilled && !spent)
        // Another connection has its own budget.
        let other = budgets.take([9], at: start)
        #expect(other)
    }

    @Test func idleConnectionsAreForgottenSoConnectionsThatComeAndGoCannotGrowTheTable() {
        var budgets = PeerBudgets(burst: 10, rate: 5)
        let start = ContinuousClock.now
        for index in 0..<1_000 { _ = budgets.take([UInt8(index % 256), UInt8(index / 256)], at: start) }
        #expect(budgets.count == 1_000)
        budgets.pruneIdle(at: start + .seconds(1))
        #expect(budgets.count == 1_000, "not yet full again: kept")
        budgets.pruneIdle(at: start + .seconds(3))
        #expect(budgets.count == 0)
    }
}
