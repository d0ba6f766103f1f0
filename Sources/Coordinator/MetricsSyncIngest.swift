import FleetProtocol
import Metrics

/// The metrics ``SyncIngest`` reports through swift-metrics (the executable bootstraps the
/// backend; tests pass their own factory).
///
/// | name | kind | dimensions |
/// |---|---|---|
/// | `signfleet_sync_items_total` | counter | `outcome`: `applied`, `duplicate`, `rejected`, `transaction_conflict`, `conflict`, `bad_signature`, or `gap` (items not reached because an earlier sequence is missing) |
/// | `signfleet_sync_ingest_duration_seconds` | timer (a Prometheus histogram) | — (one observation per push, verification and transaction included) |
public struct SyncIngestMetrics: Sendable {
    /// Label of the per-outcome item counter.
    public static let itemsLabel = "signfleet_sync_items_total"
    /// Label of the ingest latency timer.
    public static let durationLabel = "signfleet_sync_ingest_duration_seconds"

    let applied: Counter
    let duplicate: Counter
    let rejected: Counter
    let conflict: Counter
    let transactionConflict: Counter
    let badSignature: Counter
    let gap: Counter
    let duration: Metrics.Timer

    /// Creates the ingest metrics on `factory`.
    public init(factory: any MetricsFactory) {
        func items(_ outcome: String) -> Counter {
            Counter(label: Self.itemsLabel, dimensions: [("outcome", outcome)], factory: factory)
        }
        applied = items(SyncItemResult.Outcome.applied.rawValue)
        duplicate = items(SyncItemResult.Outcome.duplicate.rawValue)
        rejected = items(SyncItemResult.Outcome.rejected.rawValue)
        conflict = items(SyncItemResult.Outcome.conflict.rawValue)
        transactionConflict = items(SyncItemResult.Outcome.transactionConflict.rawValue)
        badSignature = items(SyncItemResult.Outcome.badSignature.rawValue)
        gap = items("gap")
        duration = Metrics.Timer(label: Self.durationLabel, factory: factory)
    }

    /// Counts the items of one answered push.
    func record(_ ack: SyncAck, pushed: Int) {
        for result in ack.results {
            switch result.outcome {
            case .applied: applied.increment()
            case .duplicate: duplicate.increment()
            case .rejected: rejected.increment()
            case .conflict: conflict.increment()
            case .transactionConflict: transactionConflict.increment()
            case .badSignature: badSignature.increment()
            }
        }
        if ack.status == .gap {
            gap.increment(by: max(0, pushed - ack.results.count))
        }
    }
}
