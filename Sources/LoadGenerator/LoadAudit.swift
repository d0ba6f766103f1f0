import Foundation

/// The end-of-run integrity audit as `summary.json`, the printed lines and the HTML report
/// give it: every device's outbox compared with what the coordinator holds for it.
public struct LoadAudit: Sendable, Codable, Hashable {
    /// A device whose audit could not run (its store or the coordinator did not answer).
    public struct DeviceError: Sendable, Codable, Hashable {
        public var device: String
        public var error: String
    }

    /// Witnesses kept in the summary (the counts cover all).
    public static let maxWitnesses = 20

    public var devicesAudited: Int
    /// Outbox items compared, over all devices.
    public var itemsChecked: Int
    /// Items the devices hold as acknowledged (applied or duplicate).
    public var acknowledged: Int
    /// Items the coordinator rejected (ceremonies counted as `sync.rejected` errors).
    public var rejected: Int
    /// Anomalies per class: `lost`, `duplicated`, `reordered`, `mismatched`, `unsynced` (all present, 0 when none).
    public var counts: [String: Int]
    /// The first ``maxWitnesses`` anomalies, failures first.
    public var witnesses: [AuditAnomaly]
    public var errors: [DeviceError]
    /// Ceremonies that failed or were unfinished: each can leave at most one unacknowledged item.
    public var failedCeremonies: Int
    /// Seconds the audit took (after the run's clock stopped: not in any latency or throughput).
    public var seconds: Double
    /// No lost, duplicated, reordered or mismatched item, every device audited, and no more
    /// unsynced items than failed or unfinished ceremonies.
    public var passed: Bool

    public init(results: [DeviceAuditResult], errors: [DeviceError], failedCeremonies: Int, seconds: Double) {
        devicesAudited = results.count
        itemsChecked = results.reduce(0) { $0 + $1.itemsChecked }
        acknowledged = results.reduce(0) { $0 + $1.acknowledged }
        rejected = results.reduce(0) { $0 + $1.rejected }
        let all = results.flatMap(\.anomalies)
        var counts = Dictionary(uniqueKeysWithValues: AuditAnomaly.Kind.allCases.map { ($0.rawValue, 0) })
        for anomaly in all { counts[anomaly.kind.rawValue, default: 0] += 1 }
        self.counts = counts
        witnesses = Array((all.filter(\.kind.isFailure) + all.filter { !$0.kind.isFailure }).prefix(Self.maxWitnesses))
        self.errors = errors
        self.failedCeremonies = failedCeremonies
        self.seconds = seconds
        let unsynced = counts[AuditAnomaly.Kind.unsynced.rawValue] ?? 0
        passed = errors.isEmpty && all.allSatisfy { !$0.kind.isFailure } && unsynced <= failedCeremonies
    }

    public var unsynced: Int { counts[AuditAnomaly.Kind.unsynced.rawValue] ?? 0 }
    /// Lost, duplicated, reordered and mismatched items.
    public var failures: Int { AuditAnomaly.Kind.allCases.filter(\.isFailure).reduce(0) { $0 + (counts[$1.rawValue] ?? 0) } }

    /// What the unsynced count means for this run.
    public var unsyncedNote: String? {
        guard unsynced > 0 else { return nil }
        if unsynced <= failedCeremonies {
            return "\(unsynced) item(s) committed on devices were never acknowledged: their ceremonies failed or were cut off "
                + "(\(failedCeremonies) failed or unfinished), so the run was cut short for them; not a failure"
        }
        return "\(unsynced) item(s) were never acknowledged but only \(failedCeremonies) ceremonies failed or were unfinished: "
            + "items were left behind by ceremonies that reported success; the audit fails"
    }

    /// The printed lines.
    public var lines: [String] {
        let classes = AuditAnomaly.Kind.allCases.map { "\($0.rawValue) \(counts[$0.rawValue] ?? 0)" }.joined(separator: "  ")
        var lines = [
            "audit \(passed ? "PASS" : "FAIL")  \(devicesAudited) devices, \(itemsChecked) items checked (\(acknowledged) acknowledged, "
                + "\(rejected) rejected)  \(classes)  in \(String(format: "%.2f", seconds))s"
        ]
        for error in errors { lines.append("audit: device \(error.device) could not be audited: \(error.error)") }
        if let unsyncedNote { lines.append("audit: \(unsyncedNote)") }
        for witness in witnesses { lines.append("  \(witness.line)") }
        let total = failures + unsynced
        if total > witnesses.count { lines.append("  … and \(total - witnesses.count) more (counts above)") }
        return lines
    }
}
