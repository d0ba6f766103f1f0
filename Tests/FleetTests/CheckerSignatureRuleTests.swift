import Crypto
import DeviceNode
import Envelopes
import FleetProtocol
import FleetTesting
import Foundation
import GRDB
import MessagePack
import SignatureCapture
import SyncContract
import Testing

@testable import Fleet

/// Items a real device signed, and its key, to tamper with: every tampered item the tests make
/// is signed again with the device's own key where the tampering is not the signature itself, so
/// it reaches the later steps of the rule.
struct SignedCorpus: Sendable {
    static let deviceID = "d-1"
    let key: Curve25519.Signing.PrivateKey
    let items: [SyncItem]
    var publicKey: [UInt8] { Array(key.publicKey.rawRepresentation) }

    /// Two envelopes (two in-person signers and a remote one each: two signature bindings) signed by
    /// a real DeviceNode with a real store, capture and key.
    static func make() async throws -> SignedCorpus {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("rule-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("\(deviceID).sqlite").path
        var configuration = DeviceConfiguration(storePath: path)
        configuration.deviceId = deviceID
        let user = UserInfo(accountId: "acme", accountName: "Acme", userId: "u1", userName: "Ann Host", email: "host@example.com", host: "h")
        let node = try await DeviceNode.open(configuration: configuration, accountService: InMemoryAccountService(tokens: ["t": user]))
        try await node.login(accessToken: "t")
        for index in 0..<2 {
            let envelope = try SampleEnvelope.inPerson(signers: 2, remoteSigners: 1, transactionId: "\(deviceID)-tx-\(index + 1)")
            let id = try await node.compose(envelope, mode: .offline)
            _ = try await node.resumeSigning(envelopeId: id, driver: SyntheticSigner(seed: UInt64(index + 1)))
        }
        let items = try await node.pendingOutboxItems().compactMap(\.syncItem)
        try await node.close()
        let queue = try DatabaseQueue(path: path)
        let stored = try await queue.read { db in try Data.fetchOne(db, sql: "SELECT privateKey FROM device WHERE id = 1") }
        try queue.close()
        let key = try Curve25519.Signing.PrivateKey(rawRepresentation: try #require(stored))
        try #require(items.count == 2)
        return SignedCorpus(key: key, items: items)
    }

    var item: SyncItem { items[0] }

    /// `bytes` as the item's payload, signed with the device's key.
    func signed(_ bytes: [UInt8], from base: SyncItem? = nil) throws -> SyncItem {
        let base = base ?? item
        return SyncItem(sequence: base.sequence, transactionID: base.transactionID, payload: bytes, signature: Array(try key.signature(for: bytes)))
    }

    /// The item's payload decoded, edited, encoded canonically and signed with the device's key.
    func edited(_ edit: (inout SyncPayload) throws -> Void) throws -> SyncItem {
        var payload = try SyncPayload(canonicalBytes: item.payload)
        try edit(&payload)
        return try signed(payload.canonicalBytes())
    }

    /// The payload as a generic MessagePack value, edited, encoded again and signed: encodings the
    /// Swift device never writes but section 7 accepts (or refuses).
    func reencoded(_ edit: (inout [MessagePackEntry]) throws -> Void) throws -> SyncItem {
        guard case .map(var entries) = try MessagePackValue.decode(item.payload) else { throw FixtureError("the payload is not a map") }
        try edit(&entries)
        return try signed(MessagePackValue.map(entries).encoded())
    }

    /// The payload with one more top-level entry whose value is `raw`, bytes that need not be valid
    /// MessagePack (spliced in for a placeholder).
    func withExtraEntry(raw: [UInt8]) throws -> SyncItem {
        let placeholder = "placeholder-0123456789"
        guard case .map(var entries) = try MessagePackValue.decode(item.payload) else { throw FixtureError("the payload is not a map") }
        entries.append(MessagePackEntry(key: .string("zz"), value: .string(placeholder)))
        let bytes = try MessagePackValue.map(entries).encoded()
        let marker = [UInt8(0xa0 | placeholder.utf8.count)] + Array(placeholder.utf8)
        guard let range = bytes.firstRange(of: marker) else { throw FixtureError("no placeholder in the encoding") }
        var spliced = bytes
        spliced.replaceSubrange(range, with: raw)
        return try signed(spliced)
    }

    /// Re-signs the binding of signature entry `index` after `edit` changed its bytes.
    func signBinding(_ payload: inout SyncPayload, _ index: Int, with signer: Curve25519.Signing.PrivateKey? = nil) throws {
        payload.signatures[index].bindingSignature = Array(try (signer ?? key).signature(for: payload.signatures[index].binding))
    }
}

/// The value at `path` (map keys, or array indices as numbers) replaced by `change` of it.
func rewriting(_ value: MessagePackValue, at path: ArraySlice<String>, _ change: (MessagePackValue) -> MessagePackValue) -> MessagePackValue {
    guard let first = path.first else { return change(value) }
    switch value {
    case .map(let entries):
        return .map(entries.map { entry in
            entry.key == .string(first) ? MessagePackEntry(key: entry.key, value: rewriting(entry.value, at: path.dropFirst(), change)) : entry
        })
    case .array(var items):
        if let index = Int(first), items.indices.contains(index) { items[index] = rewriting(items[index], at: path.dropFirst(), change) }
        return .array(items)
    default:
        return value
    }
}

func rewriting(_ entries: inout [MessagePackEntry], _ path: String, _ change: (MessagePackValue) -> MessagePackValue) {
    guard case .map(let replaced) = rewriting(.map(entries), at: path.split(separator: ".").map(String.init)[...], change) else { return }
    entries = replaced
}

/// The checker's rule (``CheckerSignatureRule``) against the coordinator's (`SyncItemRule`), item by item.
@Suite struct CheckerSignatureRuleTests {
    typealias Step = CheckerSignatureRule.Step

    /// The first failing step of an outcome (nil: verified), and its reason.
    struct Outcome: Equatable, CustomStringConvertible {
        var step: Step? = nil
        var reason: String? = nil
        var description: String { step.map { "\($0): \(reason ?? "")" } ?? "verified" }
    }

    /// A phrase of each step's documented reason (docs/sync-payload.md section 6).
    static let phrases: [Step: String] = [
        .enrolledKey: "the device's enrolled key is unusable",
        .payloadSignature: "the signature does not verify over the payload with the device's enrolled key",
        .payloadDecodes: "the payload is not a valid envelope: ",
        .format: "unknown payload format",
        .claims: "the payload names device",
        .uniqueIDs: "share the",
        .documentHash: "its bytes do not match its SHA-256",
        .signatureDocument: "names unknown document",
        .bindingReadable: "the binding is unreadable",
        .bindingHashes: "the binding does not match document",
        .bindingSignature: "the binding's device signature does not verify",
    ]

    static func checker(_ item: SyncItem, device: String = SignedCorpus.deviceID, key: [UInt8]) -> Outcome {
        let result = CheckerSignatureRule.check(
            payload: item.payload, signature: item.signature, deviceID: device, sequence: item.sequence, transactionID: item.transactionID,
            publicKey: key)
        return switch result {
        case .success: Outcome()
        case .failure(let failure): Outcome(step: failure.step, reason: failure.reason)
        }
    }

    /// The coordinator's rule, its reason mapped to the step whose text it is.
    static func coordinator(_ item: SyncItem, device: String = SignedCorpus.deviceID, key: [UInt8]) -> Outcome {
        let publicKey = try? StrictEd25519.publicKey(key).get()
        switch SyncItemRule.check(item, deviceID: device, key: publicKey) {
        case .success: return Outcome()
        case .failure(let failure):
            let step = Step.allCases.first { step in
                guard let phrase = Self.phrases[step] else { return false }
                return step == .uniqueIDs ? failure.reason.hasPrefix("two ") && failure.reason.contains(phrase) : failure.reason.contains(phrase)
            }
            return Outcome(step: step, reason: failure.reason)
        }
    }

    /// Both rules on one item: the same step fails (or neither), and where the reason has no detail
    /// of its own (every step but 3, the decoder's message, and 5, which names the server's row
    /// instead of the push) the same reason.
    static func expectAgreement(_ name: String, _ item: SyncItem, device: String = SignedCorpus.deviceID, key: [UInt8]) -> Outcome {
        let ours = checker(item, device: device, key: key)
        let theirs = coordinator(item, device: device, key: key)
        #expect(ours.step == theirs.step, "\(name): the checker says \(ours), the coordinator's rule says \(theirs)")
        if let step = ours.step, step != .payloadDecodes, step != .claims {
            #expect(ours.reason == theirs.reason, "\(name): \(ours) vs \(theirs)")
        }
        return ours
    }

    struct Case: Sendable {
        var name: String
        var item: SyncItem
        var device = SignedCorpus.deviceID
        var key: [UInt8]
        var expected: Step?
    }

    /// Valid items and every kind of tampering, each with the step that must refuse it.
    static func corpus(_ c: SignedCorpus) throws -> [Case] {
        let other = Curve25519.Signing.PrivateKey()
        let key = c.publicKey
        var cases = c.items.enumerated().map { Case(name: "device item \($0.offset + 1)", item: $0.element, key: key, expected: nil) }
        func add(_ name: String, _ item: SyncItem, device: String = SignedCorpus.deviceID, key: [UInt8]? = nil, _ expected: Step?) {
            cases.append(Case(name: name, item: item, device: device, key: key ?? c.publicKey, expected: expected))
        }
        var item = c.item
        // Step 1: keys the strict rule refuses.
        add("identity (small-order) key", item, key: [1] + [UInt8](repeating: 0, count: 31), .enrolledKey)
        add("31-byte key", item, key: Array(key.prefix(31)), .enrolledKey)
        add("x = 0 with the sign bit", item, key: [0xec] + [UInt8](repeating: 0xff, count: 31), .enrolledKey)
        add("y ≥ p", item, key: [UInt8](repeating: 0xff, count: 31) + [0x7f], .enrolledKey)
        // Step 2: the payload signature.
        add("another device's key", item, key: Array(other.publicKey.rawRepresentation), .payloadSignature)
        item.payload[item.payload.count / 2] ^= 0x01
        add("a payload byte flipped", item, .payloadSignature)
        item = c.item
        item.signature[10] ^= 0x01
        add("a signature byte flipped", item, .payloadSignature)
        item = c.item
        item.signature.removeLast()
        add("a truncated signature", item, .payloadSignature)
        item.signature = []
        add("no signature", item, .payloadSignature)
        item = c.item
        item.signature = Array(item.signature[0..<32]) + Self.plusGroupOrder(Array(item.signature[32..<64]))
        add("S + L (a malleated signature)", item, .payloadSignature)
        item = c.item
        item.payload = Array(item.payload.dropLast())
        add("a truncated payload, not re-signed", item, .payloadSignature)
        add("signed by another key", SyncItem(
            sequence: c.item.sequence, transactionID: c.item.transactionID, payload: c.item.payload,
            signature: Array(try other.signature(for: c.item.payload))), .payloadSignature)
        // Step 3: payloads that do not decode, signed by the device.
        add("a truncated payload", try c.signed(Array(c.item.payload.dropLast(7))), .payloadDecodes)
        add("a trailing byte", try c.signed(c.item.payload + [0x00]), .payloadDecodes)
        add("an empty payload", try c.signed([]), .payloadDecodes)
        add("not a map", try c.signed([0x93, 0x01, 0x02, 0x03]), .payloadDecodes)
        add("an unknown tab type", try c.reencoded { rewriting(&$0, "tabs.0.type") { _ in .string("stamp") } }, .payloadDecodes)
        add("a required key missing", try c.reencoded { $0.removeAll { $0.key == .string("name") } }, .payloadDecodes)
        add("a required key nil", try c.reencoded { rewriting(&$0, "name") { _ in .nil } }, .payloadDecodes)
        add("format as bin", try c.reencoded { rewriting(&$0, "format") { _ in .binary(Array("signfleet.envelope/1".utf8)) } }, .payloadDecodes)
        add("a negative sequence", try c.reencoded { rewriting(&$0, "sequence") { _ in .int(-1) } }, .payloadDecodes)
        add("a frame as str", try c.reencoded { rewriting(&$0, "tabs.0.frame.x") { _ in .string("72") } }, .payloadDecodes)
        add("a sha256 byte of 256", try c.reencoded { entries in
            rewriting(&entries, "documents.0.sha256") { value in .array((value.binaryValue ?? []).map { MessagePackValue.uint(UInt64($0)) } + [.uint(256)]) }
        }, .payloadDecodes)
        add("pdf as an array of bytes", try c.reencoded { entries in
            rewriting(&entries, "documents.0.pdf") { value in .array((value.binaryValue ?? []).map { MessagePackValue.uint(UInt64($0)) }) }
        }, .payloadDecodes)
        add("invalid UTF-8 in a field", try Self.invalidUTF8Name(c), .payloadDecodes)
        add("0xc1 in an unknown key's value", try c.withExtraEntry(raw: [0xc1]), .payloadDecodes)
        add("an array claiming more than the bytes left", try c.withExtraEntry(raw: [0xdd, 0xff, 0xff, 0xff, 0xff]), .payloadDecodes)
        add("nesting deeper than 64", try c.withExtraEntry(raw: [UInt8](repeating: 0x91, count: 64) + [0x00]), .payloadDecodes)
        // Step 4.
        add("another format", try c.edited { $0.format = "signfleet.envelope/2" }, .format)
        // Step 5: the payload's claims against the row.
        add("pushed as another device", c.item, device: "d-2", .claims)
        item = c.item
        item.sequence += 1
        add("another sequence", item, .claims)
        item = c.item
        item.transactionID += "-x"
        add("another transaction", item, .claims)
        add("a payload naming another device", try c.edited { $0.deviceId = "d-2" }, .claims)
        // Step 6.
        add("two recipients with one id", try c.edited { $0.recipients[1].recipientId = $0.recipients[0].recipientId }, .uniqueIDs)
        add("two documents with one id", try c.edited { $0.documents.append($0.documents[0]) }, .uniqueIDs)
        // Step 7.
        add("a document's bytes changed", try c.edited { $0.documents[0].pdf[0] ^= 0x01 }, .documentHash)
        add("a document's hash changed", try c.edited { $0.documents[0].sha256[0] ^= 0x01 }, .documentHash)
        // Step 8.
        add("a signature on an unknown document", try c.edited { $0.signatures[1].documentId = "nowhere" }, .signatureDocument)
        // Step 9: bindings that do not decode strictly (signed again, so only the decoding fails).
        add("a binding with another magic", try c.edited { payload in
            payload.signatures[0].binding[0] = 0x54
            try c.signBinding(&payload, 0)
        }, .bindingReadable)
        add("a binding with a trailing byte", try c.edited { payload in
            payload.signatures[1].binding.append(0)
            try c.signBinding(&payload, 1)
        }, .bindingReadable)
        add("a binding of version 2", try c.edited { payload in
            payload.signatures[0].binding[5] = 2
            try c.signBinding(&payload, 0)
        }, .bindingReadable)
        add("a binding cut short", try c.edited { payload in
            payload.signatures[0].binding.removeLast()
            try c.signBinding(&payload, 0)
        }, .bindingReadable)
        // Step 10.
        add("an ISO record changed", try c.edited { $0.signatures[0].isoRecord[0] ^= 0x01 }, .bindingHashes)
        add("a binding for another document", try c.edited { payload in
            var binding = try SignatureBinding(canonicalBytes: payload.signatures[1].binding)
            binding.documentSHA256 = Array(SHA256.hash(data: [1, 2, 3]))
            payload.signatures[1].binding = binding.canonicalBytes()
            try c.signBinding(&payload, 1)
        }, .bindingHashes)
        // Step 11.
        add("a binding signed by another key", try c.edited { try c.signBinding(&$0, 1, with: other) }, .bindingSignature)
        add("a binding signature flipped", try c.edited { $0.signatures[0].bindingSignature[3] ^= 0x01 }, .bindingSignature)
        add("a binding signature cut", try c.edited { $0.signatures[0].bindingSignature.removeLast() }, .bindingSignature)
        add("a binding field id changed, not re-signed", try c.edited { payload in
            var binding = try SignatureBinding(canonicalBytes: payload.signatures[0].binding)
            binding.fieldID += "-x"
            payload.signatures[0].binding = binding.canonicalBytes()
        }, .bindingSignature)
        // Accepted: what section 7 allows besides the canonical encoding.
        add("keys in reverse order", try c.reencoded { $0.reverse() }, nil)
        add("an unknown key", try c.reencoded { $0.append(MessagePackEntry(key: .string("extra"), value: .map([
            MessagePackEntry(key: .string("nested"), value: .array([.uint(1), .timestamp(seconds: 1, nanoseconds: 0)])),
        ]))) }, nil)
        add("a key that is not a str", try c.reencoded { $0.append(MessagePackEntry(key: .uint(7), value: .string("x"))) }, nil)
        add("a repeated key (the first counts)", try c.reencoded { $0.append(MessagePackEntry(key: .string("format"), value: .uint(5))) }, nil)
        add("an absent optional as nil", try c.reencoded { $0.append(MessagePackEntry(key: .string("templateId"), value: .nil)) }, nil)
        add("sha256 as an array of bytes", try c.reencoded { entries in
            rewriting(&entries, "documents.0.sha256") { value in .array((value.binaryValue ?? []).map { MessagePackValue.uint(UInt64($0)) }) }
        }, nil)
        add("a frame as integer and float32", try c.reencoded { entries in
            rewriting(&entries, "tabs.0.frame.x") { value in .uint(UInt64(value.doubleValue ?? 0)) }
            rewriting(&entries, "tabs.0.frame.y") { value in .float(Float(value.doubleValue ?? 0)) }
        }, nil)
        add("invalid UTF-8 in an unknown key's value", try c.withExtraEntry(raw: [0xa2, 0xff, 0xfe]), nil)
        add("an ext in an unknown key's value", try c.withExtraEntry(raw: [0xd4, 0x05, 0x00]), nil)
        add("a malformed timestamp in an unknown key's value", try c.withExtraEntry(raw: [0xc7, 0x03, 0xff, 0x00, 0x00, 0x00]), nil)
        add("nesting of exactly 64", try c.withExtraEntry(raw: [UInt8](repeating: 0x91, count: 63) + [0x00]), nil)
        add("custom fields, a template and every optional", try c.edited { payload in
            payload.templateId = "tpl-1"
            payload.customFields = CustomFields(
                text: [TextCustomField(name: "po", value: "42", required: true, show: false)],
                list: [ListCustomField(name: "colour", value: "red", items: ["red", "blue"])])
            payload.tabs[0].groupName = "g"
            payload.tabs[0].value = "v"
            payload.recipients[0].declineReason = "none"
        }, nil)
        return cases
    }

    /// The payload whose `name` is a `str` of bytes that are not UTF-8.
    static func invalidUTF8Name(_ c: SignedCorpus) throws -> SyncItem {
        var payload = try SyncPayload(canonicalBytes: c.item.payload)
        payload.name = "NAME-PLACEHOLDER"
        var bytes = try payload.canonicalBytes()
        let marker = [UInt8(0xa0 | 16)] + Array("NAME-PLACEHOLDER".utf8)
        guard let range = bytes.firstRange(of: marker) else { throw FixtureError("no placeholder") }
        bytes.replaceSubrange(range, with: [0xa2, 0xc3, 0x28])
        return try c.signed(bytes)
    }

    /// 32 little-endian bytes plus L (the group order): the same signature with a non-canonical S.
    static func plusGroupOrder(_ s: [UInt8]) -> [UInt8] {
        let order = CheckerSignatureRule.StrictKey.groupOrder
        var result = [UInt8](repeating: 0, count: 32)
        var carry = 0
        for index in 0..<32 {
            let sum = Int(s[index]) + Int(order[index]) + carry
            result[index] = UInt8(sum & 0xff)
            carry = sum >> 8
        }
        return result
    }

    @Test func bothRulesAgreeOnEveryValidAndTamperedItemAndTheCheckerSaysWhy() async throws {
        let corpus = try await SignedCorpus.make()
        let cases = try Self.corpus(corpus)
        #expect(cases.count > 60)
        for c in cases {
            let outcome = Self.expectAgreement(c.name, c.item, device: c.device, key: c.key)
            #expect(outcome.step == c.expected, "\(c.name): expected \(c.expected.map { "\($0)" } ?? "verified"), got \(outcome)")
            if let step = outcome.step, let phrase = Self.phrases[step] {
                #expect(outcome.reason?.contains(phrase) == true, "\(c.name): the reason \(outcome.reason ?? "") does not say \(phrase)")
            }
        }
        // Every step is exercised by some tampering.
        #expect(Set(cases.compactMap(\.expected)) == Set(Step.allCases))
    }

    @Test func decodingFailuresSayWhereAndWhat() async throws {
        let corpus = try await SignedCorpus.make()
        let key = corpus.publicKey
        let tab = try corpus.reencoded { rewriting(&$0, "tabs.1.type") { _ in .string("stamp") } }
        let tabReason = try #require(Self.checker(tab, key: key).reason)
        #expect(tabReason.contains("tabs[1].type") && tabReason.contains("unknown tab type \"stamp\""), "\(tabReason)")
        let missing = try corpus.reencoded { $0.removeAll { $0.key == .string("signatures") } }
        let missingReason = try #require(Self.checker(missing, key: key).reason)
        #expect(missingReason.contains("the required key \"signatures\" is missing"), "\(missingReason)")
        let trailing = try corpus.signed(corpus.item.payload + [0xc0, 0xc0])
        let trailingReason = try #require(Self.checker(trailing, key: key).reason)
        #expect(trailingReason.contains("2 bytes after the end of the value"), "\(trailingReason)")
        let claims = Self.checker(corpus.item, device: "d-9", key: key)
        #expect(claims.reason?.contains("but the server holds it as device d-9, item 1, transaction d-1-tx-1") == true, "\(claims)")
    }

    /// Seeded mutations of a real payload (value-level and byte-level), each signed with the
    /// device's key so it reaches the decoder and the checks after it: both rules must fail at the
    /// same step, or both accept. Replay with `SIGNFLEET_SEED`.
    @Test func bothRulesAgreeOnMutatedPayloadsSignedByTheDevice() async throws {
        let corpus = try await SignedCorpus.make()
        let run = FuzzRun("checker rule vs coordinator rule")
        let inputs = run.count(1_500)
        let start = ContinuousClock.now
        let findings = await run.offPool { findings in
            var rng = SeededRandom(seed: run.seed)
            let originals = corpus.items.map(\.payload)
            for index in 0..<inputs {
                guard let original = originals.randomElement(using: &rng) else { return }
                let bytes: [UInt8]
                if Bool.random(using: &rng), let mutated = FuzzMessagePack.mutate(bytes: original, using: &rng) {
                    bytes = mutated
                } else {
                    bytes = FuzzMutator.mutate(original, corpus: originals, using: &rng)
                }
                guard let item = try? corpus.signed(bytes, from: corpus.items[originals.firstIndex(of: original) ?? 0]) else { continue }
                let ours = Self.checker(item, key: corpus.publicKey)
                let theirs = Self.coordinator(item, key: corpus.publicKey)
                findings.check(ours.step == theirs.step, "the checker says \(ours), the coordinator's rule \(theirs)", input: index)
                if ours.step == nil { findings.accept() }
            }
        }
        run.report("CheckerSignatureRule vs SyncItemRule", inputs: inputs, accepted: findings.accepted, since: start)
        for failure in findings.failures { Issue.record("\(failure)") }
        #expect(findings.accepted < inputs, "some mutations must be refused")
    }

    /// docs/sync-payload.md section 8's worked example, read from the page: its payload, signature
    /// and key, as a device written in another language would send them.
    @Test func theWorkedExampleOfTheDocsVerifies() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let page = try String(contentsOf: root.appendingPathComponent("docs/sync-payload.md"), encoding: .utf8)
        let lines = page.components(separatedBy: "\n")
        /// The hex of the first fenced block after the line that contains `heading`.
        func block(after heading: String) throws -> [UInt8] {
            let at = try #require(lines.firstIndex { $0.contains(heading) }, "no \(heading) in docs/sync-payload.md")
            let open = try #require(lines[at...].firstIndex { $0.hasPrefix("```") })
            let close = try #require(lines[(open + 1)...].firstIndex { $0.hasPrefix("```") })
            let hex = lines[(open + 1)..<close].joined()
            return CheckerSignatureRule.StrictKey.hex(hex)
        }
        let publicKey = try block(after: "Its public key (what `device.enroll` sends)")
        let payload = try block(after: "The same 1,263 bytes without annotations")
        let signature = try block(after: "The **payload signature**")
        #expect(publicKey.count == 32 && payload.count == 1_263 && signature.count == 64)
        let item = SyncItem(sequence: 1, transactionID: "tx-0001", payload: payload, signature: signature)
        let outcome = Self.expectAgreement("the worked example", item, device: "tablet-7", key: publicKey)
        #expect(outcome.step == nil, "\(outcome)")
        #expect(CheckerSignatureRule.sha256(payload) == CheckerSignatureRule.StrictKey.hex("f99d948ab8bf7615e2fac34ddf1a7e67e6965bd2f4ff2b4ec2d412b9ca801eb3"))
    }

    /// The oracle shares no verification code with what it judges: the checker's files name neither
    /// the coordinator's rule nor the modules it is built from.
    @Test func theCheckerDoesNotUseTheCoordinatorsRule() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        for file in ["CheckerSignatureRule.swift", "CheckerStores.swift"] {
            let source = try String(contentsOf: root.appendingPathComponent("Sources/Fleet/\(file)"), encoding: .utf8)
            let code = source.components(separatedBy: "\n").filter { !$0.trimmingCharacters(in: .whitespaces).hasPrefix("///") && !$0.contains("//") }
                .joined(separator: "\n")
            for name in ["import SyncContract", "import SignatureCapture", "import MessagePack", "SyncItemRule", "StrictEd25519", "SignatureBinding",
                         "SyncPayload("] {
                #expect(!code.contains(name), "\(file) uses \(name)")
            }
        }
    }

