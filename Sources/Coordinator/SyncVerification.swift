import Crypto
import DeviceNode
import FleetProtocol
import Foundation
import SignatureCapture

/// Which signatures ``SyncIngest`` checks before it applies an item (docs/sync.md, "Verification").
public enum IngestVerification: String, Sendable, Hashable, CaseIterable {
    /// The payload signature and every signature binding's own signature: two or more Ed25519
    /// verifications per envelope. The default.
    case everySignature = "every"
    /// The payload signature only. Every binding is still decoded and checked against its
    /// document's and ISO record's SHA-256; its own signature is not verified at ingest. The
    /// payload signature (same device key) already covers each binding's bytes and signature,
    /// so this skips a check only a device signing a broken binding could fail; it halves the
    /// Ed25519 work per envelope.
    case payloadSignature = "payload"
}

extension SyncIngest {
    struct Rejection: Error {
        var reason: String
        /// Whether the device is proven to have signed the item (its payload signature verifies
        /// against the enrolled key). Only a proven item may be recorded as the device's and
        /// advance its sequence; an unproven one may come from anybody (docs/sync.md, "Verification").
        var signedByDevice = true

        static func unproven(_ reason: String) -> Rejection { Rejection(reason: reason, signedByDevice: false) }
    }

    typealias Verdict = Result<SyncPayload, Rejection>

    /// The first value that occurs twice in `values`.
    static func firstRepeated(_ values: [String]) -> String? {
        var seen = Set<String>()
        return values.first { !seen.insert($0).inserted }
    }

    /// An item checked before the write transaction: its verdict, and the SHA-256 of its payload
    /// that its result row keeps (computed here, over the cores, not under the writer's lock).
    struct CheckedItem: Sendable {
        var verdict: Verdict
        var payloadDigest: Data

        init(_ item: SyncItem, device: EnrolledDevice, key: Curve25519.Signing.PublicKey?, verification: IngestVerification) {
            verdict = SyncIngest.verify(item, device: device, key: key, verification: verification)
            payloadDigest = Data(SHA256.hash(data: item.payload))
        }
    }

    /// Verifies `items`, spread over the machine's cores when there are several. Items at or
    /// below `appliedThrough` (the device's last applied sequence, read before) are already
    /// applied, so answered from stored results: they get no verdict and cost nothing.
    static func verifyAll(
        _ items: [SyncItem], device: EnrolledDevice, key: Curve25519.Signing.PublicKey?, appliedThrough: UInt64,
        verification: IngestVerification
    ) async -> [CheckedItem?] {
        let pending = items.indices.filter { items[$0].sequence > appliedThrough }
        let lanes = min(pending.count, max(1, ProcessInfo.processInfo.activeProcessorCount))
        var verdicts = [CheckedItem?](repeating: nil, count: items.count)
        if lanes <= 1 {
            for index in pending { verdicts[index] = CheckedItem(items[index], device: device, key: key, verification: verification) }
            return verdicts
        }
        // One child task per core, each taking every `lanes`-th pending item.
        return await withTaskGroup(of: [(Int, CheckedItem)].self) { group in
            for lane in 0..<lanes {
                group.addTask {
                    stride(from: lane, to: pending.count, by: lanes).map { position in
                        let index = pending[position]
                        return (index, CheckedItem(items[index], device: device, key: key, verification: verification))
                    }
                }
            }
            for await results in group {
                for (index, verdict) in results { verdicts[index] = verdict }
            }
            return verdicts
        }
    }

    /// Checks one item against the device's key: the payload signature, the payload's own
    /// claims, every document's hash, and every signature binding (its hashes always; its own
    /// signature under ``IngestVerification/everySignature``).
    static func verify(
        _ item: SyncItem, device: EnrolledDevice, key: Curve25519.Signing.PublicKey?, verification: IngestVerification
    ) -> Verdict {
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
            return .failure(Rejection(reason: "the payload is not a valid envelope: \(error)"))
        }
        guard payload.format == SyncPayload.currentFormat else {
            return .failure(Rejection(reason: "unknown payload format \"\(payload.format)\""))
        }
        guard payload.deviceId == device.id, payload.sequence == item.sequence, payload.transactionId == item.transactionID else {
            return .failure(
                Rejection(
                    reason: "the payload names device \(payload.deviceId), item \(payload.sequence), transaction \(payload.transactionId), but was pushed as device \(device.id), item \(item.sequence), transaction \(item.transactionID)"
                ))
        }
        // Ids the store keys rows by must be unique in the payload: two recipients with one id
        // passed every check and then failed the insert, as a retryable `internal` error on every
        // resend, so the device's later items could never apply (a poison item).
        if let repeated = Self.firstRepeated(payload.recipients.map(\.recipientId)) {
            return .failure(Rejection(reason: "two recipients share the recipientId \"\(repeated)\""))
        }
        if let repeated = Self.firstRepeated(payload.documents.map(\.documentId)) {
            return .failure(Rejection(reason: "two documents share the documentId \"\(repeated)\""))
        }
        // Each document is hashed once; bindings are compared with the checked hash.
        var documents: [String: PayloadDocument] = [:]
        for document in payload.documents {
            guard Array(SHA256.hash(data: document.pdf)) == document.sha256 else {
                return .failure(Rejection(reason: "document \(document.documentId): its bytes do not match its SHA-256"))
            }
            documents[document.documentId] = document
        }
        for signature in payload.signatures {
            guard let document = documents[signature.documentId] else {
                return .failure(Rejection(reason: "signature for tab \(signature.tabIndex) names unknown document \(signature.documentId)"))
            }
            guard let binding = try? SignatureBinding(canonicalBytes: signature.binding) else {
                return .failure(Rejection(reason: "signature for tab \(signature.tabIndex): the binding is unreadable"))
            }
            guard binding.documentSHA256 == document.sha256, Array(SHA256.hash(data: signature.isoRecord)) == binding.isoSHA256 else {
                return .failure(
                    Rejection(reason: "signature for tab \(signature.tabIndex): the binding does not match document \(document.documentId) or its ISO record"))
            }
            // The binding decoded strictly (exact lengths, no trailing bytes), so its bytes are its
            // canonical encoding: verify over them as received rather than re-encoding.
            guard verification == .payloadSignature || StrictEd25519.isValid(signature.bindingSignature, for: signature.binding, key: key) else {
                return .failure(Rejection(reason: "signature for tab \(signature.tabIndex): the binding's device signature does not verify"))
            }
        }
        return .success(payload)
    }
}
