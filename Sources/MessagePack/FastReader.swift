import Foundation

/// A type that reads itself from MessagePack, without Codable.
///
/// ``MessagePackDecoder`` uses this instead of `init(from:)` when the type it
/// decodes conforms. The reader checks every header against the limits and the
/// bytes left, as the Codable path's pre-scan does, and validates skipped values
/// with the same scanner. A conformance must accept everything its
/// `Decodable` conformance accepts: keys in any order, unknown keys (skip them
/// with ``MessagePackReader/skipValue()``), optional fields absent or nil, and
/// the first of duplicate keys.
///
/// ```swift
/// extension Point: MessagePackReadable {
///     init(from reader: inout MessagePackReader) throws {
///         var x: Int?, y: Int?
///         for _ in 0..<(try reader.readMapHeader()) {
///             switch try reader.readKey() {
///             case "x" where x == nil: x = try reader.readInteger()
///             case "y" where y == nil: y = try reader.readInteger()
///             default: try reader.skipValue()
///             }
///         }
///         guard let x else { throw reader.missingKey("x") }
///         guard let y else { throw reader.missingKey("y") }
///         self.init(x: x, y: y)
///     }
/// }
/// ```
public protocol MessagePackReadable {
    init(from reader: inout MessagePackReader) throws
}

/// A map key as read from the input; compare it with string literals in a `switch`.
/// Valid only while the value that contains it is being read.
public struct MessagePackKey: CustomStringConvertible {
    @usableFromInline let start: UnsafePointer<UInt8>?
    /// UTF-8 length, or −1 for a key that is not a `str` (it matches no literal).
    @usableFromInline let count: Int

    init(start: UnsafePointer<UInt8>?, count: Int) {
        self.start = start
        self.count = count
    }

    /// True when the key's bytes are the literal's UTF-8.
    @inlinable
    public static func ~= (pattern: StaticString, key: MessagePackKey) -> Bool {
        guard key.count >= 0 else { return false }
        guard pattern.hasPointerRepresentation else { return pattern.description == key.description }
        guard pattern.utf8CodeUnitCount == key.count else { return false }
        guard key.count > 0 else { return true }
        guard let p = key.start else { return false }
        let q = pattern.utf8Start
        for i in 0..<key.count where p[i] != q[i] { return false }
        return true
    }

    public var description: String {
        guard count >= 0, let start else { return "<non-string key>" }
        return String(decoding: UnsafeBufferPointer(start: start, count: count), as: UTF8.self)
    }
}

/// Reads MessagePack values in order, strictly and within ``MessagePackLimits``.
///
/// Every method checks the type it finds and throws a ``MessagePackError`` with
/// the same code and message the Codable decoder would, naming the path
/// relative to the outermost value.
public struct MessagePackReader {
    private let base: UnsafePointer<UInt8>
    private let end: Int
    private let limits: MessagePackLimits
    private let maxDepth: Int
    /// Offset of the next value.
    public private(set) var offset: Int
    /// The key or index of the value being read, for error paths.
    private var current: Component = .none
    /// Containers opened around the next value (restored when a nested
    /// `read`/`readArray` returns; containers a conformance reads inline
    /// count until then, which errs on the strict side).
    private var depth = 0

    fileprivate enum Component {
        case none
        case key(start: Int, count: Int)
        case index(Int)
    }

    init(base: UnsafePointer<UInt8>, count: Int, limits: MessagePackLimits) {
        self.base = base
        self.end = count
        self.offset = 0
        self.limits = limits
        self.maxDepth = min(limits.maxDepth, MessagePackLimits.depthCeiling)
    }

    // MARK: Errors

    private func render(_ component: Component) -> String? {
        switch component {
        case .none: return nil
        case .key(let start, let count):
            return String(decoding: UnsafeBufferPointer(start: base + start, count: count), as: UTF8.self)
        case .index(let i): return "[\(i)]"
        }
    }

    private func error(_ code: MessagePackError.Code, at position: Int, _ message: String) -> MessagePackError {
        MessagePackError(code: code, codingPath: render(current).map { [$0] } ?? [], offset: position, message: message)
    }

