import CZeroMQ

/// A socket monitor event (`zmq_socket_monitor`), published on ``AsyncSocket/monitorEvents``
/// when ``SocketOptions/monitor`` is set.
///
/// `value` carries the event's 32-bit argument: the file descriptor for `connected`,
/// `accepted`, `listening`, `closed` and `disconnected`, the reconnect interval in
/// milliseconds for `connectRetried`, an errno for the `...Failed` events, or a ZMTP
/// failure code for the handshake events.
public struct MonitorEvent: Sendable, Hashable, CustomStringConvertible {
    /// What happened.
    public enum Kind: Sendable, Hashable {
        case connected, connectDelayed, connectRetried
        case listening, bindFailed
        case accepted, acceptFailed
        case closed, closeFailed
        case disconnected
        case monitorStopped
        case handshakeSucceeded
        case handshakeFailedNoDetail, handshakeFailedProtocol, handshakeFailedAuth
        case other(UInt16)

        /// Maps a `ZMQ_EVENT_*` number.
        public init(rawValue: UInt16) {
            switch Int32(rawValue) {
            case ZMQ_EVENT_CONNECTED: self = .connected
            case ZMQ_EVENT_CONNECT_DELAYED: self = .connectDelayed
            case ZMQ_EVENT_CONNECT_RETRIED: self = .connectRetried
            case ZMQ_EVENT_LISTENING: self = .listening
            case ZMQ_EVENT_BIND_FAILED: self = .bindFailed
            case ZMQ_EVENT_ACCEPTED: self = .accepted
            case ZMQ_EVENT_ACCEPT_FAILED: self = .acceptFailed
            case ZMQ_EVENT_CLOSED: self = .closed
            case ZMQ_EVENT_CLOSE_FAILED: self = .closeFailed
            case ZMQ_EVENT_DISCONNECTED: self = .disconnected
            case ZMQ_EVENT_MONITOR_STOPPED: self = .monitorStopped
            case ZMQ_EVENT_HANDSHAKE_SUCCEEDED: self = .handshakeSucceeded
            case ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL: self = .handshakeFailedNoDetail
            case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL: self = .handshakeFailedProtocol
            case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH: self = .handshakeFailedAuth
            default: self = .other(rawValue)
            }
        }
    }

    /// What happened.
    public var kind: Kind
    /// The endpoint concerned, e.g. `tcp://127.0.0.1:5555`.
    public var endpoint: String
    /// The event's argument (see the type's discussion).
    public var value: Int32

    public init(kind: Kind, endpoint: String, value: Int32) {
        self.kind = kind
        self.endpoint = endpoint
        self.value = value
    }

    /// Parses libzmq's two-frame monitor message: 2 bytes event id and 4 bytes value
    /// (native byte order), then the endpoint as text.
    init?(frames: [[UInt8]]) {
        guard frames.count >= 2, frames[0].count >= 6 else { return nil }
        let (event, value) = frames[0].withUnsafeBytes { bytes in
            (bytes.loadUnaligned(fromByteOffset: 0, as: UInt16.self),
             bytes.loadUnaligned(fromByteOffset: 2, as: UInt32.self))
        }
        self.init(
            kind: Kind(rawValue: event),
            endpoint: String(decoding: frames[1], as: UTF8.self),
            value: Int32(bitPattern: value)
        )
    }

    public var description: String { "\(kind) \(endpoint) (\(value))" }
}
