import Crypto
import Foundation
import Testing

@testable import SignatureCapture

/// The strict Ed25519 rule (docs/protocol.md, "Strict Ed25519"), against the attacks it exists for.
@Suite struct StrictEd25519Tests {
    func problem(_ bytes: [UInt8]) -> StrictEd25519.KeyProblem? {
        if case .failure(let problem) = StrictEd25519.publicKey(bytes) { return problem }
        return nil
    }

    static let identity: [UInt8] = [0x01] + [UInt8](repeating: 0, count: 31)
    /// R = the identity point, S = 0: satisfies [S]B = R + [k]A for every message when A has small order.
    static let universalSignature: [UInt8] = identity + [UInt8](repeating: 0, count: 32)

    @Test func theIdentityKeyWithOneFixedSignatureVerifiesAnyMessageUnderPlainVerificationButNotStrictly() throws {
        // The attack, shown on swift-crypto's own verification: a key a peer may enroll.
        let plain = try Curve25519.Signing.PublicKey(rawRepresentation: Self.identity)
        let messages = [Array("pay Mallory".utf8), Array("anything at all".utf8)]
        let acceptedPlainly = messages.filter { plain.isValidSignature(Self.universalSignature, for: $0) }
        // Whatever swift-crypto's backend decides, the strict rule refuses key and signature.
        #expect(problem(Self.identity) == (.smallOrder))
        for message in messages {
            #expect(!StrictEd25519.isValid(Self.universalSignature, for: message, publicKey: Self.identity))
            #expect(!StrictEd25519.isValid(Self.universalSignature, for: message, key: plain))
        }
        // Record what the backend did, so a reader of the test log sees why the rule exists.
        print("swift-crypto plain verification accepted the universal forgery for \(acceptedPlainly.count) of \(messages.count) messages")
    }

    /// Whether each y (32 bytes, little-endian, sign bit clear) has a curve point, as Python's big
    /// integers answer it independently: x² = (y² − 1) / (d·y² + 1) mod p is a square (Euler's
    /// criterion), computed with `pow` on the same numbers.
    static let curveMembership: [(hex: String, onCurve: Bool)] = [
        ("0200000000000000000000000000000000000000000000000000000000000000", false),  // the issue's key
        ("0300000000000000000000000000000000000000000000000000000000000000", true),
        ("0700000000000000000000000000000000000000000000000000000000000000", false),
        ("0900000000000000000000000000000000000000000000000000000000000000", true),
        ("79f1fd0518bec66ca50405acb71aa74b9f8f3928095de8da5f6d46f67448c705", true),
        ("cb111065ee80694e3bb622b8678ee0c4789a7ad4b48ab528afa6bf3197ff1550", false),
        ("3e796dc9fbf031d05430c4953f45a60ae9b7acbbd82fe658f11963798759d771", true),
        ("aebb126fbdca5f38878f4099369b3599974e9809c7dfe2fd83e0e2f26dda0703", false),
        ("9fd620eab2cb3bcfbc974281fc6295ce154aa6284ecd94c10460736eb02ee62a", true),
        ("0c71fe91c1d0b8a8adf0abc48a1af117f5e5a8bc2a142b65ea8f28bbc98cb423", false),
        ("ebffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f", false),  // p − 2
        ("eaffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f", true),  // p − 3
        ("0000000000000000000000000000000000000000000000000000000000000040", false),  // 2^254
        ("0000000000000000ffffffffffffffffffffffffffffffffffffffffffffff7f", true),  // 2^255 − 2^64
        ("ffffffffffffffff000000000000000000000000000000000000000000000000", false),  // 2^64 − 1
    ]

