import Foundation
import MessagePack
import Testing

// A type with every kind of field, coded both ways: the fast path must write
// the Codable bytes at every format boundary and read what Codable reads.

struct Inner: Codable, Equatable, MessagePackWritable, MessagePackReadable {
    var n: Int

    func write(to writer: inout MessagePackWriter) throws {
        writer.writeMapHeader(1)
        writer.writeKey("n")
        writer.write(n)
    }

    init(n: Int) { self.n = n }

    init(from reader: inout MessagePackReader) throws {
        var n: Int?
        for _ in 0..<(try reader.readMapHeader()) {
            switch try reader.readKey() {
            case "n" where n == nil: n = try reader.readInt()
            default: try reader.skipValue()
            }
        }
        guard let n else { throw reader.missingKey("n") }
        self.n = n
    }
}

struct Sample: Codable, Equatable, MessagePackWritable, MessagePackReadable {
    var u = UInt64(0), i = Int64(0), small = 0, u32 = UInt32(0), u16 = UInt16(0), u8 = UInt8(0)
    var i32 = Int32(0), i16 = Int16(0), i8 = Int8(0), uint = UInt(0)
    var s = "", b: [UInt8] = [], d = Data(), at = Date(timeIntervalSince1970: 0), ts = MessagePackTimestamp(seconds: 0)
    var x = 0.0, f = Float(0), flag = false, opt: String? = nil
    var list: [Inner] = []

    init() {}

    func write(to w: inout MessagePackWriter) throws {
        w.writeMapHeader(opt == nil ? 19 : 20)
        w.writeKey("u"); w.write(u)
        w.writeKey("i"); w.write(i)
        w.writeKey("small"); w.write(small)
        w.writeKey("u32"); w.write(u32)
        w.writeKey("u16"); w.write(u16)
        w.writeKey("u8"); w.write(u8)
        w.writeKey("i32"); w.write(i32)
        w.writeKey("i16"); w.write(i16)
        w.writeKey("i8"); w.write(i8)
        w.writeKey("uint"); w.write(uint)
        w.writeKey("s"); w.write(s)
        w.writeKey("b"); w.write(b)
        w.writeKey("d"); w.write(d)
        w.writeKey("at"); try w.write(at)
        w.writeKey("ts"); try w.write(ts)
        w.writeKey("x"); w.write(x)
        w.writeKey("f"); w.write(f)
        w.writeKey("flag"); w.write(flag)
        if let opt { w.writeKey("opt"); w.write(opt) }
        w.writeKey("list"); try w.write(list)
    }

    init(from r: inout MessagePackReader) throws {
        for _ in 0..<(try r.readMapHeader()) {
            switch try r.readKey() {
            case "u": u = try r.readUInt64()
            case "i": i = try r.readInt64()
            case "small": small = try r.readInt()
            case "u32": u32 = try r.readUInt32()
            case "u16": u16 = try r.readUInt16()
            case "u8": u8 = try r.readInteger()
            case "i32": i32 = try r.readInteger()
            case "i16": i16 = try r.readInteger()
            case "i8": i8 = try r.readInteger()
            case "uint": uint = try r.readInteger()
            case "s": s = try r.readString()
            case "b": b = try r.readBinary()
            case "d": d = try r.readData()
            case "at": at = try r.readDate()
            case "ts": ts = try r.readTimestamp()
            case "x": x = try r.readDouble()
            case "f": f = try r.readFloat()
            case "flag": flag = try r.readBool()
            case "opt": opt = try r.readNil() ? nil : try r.readString()
            case "list": list = try r.readArray(of: Inner.self)
            default: try r.skipValue()
            }
        }
    }
}

/// One integer field, to compare how both paths read every format into every width.
struct Box<T: FixedWidthInteger & Codable>: Codable, Equatable, MessagePackReadable {
    var n: T
    init(from reader: inout MessagePackReader) throws {
        var n: T?
        for _ in 0..<(try reader.readMapHeader()) {
            switch try reader.readKey() {
            case "n" where n == nil: n = try reader.readInteger()
            default: try reader.skipValue()
            }
        }
        guard let n else { throw reader.missingKey("n") }
        self.n = n
    }
}

struct FloatBox: Codable, Equatable, MessagePackReadable {
    var x: Double
    var f: Float
    init(from reader: inout MessagePackReader) throws {
        var x: Double?, f: Float?
        for _ in 0..<(try reader.readMapHeader()) {
            switch try reader.readKey() {
            case "x": x = try reader.readDouble()
            case "f": f = try reader.readFloat()
            default: try reader.skipValue()
            }
        }
        guard let x else { throw reader.missingKey("x") }
        guard let f else { throw reader.missingKey("f") }
        self.x = x
        self.f = f
    }
}

