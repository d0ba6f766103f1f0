import FleetTesting
import Foundation
import MessagePack
import FleetProtocol
import Testing

/// The fast path (FastCoding.swift) must write the bytes Codable writes and
/// read what Codable reads, and stay strict on hostile input.
@Suite("Fast coding") struct FastCodingTests {
    let fastEncoder = MessagePackEncoder()
    let codableEncoder: MessagePackEncoder = {
        var encoder = MessagePackEncoder()
        encoder.usesFastPath = false
        return encoder
    }()
    let fastDecoder = MessagePackDecoder()
    let codableDecoder: MessagePackDecoder = {
        var decoder = MessagePackDecoder()
        decoder.usesFastPath = false
        return decoder
    }()

    static let base = Date(timeIntervalSince1970: 1_700_000_000.25)

    static func header(_ replyTo: UInt64? = nil, _ rateLimit: RateLimitStatus? = nil, id: UInt64 = 42) -> MessageHeader {
        MessageHeader(type: "sync.push", id: id, replyTo: replyTo, sentAt: base, rateLimit: rateLimit)
    }

    static func push(items: Int = 3, payload: Int = 300) -> SyncPush {
        var list: [SyncItem] = []
        for i in 0..<items {
            let sequence: UInt64 = UInt64(1 + i) << UInt64(i * 7)
            var bytes: [UInt8] = []
            for j in 0..<payload { bytes.append(UInt8(truncatingIfNeeded: j &* 31 &+ i)) }
            let signature = [UInt8](repeating: UInt8(truncatingIfNeeded: i), count: 64)
            list.append(SyncItem(sequence: sequence, transactionID: "txn-\(i)-é", payload: bytes, signature: signature))
        }
        return SyncPush(deviceID: "device-7", items: list)
    }

    static func ack(gap: Bool = false) -> SyncAck {
        SyncAck(
            status: gap ? .gap : .ok, lastApplied: 70_000, expectedSequence: gap ? 70_001 : nil,
            results: [
                SyncItemResult(sequence: 1, outcome: .applied, envelopeID: "srv-1"),
                SyncItemResult(sequence: 300, outcome: .duplicate, envelopeID: "srv-2"),
                SyncItemResult(sequence: 1 << 40, outcome: .rejected, reason: "bad signature"),
                SyncItemResult(sequence: 4, outcome: .rejected),
            ])
    }

    /// Encodes with both paths, checks the bytes are equal, and that both
    /// decoders read the value back from them.
    func check<T: Codable & Equatable & MessagePackWritable & MessagePackReadable>(_ value: T, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let fast = try fastEncoder.encode(value)
        let codable = try codableEncoder.encode(value)
        #expect(fast == codable, "\(T.self): fast path bytes differ", sourceLocation: sourceLocation)
        // Generic (dynamically found) fast path, as WireCodec calls it.
        func generic<U: Encodable>(_ value: U) throws -> [UInt8] { try fastEncoder.encode(value) }
        #expect(try generic(value) == codable, sourceLocation: sourceLocation)
        #expect(try Data(fastEncoder.encodeData(value)) == Data(codable), sourceLocation: sourceLocation)
        #expect(try fastDecoder.decode(T.self, from: codable) == value, sourceLocation: sourceLocation)
        #expect(try codableDecoder.decode(T.self, from: codable) == value, sourceLocation: sourceLocation)
        func genericDecode<U: Decodable>(_ type: U.Type) throws -> U { try fastDecoder.decode(U.self, from: Data(codable)) }
        #expect(try genericDecode(T.self) == value, sourceLocation: sourceLocation)
    }

    @Test func everyConformingTypeWritesTheCodableBytes() throws {
        try check(ProtocolVersion(major: 1, minor: 0))
        try check(ProtocolVersion(major: 65535, minor: 300))
        try check(MessageType("sync.push"))
        try check(RateLimitStatus(remaining: 0, resetAt: Self.base))
        try check(RateLimitStatus(remaining: .max, resetAt: Date(timeIntervalSince1970: -1.5)))
        try check(Self.header())
        try check(Self.header(7, RateLimitStatus(remaining: 3, resetAt: Self.base), id: .max))
        try check(Self.header(nil, RateLimitStatus(remaining: 3, resetAt: Date(timeIntervalSince1970: 1_099_511_627_776))))
        try check(MessageHeader(type: "x", id: 0, sentAt: Date(timeIntervalSince1970: 5)))
        try check(SyncItem(sequence: 0, transactionID: "", payload: [], signature: []))
        try check(Self.push())
        try check(Self.push(items: 0))
        try check(Self.push(items: 17, payload: 70_000))
        try check(SyncItemResult(sequence: 9, outcome: .applied))
        try check(Self.ack())
        try check(Self.ack(gap: true))
        try check(SyncAck(status: .ok, lastApplied: 0, results: []))
        try check(Heartbeat())
        try check(HeartbeatReply(serverInstance: "srv-α"))
        try check(FleetErrorCode.rateLimited)
        try check(FleetError(.rateLimited, "slow down", retryable: true, retryAfterMs: 250))
        try check(FleetError(.internal, String(repeating: "x", count: 40)))
    }

