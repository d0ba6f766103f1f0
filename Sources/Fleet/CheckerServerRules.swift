import Foundation

/// The server's own rows: each transaction and item once, in each device's order, verified.
extension CheckerAnalysis {
    /// The same (device, transaction) or (device, sequence) on more than one envelope row.
    mutating func checkDuplicates(_ server: ServerSnapshot) {
        var byTransaction: [DeviceTransaction: [ServerSnapshot.Envelope]] = [:]
        var bySequence: [DeviceSequence: [ServerSnapshot.Envelope]] = [:]
        for envelope in server.envelopes {
            byTransaction[DeviceTransaction(device: envelope.deviceID, transaction: envelope.transactionID), default: []].append(envelope)
            bySequence[DeviceSequence(device: envelope.deviceID, sequence: envelope.sequence), default: []].append(envelope)
        }
        let groups = (byTransaction.values.filter { $0.count > 1 }.map { ($0, "transaction \($0[0].transactionID)") }
            + bySequence.values.filter { $0.count > 1 }.map { ($0, "item \($0[0].sequence)") })
            .sorted { $0.0[0].position < $1.0[0].position }
        // A copied row repeats both its transaction and its sequence: report that set of rows once.
        var reported: Set<[Int]> = []
        for (rows, what) in groups {
            guard reported.insert(rows.map(\.position)).inserted else { continue }
            let first = rows[0]
            anomalies.append(CheckAnomaly(
                kind: .duplicate, device: first.deviceID, transaction: first.transactionID, sequence: first.sequence, serverEnvelope: first.id,
                message: "\(what) of device \(first.deviceID) is on the server \(rows.count) times: \(rows.map(\.id).joined(separator: ", "))",
                witness: CheckWitness(rows: rows.prefix(3).map { witnessRow($0, server) })))
        }
    }

    /// Per device, the server applied items in sequence order (the store's ingest order of
    /// envelopes and of results, as its snapshot lists them), and handled every sequence up to its
    /// last applied one.
    mutating func checkOrder(_ server: ServerSnapshot) {
        var previous: [String: ServerSnapshot.Envelope] = [:]
        var seen: Set<DeviceSequence> = []
        for envelope in server.envelopes {
            // A repeated item is a duplicate (reported there), not a reordering.
            guard seen.insert(DeviceSequence(device: envelope.deviceID, sequence: envelope.sequence)).inserted else { continue }
            defer { previous[envelope.deviceID] = envelope }
            guard let before = previous[envelope.deviceID], envelope.sequence < before.sequence else { continue }
            anomalies.append(CheckAnomaly(
                kind: .orderViolation, device: envelope.deviceID, transaction: envelope.transactionID, sequence: envelope.sequence,
                serverEnvelope: envelope.id,
                message: "the server applied item \(envelope.sequence) of device \(envelope.deviceID) after item \(before.sequence) (applied \(Self.ordinal(envelope.position)) of the server's envelopes, after the \(Self.ordinal(before.position)))",
                witness: CheckWitness(rows: [witnessRow(before, server, ordered: true), witnessRow(envelope, server, ordered: true)])))
        }

        var previousResult: [String: ServerSnapshot.SyncResult] = [:]
        var handled: [String: Set<UInt64>] = [:]
        var resultsBySequence: [DeviceSequence: ServerSnapshot.SyncResult] = [:]
        for result in server.syncResults {
            handled[result.deviceID, default: []].insert(result.sequence)
            resultsBySequence[DeviceSequence(device: result.deviceID, sequence: result.sequence)] = result
            defer { previousResult[result.deviceID] = result }
            guard let before = previousResult[result.deviceID], result.sequence < before.sequence else { continue }
            anomalies.append(CheckAnomaly(
                kind: .orderViolation, device: result.deviceID, sequence: result.sequence,
                message: "the server handled item \(result.sequence) of device \(result.deviceID) after item \(before.sequence)",
                witness: CheckWitness(rows: [witnessRow(before, server, ordered: true), witnessRow(result, server, ordered: true)])))
        }
        for device in server.devices.values.sorted(by: { $0.id < $1.id }) {
            let sequences = handled[device.id] ?? []
            let highest = max(device.lastAppliedSequence, sequences.max() ?? 0)
            guard highest > 0, UInt64(sequences.count) < highest else { continue }
            for range in Self.missingRanges(in: sequences, upTo: highest) {
                var rows = [witnessRow(device, server)]
                if let below = resultsBySequence[DeviceSequence(device: device.id, sequence: range.lowerBound &- 1)] { rows.append(witnessRow(below, server)) }
                rows.append(absentRow(store: server.store, table: "syncResult", [
                    "deviceID": device.id, "sequence": range.count == 1 ? "\(range.lowerBound)" : "\(range.lowerBound)-\(range.upperBound)",
                ]))
                if let above = resultsBySequence[DeviceSequence(device: device.id, sequence: range.upperBound + 1)] { rows.append(witnessRow(above, server)) }
                let items = range.count == 1 ? "item \(range.lowerBound)" : "items \(range.lowerBound)-\(range.upperBound)"
                anomalies.append(CheckAnomaly(
                    kind: .orderViolation, device: device.id, sequence: range.lowerBound,
                    message: "gap: the server never handled \(items) of device \(device.id), yet it handled items up to \(highest)",
                    witness: CheckWitness(rows: rows)))
            }
        }
    }

