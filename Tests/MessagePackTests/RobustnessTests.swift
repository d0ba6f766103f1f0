import FleetTesting
import Foundation
import MessagePack
import Testing

@Suite("Robustness")
struct RobustnessTests {
    let encoder = MessagePackEncoder()
    let decoder = MessagePackDecoder()

    /// Valid messages of many shapes, used by the prefix and mutation tests.
    func corpus() throws -> [[UInt8]] {
        let heartbeat = Heartbeat(type: "heartbeat", requestId: 77, sentAt: Date(timeIntervalSince1970: 1_700_000_000.25))
        var results: [ItemResult] = []
        for n in 1...10 {
            let rejected = n % 3 == 0
            results.append(ItemResult(seq: UInt64(n), status: rejected ? .rejected : .applied, serverId: "srv-\(n)", reason: rejected ? "bad" : nil))
        }
        let ack = Ack(type: "ack", requestId: 1, lastApplied: 10, results: results)
        var messages: [[UInt8]] = []
        messages.append(try encoder.encode(samplePush()))
        messages.append(try encoder.encode(heartbeat))
        messages.append(try encoder.encode(ack))
        let ints: MessagePackValue = [0, 127, 128, 255, 256, 65535, 65536, .uint(UInt64.max), -1, -33, -129, .int(Int64.min)]
        let exts: MessagePackValue = [.extended(type: 3, data: [1, 2, 3]), .extended(type: 4, data: [9]), .timestamp(seconds: -5, nanoseconds: 7)]
        let dynamic: MessagePackValue = [
            "ints": ints,
            "floats": [.float(1.5), .double(-2.25)],
            "str": .string(String(repeating: "é", count: 20)),
            "bin": .binary(Array(repeating: 1, count: 300)),
            "ext": exts,
            .uint(7): [[[["deep"]]]],
        ]
        messages.append(try dynamic.encoded())
        return messages
    }

    @Test func everyPrefixIsATypedError() throws {
        for message in try corpus() {
            for length in 0..<message.count {
                let prefix = Array(message[0..<length])
                do {
                    _ = try MessagePackValue.decode(prefix)
                    Issue.record("prefix of \(length)/\(message.count) bytes decoded")
                } catch let error as MessagePackError {
                    // Ending early shows either as truncation or as a declared length the rest cannot hold.
                    #expect(error.code == .truncated || error.code == .lengthExceedsInput, "\(error)")
                }
            }
            #expect(throws: Never.self) { try MessagePackValue.decode(message) }
        }
    }

    @Test func byteByByteStream() throws {
        let messages = try corpus()
        let stream = messages.flatMap { $0 }
        // One byte at a time.
        var reader = MessagePackStreamReader()
        var decoded: [MessagePackValue] = []
        for byte in stream {
            reader.append([byte])
            while let message = try reader.next() { decoded.append(message) }
        }
        #expect(decoded == (try messages.map { try MessagePackValue.decode($0) }))
        #expect(reader.bufferedCount == 0)
        // All at once: many messages per buffer.
        var whole = MessagePackStreamReader()
        whole.append(stream)
        var count = 0
        while try whole.next() != nil { count += 1 }
        #expect(count == messages.count)
    }

    @Test func lengthBombsDoNotAllocate() throws {
        for header in ["dd ff ff ff ff", "df ff ff ff ff", "db ff ff ff ff", "c6 ff ff ff ff", "c9 ff ff ff ff 01"] {
            let error = expectError(.lengthExceedsInput) { try MessagePackValue.decode(hex(header)) }
            #expect(error?.offset == 0)
            expectError(.lengthExceedsInput) { try decoder.decode([Int].self, from: hex(header)) }
        }
        // Nested: an array of 3 declaring 2^32-1 inside; every pending element needs a byte.
        expectError(.lengthExceedsInput) { try MessagePackValue.decode(hex("93 dd ff ff ff ff 01 02")) }
        expectError(.lengthExceedsInput) { try MessagePackValue.decode(hex("dc 00 05 01 02")) }
    }

