import CMsgPack
import Foundation
import Synchronization

/// Encodes `Encodable` values as MessagePack through msgpack-c's packer.
///
/// Structs become maps keyed by their `CodingKey` strings, arrays become arrays,
/// `[String: V]` becomes a map, `Data` and `[UInt8]` become `bin`, `Date` and
/// ``MessagePackTimestamp`` become the timestamp extension (type −1) in the
/// smallest exact form, and enums with raw values encode their raw value.
/// Integers use the smallest format that holds them (non-negative values as
/// positive fixint/uint*, negative values as negative fixint/int*).
///
/// ```swift
/// struct Heartbeat: Codable { var type: String; var requestId: UInt64; var sentAt: Date }
/// let bytes = try MessagePackEncoder().encode(Heartbeat(type: "hb", requestId: 7, sentAt: .now))
/// ```
public struct MessagePackEncoder: Sendable {
    /// Values handed to `encode(to:)` implementations through `Encoder.userInfo`.
    public var userInfo: [CodingUserInfoKey: any Sendable] = [:]

    /// Whether values that conform to ``MessagePackWritable`` (at the top level
    /// or nested in Codable values) write themselves instead of going through
    /// `encode(to:)`. Both produce the same bytes; tests turn this off to compare.
    public var usesFastPath = true

    /// Creates an encoder.
    public init() {}

    /// Encodes `value`.
    /// - Parameter value: The value to encode.
    /// - Returns: The MessagePack bytes.
    /// - Throws: ``MessagePackError`` (for example `invalidTimestamp` for a non-finite `Date`),
    ///   or whatever the value's `encode(to:)` throws.
    public func encode<T: Encodable>(_ value: T) throws -> [UInt8] {
        // Generic callers (whose static type does not show the conformance) still get the fast path.
        if usesFastPath, let writable = asWritable(value) {
            return try encodeWritable(writable)
        }
        let state = EncoderState(userInfo: userInfo, usesFastPath: usesFastPath)
        try state.encodeTopLevel(value)
        return try state.finish()
    }

    /// Encodes `value` through its ``MessagePackWritable`` conformance
    /// (the same bytes as its `Encodable` conformance, faster).
    public func encode<T: Encodable & MessagePackWritable>(_ value: T) throws -> [UInt8] {
        if !usesFastPath {
            let state = EncoderState(userInfo: userInfo, usesFastPath: false)
            try state.encodeTopLevel(value)
            return try state.finish()
        }
        return try encodeWritable(value)
    }

    /// Encodes `value` into `Data`.
    /// - Throws: as `encode(_:)`.
    public func encodeData<T: Encodable>(_ value: T) throws -> Data {
        if usesFastPath, let writable = asWritable(value) {
            return Data(try encodeWritable(writable))
        }
        let state = EncoderState(userInfo: userInfo, usesFastPath: usesFastPath)
        try state.encodeTopLevel(value)
        if let oversize = state.oversize { throw oversize }
        defer { recordEncodedSize(state.sink.count) }
        guard let storage = state.sink.storage, state.sink.count > 0 else { return Data() }
        return Data(bytes: storage, count: state.sink.count)
    }
}

/// Reinterprets `value` as `U` once the caller has checked that `T` is `U`.
/// In unspecialized generic code `as?` looks up `Optional<U>` metadata at run
/// time on every call; after the identity check this is free and cannot fail.
@inline(__always)
func identity<T, U>(_ value: T, as type: U.Type) -> U {
    unsafeBitCast(value, to: U.self)
}

/// `[UInt8]`'s metadata, looked up once (generic metadata costs a cache lookup each time).
let knownBytesArray = ObjectIdentifier([UInt8].self)

/// One array or map whose header awaits its final count.
struct OpenContainer {
    var id: Int
    var headerOffset: Int
    var count: Int
    var isMap: Bool
}

/// Size of the last message encoded, so the next buffer starts big enough:
/// growing a buffer for a 64 KB message costs more than the encoding itself.
/// Capped so one huge message does not make every later one allocate a lot.
private let lastEncodedSize = Atomic<Int>(0)

func recordEncodedSize(_ size: Int) {
    lastEncodedSize.store(size, ordering: .relaxed)
}

