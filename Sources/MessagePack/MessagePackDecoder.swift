import CMsgPack
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Decodes `Decodable` values from MessagePack, strictly and within ``MessagePackLimits``.
///
/// Input first passes a structural pre-scan that checks every declared length
/// against the bytes left and against the limits, then msgpack-c unpacks it
/// (strings and binaries point into the input), and the Codable containers read
/// that tree. Every problem — truncated input, trailing bytes, a wrong type,
/// invalid UTF-8, a lying length, too deep or too long — is a
/// ``MessagePackError`` naming the coding path.
///
/// Type mapping when decoding:
/// - any integer format decodes into any Swift integer type the value fits,
///   otherwise `valueOutOfRange`;
/// - `Double` accepts float64, float32 and integers that convert exactly;
///   `Float` accepts float32, and float64 or integers that convert exactly;
/// - `Data` and `[UInt8]` accept `bin` (`[UInt8]` also accepts an array of integers);
/// - `Date` and ``MessagePackTimestamp`` accept the timestamp extension (type −1).
///
/// ```swift
/// let heartbeat = try MessagePackDecoder().decode(Heartbeat.self, from: bytes)
/// ```
public struct MessagePackDecoder: Sendable {
    /// The bounds every input is checked against.
    public var limits: MessagePackLimits
    /// Values handed to `init(from:)` implementations through `Decoder.userInfo`.
    public var userInfo: [CodingUserInfoKey: any Sendable] = [:]

    /// Creates a decoder.
    /// - Parameter limits: Bounds for depth, counts, sizes and input size.
    public init(limits: MessagePackLimits = .default) {
        self.limits = limits
    }

    /// Decodes a `T` from the whole of `bytes`.
    /// - Throws: ``MessagePackError``.
    public func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8]) throws -> T {
        try bytes.withUnsafeBytes { try decode(type, from: $0) }
    }

    /// Decodes a `T` from the whole of `data`.
    /// - Throws: ``MessagePackError``.
    public func decode<T: Decodable>(_ type: T.Type, from data: Data) throws -> T {
        try data.withUnsafeBytes { try decode(type, from: $0) }
    }

    /// Whether types that conform to ``MessagePackReadable`` read themselves
    /// instead of going through `init(from:)`. Both accept the same input; tests
    /// turn this off to compare.
    public var usesFastPath = true

    /// Decodes a `T` from the whole of `bytes` through its ``MessagePackReadable`` conformance.
    /// - Throws: ``MessagePackError``.
    public func decode<T: Decodable & MessagePackReadable>(_ type: T.Type, from bytes: [UInt8]) throws -> T {
        try bytes.withUnsafeBytes { try decode(type, from: $0) }
    }

    /// Decodes a `T` from the whole of `data` through its ``MessagePackReadable`` conformance.
    /// - Throws: ``MessagePackError``.
    public func decode<T: Decodable & MessagePackReadable>(_ type: T.Type, from data: Data) throws -> T {
        try data.withUnsafeBytes { try decode(type, from: $0) }
    }

    /// Decodes a `T` from the whole of `buffer` through its ``MessagePackReadable`` conformance.
    /// - Throws: ``MessagePackError``.
    public func decode<T: Decodable & MessagePackReadable>(_ type: T.Type, from buffer: UnsafeRawBufferPointer) throws -> T {
        if usesFastPath { return try decodeReadable(type, from: buffer, limits: limits) }
        return try decodeCodable(type, from: buffer)
    }

    /// Decodes a `T` from the whole of `buffer`.
    /// - Throws: ``MessagePackError``.
    public func decode<T: Decodable>(_ type: T.Type, from buffer: UnsafeRawBufferPointer) throws -> T {
        // Generic callers (whose static type does not show the conformance) still get the fast path.
        if usesFastPath, let readable = asReadable(T.self) {
            return try decodeOpened(readable, from: buffer, as: T.self)
        }
        return try decodeCodable(type, from: buffer)
    }

    private func decodeOpened<R: MessagePackReadable, T>(_ readable: R.Type, from buffer: UnsafeRawBufferPointer, as type: T.Type) throws -> T {
        // R is T (the metatype came from T.self).
        identity(try decodeReadable(R.self, from: buffer, limits: limits), as: T.self)
    }

    private func decodeCodable<T: Decodable>(_ type: T.Type, from buffer: UnsafeRawBufferPointer) throws -> T {
        try Unpacking.withRoot(buffer, limits: limits) { root in
            let state = DecoderState(base: buffer.baseAddress, userInfo: userInfo)
            do {
                return try state.decodeValue(type, root)
            } catch let error as DecodingError {
                throw MessagePackError(error)
            }
        }
    }
}

