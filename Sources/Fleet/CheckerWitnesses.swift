import Foundation

/// Store rows as witness rows: only the columns that show an anomaly.
extension CheckerAnalysis {
    static func stamp(_ date: Date?) -> String {
        guard let date else { return "(null)" }
        return ISO8601DateFormatter.string(from: date, timeZone: .gmt, formatOptions: [.withInternetDateTime, .withFractionalSeconds])
    }

    /// An envelope row, named by its keys (id; device and sequence); with `ordered`, also its
    /// place in the store's ingest order (`ingestPosition`, 1-based), for order witnesses.
    func witnessRow(_ envelope: ServerSnapshot.Envelope, _ server: ServerSnapshot, ordered: Bool = false) -> WitnessRow {
        var fields = [
            "id": envelope.id, "deviceID": envelope.deviceID, "sequence": "\(envelope.sequence)",
            "transactionID": envelope.transactionID, "status": envelope.status, "createdAt": Self.stamp(envelope.createdAt),
        ]
        if ordered { fields["ingestPosition"] = "\(envelope.position)" }
        return WitnessRow(store: server.store, table: "envelope", fields: fields)
    }

    /// A result row, named by its key (account, device, sequence: device ids are per account);
    /// `ordered` as for envelopes.
    func witnessRow(_ result: ServerSnapshot.SyncResult, _ server: ServerSnapshot, ordered: Bool = false) -> WitnessRow {
        var fields = [
            "accountID": result.accountID, "deviceID": result.deviceID, "sequence": "\(result.sequence)", "outcome": result.outcome,
            "envelopeID": result.envelopeID ?? "(null)",
        ]
        if ordered { fields["ingestPosition"] = "\(result.position)" }
        if let reason = result.reason { fields["reason"] = reason }
        return WitnessRow(store: server.store, table: "syncResult", fields: fields)
    }

    func witnessRow(_ device: ServerSnapshot.Device, _ server: ServerSnapshot) -> WitnessRow {
        WitnessRow(store: server.store, table: "device", fields: ["id": device.id, "lastAppliedSequence": "\(device.lastAppliedSequence)"])
    }

    func witnessRow(_ recipient: ServerSnapshot.Recipient, _ server: ServerSnapshot) -> WitnessRow {
        WitnessRow(store: server.store, table: "envelopeRecipient", fields: [
            "envelopeID": recipient.envelopeID, "recipientID": recipient.recipientID, "type": recipient.type,
            "routingOrder": "\(recipient.routingOrder)", "status": recipient.status, "statusChangedAt": Self.stamp(recipient.statusChangedAt),
        ])
    }

    func witnessRow(_ item: DeviceSnapshot.OutboxRow, _ device: DeviceSnapshot) -> WitnessRow {
        var fields = [
            "sequence": "\(item.sequence)", "envelopeId": item.envelopeId, "transactionId": item.transactionId, "status": item.status,
            "attempts": "\(item.attempts)",
        ]
        if let outcome = item.outcome { fields["outcome"] = outcome }
        if let server = item.serverEnvelopeId { fields["serverEnvelopeId"] = server }
        if let reason = item.reason { fields["reason"] = reason }
        return WitnessRow(store: device.store, table: "outbox", fields: fields)
    }

    func witnessRow(_ entry: DeviceSnapshot.JournalRow, _ device: DeviceSnapshot) -> WitnessRow {
        var fields = ["id": "\(entry.id)", "envelopeId": entry.envelopeId, "transactionId": entry.transactionId, "kind": entry.kind, "state": entry.state]
        if let sequence = entry.sequence { fields["sequence"] = "\(sequence)" }
        if let detail = entry.detail { fields["detail"] = detail }
        return WitnessRow(store: device.store, table: "journal", fields: fields)
    }

    /// A row that is not there: the absence is the evidence.
    func absentRow(store: String, table: String, _ lookup: [String: String]) -> WitnessRow {
        let lookedUp = lookup.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        return WitnessRow(store: store, table: table, fields: ["(none)": "no row with " + lookedUp])
    }
}