func lastEncodedSizeHint() -> Int {
    lastEncodedSize.load(ordering: .relaxed)
}

/// The state of one `encode` call: output, open containers and the key path.
///
/// Values are written straight to the output as Codable hands them over; each
/// container writes a one-byte placeholder header that is patched (through
/// msgpack-c) when the container closes. Containers close in stack order, which
/// is the order synthesized and ordinary hand-written `encode(to:)` use.
final class EncoderState {
    let sink = ByteSink(capacity: min(lastEncodedSize.load(ordering: .relaxed) + 64, 256 << 10))
    // One encode call owns this state; skip the runtime exclusivity checks.
    @exclusivity(unchecked) var open: [OpenContainer] = []
    @exclusivity(unchecked) var keys: [any CodingKey] = []
    @exclusivity(unchecked) private var nextID = 1
    /// Set when a str, bin or ext was longer than MessagePack can express (2³²−1 bytes);
    /// the writers cannot throw, so the whole encode fails at the end.
    var oversize: MessagePackError?
    let userInfo: [CodingUserInfoKey: Any]
    let usesFastPath: Bool

    init(userInfo: [CodingUserInfoKey: any Sendable], usesFastPath: Bool = true) {
        var info: [CodingUserInfoKey: Any] = [:]
        for (key, value) in userInfo { info[key] = value }
        self.userInfo = info
        self.usesFastPath = usesFastPath
    }

    /// Writes a ``MessagePackWritable`` value straight into the free space of
    /// the output, growing it and writing again if the value did not fit.
    func writeWritable<W: MessagePackWritable>(_ value: W) throws {
        // As in `encodeWritable`: a pure `write(to:)` needs two attempts at most.
        for _ in 0..<4 {
            let (base, free) = sink.freeSpace
            var writer = MessagePackWriter(base: base, capacity: free)
            try value.write(to: &writer)
            if let failure = writer.failure {
                if oversize == nil { oversize = failure }
                return
            }
            if !writer.overflowed {
                sink.commit(writer.count)
                return
            }
            sink.reserve(writer.count)
            guard sink.freeSpace.count >= writer.count else {
                throw error("cannot grow the output to \(sink.count + writer.count) bytes", code: .sizeLimitExceeded)
            }
        }
        throw error("\(W.self).write(to:) wrote a different size on every attempt")
    }

    var packer: UnsafeMutablePointer<msgpack_packer> { sink.packer }

    func finish() throws -> [UInt8] {
        if let oversize { throw oversize }
        recordEncodedSize(sink.count)
        return sink.bytes
    }

    func encodeTopLevel<T: Encodable>(_ value: T) throws {
        try encodeValue(value, level: 0)
    }

    func error(_ message: String, code: MessagePackError.Code = .invalidEncoderUse) -> MessagePackError {
        MessagePackError(code: code, codingPath: MessagePackError.render(keys), message: message)
    }

    /// Opens a container at stack index `level`, closing finished ones above.
    func openContainer(level: Int, isMap: Bool) -> (index: Int, id: Int) {
        closeContainers(downTo: level)
        let id = nextID
        nextID += 1
        open.append(OpenContainer(id: id, headerOffset: sink.count, count: 0, isMap: isMap))
        sink.appendByte(isMap ? 0x80 : 0x90)
        return (open.count - 1, id)
    }

    /// Closes (patches the headers of) every container at index `level` and above.
    @inline(__always)
    func closeContainers(downTo level: Int) {
        while open.count > level {
            let container = open.removeLast()
            if container.count > 15 {
                sink.patchHeader(at: container.headerOffset, elements: container.count, isMap: container.isMap)
            } else {
                // fixarray/fixmap: patch the single byte without a copy.
                let marker: UInt8 = (container.isMap ? 0x80 : 0x90) | UInt8(container.count)
                sink.setByte(marker, at: container.headerOffset)
            }
        }
    }

    /// Makes container `index` (identified by `id`) the innermost open one, so
    /// that it can take another element; fails if it was already closed.
    @inline(__always)
    func enter(_ index: Int, _ id: Int) throws {
        guard index < open.count, open[index].id == id else {
            throw error("a container was written to after its parent moved on")
        }
        if open.count > index + 1 { closeContainers(downTo: index + 1) }
        open[index].count += 1
    }

    // MARK: Values