    /// The error for a required key that the map lacks.
    public func missingKey(_ name: String) -> MessagePackError {
        MessagePackError(code: .keyNotFound, codingPath: [name], message: "map has no key \"\(name)\"")
    }

    /// The error for a value of the right type that the Swift type rejects
    /// (for example an unknown enum raw value), naming the value just read.
    public func invalidValue(_ message: String) -> MessagePackError {
        MessagePackError(code: .invalidInput, codingPath: render(current).map { [$0] } ?? [], message: message)
    }

    /// Adds the component under which a nested value sat to an error from inside it.
    private func prefixed(_ error: any Error, with component: Component) -> any Error {
        var wrapped: MessagePackError
        if let own = error as? MessagePackError {
            wrapped = own
        } else if let decoding = error as? DecodingError {
            wrapped = MessagePackError(decoding)
        } else {
            return error
        }
        if let name = render(component) { wrapped.codingPath.insert(name, at: 0) }
        return wrapped
    }

    private func mismatch(_ expected: String, at position: Int) -> MessagePackError {
        error(.typeMismatch, at: position, "expected \(expected), found \(describe(at: position))")
    }

    /// The input ends inside a header or a fixed-size value.
    private func truncated(at position: Int) -> MessagePackError {
        error(.truncated, at: position, "input ends inside a value")
    }

    /// Names the value at `position` as the Codable decoder's messages do.
    private func describe(at position: Int) -> String {
        guard position < end else { return "end of input" }
        let m = base[position]
        switch m {
        case 0x00...0x7f, 0xcc...0xcf, 0xd0...0xd3, 0xe0...0xff:
            var probe = self
            probe.offset = position
            guard let (negative, bits) = try? probe.integerBits(expected: "") else { return "integer" }
            return negative ? "negative integer \(Int64(bitPattern: bits))" : "unsigned integer \(bits)"
        case 0x80...0x8f, 0xde, 0xdf: return "map"
        case 0x90...0x9f, 0xdc, 0xdd: return "array"
        case 0xa0...0xbf, 0xd9...0xdb: return "str"
        case 0xc0: return "nil"
        case 0xc2, 0xc3: return "bool"
        case 0xc4...0xc6: return "bin"
        case 0xca: return "float32"
        case 0xcb: return "float64"
        case 0xc7...0xc9, 0xd4...0xd8:
            var probe = self
            probe.offset = position
            if let (type, _, _) = try? probe.extensionHeader(expected: "") { return "ext type \(type)" }
            return "ext"
        default: return "unknown"
        }
    }

    // MARK: Raw input

    @inline(__always)
    private func peek() throws -> UInt8 {
        guard offset < end else { throw truncated(at: offset) }
        return base[offset]
    }

    /// Big-endian unsigned value of `size` bytes at `position`; bounds checked by the caller.
    @inline(__always)
    private func be(_ position: Int, _ size: Int) -> UInt64 {
        var value: UInt64 = 0
        for i in 0..<size { value = value << 8 | UInt64(base[position + i]) }
        return value
    }

    /// Checks that `size` bytes from `position` lie inside the input.
    @inline(__always)
    private func need(_ position: Int, _ size: Int) throws {
        guard size >= 0, end - position >= size else { throw truncated(at: position) }
    }

    /// The Scanner's checks for a declared str/bin/ext payload at `start`
    /// (the marker), in its order: longer than the bytes left, then the size limit.
    @inline(__always)
    private func payload(_ count: Int, kind: Int, from position: Int, marker start: Int) throws {
        if count > end - position {
            let name = kind == 1 ? "str" : kind == 2 ? "bin" : "ext"
            throw error(.lengthExceedsInput, at: start, "\(name) declares \(count) bytes but only \(end - position) remain")
        }
        let limit = kind == 1 ? limits.maxStringLength : limits.maxBinaryLength
        if count > limit {
            let name = kind == 1 ? "str" : kind == 2 ? "bin" : "ext"
            throw error(.sizeLimitExceeded, at: start, "\(name) of \(count) bytes, limit is \(limit)")
        }
    }

