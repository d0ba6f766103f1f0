import FleetTesting
import Foundation
import Testing

@testable import Fleet

#if canImport(Glibc)
import Glibc
#endif

/// What the launcher runs for node hosts, without namespaces: ``HostCommand`` (argv, files for
/// standard input and output, a timeout) and the supervisor's remote signals (a signal sent as
/// `launch + [kill, -s, NAME, PID]` to the pid a child announced, not to its local process group).
@Suite struct HostCommandTests {
    static func temporaryDirectory() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("hostcommand-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    @Test(.timeLimit(.minutes(5))) func aCommandReadsAFileWritesAFileAndReportsItsStatus() async throws {
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let input = directory + "/in", output = directory + "/out"
        let bytes = Data((0..<70_000).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        try bytes.write(to: URL(fileURLWithPath: input))
        // An argument with spaces and a quote reaches the program as one argument: no shell in between.
        let copied = await HostCommand(argv: ["env", "--", "cat", input], output: output).run()
        #expect(copied.succeeded, "\(copied)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: output)) == bytes)
        let piped = await HostCommand(argv: ["tee", directory + "/a file; with 'quotes'"], input: input).run()
        #expect(piped.succeeded, "\(piped)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: directory + "/a file; with 'quotes'")) == bytes)

        let failed = await HostCommand(argv: ["tar", "-C", directory, "-cf", "-", "no-such-member"], output: directory + "/t.tar").run()
        #expect(failed.status == 2 && !failed.succeeded && !failed.timedOut, "\(failed)")
        #expect(failed.error.contains("no-such-member"), "its standard error is kept: \(failed)")
        let missing = await HostCommand(argv: ["/nonexistent/program"]).run()
        #expect(missing.status == nil && missing.description.contains("cannot run"), "\(missing)")
    }

    @Test(.timeLimit(.minutes(10))) func aCommandThatOutlivesItsTimeoutIsKilled() async {
        // `sleep 3600` left alone would succeed an hour later: its outcome says it was killed.
        let outcome = await HostCommand(argv: ["sleep", "3600"], timeout: .milliseconds(300)).run()
        #expect(outcome.timedOut && !outcome.succeeded, "\(outcome)")
    }

    /// The child's "node" is a grandchild whose pid it announces: a signal that reached it through the
    /// prefix ends the local shell with 128 + the signal (a signal to the local group would have
    /// killed the shell itself, `signaled`).
    @Test(.timeLimit(.minutes(5))) func remoteSignalsReachTheAnnouncedPidThroughTheLaunchPrefix() async throws {
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let run = try RunDirectory.create(root: directory)
        let (events, continuation) = AsyncStream.makeStream(of: SupervisorEvent.self)
        let supervisor = Supervisor(executable: "/nonexistent", run: run) { continuation.yield($0) }
        var spec = ChildSpec(
            name: "node-x-1", arguments: ["-c", "sleep 60 & echo \"node started process=node-x-1 pid=$!\"; wait $!"], restartBudget: 0)
        spec.launchPrefix = ["env"]
        spec.executable = "/bin/sh"
        spec.remoteSignals = true
        await supervisor.start(spec)
        var announced: Int32?
        do {
            let line = try await firstElement(of: events, within: .seconds(120), "the node's pid") { event in
                if case .line(_, let text) = event { return text.hasPrefix("node started") }
                return false
            }
            if case .line(_, let text) = line { announced = Supervisor.announcedPid(in: text) }
        } catch {
            await supervisor.stopAll(grace: .seconds(1))
            throw error
        }
        guard let pid = announced else {
            await supervisor.stopAll(grace: .seconds(1))
            Issue.record("the node started line carried no pid")
            return
        }
        #expect(await supervisor.pid(of: "node-x-1") != pid, "the announced pid is not the local child")
        #expect(await supervisor.signal("node-x-1", SIGSTOP))
        #expect(await supervisor.isPaused("node-x-1"))
        #expect(await supervisor.signal("node-x-1", SIGCONT))
        await supervisor.kill("node-x-1")
        await supervisor.stopAll(grace: .seconds(1))
        #expect(await supervisor.lastExit(of: "node-x-1") == .exited(128 + SIGKILL))
        let pids = try String(contentsOfFile: run.path + "/pids", encoding: .utf8)
        #expect(pids.contains("node-x-1@remote \(pid)\n"), "\(pids)")
        // Nothing left: the announced process is gone.
        #expect(Glibc.kill(pid, 0) != 0)
    }
}