    /// Writes one value; `key` (the value's key or index) joins the coding path
    /// only when the value runs its own `encode(to:)`, so primitives cost nothing.
    func encodeValue<T: Encodable>(_ value: T, level: Int, key: (any CodingKey)? = nil, index: Int = -1) throws {
        // Types with their own MessagePack form, and primitives reached through
        // generic code (array elements), skip the Encoder machinery.
        if T.self == String.self { return writeString(identity(value, as: String.self)) }
        if T.self == Int.self { return writeInt(Int64(identity(value, as: Int.self))) }
        if T.self == Data.self { return writeBinary(identity(value, as: Data.self)) }
        if ObjectIdentifier(T.self) == knownBytesArray { return writeBinary(identity(value, as: [UInt8].self)) }
        if T.self == Date.self { return try writeTimestamp(MessagePackTimestamp(identity(value, as: Date.self))) }
        if T.self == MessagePackTimestamp.self { return try writeTimestamp(identity(value, as: MessagePackTimestamp.self)) }
        if T.self == MessagePackValue.self { return try write(identity(value, as: MessagePackValue.self)) }
        if T.self == Bool.self { return writeBool(identity(value, as: Bool.self)) }
        if T.self == Double.self { return writeDouble(identity(value, as: Double.self)) }
        if T.self == UInt64.self { return writeUInt(identity(value, as: UInt64.self)) }
        if T.self == Int64.self { return writeInt(identity(value, as: Int64.self)) }
        if T.self == UInt32.self { return writeUInt(UInt64(identity(value, as: UInt32.self))) }
        if T.self == Float.self { return writeFloat(identity(value, as: Float.self)) }
        closeContainers(downTo: level)
        if usesFastPath, let writable = asWritable(value) {
            return try writeWritable(writable)
        }
        let before = sink.count
        // Array elements pass a plain index; the key is built only here.
        let pushed = key ?? (index >= 0 ? IndexKey(index) : nil)
        if let pushed { keys.append(pushed) }
        defer { if pushed != nil { keys.removeLast() } }
        try value.encode(to: MPEncoder(state: self, level: level, keyDepth: keys.count))
        closeContainers(downTo: level)
        if sink.count == before {
            // `encode(to:)` wrote nothing: write an empty map, as JSONEncoder writes {}.
            sink.appendByte(0x80)
        }
    }

    @inline(__always) func writeNil() { _ = msgpack_pack_nil(packer) }
    @inline(__always) func writeBool(_ v: Bool) { _ = v ? msgpack_pack_true(packer) : msgpack_pack_false(packer) }
    @inline(__always) func writeInt(_ v: Int64) { _ = msgpack_pack_int64(packer, v) }
    @inline(__always) func writeUInt(_ v: UInt64) { _ = msgpack_pack_uint64(packer, v) }
    @inline(__always) func writeFloat(_ v: Float) { _ = msgpack_pack_float(packer, v) }
    @inline(__always) func writeDouble(_ v: Double) { _ = msgpack_pack_double(packer, v) }

    func writeString(_ v: String) {
        // Native strings (all literals and decoded strings) lend their UTF-8 without a copy.
        let done: Void? = v.utf8.withContiguousStorageIfAvailable { utf8 in writeUTF8(utf8) }
        if done == nil {
            var string = v
            string.withUTF8 { writeUTF8($0) }
        }
    }

    @inline(__always)
    private func fits(_ count: Int, _ what: String) -> Bool {
        if count <= UInt32.max { return true }
        oversize = error("\(what) of \(count) bytes is longer than MessagePack allows (2^32-1)", code: .sizeLimitExceeded)
        return false
    }

    @inline(__always)
    private func writeUTF8(_ utf8: UnsafeBufferPointer<UInt8>) {
        guard fits(utf8.count, "str") else { return }
        _ = msgpack_pack_str(packer, utf8.count)
        if let base = utf8.baseAddress { _ = msgpack_pack_str_body(packer, base, utf8.count) }
    }

    /// Writes a key; CodingKey strings of synthesized keys are literals, so this does not allocate.
    @inline(__always) func writeKey(_ key: some CodingKey) { writeString(key.stringValue) }

