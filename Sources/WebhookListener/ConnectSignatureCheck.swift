import Crypto
import Foundation

/// Checks DocuSign Connect's HMAC signatures (docs/webhooks.md, "Signatures"): each
/// `X-DocuSign-Signature-N` is the base64 HMAC-SHA256 of the body's exact bytes keyed with the
/// UTF-8 bytes of one of the account's active secrets. During a rotation two keys are active and
/// a message carries one signature per key, so a listener that knows either accepts it.
public struct ConnectSignatureCheck: Sendable {
    private let keys: [SymmetricKey]

    /// - Parameter secrets: the secrets this listener knows (any order).
    public init(secrets: [String]) {
        keys = secrets.map { SymmetricKey(data: Data($0.utf8)) }
    }

    /// `signatures`: the values of the `X-DocuSign-Signature-N` headers, in any order.
    public func check(body: [UInt8], signatures: [String]) -> HMACCheck {
        guard !signatures.isEmpty else { return .unsigned }
        // At most one header's worth each: a SHA-256 MAC is 44 base64 characters.
        let presented = signatures.compactMap { $0.utf8.count <= 128 ? Data(base64Encoded: $0) : nil }
        guard !presented.isEmpty else { return .invalid }
        // The body is hashed once per key, whatever the number of headers; each comparison is
        // constant-time (swift-crypto's `==` between a MAC and bytes).
        for key in keys {
            let mac = HMAC<SHA256>.authenticationCode(for: body, using: key)
            if presented.contains(where: { mac == $0 }) { return .valid }
        }
        return .invalid
    }

    /// The signature header values of a request, by their names (`X-DocuSign-Signature-1` …, any
    /// case), in the order of their numbers; at most `limit` of them are read.
    public static func signatureHeaders(_ headers: [(name: String, value: String)], limit: Int = 16) -> [String] {
        let prefix = "x-docusign-signature-"
        var found: [(Int, String)] = []
        for (name, value) in headers {
            let lower = name.lowercased()
            guard lower.hasPrefix(prefix), let number = Int(lower.dropFirst(prefix.count)), number >= 1 else { continue }
            found.append((number, value))
            if found.count >= limit { break }
        }
        return found.sorted { $0.0 < $1.0 }.map(\.1)
    }
}
