import FleetProtocol
import Foundation
import Synchronization

/// A real child process for multi-process tests: captures its output line by
/// line, lets a test wait for a line with a deadline (never a sleep), sends
/// signals, and kills the process if the test forgets to.
///
/// ```swift
/// let coordinator = try ChildProcess.launch(binary, ["coordinator", "--bind", "tcp://127.0.0.1:*"])
/// let line = try await coordinator.waitForLine(in: .standardOutput, timeout: .seconds(10)) { $0.hasPrefix("listening ") }
/// ```
public final class ChildProcess: Sendable {
    public enum Stream: Sendable { case standardOutput, standardError }

    /// A wait that ran out of time; its description carries the process's output so far.
    public struct TimeoutError: Error, CustomStringConvertible {
        public var what: String
        public var output: String
        public var description: String { "timed out waiting for \(what)\n--- output so far ---\n\(output)" }
    }

    private struct LineWaiter {
        var stream: Stream
        var predicate: @Sendable (String) -> Bool
        /// Matching lines still to see before the wait is over.
        var remaining: Int
        var continuation: CheckedContinuation<String?, Never>
    }

    private struct LineAction {
        var stream: Stream
        var predicate: @Sendable (String) -> Bool
        var remaining: Int
        var action: @Sendable () -> Void
    }

    private struct State {
        var lines: [Stream: [String]] = [.standardOutput: [], .standardError: []]
        var partial: [Stream: [UInt8]] = [.standardOutput: [], .standardError: []]
        /// Set once the process has exited AND both output streams reached end of file,
        /// so a test that saw the exit also sees every line the child wrote.
        var exitStatus: Int32?
        var terminationStatus: Int32?
        var closedStreams = 0
        var lineWaiters: [UUID: LineWaiter] = [:]
        var lineActions: [LineAction] = []
        var exitWaiters: [UUID: CheckedContinuation<Int32?, Never>] = [:]
        /// Threads blocked in ``runToCompletion(_:_:timeout:)``.
        var exitSemaphores: [DispatchSemaphore] = []
    }

    public let name: String
    /// The child's pid (valid once launched).
    public let processIdentifier: Int32
    private let state = Mutex(State())

    private init(name: String, pid: Int32) {
        self.name = name
        self.processIdentifier = pid
    }

    /// Starts `executable` (a path, or a name looked up in `PATH`) with `arguments`.
    ///
    /// Spawned with `posix_spawn`, not Foundation's `Process`: on Linux `Process.run()` over-reads
    /// `/proc/self/fd` directory entries and crashes now and then in busy test processes
    /// (swift-corelibs-foundation pull request 5472, in Swift 6.3.1). As `Process` does, the child
    /// gets default signal handling, an empty signal mask and no descriptor beyond 0, 1 and 2.
    ///
    /// With `ownProcessGroup` the child leads a process group of its own, so a signal to the
    /// caller's group (a terminal's Ctrl-C) does not reach it: the caller decides when it ends.
    public static func launch(
        _ executable: String, _ arguments: [String], name: String? = nil, environment: [String: String]? = nil,
        ownProcessGroup: Bool = false
    ) throws -> ChildProcess {
        var output: [Int32] = [-1, -1]
        var errors: [Int32] = [-1, -1]
        guard pipe(&output) == 0 else { throw LaunchError(executable: executable, errno: errno) }
        guard pipe(&errors) == 0 else {
            let failure = errno
            close(output[0])
            close(output[1])
            throw LaunchError(executable: executable, errno: failure)
        }
        // Not inherited by children that other threads spawn meanwhile (ours close them anyway).
        for descriptor in output + errors { _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, output[1], 1)
        posix_spawn_file_actions_adddup2(&actions, errors[1], 2)
        Self.closeFrom3(&actions)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var empty = sigset_t()
        sigemptyset(&empty)
        var all = sigset_t()
        sigfillset(&all)
        posix_spawnattr_setsigmask(&attributes, &empty)
        posix_spawnattr_setsigdefault(&attributes, &all)
        var flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF
        if ownProcessGroup {
            posix_spawnattr_setpgroup(&attributes, 0)
            flags |= POSIX_SPAWN_SETPGROUP
        }
        posix_spawnattr_setflags(&attributes, Int16(flags))

        let merged = ProcessInfo.processInfo.environment.merging(environment ?? [:]) { $1 }
        var argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        var envp: [UnsafeMutablePointer<CChar>?] = merged.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var pid: pid_t = 0
        let spawned = posix_spawnp(&pid, executable, &actions, &attributes, &argv, &envp)
        // The child has its copies; the parent keeps only the read ends.
        close(output[1])
        close(errors[1])
        guard spawned == 0 else {
            close(output[0])
            close(errors[0])
            throw LaunchError(executable: executable, errno: spawned)
        }
        let child = ChildProcess(name: name ?? arguments.first ?? executable, pid: pid)
        // Blocking reads on a thread per stream, and a thread that waits for the exit: nothing
        // here depends on a run loop or a dispatch source.
        for (descriptor, stream) in [(output[0], Stream.standardOutput), (errors[0], Stream.standardError)] {
            let thread = Thread { child.drain(descriptor, from: stream) }
            thread.name = "child-output"
            thread.start()
        }
        let waited = pid
        let waiter = Thread {
            let pid = waited
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
            // WIFEXITED / WEXITSTATUS by hand (the C macros are not imported); a signal's number
            // otherwise, as Foundation's terminationStatus reports it.
            let signal = status & 0x7F
            child.exited(signal == 0 ? (status >> 8) & 0xFF : signal)
        }
        waiter.name = "child-wait"
        waiter.start()
        return child
    }

