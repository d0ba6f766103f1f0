import Crypto

/// The instants of a capture, recorded in the binding.
public struct CaptureTimes: Hashable, Sendable {
    /// When the successful attempt's first sample was taken.
    public var started: CaptureTimestamp
    /// When its last sample was taken.
    public var completed: CaptureTimestamp

    /// Creates capture times.
    public init(started: CaptureTimestamp, completed: CaptureTimestamp) {
        self.started = started
        self.completed = completed
    }
}

/// Binds a signature's ISO record to a document: what a device signs with its Ed25519 key and the
/// coordinator verifies.
///
/// ```swift
/// let binding = SignatureBinding(document: pdfBytes, signature: captured)
/// let message = binding.canonicalBytes()
/// let proof = try deviceKey.signature(for: message)          // Curve25519.Signing.PrivateKey
/// // coordinator: try SignatureBinding(canonicalBytes: message), recompute hashes, verify proof
/// ```
public struct SignatureBinding: Hashable, Sendable {
    /// Magic of the canonical encoding, "SFSB".
    public static let magic: [UInt8] = [0x53, 0x46, 0x53, 0x42]
    /// Version of the canonical encoding.
    public static let encodingVersion: UInt16 = 1

    /// SHA-256 of the document bytes (32 bytes).
    public var documentSHA256: [UInt8]
    /// SHA-256 of the ISO/IEC 19794-7 record (32 bytes).
    public var isoSHA256: [UInt8]
    /// The signature field id.
    public var fieldID: String
    /// The signer's identifier.
    public var signerID: String
    /// Capture instants.
    public var times: CaptureTimes

    /// Creates a binding from hashes already computed.
    public init(documentSHA256: [UInt8], isoSHA256: [UInt8], fieldID: String, signerID: String, times: CaptureTimes) {
        self.documentSHA256 = documentSHA256
        self.isoSHA256 = isoSHA256
        self.fieldID = fieldID
        self.signerID = signerID
        self.times = times
    }

    /// Creates a binding by hashing the document and the ISO record.
    public init(document: [UInt8], iso: [UInt8], fieldID: String, signer: String, times: CaptureTimes) {
        self.init(documentSHA256: Array(SHA256.hash(data: document)), isoSHA256: Array(SHA256.hash(data: iso)),
                  fieldID: fieldID, signerID: signer, times: times)
    }

    /// Creates a binding for a captured signature.
    public init(document: [UInt8], signature: CapturedSignature) {
        self.init(document: document, iso: signature.isoRecord, fieldID: signature.fieldID, signer: signature.signerID,
                  times: CaptureTimes(started: signature.startedAt, completed: signature.completedAt))
    }

    /// Whether the binding matches this document and ISO record (hashes recomputed).
    public func matches(document: [UInt8], iso: [UInt8]) -> Bool {
        Array(SHA256.hash(data: document)) == documentSHA256 && Array(SHA256.hash(data: iso)) == isoSHA256
    }

