import Foundation

/// Routing on the server (docs/sync.md, "After sync"): recipients act by ascending routing order;
/// the same order acts in parallel; carbon copies never block.
extension CheckerAnalysis {
    mutating func checkRouting(_ server: ServerSnapshot) {
        var envelopes: [String: ServerSnapshot.Envelope] = [:]
        for envelope in server.envelopes where envelopes[envelope.id] == nil { envelopes[envelope.id] = envelope }
        for (id, recipients) in server.recipients.sorted(by: { $0.key < $1.key }) {
            guard let envelope = envelopes[id], let violation = Self.routingViolation(status: envelope.status, recipients: recipients) else {
                continue
            }
            anomalies.append(CheckAnomaly(
                kind: .routingViolation, device: envelope.deviceID, transaction: envelope.transactionID, sequence: envelope.sequence,
                serverEnvelope: envelope.id, message: "envelope \(envelope.id): \(violation.message)",
                witness: CheckWitness(rows: [witnessRow(envelope, server)] + violation.recipients.map { witnessRow($0, server) })))
        }
    }

    struct RoutingViolation {
        var message: String
        /// The recipients that show it (the earlier one first).
        var recipients: [ServerSnapshot.Recipient]
    }

    private static func mustAct(_ recipient: ServerSnapshot.Recipient) -> Bool { recipient.type != "carbonCopy" }
    private static func isDone(_ recipient: ServerSnapshot.Recipient) -> Bool { recipient.status == "signed" || recipient.status == "completed" }
    /// Routing has not reached the recipient (a bounced notification counts as not reached).
    private static func untouched(_ recipient: ServerSnapshot.Recipient) -> Bool {
        recipient.status == "created" || recipient.status == "autoResponded"
    }

    /// The first rule the recipients break, if any:
    /// 1. nobody beyond the lowest routing order with an unfinished recipient who must act has been
    ///    reached (sent, delivered, signed, completed, declined);
    /// 2. a completed envelope has no unfinished recipient who must act;
    /// 3. finished recipients finished in routing order (a later order never finished before an earlier one).
    static func routingViolation(status: String, recipients: [ServerSnapshot.Recipient]) -> RoutingViolation? {
        let open = recipients.filter { mustAct($0) && !isDone($0) }
        if let blocker = open.min(by: { $0.routingOrder < $1.routingOrder }) {
            if let ahead = recipients.first(where: { $0.routingOrder > blocker.routingOrder && !untouched($0) }) {
                return RoutingViolation(
                    message: "recipient \(ahead.recipientID) at routing order \(ahead.routingOrder) is \(ahead.status) while recipient \(blocker.recipientID) at order \(blocker.routingOrder) is \(blocker.status)",
                    recipients: [blocker, ahead])
            }
            if status == "completed" {
                return RoutingViolation(
                    message: "the envelope is completed while recipient \(blocker.recipientID) at routing order \(blocker.routingOrder) is \(blocker.status)",
                    recipients: [blocker])
            }
        }
        let finished = recipients.filter { mustAct($0) && isDone($0) && $0.statusChangedAt != nil }
        for earlier in finished {
            for later in finished where later.routingOrder > earlier.routingOrder {
                guard let earlierTime = earlier.statusChangedAt, let laterTime = later.statusChangedAt, laterTime < earlierTime else { continue }
                return RoutingViolation(
                    message: "recipient \(later.recipientID) at routing order \(later.routingOrder) finished at \(stamp(laterTime)), before recipient \(earlier.recipientID) at order \(earlier.routingOrder) finished at \(stamp(earlierTime))",
                    recipients: [earlier, later])
            }
        }
        return nil
    }
}