    /// The strict rule's byte checks (docs/protocol.md) against the known edge cases.
    @Test func theStrictRuleRefusesSmallOrderAndNonCanonicalKeysAndSignatures() throws {
        let key = Curve25519.Signing.PrivateKey()
        let message: [UInt8] = Array("hello".utf8)
        let signature = Array(try key.signature(for: message))
        let good = try #require(CheckerSignatureRule.StrictKey.usable(Array(key.publicKey.rawRepresentation)))
        #expect(CheckerSignatureRule.StrictKey.verifies(signature, over: message, key: good))
        #expect(!CheckerSignatureRule.StrictKey.verifies(signature, over: message + [0], key: good))
        #expect(!CheckerSignatureRule.StrictKey.verifies(Array(signature[0..<32]) + Self.plusGroupOrder(Array(signature[32..<64])), over: message, key: good))
        for point in CheckerSignatureRule.StrictKey.smallOrder {
            #expect(CheckerSignatureRule.StrictKey.usable(point) == nil, "small-order key \(point)")
            // R of small order with S = 0: the forgery that verifies for the identity key.
            #expect(!CheckerSignatureRule.StrictKey.verifies(point + [UInt8](repeating: 0, count: 32), over: message, key: good))
        }
        // The same points as SignatureCapture's list: the docs' constants were copied right.
        #expect(CheckerSignatureRule.StrictKey.smallOrder == StrictEd25519.smallOrderPoints)
    }
}
