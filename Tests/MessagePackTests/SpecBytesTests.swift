import Foundation
import MessagePack
import Testing

// Expected bytes are written out by hand from the MessagePack specification
// (github.com/msgpack/msgpack/blob/master/spec.md), not produced by this encoder.

@Suite("Spec bytes")
struct SpecBytesTests {
    let encoder = MessagePackEncoder()
    let decoder = MessagePackDecoder()

    func check<T: Codable & Equatable>(_ value: T, _ expected: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let bytes = try encoder.encode(value)
        #expect(hexString(bytes) == hexString(hex(expected)), "\(value)", sourceLocation: sourceLocation)
        let back = try decoder.decode(T.self, from: hex(expected))
        #expect(back == value, sourceLocation: sourceLocation)
    }

    @Test func nilAndBool() throws {
        try check(Bool(false), "c2")
        try check(Bool(true), "c3")
        try check(Int?.none, "c0")
        #expect(try MessagePackValue.decode(hex("c0")) == .nil)
    }

    @Test func positiveIntegerBoundaries() throws {
        try check(0, "00")
        try check(127, "7f")
        try check(128, "cc 80")
        try check(255, "cc ff")
        try check(256, "cd 01 00")
        try check(65535, "cd ff ff")
        try check(65536, "ce 00 01 00 00")
        try check(Int64(UInt32.max), "ce ff ff ff ff")
        try check(Int64(1) << 32, "cf 00 00 00 01 00 00 00 00")
        try check(Int64.max, "cf 7f ff ff ff ff ff ff ff")
        try check(UInt64.max, "cf ff ff ff ff ff ff ff ff")
        try check(UInt8(200), "cc c8")
        try check(UInt16(300), "cd 01 2c")
        try check(UInt32(70000), "ce 00 01 11 70")
    }

    @Test func negativeIntegerBoundaries() throws {
        try check(-1, "ff")
        try check(-32, "e0")
        try check(-33, "d0 df")
        try check(-128, "d0 80")
        try check(-129, "d1 ff 7f")
        try check(-32768, "d1 80 00")
        try check(-32769, "d2 ff ff 7f ff")
        try check(Int64(Int32.min), "d2 80 00 00 00")
        try check(Int64(Int32.min) - 1, "d3 ff ff ff ff 7f ff ff ff")
        try check(Int64.min, "d3 80 00 00 00 00 00 00 00")
        try check(Int8(-100), "d0 9c")
        try check(Int16(-1000), "d1 fc 18")
    }

    @Test func integersDecodeFromAnyFormat() throws {
        // 1 in every integer format the spec has.
        for form in ["01", "cc 01", "cd 00 01", "ce 00 00 00 01", "cf 00 00 00 00 00 00 00 01",
                     "d0 01", "d1 00 01", "d2 00 00 00 01", "d3 00 00 00 00 00 00 00 01"] {
            #expect(try decoder.decode(UInt8.self, from: hex(form)) == 1, "\(form)")
            #expect(try decoder.decode(Int64.self, from: hex(form)) == 1, "\(form)")
        }
        #expect(try decoder.decode(Int8.self, from: hex("d3 ff ff ff ff ff ff ff 80")) == -128)
        expectError(.valueOutOfRange) { try decoder.decode(UInt8.self, from: hex("cd 01 00")) }
        expectError(.valueOutOfRange) { try decoder.decode(UInt64.self, from: hex("ff")) }
        expectError(.valueOutOfRange) { try decoder.decode(Int64.self, from: hex("cf ff ff ff ff ff ff ff ff")) }
        expectError(.valueOutOfRange) { try decoder.decode(Int8.self, from: hex("d1 ff 7f")) }
        expectError(.typeMismatch) { try decoder.decode(Int.self, from: hex("a1 31")) }
    }

