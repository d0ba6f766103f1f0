import CMsgPack
import Foundation

/// One key–value pair of a MessagePack map, in wire order.
public struct MessagePackEntry: Hashable, Sendable {
    /// The key (any MessagePack value; usually a string).
    public var key: MessagePackValue
    /// The value.
    public var value: MessagePackValue

    /// Creates an entry.
    public init(key: MessagePackValue, value: MessagePackValue) {
        self.key = key
        self.value = value
    }
}

/// Any MessagePack value, for inspecting messages of unknown shape.
///
/// Maps keep their entries in wire order (MessagePack allows any key type and
/// duplicates). Decoding yields `.uint` for non-negative integers and `.int`
/// for negative ones, whatever format carried them; equality and hashing treat
/// `.int(n)` and `.uint(n)` with the same numeric value as equal. Extensions of
/// type −1 decode as `.timestamp`; other types as `.extended`.
///
/// ```swift
/// let message = try MessagePackValue.decode(bytes)
/// if message["header"]?["type"]?.stringValue == "push" { ... }
/// ```
public enum MessagePackValue: Sendable, Codable {
    case `nil`
    case bool(Bool)
    case int(Int64)
    case uint(UInt64)
    case float(Float)
    case double(Double)
    case string(String)
    case binary([UInt8])
    case array([MessagePackValue])
    case map([MessagePackEntry])
    case extended(type: Int8, data: [UInt8])
    case timestamp(seconds: Int64, nanoseconds: UInt32)

    /// Decodes exactly one value from `bytes`.
    /// - Parameters:
    ///   - bytes: The whole message.
    ///   - limits: Bounds checked before anything is allocated.
    /// - Throws: ``MessagePackError``.
    public static func decode(_ bytes: [UInt8], limits: MessagePackLimits = .default) throws -> MessagePackValue {
        try bytes.withUnsafeBytes { try decode($0, limits: limits) }
    }

    /// Decodes exactly one value from `buffer`.
    /// - Throws: ``MessagePackError``.
    public static func decode(_ buffer: UnsafeRawBufferPointer, limits: MessagePackLimits = .default) throws -> MessagePackValue {
        try Unpacking.withRoot(buffer, limits: limits) { root in
            try DecoderState(base: buffer.baseAddress, userInfo: [:]).value(root)
        }
    }

    /// The MessagePack bytes of this value.
    /// - Throws: ``MessagePackError`` for a timestamp with nanoseconds ≥ 10⁹.
    public func encoded() throws -> [UInt8] {
        let state = EncoderState(userInfo: [:])
        try state.write(self)
        return state.sink.bytes
    }

    // MARK: Accessors

    /// The value for string key `key` of a map (the first match), else `nil`.
    public subscript(key: String) -> MessagePackValue? {
        guard case .map(let entries) = self else { return nil }
        return entries.first { $0.key == .string(key) }?.value
    }

    /// Element `index` of an array, else `nil`.
    public subscript(index: Int) -> MessagePackValue? {
        guard case .array(let elements) = self, elements.indices.contains(index) else { return nil }
        return elements[index]
    }

    /// True for `.nil`.
    public var isNil: Bool { if case .nil = self { return true } else { return false } }
    /// The Boolean, if this is `.bool`.
    public var boolValue: Bool? { if case .bool(let v) = self { return v } else { return nil } }
    /// The string, if this is `.string`.
    public var stringValue: String? { if case .string(let v) = self { return v } else { return nil } }
    /// The bytes, if this is `.binary`.
    public var binaryValue: [UInt8]? { if case .binary(let v) = self { return v } else { return nil } }
    /// The elements, if this is `.array`.
    public var arrayValue: [MessagePackValue]? { if case .array(let v) = self { return v } else { return nil } }
    /// The entries, if this is `.map`.
    public var mapValue: [MessagePackEntry]? { if case .map(let v) = self { return v } else { return nil } }

    /// The integer as `Int64`, if this is `.int` or a `.uint` that fits.
    public var int64Value: Int64? {
        switch self {
        case .int(let v): return v
        case .uint(let v): return Int64(exactly: v)
        default: return nil
        }
    }

    /// The integer as `UInt64`, if this is `.uint` or a non-negative `.int`.
    public var uint64Value: UInt64? {
        switch self {
        case .int(let v): return UInt64(exactly: v)
        case .uint(let v): return v
        default: return nil
        }
    }

    /// The number as `Double` (floats, and integers that convert exactly).
    public var doubleValue: Double? {
        switch self {
        case .float(let v): return Double(v)
        case .double(let v): return v
        case .int(let v): return Double(exactly: v)
        case .uint(let v): return Double(exactly: v)
        default: return nil
        }
    }

    /// The timestamp, if this is `.timestamp`.
    public var timestampValue: MessagePackTimestamp? {
        if case .timestamp(let s, let n) = self { return MessagePackTimestamp(seconds: s, nanoseconds: n) }
        return nil
    }

    // MARK: Codable (for encoders other than MessagePack's, which handle it directly)

