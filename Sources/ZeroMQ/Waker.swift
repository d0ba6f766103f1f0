import CZeroMQ

#if canImport(Glibc)
import Glibc

// eventfd and the thread-name call come through CZeroMQ's shim.h, because
// Glibc's module map leaves them out.
private func systemEventFD(_ initialValue: UInt32, _ flags: Int32) -> Int32 {
    signfleet_eventfd(initialValue, flags)
}
#elseif canImport(Darwin)
import Darwin
#endif

/// Names the calling thread (shown by `top -H` and debuggers; Linux keeps 15 bytes).
func nameCurrentThread(_ name: String) {
    var bytes = Array(name.utf8.prefix(15)).map { CChar(bitPattern: $0) }
    bytes.append(0)
    #if canImport(Glibc)
    _ = signfleet_set_thread_name(bytes)
    #elseif canImport(Darwin)
    _ = pthread_setname_np(bytes)
    #endif
}

/// An identifier of the calling thread, for "is this the I/O thread?" checks.
func currentThreadID() -> UInt {
    #if canImport(Glibc)
    UInt(pthread_self())
    #else
    UInt(bitPattern: pthread_self())
    #endif
}

/// Wakes the I/O thread out of `epoll_wait`: a Linux eventfd (a pipe elsewhere) in its
/// readiness set beside the sockets' descriptors. Writes come from any thread; only the I/O thread reads and closes it.
struct Waker: Sendable {
    /// The fd the I/O thread polls for readability.
    let readFD: Int32
    private let writeFD: Int32

    init() throws(ZMQError) {
        #if canImport(Glibc)
        // EFD_NONBLOCK and EFD_CLOEXEC share their values with O_NONBLOCK and O_CLOEXEC on Linux.
        let fd = systemEventFD(0, Int32(O_NONBLOCK | O_CLOEXEC))
        if fd < 0 { throw ZMQError(errno: errno, operation: "eventfd") }
        readFD = fd
        writeFD = fd
        #else
        var fds: [Int32] = [0, 0]
        if pipe(&fds) != 0 { throw ZMQError(errno: errno, operation: "pipe") }
        for fd in fds { _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) }
        readFD = fds[0]
        writeFD = fds[1]
        #endif
    }

    /// Makes `readFD` readable. Never blocks: a full counter or pipe already means "awake".
    func wake() {
        var one: UInt64 = 1
        _ = write(writeFD, &one, MemoryLayout<UInt64>.size)
    }

    /// Resets `readFD` to not readable (I/O thread only).
    func drain() {
        var buffer: UInt64 = 0
        while read(readFD, &buffer, MemoryLayout<UInt64>.size) > 0 {}
    }

    /// Closes the descriptors (I/O thread only, once, as it exits).
    func close() {
        #if canImport(Glibc)
        _ = Glibc.close(readFD)
        #else
        _ = Darwin.close(readFD)
        _ = Darwin.close(writeFD)
        #endif
    }
}