extension MessagePackError {
    /// Wraps errors that `init(from:)` implementations throw themselves.
    init(_ error: DecodingError) {
        switch error {
        case .typeMismatch(_, let context):
            self.init(code: .typeMismatch, codingPath: Self.render(context.codingPath), message: context.debugDescription)
        case .valueNotFound(_, let context):
            self.init(code: .valueNotFound, codingPath: Self.render(context.codingPath), message: context.debugDescription)
        case .keyNotFound(let key, let context):
            self.init(code: .keyNotFound, codingPath: Self.render(context.codingPath + [key]), message: context.debugDescription)
        case .dataCorrupted(let context):
            self.init(code: .invalidInput, codingPath: Self.render(context.codingPath), message: context.debugDescription)
        @unknown default:
            self.init(code: .invalidInput, message: "\(error)")
        }
    }
}

/// Where `val` sits inside `msgpack_object_kv`.
private let valueOffset = MemoryLayout<msgpack_object_kv>.offset(of: \.val) ?? MemoryLayout<msgpack_object>.stride

/// The state of one `decode` call: the input (for offsets) and the key path.
final class DecoderState {
    let base: UnsafeRawPointer?
    // One decode call owns this state; skip the runtime exclusivity checks.
    @exclusivity(unchecked) var keys: [any CodingKey] = []
    let userInfo: [CodingUserInfoKey: Any]

    init(base: UnsafeRawPointer?, userInfo: [CodingUserInfoKey: any Sendable]) {
        self.base = base
        var info: [CodingUserInfoKey: Any] = [:]
        for (key, value) in userInfo { info[key] = value }
        self.userInfo = info
    }

    // MARK: Errors

    static func typeName(_ o: UnsafePointer<msgpack_object>) -> String {
        switch o.pointee.type {
        case MSGPACK_OBJECT_NIL: return "nil"
        case MSGPACK_OBJECT_BOOLEAN: return "bool"
        case MSGPACK_OBJECT_POSITIVE_INTEGER: return "unsigned integer \(o.pointee.via.u64)"
        case MSGPACK_OBJECT_NEGATIVE_INTEGER: return "negative integer \(o.pointee.via.i64)"
        case MSGPACK_OBJECT_FLOAT32: return "float32"
        case MSGPACK_OBJECT_FLOAT64: return "float64"
        case MSGPACK_OBJECT_STR: return "str"
        case MSGPACK_OBJECT_BIN: return "bin"
        case MSGPACK_OBJECT_ARRAY: return "array"
        case MSGPACK_OBJECT_MAP: return "map"
        case MSGPACK_OBJECT_EXT: return "ext type \(o.pointee.via.ext.type)"
        default: return "unknown"
        }
    }

    /// Offset of a payload in the input; msgpack-c keeps no offsets for scalars.
    func offset(_ o: UnsafePointer<msgpack_object>) -> Int? {
        let pointer: UnsafePointer<CChar>?
        switch o.pointee.type {
        case MSGPACK_OBJECT_STR: pointer = o.pointee.via.str.ptr
        case MSGPACK_OBJECT_BIN: pointer = o.pointee.via.bin.ptr
        case MSGPACK_OBJECT_EXT: pointer = o.pointee.via.ext.ptr
        default: pointer = nil
        }
        guard let pointer, let base else { return nil }
        return UnsafeRawPointer(pointer) - base
    }

    func path(_ extra: (any CodingKey)?) -> [String] {
        var keys = self.keys
        if let extra { keys.append(extra) }
        return MessagePackError.render(keys)
    }

