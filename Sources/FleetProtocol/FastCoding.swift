import Foundation
import MessagePack

// Codable-free MessagePack coding of the hot wire messages (see docs/messagepack.md,
// "Fast path"). Each conformance writes exactly the bytes the type's Codable
// conformance writes, and reads everything that conformance reads: keys in any
// order, unknown keys skipped, the first of duplicate keys, optional fields
// absent or nil, any integer format that fits. Tests/FleetProtocolTests/
// FastCodingTests.swift checks both directions against the Codable path.
//
// Matching a key twice is guarded by `where field == nil` (or a `seen` flag for
// optionals): the Codable decoder reads the first occurrence, so later ones are skipped.

// MARK: - Header

extension ProtocolVersion: MessagePackWritable, MessagePackReadable {
    public func write(to writer: inout MessagePackWriter) throws {
        writer.writeArrayHeader(2)
        writer.write(major)
        writer.write(minor)
    }

    public init(from reader: inout MessagePackReader) throws {
        let count = try reader.readArrayHeader()
        guard count >= 2 else {
            throw MessagePackError(code: .valueNotFound, codingPath: ["[\(count)]"], message: "array has only \(count) elements")
        }
        guard count == 2 else { throw reader.invalidValue("version must be [major, minor]") }
        reader.beginElement(0)
        let major = try reader.readUInt16()
        reader.beginElement(1)
        let minor = try reader.readUInt16()
        self.init(major: major, minor: minor)
    }
}

extension MessageType: MessagePackWritable, MessagePackReadable {
    public func write(to writer: inout MessagePackWriter) throws { writer.write(rawValue) }
    public init(from reader: inout MessagePackReader) throws { self.init(try reader.readString()) }
}

extension RateLimitStatus: MessagePackWritable, MessagePackReadable {
    public func write(to writer: inout MessagePackWriter) throws {
        writer.writeMapHeader(2)
        writer.writeKey("remaining")
        writer.write(remaining)
        writer.writeKey("resetAt")
        try writer.write(resetAt)
    }

    public init(from reader: inout MessagePackReader) throws {
        var remaining: UInt32?
        var resetAt: Date?
        for _ in 0..<(try reader.readMapHeader()) {
            switch try reader.readKey() {
            case "remaining" where remaining == nil: remaining = try reader.readUInt32()
            case "resetAt" where resetAt == nil: resetAt = try reader.readDate()
            default: try reader.skipValue()
            }
        }
        guard let remaining else { throw reader.missingKey("remaining") }
        guard let resetAt else { throw reader.missingKey("resetAt") }
        self.init(remaining: remaining, resetAt: resetAt)
    }
}

extension MessageHeader: MessagePackWritable, MessagePackReadable {
    public func write(to writer: inout MessagePackWriter) throws {
        writer.writeMapHeader(4 + (replyTo == nil ? 0 : 1) + (rateLimit == nil ? 0 : 1))
        writer.writeKey("v")
        try version.write(to: &writer)
        writer.writeKey("t")
        writer.write(type.rawValue)
        writer.writeKey("id")
        writer.write(id)
        if let replyTo {
            writer.writeKey("re")
            writer.write(replyTo)
        }
        writer.writeKey("at")
        try writer.write(sentAt)
        if let rateLimit {
            writer.writeKey("rl")
            try rateLimit.write(to: &writer)
        }
    }

    public init(from reader: inout MessagePackReader) throws {
        var version: ProtocolVersion?
        var type: MessageType?
        var id: UInt64?
        var replyTo: UInt64?, seenReplyTo = false
        var sentAt: Date?
        var rateLimit: RateLimitStatus?, seenRateLimit = false
        for _ in 0..<(try reader.readMapHeader()) {
            switch try reader.readKey() {
            case "v" where version == nil: version = try reader.read(ProtocolVersion.self)
            case "t" where type == nil: type = MessageType(try reader.readString())
            case "id" where id == nil: id = try reader.readUInt64()
            case "re" where !seenReplyTo:
                seenReplyTo = true
                if try !reader.readNil() { replyTo = try reader.readUInt64() }
            case "at" where sentAt == nil: sentAt = try reader.readDate()
            case "rl" where !seenRateLimit:
                seenRateLimit = true
                if try !reader.readNil() { rateLimit = try reader.read(RateLimitStatus.self) }
            default: try reader.skipValue()
            }
        }
        guard let version else { throw reader.missingKey("v") }
        guard let type else { throw reader.missingKey("t") }
        guard let id else { throw reader.missingKey("id") }
        guard let sentAt else { throw reader.missingKey("at") }
        self.init(version: version, type: type, id: id, replyTo: replyTo, sentAt: sentAt, rateLimit: rateLimit)
    }
}

