import DeviceNode
import Foundation

/// A synthetic person who takes their time: waits the decided signing duration before
/// acting, as a signer reading and signing on the device would.
struct PacedSigner: SignerDriver {
    var signer: SyntheticSigner
    /// Seconds per recipient id.
    var durations: [String: Double]

    func act(in session: SigningSession) async throws -> SignerAction {
        if let seconds = durations[session.recipient.recipientId], seconds > 0 {
            try await Task.sleep(for: .milliseconds(Int64((seconds * 1000).rounded())))
        }
        return try await signer.act(in: session)
    }
}
