import FleetTesting
@testable import DeviceNode
@testable import SyncContract
import Envelopes
import Foundation
import MessagePack
import Testing

/// `SyncPayload` and the Envelopes types it embeds read themselves
/// (SyncPayload+FastDecoding.swift, Model+FastDecoding.swift): they must read
/// exactly what their Codable conformances read, with equal values and errors.
@Suite("Sync payload fast decoding")
struct PayloadFastDecodingTests {
    let fastDecoder = MessagePackDecoder()
    let codableDecoder: MessagePackDecoder = {
        var decoder = MessagePackDecoder()
        decoder.usesFastPath = false
        return decoder
    }()

    // MARK: Payloads

    /// Payloads a real device queued: a sample envelope (two in-person signers and an embedded
    /// remote one) and one composed from a template, both signed on the device.
    static func devicePayloads() async throws -> [[UInt8]] {
        let fixture = try await Fixture.make()
        let node = fixture.node
        let sample = try SampleEnvelope.inPerson(signers: 2, remoteSigners: 1, transactionId: "tx-fast-1",
                                                 remoteClientUserIds: ["client-7"])
        let first = try await node.compose(sample)
        try await node.resumeSigning(envelopeId: first, driver: SyntheticSigner(seed: 3))
        fixture.templates.upsert(try AccountDraftTemplateTests.template(lastModified: fixture.clock.now.addingTimeInterval(-60)))
        _ = try await node.cacheTemplate(id: "tpl-lease")
        let second = try await node.compose(fromTemplate: "tpl-lease", TemplateComposition(
            roles: ["Tenant": RoleAssignment(name: "Tina Tenant")], tabValues: ["rent": "1200"]), transactionId: "tx-fast-2")
        try await node.resumeSigning(envelopeId: second, driver: SyntheticSigner(seed: 4))
        let payloads = try await node.outboxItems().compactMap(\.payload)
        try #require(payloads.count == 2)
        return payloads
    }

    /// A payload with tabs of every type, both kinds of custom field, several recipients and
    /// signatures, and every optional present (`full`) or absent. Not validated: only decoding is tested.
    static func builtPayload(full: Bool, pdf: Data = Data("%PDF-1.4 tiny".utf8)) -> SyncPayload {
        let created = Date(timeIntervalSince1970: 1_800_000_000.123456)
        let recipients = [
            Recipient(recipientId: "1", type: .inPersonSigner, name: "Walk-in", routingOrder: 1,
                      hostName: full ? "Ann Host" : nil, hostEmail: full ? "host@example.com" : nil,
                      status: .signed, statusChangedAt: full ? created.addingTimeInterval(5) : nil),
            Recipient(recipientId: "2", type: .signer, name: "Remote Ré", email: full ? "r@example.com" : nil, routingOrder: 2,
                      clientUserId: full ? "client-2" : nil, status: full ? .declined : .created,
                      statusChangedAt: full ? created.addingTimeInterval(-5) : nil, declineReason: full ? "no time" : nil),
            Recipient(recipientId: "3", type: .carbonCopy, name: "Copy", email: "cc@example.com", routingOrder: 3),
        ]
        let tabs = TabType.allCases.enumerated().map { index, type in
            Tab(type: type, tabId: full ? "tab-\(index)" : nil, documentId: "doc1", recipientId: index % 2 == 0 ? "1" : "2",
                pageNumber: index + 1, frame: TabFrame(x: Double(index) * 10.5, y: -3.25, width: 160, height: 0.1 * Double(index + 1)),
                label: full ? "label-\(index)" : nil, name: full ? "Name \(index)" : nil, value: full ? "v\(index) ✓" : nil,
                groupName: full && (type == .radio || type == .checkbox) ? "group" : nil,
                scale: 0.5 + Double(index) / 10, locked: index % 3 == 0, optional: index % 2 == 1, selected: type == .radio)
        }
        let customFields = full
            ? CustomFields(text: [TextCustomField(name: "ref", value: "A-1", required: true, show: false),
                                  TextCustomField(name: "empty", value: "")],
                           list: [ListCustomField(name: "region", value: "EU", items: ["EU", "US", "APAC"], required: true),
                                  ListCustomField(name: "none", value: "", items: [])])
            : CustomFields()
        let envelope = Envelope(
            envelopeId: "env-1", name: "Everything", emailSubject: "Subject", emailMessage: full ? "Blurb" : "",
            documents: [], recipients: recipients, tabs: tabs, customFields: customFields, transactionId: "tx-built",
            templateId: full ? "tpl-1" : nil, createdAt: created, completedLocallyAt: full ? created.addingTimeInterval(60) : nil)
        let documents = [
            Document(documentId: "doc1", name: "One", pdfBytes: pdf, pageCount: 10),
            Document(documentId: "doc2", name: "Two", pdfBytes: Data(), pageCount: 1),
        ]
        let signatures = (0..<3).map { i in
            StoredSignature(envelopeId: "env-1", tabIndex: 2 - i, recipientId: i == 1 ? "2" : "1", documentId: "doc1",
                            fieldId: "field-\(i)", isoRecord: Array(repeating: UInt8(i), count: 20 + i), svg: "<svg/>",
                            binding: Array(repeating: 0xb0 + UInt8(i), count: 90), deviceSignature: Array(repeating: 0x5a, count: 64),
                            signedAt: created)
        }
        return SyncPayload(envelope: envelope, documents: documents, signatures: signatures, deviceId: "device-9",
                           sequence: full ? 1 << 40 : 1, signingMode: full ? .online : .offline)
    }

