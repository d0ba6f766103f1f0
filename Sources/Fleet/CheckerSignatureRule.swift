import Crypto
import Foundation

/// The fleet checker's own implementation of the sync item rule, written from the documentation
/// (docs/sync-payload.md, sections 2, 3, 4, 5, 6 steps 1 to 11, and 7; docs/protocol.md, "Strict
/// Ed25519"), not from the coordinator's code: the checker judges what the coordinator stored, so it
/// shares no verification code with the coordinator's ingest (`SyncItemRule` in SyncContract) nor its
/// MessagePack decoder, its binding decoder (`SignatureBinding`) or its strict Ed25519 checks
/// (`StrictEd25519`). Only the Ed25519 equation and SHA-256 come from swift-crypto.
///
/// `CheckerSignatureRuleTests` runs both rules over the same items (valid ones, every kind of
/// tampering, and seeded mutations re-signed with the device's key) and expects them to agree item by
/// item, on the step that fails.
enum CheckerSignatureRule {
    /// The steps of docs/sync-payload.md section 6, in the order they are checked; the first that
    /// fails decides.
    enum Step: Int, Sendable, Hashable, CaseIterable, Comparable, CustomStringConvertible {
        /// 1: the enrolled public key passes the strict rule.
        case enrolledKey = 1
        /// 2: the item's signature is a strictly valid Ed25519 signature of the payload bytes.
        case payloadSignature
        /// 3: the payload decodes (section 7).
        case payloadDecodes
        /// 4: `format` is the current one.
        case format
        /// 5: the payload's device, sequence and transaction are the item's.
        case claims
        /// 6: recipient ids, then document ids, are unique.
        case uniqueIDs
        /// 7: each document's bytes hash to its `sha256`.
        case documentHash
        /// 8: a signature entry names a document of the payload.
        case signatureDocument
        /// 9: a signature entry's binding decodes strictly (section 5).
        case bindingReadable
        /// 10: the binding's hashes are the document's and the ISO record's.
        case bindingHashes
        /// 11: the binding's own signature verifies with the enrolled key.
        case bindingSignature

        static func < (lhs: Step, rhs: Step) -> Bool { lhs.rawValue < rhs.rawValue }

        var description: String { "step \(rawValue)" }
    }

    /// Why an item fails the rule: the step, and the reason (the texts of section 6's table).
    struct Failure: Error, Sendable, Hashable, CustomStringConvertible {
        var step: Step
        var reason: String

        var description: String { reason }
    }

    /// What a verified payload says about itself, for the checker to compare with the row.
    struct Verified: Sendable, Hashable {
        var deviceID: String
        var sequence: UInt64
        var envelopeID: String
        var transactionID: String
    }

    /// The only payload format (section 4.1, `format`).
    static let currentFormat = "signfleet.envelope/1"

