import CZeroMQ

/// Options applied to a socket when it is opened, before any bind or connect.
///
/// `nil` leaves libzmq's default. Durations are rounded down to milliseconds.
///
/// ```swift
/// var options = SocketOptions()
/// options.routingID = Array("device-7".utf8)
/// options.heartbeatInterval = .seconds(1)
/// options.heartbeatTimeout = .seconds(3)
/// let dealer = try await loop.makeSocket(.dealer, options: options)
/// ```
public struct SocketOptions: Sendable {
    /// `ZMQ_SNDHWM`: messages queued per peer before sends would block.
    public var sendHighWaterMark: Int32 = 1000
    /// `ZMQ_RCVHWM`: messages queued per peer before libzmq stops reading from it.
    public var receiveHighWaterMark: Int32 = 1000
    /// `ZMQ_LINGER` in milliseconds; 0 drops queued messages on close so shutdown never hangs.
    public var linger: Int32 = 0
    /// `ZMQ_IMMEDIATE`: queue only to completed connections.
    public var immediate: Bool?
    /// `ZMQ_ROUTER_MANDATORY`: sending to an unknown routing id fails with `EHOSTUNREACH`.
    public var routerMandatory: Bool?
    /// `ZMQ_ROUTER_HANDOVER`: a new connection with a known routing id takes it over.
    public var routerHandover: Bool?
    /// The largest frame a peer may send, in bytes; peers sending larger frames are disconnected.
    /// ZeroMQ applies `ZMQ_MAXMSGSIZE` to frames as they cross the wire, so under CURVE, whose
    /// frames carry ``curveFrameOverhead`` bytes more, the option is set that much higher: the
    /// same frames are taken (up to exactly this size) and dropped under CURVE as over plain TCP.
    public var maxMessageSize: Int64?
    /// What CURVE adds to each frame on the wire: the `MESSAGE` command's name (8 bytes), its short
    /// nonce (8), the box's MAC (16) and the flags byte (1) (RFC 26, CurveZMQ).
    public static let curveFrameOverhead: Int64 = 33
    /// `ZMQ_RECONNECT_IVL`.
    public var reconnectInterval: Duration?
    /// `ZMQ_RECONNECT_IVL_MAX` (exponential back-off ceiling).
    public var reconnectIntervalMax: Duration?
    /// `ZMQ_HEARTBEAT_IVL`: send ZMTP PINGs at this interval.
    public var heartbeatInterval: Duration?
    /// `ZMQ_HEARTBEAT_TIMEOUT`: drop the connection when no traffic arrives within it after a PING.
    public var heartbeatTimeout: Duration?
    /// `ZMQ_HEARTBEAT_TTL`: asks the peer to drop us after this long without traffic.
    public var heartbeatTTL: Duration?
    /// `ZMQ_ROUTING_ID`: this socket's identity as seen by a ROUTER peer.
    public var routingID: [UInt8]?
    /// CURVE encryption and authentication (`ZMQ_CURVE_SERVER`, `ZMQ_CURVE_SECRETKEY`,
    /// `ZMQ_CURVE_PUBLICKEY`, `ZMQ_CURVE_SERVERKEY`); nil for plain TCP.
    public var curve: CurveSecurity?
    /// `ZMQ_ZAP_DOMAIN`: the domain of this socket's ZAP requests (``ZAPHandler``).
    public var zapDomain: String?
    /// `ZMQ_ZAP_ENFORCE_DOMAIN`: with a ``zapDomain``, refuse every handshake when no ZAP handler
    /// answers (libzmq's default admits every peer then: it fails open).
    public var zapEnforceDomain: Bool?
    /// Each received message gets the value of this ZMTP metadata property (for example
    /// `User-Id`, set by the ZAP handler) as an extra **first** frame, before the routing id of a
    /// ROUTER; an empty frame when the message has no such property. Peers cannot forge it:
    /// the frame is added by the receiving socket.
    public var prependedProperty: String?
    /// Runs on the I/O thread for every received message (frames as ``AsyncSocket/messages`` would
    /// deliver them); a message it returns false for is dropped there, before any task sees it:
    /// the cheapest place to shed a flood. It must be fast and must not block.
    public var inboundFilter: (@Sendable (_ frames: [[UInt8]], _ sourceDescriptor: Int32) -> Bool)?
    /// Publishes ``MonitorEvent``s on ``AsyncSocket/monitorEvents``.
    public var monitor: Bool = false
    /// Which events the monitor publishes (`ZMQ_EVENT_*` flags; all by default). A socket with
    /// many connections asks only for the ones it uses: each event is a message to read.
    public var monitoredEvents: Int32 = ZMQ_EVENT_ALL
    /// ``monitoredEvents`` for counting a listening socket's connections: accepted and disconnected.
    public static let connectionEvents: Int32 = ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED
    /// How many monitor events wait for a slow reader before the oldest are dropped.
    public var monitorBufferLimit: Int = 4096
    /// How many received messages an ``AsyncSocket`` buffers for a slow consumer before the
    /// I/O thread stops reading that socket (so libzmq's `RCVHWM` pushes back on the peer).
    public var receiveBufferLimit: Int = 1000
    /// How many sends may return before the I/O thread has handed them to libzmq.
    ///
    /// Within the window ``AsyncSocket/send(_:)`` returns as soon as the message is queued
    /// (in order) for the I/O thread, which saves the caller a thread hop per message; beyond
    /// it, `send` waits. Such a send can only fail later because the socket or loop closed, and
    /// that failure is not reported per message. `nil` picks 128, or 0 (every send waits) for
    /// a ROUTER with ``routerMandatory``, whose per-message `EHOSTUNREACH` must reach the caller.
    public var sendWindow: Int?

    /// Options with the defaults above.
    public init() {}
}

extension SocketOptions {
    func effectiveSendWindow(for type: SocketType) -> Int {
        if let sendWindow { return sendWindow }
        return type == .router && routerMandatory == true ? 0 : 128
    }
}

extension Duration {
    /// Milliseconds, clamped into `Int32` as libzmq's interval options expect.
    var zmqMilliseconds: Int32 {
        let (seconds, attoseconds) = components
        let milliseconds = seconds.multipliedReportingOverflow(by: 1000)
        if milliseconds.overflow { return seconds < 0 ? 0 : Int32.max }
        return Int32(clamping: max(0, milliseconds.partialValue + attoseconds / 1_000_000_000_000_000))
    }
}
