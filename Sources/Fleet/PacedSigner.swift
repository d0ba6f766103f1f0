import DeviceNode
import Foundation

/// A synthetic person who takes their time: waits the decided signing duration before
/// acting, as a signer reading and signing on the device would. The wait is on the device's
/// ``DeviceClock`` and runs in the signing task (no task of its own).
struct PacedSigner: SignerDriver {
    var signer: SyntheticSigner
    /// Seconds per recipient id.
    var durations: [String: Double]
    var clock: any DeviceClock = WallDeviceClock()

    func act(in session: SigningSession) async throws -> SignerAction {
        if let seconds = durations[session.recipient.recipientId], seconds > 0 {
            await DeviceWakeup().wait(until: clock.now + seconds, on: clock)
            try Task.checkCancellation()
        }
        return try await signer.act(in: session)
    }
}