    // MARK: Equal values

    @Test("real and built payloads decode to equal values on both paths")
    func realPayloadsDecodeAlike() async throws {
        let payloads = try await Self.devicePayloads()
        for bytes in payloads {
            let fast = try fastDecoder.decode(SyncPayload.self, from: bytes)
            let codable = try codableDecoder.decode(SyncPayload.self, from: bytes)
            #expect(fast == codable)
            #expect(try SyncPayload(canonicalBytes: bytes) == codable)
            #expect(!fast.signatures.isEmpty && !fast.tabs.isEmpty && fast.recipients.count >= 2)
            // The canonical bytes are unchanged: the decoded value encodes to the signed bytes.
            #expect(try fast.canonicalBytes() == bytes)
        }
        #expect(try fastDecoder.decode(SyncPayload.self, from: payloads[1]).templateId == "tpl-lease")
        #expect(try fastDecoder.decode(SyncPayload.self, from: payloads[0]).recipients.contains { $0.clientUserId == "client-7" })
        for full in [true, false] {
            let value = Self.builtPayload(full: full)
            let bytes = try value.canonicalBytes()
            #expect(try fastDecoder.decode(SyncPayload.self, from: bytes) == value)
            #expect(try codableDecoder.decode(SyncPayload.self, from: bytes) == value)
            // Generic callers find the fast path too.
            func generic<T: Decodable>(_ type: T.Type) throws -> T { try fastDecoder.decode(T.self, from: bytes) }
            #expect(try generic(SyncPayload.self) == value)
        }
    }

    // MARK: Accepting every valid encoding

    /// Every map with its entries shuffled, an unknown key and a non-string key added.
    static func reordered(_ value: MessagePackValue, using generator: inout some RandomNumberGenerator) -> MessagePackValue {
        switch value {
        case .map(let entries):
            var out = entries.map { MessagePackEntry(key: $0.key, value: reordered($0.value, using: &generator)) }
            out.shuffle(using: &generator)
            out.insert(MessagePackEntry(key: "zz-unknown", value: .array([.map([MessagePackEntry(key: 1, value: .nil)]), .binary([1, 2])])),
                       at: Int.random(in: 0...out.count, using: &generator))
            out.append(MessagePackEntry(key: .uint(5), value: "non-string key"))
            return .map(out)
        case .array(let elements): return .array(elements.map { reordered($0, using: &generator) })
        default: return value
        }
    }