    func error(_ code: MessagePackError.Code, _ o: UnsafePointer<msgpack_object>?, _ extra: (any CodingKey)?, _ message: String) -> MessagePackError {
        MessagePackError(code: code, codingPath: path(extra), offset: o.flatMap { offset($0) }, message: message)
    }

    func mismatch(_ o: UnsafePointer<msgpack_object>, _ expected: String, _ extra: (any CodingKey)?) -> MessagePackError {
        error(.typeMismatch, o, extra, "expected \(expected), found \(Self.typeName(o))")
    }

    // MARK: Scalars

    @inline(__always)
    func isNil(_ o: UnsafePointer<msgpack_object>) -> Bool { o.pointee.type == MSGPACK_OBJECT_NIL }

    func bool(_ o: UnsafePointer<msgpack_object>, _ key: (any CodingKey)?) throws -> Bool {
        guard o.pointee.type == MSGPACK_OBJECT_BOOLEAN else { throw mismatch(o, "bool", key) }
        return o.pointee.via.boolean
    }

    @inline(__always)
    func integer<T: FixedWidthInteger>(_ o: UnsafePointer<msgpack_object>, _ type: T.Type, _ key: (any CodingKey)?) throws -> T {
        let value: T?
        switch o.pointee.type {
        case MSGPACK_OBJECT_POSITIVE_INTEGER: value = T(exactly: o.pointee.via.u64)
        case MSGPACK_OBJECT_NEGATIVE_INTEGER: value = T(exactly: o.pointee.via.i64)
        default: throw mismatch(o, T.isSigned ? "integer" : "unsigned integer", key)
        }
        guard let value else {
            throw error(.valueOutOfRange, o, key, "\(Self.typeName(o)) does not fit \(T.self)")
        }
        return value
    }

    func double(_ o: UnsafePointer<msgpack_object>, _ key: (any CodingKey)?) throws -> Double {
        switch o.pointee.type {
        case MSGPACK_OBJECT_FLOAT64, MSGPACK_OBJECT_FLOAT32: return o.pointee.via.f64
        case MSGPACK_OBJECT_POSITIVE_INTEGER:
            if let value = Double(exactly: o.pointee.via.u64) { return value }
        case MSGPACK_OBJECT_NEGATIVE_INTEGER:
            if let value = Double(exactly: o.pointee.via.i64) { return value }
        default: throw mismatch(o, "float", key)
        }
        throw error(.valueOutOfRange, o, key, "\(Self.typeName(o)) has no exact Double")
    }

    func float(_ o: UnsafePointer<msgpack_object>, _ key: (any CodingKey)?) throws -> Float {
        switch o.pointee.type {
        case MSGPACK_OBJECT_FLOAT32: return Float(o.pointee.via.f64)
        case MSGPACK_OBJECT_FLOAT64:
            let value = o.pointee.via.f64
            if value.isNaN { return .nan }
            if let exact = Float(exactly: value) { return exact }
        case MSGPACK_OBJECT_POSITIVE_INTEGER:
            if let value = Float(exactly: o.pointee.via.u64) { return value }
        case MSGPACK_OBJECT_NEGATIVE_INTEGER:
            if let value = Float(exactly: o.pointee.via.i64) { return value }
        default: throw mismatch(o, "float", key)
        }
        throw error(.valueOutOfRange, o, key, "\(Self.typeName(o)) has no exact Float")
    }

    func string(_ o: UnsafePointer<msgpack_object>, _ key: (any CodingKey)?) throws -> String {
        guard o.pointee.type == MSGPACK_OBJECT_STR else { throw mismatch(o, "str", key) }
        let str = o.pointee.via.str
        guard let ptr = str.ptr, str.size > 0 else { return "" }
        let bytes = UnsafeBufferPointer(start: UnsafeRawPointer(ptr).assumingMemoryBound(to: UInt8.self), count: Int(str.size))
        // `String(decoding:)` is the stdlib's fast path but repairs bad UTF-8 with
        // U+FFFD; ASCII needs no check, otherwise the input was valid exactly
        // when nothing changed.
        var value = String(decoding: bytes, as: UTF8.self)
        if Self.isASCII(UnsafeRawPointer(ptr), bytes.count) { return value }
        let unchanged = value.withUTF8 { utf8 in
            guard utf8.count == bytes.count, let a = utf8.baseAddress, let b = bytes.baseAddress else { return false }
            return memcmp(a, b, bytes.count) == 0
        }
        guard unchanged else {
            throw error(.invalidUTF8, o, key, "str of \(str.size) bytes is not valid UTF-8")
        }
        return value
    }

