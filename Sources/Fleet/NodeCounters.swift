import Foundation
import Synchronization

/// Counters shared by every device of one node process, read for the `stats` line.
///
/// Devices add to them as things happen; ``snapshot(time:devices:)`` sums them and takes the
/// sync-ack latencies recorded since the previous snapshot (the interval's percentiles).
public final class NodeCounters: Sendable {
    public enum Counter: Sendable {
        case composed, signed, cancelled, declined, synced, syncFailures
        /// Captive signing ceremonies that ended with `signing_complete`.
        case captive
    }

    private struct Totals {
        var online = 0
        var composed = 0
        var signed = 0
        var cancelled = 0
        var declined = 0
        var synced = 0
        var pending = 0
        var syncFailures = 0
        var captive = 0
        var latencies: [Double] = []
    }

    /// Latencies kept per interval at most (the oldest are dropped beyond it).
    static let maxLatencies = 100_000
    private let totals = Mutex(Totals())

    public init() {}

    public func add(_ counter: Counter, _ amount: Int = 1) {
        totals.withLock { totals in
            switch counter {
            case .composed: totals.composed += amount
            case .signed: totals.signed += amount
            case .cancelled: totals.cancelled += amount
            case .declined: totals.declined += amount
            case .synced: totals.synced += amount
            case .syncFailures: totals.syncFailures += amount
            case .captive: totals.captive += amount
            }
        }
    }

    /// Outbox items waiting for an acknowledgement (+1 queued, -1 settled).
    public func addPending(_ amount: Int) {
        totals.withLock { $0.pending += amount }
    }

    public func addOnline(_ amount: Int) {
        totals.withLock { $0.online += amount }
    }

    /// One item's time from push to acknowledgement, in seconds.
    public func recordSyncAck(_ seconds: Double) {
        totals.withLock { totals in
            if totals.latencies.count < Self.maxLatencies { totals.latencies.append(seconds) }
        }
    }

    /// The totals now, with the percentiles of the latencies recorded since the last snapshot.
    public func snapshot(time: Double, devices: Int) -> NodeStats {
        let (t, latencies) = totals.withLock { totals in
            defer { totals.latencies.removeAll(keepingCapacity: true) }
            return (totals, totals.latencies)
        }
        let sorted = latencies.sorted()
        return NodeStats(
            time: time, devices: devices, online: t.online, offline: devices - t.online, composed: t.composed,
            signed: t.signed, cancelled: t.cancelled, declined: t.declined, synced: t.synced, pending: t.pending,
            syncFailures: t.syncFailures, syncAckP50: Self.percentile(sorted, 0.50), syncAckP99: Self.percentile(sorted, 0.99),
            captive: t.captive)
    }

    /// Nearest-rank percentile of sorted values (nil when empty).
    static func percentile(_ sorted: [Double], _ p: Double) -> Double? {
        guard !sorted.isEmpty else { return nil }
        let rank = Int((p * Double(sorted.count)).rounded(.up))
        return sorted[min(sorted.count, max(1, rank)) - 1]
    }
}