    // MARK: Containers

    /// Reads a map header; the entries (key, value, key, value, …) follow.
    public mutating func readMapHeader() throws -> Int {
        let start = offset
        let m = try peek()
        let count: Int
        switch m {
        case 0x80...0x8f: count = Int(m & 0x0f); offset += 1
        case 0xde, 0xdf:
            let size = m == 0xde ? 2 : 4
            try need(offset + 1, size)
            count = Int(be(offset + 1, size)); offset += 1 + size
        default: throw mismatch("map", at: offset)
        }
        try openContainer(count, isMap: true, at: start)
        return count
    }

    /// The Scanner's checks for a container header, in its order: entries
    /// that cannot fit in the bytes left, the count limit, the depth limit.
    @inline(__always)
    private mutating func openContainer(_ count: Int, isMap: Bool, at start: Int) throws {
        let needed = isMap ? count * 2 : count
        guard needed <= end - offset else {
            throw error(.lengthExceedsInput, at: start, "\(isMap ? "map" : "array") declares \(count) \(isMap ? "entries" : "elements") but only \(end - offset) bytes remain")
        }
        guard count <= limits.maxCollectionCount else {
            throw error(.collectionLimitExceeded, at: start, "\(isMap ? "map" : "array") has \(count) elements, limit is \(limits.maxCollectionCount)")
        }
        guard depth < maxDepth else { throw error(.depthLimitExceeded, at: start, "nesting deeper than \(maxDepth)") }
        depth += 1
    }

    /// Reads an array header; the elements follow.
    public mutating func readArrayHeader() throws -> Int {
        let start = offset
        let m = try peek()
        let count: Int
        switch m {
        case 0x90...0x9f: count = Int(m & 0x0f); offset += 1
        case 0xdc, 0xdd:
            let size = m == 0xdc ? 2 : 4
            try need(offset + 1, size)
            count = Int(be(offset + 1, size)); offset += 1 + size
        default: throw mismatch("array", at: offset)
        }
        try openContainer(count, isMap: false, at: start)
        return count
    }

    /// Reads a map key. A key that is not a `str` is skipped and matches no literal,
    /// as the Codable decoder ignores it.
    public mutating func readKey() throws -> MessagePackKey {
        let m = try peek()
        guard (0xa0...0xbf).contains(m) || (0xd9...0xdb).contains(m) else {
            try skipValue()
            current = .none
            return MessagePackKey(start: nil, count: -1)
        }
        let (start, count) = try stringPayload()
        current = .key(start: start, count: count)
        return MessagePackKey(start: base + start, count: count)
    }

    /// Names array element `index` as the value being read, for error paths
    /// (``readKey()`` does this for map values; ``readArray(of:)`` for its elements).
    public mutating func beginElement(_ index: Int) {
        current = .index(index)
    }

    /// Skips one whole value of any type and depth (keys and values the type
    /// does not know). The Scanner walks it, so it is checked exactly as the
    /// pre-scan checks a whole message: iteratively, against the limits (depth
    /// counted from here) and the bytes left, rejecting 0xc1.
    public mutating func skipValue() throws {
        let start = offset
        var sub = limits
        sub.maxDepth = maxDepth - depth
        let rest = UnsafeRawBufferPointer(start: base + start, count: end - start)
        do {
            offset = start + (try Scanner.scan(rest, limits: sub, allowTrailing: true).end)
        } catch {
            var located = error
            located.offset = located.offset.map { $0 + start }
            if let name = render(current) { located.codingPath.insert(name, at: 0) }
            throw located
        }
    }

    /// Reads a value through its own ``MessagePackReadable`` conformance; errors
    /// from inside it get the current key or index prefixed to their path.
    @inlinable
    public mutating func read<T: MessagePackReadable>(_ type: T.Type = T.self) throws -> T {
        // Inlinable so that conformances in other modules get it specialized:
        // unspecialized, every nested value costs generic metadata lookups.
        let saved = enterNested()
        do {
            let value = try T(from: &self)
            leaveNested(saved)
            return value
        } catch {
            throw nestedError(error, saved)
        }
    }

