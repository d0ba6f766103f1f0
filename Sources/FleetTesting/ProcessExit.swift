#if canImport(Glibc)
import Glibc
#endif
import Dispatch

/// Waits for processes that are not the test's children (a launcher's grandchildren) to end,
/// on the kernel's exit notification (`pidfd_open` + `poll`), not by polling `/proc`.
public enum ProcessExit {
    /// The pids of `pids` still running after `timeout` (empty: all ended). A pid that ended
    /// before the call, or whose process is a zombie, counts as ended.
    public static func waitUntilGone(_ pids: [Int32], within timeout: Duration) async -> [Int32] {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(returning: blockUntilGone(pids, within: timeout))
            }
        }
    }

    /// glibc's `pidfd_open` (2.36 and later; Linux 5.3 and later), looked up at run time
    /// because Swift's Glibc module does not export `<sys/pidfd.h>`.
    private static let pidfdOpen: (@convention(c) (pid_t, UInt32) -> Int32)? = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "pidfd_open") else { return nil }
        return unsafeBitCast(symbol, to: (@convention(c) (pid_t, UInt32) -> Int32).self)
    }()

    private static func blockUntilGone(_ pids: [Int32], within timeout: Duration) -> [Int32] {
        guard let pidfdOpen else { return pollUntilGone(pids, within: timeout) }
        var watched: [(pid: Int32, fd: Int32)] = []
        var unwatched: [Int32] = []
        defer { for entry in watched { close(entry.fd) } }
        for pid in Set(pids) {
            let fd = pidfdOpen(pid, 0)
            if fd >= 0 {
                watched.append((pid, fd))
            } else if errno != ESRCH {
                unwatched.append(pid)  // could not watch it (out of descriptors, not permitted): ask
            }  // ESRCH: already gone
        }
        let deadline = hangGuardClock.now.advanced(by: timeout)
        while !watched.isEmpty {
            let left = hangGuardClock.now.duration(to: deadline)
            guard left > .zero else { break }
            let milliseconds = Int32(clamping: min(left, .seconds(86_400)).components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000 + 1)
            var fds = watched.map { pollfd(fd: $0.fd, events: Int16(POLLIN), revents: 0) }
            let ready = fds.withUnsafeMutableBufferPointer { poll($0.baseAddress, nfds_t($0.count), milliseconds) }
            if ready < 0 {
                if errno == EINTR { continue }
                break
            }
            // A pidfd is readable once its process has exited.
            for index in fds.indices.reversed() where fds[index].revents != 0 {
                close(watched[index].fd)
                watched.remove(at: index)
            }
        }
        return watched.map(\.pid) + pollUntilGone(unwatched, within: hangGuardClock.now.duration(to: deadline))
    }

    /// Without pidfds (glibc before 2.36): asks `kill(pid, 0)` every 20 ms. A fallback only.
    private static func pollUntilGone(_ pids: [Int32], within timeout: Duration) -> [Int32] {
        let deadline = hangGuardClock.now.advanced(by: max(.zero, timeout))
        var alive = pids.filter { kill($0, 0) == 0 }
        while !alive.isEmpty, hangGuardClock.now < deadline {
            usleep(20_000)
            alive = alive.filter { kill($0, 0) == 0 }
        }
        return alive
    }
}
