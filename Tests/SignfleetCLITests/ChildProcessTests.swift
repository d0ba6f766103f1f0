import Foundation
import FleetTesting
import Synchronization
import Testing

/// The test harness's own child-process helper: actions tied to a child's output.
@Suite struct ChildProcessTests {
    /// A child that prints three lines and then waits to be killed.
    static func printer() throws -> ChildProcess {
        try ChildProcess.launch("/bin/sh", ["-c", "echo one; echo two; echo three; exec sleep 60"], name: "printer")
    }

    @Test func anActionRunsWhenTheCountedLineArrives() async throws {
        let child = try Self.printer()
        let ran = Mutex(0)
        child.onLines(2, in: .standardOutput, where: { $0.hasPrefix("t") }) {
            ran.withLock { $0 += 1 }
            child.signal(SIGKILL)
        }
        // Only the action stops the child: without it this wait times out.
        let status = try await child.waitForExit(timeout: .seconds(30))
        #expect(status == SIGKILL)
        #expect(ran.withLock { $0 } == 1)
        #expect(child.lines(.standardOutput) == ["one", "two", "three"])
    }

    @Test func anActionWhoseLinesWereAlreadySeenRunsAtOnce() async throws {
        let child = try Self.printer()
        defer { Task { await child.terminate() } }
        try await child.waitForLine(in: .standardOutput, timeout: .seconds(30)) { $0 == "three" }
        let ran = Mutex(false)
        child.onLines(3, in: .standardOutput, where: { _ in true }) { ran.withLock { $0 = true } }
        #expect(ran.withLock { $0 })
        // Lines that never come never run it.
        let never = Mutex(false)
        child.onLines(4, in: .standardOutput, where: { _ in true }) { never.withLock { $0 = true } }
        await child.terminate()
        #expect(!never.withLock { $0 })
    }
}

@Suite struct ChildProcessEndOfOutputTests {
    @Test func aLastLineWithoutItsNewlineIsKept() async throws {
        let child = try ChildProcess.launch("/bin/sh", ["-c", "printf 'one\\ntwo'"], name: "printf")
        #expect(try await child.waitForExit(timeout: .seconds(30)) == 0)
        #expect(child.lines(.standardOutput) == ["one", "two"])
    }

    @Test func runToCompletionReturnsStatusAndBothStreams() throws {
        let (status, output, errors) = try ChildProcess.runToCompletion("/bin/sh", ["-c", "echo out; echo err >&2; exit 3"])
        #expect(status == 3 && output == "out" && errors == "err")
    }

    @Test func aChildKilledByASignalReportsItsNumber() async throws {
        let child = try ChildProcess.launch("/bin/sh", ["-c", "kill -TERM $$"], name: "self-kill")
        #expect(try await child.waitForExit(timeout: .seconds(30)) == SIGTERM)
    }
}
