import FleetProtocol
import FleetTesting
import Synchronization
import Testing

/// FleetTesting's `ManualClock`: time moves only when advanced, sleepers wake in deadline order.
@Suite struct ManualClockTests {
    @Test func aSleepEndsOnlyWhenTheClockIsAdvancedPastItsDeadline() async throws {
        let clock = ManualClock()
        let start = clock.now
        let woke = Mutex<ContinuousClock.Instant?>(nil)
        let sleeper = Task {
            try await clock.sleep(for: .seconds(5))
            woke.withLock { $0 = clock.now }
        }
        try await withDeadline(.seconds(120), "the sleep to start") { await clock.sleeping(atLeast: 1) }
        #expect(clock.pendingDeadlines == [.seconds(5)])
        await clock.advance(by: .seconds(4))
        #expect(woke.withLock { $0 } == nil, "4 s of 5: still asleep")
        #expect(clock.sleeperCount == 1)
        await clock.advance(by: .seconds(1))
        try await sleeper.value
        #expect(woke.withLock { $0 } == start + .seconds(5), "woken at its deadline")
        #expect(clock.now == start + .seconds(5))
        #expect(clock.sleeperCount == 0)
    }

    @Test func sleepersWakeWhenTheirDeadlinesArePassedAndNotBefore() async throws {
        let clock = ManualClock()
        let start = clock.now
        var tasks: [Int: Task<ContinuousClock.Instant, any Error>] = [:]
        // Started out of order.
        for (index, seconds) in [(1, 3), (2, 1), (3, 1), (4, 2)] {
            tasks[index] = Task { [seconds] in
                try await clock.sleep(for: .seconds(seconds))
                return clock.now
            }
            try await withDeadline(.seconds(120), "sleeper \(index)") { await clock.sleeping(atLeast: index) }
        }
        #expect(clock.pendingDeadlines == [.seconds(1), .seconds(1), .seconds(2), .seconds(3)])
        await clock.advance(by: .seconds(1))
        for index in [2, 3] { #expect(try await tasks[index]!.value >= start + .seconds(1)) }
        #expect(clock.pendingDeadlines == [.seconds(1), .seconds(2)], "1 and 4 still asleep")
        await clock.advance(by: .milliseconds(1_500))
        #expect(try await tasks[4]!.value >= start + .seconds(2))
        #expect(clock.pendingDeadlines == [.milliseconds(500)])
        await clock.advance(by: .seconds(10))
        #expect(try await tasks[1]!.value >= start + .seconds(3))
        #expect(clock.now == start + .seconds(12.5))
        #expect(clock.sleeperCount == 0)
    }

    @Test func aSleepWhoseDeadlineHasPassedReturnsAtOnceAndACancelledOneThrows() async throws {
        let clock = ManualClock()
        try await clock.sleep(until: clock.now - .seconds(1), tolerance: nil)
        try await clock.sleep(for: .zero)
        let sleeper = Task { try await clock.sleep(for: .seconds(60)) }
        try await withDeadline(.seconds(120), "the sleep to start") { await clock.sleeping(atLeast: 1) }
        sleeper.cancel()
        await #expect(throws: CancellationError.self) { try await sleeper.value }
        #expect(clock.sleeperCount == 0, "a cancelled sleep leaves the clock")
        let cancelledFirst = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await clock.sleep(for: .seconds(1))
        }
        await #expect(throws: CancellationError.self) { try await cancelledFirst.value }
    }

    @Test func aWaitForSleepersSeesTheLengthOfTheSleep() async throws {
        let clock = ManualClock()
        let short = Task { try await clock.sleep(for: .milliseconds(500)) }
        let found = Mutex(false)
        let waiting = Task {
            await clock.sleeping(atLeast: .seconds(2))
            found.withLock { $0 = true }
        }
        try await withDeadline(.seconds(120), "the short sleep") { await clock.sleeping(atLeast: 1) }
        #expect(found.withLock { $0 } == false, "a 500 ms sleep is not one of 2 s")
        let long = Task { try await clock.sleep(for: .seconds(3)) }
        try await withDeadline(.seconds(120), "the long sleep to be seen") { await waiting.value }
        #expect(found.withLock { $0 })
        await clock.advance(by: .seconds(3))
        try await short.value
        try await long.value
        // A wait that is cancelled (as a deadline cancels it) returns instead of hanging.
        let unmet = Task { await clock.sleeping(atLeast: 1) }
        unmet.cancel()
        try await withDeadline(.seconds(120), "the cancelled wait to return") { await unmet.value }
        #expect(clock.sleeperCount == 0, "nobody sleeps: it returned because it was cancelled")
    }

    /// A jump is a stopped process's view of time: a ticking task wakes once, late, and its next
    /// tick counts from the new time; an advance lets it tick through the whole stretch.
    @Test func aJumpWakesATickerOnceAndAnAdvanceLetsItTick() async throws {
        let clock = ManualClock()
        let ticks = Mutex(0)
        let ticker = Task {
            while !Task.isCancelled {
                try await clock.sleep(for: .seconds(1))
                ticks.withLock { $0 += 1 }
            }
        }
        let oneSecond: @Sendable ([Duration]) -> Bool = { $0 == [.seconds(1)] }
        try await withDeadline(.seconds(120), "the first tick's sleep") { await clock.waitForSleepers(where: oneSecond) }
        await clock.jump(by: .seconds(10))
        try await withDeadline(.seconds(120), "the sleep after the jump") { await clock.waitForSleepers(where: oneSecond) }
        #expect(ticks.withLock { $0 } == 1, "stopped for 10 s: one late wake-up")
        for _ in 0..<3 {
            await clock.advance(by: .seconds(1))
            try await withDeadline(.seconds(120), "the next tick's sleep") { await clock.waitForSleepers(where: oneSecond) }
        }
        #expect(ticks.withLock { $0 } == 4, "three seconds of running time: three more ticks")
        ticker.cancel()
        _ = try? await ticker.value
    }
}
