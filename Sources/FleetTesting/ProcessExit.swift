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
        precondition(pidfdOpen != nil, "this C library has no pidfd_open (glibc 2.36 or later is needed)")
        var watched: [(pid: Int32, fd: Int32)] = []
        defer { for entry in watched { close(entry.fd) } }
        for pid in Set(pids) {
            guard let pidfdOpen else { break }
            let fd = pidfdOpen(pid, 0)
            if fd >= 0 { watched.append((pid, fd)) }  // ESRCH: already gone
        }
        let deadline = hangGuardClock.now.advanced(by: timeout)
        while !watched.isEmpty {
            let left = hangGuardClock.now.duration(to: deadline)
            guard left > .zero else { break }
            let milliseconds = Int32(clamping: left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000 + 1)
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
        return watched.map(\.pid)
    }
}
