import CZeroMQ

/// `zmq_poll` over sockets and raw file descriptors, for use by one thread.
///
/// ```swift
/// let poller = Poller()
/// let routerIndex = poller.register(router, events: .readable)
/// let wakeIndex = poller.register(fd: wakeFD, events: .readable)
/// if try poller.poll(timeoutMilliseconds: 100) > 0, poller.returnedEvents(at: routerIndex).contains(.readable) { ... }
/// ```
public final class Poller {
    /// Poll events (`ZMQ_POLLIN`, `ZMQ_POLLOUT`, `ZMQ_POLLERR`).
    public struct Events: OptionSet, Sendable, Hashable {
        public var rawValue: Int16
        public init(rawValue: Int16) { self.rawValue = rawValue }
        public static let readable = Events(rawValue: Int16(ZMQ_POLLIN))
        public static let writable = Events(rawValue: Int16(ZMQ_POLLOUT))
        public static let error = Events(rawValue: Int16(ZMQ_POLLERR))
    }

    private var items: [zmq_pollitem_t] = []
    // Keeps registered sockets alive while their raw handles sit in `items`.
    private var sockets: [Socket?] = []

    public init() {}

    /// The number of registered items.
    public var count: Int { items.count }

    /// Registers `socket`; returns its index.
    @discardableResult
    public func register(_ socket: Socket, events: Events) -> Int {
        items.append(zmq_pollitem_t(socket: socket.rawHandle, fd: -1, events: events.rawValue, revents: 0))
        sockets.append(socket)
        return items.count - 1
    }

    /// Registers a file descriptor (a pipe, an eventfd, a TCP socket); returns its index.
    @discardableResult
    public func register(fd: Int32, events: Events) -> Int {
        items.append(zmq_pollitem_t(socket: nil, fd: fd, events: events.rawValue, revents: 0))
        sockets.append(nil)
        return items.count - 1
    }

    /// Changes the events polled for the item at `index`.
    public func setEvents(_ events: Events, at index: Int) {
        items[index].events = events.rawValue
    }

    /// Forgets every registration.
    public func removeAll() {
        items.removeAll(keepingCapacity: true)
        sockets.removeAll(keepingCapacity: true)
    }

    /// Waits until an item is ready or the timeout passes.
    /// - Parameter timeoutMilliseconds: `-1` waits forever, `0` returns at once.
    /// - Returns: the number of ready items (0 on timeout or `EINTR`).
    /// - Throws: ``ZMQError``, e.g. `ETERM` when the context is shutting down.
    @discardableResult
    public func poll(timeoutMilliseconds: Int) throws(ZMQError) -> Int {
        let rc = items.withUnsafeMutableBufferPointer { zmq_poll($0.baseAddress, Int32($0.count), timeoutMilliseconds) }
        if rc < 0 {
            let error = zmq_errno()
            if error == EINTR { return 0 }
            throw ZMQError(errno: error, operation: "zmq_poll")
        }
        return Int(rc)
    }

    /// The events reported for the item at `index` by the last ``poll(timeoutMilliseconds:)``.
    public func returnedEvents(at index: Int) -> Events {
        Events(rawValue: items[index].revents)
    }
}
