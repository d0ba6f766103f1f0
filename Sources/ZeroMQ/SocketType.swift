import CZeroMQ

/// A ZeroMQ socket type (`ZMQ_ROUTER`, `ZMQ_DEALER`, `ZMQ_PAIR`, ...).
public struct SocketType: Sendable, Hashable, CustomStringConvertible {
    /// The libzmq constant.
    public var rawValue: Int32
    /// Wraps any libzmq socket type constant.
    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// `ZMQ_ROUTER`: the first frame of every message is the peer's routing id.
    public static let router = SocketType(rawValue: ZMQ_ROUTER)
    /// `ZMQ_DEALER`: asynchronous request side, load-balances over its peers.
    public static let dealer = SocketType(rawValue: ZMQ_DEALER)
    /// `ZMQ_PAIR`: exclusive pair, used for inproc signalling and monitors.
    public static let pair = SocketType(rawValue: ZMQ_PAIR)

    public var description: String {
        switch rawValue {
        case ZMQ_ROUTER: "ROUTER"
        case ZMQ_DEALER: "DEALER"
        case ZMQ_PAIR: "PAIR"
        default: "socket type \(rawValue)"
        }
    }
}