    /// The optional keys of each map in a payload, by the map's place.
    static let optionalKeys: [String: [String]] = [
        "payload": ["templateId", "completedLocallyAtNanos"],
        "recipient": ["email", "clientUserId", "hostName", "hostEmail", "statusChangedAtNanos", "declineReason"],
        "tab": ["tabId", "label", "name", "value", "groupName"],
    ]

    /// Applies `edit` to the payload map and to every recipient and tab map (by their place).
    static func editMaps(_ payload: MessagePackValue, _ edit: (String, [MessagePackEntry]) -> [MessagePackEntry]) -> MessagePackValue {
        guard case .map(let entries) = payload else { return payload }
        let top = entries.map { entry -> MessagePackEntry in
            guard let place = ["recipients": "recipient", "tabs": "tab"][entry.key.stringValue ?? ""],
                  case .array(let elements) = entry.value else { return entry }
            return MessagePackEntry(key: entry.key, value: .array(elements.map {
                guard case .map(let inner) = $0 else { return $0 }
                return .map(edit(place, inner))
            }))
        }
        return .map(edit("payload", top))
    }

    @Test("reordered keys, unknown and non-string keys, nil optionals, duplicate keys decode alike")
    func validVariantsDecodeAlike() async throws {
        let seed = testSeed("payloadVariants")
        var generator = SeededGenerator(seed: seed)
        let sparse = Self.builtPayload(full: false)
        let full = Self.builtPayload(full: true)
        var originals: [(SyncPayload, [UInt8])] = [(sparse, try sparse.canonicalBytes()), (full, try full.canonicalBytes())]
        for bytes in try await Self.devicePayloads() { originals.append((try codableDecoder.decode(SyncPayload.self, from: bytes), bytes)) }
        for (value, bytes) in originals {
            let tree = try MessagePackValue.decode(bytes)
            for _ in 0..<20 {
                decodesAlike(try Self.reordered(tree, using: &generator).encoded(), expect: value)
            }
            // Absent optionals written as nil.
            let withNils = Self.editMaps(tree) { place, entries in
                let present = Set(entries.compactMap(\.key.stringValue))
                return entries + (Self.optionalKeys[place] ?? []).filter { !present.contains($0) }
                    .map { MessagePackEntry(key: .string($0), value: .nil) }
            }
            decodesAlike(try withNils.encoded(), expect: value)
            // Duplicates of every key with other values (and nil, and a wrong type) after the first: the first wins.
            let duplicated = Self.editMaps(tree) { _, entries in
                entries + entries.map { MessagePackEntry(key: $0.key, value: .nil) }
                    + entries.map { MessagePackEntry(key: $0.key, value: .array([1, "x"])) }
            }
            decodesAlike(try duplicated.encoded(), expect: value)
        }
        // An optional present as nil first, then with a value: nil wins, as in Codable.
        let tree = try MessagePackValue.decode(try full.canonicalBytes())
        let nilFirst = Self.editMaps(tree) { place, entries in
            let optional = Set(Self.optionalKeys[place] ?? [])
            let nils = entries.filter { optional.contains($0.key.stringValue ?? "") }.map { MessagePackEntry(key: $0.key, value: .nil) }
            return nils + entries
        }
        decodesAlike(try nilFirst.encoded(), expect: full.withoutOptionals())
        // [UInt8] fields also decode from an array of integers; Data (the PDF) only from bin.
        let sha = Self.editMaps(tree) { place, entries in
            place == "payload" ? entries.map { entry in
                guard entry.key.stringValue == "documents", case .array(let documents) = entry.value else { return entry }
                return MessagePackEntry(key: entry.key, value: .array(documents.map { document in
                    guard case .map(let fields) = document else { return document }
                    return .map(fields.map { field in
                        guard field.key.stringValue == "sha256", case .binary(let bytes) = field.value else { return field }
                        return MessagePackEntry(key: field.key, value: .array(bytes.map { .uint(UInt64($0)) }))
                    })
                }))
            } : entries
        }
        decodesAlike(try sha.encoded(), expect: full)
    }

