import FleetProtocol
import Foundation
import Subprocess
import Synchronization
import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// What the supervisor starts: one named child process (the same `signfleet` binary
/// with a subcommand) and how many unexpected exits it restarts.
public struct ChildSpec: Sendable, Hashable {
    public var name: String
    public var arguments: [String]
    /// Unexpected exits restarted before the supervisor gives up on this child.
    public var restartBudget: Int
    /// A node host's launch prefix (``FleetHost/launch``): the child is `launchPrefix + [executable] + arguments`.
    /// Empty: the executable is run directly.
    public var launchPrefix: [String] = []
    /// The `signfleet` binary for this child (a node host's ``FleetHost/executable``); nil: the supervisor's.
    public var executable: String?
    /// Signals go through the launch prefix as `kill -s NAME <pid>` to the pid the child announced
    /// (`… pid=N` on its `node started` line), not to the local process group (``FleetHost/Signals/remote``).
    public var remoteSignals = false
    /// Added to the child's environment (a local child's: a launch prefix such as `ssh` does not
    /// carry it). For what must not show on a command line, which every user of the machine can
    /// read in `ps`: a child's environment is readable by its own user only.
    public var environment: [String: String] = [:]

    public init(name: String, arguments: [String], restartBudget: Int) {
        self.name = name
        self.arguments = arguments
        self.restartBudget = restartBudget
    }
}

/// How a child ended.
public enum ChildExit: Sendable, Hashable, CustomStringConvertible {
    case exited(Int32)
    case signaled(Int32)
    case failedToStart(String)

    public var description: String {
        switch self {
        case .exited(let code): return "exit \(code)"
        case .signaled(let signal): return "signal \(signal)"
        case .failedToStart(let reason): return "failed to start: \(reason)"
        }
    }
}

/// What the supervisor reports, in order per child.
public enum SupervisorEvent: Sendable {
    case started(name: String, pid: Int32, restarts: Int)
    /// A line the child printed on standard output (also appended to `logs/<name>.out`).
    case line(name: String, text: String)
    /// `expected`: the supervisor was told to stop or kill it.
    case exited(name: String, exit: ChildExit, expected: Bool)
    /// An unexpected exit beyond the child's restart budget: the run's verdict becomes unknown.
    case gaveUp(name: String, restarts: Int)
}