    /// The canonical encoding: "SFSB", a 2-byte version, then each field as a 4-byte big-endian
    /// length and its bytes, in this fixed order: document SHA-256, ISO SHA-256, field id (UTF-8),
    /// signer id (UTF-8), start time, completion time (each an 8-byte big-endian signed count of
    /// nanoseconds since the Unix epoch). See docs/signature-format.md.
    public func canonicalBytes() -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(6 + 6 * 4 + 64 + fieldID.utf8.count + signerID.utf8.count + 16)
        out.append(contentsOf: SignatureBinding.magic)
        out.appendUInt16(SignatureBinding.encodingVersion)
        func field(_ bytes: some Collection<UInt8>) {
            out.appendUInt32(UInt32(bytes.count))
            out.append(contentsOf: bytes)
        }
        func time(_ t: CaptureTimestamp) {
            out.appendUInt32(8)
            let v = UInt64(bitPattern: t.nanosecondsSinceEpoch)
            out.appendUInt32(UInt32(v >> 32))
            out.appendUInt32(UInt32(v & 0xFFFF_FFFF))
        }
        field(documentSHA256)
        field(isoSHA256)
        field(fieldID.utf8)
        field(signerID.utf8)
        time(times.started)
        time(times.completed)
        return out
    }

    /// Signs ``canonicalBytes()`` with an Ed25519 private key.
    ///
    /// - Parameter privateKey: the 32-byte raw Ed25519 private key (seed), as
    ///   `Curve25519.Signing.PrivateKey.rawRepresentation`.
    /// - Returns: the 64-byte Ed25519 signature.
    /// - Throws: ``BindingError`` when the key is not a valid raw Ed25519 private key.
    public func sign(privateKey: [UInt8]) throws -> [UInt8] {
        let key: Curve25519.Signing.PrivateKey
        do {
            key = try Curve25519.Signing.PrivateKey(rawRepresentation: privateKey)
        } catch {
            throw BindingError(message: "not a raw Ed25519 private key (\(privateKey.count) bytes, expected 32)")
        }
        do {
            return Array(try key.signature(for: canonicalBytes()))
        } catch {
            throw BindingError(message: "Ed25519 signing failed: \(error)")
        }
    }

    /// Whether `signature` is a valid Ed25519 signature of ``canonicalBytes()`` by `publicKey`.
    ///
    /// - Parameters:
    ///   - signature: the 64-byte signature.
    ///   - publicKey: the 32-byte raw Ed25519 public key (`Curve25519.Signing.PublicKey.rawRepresentation`).
    /// - Returns: false for a wrong signature, a malformed key or a malformed signature.
    public func verify(signature: [UInt8], publicKey: [UInt8]) -> Bool {
        StrictEd25519.isValid(signature, for: canonicalBytes(), publicKey: publicKey)
    }

    /// Decodes a canonical encoding (strictly: exact lengths, no trailing bytes).
    /// - Throws: ``BindingError`` when the bytes are not a canonical binding.
    public init(canonicalBytes bytes: [UInt8]) throws {
        var offset = 0
        func take(_ n: Int) throws -> ArraySlice<UInt8> {
            guard n >= 0, bytes.count - offset >= n else {
                throw BindingError(message: "binding truncated at byte \(offset)")
            }
            defer { offset += n }
            return bytes[offset..<offset + n]
        }
        func field(expecting expected: Int? = nil) throws -> ArraySlice<UInt8> {
            let l = try take(4).reduce(0) { $0 << 8 | Int($1) }
            if let expected, l != expected {
                throw BindingError(message: "field at byte \(offset - 4) has length \(l), expected \(expected)")
            }
            guard l <= 1 << 20 else { throw BindingError(message: "field at byte \(offset - 4) is too long (\(l))") }
            return try take(l)
        }
        func text() throws -> String {
            let raw = try field()
            guard let s = String(validating: raw, as: UTF8.self) else {
                throw BindingError(message: "field ending at byte \(offset) is not valid UTF-8")
            }
            return s
        }
        func time() throws -> CaptureTimestamp {
            let raw = try field(expecting: 8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            return CaptureTimestamp(nanosecondsSinceEpoch: Int64(bitPattern: raw))
        }
        guard try take(4).elementsEqual(SignatureBinding.magic) else { throw BindingError(message: "not a signature binding (magic is not \"SFSB\")") }
        let version = try take(2).reduce(0) { $0 << 8 | Int($1) }
        guard version == Int(SignatureBinding.encodingVersion) else { throw BindingError(message: "unsupported binding version \(version)") }
        documentSHA256 = Array(try field(expecting: 32))
        isoSHA256 = Array(try field(expecting: 32))
        fieldID = try text()
        signerID = try text()
        let started = try time()
        let completed = try time()
        times = CaptureTimes(started: started, completed: completed)
        guard offset == bytes.count else { throw BindingError(message: "\(bytes.count - offset) trailing bytes after the binding") }
    }
}

/// A canonical binding encoding could not be decoded.
public struct BindingError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What is wrong.
    public var message: String
    /// Creates an error.
    public init(message: String) { self.message = message }
    public var description: String { "BindingError: \(message)" }
}