    // MARK: Rejecting alike

    @Test("wrong types, missing keys, bad raw values, out-of-range integers: same code and path on both paths")
    func errorsMatchCodable() throws {
        let tree = try MessagePackValue.decode(try Self.builtPayload(full: true).canonicalBytes())
        let cases: [([String], MessagePackValue?, String, MessagePackError.Code)] = [
            (["format"], nil, "format", .keyNotFound),
            (["sequence"], "x", "sequence", .typeMismatch),
            (["sequence"], .int(-1), "sequence", .valueOutOfRange),
            (["createdAtNanos"], .uint(.max), "createdAtNanos", .valueOutOfRange),
            (["createdAtNanos"], .nil, "createdAtNanos", .typeMismatch),
            (["templateId"], 5, "templateId", .typeMismatch),
            (["signatures"], nil, "signatures", .keyNotFound),
            (["signatures"], .map([]), "signatures", .typeMismatch),
            (["signatures", "1", "bindingSignature"], "s", "signatures[1].bindingSignature", .typeMismatch),
            (["signatures", "0", "binding"], .array([1, 300]), "signatures[0].binding[1]", .valueOutOfRange),
            (["signatures", "2", "tabIndex"], nil, "signatures[2].tabIndex", .keyNotFound),
            (["documents", "0", "pdf"], .array([1, 2]), "documents[0].pdf", .typeMismatch),
            (["documents", "1", "pageCount"], .double(1.5), "documents[1].pageCount", .typeMismatch),
            (["documents", "0", "sha256"], nil, "documents[0].sha256", .keyNotFound),
            (["recipients", "1", "routingOrder"], .nil, "recipients[1].routingOrder", .typeMismatch),
            (["recipients", "0", "status"], nil, "recipients[0].status", .keyNotFound),
            (["recipients", "2", "email"], .bool(true), "recipients[2].email", .typeMismatch),
            (["recipients", "0", "statusChangedAtNanos"], "t", "recipients[0].statusChangedAtNanos", .typeMismatch),
            (["tabs", "3", "type"], "stamp", "tabs[3].type", .invalidInput),
            (["tabs", "0", "type"], 1, "tabs[0].type", .typeMismatch),
            (["tabs", "1", "frame", "width"], "w", "tabs[1].frame.width", .typeMismatch),
            (["tabs", "2", "frame", "x"], .uint(.max), "tabs[2].frame.x", .valueOutOfRange),
            (["tabs", "0", "frame", "height"], nil, "tabs[0].frame.height", .keyNotFound),
            (["tabs", "0", "frame"], nil, "tabs[0].frame", .keyNotFound),
            (["tabs", "4", "frame"], .array([1, 2, 3, 4]), "tabs[4].frame", .typeMismatch),
            (["tabs", "5", "scale"], nil, "tabs[5].scale", .keyNotFound),
            (["tabs", "5", "locked"], 1, "tabs[5].locked", .typeMismatch),
            (["tabs", "6", "selected"], nil, "tabs[6].selected", .keyNotFound),
            (["tabs", "7", "pageNumber"], .double(2), "tabs[7].pageNumber", .typeMismatch),
            (["tabs", "8", "label"], 5, "tabs[8].label", .typeMismatch),
            (["tabs", "9", "groupName"], .binary([1]), "tabs[9].groupName", .typeMismatch),
            (["customFields"], nil, "customFields", .keyNotFound),
            (["customFields", "text"], nil, "customFields.text", .keyNotFound),
            (["customFields", "text", "0", "show"], .nil, "customFields.text[0].show", .typeMismatch),
            (["customFields", "text", "1", "value"], nil, "customFields.text[1].value", .keyNotFound),
            (["customFields", "list", "0", "items", "1"], 7, "customFields.list[0].items[1]", .typeMismatch),
            (["customFields", "list", "1", "items"], "none", "customFields.list[1].items", .typeMismatch),
            (["customFields", "list", "0", "required"], nil, "customFields.list[0].required", .keyNotFound),
        ]
        for (path, replacement, expectedPath, code) in cases {
            let bytes = try Self.mutate(tree, at: path, to: replacement).encoded()
            let (fast, codable) = errors(bytes)
            #expect(fast?.code == code, "\(path): \(String(describing: fast))")
            #expect(fast?.path == expectedPath, "\(path): \(String(describing: fast))")
            #expect(codable?.code == code, "\(path): \(String(describing: codable))")
            #expect(codable?.path == expectedPath, "\(path): \(String(describing: codable))")
        }
        // Not a map at all, trailing bytes, invalid UTF-8 in a field the type reads.
        let bytes = try Self.builtPayload(full: true).canonicalBytes()
        for (input, code) in [([0x90], .typeMismatch), (bytes + [0xc0], .trailingBytes), ([], .truncated)] as [([UInt8], MessagePackError.Code)] {
            let (fast, codable) = errors(input)
            #expect(fast?.code == code && codable?.code == code, "\(String(describing: fast)) / \(String(describing: codable))")
        }
        var badUTF8 = bytes
        let name = Array("Everything".utf8)
        if let at = (0..<(badUTF8.count - name.count)).first(where: { Array(badUTF8[$0..<$0 + name.count]) == name }) { badUTF8[at] = 0xff }
        let (fast, codable) = errors(badUTF8)
        #expect(fast?.code == .invalidUTF8 && fast?.path == "name", "\(String(describing: fast))")
        #expect(codable?.code == .invalidUTF8 && codable?.path == "name", "\(String(describing: codable))")
    }

