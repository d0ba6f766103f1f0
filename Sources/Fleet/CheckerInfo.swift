import Foundation

/// `info` events (the outcome was unknown when they happened, e.g. a sync whose reply timed
/// out) resolved against the stores once the run is over.
extension CheckerAnalysis {
    mutating func resolveInfo(_ server: ServerSnapshot) {
        let onServer = Set(server.envelopes.map { DeviceTransaction(device: $0.deviceID, transaction: $0.transactionID) })
        var tally: [String: Int] = [:]
        for event in history.events where event.type == .info {
            let (resolution, reason) = resolve(event, onServer: onServer)
            tally[resolution, default: 0] += 1
            resolvedInfo.append(ResolvedInfo(event: event, resolution: resolution, reason: reason))
        }
        guard !tally.isEmpty else { return }
        let parts = ["happened", "did-not-happen", "undecided"].compactMap { key in tally[key].map { "\($0) \(key)" } }
        notes.append("\(resolvedInfo.count) info outcomes resolved against the stores: \(parts.joined(separator: ", "))")
    }

    private func resolve(_ event: HistoryEvent, onServer: Set<DeviceTransaction>) -> (String, String) {
        guard let d = event.device else { return ("undecided", "the event names no device") }
        let device = devices[d]
        guard let transaction = event.transaction ?? event.sequence.flatMap({ device?.outboxBySequence[$0]?.transactionId }) else {
            return ("undecided", "the event names no envelope")
        }
        switch event.op {
        case .sync, .captive:
            return onServer.contains(DeviceTransaction(device: d, transaction: transaction))
                ? ("happened", "the server has transaction \(transaction) of device \(d)")
                : ("did-not-happen", "the server has no envelope for transaction \(transaction) of device \(d)")
        case .sign, .decline, .compose:
            guard let device else { return ("undecided", "no store for device \(d)") }
            return device.knows(transaction: transaction)
                ? ("happened", "device \(d)'s store has transaction \(transaction)")
                : ("did-not-happen", "device \(d)'s store has no trace of transaction \(transaction)")
        default:
            return ("undecided", "nothing in the stores records \(event.op.rawValue)")
        }
    }
}