    /// Adds glibc's `posix_spawn_file_actions_addclosefrom_np(actions, 3)` (glibc 2.34 and later; a
    /// GNU extension Swift does not import, so found at run time): the child starts with no
    /// descriptor of the test process beyond 0, 1 and 2. Without it (older C libraries) only
    /// close-on-exec descriptors are left behind.
    private static func closeFrom3(_ actions: inout posix_spawn_file_actions_t) {
        typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np") else { return }
        _ = unsafeBitCast(symbol, to: CloseFrom.self)(&actions, 3)
    }

    /// Runs a short tool to completion, blocking the calling thread (for synchronous test
    /// helpers; the wait needs no task of the cooperative pool). Kills it after `timeout`.
    /// - Returns: its exit status (a signal's number if one ended it) and each stream's text.
    public static func runToCompletion(
        _ executable: String, _ arguments: [String], environment: [String: String]? = nil, timeout: Duration = .seconds(120)
    ) throws -> (status: Int32, standardOutput: String, standardError: String) {
        let child = try launch(executable, arguments, environment: environment)
        let semaphore = DispatchSemaphore(value: 0)
        let done = child.state.withLock { state -> Bool in
            if state.exitStatus != nil { return true }
            state.exitSemaphores.append(semaphore)
            return false
        }
        if !done {
            let seconds = timeout.seconds
            if semaphore.wait(timeout: .now() + seconds) == .timedOut {
                child.signal(SIGKILL)
                semaphore.wait()
                throw TimeoutError(what: "\(executable) to exit", output: child.output)
            }
        }
        let status = child.state.withLock { $0.exitStatus ?? -1 }
        return (status, child.lines(.standardOutput).joined(separator: "\n"), child.lines(.standardError).joined(separator: "\n"))
    }

    /// Runs a short tool to completion without holding a thread: the form for `async` tests.
    /// ``runToCompletion(_:_:environment:timeout:)`` called from an `async` test blocks one of the
    /// cooperative pool's threads (two on a 2-core machine), so two slow tools at once (a
    /// PostgreSQL `initdb`, a `signfleet admin` waiting on its store) stall every other test in
    /// the process. Kills it after `timeout`.
    /// - Returns: its exit status (a signal's number if one ended it) and each stream's text.
    public static func run(
        _ executable: String, _ arguments: [String], environment: [String: String]? = nil, timeout: Duration = .seconds(120)
    ) async throws -> (status: Int32, standardOutput: String, standardError: String) {
        let child = try launch(executable, arguments, environment: environment)
        let status: Int32
        do {
            status = try await child.waitForExit(timeout: timeout)
        } catch {
            await child.terminate()
            throw error
        }
        return (status, child.lines(.standardOutput).joined(separator: "\n"), child.lines(.standardError).joined(separator: "\n"))
    }