// MARK: - Sync

extension SyncItem: MessagePackWritable, MessagePackReadable {
    public func write(to writer: inout MessagePackWriter) throws {
        writer.writeMapHeader(4)
        writer.writeKey("seq")
        writer.write(sequence)
        writer.writeKey("transactionID")
        writer.write(transactionID)
        writer.writeKey("payload")
        writer.write(payload)
        writer.writeKey("signature")
        writer.write(signature)
    }

    public init(from reader: inout MessagePackReader) throws {
        var sequence: UInt64?
        var transactionID: String?
        var payload: [UInt8]?
        var signature: [UInt8]?
        for _ in 0..<(try reader.readMapHeader()) {
            switch try reader.readKey() {
            case "seq" where sequence == nil: sequence = try reader.readUInt64()
            case "transactionID" where transactionID == nil: transactionID = try reader.readString()
            case "payload" where payload == nil: payload = try reader.readBinary()
            case "signature" where signature == nil: signature = try reader.readBinary()
            default: try reader.skipValue()
            }
        }
        guard let sequence else { throw reader.missingKey("seq") }
        guard let transactionID else { throw reader.missingKey("transactionID") }
        guard let payload else { throw reader.missingKey("payload") }
        guard let signature else { throw reader.missingKey("signature") }
        self.init(sequence: sequence, transactionID: transactionID, payload: payload, signature: signature)
    }
}

extension SyncPush: MessagePackWritable, MessagePackReadable {
    public func write(to writer: inout MessagePackWriter) throws {
        writer.writeMapHeader(2)
        writer.writeKey("deviceID")
        writer.write(deviceID)
        writer.writeKey("items")
        try writer.write(items)
    }

    public init(from reader: inout MessagePackReader) throws {
        var deviceID: String?
        var items: [SyncItem]?
        for _ in 0..<(try reader.readMapHeader()) {
            switch try reader.readKey() {
            case "deviceID" where deviceID == nil: deviceID = try reader.readString()
            case "items" where items == nil: items = try reader.readArray(of: SyncItem.self)
            default: try reader.skipValue()
            }
        }
        guard let deviceID else { throw reader.missingKey("deviceID") }
        guard let items else { throw reader.missingKey("items") }
        self.init(deviceID: deviceID, items: items)
    }
}

extension SyncItemResult: MessagePackWritable, MessagePackReadable {
    public func write(to writer: inout MessagePackWriter) throws {
        writer.writeMapHeader(2 + (envelopeID == nil ? 0 : 1) + (reason == nil ? 0 : 1))
        writer.writeKey("seq")
        writer.write(sequence)
        writer.writeKey("outcome")
        writer.write(outcome.rawValue)
        if let envelopeID {
            writer.writeKey("envelopeID")
            writer.write(envelopeID)
        }
        if let reason {
            writer.writeKey("reason")
            writer.write(reason)
        }
    }

    public init(from reader: inout MessagePackReader) throws {
        var sequence: UInt64?
        var outcome: Outcome?
        var envelopeID: String?, seenEnvelopeID = false
        var reason: String?, seenReason = false
        for _ in 0..<(try reader.readMapHeader()) {
            switch try reader.readKey() {
            case "seq" where sequence == nil: sequence = try reader.readUInt64()
            case "outcome" where outcome == nil:
                let raw = try reader.readString()
                guard let value = Outcome(rawValue: raw) else {
                    throw reader.invalidValue("Cannot initialize Outcome from invalid String value \(raw)")
                }
                outcome = value
            case "envelopeID" where !seenEnvelopeID:
                seenEnvelopeID = true
                if try !reader.readNil() { envelopeID = try reader.readString() }
            case "reason" where !seenReason:
                seenReason = true
                if try !reader.readNil() { reason = try reader.readString() }
            default: try reader.skipValue()
            }
        }
        guard let sequence else { throw reader.missingKey("seq") }
        guard let outcome else { throw reader.missingKey("outcome") }
        self.init(sequence: sequence, outcome: outcome, envelopeID: envelopeID, reason: reason)
    }
}

extension SyncAck: MessagePackWritable, MessagePackReadable {
    public func write(to writer: inout MessagePackWriter) throws {
        writer.writeMapHeader(3 + (expectedSequence == nil ? 0 : 1))
        writer.writeKey("status")
        writer.write(status.rawValue)
        writer.writeKey("lastApplied")
        writer.write(lastApplied)
        if let expectedSequence {
            writer.writeKey("expectedSequence")
            writer.write(expectedSequence)
        }
        writer.writeKey("results")
        try writer.write(results)
    }