    /// Checks one stored item: `payload` and `signature` as the device sent them, held by the server
    /// under `deviceID`, `sequence` and `transactionID`, against the device's enrolled `publicKey`
    /// (its raw 32 bytes). Steps 1 to 11, every binding signature included.
    static func check(
        payload: [UInt8], signature: [UInt8], deviceID: String, sequence: UInt64, transactionID: String, publicKey: [UInt8]
    ) -> Result<Verified, Failure> {
        // Step 1.
        guard let key = StrictKey.usable(publicKey) else {
            return .failure(Failure(step: .enrolledKey, reason: "the device's enrolled key is unusable"))
        }
        // Step 2: over the bytes as received, before anything is decoded.
        guard StrictKey.verifies(signature, over: payload, key: key) else {
            return .failure(Failure(step: .payloadSignature, reason: "the signature does not verify over the payload with the device's enrolled key"))
        }
        // Step 3.
        let decoded: DecodedPayload
        do {
            decoded = try DecodedPayload(bytes: payload)
        } catch {
            return .failure(Failure(step: .payloadDecodes, reason: "the payload is not a valid envelope: \(error)"))
        }
        // Step 4.
        guard decoded.format == currentFormat else {
            return .failure(Failure(step: .format, reason: "unknown payload format \"\(decoded.format)\""))
        }
        // Step 5.
        guard decoded.deviceID == deviceID, decoded.sequence == sequence, decoded.transactionID == transactionID else {
            return .failure(Failure(
                step: .claims,
                reason: "the payload names device \(decoded.deviceID), item \(decoded.sequence), transaction \(decoded.transactionID), but the server holds it as device \(deviceID), item \(sequence), transaction \(transactionID)"))
        }
        // Step 6: recipients first, then documents.
        if let repeated = firstRepeated(decoded.recipientIDs) {
            return .failure(Failure(step: .uniqueIDs, reason: "two recipients share the recipientId \"\(repeated)\""))
        }
        if let repeated = firstRepeated(decoded.documents.map(\.id)) {
            return .failure(Failure(step: .uniqueIDs, reason: "two documents share the documentId \"\(repeated)\""))
        }
        // Step 7, document by document in payload order.
        var documentHashes: [String: [UInt8]] = [:]
        for document in decoded.documents {
            guard sha256(document.pdf) == document.sha256 else {
                return .failure(Failure(step: .documentHash, reason: "document \(document.id): its bytes do not match its SHA-256"))
            }
            documentHashes[document.id] = document.sha256
        }
        // Steps 8 to 11, entry by entry in payload order (all four for one entry before the next).
        for entry in decoded.signatures {
            guard let documentHash = documentHashes[entry.documentID] else {
                return .failure(Failure(step: .signatureDocument, reason: "signature for tab \(entry.tabIndex) names unknown document \(entry.documentID)"))
            }
            guard let binding = BindingHashes(entry.binding) else {
                return .failure(Failure(step: .bindingReadable, reason: "signature for tab \(entry.tabIndex): the binding is unreadable"))
            }
            guard binding.document == documentHash, binding.iso == sha256(entry.isoRecord) else {
                return .failure(Failure(
                    step: .bindingHashes,
                    reason: "signature for tab \(entry.tabIndex): the binding does not match document \(entry.documentID) or its ISO record"))
            }
            guard StrictKey.verifies(entry.bindingSignature, over: entry.binding, key: key) else {
                return .failure(Failure(step: .bindingSignature, reason: "signature for tab \(entry.tabIndex): the binding's device signature does not verify"))
            }
        }
        return .success(Verified(
            deviceID: decoded.deviceID, sequence: decoded.sequence, envelopeID: decoded.envelopeID, transactionID: decoded.transactionID))
    }

    static func sha256(_ bytes: [UInt8]) -> [UInt8] { Array(SHA256.hash(data: bytes)) }

    static func firstRepeated(_ values: [String]) -> String? {
        var seen = Set<String>()
        return values.first { !seen.insert($0).inserted }
    }
}

// MARK: - Strict Ed25519 (docs/protocol.md, "Strict Ed25519")

extension CheckerSignatureRule {
    /// The strict rule's byte checks, from the constants docs/protocol.md lists; the equation itself
    /// is swift-crypto's.
    enum StrictKey {
        /// The key when `bytes` pass the rule for public keys: 32 bytes, y below p, not x = 0 with
        /// the sign bit set, not a point of small order (and a key swift-crypto takes).
        static func usable(_ bytes: [UInt8]) -> Curve25519.Signing.PublicKey? {
            guard bytes.count == 32 else { return nil }
            var y = bytes
            let signBit = y[31] & 0x80 != 0
            y[31] &= 0x7f
            guard lessThan(y, fieldPrime) else { return nil }
            // x = 0 exactly when y = 1 or y = p − 1; with the sign bit that is `01 00…00 80` or `ec ff…ff ff`.
            if signBit && (y == one || y == primeMinusOne) { return nil }
            guard !smallOrder.contains(bytes) else { return nil }
            return try? Curve25519.Signing.PublicKey(rawRepresentation: bytes)
        }

        /// Whether `signature` (64 bytes R ‖ S) is strictly valid over `message`: S below L, R not a
        /// point of small order, then the cofactorless equation with R compared by its encoding.
        static func verifies(_ signature: [UInt8], over message: [UInt8], key: Curve25519.Signing.PublicKey) -> Bool {
            guard signature.count == 64 else { return false }
            guard lessThan(Array(signature[32..<64]), groupOrder) else { return false }
            guard !smallOrder.contains(Array(signature[0..<32])) else { return false }
            return key.isValidSignature(signature, for: message)
        }

