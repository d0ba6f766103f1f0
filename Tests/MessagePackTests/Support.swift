import FleetTesting
import Foundation
import MessagePack
import Testing

/// Parses "cd 01 00" into bytes.
func hex(_ text: String) -> [UInt8] {
    text.split(separator: " ").compactMap { UInt8($0, radix: 16) }
}

func hexString(_ bytes: [UInt8]) -> String {
    bytes.map { String(format: "%02x", $0) }.joined(separator: " ")
}

/// Expects `body` to throw a MessagePackError with `code`; returns it for more checks.
@discardableResult
func expectError<T>(
    _ code: MessagePackError.Code,
    sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () throws -> T
) -> MessagePackError? {
    do {
        let value = try body()
        Issue.record("expected \(code), got value \(value)", sourceLocation: sourceLocation)
    } catch let error as MessagePackError {
        #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
        return error
    } catch {
        Issue.record("expected MessagePackError \(code), got \(error)", sourceLocation: sourceLocation)
    }
    return nil
}



// Message types shared by the tests.

struct Heartbeat: Codable, Equatable {
    var type: String
    var requestId: UInt64
    var sentAt: Date
}

enum ItemStatus: String, Codable, Equatable {
    case applied, duplicate, rejected
}

enum Priority: Int, Codable, Equatable {
    case low = 1, high = 200
}

struct ItemResult: Codable, Equatable {
    var seq: UInt64
    var status: ItemStatus
    var serverId: String?
    var reason: String?
}

struct Ack: Codable, Equatable {
    var type: String
    var requestId: UInt64
    var lastApplied: UInt64
    var results: [ItemResult]
}

struct Envelope: Codable, Equatable {
    var id: String
    var seq: UInt64
    var createdAt: Date
    var documentHash: Data
    var signature: [UInt8]
    var priority: Priority
    var tags: [String: String]
    var score: Double
    var delta: Int32
}

struct Push: Codable, Equatable {
    var type: String
    var deviceId: String
    var items: [Envelope]
}

func sampleEnvelope(_ i: Int, blob: Int) -> Envelope {
    let hash = Data((0..<32).map { (n: Int) -> UInt8 in UInt8((n + i) & 0xff) })
    let signature: [UInt8] = (0..<blob).map { (n: Int) -> UInt8 in UInt8((n * 7 + i) & 0xff) }
    let created = Date(timeIntervalSince1970: 1_700_000_000 + Double(i))
    let priority: Priority = i % 2 == 0 ? .low : .high
    return Envelope(
        id: "env-\(i)", seq: UInt64(i + 1), createdAt: created, documentHash: hash, signature: signature,
        priority: priority, tags: ["k": "v\(i)"], score: 0.5 * Double(i), delta: Int32(-i * 1000))
}

func samplePush(items: Int = 3, blob: Int = 40) -> Push {
    Push(type: "push", deviceId: "device-0042", items: (0..<items).map { sampleEnvelope($0, blob: blob) })
}