@Suite("Fast path") struct FastPathTests {
    let codableEncoder: MessagePackEncoder = {
        var encoder = MessagePackEncoder()
        encoder.usesFastPath = false
        return encoder
    }()
    let codableDecoder: MessagePackDecoder = {
        var decoder = MessagePackDecoder()
        decoder.usesFastPath = false
        return decoder
    }()

    func check(_ sample: Sample, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let fast = try MessagePackEncoder().encode(sample)
        let codable = try codableEncoder.encode(sample)
        #expect(fast == codable, "\(hexString(Array(fast.prefix(64)))) vs \(hexString(Array(codable.prefix(64))))", sourceLocation: sourceLocation)
        let back = try MessagePackDecoder().decode(Sample.self, from: codable)
        #expect(try MessagePackEncoder().encode(back) == codable, sourceLocation: sourceLocation)
        let viaCodable = try codableDecoder.decode(Sample.self, from: codable)
        #expect(try codableEncoder.encode(viaCodable) == codable, sourceLocation: sourceLocation)
    }

    @Test func integersAtEveryFormatBoundary() throws {
        let unsigned: [UInt64] = [0, 1, 127, 128, 255, 256, 65535, 65536, 0xffff_ffff, 0x1_0000_0000, .max]
        let signed: [Int64] = [0, -1, -32, -33, -128, -129, -32768, -32769, Int64(Int32.min), Int64(Int32.min) - 1, .min, 127, 128, .max]
        for u in unsigned {
            var sample = Sample()
            sample.u = u
            sample.uint = UInt(u)
            sample.u32 = UInt32(truncatingIfNeeded: u)
            sample.u16 = UInt16(truncatingIfNeeded: u)
            sample.u8 = UInt8(truncatingIfNeeded: u)
            try check(sample)
        }
        for i in signed {
            var sample = Sample()
            sample.i = i
            sample.small = Int(i)
            sample.i32 = Int32(truncatingIfNeeded: i)
            sample.i16 = Int16(truncatingIfNeeded: i)
            sample.i8 = Int8(truncatingIfNeeded: i)
            try check(sample)
        }
    }

    @Test func stringsBinariesAndArraysAtEveryFormatBoundary() throws {
        for n in [0, 1, 31, 32, 255, 256, 65535, 65536] {
            var sample = Sample()
            sample.s = String(repeating: "a", count: n)
            sample.b = [UInt8](repeating: 7, count: n)
            sample.d = Data(repeating: 9, count: n)
            sample.opt = String(repeating: "é", count: n / 2)
            try check(sample)
        }
        for n in [0, 15, 16, 65535, 65536] {
            var sample = Sample()
            sample.list = (0..<n).map { Inner(n: $0 - 3) }
            try check(sample)
        }
    }

    @Test func floatsBoolsAndTimestamps() throws {
        let seconds: [Int64] = [0, 1, 0xffff_ffff, 0x1_0000_0000, 0x3_ffff_ffff, 0x4_0000_0000, -1, .min, .max]
        for s in seconds {
            for nanos: UInt32 in [0, 1, 999_999_999] {
                var sample = Sample()
                sample.ts = MessagePackTimestamp(seconds: s, nanoseconds: nanos)
                sample.at = Date(timeIntervalSince1970: Double(s % (1 << 40)) + Double(nanos) / 1e9)
                sample.x = Double(s) / 3
                sample.f = Float(nanos)
                sample.flag = nanos == 1
                try check(sample)
            }
        }
        var nan = Sample()
        nan.x = .nan
        nan.f = -.infinity
        #expect(try MessagePackEncoder().encode(nan) == (try codableEncoder.encode(nan)))
        var bad = Sample()
        bad.ts = MessagePackTimestamp(seconds: 0, nanoseconds: 1_000_000_000)
        expectError(.invalidTimestamp) { try MessagePackEncoder().encode(bad) }
        bad = Sample()
        bad.at = Date(timeIntervalSince1970: .infinity)
        expectError(.invalidTimestamp) { try MessagePackEncoder().encode(bad) }
    }

    /// A conformance whose output grows on every call (a bug) cannot make the encoder loop.
    final class Growing: Encodable, MessagePackWritable {
        var calls = 0
        func encode(to encoder: any Encoder) throws {}
        func write(to writer: inout MessagePackWriter) throws {
            calls += 1
            writer.write([UInt8](repeating: 0, count: 300_000 * calls))
        }
    }