    @inline(__always)
    static func isASCII(_ p: UnsafeRawPointer, _ n: Int) -> Bool {
        var i = 0
        while i + 8 <= n {
            if p.loadUnaligned(fromByteOffset: i, as: UInt64.self) & 0x8080_8080_8080_8080 != 0 { return false }
            i += 8
        }
        while i < n {
            if p.load(fromByteOffset: i, as: UInt8.self) & 0x80 != 0 { return false }
            i += 1
        }
        return true
    }

    func binary(_ o: UnsafePointer<msgpack_object>, _ key: (any CodingKey)?) throws -> UnsafeRawBufferPointer {
        guard o.pointee.type == MSGPACK_OBJECT_BIN else { throw mismatch(o, "bin", key) }
        let bin = o.pointee.via.bin
        return UnsafeRawBufferPointer(start: bin.ptr, count: bin.ptr == nil ? 0 : Int(bin.size))
    }

    func data(_ o: UnsafePointer<msgpack_object>, _ key: (any CodingKey)?) throws -> Data {
        let raw = try binary(o, key)
        guard let base = raw.baseAddress, raw.count > 0 else { return Data() }
        return Data(bytes: base, count: raw.count)
    }

    func byteArray(_ o: UnsafePointer<msgpack_object>, _ key: (any CodingKey)?) throws -> [UInt8] {
        Self.copy(try binary(o, key))
    }

    /// One allocation and a memcpy. `Array(UnsafeRawBufferPointer)` copies with
    /// memcpy and is about 30 ns faster per array than `init(unsafeUninitializedCapacity:)`,
    /// whose unspecialized buffer initializer looks up generic metadata on every call.
    static func copy(_ raw: UnsafeRawBufferPointer) -> [UInt8] {
        guard raw.count > 0 else { return [] }
        return Array(raw)
    }

    func timestamp(_ o: UnsafePointer<msgpack_object>, _ key: (any CodingKey)?) throws -> MessagePackTimestamp {
        guard o.pointee.type == MSGPACK_OBJECT_EXT, o.pointee.via.ext.type == -1 else {
            throw mismatch(o, "timestamp (ext type -1)", key)
        }
        let ext = o.pointee.via.ext
        let payload = UnsafeRawBufferPointer(start: ext.ptr, count: ext.ptr == nil ? 0 : Int(ext.size))
        guard let value = MessagePackTimestamp.parse(payload) else {
            throw error(.invalidTimestamp, o, key, "timestamp of \(ext.size) bytes is not a valid 32, 64 or 96-bit form")
        }
        return value
    }

    // MARK: Values

    /// Reads one value; `key` (the value's key or index) joins the coding path
    /// only when the type runs its own `init(from:)`, so primitives cost nothing.
    func decodeValue<T: Decodable>(_ type: T.Type, _ o: UnsafePointer<msgpack_object>, key: (any CodingKey)? = nil) throws -> T {
        // Types with their own MessagePack form, and primitives reached through
        // generic code (array elements), skip the Decoder machinery.
        if T.self == String.self { return identity(try string(o, key), as: T.self) }
        if T.self == Int.self { return identity(try integer(o, Int.self, key), as: T.self) }
        if T.self == Data.self { return identity(try data(o, key), as: T.self) }
        if ObjectIdentifier(T.self) == knownBytesArray, o.pointee.type == MSGPACK_OBJECT_BIN { return identity(try byteArray(o, key), as: T.self) }
        if T.self == Date.self { return identity(try timestamp(o, key).date, as: T.self) }
        if T.self == MessagePackTimestamp.self { return identity(try timestamp(o, key), as: T.self) }
        if T.self == Bool.self { return identity(try bool(o, key), as: T.self) }
        if T.self == Double.self { return identity(try double(o, key), as: T.self) }
        if T.self == UInt64.self { return identity(try integer(o, UInt64.self, key), as: T.self) }
        if T.self == Int64.self { return identity(try integer(o, Int64.self, key), as: T.self) }
        if T.self == UInt32.self { return identity(try integer(o, UInt32.self, key), as: T.self) }
        if T.self == Float.self { return identity(try float(o, key), as: T.self) }
        if let key { keys.append(key) }
        defer { if key != nil { keys.removeLast() } }
        if T.self == MessagePackValue.self { return identity(try value(o), as: T.self) }
        return try T(from: MPDecoder(state: self, object: o, keyDepth: keys.count))
    }

