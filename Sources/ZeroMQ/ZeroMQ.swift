// TEMPORARY STUB (main only): the agreed ZeroMQ API shape so FleetProtocol
// type-checks until the real layer merges. Replaced at merge; never shipped.
public struct ZMQError: Error, Sendable { public var errno: Int32; public var message: String; public var operation: String }
public final class ZMQContext: Sendable { public init(ioThreads: Int = 1) throws {}; public func shutdown() {} }
public struct SocketType: Sendable, Hashable { let raw: Int32; public static let router = SocketType(raw: 6), dealer = SocketType(raw: 5), pair = SocketType(raw: 0) }
public struct SocketOptions: Sendable {
    public var sendHighWaterMark: Int32 = 1000; public var receiveHighWaterMark: Int32 = 1000; public var linger: Int32 = 0
    public var immediate: Bool?; public var routerMandatory: Bool?; public var routerHandover: Bool?; public var maxMessageSize: Int64?
    public var reconnectInterval: Duration?; public var reconnectIntervalMax: Duration?; public var heartbeatInterval: Duration?
    public var heartbeatTimeout: Duration?; public var heartbeatTTL: Duration?; public var routingID: [UInt8]?; public var monitor = false
    public init() {}
}
public final class ZMQIOLoop: Sendable {
    public init(context: ZMQContext, label: String = "zmq-io") throws {}
    public func makeSocket(_ type: SocketType, options: SocketOptions = .init()) async throws -> AsyncSocket { AsyncSocket() }
    public func shutdown() async {}
}
public final class AsyncSocket: Sendable {
    public func bind(_ endpoint: String) async throws -> String { endpoint }
    public func connect(_ endpoint: String) async throws {}
    public func disconnect(_ endpoint: String) async throws {}
    public func send(_ frames: [[UInt8]]) async throws {}
    public var messages: AsyncThrowingStream<[[UInt8]], Error> { AsyncThrowingStream { $0.finish() } }
    public func close() async {}
}