    @Test func bytesThatAreNoCurvePointAreRefusedAsAKey() {
        for (hex, onCurve) in Self.curveMembership {
            let bytes = stride(from: 0, to: hex.count, by: 2).map { offset -> UInt8 in
                let start = hex.index(hex.startIndex, offsetBy: offset)
                return UInt8(hex[start..<hex.index(start, offsetBy: 2)], radix: 16)!
            }
            #expect(Ed25519Field.isCurvePoint(bytes) == onCurve, "\(hex)")
            var refusal: StrictEd25519.KeyProblem?
            if case .failure(let problem) = StrictEd25519.enrollableKey(bytes) { refusal = problem }
            #expect((refusal == .notOnCurve) == !onCurve, "\(hex): \(String(describing: refusal))")
        }
    }

    @Test func everyHonestKeyIsACurvePoint() {
        for _ in 0..<500 {
            let key = Array(Curve25519.Signing.PrivateKey().publicKey.rawRepresentation)
            guard case .success = StrictEd25519.enrollableKey(key) else {
                Issue.record("an honest key refused: \(key)")
                continue
            }
        }
    }

    @Test func everyPointOfSmallOrderIsRefusedAsAKey() {
        #expect(StrictEd25519.smallOrderPoints.count == 8)
        for point in StrictEd25519.smallOrderPoints {
            #expect(problem(point) == .smallOrder, "\(point)")
        }
    }

    @Test func nonCanonicalKeyEncodingsAreRefused() {
        // y = p (≡ 0) and y = p + 1 (≡ 1): values at or above the field prime.
        let p: [UInt8] = [0xed] + [UInt8](repeating: 0xff, count: 30) + [0x7f]
        var pPlusOne = p
        pPlusOne[0] = 0xee
        #expect(problem(p) == (.nonCanonical))
        #expect(problem(pPlusOne) == (.nonCanonical))
        // x = 0 with the sign bit set: (0, 1) and (0, −1) encoded with bit 255.
        var negativeZeroIdentity = Self.identity
        negativeZeroIdentity[31] |= 0x80
        #expect(problem(negativeZeroIdentity) == (.nonCanonical))
        #expect(problem([UInt8](repeating: 1, count: 31)) == (.wrongLength(31)))
    }

    @Test func anHonestKeyAndSignatureVerifyAndAnyChangeIsRefused() throws {
        let key = Curve25519.Signing.PrivateKey()
        let publicKey = Array(key.publicKey.rawRepresentation)
        let message = Array("envelope bytes".utf8)
        let signature = Array(try key.signature(for: message))
        #expect(try StrictEd25519.publicKey(publicKey).get().rawRepresentation == key.publicKey.rawRepresentation)
        #expect(StrictEd25519.isValid(signature, for: message, publicKey: publicKey))
        #expect(!StrictEd25519.isValid(signature, for: message + [0], publicKey: publicKey))
        #expect(!StrictEd25519.isValid(Array(signature.prefix(63)), for: message, publicKey: publicKey))
        var flipped = signature
        flipped[40] ^= 0x04
        #expect(!StrictEd25519.isValid(flipped, for: message, publicKey: publicKey))
    }

    @Test func aSignatureWhoseSIsNotReducedIsRefused() throws {
        // S + L is the same scalar mod L: a malleable copy of a valid signature, refused by §5.1.7.
        let key = Curve25519.Signing.PrivateKey()
        let message = Array("malleable".utf8)
        let signature = Array(try key.signature(for: message))
        let order: [UInt8] = [
            0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde, 0x14,
            0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10,
        ]
        var sum = [UInt8](repeating: 0, count: 32)
        var carry = 0
        for index in 0..<32 {
            let total = Int(signature[32 + index]) + Int(order[index]) + carry
            sum[index] = UInt8(total & 0xff)
            carry = total >> 8
        }
        #expect(carry == 0, "S + L fits in 256 bits for a reduced S")
        let malleated = Array(signature.prefix(32)) + sum
        #expect(!StrictEd25519.isCanonicalScalar(malleated[32..<64]))
        #expect(!StrictEd25519.isValid(malleated, for: message, publicKey: Array(key.publicKey.rawRepresentation)))
    }
}
