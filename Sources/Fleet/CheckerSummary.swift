import Foundation

/// The human summary `signfleet check` prints: verdict, counts, and the first anomalies with
/// their witnesses (everything is in `check.json`).
extension CheckReport {
    public func summary(maxAnomalies: Int = 10) -> String {
        var lines: [String] = []
        lines.append("verdict: \(verdict.rawValue) (exit \(verdict.exitCode))" + (run.map { " for \($0)" } ?? ""))
        lines.append(
            "devices \(counts.devices), signed \(counts.signed), acknowledged \(counts.acknowledged), pending \(counts.pending), rejected \(counts.rejected), server envelopes \(counts.serverEnvelopes), history events \(counts.historyEvents)"
        )
        if anomalies.isEmpty {
            lines.append("no anomalies")
        } else {
            var byKind: [CheckAnomaly.Kind: Int] = [:]
            for anomaly in anomalies { byKind[anomaly.kind, default: 0] += 1 }
            let tally = CheckAnomaly.Kind.allCases.compactMap { kind in byKind[kind].map { "\($0) \(kind.rawValue)" } }
            lines.append("anomalies: " + tally.joined(separator: ", "))
            for anomaly in anomalies.prefix(maxAnomalies) {
                lines.append("- \(anomaly.kind.rawValue): \(anomaly.message)")
                for event in anomaly.witness.events { lines.append("    history " + Self.describe(event)) }
                for row in anomaly.witness.rows { lines.append("    " + Self.describe(row)) }
            }
            if anomalies.count > maxAnomalies { lines.append("… and \(anomalies.count - maxAnomalies) more in check.json") }
        }
        for note in notes { lines.append("note: \(note)") }
        return lines.joined(separator: "\n")
    }

    static func describe(_ event: HistoryEvent) -> String {
        var parts = [String(format: "%.3f", event.time), event.process, event.type.rawValue, event.op.rawValue]
        if let device = event.device { parts.append("device=\(device)") }
        if let transaction = event.transaction { parts.append("transaction=\(transaction)") }
        if let sequence = event.sequence { parts.append("sequence=\(sequence)") }
        if let server = event.serverEnvelope { parts.append("serverEnvelope=\(server)") }
        if let error = event.error { parts.append("error=\"\(error)\"") }
        return parts.joined(separator: " ")
    }

    /// Leading columns first (ids, device, sequence), the rest by name.
    static func describe(_ row: WitnessRow) -> String {
        let leading = ["(none)", "ingestPosition", "id", "envelopeID", "deviceID", "sequence", "transactionID", "transactionId", "recipientID"]
        let keys = leading.filter { row.fields[$0] != nil } + row.fields.keys.filter { !leading.contains($0) }.sorted()
        let values = keys.map { key in key == "(none)" ? row.fields[key] ?? "" : "\(key)=\(row.fields[key] ?? "")" }
        return "\(row.store) \(row.table): " + values.joined(separator: " ")
    }
}