    /// Reads an array of values that read themselves.
    @inlinable
    public mutating func readArray<T: MessagePackReadable>(of type: T.Type = T.self) throws -> [T] {
        let (count, saved) = try enterArray()
        var values: [T] = []
        // Capped: the count is the input's claim (checked only against the bytes left).
        values.reserveCapacity(min(count, 64))
        do {
            for i in 0..<count {
                beginElement(i)
                values.append(try read(T.self))
            }
        } catch {
            throw nestedError(error, saved)
        }
        leaveNested(saved)
        return values
    }

    /// Where a nested read started: restored when it ends.
    @usableFromInline
    struct Saved {
        fileprivate var current: Component
        fileprivate var depth: Int
    }

    @usableFromInline
    mutating func enterNested() -> Saved {
        let saved = Saved(current: current, depth: depth)
        current = .none
        return saved
    }

    @usableFromInline
    mutating func enterArray() throws -> (count: Int, saved: Saved) {
        let depthBefore = depth
        let count = try readArrayHeader()
        return (count, Saved(current: current, depth: depthBefore))
    }

    @usableFromInline
    mutating func leaveNested(_ saved: Saved) {
        current = saved.current
        depth = saved.depth
    }

    /// An error from inside a nested value, with the nested value's key or index prefixed.
    @usableFromInline
    func nestedError(_ error: any Error, _ saved: Saved) -> any Error {
        prefixed(error, with: saved.current)
    }

    // MARK: Scalars

    /// Consumes a nil and returns true, or returns false and leaves any other value.
    public mutating func readNil() throws -> Bool {
        guard try peek() == 0xc0 else { return false }
        offset += 1
        return true
    }

    public mutating func readBool() throws -> Bool {
        switch try peek() {
        case 0xc2: offset += 1; return false
        case 0xc3: offset += 1; return true
        default: throw mismatch("bool", at: offset)
        }
    }

    /// Any integer format: whether it is negative, and its bits.
    private mutating func integerBits(expected: String) throws -> (negative: Bool, bits: UInt64) {
        let m = try peek()
        switch m {
        case 0x00...0x7f:
            offset += 1
            return (false, UInt64(m))
        case 0xe0...0xff:
            offset += 1
            return (true, UInt64(bitPattern: Int64(Int8(bitPattern: m))))
        case 0xcc...0xcf:
            let size = 1 << Int(m - 0xcc)
            try need(offset + 1, size)
            let value = be(offset + 1, size)
            offset += 1 + size
            return (false, value)
        case 0xd0...0xd3:
            let size = 1 << Int(m - 0xd0)
            try need(offset + 1, size)
            let shift = UInt64(64 - 8 * size)
            let value = Int64(bitPattern: be(offset + 1, size) << shift) >> shift
            offset += 1 + size
            return value < 0 ? (true, UInt64(bitPattern: value)) : (false, UInt64(value))
        default:
            throw mismatch(expected, at: offset)
        }
    }

    /// Any integer format, if the value fits `T` (else `valueOutOfRange`).
    public mutating func readInteger<T: FixedWidthInteger>(_ type: T.Type = T.self) throws -> T {
        let start = offset
        let (negative, bits) = try integerBits(expected: T.isSigned ? "integer" : "unsigned integer")
        let value = negative ? T(exactly: Int64(bitPattern: bits)) : T(exactly: bits)
        guard let value else {
            let found = negative ? "negative integer \(Int64(bitPattern: bits))" : "unsigned integer \(bits)"
            throw error(.valueOutOfRange, at: start, "\(found) does not fit \(T.self)")
        }
        return value
    }