        /// `a < b` for 32-byte little-endian numbers.
        static func lessThan(_ a: [UInt8], _ b: [UInt8]) -> Bool {
            for index in stride(from: 31, through: 0, by: -1) where a[index] != b[index] {
                return a[index] < b[index]
            }
            return false
        }

        /// p = 2^255 − 19, little-endian.
        static let fieldPrime = hex("edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f")
        /// p − 1 (y of the point (0, −1)), little-endian.
        static let primeMinusOne = hex("ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f")
        /// 1 (y of the identity (0, 1)), little-endian.
        static let one = hex("0100000000000000000000000000000000000000000000000000000000000000")
        /// L = 2^252 + 27742317777372353535851937790883648493, little-endian.
        static let groupOrder = hex("edd3f55c1a631258d69cf7a2def9de1400000000000000000000000000000010")
        /// The eight encodings of points of small order that the rule refuses as keys and as R.
        static let smallOrder: Set<[UInt8]> = [
            one,
            primeMinusOne,
            hex("0000000000000000000000000000000000000000000000000000000000000000"),
            hex("0000000000000000000000000000000000000000000000000000000000000080"),
            hex("26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05"),
            hex("26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85"),
            hex("c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a"),
            hex("c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa"),
        ]

        static func hex(_ text: String) -> [UInt8] {
            let digits = Array(text.utf8)
            func value(_ c: UInt8) -> UInt8 { c <= 57 ? c - 48 : c - 87 }
            return stride(from: 0, to: digits.count, by: 2).map { value(digits[$0]) << 4 | value(digits[$0 + 1]) }
        }
    }
}

// MARK: - The binding (docs/sync-payload.md section 5; docs/signature-format.md, "Signature binding")

extension CheckerSignatureRule {
    /// The two hashes of a binding that decodes strictly; `nil` when it does not: wrong magic, a
    /// version other than 1, a hash length other than 32, a time length other than 8, a field or
    /// signer id longer than 1 MiB or not valid UTF-8, truncation, or bytes after the completion time.
    struct BindingHashes {
        var document: [UInt8]
        var iso: [UInt8]

        init?(_ bytes: [UInt8]) {
            var offset = 0
            func take(_ count: Int) -> ArraySlice<UInt8>? {
                guard count >= 0, bytes.count - offset >= count else { return nil }
                defer { offset += count }
                return bytes[offset..<offset + count]
            }
            /// A 4-byte big-endian length, then that many bytes (`expected`: the only length allowed).
            func field(expected: Int? = nil) -> ArraySlice<UInt8>? {
                guard let header = take(4) else { return nil }
                let length = header.reduce(0) { $0 << 8 | Int($1) }
                if let expected, length != expected { return nil }
                guard length <= 1 << 20 else { return nil }
                return take(length)
            }
            func text() -> Bool {
                guard let raw = field() else { return false }
                return String(validating: raw, as: UTF8.self) != nil
            }
            guard take(4).map({ Array($0) }) == [0x53, 0x46, 0x53, 0x42] else { return nil }
            guard take(2).map({ Array($0) }) == [0x00, 0x01] else { return nil }
            guard let document = field(expected: 32), let iso = field(expected: 32) else { return nil }
            guard text(), text() else { return nil }
            guard field(expected: 8) != nil, field(expected: 8) != nil else { return nil }
            guard offset == bytes.count else { return nil }
            self.document = Array(document)
            self.iso = Array(iso)
        }
    }
}

// MARK: - The payload (docs/sync-payload.md sections 4 and 7)

extension CheckerSignatureRule {
    /// Why the payload does not decode, for people: what was wrong, where (a field path), at which byte.
    struct DecodeError: Error, CustomStringConvertible {
        var message: String
        var path: String
        var offset: Int

        var description: String { path.isEmpty ? "\(message) at byte \(offset)" : "\(path): \(message) at byte \(offset)" }
    }

    /// What the rule needs of a payload, decoded by section 7's rules. Every other field is read
    /// and type-checked too, then dropped: a payload with any field of the wrong type is rejected.
    struct DecodedPayload {
        struct Document {
            var id: String
            var sha256: [UInt8]
            var pdf: [UInt8]
        }

        struct SignatureEntry {
            var tabIndex: Int64
            var documentID: String
            var isoRecord: [UInt8]
            var binding: [UInt8]
            var bindingSignature: [UInt8]
        }