    @Test func floats() throws {
        try check(Float(1.5), "ca 3f c0 00 00")
        try check(Double(1.5), "cb 3f f8 00 00 00 00 00 00")
        try check(Double(-0.0), "cb 80 00 00 00 00 00 00 00")
        try check(Double.infinity, "cb 7f f0 00 00 00 00 00 00")
        try check(-Double.infinity, "cb ff f0 00 00 00 00 00 00")
        try check(Float.infinity, "ca 7f 80 00 00")
        try check(Double.greatestFiniteMagnitude, "cb 7f ef ff ff ff ff ff ff")
        #expect(try encoder.encode(Double.nan) == hex("cb 7f f8 00 00 00 00 00 00"))
        #expect(try decoder.decode(Double.self, from: hex("cb 7f f8 00 00 00 00 00 00")).isNaN)
        #expect(try decoder.decode(Float.self, from: hex("ca 7f c0 00 00")).isNaN)
        // float32 into Double, integers into Double when exact.
        #expect(try decoder.decode(Double.self, from: hex("ca 3f c0 00 00")) == 1.5)
        #expect(try decoder.decode(Double.self, from: hex("d0 9c")) == -100)
        expectError(.valueOutOfRange) { try decoder.decode(Double.self, from: hex("cf 00 20 00 00 00 00 00 01")) }
        expectError(.valueOutOfRange) { try decoder.decode(Float.self, from: hex("cb 3f b9 99 99 99 99 99 9a")) }  // 0.1
        #expect(try MessagePackValue.decode(hex("ca 3f c0 00 00")) == .float(1.5))
        expectError(.typeMismatch) { try decoder.decode(Double.self, from: hex("c3")) }
    }

    @Test func strings() throws {
        try check("", "a0")
        try check("a", "a1 61")
        try check("é", "a2 c3 a9")
        let s31 = String(repeating: "x", count: 31)
        try check(s31, "bf " + String(repeating: "78 ", count: 31))
        let s32 = String(repeating: "x", count: 32)
        try check(s32, "d9 20 " + String(repeating: "78 ", count: 32))
        let s255 = String(repeating: "x", count: 255)
        try check(s255, "d9 ff " + String(repeating: "78 ", count: 255))
        let s256 = String(repeating: "x", count: 256)
        try check(s256, "da 01 00 " + String(repeating: "78 ", count: 256))
        let s65535 = String(repeating: "y", count: 65535)
        #expect(Array(try encoder.encode(s65535).prefix(3)) == hex("da ff ff"))
        let s65537 = String(repeating: "y", count: 65537)
        let bytes = try encoder.encode(s65537)
        #expect(Array(bytes.prefix(5)) == hex("db 00 01 00 01"))
        #expect(bytes.count == 65537 + 5)
        #expect(try decoder.decode(String.self, from: bytes) == s65537)
    }

    @Test func binary() throws {
        try check(Data(), "c4 00")
        try check([UInt8](), "c4 00")
        try check(Data([1, 2, 3]), "c4 03 01 02 03")
        try check([UInt8]([0xff]), "c4 01 ff")
        let b255 = [UInt8](repeating: 7, count: 255)
        try check(b255, "c4 ff " + String(repeating: "07 ", count: 255))
        let b256 = [UInt8](repeating: 7, count: 256)
        try check(b256, "c5 01 00 " + String(repeating: "07 ", count: 256))
        let b65536 = Data(repeating: 9, count: 65536)
        let bytes = try encoder.encode(b65536)
        #expect(Array(bytes.prefix(5)) == hex("c6 00 01 00 00"))
        #expect(try decoder.decode(Data.self, from: bytes) == b65536)
        // [UInt8] also accepts an array of small integers (another encoder's habit).
        #expect(try decoder.decode([UInt8].self, from: hex("92 01 cc ff")) == [1, 255])
        expectError(.typeMismatch) { try decoder.decode(Data.self, from: hex("a1 61")) }
    }

