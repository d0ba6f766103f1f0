import Envelopes
import Foundation
import MessagePack
import SignatureCapture
import Testing

@testable import DeviceNode

/// The sync payload's Codable-free reader (SyncPayload+FastDecoding.swift) must read what the
/// Codable path reads, into equal values, and refuse what it refuses.
@Suite struct SyncPayloadFastDecodingTests {
    let fast = MessagePackDecoder()
    let codable: MessagePackDecoder = {
        var decoder = MessagePackDecoder()
        decoder.usesFastPath = false
        return decoder
    }()

    /// Every tab type, optionals present and absent, custom fields of both kinds, several
    /// recipients and signatures.
    static func richPayload() throws -> SyncPayload {
        let envelope = try SampleEnvelope.inPerson(signers: 2, remoteSigners: 1, transactionId: "txn-rich", remoteClientUserIds: ["c-1"])
        var tabs: [Tab] = []
        for (index, type) in TabType.allCases.enumerated() {
            tabs.append(
                Tab(
                    type: type, tabId: index.isMultiple(of: 2) ? "t-\(index)" : nil, documentId: "1", recipientId: "\(1 + index % 3)",
                    pageNumber: 1 + index % 2, frame: TabFrame(x: Double(index) * 10.5, y: 20, width: 100, height: 24.25),
                    label: index == 3 ? "total" : nil, name: "Field \(index) é", value: index.isMultiple(of: 3) ? "v\(index)" : nil,
                    groupName: type == .radio ? "g" : nil, scale: 1.5, locked: index == 1, optional: index == 2, selected: type == .checkbox))
        }
        var payload = SyncPayload(
            envelope: envelope, documents: envelope.documents,
            signatures: (0..<2).map { index in
                StoredSignature(
                    envelopeId: envelope.envelopeId, tabIndex: index, recipientId: "\(index + 1)", documentId: "1", fieldId: "f-\(index)",
                    isoRecord: Array(repeating: UInt8(index), count: 300), svg: "<svg/>", binding: Array(repeating: 7, count: 120),
                    deviceSignature: Array(repeating: 9, count: 64), signedAt: Date(timeIntervalSince1970: 1_700_000_000))
            },
            deviceId: "device-1", sequence: 42, signingMode: .offline)
        payload.tabs = tabs
        payload.templateId = "tpl-1"
        payload.completedLocallyAtNanos = 1_700_000_000_123_456_789
        payload.customFields = CustomFields(
            text: [TextCustomField(name: "PO", value: "123", required: true, show: false)],
            list: [ListCustomField(name: "Region", value: "EU", items: ["EU", "US", "ÅSIA"])])
        payload.recipients[0].statusChangedAtNanos = 1_700_000_000_000_000_001
        payload.recipients[0].declineReason = "no"
        return payload
    }

    @Test func bothPathsReadTheCanonicalBytesIntoEqualValues() throws {
        let rich = try Self.richPayload()
        var minimal = rich
        minimal.templateId = nil
        minimal.completedLocallyAtNanos = nil
        minimal.tabs = []
        minimal.customFields = CustomFields()
        minimal.recipients = minimal.recipients.map { recipient in
            var recipient = recipient
            recipient.email = nil
            recipient.clientUserId = nil
            recipient.hostName = nil
            recipient.hostEmail = nil
            recipient.statusChangedAtNanos = nil
            recipient.declineReason = nil
            return recipient
        }
        for payload in [rich, minimal] {
            let bytes = try payload.canonicalBytes()
            let viaFast = try fast.decode(SyncPayload.self, from: bytes)
            let viaCodable = try codable.decode(SyncPayload.self, from: bytes)
            #expect(viaFast == payload)
            #expect(viaCodable == payload)
            #expect(try SyncPayload(canonicalBytes: bytes) == payload)
        }
    }