    func writeBinary(_ v: Data) {
        guard fits(v.count, "bin") else { return }
        _ = msgpack_pack_bin(packer, v.count)
        v.withUnsafeBytes { raw in
            if let base = raw.baseAddress { _ = msgpack_pack_bin_body(packer, base, raw.count) }
        }
    }

    func writeBinary(_ v: [UInt8]) {
        guard fits(v.count, "bin") else { return }
        _ = msgpack_pack_bin(packer, v.count)
        v.withUnsafeBytes { raw in
            if let base = raw.baseAddress { _ = msgpack_pack_bin_body(packer, base, raw.count) }
        }
    }

    func writeTimestamp(_ v: MessagePackTimestamp) throws {
        guard v.nanoseconds < 1_000_000_000 else {
            throw error("timestamp nanoseconds \(v.nanoseconds) not below 1,000,000,000", code: .invalidTimestamp)
        }
        var ts = msgpack_timestamp(tv_sec: v.seconds, tv_nsec: v.nanoseconds)
        _ = msgpack_pack_timestamp(packer, &ts)
    }

    func writeExtension(type: Int8, data: [UInt8]) {
        guard fits(data.count, "ext") else { return }
        _ = msgpack_pack_ext(packer, data.count, type)
        data.withUnsafeBytes { raw in
            if let base = raw.baseAddress { _ = msgpack_pack_ext_body(packer, base, raw.count) }
        }
    }

    /// Writes a dynamic value; depth is bounded by the value the caller built.
    func write(_ value: MessagePackValue) throws {
        switch value {
        case .nil: writeNil()
        case .bool(let v): writeBool(v)
        case .int(let v): writeInt(v)
        case .uint(let v): writeUInt(v)
        case .float(let v): writeFloat(v)
        case .double(let v): writeDouble(v)
        case .string(let v): writeString(v)
        case .binary(let v): writeBinary(v)
        case .array(let elements):
            try checkCount(elements.count)
            _ = msgpack_pack_array(packer, elements.count)
            for element in elements { try write(element) }
        case .map(let entries):
            try checkCount(entries.count)
            _ = msgpack_pack_map(packer, entries.count)
            for entry in entries {
                try write(entry.key)
                try write(entry.value)
            }
        case .extended(let type, let data):
            writeExtension(type: type, data: data)
        case .timestamp(let seconds, let nanoseconds):
            try writeTimestamp(MessagePackTimestamp(seconds: seconds, nanoseconds: nanoseconds))
        }
    }

    private func checkCount(_ count: Int) throws {
        guard count <= UInt32.max else { throw error("collection longer than 2^32-1", code: .sizeLimitExceeded) }
    }
}

// MARK: - Encoder

struct MPEncoder: Encoder {
    let state: EncoderState
    /// Index in `state.open` this encoder's own container gets.
    let level: Int
    let keyDepth: Int

    var codingPath: [any CodingKey] { Array(state.keys.prefix(keyDepth)) }
    var userInfo: [CodingUserInfoKey: Any] { state.userInfo }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        // A second request (e.g. `super.encode(to:)`) shares the map already open.
        if state.open.count > level, state.open[level].isMap {
            state.closeContainers(downTo: level + 1)
            return KeyedEncodingContainer(MPKeyedEncoder<Key>(state: state, index: level, id: state.open[level].id, keyDepth: keyDepth))
        }
        let (index, id) = state.openContainer(level: level, isMap: true)
        return KeyedEncodingContainer(MPKeyedEncoder<Key>(state: state, index: index, id: id, keyDepth: keyDepth))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        let (index, id) = state.openContainer(level: level, isMap: false)
        return MPUnkeyedEncoder(state: state, index: index, id: id, keyDepth: keyDepth)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        MPSingleEncoder(state: state, level: level, keyDepth: keyDepth)
    }
}

