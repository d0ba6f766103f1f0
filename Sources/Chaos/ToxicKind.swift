/// What a toxic does, with Toxiproxy's attribute names and units.
///
/// | type | attributes | effect |
/// |---|---|---|
/// | `latency` | `latency` ms, `jitter` ms | delays every chunk by latency ± jitter (order kept) |
/// | `bandwidth` | `rate` KB/s | limits throughput; 0 = unlimited |
/// | `slow_close` | `delay` ms | delays the close by `delay` after the data |
/// | `timeout` | `timeout` ms | drops all data; closes after `timeout` (0 = never: a blackhole until removed) |
/// | `reset_peer` | `timeout` ms | on the first data, waits `timeout`, then resets both sockets (TCP RST) |
/// | `slicer` | `average_size`, `size_variation` bytes, `delay` µs | cuts chunks into small pieces sent `delay` apart |
/// | `limit_data` | `bytes` | passes `bytes` bytes, then closes the connection |
public enum ToxicKind: Sendable, Hashable {
    case latency(latency: Int, jitter: Int)
    case bandwidth(rate: Int)
    case slowClose(delay: Int)
    case timeout(timeout: Int)
    case resetPeer(timeout: Int)
    case slicer(averageSize: Int, sizeVariation: Int, delay: Int)
    case limitData(bytes: Int)

    /// Every supported `type`, as Toxiproxy names them.
    public static let typeNames = ["latency", "bandwidth", "slow_close", "timeout", "reset_peer", "slicer", "limit_data"]

    public var typeName: String {
        switch self {
        case .latency: "latency"
        case .bandwidth: "bandwidth"
        case .slowClose: "slow_close"
        case .timeout: "timeout"
        case .resetPeer: "reset_peer"
        case .slicer: "slicer"
        case .limitData: "limit_data"
        }
    }

    /// The attribute names a type takes (empty for an unknown type).
    public static func attributeNames(of type: String) -> [String] {
        switch type {
        case "latency": ["latency", "jitter"]
        case "bandwidth": ["rate"]
        case "slow_close": ["delay"]
        case "timeout", "reset_peer": ["timeout"]
        case "slicer": ["average_size", "size_variation", "delay"]
        case "limit_data": ["bytes"]
        default: []
        }
    }

    /// The attributes as Toxiproxy shows them (every attribute, defaults included).
    public var attributes: [String: Int] {
        switch self {
        case .latency(let latency, let jitter): ["latency": latency, "jitter": jitter]
        case .bandwidth(let rate): ["rate": rate]
        case .slowClose(let delay): ["delay": delay]
        case .timeout(let timeout), .resetPeer(let timeout): ["timeout": timeout]
        case .slicer(let averageSize, let sizeVariation, let delay):
            ["average_size": averageSize, "size_variation": sizeVariation, "delay": delay]
        case .limitData(let bytes): ["bytes": bytes]
        }
    }

    /// Builds a kind from a type name and attributes (missing attributes are 0, as in Toxiproxy).
    /// - Throws: ``FaultProxyError`` (400) for an unknown type, an unknown or negative attribute,
    ///   or a slicer whose sizes cannot work.
    public init(type: String, attributes: [String: Int]) throws {
        let known = Self.attributeNames(of: type)
        guard !known.isEmpty else { throw FaultProxyError.invalidToxicType(type) }
        for (name, value) in attributes {
            guard known.contains(name) else {
                throw FaultProxyError.badRequestBody(
                    "unknown attribute \"\(name)\" for a \(type) toxic; it takes \(known.joined(separator: ", "))")
            }
            guard (0...ToxicAttributes.maximum).contains(value) else {
                throw FaultProxyError.badRequestBody(
                    "attribute \"\(name)\" must be a whole number from 0 to \(ToxicAttributes.maximum), got \(value)")
            }
        }
        func value(_ name: String) -> Int { attributes[name] ?? 0 }
        switch type {
        case "latency": self = .latency(latency: value("latency"), jitter: value("jitter"))
        case "bandwidth": self = .bandwidth(rate: value("rate"))
        case "slow_close": self = .slowClose(delay: value("delay"))
        case "timeout": self = .timeout(timeout: value("timeout"))
        case "reset_peer": self = .resetPeer(timeout: value("timeout"))
        case "slicer":
            let averageSize = value("average_size")
            let sizeVariation = value("size_variation")
            guard averageSize >= 1 else {
                throw FaultProxyError.badRequestBody("attribute \"average_size\" of a slicer toxic must be at least 1")
            }
            guard sizeVariation < averageSize else {
                throw FaultProxyError.badRequestBody(
                    "attribute \"size_variation\" of a slicer toxic must be less than average_size (\(averageSize))")
            }
            self = .slicer(averageSize: averageSize, sizeVariation: sizeVariation, delay: value("delay"))
        default: self = .limitData(bytes: value("bytes"))
        }
    }
}
