import Foundation
import MessagePack
import Testing

@Suite("Codable")
struct CodableTests {
    let encoder = MessagePackEncoder()
    let decoder = MessagePackDecoder()

    @Test func pushRoundTripAndShape() throws {
        let push = samplePush(items: 20, blob: 300)
        let bytes = try encoder.encode(push)
        #expect(try decoder.decode(Push.self, from: bytes) == push)
        #expect(try decoder.decode(Push.self, from: try encoder.encodeData(push)) == push)
        // The dynamic view sees the wire shape: a map whose items is an array16 of maps.
        let value = try MessagePackValue.decode(bytes)
        #expect(value["type"] == "push")
        #expect(value["items"]?.arrayValue?.count == 20)
        #expect(value["items"]?[3]?["signature"]?.binaryValue?.count == 300)
        #expect(value["items"]?[3]?["priority"] == 200)
        #expect(value["items"]?[3]?["createdAt"] == .timestamp(seconds: 1_700_000_003, nanoseconds: 0))
        // Re-encoding the dynamic value (counts known up front) gives the same bytes
        // as the Codable encoder (counts patched in afterwards).
        #expect(try value.encoded() == bytes)
    }

    @Test func containerHeadersGrowInPlace() throws {
        // Arrays and maps past 15 and 65535 elements need their headers widened after the fact.
        struct Lists: Codable, Equatable {
            var small: [Int]
            var medium: [String: Int]
            var large: [UInt8?]
            var after: String
        }
        let lists = Lists(
            small: Array(0..<20),
            medium: Dictionary(uniqueKeysWithValues: (0..<40).map { ("k\($0)", $0) }),
            large: Array(repeating: 1, count: 70_000), after: "end")
        let bytes = try encoder.encode(lists)
        #expect(try decoder.decode(Lists.self, from: bytes) == lists)
        let value = try MessagePackValue.decode(bytes)
        #expect(try value.encoded() == bytes)
        #expect(value["after"] == "end")
    }

    class Base: Codable {
        var id: String
        init(id: String) { self.id = id }
    }