    /// Maps rewritten: keys reversed, an unknown key added, a duplicate of the first key with
    /// another value appended (the first occurrence wins).
    @Test func reorderedUnknownAndDuplicateKeysAreReadAlike() throws {
        let payload = try Self.richPayload()
        let value = try MessagePackValue.decode(payload.canonicalBytes())
        let rewritten = Self.rewrite(value)
        let bytes = try rewritten.encoded()
        let viaFast = try fast.decode(SyncPayload.self, from: bytes)
        let viaCodable = try codable.decode(SyncPayload.self, from: bytes)
        #expect(viaFast == viaCodable)
        #expect(viaFast == payload)
    }

    static func rewrite(_ value: MessagePackValue) -> MessagePackValue {
        switch value {
        case .map(let entries):
            var out = entries.reversed().map { MessagePackEntry(key: $0.key, value: rewrite($0.value)) }
            out.insert(MessagePackEntry(key: .string("zz-unknown"), value: .array([.uint(1), .string("x")])), at: 1)
            if let first = entries.first {
                // A later duplicate of the (originally) first key: ignored by both paths.
                out.append(MessagePackEntry(key: first.key, value: .string("duplicate")))
            }
            return .map(out)
        case .array(let items):
            return .array(items.map(rewrite))
        default:
            return value
        }
    }

    @Test func missingKeysWrongTypesAndUnknownTabTypesAreRefusedByBoth() throws {
        let payload = try Self.richPayload()
        guard case .map(let entries) = try MessagePackValue.decode(payload.canonicalBytes()) else {
            Issue.record("the payload is not a map")
            return
        }
        var cases: [MessagePackValue] = []
        cases.append(.map(entries.filter { $0.key != .string("sequence") }))
        cases.append(.map(entries.map { $0.key == .string("name") ? MessagePackEntry(key: $0.key, value: .uint(5)) : $0 }))
        cases.append(
            .map(entries.map { entry in
                guard entry.key == .string("tabs"), case .array(let tabs) = entry.value, case .map(let first) = tabs[0] else { return entry }
                let broken = first.map { $0.key == .string("type") ? MessagePackEntry(key: $0.key, value: .string("teleport")) : $0 }
                return MessagePackEntry(key: entry.key, value: .array([.map(broken)] + tabs.dropFirst()))
            }))
        for value in cases {
            let bytes = try value.encoded()
            #expect(throws: (any Error).self) { try fast.decode(SyncPayload.self, from: bytes) }
            #expect(throws: (any Error).self) { try codable.decode(SyncPayload.self, from: bytes) }
        }
    }

    /// Seeded random damage (`SIGNFLEET_SEED` replays): flipped bytes and truncations. Both paths
    /// must agree on accepting, and on the value when they accept.
    @Test func damagedPayloadsAreJudgedAlikeByBothPaths() throws {
        let seed = UInt64(ProcessInfo.processInfo.environment["SIGNFLEET_SEED"] ?? "") ?? UInt64.random(in: 1...UInt64(UInt32.max))
        print("seed \(seed)")
        var random = SeededRandom(seed: seed)
        let bytes = try Self.richPayload().canonicalBytes()
        var accepted = 0
        for round in 0..<400 {
            var damaged = bytes
            if round % 4 == 0 {
                damaged = Array(damaged.prefix(Int(random.next() % UInt64(damaged.count))))
            } else {
                for _ in 0..<(1 + Int(random.next() % 3)) {
                    let at = Int(random.next() % UInt64(damaged.count))
                    damaged[at] = UInt8(truncatingIfNeeded: random.next())
                }
            }
            let viaFast = try? fast.decode(SyncPayload.self, from: damaged)
            let viaCodable = try? codable.decode(SyncPayload.self, from: damaged)
            #expect(viaFast == viaCodable, "round \(round), seed \(seed)")
            if viaFast != nil { accepted += 1 }
        }
        // Most single-byte changes land in the PDF or the ISO record and are still valid MessagePack.
        #expect(accepted > 0, "seed \(seed)")
    }
}
