import FleetProtocol
import FleetTesting
import Testing

/// The client's retry policy as values: jittered back-off and the retry budget.
struct RetryPolicyTests {
    @Test func withoutASeedTheDelaysAreTheCeilings() {
        var backoff = Backoff(initial: .milliseconds(250), maximum: .seconds(2))
        #expect((0..<6).map { _ in backoff.next() } == [.milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2), .seconds(2), .seconds(2)])
        backoff.reset()
        #expect(backoff.next() == .milliseconds(250))
    }

    @Test func fullJitterDrawsBelowTheCeilingAndReplaysFromItsSeed() {
        let seed = testSeed("fullJitter")
        var a = Backoff(initial: .milliseconds(100), maximum: .seconds(10), jitterSeed: seed)
        var b = Backoff(initial: .milliseconds(100), maximum: .seconds(10), jitterSeed: seed)
        var ceiling = Duration.milliseconds(100)
        for _ in 0..<20 {
            let delay = a.next()
            #expect(delay >= .zero && delay <= ceiling, "\(delay) beyond its ceiling \(ceiling)")
            #expect(b.next() == delay, "the same seed draws the same delays")
            ceiling = min(ceiling * 2, .seconds(10))
        }
    }

    @Test func aFleetThatFailedTogetherComesBackSpreadOut() {
        // 1,000 devices lose their server at once: their first reconnections, with full jitter
        // seeded by their ids, spread over the whole first ceiling instead of one instant.
        let delays = (0..<1_000).map { n -> Duration in
            var backoff = Backoff(initial: .seconds(1), maximum: .seconds(30)).jittered(seed: Backoff.jitterSeed(for: "device-\(n)"))
            return backoff.next()
        }
        let buckets = Dictionary(grouping: delays) { Int($0.seconds * 10) }.mapValues(\.count)
        #expect(buckets.count == 10, "ten 100 ms buckets of the first second all used: \(buckets)")
        #expect(buckets.values.allSatisfy { $0 > 50 && $0 < 150 }, "about 100 devices in each: \(buckets.sorted { $0.key < $1.key })")
        #expect(Backoff.jitterSeed(for: "device-1") != Backoff.jitterSeed(for: "device-2"))
        #expect(Backoff.jitterSeed(for: "device-1") == Backoff.jitterSeed(for: "device-1"))
    }

    @Test func theBudgetAllowsRetriesWhileAnswersDominate() {
        var budget = RetryBudget()
        #expect(budget.allowsRetry && budget.tokens == 10)
        for _ in 0..<4 { budget.recordFailure() }
        #expect(budget.allowsRetry, "6 tokens left: above half")
        budget.recordFailure()
        #expect(!budget.allowsRetry, "5 left: no resends")
        budget.recordSuccess()
        #expect(budget.allowsRetry, "one answer above the threshold again")
        // One failure in twenty: the budget stays full.
        var steady = RetryBudget()
        for n in 0..<1_000 {
            if n % 20 == 0 { steady.recordFailure() } else { steady.recordSuccess() }
        }
        #expect(steady.allowsRetry && steady.tokens > 9)
        // One failure in five: resends stop.
        var failing = RetryBudget()
        for n in 0..<1_000 {
            if n % 5 == 0 { failing.recordFailure() } else { failing.recordSuccess() }
        }
        #expect(!failing.allowsRetry, "\(failing.tokens) tokens")
    }

    @Test func theBudgetIsBounded() {
        var budget = RetryBudget(maxTokens: .nan, tokenRatio: -1)
        #expect(budget.maxTokens == 10 && budget.tokenRatio == 0.001)
        for _ in 0..<100 { budget.recordFailure() }
        #expect(budget.tokens == 0)
        for _ in 0..<100_000 { budget.recordSuccess() }
        #expect(budget.tokens == 10)
    }
}
