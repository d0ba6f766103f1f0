import CZeroMQ

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The file descriptors the I/O thread sleeps on, each with a key: the waker's eventfd and every
/// socket's `ZMQ_FD`. A wait costs in proportion to the descriptors that are ready, not to all
/// of them (epoll on Linux), which is what lets one thread hold hundreds of device sockets:
/// `zmq_poll` over 500 items made the `node-io` thread 42% of a 200-device node's CPU.
///
/// A `ZMQ_FD` being readable only means "ask `ZMQ_EVENTS`"; the I/O loop does that
/// (``IOWorker``). Registrations are level-triggered, so a signal libzmq left pending (its
/// `send`/`recv` may skip command processing for a while) wakes the thread again rather than
/// being lost. For use by one thread: ``ZMQIOLoop`` makes only the descriptor
/// (``makeDescriptor()``, so a failure reaches its caller) and the I/O thread wraps it.
final class ReadinessSet {
    private let descriptor: Int32
    /// Keys of the descriptors one wait reports, at most this many (the C shim's own limit).
    private static let capacity: Int32 = 256
    private var keys = [UInt64](repeating: 0, count: Int(capacity))
    #if !os(Linux)
    /// poll(2) fallback where epoll does not exist: fd → key.
    private var registered: [Int32: UInt64] = [:]
    #endif

    /// A new epoll descriptor (-1 where poll(2) stands in for it).
    static func makeDescriptor() throws(ZMQError) -> Int32 {
        #if os(Linux)
        let descriptor = signfleet_epoll_create()
        if descriptor < 0 { throw ZMQError(errno: errno, operation: "epoll_create1") }
        return descriptor
        #else
        return -1
        #endif
    }

    /// Takes ownership of `descriptor` (from ``makeDescriptor()``); ``close()`` closes it.
    init(descriptor: Int32) {
        self.descriptor = descriptor
    }

    /// Watches `fd` for readability, reporting it as `key`.
    func add(_ fd: Int32, key: UInt64) throws(ZMQError) {
        #if os(Linux)
        if signfleet_epoll_add(descriptor, fd, key) != 0 { throw ZMQError(errno: errno, operation: "epoll_ctl(ADD)") }
        #else
        registered[fd] = key
        #endif
    }

    /// Stops watching `fd` (before the socket that owns it is closed).
    func remove(_ fd: Int32) {
        #if os(Linux)
        _ = signfleet_epoll_remove(descriptor, fd)
        #else
        registered[fd] = nil
        #endif
    }

    /// Waits until a descriptor is readable or `timeoutMilliseconds` pass (`-1`: no limit, `0`:
    /// just look); calls `ready` with the key of each readable one (at most 256 per call).
    func wait(timeoutMilliseconds: Int, _ ready: (UInt64) -> Void) throws(ZMQError) {
        let timeout = Int32(clamping: timeoutMilliseconds)
        #if os(Linux)
        let count = keys.withUnsafeMutableBufferPointer {
            signfleet_epoll_wait(descriptor, $0.baseAddress, Self.capacity, timeout)
        }
        if count < 0 {
            if errno == EINTR { return }
            throw ZMQError(errno: errno, operation: "epoll_wait")
        }
        for index in 0..<Int(count) { ready(keys[index]) }
        #else
        var items = registered.map { pollfd(fd: $0.key, events: Int16(POLLIN), revents: 0) }
        let count = poll(&items, nfds_t(items.count), timeout)
        if count < 0 {
            if errno == EINTR { return }
            throw ZMQError(errno: errno, operation: "poll")
        }
        for item in items where item.revents != 0 { if let key = registered[item.fd] { ready(key) } }
        #endif
    }

    /// Closes the epoll descriptor (I/O thread only, once, as it exits).
    func close() {
        #if os(Linux)
        _ = Glibc.close(descriptor)
        #endif
    }
}
