import MessagePack

/// Value-level mutations of MessagePack: a random node of a valid message replaced by an extreme
/// value (NaN, ±∞, 1e300, Int64.min/max, UInt64.max, timestamps at the ends of their range), a
/// value of another type, a huge string or binary, deep nesting, or a map with dropped,
/// duplicated or unknown keys. The result is encoded, so it is well-formed MessagePack that
/// reaches the typed decoders' field checks (byte mutations mostly stop at the scanner).
public enum FuzzMessagePack {
    /// Values at the edges of every MessagePack type.
    public static let extremes: [MessagePackValue] = [
        .nil, .bool(true), .bool(false), .int(Int64.min), .int(-1), .int(Int64(Int32.min) - 1), .uint(0), .uint(1),
        .uint(UInt64(Int64.max)), .uint(UInt64(Int64.max) + 1), .uint(UInt64.max), .uint(UInt64(UInt32.max)), .uint(UInt64(UInt32.max) + 1),
        .uint(UInt64(UInt16.max) + 1), .double(.nan), .double(.infinity), .double(-.infinity), .double(1e300), .double(-1e300),
        .double(0.5), .double(-0.0), .double(9.3e18), .double(1.8e19), .float(.nan), .float(.infinity), .float(-3.4e38),
        .string(""), .string("x"), .string("\u{0}"), .binary([]), .binary([UInt8](repeating: 0xff, count: 65)),
        .array([]), .map([]), .timestamp(seconds: Int64.max, nanoseconds: 999_999_999), .timestamp(seconds: Int64.min, nanoseconds: 0),
        .timestamp(seconds: 0, nanoseconds: 0), .timestamp(seconds: 1 << 34, nanoseconds: 1), .extended(type: 7, data: [1, 2, 3]),
        .extended(type: -1, data: [0, 0, 0]),
    ]

    /// A copy of `value` with 1–3 mutations.
    public static func mutate<G: RandomNumberGenerator>(_ value: MessagePackValue, using rng: inout G) -> MessagePackValue {
        var result = value
        for _ in 0..<Int.random(in: 1...3, using: &rng) {
            let target = Int.random(in: 0..<nodeCount(result), using: &rng)
            var counter = 0
            result = replacing(result, node: target, counter: &counter) { mutation(of: $0, using: &rng) }
        }
        return result
    }

    /// `mutate` of `bytes` decoded, encoded again; `nil` when `bytes` do not decode or the
    /// mutation cannot be encoded.
    public static func mutate<G: RandomNumberGenerator>(bytes: [UInt8], using rng: inout G) -> [UInt8]? {
        guard let value = try? MessagePackValue.decode(bytes) else { return nil }
        return try? mutate(value, using: &rng).encoded()
    }

    static func nodeCount(_ value: MessagePackValue) -> Int {
        switch value {
        case .array(let items): 1 + items.reduce(0) { $0 + nodeCount($1) }
        case .map(let entries): 1 + entries.reduce(0) { $0 + nodeCount($1.value) }
        default: 1
        }
    }

    static func replacing(
        _ value: MessagePackValue, node target: Int, counter: inout Int, _ change: (MessagePackValue) -> MessagePackValue
    ) -> MessagePackValue {
        let mine = counter
        counter += 1
        if mine == target { return change(value) }
        switch value {
        case .array(var items):
            for i in items.indices { items[i] = replacing(items[i], node: target, counter: &counter, change) }
            return .array(items)
        case .map(var entries):
            for i in entries.indices {
                entries[i] = MessagePackEntry(key: entries[i].key, value: replacing(entries[i].value, node: target, counter: &counter, change))
            }
            return .map(entries)
        default:
            return value
        }
    }

    static func mutation<G: RandomNumberGenerator>(of value: MessagePackValue, using rng: inout G) -> MessagePackValue {
        switch Int.random(in: 0..<7, using: &rng) {
        case 0, 1, 2:
            return extremes.randomElement(using: &rng)!
        case 3:  // deep nesting
            var nested = value
            for _ in 0..<[8, 40, 70].randomElement(using: &rng)! { nested = .array([nested]) }
            return nested
        case 4:  // long values
            switch Int.random(in: 0..<3, using: &rng) {
            case 0: return .string(String(repeating: "é", count: Int.random(in: 100...40_000, using: &rng)))
            case 1: return .binary([UInt8](repeating: 7, count: Int.random(in: 100...100_000, using: &rng)))
            default: return .array(Array(repeating: value, count: Int.random(in: 2...600, using: &rng)))
            }
        case 5:  // map surgery
            guard case .map(var entries) = value, !entries.isEmpty else { return .map([MessagePackEntry(key: "k", value: value)]) }
            let i = Int.random(in: 0..<entries.count, using: &rng)
            switch Int.random(in: 0..<4, using: &rng) {
            case 0: entries.remove(at: i)
            case 1: entries.insert(MessagePackEntry(key: entries[i].key, value: extremes.randomElement(using: &rng)!), at: 0)
            case 2: entries[i] = MessagePackEntry(key: .uint(UInt64(i)), value: entries[i].value)
            default: entries.append(MessagePackEntry(key: "zz", value: .map(entries)))
            }
            return .map(entries)
        default:  // a type change that keeps the content
            switch value {
            case .string(let text): return .binary(Array(text.utf8))
            case .binary(let bytes): return .array(bytes.prefix(100).map { .uint(UInt64($0)) })
            case .uint(let n): return n <= UInt64(Int64.max) ? .int(-Int64(n) - 1) : .double(Double(n))
            case .int(let n): return .double(Double(n))
            case .double(let d): return .float(Float(d))
            case .array(let items): return .map(items.enumerated().map { MessagePackEntry(key: .uint(UInt64($0.offset)), value: $0.element) })
            case .map(let entries): return .array(entries.map(\.value))
            case .timestamp(let s, _): return .int(s)
            default: return .string("type")
            }
        }
    }
}