    /// Converts a subtree into a dynamic value; depth is bounded by the pre-scan.
    func value(_ o: UnsafePointer<msgpack_object>) throws -> MessagePackValue {
        switch o.pointee.type {
        case MSGPACK_OBJECT_NIL: return .nil
        case MSGPACK_OBJECT_BOOLEAN: return .bool(o.pointee.via.boolean)
        case MSGPACK_OBJECT_POSITIVE_INTEGER: return .uint(o.pointee.via.u64)
        case MSGPACK_OBJECT_NEGATIVE_INTEGER: return .int(o.pointee.via.i64)
        case MSGPACK_OBJECT_FLOAT32: return .float(Float(o.pointee.via.f64))
        case MSGPACK_OBJECT_FLOAT64: return .double(o.pointee.via.f64)
        case MSGPACK_OBJECT_STR: return .string(try string(o, nil))
        case MSGPACK_OBJECT_BIN: return .binary(try byteArray(o, nil))
        case MSGPACK_OBJECT_EXT:
            let ext = o.pointee.via.ext
            if ext.type == -1 {
                let t = try timestamp(o, nil)
                return .timestamp(seconds: t.seconds, nanoseconds: t.nanoseconds)
            }
            return .extended(type: ext.type, data: Self.copy(UnsafeRawBufferPointer(start: ext.ptr, count: ext.ptr == nil ? 0 : Int(ext.size))))
        case MSGPACK_OBJECT_ARRAY:
            let array = o.pointee.via.array
            var elements: [MessagePackValue] = []
            elements.reserveCapacity(Int(array.size))
            if let ptr = array.ptr {
                for i in 0..<Int(array.size) {
                    keys.append(IndexKey(i))
                    defer { keys.removeLast() }
                    elements.append(try value(ptr + i))
                }
            }
            return .array(elements)
        case MSGPACK_OBJECT_MAP:
            let map = o.pointee.via.map
            var entries: [MessagePackEntry] = []
            entries.reserveCapacity(Int(map.size))
            if let ptr = map.ptr {
                for i in 0..<Int(map.size) {
                    let keyObject = UnsafeRawPointer(ptr + i).assumingMemoryBound(to: msgpack_object.self)
                    let key = try value(keyObject)
                    keys.append(MapKey(key))
                    defer { keys.removeLast() }
                    entries.append(MessagePackEntry(key: key, value: try value(Self.valuePointer(ptr + i))))
                }
            }
            return .map(entries)
        default:
            throw error(.invalidInput, o, nil, "unknown msgpack-c object type \(o.pointee.type.rawValue)")
        }
    }

    @inline(__always)
    static func valuePointer(_ entry: UnsafePointer<msgpack_object_kv>) -> UnsafePointer<msgpack_object> {
        (UnsafeRawPointer(entry) + valueOffset).assumingMemoryBound(to: msgpack_object.self)
    }

    @inline(__always)
    static func keyPointer(_ entry: UnsafePointer<msgpack_object_kv>) -> UnsafePointer<msgpack_object> {
        UnsafeRawPointer(entry).assumingMemoryBound(to: msgpack_object.self)
    }
}

/// Names a dynamic map key in error paths.
private struct MapKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(_ key: MessagePackValue) {
        if case .string(let s) = key { stringValue = s } else { stringValue = "<\(key)>" }
    }
    init?(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { return nil }
}

// MARK: - Decoder

