import Foundation

/// The launcher's use of the ``Checker``: check the finished run, write `check.json`,
/// and hand back the verdict with each anomaly's witness as text for the report.
public enum FleetCheck {
    @Sendable public static func run(_ run: RunDirectory) async -> CheckOutcome {
        let report: CheckReport
        do {
            report = try await Checker.check(run: run)
        } catch {
            return CheckOutcome(verdict: .unknown, notes: ["the checker could not run: \(error)"])
        }
        var notes: [String] = []
        do {
            try report.write(to: run.checkFile)
        } catch {
            notes.append("cannot write \(run.checkFile): \(error)")
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let anomalies = report.anomalies.map { anomaly in
            var lines = anomaly.witness.events.compactMap { try? encoder.encode($0) }.map { String(decoding: $0, as: UTF8.self) }
            lines += anomaly.witness.rows.map { row in
                "\(row.store) \(row.table): " + row.fields.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
            }
            return ReportAnomaly(kind: anomaly.kind.rawValue, message: anomaly.message, witness: lines.joined(separator: "\n"))
        }
        return CheckOutcome(verdict: report.verdict, anomalies: anomalies, notes: notes, counts: report.counts)
    }
}