        var format = ""
        var deviceID = ""
        var sequence: UInt64 = 0
        var envelopeID = ""
        var transactionID = ""
        var documents: [Document] = []
        var recipientIDs: [String] = []
        var signatures: [SignatureEntry] = []

        /// Tab types (section 4.4); any other is unreadable.
        static let tabTypes: Set<String> = [
            "signHere", "initialHere", "text", "checkbox", "company", "title", "fullName", "dateSigned", "formula", "radio",
        ]

        init(bytes: [UInt8]) throws {
            var reader = PayloadReader(bytes)
            try reader.checkInputSize()
            var payload = DecodedPayload()
            try reader.map(path: "", required: [
                "format", "deviceId", "sequence", "envelopeId", "transactionId", "signingMode", "name", "emailSubject", "emailMessage",
                "createdAtNanos", "documents", "recipients", "tabs", "customFields", "signatures",
            ]) { reader, key, path in
                switch key {
                case "format": payload.format = try reader.string(path)
                case "deviceId": payload.deviceID = try reader.string(path)
                case "sequence": payload.sequence = try reader.uint64(path)
                case "envelopeId": payload.envelopeID = try reader.string(path)
                case "transactionId": payload.transactionID = try reader.string(path)
                case "templateId": try reader.optional { try $0.string(path) }
                case "signingMode", "name", "emailSubject", "emailMessage": _ = try reader.string(path)
                case "createdAtNanos": _ = try reader.int64(path)
                case "completedLocallyAtNanos": try reader.optional { try $0.int64(path) }
                case "documents": payload.documents = try reader.array(path) { try Self.document(&$0, $1) }
                case "recipients": payload.recipientIDs = try reader.array(path) { try Self.recipient(&$0, $1) }
                case "tabs": _ = try reader.array(path) { try Self.tab(&$0, $1) }
                case "customFields": try Self.customFields(&reader, path)
                case "signatures": payload.signatures = try reader.array(path) { try Self.signature(&$0, $1) }
                default: return false
                }
                return true
            }
            try reader.expectEnd()
            self = payload
        }

        private init() {}

        /// Section 4.2.
        private static func document(_ reader: inout PayloadReader, _ path: String) throws -> Document {
            var document = Document(id: "", sha256: [], pdf: [])
            try reader.map(path: path, required: ["documentId", "name", "pageCount", "sha256", "pdf"]) { reader, key, path in
                switch key {
                case "documentId": document.id = try reader.string(path)
                case "name": _ = try reader.string(path)
                case "pageCount": _ = try reader.int64(path)
                case "sha256": document.sha256 = try reader.bytes(path, arrayOfIntegers: true)
                case "pdf": document.pdf = try reader.bytes(path, arrayOfIntegers: false)
                default: return false
                }
                return true
            }
            return document
        }

        /// Section 4.3; only the recipient id is kept.
        private static func recipient(_ reader: inout PayloadReader, _ path: String) throws -> String {
            var id = ""
            try reader.map(path: path, required: ["recipientId", "type", "name", "routingOrder", "status"]) { reader, key, path in
                switch key {
                case "recipientId": id = try reader.string(path)
                case "type", "name", "status": _ = try reader.string(path)
                case "routingOrder": _ = try reader.int64(path)
                case "email", "clientUserId", "hostName", "hostEmail", "declineReason": try reader.optional { try $0.string(path) }
                case "statusChangedAtNanos": try reader.optional { try $0.int64(path) }
                default: return false
                }
                return true
            }
            return id
        }

        /// Section 4.4: read and checked, not kept.
        private static func tab(_ reader: inout PayloadReader, _ path: String) throws {
            try reader.map(
                path: path, required: ["type", "documentId", "recipientId", "pageNumber", "frame", "scale", "locked", "optional", "selected"]
            ) { reader, key, path in
                switch key {
                case "type":
                    let start = reader.offset
                    let type = try reader.string(path)
                    guard Self.tabTypes.contains(type) else {
                        throw DecodeError(message: "unknown tab type \"\(type)\"", path: path, offset: start)
                    }
                case "documentId", "recipientId": _ = try reader.string(path)
                case "tabId", "label", "name", "value", "groupName": try reader.optional { try $0.string(path) }
                case "pageNumber": _ = try reader.int64(path)
                case "frame":
                    try reader.map(path: path, required: ["x", "y", "width", "height"]) { reader, key, path in
                        guard ["x", "y", "width", "height"].contains(key) else { return false }
                        _ = try reader.double(path)
                        return true
                    }
                case "scale": _ = try reader.double(path)
                case "locked", "optional", "selected": _ = try reader.bool(path)
                default: return false
                }
                return true
            }
        }

