import CZeroMQ
import Synchronization

/// A libzmq context: the owner of libzmq's own I/O threads and the factory of sockets.
///
/// libzmq documents its context as thread-safe, so one `ZMQContext` is shared by every
/// thread and I/O loop of a process. Terminate it with ``shutdown()`` after closing the
/// sockets (``ZMQIOLoop/shutdown()`` does that for the sockets it owns).
///
/// ```swift
/// let context = try ZMQContext()
/// let loop = try ZMQIOLoop(context: context)
/// // ...
/// await loop.shutdown()
/// context.shutdown()
/// ```
public final class ZMQContext: Sendable {
    /// The `void *` context kept as its bit pattern: the pointer itself is not `Sendable`,
    /// but libzmq allows a context to be used from any thread.
    let handle: RawHandle
    private let terminated = Mutex(false)
    /// The context's ZAP handler (one per context, as libzmq allows), shared by every socket
    /// with a ``SocketOptions/zapDomain``.
    public let zap = ZAPHandler()

    /// Creates a context.
    /// - Parameters:
    ///   - ioThreads: the number of libzmq background I/O threads (`ZMQ_IO_THREADS`).
    ///   - maxSockets: the most sockets the context may hold (`ZMQ_MAX_SOCKETS`; libzmq's
    ///     default is 1023, too few for a node hosting a thousand devices).
    /// - Throws: ``ZMQError`` when libzmq cannot create the context.
    public init(ioThreads: Int = 1, maxSockets: Int? = nil) throws(ZMQError) {
        guard let pointer = zmq_ctx_new() else { throw ZMQError.last("zmq_ctx_new") }
        if zmq_ctx_set(pointer, ZMQ_IO_THREADS, Int32(clamping: ioThreads)) != 0 {
            let error = ZMQError.last("zmq_ctx_set(ZMQ_IO_THREADS)")
            zmq_ctx_term(pointer)
            throw error
        }
        if let maxSockets, zmq_ctx_set(pointer, ZMQ_MAX_SOCKETS, Int32(clamping: maxSockets)) != 0 {
            let error = ZMQError.last("zmq_ctx_set(ZMQ_MAX_SOCKETS)")
            zmq_ctx_term(pointer)
            throw error
        }
        handle = RawHandle(pointer)
    }

    /// Whether ``shutdown()`` has run.
    public var isTerminated: Bool { terminated.withLock { $0 } }

    /// Shuts the context down (`zmq_ctx_shutdown`, then `zmq_ctx_term`). Idempotent.
    ///
    /// `zmq_ctx_term` waits until every socket of the context is closed; sockets opened
    /// with `LINGER 0` drop their queued messages, so once the sockets are closed this
    /// returns at once. Blocked calls on still-open sockets fail with `ETERM`, which makes
    /// a running ``ZMQIOLoop`` close its sockets and stop.
    public func shutdown() {
        let first = terminated.withLock { done in
            if done { return false }
            done = true
            return true
        }
        guard first else { return }
        zmq_ctx_shutdown(handle.pointer)
        while zmq_ctx_term(handle.pointer) != 0, zmq_errno() == EINTR {}
    }

    deinit { shutdown() }
}

/// A C pointer stored as its bit pattern so that it can live in `Sendable` types.
/// Who may dereference it is documented where it is stored.
struct RawHandle: Sendable, Hashable {
    let bits: UInt
    init(_ pointer: UnsafeMutableRawPointer) { bits = UInt(bitPattern: pointer) }
    var pointer: UnsafeMutableRawPointer? { UnsafeMutableRawPointer(bitPattern: bits) }
}
