import Crypto
import Foundation

/// Ed25519 verified strictly: the one rule every SignFleet party uses to decide whether a device
/// signed something (docs/protocol.md, "Strict Ed25519").
///
/// RFC 8032 leaves room: implementations differ on non-canonical encodings and on keys of small
/// order ("Taming the many EdDSAs", ZIP 215). A small-order public key is the dangerous one: for
/// the identity point `01 00…00`, the signature `R = 01 00…00, S = 0` satisfies the verification
/// equation for *every* message, so a peer that enrolls it can "sign" anything. The rule here is
/// libsodium's strict one:
/// - a public key is 32 bytes, its y coordinate is below p = 2^255 − 19 (canonical), it is not an
///   encoding of x = 0 with the sign bit set, and it is none of the eight points of small order;
/// - a signature is 64 bytes, its S (the last 32, little-endian) is below the group order L
///   (RFC 8032 §5.1.7), and its R is not a point of small order;
/// - then the cofactorless equation is checked by swift-crypto, which also compares R by its
///   encoding (so a non-canonical R never verifies).
public enum StrictEd25519 {
    /// Why a public key is refused.
    public enum KeyProblem: Error, Sendable, Hashable, CustomStringConvertible {
        case wrongLength(Int)
        /// y ≥ p, or x = 0 with the sign bit set.
        case nonCanonical
        /// One of the eight points of small order (order 1, 2, 4 or 8).
        case smallOrder
        /// Not the encoding of a curve point at all.
        case notOnCurve

        public var description: String {
            switch self {
            case .wrongLength(let count): "an Ed25519 public key is 32 bytes, got \(count)"
            case .nonCanonical: "the Ed25519 public key is not canonically encoded (y ≥ 2^255 − 19, or x = 0 with the sign bit set)"
            case .smallOrder: "the Ed25519 public key is a point of small order, for which forged signatures verify"
            case .notOnCurve: "the bytes are not an Ed25519 curve point"
            }
        }
    }

    /// The key, once it passes the rule; otherwise why not.
    public static func publicKey(_ bytes: [UInt8]) -> Result<Curve25519.Signing.PublicKey, KeyProblem> {
        guard bytes.count == 32 else { return .failure(.wrongLength(bytes.count)) }
        guard isCanonicalPoint(bytes) else { return .failure(.nonCanonical) }
        guard !isSmallOrder(bytes) else { return .failure(.smallOrder) }
        guard let key = try? Curve25519.Signing.PublicKey(rawRepresentation: bytes) else { return .failure(.notOnCurve) }
        return .success(key)
    }

    /// The key, once it passes the rule and encodes a point of the curve: what a key must be to be
    /// enrolled. swift-crypto takes any 32 bytes as a key; one that is no curve point can sign
    /// nothing (no signature ever verifies with it), so ``publicKey(_:)`` needs no such check on
    /// the paths that verify, but a device enrolled with one would have every push refused. The
    /// check costs some 500 field multiplications, paid once per enrollment.
    public static func enrollableKey(_ bytes: [UInt8]) -> Result<Curve25519.Signing.PublicKey, KeyProblem> {
        let key = publicKey(bytes)
        guard case .success = key, Ed25519Field.isCurvePoint(bytes) else {
            if case .failure = key { return key }
            return .failure(.notOnCurve)
        }
        return key
    }

    /// Whether `signature` is a strictly valid signature of `message` by `publicKey` (raw 32 bytes).
    public static func isValid(_ signature: [UInt8], for message: some DataProtocol, publicKey: [UInt8]) -> Bool {
        guard case .success(let key) = self.publicKey(publicKey) else { return false }
        return isValid(signature, for: message, key: key)
    }

    /// Whether `signature` is a strictly valid signature of `message` by `key`. The key must have
    /// come from ``publicKey(_:)`` (a key made otherwise skips the key half of the rule).
    public static func isValid(_ signature: some Collection<UInt8>, for message: some DataProtocol, key: Curve25519.Signing.PublicKey) -> Bool {
        let bytes = Array(signature)
        guard bytes.count == 64 else { return false }
        guard isCanonicalScalar(bytes[32..<64]) else { return false }
        guard !isSmallOrder(bytes[0..<32]) else { return false }
        return key.isValidSignature(bytes, for: message)
    }

    /// S < L, with L = 2^252 + 27742317777372353535851937790883648493 (RFC 8032 §5.1.7).
    static func isCanonicalScalar(_ s: ArraySlice<UInt8>) -> Bool {
        lessThan(s, groupOrder)
    }

    /// y < p (the low 255 bits), and not x = 0 with the sign bit set (y = 1 or y = p − 1 with bit 255).
    static func isCanonicalPoint(_ encoding: some Collection<UInt8>) -> Bool {
        var y = Array(encoding)
        let signBit = y[31] & 0x80 != 0
        y[31] &= 0x7f
        guard lessThan(y[...], fieldPrime) else { return false }
        if signBit && (y == identityY || y == minusOneY) { return false }
        return true
    }

    static func isSmallOrder(_ encoding: some Collection<UInt8>) -> Bool {
        smallOrderPoints.contains(Array(encoding))
    }

    /// Little-endian comparison of two 32-byte numbers: `a < b`.
    private static func lessThan(_ a: ArraySlice<UInt8>, _ b: [UInt8]) -> Bool {
        let a = Array(a)
        for index in stride(from: 31, through: 0, by: -1) where a[index] != b[index] {
            return a[index] < b[index]
        }
        return false
    }

    /// L, little-endian.
    private static let groupOrder: [UInt8] = hex("edd3f55c1a631258d69cf7a2def9de1400000000000000000000000000000010")
    /// p = 2^255 − 19, little-endian.
    private static let fieldPrime: [UInt8] = hex("edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f")
    private static let identityY: [UInt8] = hex("0100000000000000000000000000000000000000000000000000000000000000")
    private static let minusOneY: [UInt8] = hex("ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f")

    /// The canonical encodings of the eight points of small order (the torsion subgroup E[8]);
    /// each was decoded and multiplied out to check its order (1, 2, 4, 4, 8, 8, 8, 8).
    public static let smallOrderPoints: Set<[UInt8]> = [
        identityY,  // (0, 1), order 1
        minusOneY,  // (0, −1), order 2
        hex("0000000000000000000000000000000000000000000000000000000000000000"),  // (√−1, 0), order 4
        hex("0000000000000000000000000000000000000000000000000000000000000080"),  // (−√−1, 0), order 4
        hex("26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05"),  // order 8
        hex("26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85"),  // order 8
        hex("c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a"),  // order 8
        hex("c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa"),  // order 8
    ]

    private static func hex(_ text: StaticString) -> [UInt8] {
        let digits = Array(text.description.utf8)
        return stride(from: 0, to: digits.count, by: 2).map { index in
            func value(_ c: UInt8) -> UInt8 { c <= 57 ? c - 48 : c - 87 }
            return value(digits[index]) << 4 | value(digits[index + 1])
        }
    }
}
