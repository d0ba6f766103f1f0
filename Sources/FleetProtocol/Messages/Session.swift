import Foundation

/// First request on a new connection: who the device is and what it speaks.
/// The reply tells the device how often to send heartbeats.
public struct Hello: FleetRequest, Hashable {
    public typealias Reply = HelloReply
    public static let messageType: MessageType = "hello"

    /// The device id (also the DEALER's routing id).
    public var deviceID: String
    /// Free text naming the client software, e.g. `signfleet-node/0.1.0`.
    public var client: String
    /// Major versions the device can speak, best first.
    public var supportedMajorVersions: [UInt16]

    public init(deviceID: String, client: String, supportedMajorVersions: [UInt16] = [ProtocolVersion.current.major]) {
        self.deviceID = deviceID
        self.client = client
        self.supportedMajorVersions = supportedMajorVersions
    }
}

public struct HelloReply: FleetMessageBody, Hashable {
    public static let messageType: MessageType = "hello.reply"

    /// Free text naming the server software.
    public var server: String
    public var protocolVersion: ProtocolVersion
    /// Send a heartbeat after this long without other traffic.
    public var heartbeatIntervalMs: UInt32
    /// Declare the peer dead after this many intervals without any message.
    public var heartbeatLiveness: UInt32
    /// The largest frame the server accepts, in bytes.
    public var maxMessageSize: UInt32
    /// Identifies this server run; a change tells the device the server restarted.
    public var serverInstance: String

    public init(
        server: String, protocolVersion: ProtocolVersion = .current, heartbeatIntervalMs: UInt32,
        heartbeatLiveness: UInt32, maxMessageSize: UInt32, serverInstance: String
    ) {
        self.server = server
        self.protocolVersion = protocolVersion
        self.heartbeatIntervalMs = heartbeatIntervalMs
        self.heartbeatLiveness = heartbeatLiveness
        self.maxMessageSize = maxMessageSize
        self.serverInstance = serverInstance
    }
}

/// Liveness probe, sent by a device when it has sent nothing for one
/// heartbeat interval. Any message from the peer counts as a sign of life.
public struct Heartbeat: FleetRequest, Hashable {
    public typealias Reply = HeartbeatReply
    public static let messageType: MessageType = "heartbeat"

    public init() {}

    private struct AnyKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    /// The body must be a map (`{}`), as every body is; what it holds is ignored. The synthesized
    /// init read nothing, so `[]`, `nil` or a number were answered as heartbeats.
    public init(from decoder: any Decoder) throws {
        _ = try decoder.container(keyedBy: AnyKey.self)
        self.init()
    }
}

public struct HeartbeatReply: FleetMessageBody, Hashable {
    public static let messageType: MessageType = "heartbeat.reply"

    /// The server's instance id (see ``HelloReply/serverInstance``).
    public var serverInstance: String
    /// The heartbeat interval the server wants now, as ``HelloReply/heartbeatIntervalMs`` would
    /// announce it: a device adopts it, so devices that said `hello` while the fleet was small
    /// slow down as it grows (a crowd reconnecting at once would otherwise all keep the short
    /// interval of the first). Absent from older servers: keep the interval of the `hello`.
    public var heartbeatIntervalMs: UInt32?

    public init(serverInstance: String, heartbeatIntervalMs: UInt32? = nil) {
        self.serverInstance = serverInstance
        self.heartbeatIntervalMs = heartbeatIntervalMs
    }
}
