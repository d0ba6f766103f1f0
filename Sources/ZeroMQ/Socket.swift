import CZeroMQ

#if canImport(Glibc)
import Glibc
#endif

/// A libzmq socket for use by one thread.
///
/// ZeroMQ sockets are not thread-safe, so `Socket` is deliberately not `Sendable`: create,
/// use and close it on one thread (a test, a benchmark loop, or the thread of a
/// ``ZMQIOLoop``, which is how the rest of SignFleet reaches sockets through ``AsyncSocket``).
///
/// ```swift
/// let socket = try Socket(context: context, type: .dealer)
/// try socket.connect("tcp://127.0.0.1:5555")
/// _ = try socket.send(frames: [Array("hello".utf8)])
/// let reply = try socket.receive()
/// socket.close()
/// ```
public final class Socket {
    /// The socket type it was created with.
    public let type: SocketType
    // Keeps the context alive (zmq_ctx_term must not run while this socket is open).
    private let context: ZMQContext
    private var handle: UnsafeMutableRawPointer?
    /// ``SocketOptions/prependedProperty``, once applied.
    private var prependedProperty: String?

    /// Creates a socket in `context`.
    /// - Throws: ``ZMQError`` (e.g. `ETERM` when the context is shutting down).
    public init(context: ZMQContext, type: SocketType) throws(ZMQError) {
        guard let handle = zmq_socket(context.handle.pointer, type.rawValue) else {
            throw ZMQError.last("zmq_socket(\(type))")
        }
        self.type = type
        self.context = context
        self.handle = handle
    }

    deinit { close() }

    /// Whether ``close()`` has run.
    public var isClosed: Bool { handle == nil }

    /// The raw `void *`, for `zmq_pollitem_t`; `nil` once closed.
    var rawHandle: UnsafeMutableRawPointer? { handle }

    private func open(_ operation: @autoclosure () -> String) throws(ZMQError) -> UnsafeMutableRawPointer {
        guard let handle else { throw ZMQError.socketClosed(operation()) }
        return handle
    }

    /// Closes the socket (`zmq_close`). Idempotent: the handle is closed exactly once.
    public func close() {
        guard let handle else { return }
        self.handle = nil
        zmq_close(handle)
    }

    // MARK: Endpoints

    /// Binds to `endpoint` (`tcp://127.0.0.1:*` picks a free port; read it from ``lastEndpoint``).
    public func bind(_ endpoint: String) throws(ZMQError) {
        let socket = try open("zmq_bind(\(endpoint))")
        if zmq_bind(socket, endpoint) != 0 { throw ZMQError.last("zmq_bind(\(endpoint))") }
    }

    /// Stops listening on `endpoint` (as returned by ``lastEndpoint``).
    public func unbind(_ endpoint: String) throws(ZMQError) {
        let socket = try open("zmq_unbind(\(endpoint))")
        if zmq_unbind(socket, endpoint) != 0 { throw ZMQError.last("zmq_unbind(\(endpoint))") }
    }

    /// Connects to `endpoint`; libzmq connects (and reconnects) in the background.
    public func connect(_ endpoint: String) throws(ZMQError) {
        let socket = try open("zmq_connect(\(endpoint))")
        if zmq_connect(socket, endpoint) != 0 { throw ZMQError.last("zmq_connect(\(endpoint))") }
    }

    /// Drops the connection to `endpoint`.
    public func disconnect(_ endpoint: String) throws(ZMQError) {
        let socket = try open("zmq_disconnect(\(endpoint))")
        if zmq_disconnect(socket, endpoint) != 0 { throw ZMQError.last("zmq_disconnect(\(endpoint))") }
    }

    /// `ZMQ_LAST_ENDPOINT`: the endpoint of the last bind or connect, with the real port.
    public var lastEndpoint: String {
        get throws(ZMQError) { String(decoding: try bytesOption(ZMQ_LAST_ENDPOINT, capacity: 1024).prefix { $0 != 0 }, as: UTF8.self) }
    }

    // MARK: Messages