    @Test func aConformanceThatNeverWritesTheSameSizeIsAnError() throws {
        expectError(.invalidEncoderUse) { try MessagePackEncoder().encode(Growing()) }
        // Nested, the output buffer grows by doubling, so a later attempt may fit:
        // either way the encode ends.
        struct Holder: Encodable { var inner: Growing }
        let nested = try? MessagePackEncoder().encode(Holder(inner: Growing()))
        #expect(nested == nil || nested?.isEmpty == false)
    }

    @Test func theGuessedBufferSizeIsRightAfterBigAndSmallMessages() throws {
        var big = Sample()
        big.b = [UInt8](repeating: 1, count: 300_000)
        var small = Sample()
        small.s = "x"
        for sample in [big, small, big, big, small, small, big] {
            let bytes = try MessagePackEncoder().encode(sample)
            #expect(bytes == (try codableEncoder.encode(sample)))
            #expect(bytes.capacity < 2 * bytes.count + 4096)
        }
    }

    /// Both paths give the same value, or errors with the same code and message.
    func same<T: Decodable & MessagePackReadable & Equatable>(_ type: T.Type, _ bytes: [UInt8], sourceLocation: SourceLocation = #_sourceLocation) {
        let fast = Result { try MessagePackDecoder().decode(T.self, from: bytes) }
        let codable = Result { try codableDecoder.decode(T.self, from: bytes) }
        switch (fast, codable) {
        case (.success(let a), .success(let b)):
            #expect(a == b, sourceLocation: sourceLocation)
        case (.failure(let a as MessagePackError), .failure(let b as MessagePackError)):
            #expect(a.code == b.code && a.message == b.message && a.path == b.path, "\(a) vs \(b)", sourceLocation: sourceLocation)
        case (let a, let b):
            Issue.record("\(T.self) from \(hexString(bytes)): fast \(a) vs Codable \(b)", sourceLocation: sourceLocation)
        }
    }

    @Test func everyIntegerFormatIntoEveryWidthReadsAsCodableReads() {
        let key: [UInt8] = [0x81, 0xa1, 0x6e]
        let values: [[UInt8]] = [
            [0x00], [0x7f], [0xe0], [0xff], [0xcc, 0xff], [0xcd, 0x01, 0x00], [0xce, 0xff, 0xff, 0xff, 0xff],
            [0xcf, 0x80, 0, 0, 0, 0, 0, 0, 0], [0xcf, 0, 0, 0, 0, 0, 0, 0, 5], [0xd0, 0x80], [0xd0, 0x05],
            [0xd1, 0x80, 0x00], [0xd2, 0x80, 0, 0, 0], [0xd3, 0x80, 0, 0, 0, 0, 0, 0, 0], [0xd3, 0, 0, 0, 0, 0, 0, 0x01, 0],
            [0xc0], [0xc3], [0xa1, 0x31], [0xcb, 0, 0, 0, 0, 0, 0, 0, 0], [0x90], [0x80], [0xc4, 0x00], [0xd6, 0xff, 0, 0, 0, 1],
        ]
        for value in values {
            let bytes = key + value
            same(Box<UInt8>.self, bytes)
            same(Box<UInt16>.self, bytes)
            same(Box<UInt32>.self, bytes)
            same(Box<UInt64>.self, bytes)
            same(Box<UInt>.self, bytes)
            same(Box<Int8>.self, bytes)
            same(Box<Int16>.self, bytes)
            same(Box<Int32>.self, bytes)
            same(Box<Int64>.self, bytes)
            same(Box<Int>.self, bytes)
        }
        // Missing key, and a map that is not a map.
        same(Box<Int>.self, [0x80])
        same(Box<Int>.self, [0x91, 0x01])
    }