    public init(from reader: inout MessagePackReader) throws {
        var status: Status?
        var lastApplied: UInt64?
        var expectedSequence: UInt64?, seenExpected = false
        var results: [SyncItemResult]?
        for _ in 0..<(try reader.readMapHeader()) {
            switch try reader.readKey() {
            case "status" where status == nil:
                let raw = try reader.readString()
                guard let value = Status(rawValue: raw) else {
                    throw reader.invalidValue("Cannot initialize Status from invalid String value \(raw)")
                }
                status = value
            case "lastApplied" where lastApplied == nil: lastApplied = try reader.readUInt64()
            case "expectedSequence" where !seenExpected:
                seenExpected = true
                if try !reader.readNil() { expectedSequence = try reader.readUInt64() }
            case "results" where results == nil: results = try reader.readArray(of: SyncItemResult.self)
            default: try reader.skipValue()
            }
        }
        guard let status else { throw reader.missingKey("status") }
        guard let lastApplied else { throw reader.missingKey("lastApplied") }
        guard let results else { throw reader.missingKey("results") }
        self.init(status: status, lastApplied: lastApplied, expectedSequence: expectedSequence, results: results)
    }
}

// MARK: - Session

extension Heartbeat: MessagePackWritable, MessagePackReadable {
    public func write(to writer: inout MessagePackWriter) throws {
        writer.writeMapHeader(0)
    }

    // The body is a map (docs/protocol.md: `{}`); its entries, if any, are ignored.
    public init(from reader: inout MessagePackReader) throws {
        for _ in 0..<(try reader.readMapHeader()) {
            try reader.skipValue()
            try reader.skipValue()
        }
        self.init()
    }
}

extension HeartbeatReply: MessagePackWritable, MessagePackReadable {
    public func write(to writer: inout MessagePackWriter) throws {
        writer.writeMapHeader(heartbeatIntervalMs == nil ? 1 : 2)
        writer.writeKey("serverInstance")
        writer.write(serverInstance)
        if let heartbeatIntervalMs {
            writer.writeKey("heartbeatIntervalMs")
            writer.write(UInt64(heartbeatIntervalMs))
        }
    }

    public init(from reader: inout MessagePackReader) throws {
        var serverInstance: String?
        var interval: UInt32?
        var sawInterval = false
        for _ in 0..<(try reader.readMapHeader()) {
            switch try reader.readKey() {
            case "serverInstance" where serverInstance == nil: serverInstance = try reader.readString()
            case "heartbeatIntervalMs" where !sawInterval:
                sawInterval = true
                if try !reader.readNil() { interval = try reader.readUInt32() }
            default: try reader.skipValue()
            }
        }
        guard let serverInstance else { throw reader.missingKey("serverInstance") }
        self.init(serverInstance: serverInstance, heartbeatIntervalMs: interval)
    }
}

// MARK: - Errors

extension FleetErrorCode: MessagePackWritable, MessagePackReadable {
    public func write(to writer: inout MessagePackWriter) throws { writer.write(rawValue) }
    public init(from reader: inout MessagePackReader) throws { self.init(try reader.readString()) }
}

extension FleetError: MessagePackWritable, MessagePackReadable {
    public func write(to writer: inout MessagePackWriter) throws {
        writer.writeMapHeader(3 + (retryAfterMs == nil ? 0 : 1))
        writer.writeKey("code")
        writer.write(code.rawValue)
        writer.writeKey("message")
        writer.write(message)
        writer.writeKey("retryable")
        writer.write(retryable)
        if let retryAfterMs {
            writer.writeKey("retryAfterMs")
            writer.write(retryAfterMs)
        }
    }

    public init(from reader: inout MessagePackReader) throws {
        var code: FleetErrorCode?
        var message: String?
        var retryable: Bool?
        var retryAfterMs: UInt64?, seenRetryAfter = false
        for _ in 0..<(try reader.readMapHeader()) {
            switch try reader.readKey() {
            case "code" where code == nil: code = FleetErrorCode(try reader.readString())
            case "message" where message == nil: message = try reader.readString()
            case "retryable" where retryable == nil: retryable = try reader.readBool()
            case "retryAfterMs" where !seenRetryAfter:
                seenRetryAfter = true
                if try !reader.readNil() { retryAfterMs = try reader.readUInt64() }
            default: try reader.skipValue()
            }
        }
        guard let code else { throw reader.missingKey("code") }
        guard let message else { throw reader.missingKey("message") }
        guard let retryable else { throw reader.missingKey("retryable") }
        self.init(code, message, retryable: retryable, retryAfterMs: retryAfterMs)
    }
}