    public mutating func readUInt64() throws -> UInt64 { try readInteger(UInt64.self) }
    public mutating func readUInt32() throws -> UInt32 { try readInteger(UInt32.self) }
    public mutating func readUInt16() throws -> UInt16 { try readInteger(UInt16.self) }
    public mutating func readInt64() throws -> Int64 { try readInteger(Int64.self) }
    public mutating func readInt() throws -> Int { try readInteger(Int.self) }

    /// float64, float32, or an integer that converts exactly.
    public mutating func readDouble() throws -> Double {
        let start = offset
        switch try peek() {
        case 0xca:
            try need(offset + 1, 4)
            defer { offset += 5 }
            return Double(Float(bitPattern: UInt32(be(offset + 1, 4))))
        case 0xcb:
            try need(offset + 1, 8)
            defer { offset += 9 }
            return Double(bitPattern: be(offset + 1, 8))
        default:
            let (negative, bits) = try integerBits(expected: "float")
            let value = negative ? Double(exactly: Int64(bitPattern: bits)) : Double(exactly: bits)
            guard let value else { throw error(.valueOutOfRange, at: start, "\(describe(at: start)) has no exact Double") }
            return value
        }
    }

    /// float32; float64 or an integer that converts exactly (NaN passes).
    public mutating func readFloat() throws -> Float {
        let start = offset
        switch try peek() {
        case 0xca:
            try need(offset + 1, 4)
            defer { offset += 5 }
            return Float(bitPattern: UInt32(be(offset + 1, 4)))
        case 0xcb:
            try need(offset + 1, 8)
            let value = Double(bitPattern: be(offset + 1, 8))
            if value.isNaN { offset += 9; return .nan }
            guard let exact = Float(exactly: value) else { throw error(.valueOutOfRange, at: start, "float64 has no exact Float") }
            offset += 9
            return exact
        default:
            let (negative, bits) = try integerBits(expected: "float")
            let value = negative ? Float(exactly: Int64(bitPattern: bits)) : Float(exactly: bits)
            guard let value else { throw error(.valueOutOfRange, at: start, "\(describe(at: start)) has no exact Float") }
            return value
        }
    }

    // MARK: Strings and binaries

    /// Consumes a str header and payload; returns the payload's offset and length.
    private mutating func stringPayload() throws -> (start: Int, count: Int) {
        let m = try peek()
        let header: Int
        let count: Int
        switch m {
        case 0xa0...0xbf: header = 1; count = Int(m & 0x1f)
        case 0xd9, 0xda, 0xdb:
            header = 1 + (1 << Int(m - 0xd9))
            try need(offset, header)
            count = Int(be(offset + 1, header - 1))
        default: throw mismatch("str", at: offset)
        }
        try payload(count, kind: 1, from: offset + header, marker: offset)
        let start = offset + header
        offset = start + count
        return (start, count)
    }

    /// A `str` as a `String`; invalid UTF-8 is `invalidUTF8`.
    public mutating func readString() throws -> String {
        let (start, count) = try stringPayload()
        let bytes = UnsafeBufferPointer(start: base + start, count: count)
        if DecoderState.isASCII(UnsafeRawPointer(base + start), count) {
            return String(decoding: bytes, as: UTF8.self)
        }
        guard let value = String(validating: bytes, as: UTF8.self) else {
            throw error(.invalidUTF8, at: start, "str of \(count) bytes is not valid UTF-8")
        }
        return value
    }

    /// Consumes a bin header and payload.
    private mutating func binaryPayload() throws -> UnsafeRawBufferPointer {
        let m = try peek()
        guard (0xc4...0xc6).contains(m) else { throw mismatch("bin", at: offset) }
        let header = 1 + (1 << Int(m - 0xc4))
        try need(offset, header)
        let count = Int(be(offset + 1, header - 1))
        try payload(count, kind: 2, from: offset + header, marker: offset)
        let start = offset + header
        offset = start + count
        return UnsafeRawBufferPointer(start: base + start, count: count)
    }