        /// Section 4.5: read and checked, not kept.
        private static func customFields(_ reader: inout PayloadReader, _ path: String) throws {
            try reader.map(path: path, required: ["text", "list"]) { reader, key, path in
                switch key {
                case "text":
                    _ = try reader.array(path) { reader, path in
                        try reader.map(path: path, required: ["name", "value", "required", "show"]) { reader, key, path in
                            switch key {
                            case "name", "value": _ = try reader.string(path)
                            case "required", "show": _ = try reader.bool(path)
                            default: return false
                            }
                            return true
                        }
                    }
                case "list":
                    _ = try reader.array(path) { reader, path in
                        try reader.map(path: path, required: ["name", "value", "items", "required", "show"]) { reader, key, path in
                            switch key {
                            case "name", "value": _ = try reader.string(path)
                            case "items": _ = try reader.array(path) { try $0.string($1) }
                            case "required", "show": _ = try reader.bool(path)
                            default: return false
                            }
                            return true
                        }
                    }
                default: return false
                }
                return true
            }
        }

        /// Section 4.6.
        private static func signature(_ reader: inout PayloadReader, _ path: String) throws -> SignatureEntry {
            var entry = SignatureEntry(tabIndex: 0, documentID: "", isoRecord: [], binding: [], bindingSignature: [])
            try reader.map(
                path: path, required: ["tabIndex", "recipientId", "documentId", "fieldId", "isoRecord", "binding", "bindingSignature"]
            ) { reader, key, path in
                switch key {
                case "tabIndex": entry.tabIndex = try reader.int64(path)
                case "recipientId", "fieldId": _ = try reader.string(path)
                case "documentId": entry.documentID = try reader.string(path)
                case "isoRecord": entry.isoRecord = try reader.bytes(path, arrayOfIntegers: true)
                case "binding": entry.binding = try reader.bytes(path, arrayOfIntegers: true)
                case "bindingSignature": entry.bindingSignature = try reader.bytes(path, arrayOfIntegers: true)
                default: return false
                }
                return true
            }
            return entry
        }
    }

    /// Walks MessagePack bytes by section 7's rules and the decoder limits it names (depth 64;
    /// 1,000,000 elements per array or map; `str` up to 16 MiB; `bin` and `ext` up to 64 MiB; the
    /// whole input up to 128 MiB). Every declared length is checked against the bytes left before
    /// anything is read, nothing is allocated from a claimed length, and nothing traps: any input
    /// gives a value or a ``DecodeError``.
    struct PayloadReader {
        static let maxDepth = 64
        static let maxCount = 1_000_000
        static let maxString = 16 << 20
        static let maxBinary = 64 << 20
        static let maxInput = 128 << 20

        let bytes: [UInt8]
        private(set) var offset = 0
        /// Containers open around the current position.
        private var depth = 0

        init(_ bytes: [UInt8]) {
            self.bytes = bytes
        }

        private var remaining: Int { bytes.count - offset }

        func fail(_ message: String, _ path: String, at position: Int? = nil) -> DecodeError {
            DecodeError(message: message, path: path, offset: position ?? offset)
        }

        func checkInputSize() throws {
            guard !bytes.isEmpty else { throw fail("the input is empty", "") }
            guard bytes.count <= Self.maxInput else { throw fail("the input is \(bytes.count) bytes, more than \(Self.maxInput)", "") }
        }

        func expectEnd() throws {
            guard offset == bytes.count else { throw fail("\(bytes.count - offset) bytes after the end of the value", "") }
        }

        private func peek(_ path: String) throws -> UInt8 {
            guard offset < bytes.count else { throw fail("the input ends where a value should start", path) }
            return bytes[offset]
        }

        /// `size` bytes at the current position as a big-endian number (size ≤ 8), consumed.
        private mutating func bigEndian(_ size: Int, _ path: String) throws -> UInt64 {
            guard remaining >= size else { throw fail("the input ends inside a value", path) }
            var value: UInt64 = 0
            for index in 0..<size { value = value << 8 | UInt64(bytes[offset + index]) }
            offset += size
            return value
        }