    /// Sends a multipart message.
    /// - Parameters:
    ///   - frames: the parts, in order; for a ROUTER the first is the destination routing id.
    ///   - dontWait: return `false` instead of blocking when the message cannot be queued.
    /// - Returns: `false` if `dontWait` was set and nothing was queued (`EAGAIN`).
    /// - Throws: ``ZMQError``, e.g. `EHOSTUNREACH` from a ROUTER with `ROUTER_MANDATORY`.
    @discardableResult
    public func send(frames: [[UInt8]], dontWait: Bool = false) throws(ZMQError) -> Bool {
        var next = try send(frames: frames, from: 0, dontWait: dontWait)
        if next == 0 { return frames.isEmpty }
        // libzmq admits the rest of a message once its first part is in, so finishing it never blocks.
        while next < frames.count { next = try send(frames: frames, from: next, dontWait: false) }
        return true
    }

    /// Sends `frames[start...]`, stopping at the first `EAGAIN`.
    /// - Returns: the index of the first frame not sent (`frames.count` when done).
    func send(frames: [[UInt8]], from start: Int, dontWait: Bool) throws(ZMQError) -> Int {
        let socket = try open("zmq_send")
        var index = start
        while index < frames.count {
            var flags: Int32 = dontWait ? ZMQ_DONTWAIT : 0
            if index + 1 < frames.count { flags |= ZMQ_SNDMORE }
            let rc = frames[index].withUnsafeBytes { zmq_send(socket, $0.baseAddress, $0.count, flags) }
            if rc < 0 {
                let error = zmq_errno()
                if error == EINTR { continue }
                if error == EAGAIN { return index }
                throw ZMQError(errno: error, operation: "zmq_send")
            }
            index += 1
        }
        return index
    }

    /// The file descriptor of the connection the last received message came from (libzmq's
    /// `ZMQ_SRCFD`; -1 when unknown): what ``cutConnection(descriptor:)`` takes.
    public private(set) var lastSourceDescriptor: Int32 = -1

    /// Shuts down (`shutdown(2)`, never `close`) the TCP connection with this descriptor: libzmq then
    /// sees it end and tears it down as if the peer had left. For a peer that must stop being read
    /// (a ROUTER cannot pause one of its pipes). Call it on the thread that received from it, at
    /// once: the descriptor is libzmq's, and only right after a message from it is it known to be that peer's.
    ///
    /// libzmq's own I/O thread may have closed the connection in between (the peer left) and the
    /// number been reused, by a listening socket among others: `shutdown` on a listener makes its
    /// next `accept` fail with `EINVAL`, which libzmq asserts on (the process aborts). So only a
    /// connected stream socket is shut down; a listener or anything else is left alone.
    public static func cutConnection(descriptor: Int32) {
        guard descriptor >= 0, isConnectedStream(descriptor) else { return }
        _ = Glibc.shutdown(descriptor, Int32(SHUT_RDWR))
    }