    final class Derived: Base {
        var extra: Int
        init(id: String, extra: Int) {
            self.extra = extra
            super.init(id: id)
        }
        enum CodingKeys: String, CodingKey { case extra }
        required init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            extra = try c.decode(Int.self, forKey: .extra)
            try super.init(from: decoder)
        }
        override func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(extra, forKey: .extra)
            try super.encode(to: encoder)
        }
    }

    @Test func subclassSharesTheMap() throws {
        let bytes = try encoder.encode(Derived(id: "a", extra: 5))
        #expect(bytes == hex("82 a5 65 78 74 72 61 05 a2 69 64 a1 61"))
        let back = try decoder.decode(Derived.self, from: bytes)
        #expect(back.id == "a" && back.extra == 5)
    }

    struct Custom: Codable, Equatable {
        var name: String
        var point: [Int]
        var meta: [String: Bool]
        enum Keys: String, CodingKey { case name, point, meta, flag }
        init(name: String, point: [Int], meta: [String: Bool]) {
            self.name = name
            self.point = point
            self.meta = meta
        }
        init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: Keys.self)
            name = try c.decode(String.self, forKey: .name)
            var p = try c.nestedUnkeyedContainer(forKey: .point)
            point = []
            while !p.isAtEnd { point.append(try p.decode(Int.self)) }
            let m = try c.nestedContainer(keyedBy: Keys.self, forKey: .meta)
            meta = ["flag": try m.decode(Bool.self, forKey: .flag)]
        }
        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: Keys.self)
            try c.encode(name, forKey: .name)
            var p = c.nestedUnkeyedContainer(forKey: .point)
            for v in point { try p.encode(v) }
            var m = c.nestedContainer(keyedBy: Keys.self, forKey: .meta)
            try m.encode(meta["flag"] ?? false, forKey: .flag)
        }
    }

    @Test func nestedContainers() throws {
        let value = Custom(name: "n", point: [1, -2, 300], meta: ["flag": true])
        let bytes = try encoder.encode(value)
        #expect(bytes == hex("83 a4 6e 61 6d 65 a1 6e a5 70 6f 69 6e 74 93 01 fe cd 01 2c a4 6d 65 74 61 81 a4 66 6c 61 67 c3"))
        #expect(try decoder.decode(Custom.self, from: bytes) == value)
    }

    struct Misuse: Encodable {
        func encode(to encoder: any Encoder) throws {
            var outer = encoder.container(keyedBy: CodingKeysForMisuse.self)
            var first = outer.nestedUnkeyedContainer(forKey: .a)
            try first.encode(1)
            try outer.encode(2, forKey: .b)
            try first.encode(3)  // `first` was closed when `outer` moved on
        }
    }
    enum CodingKeysForMisuse: String, CodingKey { case a, b }

    @Test func writingToAClosedContainerThrows() throws {
        expectError(.invalidEncoderUse) { try encoder.encode(Misuse()) }
    }

    @Test func optionalsEnumsAndDictionaries() throws {
        struct Mixed: Codable, Equatable {
            var status: ItemStatus
            var priority: Priority?
            var nested: [String: [Int]]
            var maybe: String?
            var list: [Priority]
        }
        let value = Mixed(status: .duplicate, priority: nil, nested: ["a": [1, 2]], maybe: "x", list: [.low, .high])
        #expect(try decoder.decode(Mixed.self, from: try encoder.encode(value)) == value)
        // Explicit nil and a missing key both decode as nil; unknown keys are ignored.
        let explicit: MessagePackValue = ["status": "applied", "priority": nil, "nested": .map([]), "list": [], "unknown": [1, 2]]
        let decoded = try decoder.decode(Mixed.self, from: try explicit.encoded())
        #expect(decoded == Mixed(status: .applied, priority: nil, nested: [:], maybe: nil, list: []))
        // An unknown raw value is an error with the path.
        let bad: MessagePackValue = ["status": "applied", "nested": .map([]), "list": [1, 7]]
        let error = expectError(.invalidInput) { try decoder.decode(Mixed.self, from: try bad.encoded()) }
        #expect(error?.path == "list[1]")
    }

    @Test func integerRangesThroughStructs() throws {
        struct Small: Codable { var v: UInt8 }
        struct Big: Codable { var v: Int }
        let error = expectError(.valueOutOfRange) { try decoder.decode(Small.self, from: try encoder.encode(Big(v: 256))) }
        #expect(error?.description == "valueOutOfRange at v: unsigned integer 256 does not fit UInt8")
        expectError(.valueOutOfRange) { try decoder.decode(Small.self, from: try encoder.encode(Big(v: -1))) }
        #expect(try decoder.decode(Small.self, from: try encoder.encode(Big(v: 255))).v == 255)
    }

    @Test func userInfoReachesTheCodableTypes() throws {
        struct Probe: Codable {
            var seen: String
            init(seen: String) { self.seen = seen }
            init(from decoder: any Decoder) throws { seen = decoder.userInfo[.probe] as? String ?? "none" }
            func encode(to encoder: any Encoder) throws {
                var c = encoder.singleValueContainer()
                try c.encode(encoder.userInfo[.probe] as? String ?? "none")
            }
        }
        var encoder = MessagePackEncoder()
        encoder.userInfo[.probe] = "enc"
        #expect(try encoder.encode(Probe(seen: "")) == hex("a3 65 6e 63"))
        var decoder = MessagePackDecoder()
        decoder.userInfo[.probe] = "dec"
        #expect(try decoder.decode(Probe.self, from: hex("c0")).seen == "dec")
    }

    enum Command: Codable, Equatable {
        case stop
        case move(x: Int, y: Int)
        case say(String)
    }

    @Test func enumsWithAssociatedValuesAndIntKeyedDictionaries() throws {
        let commands: [Command] = [.stop, .move(x: -1, y: 2), .say("hi")]
        #expect(try decoder.decode([Command].self, from: try encoder.encode(commands)) == commands)
        // Int-keyed dictionaries use string keys, as JSONEncoder does.
        let byInt: [Int: String] = [1: "a", 20: "b"]
        let bytes = try encoder.encode(byInt)
        #expect(try MessagePackValue.decode(bytes)["20"] == "b")
        #expect(try decoder.decode([Int: String].self, from: bytes) == byInt)
    }

    @Test func concurrentUseOfOneCoder() async throws {
        let encoder = self.encoder
        let decoder = self.decoder
        let push = samplePush(items: 4, blob: 64)
        let bytes = try encoder.encode(push)
        try await withThrowingTaskGroup(of: Bool.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    for _ in 0..<200 where try decoder.decode(Push.self, from: try encoder.encode(push)) != push { return false }
                    return true
                }
            }
            for try await ok in group { #expect(ok) }
        }
        #expect(try encoder.encode(push) == bytes)
    }

    @Test func wrongContainerKinds() throws {
        let error = expectError(.typeMismatch) { try decoder.decode(Heartbeat.self, from: hex("93 01 02 03")) }
        #expect(error?.message == "expected map, found array")
        expectError(.typeMismatch) { try decoder.decode([Int].self, from: hex("80")) }
        expectError(.typeMismatch) { try decoder.decode(Bool.self, from: hex("00")) }
        expectError(.typeMismatch) { try decoder.decode(String.self, from: hex("c4 00")) }
    }
}

extension CodingUserInfoKey {
    static let probe = CodingUserInfoKey(rawValue: "probe")!
}
