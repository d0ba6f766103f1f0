
/// Per-device totals of the envelopes the coordinator holds.
public struct DeviceEnvelopeSummary: Sendable, Hashable {
    public var deviceID: String
    public var envelopes: Int
    /// The device sequences the envelopes came from, in order.
    public var sequences: [UInt64]
    /// Items recorded as rejected.
    public var rejected: Int
    public var lastAppliedSequence: UInt64

    package init(deviceID: String, envelopes: Int, sequences: [UInt64], rejected: Int, lastAppliedSequence: UInt64) {
        self.deviceID = deviceID
        self.envelopes = envelopes
        self.sequences = sequences
        self.rejected = rejected
        self.lastAppliedSequence = lastAppliedSequence
    }
}