    @Test func limitsAreEnforced() throws {
        let limits = MessagePackLimits(maxDepth: 4, maxCollectionCount: 3, maxStringLength: 4, maxBinaryLength: 2, maxInputSize: 64)
        expectError(.collectionLimitExceeded) { try MessagePackValue.decode(hex("94 01 02 03 04"), limits: limits) }
        expectError(.collectionLimitExceeded) { try MessagePackValue.decode(hex("84 01 01 02 02 03 03 04 04"), limits: limits) }
        expectError(.sizeLimitExceeded) { try MessagePackValue.decode(hex("a5 61 61 61 61 61"), limits: limits) }
        expectError(.sizeLimitExceeded) { try MessagePackValue.decode(hex("c4 03 01 02 03"), limits: limits) }
        expectError(.sizeLimitExceeded) { try MessagePackValue.decode([UInt8](repeating: 0xc0, count: 65), limits: limits) }
        expectError(.depthLimitExceeded) { try MessagePackValue.decode(hex("91 91 91 91 91 01"), limits: limits) }
        #expect(try MessagePackValue.decode(hex("91 91 91 91 01"), limits: limits) == [[[[1]]]])
    }

    @Test func deepNesting() throws {
        let deep100 = [UInt8](repeating: 0x91, count: 100) + [0x01]
        let error = expectError(.depthLimitExceeded) { try MessagePackValue.decode(deep100) }
        #expect(error?.codingPath.count == 64)
        expectError(.depthLimitExceeded) { try decoder.decode([[[[[[Int]]]]]].self, from: deep100) }
        // Between msgpack-c's own limit (32) and ours (64) decoding still works.
        for depth in [31, 32, 33, 40, 64] {
            let bytes = [UInt8](repeating: 0x91, count: depth) + [0x2a]
            var value = try MessagePackValue.decode(bytes)
            for _ in 0..<depth { value = try #require(value[0]) }
            #expect(value == 42, "depth \(depth)")
            #expect(try value.encoded() == [0x2a])
        }
        // Limits above the ceiling act as the ceiling, so recursion stays bounded.
        let generous = MessagePackLimits(maxDepth: 1_000_000)
        let atCeiling = [UInt8](repeating: 0x91, count: MessagePackLimits.depthCeiling) + [0xc0]
        #expect(try MessagePackValue.decode(atCeiling, limits: generous).encoded() == atCeiling)
        expectError(.depthLimitExceeded) { try MessagePackValue.decode([0x91] + atCeiling, limits: generous) }
        let mapDepth = [UInt8](repeating: 0x81, count: 0) + Array(repeating: [0x81, 0xa1, 0x6b], count: 40).flatMap { $0 } + [0xc0]
        #expect(try MessagePackValue.decode(mapDepth)["k"]?["k"] != nil)
    }

    @Test func trailingBytesRejected() throws {
        let error = expectError(.trailingBytes) { try decoder.decode(Int.self, from: hex("01 02")) }
        #expect(error?.offset == 1)
        expectError(.trailingBytes) { try MessagePackValue.decode(try encoder.encode(samplePush()) + [0xc0]) }
        expectError(.truncated) { try MessagePackValue.decode([]) }
        expectError(.invalidInput) { try MessagePackValue.decode(hex("c1")) }
        expectError(.invalidInput) { try MessagePackValue.decode(hex("92 01 c1")) }
    }

    @Test func invalidUTF8NamesThePath() throws {
        struct Inner: Codable { var name: String }
        struct Outer: Codable { var items: [Inner] }
        // {"items": [{"name": "ok"}, {"name": <ff fe>}]}
        let bytes = hex("81 a5 69 74 65 6d 73 92 81 a4 6e 61 6d 65 a2 6f 6b 81 a4 6e 61 6d 65 a2 ff fe")
        let error = expectError(.invalidUTF8) { try decoder.decode(Outer.self, from: bytes) }
        #expect(error?.codingPath == ["items", "[1]", "name"])
        #expect(error?.description == "invalidUTF8 at items[1].name (byte 24): str of 2 bytes is not valid UTF-8")
        let dynamicError = expectError(.invalidUTF8) { try MessagePackValue.decode(bytes) }
        #expect(dynamicError?.path == "items[1].name")
        // Overlong encoding and a lone surrogate are invalid too.
        expectError(.invalidUTF8) { try decoder.decode(String.self, from: hex("a2 c0 af")) }
        expectError(.invalidUTF8) { try decoder.decode(String.self, from: hex("a3 ed a0 80")) }
    }

    @Test func errorsNameTheCodingPath() throws {
        // items[1].seq is a string instead of an integer.
        var value = try MessagePackValue.decode(try encoder.encode(samplePush()))
        guard case .map(var entries) = value, case .array(var items) = entries[2].value, case .map(var item) = items[1] else {
            Issue.record("unexpected shape")
            return
        }
        item[1].value = "seven"
        items[1] = .map(item)
        entries[2].value = .array(items)
        value = .map(entries)
        let bytes = try value.encoded()
        let error = expectError(.typeMismatch) { try decoder.decode(Push.self, from: bytes) }
        #expect(error?.path == "items[1].seq")
        #expect(error?.message == "expected unsigned integer, found str")
        #expect(error?.offset != nil)

        let missing = expectError(.keyNotFound) { try decoder.decode(Heartbeat.self, from: try MessagePackValue.map([MessagePackEntry(key: "type", value: "hb")]).encoded()) }
        #expect(missing?.path == "requestId")
        let badEnum = expectError(.invalidInput) { try decoder.decode(ItemStatus.self, from: try encoder.encode("nope")) }
        #expect(badEnum != nil)
        let short = expectError(.valueNotFound) { try decoder.decode(Pair.self, from: hex("91 01")) }
        #expect(short?.path == "[1]")
        // Truncation inside a nested value names where it happened.
        let truncated = expectError(.truncated) { try decoder.decode(Heartbeat.self, from: hex("82 a4 74 79 70 65 a2 68 62 a9 72 65 71 75 65 73 74 49 64 cd 01")) }
        #expect(truncated?.path == "requestId")
    }

    struct Pair: Codable {
        var a: Int
        var b: Int
        init(from decoder: any Decoder) throws {
            var c = try decoder.unkeyedContainer()
            a = try c.decode(Int.self)
            b = try c.decode(Int.self)
        }
    }

    @Test func seededMutationsEndInValueOrTypedError() throws {
        let seed = testSeed("mutations")
        var rng = SeededGenerator(seed: seed)
        let messages = try corpus().map { Array($0.prefix(600)) }.filter { (try? MessagePackValue.decode($0)) != nil }
            + [try encoder.encode(Heartbeat(type: "hb", requestId: 5, sentAt: Date(timeIntervalSince1970: 3))), try encoder.encode(samplePush(items: 2, blob: 8))]
        let smash: [[UInt8]] = [[0xff, 0xff, 0xff, 0xff], [0x00, 0x00], [0x7f, 0xff, 0xff, 0xff], [0x80, 0x00, 0x00, 0x01]]
        var outcomes = [String: Int]()
        for iteration in 0..<100_000 {
            var bytes = messages[Int.random(in: 0..<messages.count, using: &rng)]
            for _ in 0..<Int.random(in: 1...3, using: &rng) {
                let position = bytes.isEmpty ? 0 : Int.random(in: 0..<bytes.count, using: &rng)
                switch Int.random(in: 0..<6, using: &rng) {
                case 0: if !bytes.isEmpty { bytes[position] ^= 1 << UInt8.random(in: 0..<8, using: &rng) }
                case 1: if !bytes.isEmpty { bytes[position] = UInt8.random(in: 0...255, using: &rng) }
                case 2: bytes.insert(UInt8.random(in: 0...255, using: &rng), at: position)
                case 3: if !bytes.isEmpty { bytes.remove(at: position) }
                case 4:
                    // Overwrite what may be a length field with a huge or odd value.
                    let pattern = smash[Int.random(in: 0..<smash.count, using: &rng)]
                    for (i, byte) in pattern.enumerated() where position + 1 + i < bytes.count { bytes[position + 1 + i] = byte }
                default:
                    // Swap in a random marker byte for a container or length-carrying type.
                    if !bytes.isEmpty { bytes[position] = [0xdc, 0xdd, 0xde, 0xdf, 0xd9, 0xda, 0xdb, 0xc4, 0xc5, 0xc6, 0xc7, 0xc8, 0xc9][Int.random(in: 0..<13, using: &rng)] }
                }
            }
            do {
                _ = try MessagePackValue.decode(bytes)
                outcomes["value", default: 0] += 1
            } catch let error as MessagePackError {
                outcomes[error.code.description, default: 0] += 1
            } catch {
                Issue.record("seed \(seed) iteration \(iteration): untyped error \(error) for \(hexString(bytes))")
            }
            if iteration % 4 == 0 {
                do {
                    _ = try decoder.decode(Push.self, from: bytes)
                } catch is MessagePackError {
                } catch {
                    Issue.record("seed \(seed) iteration \(iteration): untyped error \(error)")
                }
            }
        }
        print("mutations (seed \(seed)): \(outcomes.sorted { $0.key < $1.key })")
        #expect(outcomes.values.reduce(0, +) == 100_000)
    }
}