    /// A Codable type that holds conforming types: the nested values take the fast path.
    struct Envelope: Codable, Equatable {
        var header: MessageHeader
        var bodies: [SyncAck]
        var error: FleetError?
        var note: String
    }

    @Test func nestedInCodableTheFastPathWritesTheSameBytes() throws {
        let value = Envelope(header: Self.header(1, nil), bodies: [Self.ack(), Self.ack(gap: true)], error: FleetError(.forbidden, "no"), note: "n")
        let fast = try fastEncoder.encode(value)
        #expect(fast == (try codableEncoder.encode(value)))
        #expect(try fastDecoder.decode(Envelope.self, from: fast) == value)
        // Big nested values make the output grow while the fast path writes.
        let big = Envelope(header: Self.header(), bodies: [], error: nil, note: String(repeating: "z", count: 100))
        struct Holder: Codable { var note: String; var push: SyncPush }
        let holder = Holder(note: big.note, push: Self.push(items: 5, payload: 20_000))
        #expect(try fastEncoder.encode(holder) == (try codableEncoder.encode(holder)))
    }

    @Test func theDocumentedHeaderBytesComeOutOfTheFastPath() throws {
        // docs/protocol.md section 8 (also checked through WireCodec in WireCodecTests).
        let header = MessageHeader(type: "hello", id: 1, sentAt: Date(timeIntervalSince1970: 1_700_000_000))
        let bytes = try fastEncoder.encode(header)
        #expect(bytes == (try codableEncoder.encode(header)))
        #expect(bytes.first == 0x84)
    }

    // MARK: Accepting every valid encoding

    /// Re-encodes `value`'s map with entries reordered, unknown keys added,
    /// integers widened and optional fields present as nil.
    func variants(of bytes: [UInt8], using generator: inout some RandomNumberGenerator) throws -> [UInt8] {
        func transform(_ value: MessagePackValue) -> MessagePackValue {
            switch value {
            case .map(let entries):
                var out = entries.map { MessagePackEntry(key: $0.key, value: transform($0.value)) }
                out.shuffle(using: &generator)
                out.insert(MessagePackEntry(key: "zz-unknown", value: .array([.map([MessagePackEntry(key: 1, value: .nil)]), .binary([1, 2])])), at: Int.random(in: 0...out.count, using: &generator))
                out.append(MessagePackEntry(key: .uint(5), value: "non-string key"))
                return .map(out)
            case .array(let elements): return .array(elements.map(transform))
            default: return value
            }
        }
        return try transform(MessagePackValue.decode(bytes)).encoded()
    }