struct MPKeyedEncoder<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let state: EncoderState
    let index: Int
    let id: Int
    /// The path is rebuilt on demand so that creating a container allocates nothing.
    let keyDepth: Int
    var extraKey: (any CodingKey)? = nil
    var codingPath: [any CodingKey] {
        var path = Array(state.keys.prefix(keyDepth))
        if let extraKey { path.append(extraKey) }
        return path
    }

    @inline(__always) private func begin(_ key: Key) throws {
        try state.enter(index, id)
        state.writeKey(key)
    }

    mutating func encodeNil(forKey key: Key) throws { try begin(key); state.writeNil() }
    mutating func encode(_ value: Bool, forKey key: Key) throws { try begin(key); state.writeBool(value) }
    mutating func encode(_ value: String, forKey key: Key) throws { try begin(key); state.writeString(value) }
    mutating func encode(_ value: Double, forKey key: Key) throws { try begin(key); state.writeDouble(value) }
    mutating func encode(_ value: Float, forKey key: Key) throws { try begin(key); state.writeFloat(value) }
    mutating func encode(_ value: Int, forKey key: Key) throws { try begin(key); state.writeInt(Int64(value)) }
    mutating func encode(_ value: Int8, forKey key: Key) throws { try begin(key); state.writeInt(Int64(value)) }
    mutating func encode(_ value: Int16, forKey key: Key) throws { try begin(key); state.writeInt(Int64(value)) }
    mutating func encode(_ value: Int32, forKey key: Key) throws { try begin(key); state.writeInt(Int64(value)) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { try begin(key); state.writeInt(value) }
    mutating func encode(_ value: UInt, forKey key: Key) throws { try begin(key); state.writeUInt(UInt64(value)) }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { try begin(key); state.writeUInt(UInt64(value)) }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { try begin(key); state.writeUInt(UInt64(value)) }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { try begin(key); state.writeUInt(UInt64(value)) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { try begin(key); state.writeUInt(value) }

    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        try begin(key)
        try state.encodeValue(value, level: index + 1, key: key)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
        do { try begin(key) } catch { return KeyedEncodingContainer(MPKeyedEncoder<NestedKey>(state: state, index: index + 1, id: 0, keyDepth: keyDepth, extraKey: key)) }
        let (nested, id) = state.openContainer(level: index + 1, isMap: true)
        return KeyedEncodingContainer(MPKeyedEncoder<NestedKey>(state: state, index: nested, id: id, keyDepth: keyDepth, extraKey: key))
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        do { try begin(key) } catch { return MPUnkeyedEncoder(state: state, index: index + 1, id: 0, keyDepth: keyDepth, extraKey: key) }
        let (nested, id) = state.openContainer(level: index + 1, isMap: false)
        return MPUnkeyedEncoder(state: state, index: nested, id: id, keyDepth: keyDepth, extraKey: key)
    }

    mutating func superEncoder() -> any Encoder { superEncoder(key: SuperKey.super) }
    mutating func superEncoder(forKey key: Key) -> any Encoder { superEncoder(key: key) }

    private mutating func superEncoder(key: some CodingKey) -> any Encoder {
        // The key goes out now; the returned encoder must write exactly one value.
        if (try? state.enter(index, id)) != nil { state.writeKey(key) }
        return MPEncoder(state: state, level: index + 1, keyDepth: state.keys.count)
    }
}

enum SuperKey: String, CodingKey { case `super` }

struct MPUnkeyedEncoder: UnkeyedEncodingContainer {
    let state: EncoderState
    let index: Int
    let id: Int
    /// The path is rebuilt on demand so that creating a container allocates nothing.
    let keyDepth: Int
    var extraKey: (any CodingKey)? = nil
    var codingPath: [any CodingKey] {
        var path = Array(state.keys.prefix(keyDepth))
        if let extraKey { path.append(extraKey) }
        return path
    }
    private(set) var count = 0

    init(state: EncoderState, index: Int, id: Int, keyDepth: Int, extraKey: (any CodingKey)? = nil) {
        self.state = state
        self.index = index
        self.id = id
        self.keyDepth = keyDepth
        self.extraKey = extraKey
    }

    @inline(__always) private mutating func begin() throws {
        try state.enter(index, id)
        count += 1
    }

