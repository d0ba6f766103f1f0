import FleetTesting
import Foundation
import MessagePack
import Testing

/// docs/messagepack.md's opening example (the doc shows this function's body): returns what it
/// decoded, and the `type` it printed.
func quickStartExample() throws -> (type: String, requestId: UInt64, sentAt: Date, inspected: String?) {
    // BEGIN EXAMPLE messagepack-quick-start
    struct Heartbeat: Codable { var type: String; var requestId: UInt64; var sentAt: Date }

    let bytes = try MessagePackEncoder().encode(Heartbeat(type: "heartbeat", requestId: 7, sentAt: .now))
    let heartbeat = try MessagePackDecoder().decode(Heartbeat.self, from: bytes)
    let anything = try MessagePackValue.decode(bytes)          // inspect unknown messages
    print(anything["type"]?.stringValue ?? "?")
    // END EXAMPLE
    return (heartbeat.type, heartbeat.requestId, heartbeat.sentAt, anything["type"]?.stringValue)
}

// docs/messagepack.md's fast path example, verbatim (a test compares them).
// BEGIN EXAMPLE messagepack-fast-path
struct Point: Codable { var x: Int; var y: Int }

extension Point: MessagePackWritable, MessagePackReadable {
    func write(to writer: inout MessagePackWriter) throws {
        writer.writeMapHeader(2)
        writer.writeKey("x"); writer.write(x)
        writer.writeKey("y"); writer.write(y)
    }
    init(from reader: inout MessagePackReader) throws {
        var x: Int?, y: Int?
        for _ in 0..<(try reader.readMapHeader()) {
            switch try reader.readKey() {
            case "x" where x == nil: x = try reader.readInteger()   // `where`: the first duplicate wins
            case "y" where y == nil: y = try reader.readInteger()
            default: try reader.skipValue()                          // unknown keys
            }
        }
        guard let x else { throw reader.missingKey("x") }
        guard let y else { throw reader.missingKey("y") }
        self.init(x: x, y: y)
    }
}
// END EXAMPLE

@Suite("docs/messagepack.md")
struct MessagePackExamplesTests {
    @Test("the examples in docs/messagepack.md are this file's code, verbatim")
    func docMatchesCode() throws {
        for name in ["messagepack-quick-start", "messagepack-fast-path"] {
            let example = try DocExample.compare(name, in: "docs/messagepack.md", file: #filePath)
            #expect(example.shown == example.code, "\(name)")
        }
    }

    @Test("the opening example round-trips a heartbeat and inspects it")
    func quickStartRuns() throws {
        let before = Date.now
        let decoded = try quickStartExample()
        #expect(decoded.type == "heartbeat" && decoded.requestId == 7)
        #expect(decoded.sentAt.timeIntervalSince(before) > -0.001 && decoded.sentAt <= Date.now.addingTimeInterval(0.001))
        #expect(decoded.inspected == "heartbeat")
    }

    @Test("the fast path writes Codable's bytes and reads first duplicates, skips unknown keys, names a missing one")
    func fastPathRuns() throws {
        let bytes = try MessagePackEncoder().encode(Point(x: 1, y: -2))
        #expect(bytes == hex("82 a1 78 01 a1 79 fe"))
        // {"x": 1, "x": 5, "z": "?", "y": 2}: the fast path (Decodable & MessagePackReadable) reads it.
        let point = try MessagePackDecoder().decode(Point.self, from: hex("84 a1 78 01 a1 78 05 a1 7a a1 3f a1 79 02"))
        #expect(point.x == 1 && point.y == 2)
        #expect(throws: MessagePackError.self) { try MessagePackDecoder().decode(Point.self, from: hex("81 a1 78 01")) }
    }
}
