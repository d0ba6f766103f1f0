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
