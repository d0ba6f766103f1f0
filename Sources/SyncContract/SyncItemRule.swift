import Crypto
import FleetProtocol
import Foundation
import SignatureCapture

/// The rule that decides whether a sync item is its device's and valid: one pure function, shared by
/// the coordinator's ingest and its `recheck` (docs/sync-payload.md, section 6; docs/sync.md,
/// "Verification"). The fleet checker does not call it: it has its own implementation of the
/// documented rule, held to the same answers by a test (docs/checker.md, "The signature rule").
public enum SyncItemRule {
    /// Why an item fails the rule.
    public struct Failure: Error, Sendable, Hashable {
        /// For people.
        public var reason: String
        /// Whether the device is proven to have signed the item (its payload signature verifies
        /// with the enrolled key). Only a proven item may be recorded as the device's and use up its
        /// sequence number; an unproven one may come from anybody.
        public var signedByDevice: Bool

        public init(reason: String, signedByDevice: Bool = true) {
            self.reason = reason
            self.signedByDevice = signedByDevice
        }

        static func unproven(_ reason: String) -> Failure { Failure(reason: reason, signedByDevice: false) }
    }

    /// Checks one item pushed as `deviceID` against the device's enrolled `key` (docs/sync-payload.md,
    /// section 6): the payload signature, the payload's own claims, unique ids, every document's
    /// hash, and every signature binding (its hashes always; its own signature when
    /// `bindingSignatures`).
    public static func check(
        _ item: SyncItem, deviceID: String, key: Curve25519.Signing.PublicKey?, bindingSignatures: Bool = true
    ) -> Result<SyncPayload, Failure> {
        guard let key else {
            return .failure(.unproven("the device's enrolled key is unusable"))
        }
        guard StrictEd25519.isValid(item.signature, for: item.payload, key: key) else {
            return .failure(.unproven("the signature does not verify over the payload with the device's enrolled key"))
        }
        let payload: SyncPayload
        do {
            payload = try SyncPayload(canonicalBytes: item.payload)
        } catch {
            return .failure(Failure(reason: "the payload is not a valid envelope: \(error)"))
        }
        guard payload.format == SyncPayload.currentFormat else {
            return .failure(Failure(reason: "unknown payload format \"\(payload.format)\""))
        }
        guard payload.deviceId == deviceID, payload.sequence == item.sequence, payload.transactionId == item.transactionID else {
            return .failure(
                Failure(
                    reason: "the payload names device \(payload.deviceId), item \(payload.sequence), transaction \(payload.transactionId), but was pushed as device \(deviceID), item \(item.sequence), transaction \(item.transactionID)"
                ))
        }
        // Ids the store keys rows by must be unique in the payload: two recipients with one id
        // passed every check and then failed the insert, as a retryable `internal` error on every
        // resend, so the device's later items could never apply (a poison item).
        if let repeated = Self.firstRepeated(payload.recipients.map(\.recipientId)) {
            return .failure(Failure(reason: "two recipients share the recipientId \"\(repeated)\""))
        }
        if let repeated = Self.firstRepeated(payload.documents.map(\.documentId)) {
            return .failure(Failure(reason: "two documents share the documentId \"\(repeated)\""))
        }
        // Each document is hashed once; bindings are compared with the checked hash.
        var documents: [String: PayloadDocument] = [:]
        for document in payload.documents {
            guard Array(SHA256.hash(data: document.pdf)) == document.sha256 else {
                return .failure(Failure(reason: "document \(document.documentId): its bytes do not match its SHA-256"))
            }
            documents[document.documentId] = document
        }
        for signature in payload.signatures {
            guard let document = documents[signature.documentId] else {
                return .failure(Failure(reason: "signature for tab \(signature.tabIndex) names unknown document \(signature.documentId)"))
            }
            guard let binding = try? SignatureBinding(canonicalBytes: signature.binding) else {
                return .failure(Failure(reason: "signature for tab \(signature.tabIndex): the binding is unreadable"))
            }
            guard binding.documentSHA256 == document.sha256, Array(SHA256.hash(data: signature.isoRecord)) == binding.isoSHA256 else {
                return .failure(
                    Failure(reason: "signature for tab \(signature.tabIndex): the binding does not match document \(document.documentId) or its ISO record"))
            }
            // The binding decoded strictly (exact lengths, no trailing bytes), so its bytes are its
            // canonical encoding: verify over them as received rather than re-encoding.
            guard !bindingSignatures || StrictEd25519.isValid(signature.bindingSignature, for: signature.binding, key: key) else {
                return .failure(Failure(reason: "signature for tab \(signature.tabIndex): the binding's device signature does not verify"))
            }
        }
        return .success(payload)
    }

    /// The first value that occurs twice in `values`.
    static func firstRepeated(_ values: [String]) -> String? {
        var seen = Set<String>()
        return values.first { !seen.insert($0).inserted }
    }
}
