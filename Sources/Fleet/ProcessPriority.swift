import FleetProtocol
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The scheduling priority of the current process: every thread of it, and so every thread it
/// starts later (a new thread inherits its creator's nice value).
///
/// A fleet's node processes stand for other machines. On one shared box they must not take the
/// coordinator's CPU: at 5,000 devices on 2 cores, node processes at the coordinator's priority
/// left it a sixth of the machine, its replies missed the devices' 1 s timeouts, and the retries
/// (new connections, new logins) fed the overload until nothing synced (docs/performance.md,
/// "The startup storm"). The launcher therefore runs them at a lower priority (`--node-nice`).
public enum ProcessPriority {
    /// The nice values a process may ask for here: 0 (unchanged) to 19 (the lowest).
    public static let range: ClosedRange<Int> = 0...19

    /// Sets every thread of this process to `niceness` with `setpriority(PRIO_PROCESS, tid, …)`.
    /// Lowering a priority needs no privilege.
    /// - Throws: ``ProcessPriorityError`` when `niceness` is outside ``range`` or a thread refused it.
    public static func lower(to niceness: Int) throws(ProcessPriorityError) {
        guard range.contains(niceness) else { throw .outOfRange(niceness) }
        #if os(Linux)
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        var threads = tasks.compactMap { id_t($0) }
        if threads.isEmpty { threads = [id_t(getpid())] }
        for thread in threads where setpriority(__priority_which_t(PRIO_PROCESS.rawValue), thread, Int32(niceness)) != 0 {
            let code = errno
            // A thread that ended since the listing is no failure.
            if code == ESRCH { continue }
            throw .refused(thread: Int(thread), errno: code)
        }
        #endif
    }

    /// Lowers every thread to `niceness` now and again every `interval`, until the task is
    /// cancelled: libdispatch on Linux gives each worker thread it starts the nice value of its
    /// queue's QoS (`-2` for GRDB's serial queues), whatever its creator's, so a lowered process
    /// would otherwise run its SQLite work above the coordinator.
    /// - Throws: ``ProcessPriorityError`` as ``lower(to:)``, from the first pass only.
    public static func keepLowered(
        to niceness: Int, every interval: Duration = .milliseconds(500), clock: any FleetClock = ContinuousClock()
    ) throws(ProcessPriorityError) -> Task<Void, Never> {
        try lower(to: niceness)
        return Task.detached(priority: .background) {
            while !Task.isCancelled {
                do { try await clock.sleep(for: interval) } catch { return }
                try? lower(to: niceness)
            }
        }
    }

}

public enum ProcessPriorityError: Error, CustomStringConvertible, Equatable {
    case outOfRange(Int)
    case refused(thread: Int, errno: Int32)

    public var description: String {
        switch self {
        case .outOfRange(let value): "a nice value must be \(ProcessPriority.range.lowerBound) to \(ProcessPriority.range.upperBound), not \(value)"
        case .refused(let thread, let code): "setpriority refused thread \(thread): \(String(cString: strerror(code)))"
        }
    }
}
