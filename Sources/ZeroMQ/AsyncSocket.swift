import Synchronization

/// A socket owned by a ``ZMQIOLoop`` thread, used from any task.
///
/// Every call is a command executed on the loop's thread; nothing here blocks a thread of
/// the cooperative pool. Received messages arrive, in order, on ``messages``.
///
/// ```swift
/// let dealer = try await loop.makeSocket(.dealer, options: options)
/// try await dealer.connect(endpoint)
/// try await dealer.send([Array("ping".utf8)])
/// for try await reply in dealer.messages { print(reply) }
/// ```
public final class AsyncSocket: Sendable {
    /// The socket type.
    public let type: SocketType
    let id: Int
    // Strong: the loop (and its thread) must outlive every socket made through it.
    let loop: ZMQIOLoop
    let inbox: Inbox
    let sendWindow: SendWindow
    private let monitorStream: AsyncStream<MonitorEvent>
    private let closeRequested = Atomic<Bool>(false)

    init(loop: ZMQIOLoop, id: Int, type: SocketType, inbox: Inbox, sendWindow: SendWindow,
         monitorEvents: AsyncStream<MonitorEvent>) {
        self.sendWindow = sendWindow
        self.loop = loop
        self.id = id
        self.type = type
        self.inbox = inbox
        self.monitorStream = monitorEvents
    }

    deinit {
        if !closeRequested.load(ordering: .relaxed) {
            loop.shared.submit(.close(socket: id, reply: nil))
        }
    }

    private func endpointCommand(_ action: Command.EndpointAction, _ endpoint: String) async throws -> String {
        try await withCheckedThrowingContinuation { reply in
            loop.shared.submit(.endpoint(socket: id, action: action, endpoint: endpoint, reply: reply))
        }
    }

    /// Binds and returns the bound endpoint (`ZMQ_LAST_ENDPOINT`), so `tcp://127.0.0.1:*`
    /// gives back the port the system chose.
    /// - Throws: ``ZMQError`` (`EADDRINUSE`, `EINVAL` for a malformed endpoint, ...).
    @discardableResult
    public func bind(_ endpoint: String) async throws -> String {
        try await endpointCommand(.bind, endpoint)
    }

    /// Stops listening on `endpoint` (use the string ``bind(_:)`` returned).
    public func unbind(_ endpoint: String) async throws {
        _ = try await endpointCommand(.unbind, endpoint)
    }

    /// Connects; libzmq connects and reconnects in the background (see ``monitorEvents``).
    /// - Throws: ``ZMQError`` (`EINVAL` for a malformed endpoint, `EPROTONOSUPPORT`, ...).
    public func connect(_ endpoint: String) async throws {
        _ = try await endpointCommand(.connect, endpoint)
    }

    /// Drops the connection to `endpoint`.
    public func disconnect(_ endpoint: String) async throws {
        _ = try await endpointCommand(.disconnect, endpoint)
    }

    /// Sends a multipart message; for a ROUTER the first frame is the destination routing id.
    ///
    /// Messages go out in the order of the `send` calls. Within ``SocketOptions/sendWindow``
    /// `send` returns once the I/O thread has the message; otherwise it returns once libzmq has
    /// queued it, waiting (in order) while the peer's high-water mark is reached. Cancelling a
    /// waiting send withdraws the message if none of it was queued yet.
    /// - Throws: ``ZMQError`` (e.g. `EHOSTUNREACH` from a ROUTER with `routerMandatory`
    ///   for an unknown routing id, `ENOTSOCK` once closed, `ETERM` after the loop's
    ///   shutdown), or `CancellationError`.
    public func send(_ frames: [[UInt8]]) async throws {
        if closeRequested.load(ordering: .relaxed) { throw ZMQError.socketClosed("send") }
        if sendWindow.tryAcquire() {
            if loop.shared.submit(.send(socket: id, frames: frames, token: 0, reply: nil)) { return }
            sendWindow.release()
            throw ZMQError.loopClosed("send")
        }
        let token = loop.shared.nextSendToken()
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (reply: CheckedContinuation<Void, Error>) in
                loop.shared.submit(.send(socket: id, frames: frames, token: token, reply: reply))
            }
        } onCancel: {
            loop.shared.submit(.cancelSend(socket: id, token: token))
        }
    }

    /// Sends a multipart message now or not at all: never waits behind a full queue.
    ///
    /// For a ROUTER with `routerMandatory`, a destination whose high-water mark is reached gets
    /// nothing and this returns false at once; other destinations are not held up. Messages
    /// queued earlier by ``send(_:)`` that still wait are not waited for (only messages sent
    /// with this method keep their order among themselves).
    /// - Returns: false when the message was dropped because the destination's queue was full.
    /// - Throws: ``ZMQError`` as ``send(_:)`` (`EHOSTUNREACH` for an unknown routing id).
    public func sendOrDrop(_ frames: [[UInt8]]) async throws -> Bool {
        if closeRequested.load(ordering: .relaxed) { throw ZMQError.socketClosed("send") }
        return try await withCheckedThrowingContinuation { (reply: CheckedContinuation<Bool, Error>) in
            loop.shared.submit(.sendOrDrop(socket: id, frames: frames, reply: .waiting(reply)))
        }
    }

    /// ``sendOrDrop(_:)`` without waiting for the I/O thread: the sender goes on at once, and
    /// `outcome` gets what ``sendOrDrop(_:)`` would have returned or thrown. A server that answers
    /// from its receive loop uses it so that replying never holds up reading.
    /// - Parameters:
    ///   - frames: the message's frames, as for ``sendOrDrop(_:)``.
    ///   - outcome: called exactly once, on the loop's I/O thread (or on the caller's when the
    ///     socket is already closed): keep it short, and do not use the socket from it.
    public func sendOrDrop(_ frames: [[UInt8]], outcome: @escaping @Sendable (Result<Bool, ZMQError>) -> Void) {
        if closeRequested.load(ordering: .relaxed) {
            outcome(.failure(ZMQError.socketClosed("send")))
            return
        }
        loop.shared.submit(.sendOrDrop(socket: id, frames: frames, reply: .callback(outcome)))
    }

    /// Incoming multipart messages, in order; finishes when the socket closes.
    ///
    /// Iterate it from one task at a time. Unread messages are bounded by
    /// ``SocketOptions/receiveBufferLimit``; beyond that the socket is not read and
    /// libzmq's high-water marks push back on the sender.
    public var messages: AsyncThrowingStream<[[UInt8]], Error> {
        AsyncThrowingStream(unfolding: { [inbox] in try await inbox.next() })
    }

    /// The next incoming message, or `nil` once the socket has closed (the same queue as ``messages``).
    public func receive() async throws -> [[UInt8]]? {
        try await inbox.next()
    }

    /// Monitor events, when the socket was opened with ``SocketOptions/monitor``; otherwise an
    /// empty stream. Finishes when the socket closes. Iterate it from one task.
    public var monitorEvents: AsyncStream<MonitorEvent> { monitorStream }

    /// Messages received but not yet consumed.
    public var bufferedMessageCount: Int { inbox.count }

    /// The largest number of messages ever buffered at once (never above the receive buffer limit).
    public var peakBufferedMessageCount: Int { inbox.peak }

    /// Closes the socket on the I/O thread: ``messages`` finishes after the buffered
    /// messages, pending sends fail with `ENOTSOCK`. Idempotent.
    public func close() async {
        guard !closeRequested.exchange(true, ordering: .relaxed) else { return }
        await withCheckedContinuation { (reply: CheckedContinuation<Void, Never>) in
            loop.shared.submit(.close(socket: id, reply: reply))
        }
    }
}
