import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A type that writes its own MessagePack form, without Codable.
///
/// ``MessagePackEncoder`` uses this instead of `encode(to:)` whenever the value
/// (at the top level, or nested inside a Codable value) conforms. A conformance
/// must write exactly the bytes the type's `Encodable` conformance produces
/// through the encoder, so the two paths stay interchangeable.
///
/// ```swift
/// extension Point: MessagePackWritable {
///     func write(to writer: inout MessagePackWriter) throws {
///         writer.writeMapHeader(2)
///         writer.writeKey("x"); writer.write(x)
///         writer.writeKey("y"); writer.write(y)
///     }
/// }
/// ```
public protocol MessagePackWritable {
    /// Writes exactly one MessagePack value.
    func write(to writer: inout MessagePackWriter) throws
}

/// Appends MessagePack values to raw memory, in the smallest format for each
/// value (the same bytes msgpack-c's packer produces).
///
/// The writer never writes past its capacity: once a value does not fit it
/// keeps counting without storing, so the caller learns the exact size and
/// runs the value's `write(to:)` again into a buffer that size. Writing is a
/// pure function of the value, so the second run produces the same bytes.
public struct MessagePackWriter {
    private let base: UnsafeMutablePointer<UInt8>?
    private let capacity: Int
    /// Bytes the value needs so far (may exceed `capacity`).
    private(set) var count: Int
    /// Set when a str, bin or collection is longer than MessagePack allows;
    /// the encode fails with it at the end.
    var failure: MessagePackError?

    init(base: UnsafeMutablePointer<UInt8>?, capacity: Int) {
        self.base = base
        self.capacity = base == nil ? 0 : capacity
        self.count = 0
    }

    var overflowed: Bool { count > capacity }

    // MARK: Raw bytes

    @inline(__always)
    private mutating func append(_ byte: UInt8) {
        if count < capacity, let base { base[count] = byte }
        count += 1
    }

    /// Appends `value`'s low `size` bytes big-endian after `marker`.
    @inline(__always)
    private mutating func append(_ marker: UInt8, bigEndian value: UInt64, size: Int) {
        if count + 1 + size <= capacity, let base {
            base[count] = marker
            var shift = UInt64(8 * (size - 1))
            for i in 1...size {
                base[count + i] = UInt8(truncatingIfNeeded: value >> shift)
                shift &-= 8
            }
        }
        count += 1 + size
    }

    @inline(__always)
    private mutating func append(_ bytes: UnsafeRawBufferPointer) {
        let n = bytes.count
        if n > 0, count + n <= capacity, let base, let source = bytes.baseAddress {
            if n <= 16 {
                // Keys and short strings: a call to memcpy costs more than the copy.
                for i in 0..<n { base[count + i] = source.load(fromByteOffset: i, as: UInt8.self) }
            } else {
                memcpy(base + count, source, n)
            }
        }
        count += n
    }

    @inline(__always)
    private mutating func fits(_ n: Int, _ what: String) -> Bool {
        if n <= UInt32.max { return true }
        if failure == nil {
            failure = MessagePackError(code: .sizeLimitExceeded, message: "\(what) of \(n) elements or bytes is longer than MessagePack allows (2^32-1)")
        }
        return false
    }

    // MARK: Headers

    /// Writes a map header for `count` entries (fixmap, map16 or map32).
    public mutating func writeMapHeader(_ count: Int) {
        guard fits(count, "map") else { return }
        if count < 16 { append(0x80 | UInt8(count)) }
        else if count < 0x1_0000 { append(0xde, bigEndian: UInt64(count), size: 2) }
        else { append(0xdf, bigEndian: UInt64(count), size: 4) }
    }

    /// Writes an array header for `count` elements (fixarray, array16 or array32).
    public mutating func writeArrayHeader(_ count: Int) {
        guard fits(count, "array") else { return }
        if count < 16 { append(0x90 | UInt8(count)) }
        else if count < 0x1_0000 { append(0xdc, bigEndian: UInt64(count), size: 2) }
        else { append(0xdd, bigEndian: UInt64(count), size: 4) }
    }

    // MARK: Scalars