    @Test("every prefix of a payload is rejected by both paths as incomplete")
    func everyPrefixIsIncomplete() throws {
        var agreeing = 0
        let bytes = try Self.builtPayload(full: true).canonicalBytes()
        for length in 0..<bytes.count {
            let (fast, codable) = errors(Array(bytes[..<length]))
            let incomplete: Set<MessagePackError.Code> = [.truncated, .lengthExceedsInput]
            #expect(fast.map { incomplete.contains($0.code) } == true, "\(length): \(String(describing: fast))")
            #expect(codable.map { incomplete.contains($0.code) } == true, "\(length): \(String(describing: codable))")
            if fast?.code == codable?.code { agreeing += 1 }
        }
        // Which of the two a prefix gets can differ: the pre-scan counts the bytes every open
        // container still needs, the reader checks one header at a time.
        print("payload prefixes: \(agreeing) of \(bytes.count) with the same code on both paths")
        #expect(agreeing > 0)
    }

    // MARK: Robustness

    @Test("seeded mutations of real payloads: both paths accept the same inputs with the same values")
    func seededMutationsAgree() async throws {
        let seed = testSeed("payloadMutations")
        var generator = SeededGenerator(seed: seed)
        // Small PDFs, so that most mutations hit structure rather than document bytes.
        var originals = [try Self.builtPayload(full: true).canonicalBytes(), try Self.builtPayload(full: false).canonicalBytes()]
        originals += try await Self.devicePayloads()
        let interesting: [UInt8] = [0x00, 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xc1, 0xc2, 0xc3, 0xc4, 0xc7, 0xca, 0xcb,
                                    0xcc, 0xcf, 0xd0, 0xd3, 0xd4, 0xd6, 0xd7, 0xd8, 0xd9, 0xdc, 0xdd, 0xde, 0xdf, 0xe0, 0xff]
        var counts: [String: Int] = [:]
        for round in 0..<6_000 {
            var bytes = originals[round % originals.count]
            // Real payloads hold kilobytes of PDF: aim half the edits at their first 600 bytes (the structure).
            let span = Bool.random(using: &generator) ? min(bytes.count, 600) : bytes.count
            for _ in 0..<Int.random(in: 1...4, using: &generator) {
                guard !bytes.isEmpty else { break }
                let at = Int.random(in: 0..<min(span, bytes.count), using: &generator)
                switch Int.random(in: 0..<6, using: &generator) {
                case 0: bytes[at] = UInt8.random(in: 0...255, using: &generator)
                case 1: bytes[at] = interesting.randomElement(using: &generator) ?? 0
                case 2: bytes[at] ^= 1 << UInt8.random(in: 0..<8, using: &generator)
                case 3: bytes.remove(at: at)
                case 4: bytes.removeSubrange(at...)
                default: bytes.insert(interesting.randomElement(using: &generator) ?? 0, at: at)
                }
            }
            let fast = Result { try fastDecoder.decode(SyncPayload.self, from: bytes) }
            let codable = Result { try codableDecoder.decode(SyncPayload.self, from: bytes) }
            switch (fast, codable) {
            case (.success(let a), .success(let b)):
                counts["value", default: 0] += 1
                // A mutated float can be NaN, which is not == itself: then compare the encodings.
                #expect(a == b || (try? a.canonicalBytes()) == (try? b.canonicalBytes()), "values differ (seed \(seed), round \(round))")
            case (.failure(let a as MessagePackError), .failure(_ as MessagePackError)):
                counts[a.code.description, default: 0] += 1
            case (let a, let b):
                Issue.record("fast \(a) vs Codable \(b) (seed \(seed), round \(round))")
            }
        }
        print("payload mutations (SIGNFLEET_SEED=\(seed)): \(counts.sorted { $0.key < $1.key })")
        #expect((counts["value"] ?? 0) > 0 && counts.count > 3)
    }

