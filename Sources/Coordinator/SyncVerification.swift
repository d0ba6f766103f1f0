import Crypto
import SyncContract
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
    /// The contract's rule decides (``SyncItemRule``); its failure says whether the device is
    /// proven to have signed the item (docs/sync.md, "Verification").
    package typealias Verdict = Result<SyncPayload, SyncItemRule.Failure>


    /// An item checked before the write transaction: its verdict, and the SHA-256 of its payload
    /// that its result row keeps (computed here, over the cores, not under the writer's lock).
    package struct CheckedItem: Sendable {
        package var verdict: Verdict
        package var payloadDigest: Data

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

    /// Checks one item against the device's key with the contract's rule (``SyncItemRule``):
    /// binding signatures under ``IngestVerification/everySignature`` only.
    static func verify(
        _ item: SyncItem, device: EnrolledDevice, key: Curve25519.Signing.PublicKey?, verification: IngestVerification
    ) -> Verdict {
        SyncItemRule.check(item, deviceID: device.id, key: key, bindingSignatures: verification == .everySignature)
    }
}