    public mutating func writeNil() { append(0xc0) }

    public mutating func write(_ value: Bool) { append(value ? 0xc3 : 0xc2) }

    /// Non-negative integers: positive fixint, uint8, uint16, uint32 or uint64.
    public mutating func write(_ value: UInt64) {
        if value < 0x80 { append(UInt8(value)) }
        else if value < 0x100 { append(0xcc, bigEndian: value, size: 1) }
        else if value < 0x1_0000 { append(0xcd, bigEndian: value, size: 2) }
        else if value < 0x1_0000_0000 { append(0xce, bigEndian: value, size: 4) }
        else { append(0xcf, bigEndian: value, size: 8) }
    }

    /// Non-negative values as ``write(_:)-(UInt64)``; negative ones as negative
    /// fixint, int8, int16, int32 or int64.
    public mutating func write(_ value: Int64) {
        if value >= 0 { return write(UInt64(value)) }
        let bits = UInt64(bitPattern: value)
        if value >= -32 { append(UInt8(truncatingIfNeeded: value)) }
        else if value >= -0x80 { append(0xd0, bigEndian: bits, size: 1) }
        else if value >= -0x8000 { append(0xd1, bigEndian: bits, size: 2) }
        else if value >= -0x8000_0000 { append(0xd2, bigEndian: bits, size: 4) }
        else { append(0xd3, bigEndian: bits, size: 8) }
    }

    public mutating func write(_ value: Int) { write(Int64(value)) }
    public mutating func write(_ value: UInt) { write(UInt64(value)) }
    public mutating func write(_ value: UInt32) { write(UInt64(value)) }
    public mutating func write(_ value: UInt16) { write(UInt64(value)) }
    public mutating func write(_ value: UInt8) { write(UInt64(value)) }
    public mutating func write(_ value: Int32) { write(Int64(value)) }
    public mutating func write(_ value: Int16) { write(Int64(value)) }
    public mutating func write(_ value: Int8) { write(Int64(value)) }

    /// float64.
    public mutating func write(_ value: Double) { append(0xcb, bigEndian: value.bitPattern, size: 8) }
    /// float32.
    public mutating func write(_ value: Float) { append(0xca, bigEndian: UInt64(value.bitPattern), size: 4) }

    // MARK: Strings and binaries

    /// str (fixstr, str8, str16 or str32) with the string's UTF-8.
    public mutating func write(_ value: String) {
        // Native strings (literals, decoded strings) lend their UTF-8 without a copy.
        let done: Void? = value.utf8.withContiguousStorageIfAvailable { writeUTF8(UnsafeRawBufferPointer($0)) }
        if done == nil {
            var copy = value
            copy.withUTF8 { writeUTF8(UnsafeRawBufferPointer($0)) }
        }
    }

    /// A map key written from a literal: the same bytes as `write(String)`, without bridging.
    public mutating func writeKey(_ key: StaticString) {
        if key.hasPointerRepresentation {
            writeUTF8(UnsafeRawBufferPointer(start: key.utf8Start, count: key.utf8CodeUnitCount))
        } else {
            key.withUTF8Buffer { writeUTF8(UnsafeRawBufferPointer($0)) }
        }
    }

    @inline(__always)
    private mutating func writeUTF8(_ utf8: UnsafeRawBufferPointer) {
        let n = utf8.count
        guard fits(n, "str") else { return }
        if n < 32 { append(0xa0 | UInt8(n)) }
        else if n < 0x100 { append(0xd9, bigEndian: UInt64(n), size: 1) }
        else if n < 0x1_0000 { append(0xda, bigEndian: UInt64(n), size: 2) }
        else { append(0xdb, bigEndian: UInt64(n), size: 4) }
        append(utf8)
    }

    /// bin (bin8, bin16 or bin32).
    public mutating func write(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { writeBinary($0) }
    }

    /// bin (bin8, bin16 or bin32).
    public mutating func write(_ data: Data) {
        data.withUnsafeBytes { writeBinary($0) }
    }