    // MARK: Helpers

    func decodesAlike(_ bytes: [UInt8], expect value: SyncPayload, sourceLocation: SourceLocation = #_sourceLocation) {
        let fast = Result { try fastDecoder.decode(SyncPayload.self, from: bytes) }
        let codable = Result { try codableDecoder.decode(SyncPayload.self, from: bytes) }
        switch (fast, codable) {
        case (.success(let a), .success(let b)):
            #expect(a == value, sourceLocation: sourceLocation)
            #expect(b == value, sourceLocation: sourceLocation)
        case (let a, let b):
            Issue.record("expected a value; fast \(a), Codable \(b)", sourceLocation: sourceLocation)
        }
    }

    /// The errors both paths throw for `bytes` (nil, with an issue recorded, when one decodes).
    func errors(_ bytes: [UInt8], sourceLocation: SourceLocation = #_sourceLocation) -> (fast: MessagePackError?, codable: MessagePackError?) {
        func error(_ body: () throws -> SyncPayload) -> MessagePackError? {
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
        return (error { try fastDecoder.decode(SyncPayload.self, from: bytes) }, error { try codableDecoder.decode(SyncPayload.self, from: bytes) })
    }

    /// `value` with the entry at `path` (map keys, array indices) replaced, or removed when `replacement` is nil.
    static func mutate(_ value: MessagePackValue, at path: [String], to replacement: MessagePackValue?) -> MessagePackValue {
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
}

private extension SyncPayload {
    /// `self` with every optional nil: what a decoder reads when every optional key comes first as nil.
    func withoutOptionals() -> SyncPayload {
        let other = self
        var value = self
        value.templateId = nil
        value.completedLocallyAtNanos = nil
        value.recipients = other.recipients.map {
            var r = $0
            (r.email, r.clientUserId, r.hostName, r.hostEmail, r.statusChangedAtNanos, r.declineReason) = (nil, nil, nil, nil, nil, nil)
            return r
        }
        value.tabs = other.tabs.map {
            var t = $0
            (t.tabId, t.label, t.name, t.value, t.groupName) = (nil, nil, nil, nil, nil)
            return t
        }
        return value
    }
}


