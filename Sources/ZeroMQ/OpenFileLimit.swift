#if canImport(Glibc)
import Glibc
#endif

/// The process's open-file limit. Every ZeroMQ connection holds a descriptor (a device node holds
/// one per online device, a coordinator one per connected peer), so processes that expect many
/// raise the soft limit to the hard one before they open sockets.
public enum OpenFileLimit {
    /// Raises the soft limit of open files to the hard limit; returns the soft limit now in force
    /// (0 where the platform has no `RLIMIT_NOFILE`).
    @discardableResult
    public static func raiseToHardLimit() -> UInt64 {
        #if canImport(Glibc)
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 0 }
        if limit.rlim_cur < limit.rlim_max {
            limit.rlim_cur = limit.rlim_max
            _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
            _ = getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        }
        return UInt64(limit.rlim_cur)
        #else
        return 0
        #endif
    }
}