    public init(from decoder: any Decoder) throws {
        if let decoder = decoder as? MPDecoder {
            self = try decoder.state.value(decoder.object)
            return
        }
        if let container = try? decoder.singleValueContainer() {
            if container.decodeNil() { self = .nil; return }
            if let v = try? container.decode(Bool.self) { self = .bool(v); return }
            if let v = try? container.decode(Int64.self) { self = .int(v); return }
            if let v = try? container.decode(UInt64.self) { self = .uint(v); return }
            if let v = try? container.decode(Double.self) { self = .double(v); return }
            if let v = try? container.decode(String.self) { self = .string(v); return }
            if let v = try? container.decode([MessagePackValue].self) { self = .array(v); return }
        }
        let container = try decoder.container(keyedBy: AnyKey.self)
        var entries: [MessagePackEntry] = []
        for key in container.allKeys {
            entries.append(MessagePackEntry(key: .string(key.stringValue), value: try container.decode(MessagePackValue.self, forKey: key)))
        }
        self = .map(entries)
    }

    public func encode(to encoder: any Encoder) throws {
        if let encoder = encoder as? MPEncoder {
            return try encoder.state.encodeValue(self, level: encoder.level)
        }
        switch self {
        case .nil:
            var c = encoder.singleValueContainer()
            try c.encodeNil()
        case .bool(let v):
            var c = encoder.singleValueContainer()
            try c.encode(v)
        case .int(let v):
            var c = encoder.singleValueContainer()
            try c.encode(v)
        case .uint(let v):
            var c = encoder.singleValueContainer()
            try c.encode(v)
        case .float(let v):
            var c = encoder.singleValueContainer()
            try c.encode(v)
        case .double(let v):
            var c = encoder.singleValueContainer()
            try c.encode(v)
        case .string(let v):
            var c = encoder.singleValueContainer()
            try c.encode(v)
        case .binary(let v):
            var c = encoder.singleValueContainer()
            try c.encode(Data(v))
        case .array(let v):
            var c = encoder.singleValueContainer()
            try c.encode(v)
        case .map(let entries):
            var c = encoder.container(keyedBy: AnyKey.self)
            for entry in entries {
                let name: String
                if case .string(let s) = entry.key { name = s } else { name = "\(entry.key)" }
                try c.encode(entry.value, forKey: AnyKey(stringValue: name))
            }
        case .extended(let type, let data):
            var c = encoder.unkeyedContainer()
            try c.encode(type)
            try c.encode(Data(data))
        case .timestamp(let seconds, let nanoseconds):
            var c = encoder.singleValueContainer()
            try c.encode(MessagePackTimestamp(seconds: seconds, nanoseconds: nanoseconds).date)
        }
    }
}

private struct AnyKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { return nil }
}

extension MessagePackValue: Hashable {
    /// Integers compare by numeric value, so `.int(5) == .uint(5)`; floats compare
    /// bit for bit, so NaN equals itself and the value stays a valid Hashable.
    public static func == (lhs: MessagePackValue, rhs: MessagePackValue) -> Bool {
        switch (lhs, rhs) {
        case (.nil, .nil): return true
        case (.bool(let a), .bool(let b)): return a == b
        case (.int, .int), (.int, .uint), (.uint, .int), (.uint, .uint):
            return lhs.int64Value == rhs.int64Value && lhs.uint64Value == rhs.uint64Value
        case (.float(let a), .float(let b)): return a.bitPattern == b.bitPattern
        case (.double(let a), .double(let b)): return a.bitPattern == b.bitPattern
        case (.string(let a), .string(let b)): return a == b
        case (.binary(let a), .binary(let b)): return a == b
        case (.array(let a), .array(let b)): return a == b
        case (.map(let a), .map(let b)): return a == b
        case (.extended(let t1, let d1), .extended(let t2, let d2)): return t1 == t2 && d1 == d2
        case (.timestamp(let s1, let n1), .timestamp(let s2, let n2)): return s1 == s2 && n1 == n2
        default: return false
        }
    }

    public func hash(into hasher: inout Hasher) {
        switch self {
        case .nil: hasher.combine(0)
        case .bool(let v): hasher.combine(1); hasher.combine(v)
        case .int, .uint:
            hasher.combine(2)
            hasher.combine(int64Value)
            hasher.combine(uint64Value)
        case .float(let v): hasher.combine(3); hasher.combine(v.bitPattern)
        case .double(let v): hasher.combine(4); hasher.combine(v.bitPattern)
        case .string(let v): hasher.combine(5); hasher.combine(v)
        case .binary(let v): hasher.combine(6); hasher.combine(v)
        case .array(let v): hasher.combine(7); hasher.combine(v)
        case .map(let v): hasher.combine(8); hasher.combine(v)
        case .extended(let t, let d): hasher.combine(9); hasher.combine(t); hasher.combine(d)
        case .timestamp(let s, let n): hasher.combine(10); hasher.combine(s); hasher.combine(n)
        }
    }
}

extension MessagePackValue: ExpressibleByNilLiteral, ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByFloatLiteral, ExpressibleByStringLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral
{
    public init(nilLiteral: ()) { self = .nil }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    /// Non-negative literals become `.uint`, negative ones `.int`, as decoding does.
    public init(integerLiteral value: Int64) { self = value >= 0 ? .uint(UInt64(value)) : .int(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(stringLiteral value: String) { self = .string(value) }
    public init(arrayLiteral elements: MessagePackValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (MessagePackValue, MessagePackValue)...) {
        self = .map(elements.map { MessagePackEntry(key: $0.0, value: $0.1) })
    }
}
