import FleetTesting
import Foundation
import Synchronization
import Testing

@testable import Fleet

#if canImport(Glibc)
import Glibc
#endif

/// The supervisor's and the launcher's waits are driven by events (a child's start and exit,
/// a line it printed), not by polling: with a clock that never moves, only the event can end them.
@Suite struct SupervisorEventTests {
    static func temporaryDirectory() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("supervisor-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    @Test(.timeLimit(.minutes(5))) func aChildsStartAndExitEndTheWaitsWhileTheClockStandsStill() async throws {
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let run = try RunDirectory.create(root: directory)
        let clock = ManualClock()  // never advanced: its sleeps end only by cancellation
        let supervisor = Supervisor(executable: "/bin/sh", run: run, clock: clock) { _ in }
        await supervisor.start(ChildSpec(name: "child", arguments: ["-c", "exec sleep 60"], restartBudget: 0))
        defer { Task { await supervisor.stopAll(grace: .seconds(1)) } }

        // The timeouts are on the stopped clock: a wait that polled (or slept to its timeout) would never end.
        let running = try await withDeadline(.seconds(120), "the child's start") { await supervisor.waitUntilRunning("child", within: .seconds(1)) }
        #expect(running)
        let pid = try #require(await supervisor.pid(of: "child"))
        // An exit nobody asked for, beyond a restart budget of 0: the supervisor gives up on it.
        #expect(Glibc.kill(-pid, SIGKILL) == 0)
        let down = try await withDeadline(.seconds(120), "the child's exit") { await supervisor.waitUntilDown("child", within: .seconds(1)) }
        #expect(down)
        #expect(await supervisor.lastExit(of: "child") == .signaled(SIGKILL))
        #expect(await supervisor.exhausted == ["child"])
        #expect(await !supervisor.isRunning("child"))
        #expect(clock.sleeperCount == 0, "the waits that ended by their events left no sleep behind")
    }

    @Test(.timeLimit(.minutes(5))) func aWaitForAnExitThatDoesNotComeTimesOut() async throws {
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let run = try RunDirectory.create(root: directory)
        let clock = ManualClock()
        let supervisor = Supervisor(executable: "/bin/sh", run: run, clock: clock) { _ in }
        await supervisor.start(ChildSpec(name: "child", arguments: ["-c", "exec sleep 60"], restartBudget: 0))
        #expect(try await withDeadline(.seconds(120), "the child's start") { await supervisor.waitUntilRunning("child", within: .seconds(1)) })
        // The timeout is the only way out here (the child sleeps on): false once the clock passes
        // it, and the child is untouched.
        let waiting = Task { await supervisor.waitUntilDown("child", within: .milliseconds(200)) }
        try await withDeadline(.seconds(120), "the wait's timer") { await clock.sleeping(atLeast: 1) }
        await clock.advance(by: .milliseconds(200))
        #expect(try await withDeadline(.seconds(120), "the wait's timeout") { await waiting.value } == false)
        #expect(await supervisor.isRunning("child"))
        await supervisor.stop("child", grace: .seconds(5))
        #expect(await supervisor.lastExit(of: "child") == .signaled(SIGTERM))
        #expect(await supervisor.exhausted.isEmpty, "a deliberate stop is not an unexpected exit")
    }

    /// A child spec's environment reaches the child (the launcher passes the store that way).
    @Test(.timeLimit(.minutes(5))) func aChildGetsItsSpecsEnvironment() async throws {
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let run = try RunDirectory.create(root: directory)
        let supervisor = Supervisor(executable: "/bin/sh", run: run, clock: ManualClock()) { _ in }
        let file = directory + "/seen"
        var spec = ChildSpec(name: "child", arguments: ["-c", "printf %s \"$SF_TEST_VALUE\" > '\(file)'"], restartBudget: 0)
        spec.environment = ["SF_TEST_VALUE": "given by the spec"]
        await supervisor.start(spec)
        // On a clock that never moves, only the child's exit ends the wait.
        #expect(try await withDeadline(.seconds(120), "the child's exit") { await supervisor.waitUntilDown("child", within: .seconds(1)) })
        #expect(await supervisor.lastExit(of: "child") == .exited(0))
        #expect(try String(contentsOfFile: file, encoding: .utf8) == "given by the spec")
    }

    @Test func aRingBeforeTheWaitIsNotLost() async {
        let bell = Doorbell()
        let seen = bell.generation
        bell.ring()
        // Rung after `seen`: returns at once, on a clock that would never time it out.
        #expect(await bell.wait(after: seen, atMost: .seconds(1), clock: ManualClock()))
        #expect(bell.generation == seen + 1)
    }

    @Test(.timeLimit(.minutes(5))) func aRingWakesEveryWaiter() async throws {
        let bell = Doorbell()
        let seen = bell.generation
        let (woken, continuation) = AsyncStream.makeStream(of: Int.self)
        let waiters = (0..<3).map { index in
            Task {
                await bell.wait(after: seen)
                continuation.yield(index)
            }
        }
        bell.ring()
        var seenIndices: Set<Int> = []
        for _ in 0..<3 {
            seenIndices.insert(try await firstElement(of: woken, within: .seconds(20), "a woken waiter"))
        }
        #expect(seenIndices == [0, 1, 2])
        for waiter in waiters { await waiter.value }
    }

    @Test(.timeLimit(.minutes(5))) func aCancelledWaitReturns() async throws {
        let bell = Doorbell()
        let waiter = Task { await bell.wait(after: bell.generation) }
        waiter.cancel()
        try await withDeadline(.seconds(20), "the cancelled wait") { await waiter.value }
        #expect(bell.generation == 0)
    }
}