    @Test func arrays() throws {
        try check([Int](), "90")
        try check([1, 2, 3], "93 01 02 03")
        try check(Array(repeating: 1, count: 15), "9f " + String(repeating: "01 ", count: 15))
        try check(Array(repeating: 1, count: 16), "dc 00 10 " + String(repeating: "01 ", count: 16))
        let a65535 = Array(repeating: true, count: 65535)
        #expect(Array(try encoder.encode(a65535).prefix(3)) == hex("dc ff ff"))
        let a65537 = Array(repeating: false, count: 65537)
        let bytes = try encoder.encode(a65537)
        #expect(Array(bytes.prefix(5)) == hex("dd 00 01 00 01"))
        #expect(bytes.count == 65537 + 5)
        #expect(try decoder.decode([Bool].self, from: bytes) == a65537)
        try check([[1], [2, 3], []], "93 91 01 92 02 03 90")
        try check([Int?.none, 5], "92 c0 05")
    }

    @Test func maps() throws {
        try check([String: Int](), "80")
        try check(["a": 1], "81 a1 61 01")
        // 16 entries need map16; order in a Dictionary is not fixed, so check the header and round trip.
        let big = Dictionary(uniqueKeysWithValues: (0..<16).map { ("k\($0)", $0) })
        let bytes = try encoder.encode(big)
        #expect(Array(bytes.prefix(3)) == hex("de 00 10"))
        #expect(try decoder.decode([String: Int].self, from: bytes) == big)
        let value: MessagePackValue = .map((0..<15).map { MessagePackEntry(key: .uint(UInt64($0)), value: .nil) })
        #expect(try value.encoded().first == 0x8f)
    }

    @Test func structsAndEnums() throws {
        struct S: Codable, Equatable { var a: Int; var b: String }
        try check(S(a: 1, b: "x"), "82 a1 61 01 a1 62 a1 78")
        try check(ItemStatus.applied, "a7 61 70 70 6c 69 65 64")
        try check(Priority.high, "cc c8")
        struct O: Codable, Equatable { var x: Int?; var y: Int }
        try check(O(x: nil, y: 2), "81 a1 79 02")  // nil optionals are omitted
        #expect(try decoder.decode(O.self, from: hex("82 a1 78 c0 a1 79 02")) == O(x: nil, y: 2))
        struct Empty: Codable, Equatable {}
        try check(Empty(), "80")
    }

    @Test func extensions() throws {
        let cases: [(Int8, Int, String)] = [
            (5, 1, "d4 05"), (5, 2, "d5 05"), (5, 4, "d6 05"), (5, 8, "d7 05"), (5, 16, "d8 05"),
            (-2, 0, "c7 00 fe"), (7, 3, "c7 03 07"), (7, 255, "c7 ff 07"), (7, 256, "c8 01 00 07"),
            (7, 65535, "c8 ff ff 07"), (7, 65536, "c9 00 01 00 00 07"),
        ]
        for (type, size, header) in cases {
            let data = (0..<size).map { UInt8($0 & 0xff) }
            let value = MessagePackValue.extended(type: type, data: data)
            let bytes = try value.encoded()
            #expect(bytes == hex(header) + data, "ext size \(size)")
            #expect(try MessagePackValue.decode(bytes) == value, "ext size \(size)")
        }
    }