        /// A length read from the input, as an `Int` (at most 2³² − 1, so it always fits).
        private mutating func length(_ size: Int, _ path: String) throws -> Int {
            Int(try bigEndian(size, path))
        }

        // MARK: Containers

        /// The entry count of a map header at the current position, the container opened.
        private mutating func openMap(_ path: String) throws -> Int {
            let start = offset
            let marker = try peek(path)
            let count: Int
            switch marker {
            case 0x80...0x8f: offset += 1; count = Int(marker & 0x0f)
            case 0xde: offset += 1; count = try length(2, path)
            case 0xdf: offset += 1; count = try length(4, path)
            default: throw fail("expected a map, found \(Self.describe(marker))", path, at: start)
            }
            try open(count: count, entries: 2, path, at: start)
            return count
        }

        /// The element count of an array header at the current position, the container opened.
        private mutating func openArray(_ path: String) throws -> Int {
            let start = offset
            let marker = try peek(path)
            let count: Int
            switch marker {
            case 0x90...0x9f: offset += 1; count = Int(marker & 0x0f)
            case 0xdc: offset += 1; count = try length(2, path)
            case 0xdd: offset += 1; count = try length(4, path)
            default: throw fail("expected an array, found \(Self.describe(marker))", path, at: start)
            }
            try open(count: count, entries: 1, path, at: start)
            return count
        }

        /// Each element needs at least one byte: a count the bytes left cannot hold is refused
        /// before anything is read; so are counts over the limit and nesting deeper than 64.
        private mutating func open(count: Int, entries: Int, _ path: String, at start: Int) throws {
            guard count * entries <= remaining else {
                throw fail("a container declares \(count) elements but only \(remaining) bytes remain", path, at: start)
            }
            guard count <= Self.maxCount else { throw fail("a container of \(count) elements, more than \(Self.maxCount)", path, at: start) }
            guard depth < Self.maxDepth else { throw fail("nesting deeper than \(Self.maxDepth)", path, at: start) }
            depth += 1
        }

        /// Reads a map: `read` gets each `str` key (the first occurrence of each key only) and reads
        /// its value, or returns false to have it skipped. Keys that are not `str`, repeated keys and
        /// keys `read` does not know are skipped (their values must still be well-formed); then every
        /// key of `required` must have been read.
        mutating func map(
            path: String, required: [String], _ read: (inout PayloadReader, String, String) throws -> Bool
        ) throws {
            let count = try openMap(path)
            var seen = Set<String>()
            for _ in 0..<count {
                let key = try self.key(path)
                if let key, !seen.contains(key) {
                    seen.insert(key)
                    let fieldPath = path.isEmpty ? key : "\(path).\(key)"
                    if try read(&self, key, fieldPath) { continue }
                }
                try skip(path)
            }
            depth -= 1
            if let missing = required.first(where: { !seen.contains($0) }) {
                throw fail("the required key \"\(missing)\" is missing", path)
            }
        }

        /// A map key: its text when it is an ASCII `str`, else nil (skipped). Field names are
        /// ASCII and keys match them byte for byte, so a key with any other byte is unknown.
        private mutating func key(_ path: String) throws -> String? {
            let marker = try peek(path)
            guard (0xa0...0xbf).contains(marker) || (0xd9...0xdb).contains(marker) else {
                try skip(path)
                return nil
            }
            let raw = try stringBytes(path)
            guard raw.allSatisfy({ $0 < 0x80 }) else { return nil }
            return String(decoding: raw, as: UTF8.self)
        }

        /// Reads an array, element by element.
        mutating func array<T>(_ path: String, _ element: (inout PayloadReader, String) throws -> T) throws -> [T] {
            let count = try openArray(path)
            var values: [T] = []
            values.reserveCapacity(min(count, 64))
            for index in 0..<count {
                values.append(try element(&self, "\(path)[\(index)]"))
            }
            depth -= 1
            return values
        }

        // MARK: Scalars

        /// An optional field: `nil` (`c0`) is absent; anything else is read by `read`.
        @discardableResult
        mutating func optional<T>(_ read: (inout PayloadReader) throws -> T) throws -> T? {
            if try peek("") == 0xc0 {
                offset += 1
                return nil
            }
            return try read(&self)
        }