struct MPDecoder: Decoder, SingleValueDecodingContainer {
    let state: DecoderState
    let object: UnsafePointer<msgpack_object>
    let keyDepth: Int

    var codingPath: [any CodingKey] { Array(state.keys.prefix(keyDepth)) }
    var userInfo: [CodingUserInfoKey: Any] { state.userInfo }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard object.pointee.type == MSGPACK_OBJECT_MAP else { throw state.mismatch(object, "map", nil) }
        return KeyedDecodingContainer(MPKeyedDecoder<Key>(state: state, map: object.pointee.via.map, keyDepth: keyDepth))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        guard object.pointee.type == MSGPACK_OBJECT_ARRAY else { throw state.mismatch(object, "array", nil) }
        return MPUnkeyedDecoder(state: state, array: object.pointee.via.array, keyDepth: keyDepth)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer { self }

    func decodeNil() -> Bool { state.isNil(object) }
    func decode(_ type: Bool.Type) throws -> Bool { try state.bool(object, nil) }
    func decode(_ type: String.Type) throws -> String { try state.string(object, nil) }
    func decode(_ type: Double.Type) throws -> Double { try state.double(object, nil) }
    func decode(_ type: Float.Type) throws -> Float { try state.float(object, nil) }
    func decode(_ type: Int.Type) throws -> Int { try state.integer(object, type, nil) }
    func decode(_ type: Int8.Type) throws -> Int8 { try state.integer(object, type, nil) }
    func decode(_ type: Int16.Type) throws -> Int16 { try state.integer(object, type, nil) }
    func decode(_ type: Int32.Type) throws -> Int32 { try state.integer(object, type, nil) }
    func decode(_ type: Int64.Type) throws -> Int64 { try state.integer(object, type, nil) }
    func decode(_ type: UInt.Type) throws -> UInt { try state.integer(object, type, nil) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try state.integer(object, type, nil) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try state.integer(object, type, nil) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try state.integer(object, type, nil) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try state.integer(object, type, nil) }
    func decode<T: Decodable>(_ type: T.Type) throws -> T { try state.decodeValue(type, object) }
}