    /// bin (bin8, bin16 or bin32) from raw bytes.
    public mutating func writeBinary(_ bytes: UnsafeRawBufferPointer) {
        let n = bytes.count
        guard fits(n, "bin") else { return }
        if n < 0x100 { append(0xc4, bigEndian: UInt64(n), size: 1) }
        else if n < 0x1_0000 { append(0xc5, bigEndian: UInt64(n), size: 2) }
        else { append(0xc6, bigEndian: UInt64(n), size: 4) }
        append(bytes)
    }

    // MARK: Timestamps

    /// The timestamp extension (type −1) in its smallest exact form.
    /// - Throws: ``MessagePackError`` (`invalidTimestamp`) for non-finite or out-of-range dates.
    public mutating func write(_ date: Date) throws {
        try write(MessagePackTimestamp(date))
    }

    /// The timestamp extension (type −1) in its smallest exact form.
    /// - Throws: ``MessagePackError`` (`invalidTimestamp`) when nanoseconds are not below 10⁹.
    public mutating func write(_ timestamp: MessagePackTimestamp) throws {
        let seconds = timestamp.seconds
        let nanos = timestamp.nanoseconds
        guard nanos < 1_000_000_000 else {
            throw MessagePackError(code: .invalidTimestamp, message: "timestamp nanoseconds \(nanos) not below 1,000,000,000")
        }
        if seconds >> 34 == 0 {
            let word = UInt64(nanos) << 34 | UInt64(seconds)
            if word >> 32 == 0 {
                append(0xd6)
                append(0xff, bigEndian: word, size: 4)
            } else {
                append(0xd7)
                append(0xff, bigEndian: word, size: 8)
            }
        } else {
            append(0xc7)
            append(12)
            append(0xff, bigEndian: UInt64(nanos), size: 4)
            if count + 8 <= capacity, let base {
                let bits = UInt64(bitPattern: seconds)
                for i in 0..<8 { base[count + i] = UInt8(truncatingIfNeeded: bits >> UInt64(56 - 8 * i)) }
            }
            count += 8
        }
    }

    // MARK: Composite values

    /// Writes a value through its own ``MessagePackWritable`` conformance.
    @inlinable
    public mutating func write<T: MessagePackWritable>(_ value: T) throws {
        try value.write(to: &self)
    }

    /// Writes an array of values (inlinable, so it is specialized for `T` in the caller's module).
    @inlinable
    public mutating func write<T: MessagePackWritable>(_ values: [T]) throws {
        writeArrayHeader(values.count)
        // Through the buffer pointer each element is borrowed in place; iterating
        // the array copies it (retaining and releasing everything it holds).
        try values.withUnsafeBufferPointer { elements in
            for i in elements.indices { try elements[i].write(to: &self) }
        }
    }
}

// MARK: - Encoding through the writer

/// Runs `value.write(to:)` into a fresh array sized from the previous message,
/// and again into an exactly sized one if it did not fit. The returned array is
/// the buffer written into: no copy at the end.
func encodeWritable<T: MessagePackWritable>(_ value: T) throws -> [UInt8] {
    var capacity = min(lastEncodedSizeHint() + 64, 256 << 10)
    // Two attempts suffice for a conformance whose output depends only on the
    // value; a few more tolerate one that does not, then it is an error.
    for _ in 0..<4 {
        var needed = 0
        var failure: MessagePackError?
        let bytes = try [UInt8](unsafeUninitializedCapacity: capacity) { buffer, initialized in
            var writer = MessagePackWriter(base: buffer.baseAddress, capacity: buffer.count)
            try value.write(to: &writer)
            needed = writer.count
            failure = writer.failure
            initialized = writer.overflowed ? 0 : writer.count
        }
        if let failure { throw failure }
        if needed <= capacity {
            recordEncodedSize(needed)
            // A guess far above the size (a big message came before) would pin
            // that much memory for as long as the caller keeps the bytes.
            if bytes.capacity > 4096 && bytes.capacity > 2 * needed {
                return bytes.withUnsafeBytes { DecoderState.copy($0) }
            }
            return bytes
        }
        capacity = needed
    }
    throw MessagePackError(code: .invalidEncoderUse, message: "\(T.self).write(to:) wrote a different size on every attempt")
}