        mutating func bool(_ path: String) throws -> Bool {
            switch try peek(path) {
            case 0xc2: offset += 1; return false
            case 0xc3: offset += 1; return true
            case let marker: throw fail("expected a bool, found \(Self.describe(marker))", path)
            }
        }

        /// Any integer format: whether the value is negative, and its 64 bits (two's complement when negative).
        private mutating func integer(_ path: String) throws -> (negative: Bool, bits: UInt64) {
            let start = offset
            let marker = try peek(path)
            switch marker {
            case 0x00...0x7f:
                offset += 1
                return (false, UInt64(marker))
            case 0xe0...0xff:
                offset += 1
                return (true, UInt64(bitPattern: Int64(Int8(bitPattern: marker))))
            case 0xcc...0xcf:
                offset += 1
                return (false, try bigEndian(1 << Int(marker - 0xcc), path))
            case 0xd0...0xd3:
                offset += 1
                let size = 1 << Int(marker - 0xd0)
                let raw = try bigEndian(size, path)
                // Sign-extend from `size` bytes.
                let shift = UInt64(64 - 8 * size)
                let value = Int64(bitPattern: raw << shift) >> shift
                return value < 0 ? (true, UInt64(bitPattern: value)) : (false, UInt64(value))
            default:
                throw fail("expected an integer, found \(Self.describe(marker))", path, at: start)
            }
        }

        /// A signed 64-bit integer field (every `int` field and every time).
        mutating func int64(_ path: String) throws -> Int64 {
            let start = offset
            let (negative, bits) = try integer(path)
            if negative { return Int64(bitPattern: bits) }
            guard let value = Int64(exactly: bits) else { throw fail("\(bits) does not fit a signed 64-bit integer", path, at: start) }
            return value
        }

        /// An unsigned 64-bit integer field (`sequence`): negative values are refused.
        mutating func uint64(_ path: String) throws -> UInt64 {
            let start = offset
            let (negative, bits) = try integer(path)
            guard !negative else { throw fail("\(Int64(bitPattern: bits)) is negative", path, at: start) }
            return bits
        }

        /// A float64 field: float64, float32, or an integer that converts to a Double exactly.
        mutating func double(_ path: String) throws -> Double {
            let start = offset
            switch try peek(path) {
            case 0xca:
                offset += 1
                return Double(Float(bitPattern: UInt32(try bigEndian(4, path))))
            case 0xcb:
                offset += 1
                return Double(bitPattern: try bigEndian(8, path))
            default:
                let (negative, bits) = try integer(path)
                let value = negative ? Double(exactly: Int64(bitPattern: bits)) : Double(exactly: bits)
                guard let value else { throw fail("the integer has no exact Double", path, at: start) }
                return value
            }
        }

        /// The bytes of a `str` (its header checked against the bytes left and the limit).
        private mutating func stringBytes(_ path: String) throws -> ArraySlice<UInt8> {
            let start = offset
            let marker = try peek(path)
            let count: Int
            switch marker {
            case 0xa0...0xbf: offset += 1; count = Int(marker & 0x1f)
            case 0xd9: offset += 1; count = try length(1, path)
            case 0xda: offset += 1; count = try length(2, path)
            case 0xdb: offset += 1; count = try length(4, path)
            default: throw fail("expected a str, found \(Self.describe(marker))", path, at: start)
            }
            return try payload(count, limit: Self.maxString, "str", path, at: start)
        }

        /// A string field: `str` only, valid UTF-8.
        mutating func string(_ path: String) throws -> String {
            let start = offset
            let raw = try stringBytes(path)
            guard let text = String(validating: raw, as: UTF8.self) else { throw fail("a str that is not valid UTF-8", path, at: start) }
            return text
        }