    mutating func encodeNil() throws { try begin(); state.writeNil() }
    mutating func encode(_ value: Bool) throws { try begin(); state.writeBool(value) }
    mutating func encode(_ value: String) throws { try begin(); state.writeString(value) }
    mutating func encode(_ value: Double) throws { try begin(); state.writeDouble(value) }
    mutating func encode(_ value: Float) throws { try begin(); state.writeFloat(value) }
    mutating func encode(_ value: Int) throws { try begin(); state.writeInt(Int64(value)) }
    mutating func encode(_ value: Int8) throws { try begin(); state.writeInt(Int64(value)) }
    mutating func encode(_ value: Int16) throws { try begin(); state.writeInt(Int64(value)) }
    mutating func encode(_ value: Int32) throws { try begin(); state.writeInt(Int64(value)) }
    mutating func encode(_ value: Int64) throws { try begin(); state.writeInt(value) }
    mutating func encode(_ value: UInt) throws { try begin(); state.writeUInt(UInt64(value)) }
    mutating func encode(_ value: UInt8) throws { try begin(); state.writeUInt(UInt64(value)) }
    mutating func encode(_ value: UInt16) throws { try begin(); state.writeUInt(UInt64(value)) }
    mutating func encode(_ value: UInt32) throws { try begin(); state.writeUInt(UInt64(value)) }
    mutating func encode(_ value: UInt64) throws { try begin(); state.writeUInt(value) }

    mutating func encode<T: Encodable>(_ value: T) throws {
        try begin()
        try state.encodeValue(value, level: index + 1, index: count - 1)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        let key = IndexKey(count)
        do { try begin() } catch { return KeyedEncodingContainer(MPKeyedEncoder<NestedKey>(state: state, index: index + 1, id: 0, keyDepth: keyDepth, extraKey: key)) }
        let (nested, id) = state.openContainer(level: index + 1, isMap: true)
        return KeyedEncodingContainer(MPKeyedEncoder<NestedKey>(state: state, index: nested, id: id, keyDepth: keyDepth, extraKey: key))
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        let key = IndexKey(count)
        do { try begin() } catch { return MPUnkeyedEncoder(state: state, index: index + 1, id: 0, keyDepth: keyDepth, extraKey: key) }
        let (nested, id) = state.openContainer(level: index + 1, isMap: false)
        return MPUnkeyedEncoder(state: state, index: nested, id: id, keyDepth: keyDepth, extraKey: key)
    }

    mutating func superEncoder() -> any Encoder {
        _ = try? begin()
        return MPEncoder(state: state, level: index + 1, keyDepth: state.keys.count)
    }
}

struct MPSingleEncoder: SingleValueEncodingContainer {
    let state: EncoderState
    let level: Int
    /// The path is rebuilt on demand so that creating a container allocates nothing.
    let keyDepth: Int
    var extraKey: (any CodingKey)? = nil
    var codingPath: [any CodingKey] {
        var path = Array(state.keys.prefix(keyDepth))
        if let extraKey { path.append(extraKey) }
        return path
    }

    @inline(__always) private func begin() throws {
        guard state.open.count <= level else {
            throw state.error("single value written after a container was opened for the same value")
        }
    }

    mutating func encodeNil() throws { try begin(); state.writeNil() }
    mutating func encode(_ value: Bool) throws { try begin(); state.writeBool(value) }
    mutating func encode(_ value: String) throws { try begin(); state.writeString(value) }
    mutating func encode(_ value: Double) throws { try begin(); state.writeDouble(value) }
    mutating func encode(_ value: Float) throws { try begin(); state.writeFloat(value) }
    mutating func encode(_ value: Int) throws { try begin(); state.writeInt(Int64(value)) }
    mutating func encode(_ value: Int8) throws { try begin(); state.writeInt(Int64(value)) }
    mutating func encode(_ value: Int16) throws { try begin(); state.writeInt(Int64(value)) }
    mutating func encode(_ value: Int32) throws { try begin(); state.writeInt(Int64(value)) }
    mutating func encode(_ value: Int64) throws { try begin(); state.writeInt(value) }
    mutating func encode(_ value: UInt) throws { try begin(); state.writeUInt(UInt64(value)) }
    mutating func encode(_ value: UInt8) throws { try begin(); state.writeUInt(UInt64(value)) }
    mutating func encode(_ value: UInt16) throws { try begin(); state.writeUInt(UInt64(value)) }
    mutating func encode(_ value: UInt32) throws { try begin(); state.writeUInt(UInt64(value)) }
    mutating func encode(_ value: UInt64) throws { try begin(); state.writeUInt(value) }
    mutating func encode<T: Encodable>(_ value: T) throws {
        try begin()
        try state.encodeValue(value, level: level)
    }
}