    /// 1st, 2nd, 3rd, 4th … 11th, 12th, 13th, 21st …
    static func ordinal(_ n: Int) -> String {
        let suffix = (11...13).contains(n % 100) ? "th" : [1: "st", 2: "nd", 3: "rd"][n % 10] ?? "th"
        return "\(n)\(suffix)"
    }

    static func missingRanges(in present: Set<UInt64>, upTo highest: UInt64) -> [ClosedRange<UInt64>] {
        var ranges: [ClosedRange<UInt64>] = []
        var start: UInt64?
        var sequence: UInt64 = 1
        while sequence <= highest {
            if present.contains(sequence) {
                if let open = start { ranges.append(open...(sequence - 1)) }
                start = nil
            } else if start == nil {
                start = sequence
            }
            sequence += 1
        }
        if let open = start { ranges.append(open...highest) }
        return ranges
    }

    /// Every server envelope verifies with its device's enrolled key (the ingest's rules, run
    /// again), and its payload is the one the device signed (same SHA-256 as the device's outbox item).
    mutating func checkSignatures(_ server: ServerSnapshot) {
        for envelope in server.envelopes {
            if let reason = envelope.verification {
                var rows = [witnessRow(envelope, server)]
                if let device = server.devices[envelope.deviceID] { rows.append(witnessRow(device, server)) }
                anomalies.append(CheckAnomaly(
                    kind: .invalidSignature, device: envelope.deviceID, transaction: envelope.transactionID, sequence: envelope.sequence,
                    serverEnvelope: envelope.id,
                    message: "server envelope \(envelope.id) (item \(envelope.sequence) of device \(envelope.deviceID)) does not verify: \(reason)",
                    witness: CheckWitness(rows: rows)))
                continue
            }
            guard let device = devices[envelope.deviceID], let item = device.outboxBySequence[envelope.sequence],
                item.transactionId == envelope.transactionID, item.payloadSHA256 != envelope.payloadSHA256
            else { continue }
            var serverRow = witnessRow(envelope, server)
            serverRow.fields["payloadSHA256"] = Self.hex(envelope.payloadSHA256)
            var deviceRow = witnessRow(item, device)
            deviceRow.fields["payloadSHA256"] = Self.hex(item.payloadSHA256)
            anomalies.append(CheckAnomaly(
                kind: .invalidSignature, device: envelope.deviceID, transaction: envelope.transactionID, sequence: envelope.sequence,
                serverEnvelope: envelope.id,
                message: "server envelope \(envelope.id) verifies, but its payload is not the one device \(envelope.deviceID) signed as item \(envelope.sequence)",
                witness: CheckWitness(rows: [serverRow, deviceRow])))
        }
    }

    /// The payload digest stored with each sync result is the digest of what the device signed as
    /// that item (its outbox item, while the device keeps it) and, for a result that names a server
    /// envelope, of that envelope's payload. The coordinator decides from that digest whether a
    /// later push of the sequence is an honest resend (`duplicate`) or a conflict, so a digest
    /// that is not the item's would turn a resend into a refusal, or a different payload into a
    /// `duplicate` that stores nothing.
    mutating func checkResultDigests(_ server: ServerSnapshot) {
        let envelopes = Dictionary(server.envelopes.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        for result in server.syncResults {
            guard let stored = result.payloadSHA256 else { continue }
            // What the device signed is the truth while its store keeps the item (a server envelope
            // whose payload differs from it is checkSignatures' finding); else the envelope named.
            var expected: (digest: [UInt8], what: String, row: WitnessRow)?
            if let device = devices[result.deviceID], let item = device.outboxBySequence[result.sequence] {
                var row = witnessRow(item, device)
                row.fields["payloadSHA256"] = Self.hex(item.payloadSHA256)
                expected = (item.payloadSHA256, "the payload device \(result.deviceID) signed as item \(result.sequence)", row)
            } else if let id = result.envelopeID, let envelope = envelopes[id], envelope.deviceID == result.deviceID,
                envelope.sequence == result.sequence
            {
                var row = witnessRow(envelope, server)
                row.fields["payloadSHA256"] = Self.hex(envelope.payloadSHA256)
                expected = (envelope.payloadSHA256, "server envelope \(id)'s payload", row)
            }
            guard let expected, expected.digest != stored else { continue }
            anomalies.append(CheckAnomaly(
                kind: .invalidSignature, device: result.deviceID, sequence: result.sequence, serverEnvelope: result.envelopeID,
                message: "the server's \(result.outcome) result for item \(result.sequence) of device \(result.deviceID) stores payload digest \(Self.hex(stored).prefix(16))…, not that of \(expected.what)",
                witness: CheckWitness(rows: [resultRow(result, stored, server), expected.row])))
        }
    }

    private func resultRow(_ result: ServerSnapshot.SyncResult, _ stored: [UInt8], _ server: ServerSnapshot) -> WitnessRow {
        var row = witnessRow(result, server)
        row.fields["payloadSHA256"] = Self.hex(stored)
        return row
    }

    static func hex(_ bytes: [UInt8]) -> String {
        bytes.map { String(format: "%02x", $0) }.joined()
    }
}