    func decodesAlike<T: Codable & Equatable & MessagePackReadable>(_ type: T.Type, _ bytes: [UInt8], expect value: T? = nil, sourceLocation: SourceLocation = #_sourceLocation) {
        let fast = Result { try fastDecoder.decode(T.self, from: bytes) }
        let codable = Result { try codableDecoder.decode(T.self, from: bytes) }
        switch (fast, codable) {
        case (.success(let a), .success(let b)):
            #expect(a == b, sourceLocation: sourceLocation)
            if let value { #expect(a == value, sourceLocation: sourceLocation) }
        case (.failure(let a as MessagePackError), .failure(_ as MessagePackError)):
            #expect(value == nil, "\(a)", sourceLocation: sourceLocation)
        case (let a, let b):
            Issue.record("fast \(a) vs Codable \(b) for \(hexString(bytes))", sourceLocation: sourceLocation)
        }
    }

    @Test func keysInAnyOrderUnknownKeysAndNonStringKeysAreAccepted() throws {
        var generator = SeededGenerator(seed: testSeed("keysInAnyOrder"))
        for _ in 0..<50 {
            decodesAlike(SyncPush.self, try variants(of: try codableEncoder.encode(Self.push()), using: &generator), expect: Self.push())
            decodesAlike(SyncAck.self, try variants(of: try codableEncoder.encode(Self.ack(gap: true)), using: &generator), expect: Self.ack(gap: true))
            let header = Self.header(3, RateLimitStatus(remaining: 1, resetAt: Self.base))
            decodesAlike(MessageHeader.self, try variants(of: try codableEncoder.encode(header), using: &generator), expect: header)
            let error = FleetError(.rateLimited, "m", retryable: true, retryAfterMs: 5)
            decodesAlike(FleetError.self, try variants(of: try codableEncoder.encode(error), using: &generator), expect: error)
            decodesAlike(HeartbeatReply.self, try variants(of: try codableEncoder.encode(HeartbeatReply(serverInstance: "s")), using: &generator), expect: HeartbeatReply(serverInstance: "s"))
            decodesAlike(Heartbeat.self, try variants(of: [0x80], using: &generator), expect: Heartbeat())
        }
    }

    @Test func optionalFieldsNilOrAbsentWideIntegersAndDuplicateKeys() throws {
        // {"seq": uint64 7, "outcome": "applied", "envelopeID": nil, "reason": nil}
        let result = hex("84 a3 73 65 71 cf 00 00 00 00 00 00 00 07 a7 6f 75 74 63 6f 6d 65 a7 61 70 70 6c 69 65 64 aa 65 6e 76 65 6c 6f 70 65 49 44 c0 a6 72 65 61 73 6f 6e c0")
        decodesAlike(SyncItemResult.self, result, expect: SyncItemResult(sequence: 7, outcome: .applied))
        // Signed formats holding non-negative values: int8 7 for seq.
        decodesAlike(SyncItemResult.self, hex("82 a3 73 65 71 d0 07 a7 6f 75 74 63 6f 6d 65 a7 61 70 70 6c 69 65 64"), expect: SyncItemResult(sequence: 7, outcome: .applied))
        // Duplicate keys: the first wins, as in the Codable decoder (even when it is nil).
        let duplicate = try MessagePackValue.map([
            MessagePackEntry(key: "seq", value: 1), MessagePackEntry(key: "outcome", value: "applied"),
            MessagePackEntry(key: "reason", value: .nil), MessagePackEntry(key: "seq", value: 2),
            MessagePackEntry(key: "reason", value: "later"), MessagePackEntry(key: "outcome", value: 5),
        ]).encoded()
        decodesAlike(SyncItemResult.self, duplicate, expect: SyncItemResult(sequence: 1, outcome: .applied))
        // [UInt8] also decodes from an array of integers.
        let item = try MessagePackValue.map([
            MessagePackEntry(key: "seq", value: 1), MessagePackEntry(key: "transactionID", value: "t"),
            MessagePackEntry(key: "payload", value: .array([1, 2, 255])), MessagePackEntry(key: "signature", value: .binary([9])),
        ]).encoded()
        decodesAlike(SyncItem.self, item, expect: SyncItem(sequence: 1, transactionID: "t", payload: [1, 2, 255], signature: [9]))
        // Timestamps in the 96-bit form and an ext8 holding 4 bytes.
        let at96 = hex("82 a9 72 65 6d 61 69 6e 69 6e 67 01 a7 72 65 73 65 74 41 74 c7 0c ff 00 00 00 00 00 00 00 00 00 00 00 05")
        decodesAlike(RateLimitStatus.self, at96, expect: RateLimitStatus(remaining: 1, resetAt: Date(timeIntervalSince1970: 5)))
        let ext8 = hex("82 a9 72 65 6d 61 69 6e 69 6e 67 01 a7 72 65 73 65 74 41 74 c7 04 ff 00 00 00 05")
        decodesAlike(RateLimitStatus.self, ext8, expect: RateLimitStatus(remaining: 1, resetAt: Date(timeIntervalSince1970: 5)))
    }

    @Test func aHeartbeatIsAMapInBothCodecs() {
        for bytes in [[0x80], [0x81, 0xa1, 0x61, 0x01]] as [[UInt8]] {
            decodesAlike(Heartbeat.self, bytes, expect: Heartbeat())
        }
        // `[]`, nil, a number, a string: not a heartbeat's body (both codecs refuse them alike).
        for bytes in [[0x90], [0xc0], [0x01], [0xa1, 0x61]] as [[UInt8]] {
            #expect((try? fastDecoder.decode(Heartbeat.self, from: bytes)) == nil, "\(hexString(bytes))")
            decodesAlike(Heartbeat.self, bytes)
        }
        decodesAlike(Heartbeat.self, [0x81, 0x01, 0x90])
    }

    // MARK: Errors

    func fastError<T: MessagePackReadable & Decodable>(_ type: T.Type, _ bytes: [UInt8], sourceLocation: SourceLocation = #_sourceLocation) -> (fast: MessagePackError?, codable: MessagePackError?) {
        func error(_ body: () throws -> T) -> MessagePackError? {
            do {
                _ = try body()
                Issue.record("expected an error", sourceLocation: sourceLocation)
            } catch let error as MessagePackError {
                return error
            } catch {
                Issue.record("not a MessagePackError: \(error)", sourceLocation: sourceLocation)
            }
            return nil
        }
        return (error { try fastDecoder.decode(T.self, from: bytes) }, error { try codableDecoder.decode(T.self, from: bytes) })
    }

    @Test func errorsNameTheSamePathAndCodeAsCodable() throws {
        func mutate(_ value: MessagePackValue, at path: [String], to replacement: MessagePackValue?) -> MessagePackValue {
            guard let first = path.first else { return replacement ?? .nil }
            switch value {
            case .map(let entries):
                var out: [MessagePackEntry] = []
                for entry in entries {
                    if entry.key.stringValue == first {
                        if path.count == 1, replacement == nil { continue }
                        out.append(MessagePackEntry(key: entry.key, value: mutate(entry.value, at: Array(path.dropFirst()), to: replacement)))
                    } else {
                        out.append(entry)
                    }
                }
                return .map(out)
            case .array(var elements):
                if let i = Int(first), i < elements.count { elements[i] = mutate(elements[i], at: Array(path.dropFirst()), to: replacement) }
                return .array(elements)
            default: return value
            }
        }
        let push = try MessagePackValue.decode(try codableEncoder.encode(Self.push()))
        let ack = try MessagePackValue.decode(try codableEncoder.encode(Self.ack()))
        let header = try MessagePackValue.decode(try codableEncoder.encode(Self.header(1, RateLimitStatus(remaining: 1, resetAt: Self.base))))
        let cases: [(MessagePackValue, [String], MessagePackValue?, String, MessagePackError.Code)] = [
            (push, ["items", "1", "seq"], "x", "items[1].seq", .typeMismatch),
            (push, ["items", "2", "seq"], .int(-1), "items[2].seq", .valueOutOfRange),
            (push, ["items", "0", "payload"], "x", "items[0].payload", .typeMismatch),
            (push, ["items", "0", "payload"], .array([1, 256]), "items[0].payload[1]", .valueOutOfRange),
            (push, ["items", "1", "signature"], nil, "items[1].signature", .keyNotFound),
            (push, ["items", "1"], .array([]), "items[1]", .typeMismatch),
            (push, ["items"], .map([]), "items", .typeMismatch),
            (push, ["deviceID"], nil, "deviceID", .keyNotFound),
            (ack, ["results", "3", "outcome"], "maybe", "results[3].outcome", .invalidInput),
            (ack, ["results", "0", "envelopeID"], 5, "results[0].envelopeID", .typeMismatch),
            (ack, ["status"], "fine", "status", .invalidInput),
            (ack, ["lastApplied"], .nil, "lastApplied", .typeMismatch),
            (header, ["v"], .array([1]), "v[1]", .valueNotFound),
            (header, ["v"], .array([1, 0, 0]), "v", .invalidInput),
            (header, ["v"], .array([1, 70000]), "v[1]", .valueOutOfRange),
            (header, ["rl", "resetAt"], .extended(type: 3, data: [0, 0, 0, 1]), "rl.resetAt", .typeMismatch),
            (header, ["rl", "resetAt"], .extended(type: -1, data: [0, 0, 1]), "rl.resetAt", .invalidTimestamp),
            (header, ["rl", "remaining"], .nil, "rl.remaining", .typeMismatch),
            (header, ["at"], nil, "at", .keyNotFound),
            (header, ["t"], .binary([1]), "t", .typeMismatch),
        ]
        for (value, path, replacement, expectedPath, code) in cases {
            let bytes = try mutate(value, at: path, to: replacement).encoded()
            let errors: (fast: MessagePackError?, codable: MessagePackError?)
            switch value {
            case push: errors = fastError(SyncPush.self, bytes)
            case ack: errors = fastError(SyncAck.self, bytes)
            default: errors = fastError(MessageHeader.self, bytes)
            }
            #expect(errors.fast?.code == code, "\(String(describing: errors.fast))")
            #expect(errors.fast?.path == expectedPath, "\(String(describing: errors.fast))")
            #expect(errors.codable?.code == code, "\(String(describing: errors.codable))")
            // Codable names the element after the last ("Index 2") for a too-long version.
            if path != ["v"] || code != .invalidInput {
                #expect(errors.codable?.path == expectedPath, "\(String(describing: errors.codable))")
            }
        }
        // Invalid UTF-8 in a field the type reads.
        var bad = try codableEncoder.encode(SyncPush(deviceID: "abc", items: []))
        if let i = bad.firstIndex(of: UInt8(ascii: "b")) { bad[i] = 0xff }
        let (fast, codable) = fastError(SyncPush.self, bad)
        #expect(fast?.code == .invalidUTF8 && fast?.path == "deviceID", "\(String(describing: fast))")
        #expect(codable?.code == .invalidUTF8)
    }

    // MARK: Robustness

    func expectValueOrTypedError(_ bytes: [UInt8], _ counts: inout [String: Int]) {
        func attempt<T: MessagePackReadable & Decodable & Equatable & Encodable>(_ type: T.Type) {
            do {
                let value = try fastDecoder.decode(T.self, from: bytes)
                counts["value", default: 0] += 1
                // Whatever decodes must encode and decode back to itself.
                let again = try? fastDecoder.decode(T.self, from: try fastEncoder.encode(value))
                #expect(again == value)
            } catch let error as MessagePackError {
                counts[error.code.description, default: 0] += 1
            } catch {
                Issue.record("untyped error \(error) for \(hexString(bytes))")
            }
            // The Codable path must agree on acceptance.
            let fast = try? fastDecoder.decode(T.self, from: bytes)
            let codable = try? codableDecoder.decode(T.self, from: bytes)
            #expect(fast == codable, "fast and Codable disagree on \(hexString(bytes))")
        }
        attempt(SyncPush.self)
        attempt(SyncAck.self)
        attempt(MessageHeader.self)
    }

    @Test func everyPrefixIsATypedIncompleteError() throws {
        for bytes in [try codableEncoder.encode(Self.push(items: 2, payload: 40)), try codableEncoder.encode(Self.ack(gap: true)),
                      try codableEncoder.encode(Self.header(1, RateLimitStatus(remaining: 1, resetAt: Self.base)))] {
            for length in 0..<bytes.count {
                let prefix = Array(bytes[..<length])
                for decode in [
                    { _ = try fastDecoder.decode(SyncPush.self, from: prefix) },
                    { _ = try fastDecoder.decode(SyncAck.self, from: prefix) },
                    { _ = try fastDecoder.decode(MessageHeader.self, from: prefix) },
                ] as [() throws -> Void] {
                    do {
                        try decode()
                        Issue.record("prefix of \(length) bytes decoded")
                    } catch let error as MessagePackError {
                        #expect(error.code == .truncated || error.code == .lengthExceedsInput, "\(error)")
                    } catch {
                        Issue.record("untyped error \(error)")
                    }
                }
            }
        }
    }

    @Test func seededMutationsEndInValueOrTypedError() throws {
        let seed = testSeed("fastPathMutations")
        var generator = SeededGenerator(seed: seed)
        let originals = [
            try codableEncoder.encode(Self.push(items: 3, payload: 20)), try codableEncoder.encode(Self.ack(gap: true)),
            try codableEncoder.encode(Self.header(1, RateLimitStatus(remaining: 1, resetAt: Self.base))),
        ]
        let interesting: [UInt8] = [0x00, 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xc1, 0xc2, 0xc3, 0xc4, 0xc7, 0xca, 0xcb, 0xcc, 0xcf, 0xd0, 0xd3, 0xd4, 0xd6, 0xd7, 0xd8, 0xd9, 0xdc, 0xdd, 0xde, 0xdf, 0xe0, 0xff]
        var counts: [String: Int] = [:]
        for round in 0..<21_000 {
            var bytes = originals[round % originals.count]
            for _ in 0..<Int.random(in: 1...4, using: &generator) {
                guard !bytes.isEmpty else { break }
                let at = Int.random(in: 0..<bytes.count, using: &generator)
                switch Int.random(in: 0..<5, using: &generator) {
                case 0: bytes[at] = UInt8.random(in: 0...255, using: &generator)
                case 1: bytes[at] = interesting.randomElement(using: &generator) ?? 0
                case 2: bytes[at] ^= 1 << UInt8.random(in: 0..<8, using: &generator)
                case 3: bytes.remove(at: at)
                default: bytes.insert(interesting.randomElement(using: &generator) ?? 0, at: at)
                }
            }
            expectValueOrTypedError(bytes, &counts)
        }
        print("fast path mutations (seed \(seed)): \(counts.sorted { $0.key < $1.key })")
    }
}

private func hex(_ text: String) -> [UInt8] {
    text.split(separator: " ").compactMap { UInt8($0, radix: 16) }
}

private func hexString(_ bytes: [UInt8]) -> String {
    bytes.prefix(200).map { String(format: "%02x", $0) }.joined(separator: " ")
}