    /// `posix_spawn` refused to start the child.
    public struct LaunchError: Error, CustomStringConvertible {
        public var executable: String
        public var errno: Int32
        public var description: String { "cannot start \(executable): \(String(cString: strerror(errno)))" }
    }

    /// Every complete line written so far to `stream`.
    public func lines(_ stream: Stream) -> [String] {
        state.withLock { $0.lines[stream] ?? [] }
    }

    /// Both streams, for failure messages.
    public var output: String {
        state.withLock { state in
            "[\(name) stdout]\n" + (state.lines[.standardOutput] ?? []).joined(separator: "\n") + "\n[\(name) stderr]\n"
                + (state.lines[.standardError] ?? []).joined(separator: "\n")
        }
    }

    /// Waits until a line of `stream` (already written or still to come) satisfies `predicate`.
    /// - Throws: ``TimeoutError`` after `timeout`, or when the process exits first.
    @discardableResult
    public func waitForLine(
        in stream: Stream = .standardError, timeout: Duration, where predicate: @escaping @Sendable (String) -> Bool
    ) async throws -> String {
        try await waitForLines(1, in: stream, timeout: timeout, where: predicate)
    }

    /// Waits until `count` lines of `stream` in all satisfy `predicate`; returns the last of them.
    /// - Throws: ``TimeoutError`` after `timeout`, or when the process exits first.
    @discardableResult
    public func waitForLines(
        _ count: Int, in stream: Stream = .standardError, timeout: Duration,
        where predicate: @escaping @Sendable (String) -> Bool
    ) async throws -> String {
        let id = UUID()
        let found: String? = await withTaskGroup(of: String?.self) { group in
            group.addTask {
                await withCheckedContinuation { continuation in
                    let immediate: String?? = self.state.withLock { state in
                        let matches = (state.lines[stream] ?? []).filter(predicate)
                        if matches.count >= count { return .some(matches.last) }
                        if state.exitStatus != nil { return .some(nil) }
                        state.lineWaiters[id] = LineWaiter(
                            stream: stream, predicate: predicate, remaining: count - matches.count, continuation: continuation)
                        return nil
                    }
                    if let immediate { continuation.resume(returning: immediate) }
                }
            }
            group.addTask {
                try? await hangGuardClock.sleep(for: timeout)
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            self.resumeLineWaiter(id, with: nil)
            return first
        }
        guard let found else { throw TimeoutError(what: "\(count) matching line(s) from \(name)", output: output) }
        return found
    }

    /// Runs `action` as soon as `count` lines of `stream` in all satisfy `predicate` (at once
    /// when they already have), on the thread that reads the child's output, not on the
    /// cooperative pool. So a test can act on another process at a point in this child's
    /// progress (kill a coordinator after the third sync, say) even while the test's own tasks
    /// are held up by the rest of the suite; the child cannot run far ahead of the action.
    /// `action` must be quick and must not wait on Swift concurrency.
    public func onLines(
        _ count: Int, in stream: Stream = .standardError, where predicate: @escaping @Sendable (String) -> Bool,
        perform action: @escaping @Sendable () -> Void
    ) {
        let now: Bool = state.withLock { state in
            let seen = (state.lines[stream] ?? []).filter(predicate).count
            if seen >= count { return true }
            state.lineActions.append(LineAction(stream: stream, predicate: predicate, remaining: count - seen, action: action))
            return false
        }
        if now { action() }
    }

    /// How many lines of `stream` satisfy `predicate` so far.
    public func count(in stream: Stream = .standardError, where predicate: (String) -> Bool) -> Int {
        lines(stream).filter(predicate).count
    }

    /// Sends a signal (SIGTERM, SIGKILL, SIGSTOP, ...).
    public func signal(_ number: Int32) {
        if isRunning { kill(processIdentifier, number) }
    }

    public var isRunning: Bool { state.withLock { $0.terminationStatus == nil } }

    /// Waits for the process to exit and returns its status.
    /// - Throws: ``TimeoutError`` when it is still running after `timeout`.
    @discardableResult
    public func waitForExit(timeout: Duration) async throws -> Int32 {
        let id = UUID()
        let status: Int32? = await withTaskGroup(of: Int32?.self) { group in
            group.addTask {
                await withCheckedContinuation { continuation in
                    let done: Int32? = self.state.withLock { state in
                        if let status = state.exitStatus { return status }
                        state.exitWaiters[id] = continuation
                        return nil
                    }
                    if let done { continuation.resume(returning: done) }
                }
            }
            group.addTask {
                try? await hangGuardClock.sleep(for: timeout)
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            let waiter = self.state.withLock { $0.exitWaiters.removeValue(forKey: id) }
            waiter?.resume(returning: nil)
            return first
        }
        guard let status else { throw TimeoutError(what: "\(name) to exit", output: output) }
        return status
    }

    /// Kills the process (SIGKILL) and waits for it; safe to call more than once.
    public func terminate() async {
        signal(SIGCONT)
        signal(SIGKILL)
        _ = try? await waitForExit(timeout: .seconds(10))
    }

    deinit {
        // The pid is reaped by the waiter thread only; until then it cannot be reused.
        if isRunning { kill(processIdentifier, SIGKILL) }
    }

    /// Reads `descriptor` until end of file (the child closed it, normally by exiting), then closes it.
    private func drain(_ descriptor: Int32, from stream: Stream) {
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count > 0 {
                consume(Data(buffer[0..<count]), from: stream)
            } else if count < 0 && errno == EINTR {
                continue
            } else {
                break
            }
        }
        close(descriptor)
        // A last line without its newline is still a line.
        if state.withLock({ !($0.partial[stream] ?? []).isEmpty }) { consume(Data([UInt8(ascii: "\n")]), from: stream) }
        streamClosed()
    }

    private func consume(_ data: Data, from stream: Stream) {
        guard !data.isEmpty else { return }
        var ready: [CheckedContinuation<String?, Never>] = []
        var readyLines: [String] = []
        var actions: [@Sendable () -> Void] = []
        state.withLock { state in
            var buffer = state.partial[stream] ?? []
            buffer.append(contentsOf: data)
            while let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: buffer[..<newline], as: UTF8.self)
                buffer.removeSubrange(...newline)
                state.lines[stream, default: []].append(line)
                for (id, var waiter) in state.lineWaiters where waiter.stream == stream && waiter.predicate(line) {
                    waiter.remaining -= 1
                    if waiter.remaining > 0 {
                        state.lineWaiters[id] = waiter
                    } else {
                        state.lineWaiters[id] = nil
                        ready.append(waiter.continuation)
                        readyLines.append(line)
                    }
                }
                state.lineActions = state.lineActions.compactMap { pending in
                    guard pending.stream == stream, pending.predicate(line) else { return pending }
                    var pending = pending
                    pending.remaining -= 1
                    if pending.remaining > 0 { return pending }
                    actions.append(pending.action)
                    return nil
                }
            }
            state.partial[stream] = buffer
        }
        for action in actions { action() }
        for (continuation, line) in zip(ready, readyLines) { continuation.resume(returning: line) }
    }

    private func exited(_ status: Int32) {
        finish { $0.terminationStatus = status }
    }

    private func streamClosed() {
        finish { $0.closedStreams += 1 }
    }

    /// Applies `change`, then ends every wait once the exit and both ends of file are in.
    private func finish(_ change: (inout State) -> Void) {
        let (lineWaiters, exitWaiters, status): ([LineWaiter], [CheckedContinuation<Int32?, Never>], Int32?) = state.withLock { state in
            change(&state)
            guard state.exitStatus == nil, let status = state.terminationStatus, state.closedStreams >= 2 else { return ([], [], nil) }
            state.exitStatus = status
            let waiters = (Array(state.lineWaiters.values), Array(state.exitWaiters.values), status)
            state.lineWaiters = [:]
            state.exitWaiters = [:]
            for semaphore in state.exitSemaphores { semaphore.signal() }
            state.exitSemaphores = []
            return waiters
        }
        for waiter in lineWaiters { waiter.continuation.resume(returning: nil) }
        for waiter in exitWaiters { waiter.resume(returning: status) }
    }

    private func resumeLineWaiter(_ id: UUID, with value: String?) {
        let waiter = state.withLock { $0.lineWaiters.removeValue(forKey: id) }
        waiter?.continuation.resume(returning: value)
    }
}