/// Starts child processes and keeps them running, as an OTP supervisor does: an
/// unexpected exit is restarted (with a short back-off) up to the child's restart
/// budget; beyond it the supervisor gives up on that child and says so. Deliberate
/// kills, stops and pauses (the fault schedule's) are not counted.
///
/// Each child runs in its own process group (so a signal reaches everything it
/// started), its stdout goes to `logs/<name>.out` while every line is also reported,
/// its stderr to `logs/<name>.log`, and its pid is appended to `pids`. Children get
/// `SIGNFLEET_PARENT_PID` so they arm a parent-death signal: nothing outlives the
/// launcher, even one killed with SIGKILL. swift-subprocess spawns from one
/// long-lived worker thread, which is what PR_SET_PDEATHSIG needs (it fires when
/// the spawning *thread* exits).
public actor Supervisor {
    private enum Desired { case up, down }

    private struct Child {
        var spec: ChildSpec
        var desired: Desired
        var pid: Int32?
        var restarts = 0
        var gaveUp = false
        var loop: Task<Void, Never>?
        var paused = false
        var lastExit: ChildExit?
        /// The pid the child announced (`pid=N`), for ``ChildSpec/remoteSignals``.
        var announcedPid: Int32?
    }

    private let executable: String
    private let run: RunDirectory
    private let events: @Sendable (SupervisorEvent) -> Void
    private var children: [String: Child] = [:]
    private let pidsFile: String
    /// Rung when a child starts, exits or its loop ends: what the waits below wake on.
    private let changes = Doorbell()
    /// Measures the waits' timeouts (and nothing else: no wait polls it).
    private let clock: any FleetClock

    /// - Parameters:
    ///   - executable: the `signfleet` binary.
    ///   - run: where logs and the `pids` file go.
    ///   - clock: the clock of the waits' timeouts.
    ///   - events: called for every event, from the supervisor's tasks (keep it quick).
    public init(
        executable: String, run: RunDirectory, clock: any FleetClock = ContinuousClock(),
        events: @escaping @Sendable (SupervisorEvent) -> Void
    ) {
        self.executable = executable
        self.run = run
        self.clock = clock
        self.events = events
        self.pidsFile = URL(fileURLWithPath: run.path).appendingPathComponent("pids").path
    }

    /// Starts a child (or restarts a deliberately stopped one with `spec`).
    public func start(_ spec: ChildSpec) {
        var child = children[spec.name] ?? Child(spec: spec, desired: .up)
        child.spec = spec
        child.desired = .up
        guard child.loop == nil else {
            children[spec.name] = child
            return
        }
        child.loop = Task { [weak self] in await self?.superviseLoop(name: spec.name) }
        children[spec.name] = child
    }

    /// Changes what a later (re)start runs, e.g. a coordinator that must come back on the same endpoint.
    public func update(_ spec: ChildSpec) {
        children[spec.name]?.spec = spec
    }

    /// Restarts a child that was killed or stopped on purpose, with its last spec.
    public func restart(_ name: String) {
        guard let spec = children[name]?.spec else { return }
        start(spec)
    }

    public func pid(of name: String) -> Int32? { children[name]?.pid }
    public func isRunning(_ name: String) -> Bool { children[name]?.pid != nil }
    public func restarts(of name: String) -> Int { children[name]?.restarts ?? 0 }
    public var totalRestarts: Int { children.values.reduce(0) { $0 + $1.restarts } }
    /// Children whose restart budget ran out.
    public var exhausted: [String] { children.filter { $0.value.gaveUp }.map(\.key).sorted() }
    public var names: [String] { children.keys.sorted() }
    public func isPaused(_ name: String) -> Bool { children[name]?.paused ?? false }
    public func lastExit(of name: String) -> ChildExit? { children[name]?.lastExit }

    /// Sends `signal` to the child's process group (or, with ``ChildSpec/remoteSignals``, to its
    /// announced pid through its launch prefix); false when it is not running or the signal failed.
    @discardableResult
    public func signal(_ name: String, _ signal: Int32) async -> Bool {
        guard let child = children[name], let pid = child.pid else { return false }
        if signal == SIGSTOP { children[name]?.paused = true }
        if signal == SIGCONT { children[name]?.paused = false }
        if child.spec.remoteSignals { return await remoteSignal(name, signal) }
        return Glibc.kill(-pid, signal) == 0
    }

    /// `launchPrefix + [kill, -s, NAME, PID]`; false without an announced pid or when it fails.
    private func remoteSignal(_ name: String, _ signal: Int32) async -> Bool {
        guard let child = children[name], let pid = child.announcedPid, let signalName = Self.signalNames[signal] else { return false }
        let command = HostCommand(argv: child.spec.launchPrefix + ["kill", "-s", signalName, "\(pid)"], timeout: .seconds(10))
        return await command.run().succeeded
    }

    static let signalNames: [Int32: String] = [
        SIGKILL: "KILL", SIGTERM: "TERM", SIGSTOP: "STOP", SIGCONT: "CONT", SIGUSR1: "USR1", SIGINT: "INT",
    ]

    /// Kills the child's process group with SIGKILL on purpose (not restarted until
    /// ``restart(_:)``) and waits until it has exited. A child with remote signals is killed
    /// there first; its local process (the launch command) is killed if it has not ended 10 s later.
    public func kill(_ name: String) async {
        guard var child = children[name] else { return }
        child.desired = .down
        children[name] = child
        if child.spec.remoteSignals, child.pid != nil {
            _ = await remoteSignal(name, SIGKILL)
            if await waitForLoopEnd(name, within: .seconds(10)) { return }
        }
        if let pid = children[name]?.pid { _ = Glibc.kill(-pid, SIGKILL) }
        await child.loop?.value
    }

    /// Stops the child on purpose: SIGCONT (a paused child cannot act on SIGTERM),
    /// SIGTERM, then SIGKILL after `grace`. Waits until it has exited.
    public func stop(_ name: String, grace: Duration) async {
        guard var child = children[name] else { return }
        child.desired = .down
        children[name] = child
        guard let loop = child.loop else { return }
        let remote = child.spec.remoteSignals
        if let pid = child.pid {
            if remote {
                _ = await remoteSignal(name, SIGCONT)
                _ = await remoteSignal(name, SIGTERM)
            } else {
                _ = Glibc.kill(-pid, SIGCONT)
                _ = Glibc.kill(-pid, SIGTERM)
            }
        }
        let exited = await waitForLoopEnd(name, within: grace)
        if !exited, children[name]?.pid != nil {
            if remote { _ = await remoteSignal(name, SIGKILL) }
            if let pid = children[name]?.pid { _ = Glibc.kill(-pid, SIGKILL) }
        }
        await loop.value
    }

    /// Waits until a child's supervision loop has ended (it exited and is not restarted), or `timeout`.
    public func waitUntilDown(_ name: String, within timeout: Duration) async -> Bool {
        await waitForLoopEnd(name, within: timeout)
    }

    /// Stops every child (in parallel) as ``stop(_:grace:)`` does.
    public func stopAll(grace: Duration) async {
        await withTaskGroup(of: Void.self) { group in
            for name in children.keys {
                group.addTask { await self.stop(name, grace: grace) }
            }
        }
    }

    // MARK: - The supervision loop

    private func superviseLoop(name: String) async {
        while let spec = prepareStart(name) {
            let exit = await launchOnce(spec)
            guard let delay = didExit(name, exit) else { break }
            try? await clock.sleep(for: delay)
        }
        children[name]?.loop = nil
        changes.ring()
    }

    private func prepareStart(_ name: String) -> ChildSpec? {
        guard let child = children[name], child.desired == .up else { return nil }
        return child.spec
    }

    private func didStart(_ name: String, pid: Int32) {
        children[name]?.pid = pid
        children[name]?.announcedPid = nil
        children[name]?.paused = false
        LiveProcessGroups.shared.insert(pid)
        appendPid(name: name, pid: pid)
        events(.started(name: name, pid: pid, restarts: children[name]?.restarts ?? 0))
        changes.ring()
    }

    /// Records the exit; returns the back-off before a restart, or nil to end the loop.
    private func didExit(_ name: String, _ exit: ChildExit) -> Duration? {
        guard var child = children[name] else { return nil }
        if let pid = child.pid { LiveProcessGroups.shared.remove(pid) }
        child.pid = nil
        child.paused = false
        child.lastExit = exit
        let expected = child.desired == .down
        events(.exited(name: name, exit: exit, expected: expected))
        defer {
            children[name] = child
            changes.ring()
        }
        if expected { return nil }
        // A clean exit 0 of a child nobody stopped (a drained node) is its job done.
        if exit == .exited(0) {
            child.desired = .down
            return nil
        }
        guard child.restarts < child.spec.restartBudget else {
            child.gaveUp = true
            child.desired = .down
            events(.gaveUp(name: name, restarts: child.restarts))
            return nil
        }
        child.restarts += 1
        return .milliseconds(min(2000, 200 * child.restarts))
    }

    private nonisolated func launchOnce(_ spec: ChildSpec) async -> ChildExit {
        let name = spec.name
        let errorPath = run.logFile(process: name)
        let outputPath = run.outputFile(process: name)
        let errorDescriptor: FileDescriptor
        do {
            errorDescriptor = try FileDescriptor.open(
                FilePath(errorPath), .writeOnly, options: [.append, .create], permissions: [.ownerReadWrite, .groupRead, .otherRead])
        } catch {
            return .failedToStart("cannot open \(errorPath): \(error)")
        }
        guard let output = Self.appendingHandle(outputPath) else {
            try? errorDescriptor.close()
            return .failedToStart("cannot open \(outputPath)")
        }
        defer { try? output.close() }
        var options = PlatformOptions()
        options.processGroupID = 0  // a group of its own, led by the child
        // A node host's child: its launch prefix runs the host's signfleet with the arguments.
        let program = spec.executable ?? executable
        let argv = spec.launchPrefix.isEmpty ? [program] + spec.arguments : spec.launchPrefix + [program] + spec.arguments
        do {
            let result = try await Subprocess.run(
                HostCommand.executable(argv[0]),
                arguments: Arguments(Array(argv.dropFirst())),
                environment: .inherit.updating(Self.childEnvironment(spec)),
                platformOptions: options,
                input: .none,
                output: .sequence,
                error: .fileDescriptor(errorDescriptor, closeAfterSpawningProcess: true)
            ) { execution in
                await self.didStart(name, pid: execution.processIdentifier.value)
                for try await line in execution.standardOutput.strings() {
                    output.write(Data((line + "\n").utf8))
                    if spec.remoteSignals, let pid = Self.announcedPid(in: line) { await self.setAnnouncedPid(name, pid) }
                    self.events(.line(name: name, text: line))
                }
            }
            switch result.terminationStatus {
            case .exited(let code): return .exited(code)
            case .signaled(let signal): return .signaled(signal)
            }
        } catch {
            // The child may have started and its output failed; make sure it is gone.
            if let pid = await self.pid(of: name) { _ = Glibc.kill(-pid, SIGKILL) }
            return .failedToStart("\(error)")
        }
    }

    /// The `N` of a `node started … pid=N` line.
    static func announcedPid(in line: String) -> Int32? {
        guard line.hasPrefix("node started "), let field = line.split(separator: " ").last(where: { $0.hasPrefix("pid=") }) else { return nil }
        guard let pid = Int32(field.dropFirst(4)), pid > 1 else { return nil }
        return pid
    }

    private func setAnnouncedPid(_ name: String, _ pid: Int32) {
        children[name]?.announcedPid = pid
        // `<name>@remote <pid>`: the pid on the node host, apart from the launch command's local one.
        appendPid(name: "\(name)@remote", pid: pid)
        changes.ring()  // a child with remote signals is running once its pid is announced
    }

    private func appendPid(name: String, pid: Int32) {
        guard let handle = Self.appendingHandle(pidsFile) else { return }
        handle.write(Data("\(name) \(pid)\n".utf8))
        try? handle.close()
    }

    private static func appendingHandle(_ path: String) -> FileHandle? {
        if !FileManager.default.fileExists(atPath: path) {
            guard FileManager.default.createFile(atPath: path, contents: nil) else { return nil }
        }
        guard let handle = FileHandle(forWritingAtPath: path) else { return nil }
        handle.seekToEndOfFile()
        return handle
    }

    /// Waits until the child has a running process (after a start or restart), and, with
    /// ``ChildSpec/remoteSignals``, has announced its pid on its host; false after `timeout` or when
    /// its supervision loop ends without one.
    public func waitUntilRunning(_ name: String, within timeout: Duration) async -> Bool {
        await waitUntil(within: timeout) { supervisor in
            // With remote signals, only the announced pid can be signalled: a fault right after
            // the start (a pause after a kill's restart) needs it, not just the local launch command.
            if let child = supervisor.children[name], child.pid != nil, !child.spec.remoteSignals || child.announcedPid != nil { return true }
            return supervisor.children[name]?.loop == nil ? false : nil
        }
    }

    /// Waits until `name`'s supervision loop has ended; true if it did within `timeout`.
    private func waitForLoopEnd(_ name: String, within timeout: Duration) async -> Bool {
        await waitUntil(within: timeout) { supervisor in supervisor.children[name]?.loop == nil ? true : nil }
    }

    /// Waits for `decide` to answer (nil: not yet), checking it again each time a child starts or
    /// exits; false after `timeout`. Nothing polls: the timeout is one sleep on ``clock``.
    private func waitUntil(within timeout: Duration, _ decide: @escaping @Sendable (isolated Supervisor) -> Bool?) async -> Bool {
        if let answer = decide(self) { return answer }
        let clock = self.clock
        return await withTaskGroup(of: Bool?.self) { group in
            group.addTask { await self.untilDecided(decide) }
            group.addTask {
                try? await clock.sleep(for: timeout)
                return Task.isCancelled ? nil : false
            }
            var answer: Bool?
            while answer == nil, let next = await group.next() {
                answer = next
            }
            group.cancelAll()
            return answer ?? false
        }
    }

    /// `decide`'s answer once it has one (nil when the task is cancelled first).
    private func untilDecided(_ decide: @Sendable (isolated Supervisor) -> Bool?) async -> Bool? {
        while !Task.isCancelled {
            let seen = changes.generation
            if let answer = decide(self) { return answer }
            await changes.wait(after: seen)
        }
        return nil
    }

    /// What a child's environment adds to the supervisor's: its spec's, and the supervisor's pid.
    static func childEnvironment(_ spec: ChildSpec) -> [Environment.Key: String?] {
        var added: [Environment.Key: String?] = [:]
        for (name, value) in spec.environment { added[Environment.Key(stringLiteral: name)] = value }
        added["SIGNFLEET_PARENT_PID"] = "\(getpid())"
        return added
    }
}

/// The process groups of running children, for the last-resort teardown on a
/// signal or at exit (which cannot wait for the supervisor actor).
public final class LiveProcessGroups: Sendable {
    public static let shared = LiveProcessGroups()
    private let groups = Mutex<Set<Int32>>([])

    func insert(_ pid: Int32) { _ = groups.withLock { $0.insert(pid) } }
    func remove(_ pid: Int32) { _ = groups.withLock { $0.remove(pid) } }

    /// SIGCONT then SIGKILL to every live group, at once and synchronously.
    public func killAll() {
        let all = groups.withLock { $0 }
        for pid in all {
            _ = Glibc.kill(-pid, SIGCONT)
            _ = Glibc.kill(-pid, SIGKILL)
        }
    }
}
