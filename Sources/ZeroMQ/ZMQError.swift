import CZeroMQ

/// An error reported by libzmq, or by this module when an operation cannot run
/// (the socket or I/O loop is already closed).
///
/// `errno` is the raw error number (`EHOSTUNREACH`, `EINVAL`, `ETERM`, ...) so callers
/// can branch on it; `message` is libzmq's `zmq_strerror` text for it unless this module
/// supplied a more specific explanation; `operation` names the call that failed.
///
/// ```swift
/// do { try await router.send([unknownID, payload]) }
/// catch let error as ZMQError where error.errno == EHOSTUNREACH { /* peer is gone */ }
/// ```
public struct ZMQError: Error, CustomStringConvertible, Sendable, Hashable {
    /// The error number (`zmq_errno()` at the time of the failure).
    public var errno: Int32
    /// Human-readable text, normally `zmq_strerror(errno)`.
    public var message: String
    /// The operation that failed, e.g. `"zmq_connect(tcp://nowhere)"`.
    public var operation: String

    /// Creates an error whose message is `zmq_strerror(errno)`.
    public init(errno: Int32, operation: String) {
        self.errno = errno
        self.message = String(cString: zmq_strerror(errno))
        self.operation = operation
    }

    /// Creates an error with an explicit message (used when the module itself refuses an operation).
    public init(errno: Int32, operation: String, message: String) {
        self.errno = errno
        self.message = message
        self.operation = operation
    }

    /// The error libzmq recorded for the calling thread's last failed call.
    static func last(_ operation: String) -> ZMQError {
        ZMQError(errno: zmq_errno(), operation: operation)
    }

    public var description: String {
        "\(operation) failed: \(message) (errno \(errno))"
    }

    /// The error every command gets once its socket has been closed.
    static func socketClosed(_ operation: String) -> ZMQError {
        ZMQError(errno: ENOTSOCK, operation: operation, message: "the socket is closed")
    }

    /// The error every command gets once its I/O loop has shut down.
    static func loopClosed(_ operation: String) -> ZMQError {
        ZMQError(errno: ETERM, operation: operation, message: "the ZeroMQ I/O loop has shut down")
    }
}