struct MPKeyedDecoder<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let state: DecoderState
    let map: msgpack_object_map
    let keyDepth: Int

    var codingPath: [any CodingKey] { Array(state.keys.prefix(keyDepth)) }

    var allKeys: [Key] {
        guard let ptr = map.ptr else { return [] }
        return (0..<Int(map.size)).compactMap { i in
            let keyObject = DecoderState.keyPointer(ptr + i)
            guard let name = try? state.string(keyObject, nil) else { return nil }
            return Key(stringValue: name)
        }
    }

    /// Linear scan: messages have few keys, and this allocates nothing.
    @inline(__always)
    private func find(_ key: Key) -> UnsafePointer<msgpack_object>? { find(name: key.stringValue) }

    @inline(__always)
    private func find(name: String) -> UnsafePointer<msgpack_object>? {
        // Key names are literals (native strings), which lend their UTF-8 without a copy.
        if let found = name.utf8.withContiguousStorageIfAvailable({ find(utf8: $0) }) { return found }
        var name = name
        return name.withUTF8 { find(utf8: $0) }
    }

    @inline(__always)
    private func find(utf8: UnsafeBufferPointer<UInt8>) -> UnsafePointer<msgpack_object>? {
        guard let entries = map.ptr else { return nil }
        let size = UInt32(utf8.count)
        for i in 0..<Int(map.size) {
            let entry = UnsafePointer(entries + i)
            let k = DecoderState.keyPointer(entry)
            guard k.pointee.type == MSGPACK_OBJECT_STR, k.pointee.via.str.size == size else { continue }
            if size == 0 { return DecoderState.valuePointer(entry) }
            guard let bytes = k.pointee.via.str.ptr, let wanted = utf8.baseAddress else { continue }
            // Keys are short: compare the first byte inline before calling memcmp.
            guard UInt8(bitPattern: bytes.pointee) == wanted.pointee else { continue }
            if memcmp(bytes, wanted, utf8.count) == 0 { return DecoderState.valuePointer(entry) }
        }
        return nil
    }

    @inline(__always)
    private func require(_ key: Key) throws -> UnsafePointer<msgpack_object> {
        guard let value = find(key) else {
            throw MessagePackError(code: .keyNotFound, codingPath: state.path(key), message: "map has no key \"\(key.stringValue)\"")
        }
        return value
    }

    func contains(_ key: Key) -> Bool { find(key) != nil }

    func decodeNil(forKey key: Key) throws -> Bool { state.isNil(try require(key)) }
    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try state.bool(try require(key), key) }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try state.string(try require(key), key) }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try state.double(try require(key), key) }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try state.float(try require(key), key) }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try state.integer(try require(key), type, key) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try state.integer(try require(key), type, key) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try state.integer(try require(key), type, key) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try state.integer(try require(key), type, key) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try state.integer(try require(key), type, key) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try state.integer(try require(key), type, key) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try state.integer(try require(key), type, key) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try state.integer(try require(key), type, key) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try state.integer(try require(key), type, key) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try state.integer(try require(key), type, key) }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        return try state.decodeValue(type, try require(key), key: key)
    }

    /// One lookup instead of the default's three (contains, decodeNil, decode).
    @inline(__always)
    private func present(_ key: Key) -> UnsafePointer<msgpack_object>? {
        guard let value = find(key), !state.isNil(value) else { return nil }
        return value
    }

    func decodeIfPresent(_ type: Bool.Type, forKey key: Key) throws -> Bool? { try present(key).map { try state.bool($0, key) } }
    func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? { try present(key).map { try state.string($0, key) } }
    func decodeIfPresent(_ type: Double.Type, forKey key: Key) throws -> Double? { try present(key).map { try state.double($0, key) } }
    func decodeIfPresent(_ type: Float.Type, forKey key: Key) throws -> Float? { try present(key).map { try state.float($0, key) } }
    func decodeIfPresent(_ type: Int.Type, forKey key: Key) throws -> Int? { try present(key).map { try state.integer($0, type, key) } }
    func decodeIfPresent(_ type: Int8.Type, forKey key: Key) throws -> Int8? { try present(key).map { try state.integer($0, type, key) } }
    func decodeIfPresent(_ type: Int16.Type, forKey key: Key) throws -> Int16? { try present(key).map { try state.integer($0, type, key) } }
    func decodeIfPresent(_ type: Int32.Type, forKey key: Key) throws -> Int32? { try present(key).map { try state.integer($0, type, key) } }
    func decodeIfPresent(_ type: Int64.Type, forKey key: Key) throws -> Int64? { try present(key).map { try state.integer($0, type, key) } }
    func decodeIfPresent(_ type: UInt.Type, forKey key: Key) throws -> UInt? { try present(key).map { try state.integer($0, type, key) } }
    func decodeIfPresent(_ type: UInt8.Type, forKey key: Key) throws -> UInt8? { try present(key).map { try state.integer($0, type, key) } }
    func decodeIfPresent(_ type: UInt16.Type, forKey key: Key) throws -> UInt16? { try present(key).map { try state.integer($0, type, key) } }
    func decodeIfPresent(_ type: UInt32.Type, forKey key: Key) throws -> UInt32? { try present(key).map { try state.integer($0, type, key) } }
    func decodeIfPresent(_ type: UInt64.Type, forKey key: Key) throws -> UInt64? { try present(key).map { try state.integer($0, type, key) } }

    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
        guard let value = present(key) else { return nil }
        return try state.decodeValue(type, value, key: key)
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
        let value = try require(key)
        guard value.pointee.type == MSGPACK_OBJECT_MAP else { throw state.mismatch(value, "map", key) }
        // Nested containers outlive this call, so their path cannot use the shared stack.
        return KeyedDecodingContainer(MPKeyedDecoder<NestedKey>(state: state, map: value.pointee.via.map, keyDepth: keyDepth))
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        let value = try require(key)
        guard value.pointee.type == MSGPACK_OBJECT_ARRAY else { throw state.mismatch(value, "array", key) }
        return MPUnkeyedDecoder(state: state, array: value.pointee.via.array, keyDepth: keyDepth)
    }

    func superDecoder() throws -> any Decoder {
        guard let value = find(name: "super") else {
            throw MessagePackError(code: .keyNotFound, codingPath: state.path(nil), message: "map has no key \"super\"")
        }
        return MPDecoder(state: state, object: value, keyDepth: keyDepth)
    }

    func superDecoder(forKey key: Key) throws -> any Decoder {
        MPDecoder(state: state, object: try require(key), keyDepth: keyDepth)
    }
}

