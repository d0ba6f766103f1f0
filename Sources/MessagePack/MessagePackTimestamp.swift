import Foundation

/// An exact MessagePack timestamp (extension type −1): seconds since the Unix
/// epoch and nanoseconds within that second.
///
/// `Date` stores a `Double`, which cannot hold every nanosecond of a modern
/// date; use this type where nanoseconds must survive a round trip. The encoder
/// writes the smallest of the 32-, 64- and 96-bit forms that holds the value
/// exactly, as the MessagePack specification asks.
///
/// ```swift
/// struct Event: Codable { var at: MessagePackTimestamp }
/// let bytes = try MessagePackEncoder().encode(Event(at: .init(seconds: -1, nanoseconds: 5)))
/// ```
public struct MessagePackTimestamp: Hashable, Sendable, Codable, Comparable {
    /// Seconds since 1970-01-01T00:00:00Z; negative before.
    public var seconds: Int64
    /// Nanoseconds added to `seconds`, in `0..<1_000_000_000`.
    public var nanoseconds: UInt32

    /// Creates a timestamp. Nanoseconds outside `0..<1_000_000_000` make encoding throw.
    public init(seconds: Int64, nanoseconds: UInt32 = 0) {
        self.seconds = seconds
        self.nanoseconds = nanoseconds
    }

    /// The nearest timestamp to `date`, rounded to the nanosecond.
    /// - Throws: ``MessagePackError`` (`invalidTimestamp`) for non-finite or out-of-range dates.
    public init(_ date: Date) throws {
        let interval = date.timeIntervalSince1970
        guard interval.isFinite, interval >= -9.2e18, interval < 9.2e18 else {
            throw MessagePackError(code: .invalidTimestamp, message: "date \(interval)s from 1970 cannot be a MessagePack timestamp")
        }
        var whole = interval.rounded(.down)
        var nanos = ((interval - whole) * 1e9).rounded()
        if nanos >= 1e9 {
            whole += 1
            nanos -= 1e9
        }
        seconds = Int64(whole)
        nanoseconds = UInt32(nanos)
    }

    /// The nearest `Date` (a `Double` of seconds, so sub-microsecond digits may round).
    public var date: Date {
        Date(timeIntervalSince1970: Double(seconds) + Double(nanoseconds) / 1e9)
    }

    public static func < (lhs: Self, rhs: Self) -> Bool {
        (lhs.seconds, lhs.nanoseconds) < (rhs.seconds, rhs.nanoseconds)
    }

    /// Reads the payload of an extension of type −1 (4, 8 or 12 bytes, big-endian).
    static func parse(_ payload: UnsafeRawBufferPointer) -> MessagePackTimestamp? {
        func be(_ at: Int, _ size: Int) -> UInt64 {
            var value: UInt64 = 0
            for i in 0..<size { value = value << 8 | UInt64(payload[at + i]) }
            return value
        }
        switch payload.count {
        case 4:
            return MessagePackTimestamp(seconds: Int64(be(0, 4)))
        case 8:
            let word = be(0, 8)
            let nanos = UInt32(truncatingIfNeeded: word >> 34)
            guard nanos < 1_000_000_000 else { return nil }
            return MessagePackTimestamp(seconds: Int64(word & 0x3_ffff_ffff), nanoseconds: nanos)
        case 12:
            let nanos = UInt32(truncatingIfNeeded: be(0, 4))
            guard nanos < 1_000_000_000 else { return nil }
            return MessagePackTimestamp(seconds: Int64(bitPattern: be(4, 8)), nanoseconds: nanos)
        default:
            return nil
        }
    }

    /// The payload bytes of the smallest exact form (for `MessagePackValue.extended`).
    var payload: [UInt8] {
        func be(_ value: UInt64, _ size: Int) -> [UInt8] {
            (0..<size).map { UInt8(truncatingIfNeeded: value >> (8 * UInt64(size - 1 - $0))) }
        }
        if seconds >> 34 == 0 {
            let word = UInt64(nanoseconds) << 34 | UInt64(seconds)
            return word >> 32 == 0 ? be(word, 4) : be(word, 8)
        }
        return be(UInt64(nanoseconds), 4) + be(UInt64(bitPattern: seconds), 8)
    }
}
