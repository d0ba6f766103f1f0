import FleetProtocol
import Foundation
import Subprocess
import Synchronization
import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// A one-shot command the launcher runs for a node host: an argv list (the host's launch prefix
/// and the command), never a shell line. Standard input and output may be files (to push the
/// node plans there and pull the histories and stores back as `tar` streams); standard error is
/// kept (its first 64 KiB) for the error message. A command that outlives its timeout is killed
/// with its process group.
public struct HostCommand: Sendable {
    public var argv: [String]
    /// A file for standard input; nil: none.
    public var input: String?
    /// A file standard output is written to (created or truncated); nil: discarded.
    public var output: String?
    public var timeout: Duration
    /// What the timeout is measured on.
    public var clock: any FleetClock

    public init(
        argv: [String], input: String? = nil, output: String? = nil, timeout: Duration = .seconds(60),
        clock: any FleetClock = ContinuousClock()
    ) {
        self.argv = argv
        self.input = input
        self.output = output
        self.timeout = timeout
        self.clock = clock
    }

    /// How it ended.
    public struct Outcome: Sendable, CustomStringConvertible {
        /// The exit status, or nil when it did not exit normally (a signal, not started).
        public var status: Int32?
        /// Its standard error (at most 64 KiB), or why it could not run.
        public var error: String
        public var timedOut: Bool
        public var succeeded: Bool { status == 0 }

        public var description: String {
            let why = error.trimmingCharacters(in: .whitespacesAndNewlines)
            let ended = timedOut ? "timed out" : status.map { "exit \($0)" } ?? "did not exit normally"
            return why.isEmpty ? ended : "\(ended): \(why.count > 500 ? String(why.suffix(500)) : why)"
        }
    }

    /// The program as Subprocess finds it: a path when it has a '/', else looked up in PATH.
    static func executable(_ program: String) -> Executable {
        program.contains("/") ? .path(FilePath(program)) : .name(program)
    }

    /// Runs the command and waits for it (or its timeout).
    public func run() async -> Outcome {
        guard let program = argv.first else { return Outcome(status: nil, error: "no command", timedOut: false) }
        var inputDescriptor: FileDescriptor?
        var outputDescriptor: FileDescriptor?
        do {
            if let input { inputDescriptor = try FileDescriptor.open(FilePath(input), .readOnly) }
            if let output {
                outputDescriptor = try FileDescriptor.open(
                    FilePath(output), .writeOnly, options: [.create, .truncate], permissions: [.ownerReadWrite, .groupRead, .otherRead])
            }
        } catch {
            try? inputDescriptor?.close()
            return Outcome(status: nil, error: "cannot open \(input ?? "") / \(output ?? ""): \(error)", timedOut: false)
        }
        let started = SpawnState()
        let timeout = self.timeout
        let watchdog = Task { [clock] in
            try? await clock.sleep(for: timeout)
            guard !Task.isCancelled else { return }
            // Not spawned yet (a loaded machine): the spawn kills it as soon as it has its pid.
            if let pid = started.expire() { _ = Glibc.kill(-pid, SIGKILL) }
        }
        defer { watchdog.cancel() }
        var options = PlatformOptions()
        options.processGroupID = 0
        do {
            let spawn = Spawn(argv: argv, options: options, started: started)
            let status: TerminationStatus
            let errorText: String
            switch (inputDescriptor, outputDescriptor) {
            case (let input?, let output?):
                (status, errorText) = try await spawn.run(
                    .fileDescriptor(input, closeAfterSpawningProcess: true), .fileDescriptor(output, closeAfterSpawningProcess: true))
            case (nil, let output?):
                (status, errorText) = try await spawn.run(.none, .fileDescriptor(output, closeAfterSpawningProcess: true))
            case (let input?, nil):
                (status, errorText) = try await spawn.run(.fileDescriptor(input, closeAfterSpawningProcess: true), .discarded)
            case (nil, nil):
                (status, errorText) = try await spawn.run(.none, .discarded)
            }
            let wasTimedOut = started.timedOut
            switch status {
            case .exited(let code): return Outcome(status: code, error: errorText, timedOut: wasTimedOut)
            case .signaled(let signal): return Outcome(status: nil, error: "signal \(signal) " + errorText, timedOut: wasTimedOut)
            }
        } catch {
            if let pid = started.pid { _ = Glibc.kill(-pid, SIGKILL) }
            return Outcome(status: nil, error: "cannot run \(program): \(error)", timedOut: false)
        }
    }
}

/// One spawn of a ``HostCommand``, generic over where its input comes from and its output goes.
private struct Spawn {
    var argv: [String]
    var options: PlatformOptions
    var started: SpawnState

    func run<Input: InputProtocol, Output: OutputProtocol>(_ input: Input, _ output: Output) async throws -> (TerminationStatus, String) {
        let started = self.started
        let result = try await Subprocess.run(
            HostCommand.executable(argv[0]), arguments: Arguments(Array(argv.dropFirst())), platformOptions: options, input: input,
            output: output, error: .string(limit: 64 * 1024)
        ) { execution in
            let pid = execution.processIdentifier.value
            // Its timeout passed while it was being spawned: it is killed at once.
            if started.spawned(pid) { _ = Glibc.kill(-pid, SIGKILL) }
        }
        return (result.terminationStatus, result.standardError)
    }
}

/// The spawned process's id (for the timeout's kill) and whether the timeout fired, in one lock so
/// that a timeout that fires before the spawn has its pid is not lost.
private final class SpawnState: Sendable {
    private struct State {
        var pid: Int32?
        var timedOut = false
    }
    private let state = Mutex(State())

    var pid: Int32? { state.withLock { $0.pid } }
    var timedOut: Bool { state.withLock { $0.timedOut } }

    /// The timeout fired: returns the pid to kill, or nil when the process is not spawned yet.
    func expire() -> Int32? {
        state.withLock { state in
            state.timedOut = true
            return state.pid
        }
    }

    /// The process has `pid`: returns true when its timeout has already fired (kill it now).
    func spawned(_ pid: Int32) -> Bool {
        state.withLock { state in
            state.pid = pid
            return state.timedOut
        }
    }
}