    /// Whether `descriptor` is a connected (not listening) stream socket.
    static func isConnectedStream(_ descriptor: Int32) -> Bool {
        var value: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(descriptor, SOL_SOCKET, SO_TYPE, &value, &length) == 0, value == Int32(SOCK_STREAM.rawValue) else { return false }
        length = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(descriptor, SOL_SOCKET, SO_ACCEPTCONN, &value, &length) == 0, value == 0 else { return false }
        var address = sockaddr_storage()
        length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        return withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(descriptor, $0, &length) == 0 }
        }
    }

    /// Receives one multipart message.
    /// - Parameter dontWait: return `nil` instead of blocking when no message is waiting.
    /// - Returns: the frames, or `nil` (only with `dontWait`) when none is waiting.
    public func receive(dontWait: Bool = false) throws(ZMQError) -> [[UInt8]]? {
        let socket = try open("zmq_msg_recv")
        var message = zmq_msg_t()
        zmq_msg_init(&message)
        defer { zmq_msg_close(&message) }
        var frames: [[UInt8]] = []
        var property: [UInt8]?
        while true {
            // Parts after the first are already queued (messages are atomic), so never wait for them.
            let flags: Int32 = (dontWait || !frames.isEmpty) ? ZMQ_DONTWAIT : 0
            if zmq_msg_recv(&message, socket, flags) < 0 {
                let error = zmq_errno()
                if error == EINTR { continue }
                if error == EAGAIN, frames.isEmpty { return nil }
                throw ZMQError(errno: error, operation: "zmq_msg_recv")
            }
            let size = zmq_msg_size(&message)
            let frame = [UInt8](unsafeUninitializedCapacity: size) { buffer, count in
                if size > 0, let data = zmq_msg_data(&message), let base = buffer.baseAddress {
                    base.update(from: data.assumingMemoryBound(to: UInt8.self), count: size)
                }
                count = size
            }
            frames.append(frame)
            // As with metadata below: a ROUTER's own routing-id frame has no source, the peer's frames do.
            if frames.count == 1 { lastSourceDescriptor = -1 }
            if lastSourceDescriptor < 0 { lastSourceDescriptor = zmq_msg_get(&message, ZMQ_SRCFD) }
            // Metadata rides on the frames read from the peer's pipe; a ROUTER's own routing-id
            // frame may have none, so every frame is asked until one answers.
            if let name = prependedProperty, property == nil, let value = zmq_msg_gets(&message, name) {
                property = Array(String(cString: value).utf8)
            }
            if zmq_msg_more(&message) == 0 {
                if prependedProperty != nil { frames.insert(property ?? [], at: 0) }
                return frames
            }
        }
    }

    // MARK: Options

    /// Sets an integer option (`ZMQ_SNDHWM`, `ZMQ_LINGER`, ...).
    public func setOption(_ option: Int32, _ value: Int32) throws(ZMQError) {
        var value = value
        try setOption(option, &value, MemoryLayout<Int32>.size)
    }

    /// Sets a 64-bit option (`ZMQ_MAXMSGSIZE`).
    public func setOption(_ option: Int32, _ value: Int64) throws(ZMQError) {
        var value = value
        try setOption(option, &value, MemoryLayout<Int64>.size)
    }

    /// Sets a binary option (`ZMQ_ROUTING_ID`).
    public func setOption(_ option: Int32, _ value: [UInt8]) throws(ZMQError) {
        let socket = try open("zmq_setsockopt(\(option))")
        let rc = value.withUnsafeBytes { zmq_setsockopt(socket, option, $0.baseAddress, $0.count) }
        if rc != 0 { throw ZMQError.last("zmq_setsockopt(\(option))") }
    }

    private func setOption(_ option: Int32, _ value: UnsafeRawPointer, _ size: Int) throws(ZMQError) {
        let socket = try open("zmq_setsockopt(\(option))")
        if zmq_setsockopt(socket, option, value, size) != 0 { throw ZMQError.last("zmq_setsockopt(\(option))") }
    }

    /// `ZMQ_FD`: a descriptor that turns readable when the socket may have news for
    /// ``currentEvents()`` (not necessarily a message). libzmq owns it.
    func signalDescriptor() throws(ZMQError) -> Int32 {
        try int32Option(ZMQ_FD)
    }

    /// `ZMQ_EVENTS`: whether a message can be received or sent now. Asking processes the
    /// socket's pending commands, which resets ``signalDescriptor()``.
    /// - Throws: ``ZMQError``: `ETERM` once the context is shutting down.
    func currentEvents() throws(ZMQError) -> Poller.Events {
        let socket = try open("zmq_getsockopt(ZMQ_EVENTS)")
        var value: Int32 = 0
        var size = MemoryLayout<Int32>.size
        if zmq_getsockopt(socket, ZMQ_EVENTS, &value, &size) != 0 { throw ZMQError.last("zmq_getsockopt(ZMQ_EVENTS)") }
        return Poller.Events(rawValue: Int16(truncatingIfNeeded: value))
    }

    /// Reads an integer option.
    public func int32Option(_ option: Int32) throws(ZMQError) -> Int32 {
        let socket = try open("zmq_getsockopt(\(option))")
        var value: Int32 = 0
        var size = MemoryLayout<Int32>.size
        if zmq_getsockopt(socket, option, &value, &size) != 0 { throw ZMQError.last("zmq_getsockopt(\(option))") }
        return value
    }

    /// Reads a 64-bit option.
    public func int64Option(_ option: Int32) throws(ZMQError) -> Int64 {
        let socket = try open("zmq_getsockopt(\(option))")
        var value: Int64 = 0
        var size = MemoryLayout<Int64>.size
        if zmq_getsockopt(socket, option, &value, &size) != 0 { throw ZMQError.last("zmq_getsockopt(\(option))") }
        return value
    }

    /// Reads a binary option of at most `capacity` bytes.
    public func bytesOption(_ option: Int32, capacity: Int = 256) throws(ZMQError) -> [UInt8] {
        let socket = try open("zmq_getsockopt(\(option))")
        var size = capacity
        var value = [UInt8](repeating: 0, count: capacity)
        let rc = value.withUnsafeMutableBytes { zmq_getsockopt(socket, option, $0.baseAddress, &size) }
        if rc != 0 { throw ZMQError.last("zmq_getsockopt(\(option))") }
        return Array(value.prefix(size))
    }

    /// Applies every option of `options` that is set.
    public func apply(_ options: SocketOptions) throws(ZMQError) {
        try setOption(ZMQ_SNDHWM, options.sendHighWaterMark)
        try setOption(ZMQ_RCVHWM, options.receiveHighWaterMark)
        try setOption(ZMQ_LINGER, options.linger)
        if let value = options.immediate { try setOption(ZMQ_IMMEDIATE, Int32(value ? 1 : 0)) }
        if let value = options.routerMandatory { try setOption(ZMQ_ROUTER_MANDATORY, Int32(value ? 1 : 0)) }
        if let value = options.routerHandover { try setOption(ZMQ_ROUTER_HANDOVER, Int32(value ? 1 : 0)) }
        if let value = options.maxMessageSize {
            try setOption(ZMQ_MAXMSGSIZE, options.curve == nil ? value : value + SocketOptions.curveFrameOverhead)
        }
        if let value = options.reconnectInterval { try setOption(ZMQ_RECONNECT_IVL, value.zmqMilliseconds) }
        if let value = options.reconnectIntervalMax { try setOption(ZMQ_RECONNECT_IVL_MAX, value.zmqMilliseconds) }
        if let value = options.heartbeatInterval { try setOption(ZMQ_HEARTBEAT_IVL, value.zmqMilliseconds) }
        if let value = options.heartbeatTimeout { try setOption(ZMQ_HEARTBEAT_TIMEOUT, value.zmqMilliseconds) }
        if let value = options.heartbeatTTL { try setOption(ZMQ_HEARTBEAT_TTL, value.zmqMilliseconds) }
        if let value = options.routingID { try setOption(ZMQ_ROUTING_ID, value) }
        switch options.curve {
        case .server(let secretKey):
            try setOption(ZMQ_CURVE_SERVER, Int32(1))
            try setOption(ZMQ_CURVE_SECRETKEY, secretKey)
        case .client(let serverKey, let keys):
            try setOption(ZMQ_CURVE_SERVERKEY, serverKey)
            try setOption(ZMQ_CURVE_PUBLICKEY, keys.publicKey)
            try setOption(ZMQ_CURVE_SECRETKEY, keys.secretKey)
        case nil:
            break
        }
        if let value = options.zapDomain { try setOption(ZMQ_ZAP_DOMAIN, Array(value.utf8)) }
        // ZMQ_ZAP_ENFORCE_DOMAIN is a draft constant in zmq.h (not exposed by Debian's build); the
        // library accepts it since 4.3.
        if let value = options.zapEnforceDomain { try setOption(93, Int32(value ? 1 : 0)) }
        prependedProperty = options.prependedProperty
    }

    // MARK: Monitor

    /// Starts publishing monitor events for `events` (a `ZMQ_EVENT_*` mask) to a PAIR
    /// socket bound at the inproc `endpoint`; `nil` stops monitoring.
    public func monitor(endpoint: String?, events: Int32 = ZMQ_EVENT_ALL) throws(ZMQError) {
        let socket = try open("zmq_socket_monitor")
        if zmq_socket_monitor(socket, endpoint, events) != 0 { throw ZMQError.last("zmq_socket_monitor") }
    }
}
