import Crypto
import SyncContract
import FleetProtocol
import Foundation
import SignatureCapture

extension SyncIngest {
    /// Verifies a stored envelope again with exactly the ingest's rules (payload signature,
    /// the payload's device / item / transaction claims, document hashes, every signature
    /// binding), for the fleet checker. Read-only: touches no store.
    ///
    /// - Returns: the decoded payload, or the reason it does not verify.
    public static func recheck(
        payload: [UInt8], signature: [UInt8], deviceID: String, sequence: UInt64, transactionID: String, publicKey: [UInt8]
    ) -> Result<SyncPayload, RecheckFailure> {
        let device = EnrolledDevice(
            id: deviceID, accountID: "", userID: "", publicKey: publicKey, enrolledAt: Date(timeIntervalSince1970: 0),
            lastAppliedSequence: 0)
        let item = SyncItem(sequence: sequence, transactionID: transactionID, payload: payload, signature: signature)
        return verify(
            item, device: device, key: try? StrictEd25519.publicKey(publicKey).get(),
            verification: .everySignature
        ).mapError { RecheckFailure(reason: $0.reason) }
    }

    /// Why a stored envelope does not verify.
    public struct RecheckFailure: Error, Sendable, Hashable {
        public var reason: String
    }
}
