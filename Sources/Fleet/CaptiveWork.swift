import Envelopes
import FleetProtocol
import Foundation

/// One envelope's embedded remote signers still to sign by captive signing on the device that
/// composed it (docs/fleet-devices.md, "Embedded remote signers").
///
/// It waits for the envelope's sync (`serverEnvelope` is `nil` until the coordinator has it);
/// then the device presents captive signing for each signer in routing order, while online.
struct CaptiveWork: Sendable, Hashable {
    struct Signer: Sendable, Hashable {
        var recipientId: String
        var clientUserId: String
    }

    /// The device-local envelope id.
    var localId: String
    var transaction: String
    /// The envelope's number on its device (its decisions: pen, handwriting seed).
    var number: Int
    /// The coordinator's envelope id, once synced.
    var serverEnvelope: String?
    /// Still to sign, in routing order.
    var signers: [Signer]
    /// Signers already presented (seeds each one's handwriting apart).
    var presented = 0
    /// Ceremonies of the current signer that ended in an error (a timeout, a dropped request).
    var errors = 0
    /// Found in the store after a restart, synced before it: which signers are still to sign is
    /// asked of the coordinator (`envelope.get`) before the first is presented, since the killed
    /// process may have completed some ceremonies without recording them.
    var restored = false
    /// Errors tolerated per signer before the envelope's remaining signers are given up.
    static let maxErrors = 5

    /// The envelope's embedded remote signers in routing order, or `nil` when it has none.
    init?(envelope: Envelope, localId: String, number: Int) {
        let embedded = envelope.recipients.filter { $0.type == .signer && $0.clientUserId != nil }
            .sorted { $0.routingOrder < $1.routingOrder }
        guard !embedded.isEmpty else { return nil }
        self.localId = localId
        self.transaction = envelope.transactionId
        self.number = number
        self.signers = embedded.compactMap { recipient in
            recipient.clientUserId.map { Signer(recipientId: recipient.recipientId, clientUserId: $0) }
        }
    }

    /// Keeps the signers the coordinator's copy of the envelope still needs; nil when nothing is
    /// left to sign (the envelope is no longer `sent` or `delivered`: completed, declined or voided).
    func remaining(on server: EnvelopeQueryReply) -> CaptiveWork? {
        let status = EnvelopeStatus(rawValue: server.status)
        guard status == .sent || status == .delivered else { return nil }
        let done = Set(server.recipients.filter { RecipientStatus(rawValue: $0.status)?.isDone == true }.map(\.recipientID))
        var work = self
        work.signers.removeAll { done.contains($0.recipientId) }
        work.presented += signers.count - work.signers.count
        work.restored = false
        return work.signers.isEmpty ? nil : work
    }

    /// The client user id of remote signer `n` (1, 2, …) of transaction `transaction`.
    static func clientUserId(transaction: String, remote n: Int) -> String {
        "\(transaction)-r\(n)"
    }
}

/// A captive signing ceremony that did not end within its deadline.
struct CaptiveDeadlineExceeded: Error, CustomStringConvertible {
    var seconds: Double
    var description: String { "captive signing did not end within \(seconds) s; it was abandoned" }
}

extension CaptiveWork {
    /// Runs `body`, cancelling it `seconds` later on the device's `clock`: a ceremony that hangs
    /// does not stop the device.
    /// - Throws: ``CaptiveDeadlineExceeded`` when the deadline cancelled it; `CancellationError`
    ///   when the caller was cancelled; otherwise what `body` throws.
    static func withDeadline<T: Sendable>(
        _ seconds: Double, on clock: any DeviceClock, _ body: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        let work = Task { try await body() }
        let timer = clock.schedule(at: clock.now + seconds) { work.cancel() }
        defer { timer.cancel() }
        do {
            return try await withTaskCancellationHandler { try await work.value } onCancel: { work.cancel() }
        } catch {
            if Task.isCancelled { throw CancellationError() }
            if work.isCancelled { throw CaptiveDeadlineExceeded(seconds: seconds) }
            throw error
        }
    }
}