struct MPUnkeyedDecoder: UnkeyedDecodingContainer {
    let state: DecoderState
    let array: msgpack_object_array
    let keyDepth: Int
    private(set) var currentIndex = 0

    init(state: DecoderState, array: msgpack_object_array, keyDepth: Int) {
        self.state = state
        self.array = array
        self.keyDepth = keyDepth
    }

    var codingPath: [any CodingKey] { Array(state.keys.prefix(keyDepth)) }
    var count: Int? { Int(array.size) }
    var isAtEnd: Bool { currentIndex >= Int(array.size) }

    @inline(__always)
    private func current() throws -> UnsafePointer<msgpack_object> {
        guard currentIndex < Int(array.size), let ptr = array.ptr else {
            throw MessagePackError(code: .valueNotFound, codingPath: state.path(IndexKey(currentIndex)), message: "array has only \(array.size) elements")
        }
        return UnsafePointer(ptr + currentIndex)
    }

    @inline(__always)
    private mutating func next<T>(_ read: (DecoderState, UnsafePointer<msgpack_object>, IndexKey) throws -> T) throws -> T {
        let value = try read(state, try current(), IndexKey(currentIndex))
        currentIndex += 1
        return value
    }

    mutating func decodeNil() throws -> Bool {
        guard try state.isNil(current()) else { return false }
        currentIndex += 1
        return true
    }

    mutating func decode(_ type: Bool.Type) throws -> Bool { try next { s, o, k in try s.bool(o, k) } }
    mutating func decode(_ type: String.Type) throws -> String { try next { s, o, k in try s.string(o, k) } }
    mutating func decode(_ type: Double.Type) throws -> Double { try next { s, o, k in try s.double(o, k) } }
    mutating func decode(_ type: Float.Type) throws -> Float { try next { s, o, k in try s.float(o, k) } }
    mutating func decode(_ type: Int.Type) throws -> Int { try next { s, o, k in try s.integer(o, type, k) } }
    mutating func decode(_ type: Int8.Type) throws -> Int8 { try next { s, o, k in try s.integer(o, type, k) } }
    mutating func decode(_ type: Int16.Type) throws -> Int16 { try next { s, o, k in try s.integer(o, type, k) } }
    mutating func decode(_ type: Int32.Type) throws -> Int32 { try next { s, o, k in try s.integer(o, type, k) } }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { try next { s, o, k in try s.integer(o, type, k) } }
    mutating func decode(_ type: UInt.Type) throws -> UInt { try next { s, o, k in try s.integer(o, type, k) } }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try next { s, o, k in try s.integer(o, type, k) } }
    mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try next { s, o, k in try s.integer(o, type, k) } }
    mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try next { s, o, k in try s.integer(o, type, k) } }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try next { s, o, k in try s.integer(o, type, k) } }

    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
        let result = try state.decodeValue(type, try current(), key: IndexKey(currentIndex))
        currentIndex += 1
        return result
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        let value = try current()
        guard value.pointee.type == MSGPACK_OBJECT_MAP else { throw state.mismatch(value, "map", IndexKey(currentIndex)) }
        currentIndex += 1
        return KeyedDecodingContainer(MPKeyedDecoder<NestedKey>(state: state, map: value.pointee.via.map, keyDepth: keyDepth))
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        let value = try current()
        guard value.pointee.type == MSGPACK_OBJECT_ARRAY else { throw state.mismatch(value, "array", IndexKey(currentIndex)) }
        currentIndex += 1
        return MPUnkeyedDecoder(state: state, array: value.pointee.via.array, keyDepth: keyDepth)
    }

    mutating func superDecoder() throws -> any Decoder {
        let value = try current()
        currentIndex += 1
        return MPDecoder(state: state, object: value, keyDepth: keyDepth)
    }
}