    @Test func floatsReadAsCodableReads() {
        let floats: [[UInt8]] = [
            [0xca, 0x3f, 0xc0, 0, 0], [0xcb, 0x3f, 0xf8, 0, 0, 0, 0, 0, 0], [0xcb, 0x3f, 0xb9, 0x99, 0x99, 0x99, 0x99, 0x99, 0x9a],
            [0xcb, 0x7f, 0xf8, 0, 0, 0, 0, 0, 0], [0x05], [0xff], [0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
            [0xd3, 0x80, 0, 0, 0, 0, 0, 0, 1], [0xce, 0x01, 0, 0, 1], [0xa0], [0xc0],
        ]
        for x in floats {
            for f in floats {
                let bytes: [UInt8] = [0x82, 0xa1, 0x78] + x + [0xa1, 0x66] + f
                // NaN != NaN: compare acceptance and bytes of what comes out.
                let fast = try? MessagePackDecoder().decode(FloatBox.self, from: bytes)
                let codable = try? codableDecoder.decode(FloatBox.self, from: bytes)
                #expect((fast == nil) == (codable == nil), "\(hexString(bytes))")
                if let fast, let codable {
                    #expect(fast.x.bitPattern == codable.x.bitPattern && fast.f.bitPattern == codable.f.bitPattern)
                }
                if fast == nil { same(FloatBox.self, bytes) }
            }
        }
    }

    @Test func unknownValuesOfAnyShapeAreSkipped() throws {
        var deep: MessagePackValue = .map([MessagePackEntry(key: 1, value: .extended(type: 9, data: [1, 2, 3]))])
        for level in 0..<60 { deep = level % 2 == 0 ? .array([deep, .nil, 1.5]) : .map([MessagePackEntry(key: "k", value: deep)]) }
        let value = MessagePackValue.map([
            MessagePackEntry(key: "unknown", value: deep),
            MessagePackEntry(key: .binary([1]), value: .array([.string(String(repeating: "s", count: 300)), .binary([UInt8](repeating: 0, count: 70_000))])),
            MessagePackEntry(key: "n", value: 5),
            MessagePackEntry(key: "f32", value: .float(1)),
            MessagePackEntry(key: "ts", value: .timestamp(seconds: -5, nanoseconds: 3)),
        ])
        let bytes = try value.encoded()
        #expect(try MessagePackDecoder().decode(Inner.self, from: bytes) == Inner(n: 5))
        same(Inner.self, bytes)
    }

    @Test func limitsApplyAsOnTheCodablePath() throws {
        var sample = Sample()
        sample.s = String(repeating: "s", count: 40)
        sample.b = [UInt8](repeating: 1, count: 40)
        sample.list = (0..<20).map { Inner(n: $0) }
        let bytes = try codableEncoder.encode(sample)
        // An unknown key whose value nests 10 deep and holds a long str.
        var deep: MessagePackValue = .string(String(repeating: "q", count: 50))
        for _ in 0..<9 { deep = .array([deep]) }
        let withUnknown = try MessagePackValue.map([MessagePackEntry(key: "zz", value: deep), MessagePackEntry(key: "n", value: 1)]).encoded()
        let limitsList: [MessagePackLimits] = [
            .init(maxDepth: 1), .init(maxDepth: 2), .init(maxDepth: 9), .init(maxDepth: 10), .init(maxDepth: 11),
            .init(maxCollectionCount: 19), .init(maxCollectionCount: 20),
            .init(maxStringLength: 39), .init(maxStringLength: 49), .init(maxStringLength: 50),
            .init(maxBinaryLength: 39), .init(maxBinaryLength: 40),
            .init(maxInputSize: bytes.count - 1), .init(maxInputSize: bytes.count),
        ]
        for limits in limitsList {
            var fastDecoder = MessagePackDecoder(limits: limits)
            var codable = MessagePackDecoder(limits: limits)
            codable.usesFastPath = false
            func compare<T: Decodable & MessagePackReadable & Equatable>(_ type: T.Type, _ input: [UInt8]) {
                fastDecoder.usesFastPath = true
                let a = Result { try fastDecoder.decode(T.self, from: input) }
                let b = Result { try codable.decode(T.self, from: input) }
                switch (a, b) {
                case (.success(let x), .success(let y)): #expect(x == y)
                case (.failure(let x as MessagePackError), .failure(let y as MessagePackError)):
                    #expect(x.code == y.code, "\(limits): \(x) vs \(y)")
                default: Issue.record("\(limits): fast \(a) vs Codable \(b)")
                }
            }
            compare(Sample.self, bytes)
            compare(Inner.self, withUnknown)
        }
    }

    @Test func fastPathErrorsCarryPathAndOffset() throws {
        let bytes = try MessagePackValue.map([
            MessagePackEntry(key: "list", value: .array([.map([MessagePackEntry(key: "n", value: 1)]), .map([MessagePackEntry(key: "n", value: "x")])])),
        ]).encoded()
        let error = expectError(.typeMismatch) { try MessagePackDecoder().decode(Sample.self, from: bytes) }
        #expect(error?.path == "list[1].n")
        #expect(error?.offset == bytes.count - 2)
        #expect(error?.message == "expected integer, found str")
        // The pre-scan still runs first: limits and trailing bytes as for Codable.
        expectError(.trailingBytes) { try MessagePackDecoder().decode(Inner.self, from: [0x81, 0xa1, 0x6e, 0x01, 0x00]) }
        expectError(.depthLimitExceeded) {
            try MessagePackDecoder(limits: .init(maxDepth: 2)).decode(Inner.self, from: [0x82, 0xa1, 0x6e, 0x01, 0xa1, 0x78, 0x91, 0x91, 0x90])
        }
        expectError(.lengthExceedsInput) { try MessagePackDecoder().decode(Inner.self, from: [0xdf, 0xff, 0xff, 0xff, 0xff]) }
    }
}