    /// A `bin` as bytes; like the Codable decoder, also an array of integers 0…255.
    public mutating func readBinary() throws -> [UInt8] {
        if let m = try? peek(), (0x90...0x9f).contains(m) || m == 0xdc || m == 0xdd {
            let savedDepth = depth
            let count = try readArrayHeader()
            let saved = current
            var bytes: [UInt8] = []
            bytes.reserveCapacity(min(count, 4096))
            do {
                for i in 0..<count {
                    current = .index(i)
                    bytes.append(try readInteger(UInt8.self))
                }
            } catch {
                current = saved
                throw prefixed(error, with: saved)
            }
            current = saved
            depth = savedDepth
            return bytes
        }
        return DecoderState.copy(try binaryPayload())
    }

    /// A `bin` as `Data`.
    public mutating func readData() throws -> Data {
        let raw = try binaryPayload()
        guard let start = raw.baseAddress, raw.count > 0 else { return Data() }
        return Data(bytes: start, count: raw.count)
    }

    // MARK: Timestamps

    /// Consumes an extension header; returns its type, payload offset and length.
    private mutating func extensionHeader(expected: String) throws -> (type: Int8, start: Int, count: Int) {
        let m = try peek()
        let header: Int
        let count: Int
        switch m {
        case 0xd4...0xd8: header = 2; count = 1 << Int(m - 0xd4)
        case 0xc7, 0xc8, 0xc9:
            let size = 1 << Int(m - 0xc7)
            header = 2 + size
            try need(offset, header)
            count = Int(be(offset + 1, size))
        default: throw mismatch(expected, at: offset)
        }
        try need(offset, header)
        if m >= 0xd4 {
            guard end - offset - header >= count else { throw truncated(at: offset) }
        } else {
            try payload(count, kind: 3, from: offset + header, marker: offset)
        }
        let type = Int8(bitPattern: base[offset + header - 1])
        let start = offset + header
        offset = start + count
        return (type, start, count)
    }

    /// The timestamp extension (type −1) in any of its 32, 64 and 96-bit forms.
    public mutating func readTimestamp() throws -> MessagePackTimestamp {
        let position = offset
        let (type, start, count) = try extensionHeader(expected: "timestamp (ext type -1)")
        guard type == -1 else {
            offset = position
            throw mismatch("timestamp (ext type -1)", at: position)
        }
        guard let value = MessagePackTimestamp.parse(UnsafeRawBufferPointer(start: base + start, count: count)) else {
            throw error(.invalidTimestamp, at: start, "timestamp of \(count) bytes is not a valid 32, 64 or 96-bit form")
        }
        return value
    }

    /// A timestamp as `Date` (sub-microsecond digits of modern dates may round).
    public mutating func readDate() throws -> Date {
        try readTimestamp().date
    }

    var isAtEnd: Bool { offset == end }
}

// MARK: - Decoding through the reader

/// Lets `T` read `buffer`. There is no separate pre-scan: the reader applies the
/// Scanner's checks to every header it reads (limits, lengths against the bytes
/// left, depth) and runs the Scanner itself over every value it skips, so the
/// same inputs are accepted and nothing is allocated from a claimed length.
func decodeReadable<T: MessagePackReadable>(_ type: T.Type, from buffer: UnsafeRawBufferPointer, limits: MessagePackLimits) throws -> T {
    guard buffer.count <= limits.maxInputSize else {
        throw MessagePackError(code: .sizeLimitExceeded, offset: 0, message: "input is \(buffer.count) bytes, limit is \(limits.maxInputSize)")
    }
    guard let base = buffer.baseAddress, buffer.count > 0 else {
        throw MessagePackError(code: .truncated, offset: 0, message: "input is empty")
    }
    var reader = MessagePackReader(base: base.assumingMemoryBound(to: UInt8.self), count: buffer.count, limits: limits)
    let value: T
    do {
        value = try T(from: &reader)
    } catch let error as DecodingError {
        throw MessagePackError(error)
    }
    guard reader.isAtEnd else {
        // (Or a conformance that did not read its whole value.)
        throw MessagePackError(code: .trailingBytes, offset: reader.offset, message: "\(buffer.count - reader.offset) bytes after the end of the value")
    }
    return value
}
