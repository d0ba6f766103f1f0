import DeviceNode
import FleetProtocol

/// One outbox item as the end-of-run audit reads it from a device's store.
public struct AuditOutboxItem: Sendable, Hashable {
    public var sequence: UInt64
    public var transactionID: String
    public var status: OutboxStatus
    /// The coordinator's answer the device recorded (nil while pending).
    public var outcome: SyncReceipt.Outcome?
    public var serverEnvelopeID: String?

    public init(
        sequence: UInt64, transactionID: String, status: OutboxStatus, outcome: SyncReceipt.Outcome? = nil, serverEnvelopeID: String? = nil
    ) {
        self.sequence = sequence
        self.transactionID = transactionID
        self.status = status
        self.outcome = outcome
        self.serverEnvelopeID = serverEnvelopeID
    }

    public init(_ item: OutboxItem) {
        self.init(
            sequence: item.sequence, transactionID: item.envelope.transactionId, status: item.status, outcome: item.receipt?.outcome,
            serverEnvelopeID: item.receipt?.serverEnvelopeId)
    }

    /// The device recorded that the coordinator applied it (now or by an earlier push).
    var acknowledged: Bool { status == .synced && (outcome == .applied || outcome == .duplicate) }
}

/// Both sides of one virtual device at the end of a run: the audit's input.
public struct DeviceAuditInput: Sendable, Hashable {
    public var deviceID: String
    /// The device's outbox, in the order its store lists it (sequence order).
    public var outbox: [AuditOutboxItem]
    /// Sequences whose ceremonies the workload saw acknowledged (`syncOne` returned them applied).
    public var acknowledgedInRun: [UInt64]
    /// What the coordinator holds for the device (`sync.results`), in the order it listed them.
    public var coordinator: [SyncStoredResult]
    /// The coordinator's last applied sequence for the device.
    public var coordinatorLastApplied: UInt64

    public init(
        deviceID: String, outbox: [AuditOutboxItem], acknowledgedInRun: [UInt64], coordinator: [SyncStoredResult],
        coordinatorLastApplied: UInt64
    ) {
        self.deviceID = deviceID
        self.outbox = outbox
        self.acknowledgedInRun = acknowledgedInRun
        self.coordinator = coordinator
        self.coordinatorLastApplied = coordinatorLastApplied
    }
}

/// One finding of the audit, with its witness: the device, the sequence, what each side holds.
public struct AuditAnomaly: Sendable, Hashable, Codable {
    public enum Kind: String, Sendable, Hashable, Codable, CaseIterable {
        /// Acknowledged to the device (or seen acknowledged by the workload) but absent on the
        /// coordinator; or held by the coordinator for a sequence the device has no item for.
        case lost
        /// One transaction applied twice, one sequence answered twice, an item the coordinator
        /// answered as a duplicate of another item, or a `duplicate` receipt for an item whose
        /// transaction the coordinator never applied.
        case duplicated
        /// Sequences out of order or with gaps, on either side, or a transaction at another
        /// sequence on the coordinator than on the device.
        case reordered
        /// Envelope id, transaction id or outcome differ between the two sides.
        case mismatched
        /// Committed on the device, never acknowledged: its ceremony failed or was cut off.
        /// Reported, not a failure by itself.
        case unsynced

        /// Whether finding one fails the audit.
        public var isFailure: Bool { self != .unsynced }
    }

    public var kind: Kind
    public var device: String
    public var sequence: UInt64?
    /// What the device holds.
    public var deviceHolds: String
    /// What the coordinator holds.
    public var coordinatorHolds: String

    public init(kind: Kind, device: String, sequence: UInt64?, deviceHolds: String, coordinatorHolds: String) {
        self.kind = kind
        self.device = device
        self.sequence = sequence
        self.deviceHolds = deviceHolds
        self.coordinatorHolds = coordinatorHolds
    }

    /// `lost  load-1 #7  device: … | coordinator: …`
    public var line: String {
        "\(kind.rawValue)  \(device)\(sequence.map { " #\($0)" } ?? "")  device: \(deviceHolds)  |  coordinator: \(coordinatorHolds)"
    }
}

/// What the audit found for one device.
public struct DeviceAuditResult: Sendable, Hashable {
    public var deviceID: String
    /// Outbox items compared (distinct sequences the device holds).
    public var itemsChecked: Int
    public var acknowledged: Int
    public var rejected: Int
    public var anomalies: [AuditAnomaly]
}