    @Test func timestamps() throws {
        func ts(_ s: Int64, _ n: UInt32) -> MessagePackTimestamp { .init(seconds: s, nanoseconds: n) }
        // 32-bit form: nanoseconds 0 and seconds in 0..<2^32.
        try check(ts(0, 0), "d6 ff 00 00 00 00")
        try check(ts(1, 0), "d6 ff 00 00 00 01")
        try check(ts(Int64(UInt32.max), 0), "d6 ff ff ff ff ff")
        // 64-bit form: nanoseconds in the top 30 bits, seconds < 2^34.
        try check(ts(1, 1), "d7 ff 00 00 00 04 00 00 00 01")
        try check(ts(Int64(1) << 32, 0), "d7 ff 00 00 00 01 00 00 00 00")
        try check(ts((Int64(1) << 34) - 1, 999_999_999), "d7 ff ee 6b 27 ff ff ff ff ff")
        // 96-bit form: before 1970, or from 2^34 seconds on.
        try check(ts(-1, 0), "c7 0c ff 00 00 00 00 ff ff ff ff ff ff ff ff")
        try check(ts(-1, 500_000_000), "c7 0c ff 1d cd 65 00 ff ff ff ff ff ff ff ff")
        try check(ts(Int64(1) << 34, 0), "c7 0c ff 00 00 00 00 00 00 00 04 00 00 00 00")
        try check(ts(Int64.min, 1), "c7 0c ff 00 00 00 01 80 00 00 00 00 00 00 00")
        // Date uses the same rules.
        try check(Date(timeIntervalSince1970: 1_700_000_000), "d6 ff 65 53 f1 00")
        try check(Date(timeIntervalSince1970: 1.5), "d7 ff 77 35 94 00 00 00 00 01")
        try check(Date(timeIntervalSince1970: -1.5), "c7 0c ff 1d cd 65 00 ff ff ff ff ff ff ff fe")
        #expect(try MessagePackValue.decode(hex("d7 ff 00 00 00 04 00 00 00 01")) == .timestamp(seconds: 1, nanoseconds: 1))
        // Invalid: nanoseconds ≥ 10^9, and a size that is not 4, 8 or 12.
        expectError(.invalidTimestamp) { try decoder.decode(Date.self, from: hex("d7 ff ff ff ff fc 00 00 00 00")) }
        expectError(.invalidTimestamp) { try decoder.decode(Date.self, from: hex("c7 0c ff 3b 9a ca 00 00 00 00 00 00 00 00 00")) }
        expectError(.invalidTimestamp) { try MessagePackValue.decode(hex("d5 ff 00 00")) }
        expectError(.invalidTimestamp) { try encoder.encode(ts(0, 1_000_000_000)) }
        expectError(.invalidTimestamp) { try encoder.encode(Date(timeIntervalSince1970: .infinity)) }
        expectError(.typeMismatch) { try decoder.decode(Date.self, from: hex("d6 05 00 00 00 00")) }
    }

    @Test func dynamicValue() throws {
        let value: MessagePackValue = ["a": [1, -2, "x", nil, true, 1.5], "b": .binary([1, 2])]
        let bytes = try value.encoded()
        #expect(bytes == hex("82 a1 61 96 01 fe a1 78 c0 c3 cb 3f f8 00 00 00 00 00 00 a1 62 c4 02 01 02"))
        let back = try MessagePackValue.decode(bytes)
        #expect(back == value)
        #expect(back["a"]?[1]?.int64Value == -2)
        #expect(back["b"]?.binaryValue == [1, 2])
        #expect(MessagePackValue.int(5) == .uint(5))
        #expect(Set([MessagePackValue.int(5), .uint(5)]).count == 1)
        // A struct encodes to the same bytes as its dynamic twin, and decodes from it.
        let heartbeat = Heartbeat(type: "hb", requestId: 9, sentAt: Date(timeIntervalSince1970: 2))
        let dynamic = try MessagePackValue.decode(try encoder.encode(heartbeat))
        #expect(dynamic["sentAt"] == .timestamp(seconds: 2, nanoseconds: 0))
        #expect(try decoder.decode(Heartbeat.self, from: try encoder.encode(dynamic)) == heartbeat)
        // Codable round trip of a struct holding a dynamic value.
        struct Holder: Codable, Equatable { var any: MessagePackValue }
        let holder = Holder(any: value)
        #expect(try decoder.decode(Holder.self, from: try encoder.encode(holder)) == holder)
    }
}
