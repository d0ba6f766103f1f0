import Foundation

/// One device's history, indexed the ways the checker looks things up.
///
/// Per-envelope events carry `transaction` and/or `sequence`; an event with neither (a whole
/// sync pass, say) is counted but matches no envelope.
struct CheckedDeviceHistory: Sendable {
    /// `ok sign` / `ok decline`: the envelope was queued for sync on the device.
    var signed: [HistoryEvent] = []
    /// `ok sync`: the server acknowledged the envelope (applied or duplicate).
    var synced: [HistoryEvent] = []
    /// The launcher's `ok restore` of this device's store (a `restore_node` fault): when the copy
    /// put back was begun and when it was put back, in seconds since 1970.
    var restores: [(snapshot: Double, restored: Double)] = []
    private var signedByTransaction: [String: HistoryEvent] = [:]
    private var signedBySequence: [UInt64: HistoryEvent] = [:]
    private var syncedByTransaction: [String: HistoryEvent] = [:]
    private var syncedBySequence: [UInt64: HistoryEvent] = [:]

    mutating func add(_ event: HistoryEvent) {
        guard event.type == .ok else { return }
        switch event.op {
        case .sign, .decline:
            signed.append(event)
            // The first report of a signing is the one that counts.
            if let transaction = event.transaction, signedByTransaction[transaction] == nil { signedByTransaction[transaction] = event }
            if let sequence = event.sequence, signedBySequence[sequence] == nil { signedBySequence[sequence] = event }
        case .sync:
            synced.append(event)
            if let transaction = event.transaction { syncedByTransaction[transaction] = event }
            if let sequence = event.sequence { syncedBySequence[sequence] = event }
        case .restore:
            if event.process == "launcher", let snapshot = event.details?["snapshot"].flatMap(Double.init), snapshot <= event.time {
                restores.append((snapshot, event.time))
            }
        default:
            break
        }
    }

    /// The `ok sign` for an envelope, by transaction, else by sequence (when the event names no transaction).
    func signEvent(transaction: String, sequence: UInt64?) -> HistoryEvent? {
        if let event = signedByTransaction[transaction] { return event }
        if let sequence, let event = signedBySequence[sequence], event.transaction == nil { return event }
        return nil
    }

    /// The restore that took away what was signed at `time`: one whose copy was begun before it and
    /// put back after it.
    func restore(losing time: Double) -> (snapshot: Double, restored: Double)? {
        restores.first { $0.snapshot <= time && time <= $0.restored }
    }

    /// The last `ok sync` for an envelope, by transaction, else by sequence.
    func syncEvent(transaction: String, sequence: UInt64?) -> HistoryEvent? {
        if let event = syncedByTransaction[transaction] { return event }
        if let sequence, let event = syncedBySequence[sequence], event.transaction == nil { return event }
        return nil
    }
}

/// The run's history, read and indexed by device.
struct HistoryIndex: Sendable {
    var events: [HistoryEvent] = []
    var byDevice: [String: CheckedDeviceHistory] = [:]
    var truncatedFiles: [String] = []

    init(events: [HistoryEvent], truncatedFiles: [String]) {
        self.events = events
        self.truncatedFiles = truncatedFiles
        for event in events {
            guard let device = event.device else { continue }
            byDevice[device, default: CheckedDeviceHistory()].add(event)
        }
    }

    /// Invocations never completed (their process died first), by operation: pairs `invoke`s with
    /// completions per (process, device, operation), in order.
    func uncompletedInvocations() -> [HistoryEvent.Operation: Int] {
        struct Key: Hashable {
            var process: String
            var device: String?
            var op: HistoryEvent.Operation
        }
        var open: [Key: Int] = [:]
        for event in events {
            let key = Key(process: event.process, device: event.device, op: event.op)
            if event.type == .invoke {
                open[key, default: 0] += 1
            } else if let count = open[key], count > 0 {
                open[key] = count - 1
            }
        }
        var result: [HistoryEvent.Operation: Int] = [:]
        for (key, count) in open where count > 0 { result[key.op, default: 0] += count }
        return result
    }
}