        /// A byte-string field: `bin`; with `arrayOfIntegers`, also an array of integers 0…255.
        mutating func bytes(_ path: String, arrayOfIntegers: Bool) throws -> [UInt8] {
            let start = offset
            let marker = try peek(path)
            switch marker {
            case 0xc4, 0xc5, 0xc6:
                offset += 1
                let count = try length(1 << Int(marker - 0xc4), path)
                return Array(try payload(count, limit: Self.maxBinary, "bin", path, at: start))
            case 0x90...0x9f, 0xdc, 0xdd:
                guard arrayOfIntegers else { throw fail("expected a bin, found an array", path, at: start) }
                return try array(path) { (reader: inout PayloadReader, path: String) throws -> UInt8 in
                    let at = reader.offset
                    let value = try reader.int64(path)
                    guard let byte = UInt8(exactly: value) else { throw reader.fail("\(value) is not a byte (0…255)", path, at: at) }
                    return byte
                }
            default:
                throw fail("expected a bin\(arrayOfIntegers ? " or an array of bytes" : ""), found \(Self.describe(marker))", path, at: start)
            }
        }

        /// `count` payload bytes of a str, bin or ext, checked against the bytes left, then the limit.
        private mutating func payload(_ count: Int, limit: Int, _ kind: String, _ path: String, at start: Int) throws -> ArraySlice<UInt8> {
            guard count <= remaining else { throw fail("a \(kind) declares \(count) bytes but only \(remaining) remain", path, at: start) }
            guard count <= limit else { throw fail("a \(kind) of \(count) bytes, more than \(limit)", path, at: start) }
            defer { offset += count }
            return bytes[offset..<offset + count]
        }

        // MARK: Skipping

        /// Skips one whole well-formed value of any type (an unknown key's, a repeated key's, a key
        /// that is not a `str`), checked like any other: lengths against the bytes left, limits,
        /// depth; 0xc1 is never valid. Strings are not checked for UTF-8 and extensions are opaque.
        mutating func skip(_ path: String) throws {
            let start = offset
            let marker = try peek(path)
            switch marker {
            case 0x00...0x7f, 0xe0...0xff, 0xc0, 0xc2, 0xc3:
                offset += 1
            case 0x80...0x8f, 0xde, 0xdf:
                let count = try openMap(path)
                for _ in 0..<(count * 2) { try skip(path) }
                depth -= 1
            case 0x90...0x9f, 0xdc, 0xdd:
                let count = try openArray(path)
                for _ in 0..<count { try skip(path) }
                depth -= 1
            case 0xa0...0xbf, 0xd9, 0xda, 0xdb:
                _ = try stringBytes(path)
            case 0xc4, 0xc5, 0xc6:
                offset += 1
                let count = try length(1 << Int(marker - 0xc4), path)
                _ = try payload(count, limit: Self.maxBinary, "bin", path, at: start)
            case 0xc7, 0xc8, 0xc9:
                // ext 8/16/32: a length, a type byte, then the data.
                offset += 1
                let count = try length(1 << Int(marker - 0xc7), path)
                guard remaining >= 1 else { throw fail("the input ends inside an ext header", path, at: start) }
                offset += 1
                _ = try payload(count, limit: Self.maxBinary, "ext", path, at: start)
            case 0xd4...0xd8:
                // fixext 1…16: a type byte, then 1, 2, 4, 8 or 16 bytes.
                offset += 1
                _ = try payload(1 + (1 << Int(marker - 0xd4)), limit: Self.maxBinary, "ext", path, at: start)
            case 0xca:
                offset += 1
                _ = try bigEndian(4, path)
            case 0xcb:
                offset += 1
                _ = try bigEndian(8, path)
            case 0xcc...0xcf:
                offset += 1
                _ = try bigEndian(1 << Int(marker - 0xcc), path)
            case 0xd0...0xd3:
                offset += 1
                _ = try bigEndian(1 << Int(marker - 0xd0), path)
            default:
                // 0xc1.
                throw fail("byte 0xc1 is never used in MessagePack", path, at: start)
            }
        }

        /// A marker byte, named for errors.
        static func describe(_ marker: UInt8) -> String {
            switch marker {
            case 0x00...0x7f, 0xe0...0xff, 0xcc...0xd3: "an integer"
            case 0x80...0x8f, 0xde, 0xdf: "a map"
            case 0x90...0x9f, 0xdc, 0xdd: "an array"
            case 0xa0...0xbf, 0xd9...0xdb: "a str"
            case 0xc0: "nil"
            case 0xc2, 0xc3: "a bool"
            case 0xc4...0xc6: "a bin"
            case 0xc7...0xc9, 0xd4...0xd8: "an ext"
            case 0xca, 0xcb: "a float"
            default: "byte 0xc1"
            }
        }
    }
}
