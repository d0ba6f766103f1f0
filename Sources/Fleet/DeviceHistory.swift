import Foundation

/// One device's view of its node's history file: fills in the process, the device and the time.
/// Without a writer (the `--envelopes` mode) nothing is recorded.
struct DeviceHistory: Sendable {
    let writer: HistoryWriter?
    let process: String
    let device: String
    /// Stamps each line (the device's own clock).
    let clock: any DeviceClock

    func record(
        _ type: HistoryEvent.Kind, _ op: HistoryEvent.Operation, envelope: String? = nil, transaction: String? = nil,
        sequence: UInt64? = nil, serverEnvelope: String? = nil, error: String? = nil, details: [String: String]? = nil
    ) throws {
        guard let writer else { return }
        try writer.append(
            HistoryEvent(
                time: clock.now, process: process, type: type, op: op, device: device, envelope: envelope,
                transaction: transaction, sequence: sequence, serverEnvelope: serverEnvelope, error: error, details: details))
    }
}
