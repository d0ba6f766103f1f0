// TEMPORARY STUB (main only): lets FleetProtocol compile against the agreed API
// until the real msgpack-c codec merges. Replaced at merge; never shipped.
import Foundation
public struct MessagePackLimits: Sendable { public var maxDepth = 64; public static let `default` = MessagePackLimits(); public init() {} }
public struct MessagePackEncoder: Sendable {
    public init() {}
    public func encode<T: Encodable>(_ value: T) throws -> [UInt8] { Array(try JSONEncoder().encode(value)) }
}
public struct MessagePackDecoder: Sendable {
    public init(limits: MessagePackLimits = .default) {}
    public func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8]) throws -> T { try JSONDecoder().decode(type, from: Data(bytes)) }
}
