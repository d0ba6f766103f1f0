import Foundation

/// Is every envelope a device signed on the server, and does every receipt name a real one?
/// Reports lost, unsynced, receipt-without-server-record and device-data-loss anomalies.
extension CheckerAnalysis {
    struct DeviceSequence: Hashable {
        var device: String
        var sequence: UInt64
    }

    mutating func checkPresence(_ server: ServerSnapshot) {
        let serverIDs = Set(server.envelopes.map(\.id))
        var byDeviceTransaction: [DeviceTransaction: [ServerSnapshot.Envelope]] = [:]
        var byTransaction: [String: [ServerSnapshot.Envelope]] = [:]
        var byDevice: [String: [ServerSnapshot.Envelope]] = [:]
        for envelope in server.envelopes {
            byDevice[envelope.deviceID, default: []].append(envelope)
            byDeviceTransaction[DeviceTransaction(device: envelope.deviceID, transaction: envelope.transactionID), default: []].append(envelope)
            byTransaction[envelope.transactionID, default: []].append(envelope)
        }
        var results: [DeviceSequence: ServerSnapshot.SyncResult] = [:]
        for result in server.syncResults where results[DeviceSequence(device: result.deviceID, sequence: result.sequence)] == nil {
            results[DeviceSequence(device: result.deviceID, sequence: result.sequence)] = result
        }
        var receiptsReported: Set<DeviceTransaction> = []

        for device in devices.values.sorted(by: { $0.deviceID < $1.deviceID }) {
            let d = device.deviceID
            let deviceHistory = history.byDevice[d] ?? CheckedDeviceHistory()
            for item in device.outbox {
                let key = DeviceTransaction(device: d, transaction: item.transactionId)
                // Only this device's row of this envelope counts: the same transaction from another
                // device, or from this device under another local envelope id (a store that went
                // back in time and counted its ids again), is another envelope, and a receipt
                // naming it would hide that this one is not on the server.
                let sameTransaction = byDeviceTransaction[key] ?? []
                let rows = sameTransaction.filter { $0.localEnvelopeID == item.envelopeId }
                let elsewhere = rows.isEmpty ? (sameTransaction.first ?? (byTransaction[item.transactionId] ?? []).first) : nil
                let signEvent = deviceHistory.signEvent(transaction: item.transactionId, sequence: item.sequence)
                let syncEvent = deviceHistory.syncEvent(transaction: item.transactionId, sequence: item.sequence)
                let result = results[DeviceSequence(device: d, sequence: item.sequence)]
                if !rows.isEmpty {
                    if reportReceiptNamingMissing(
                        device: device, item: item, rows: rows, syncEvent: syncEvent, result: result, serverIDs: serverIDs, server: server)
                    {
                        receiptsReported.insert(key)
                    }
                    // A store restored from a copy older than the envelope's signing (`restore_node`)
                    // lets the device sign it again and queue it under a new number; the server
                    // answers that push `duplicate` of the envelope it holds (docs/sync.md). Nothing
                    // is out of order: the server kept the first signing.
                    let signedAgainAfterRestore = signEvent.map { deviceHistory.restore(losing: $0.time) != nil } ?? false
                    if let own = rows.first(where: { $0.deviceID == d }), own.sequence != item.sequence, !signedAgainAfterRestore {
                        anomalies.append(CheckAnomaly(
                            kind: .orderViolation, device: d, transaction: item.transactionId, sequence: item.sequence, serverEnvelope: own.id,
                            message: "transaction \(item.transactionId) is item \(item.sequence) on device \(d) but item \(own.sequence) on the server",
                            witness: CheckWitness(rows: [witnessRow(item, device), witnessRow(own, server)])))
                    }
                    continue
                }
                let evidence = CheckWitness(
                    events: [signEvent, syncEvent].compactMap { $0 },
                    rows: [witnessRow(item, device)] + (result.map { [witnessRow($0, server)] } ?? [])
                        + [absentRow(store: server.store, table: "envelope", ["deviceID": d, "transactionID": item.transactionId])]
                        + (elsewhere.map { [witnessRow($0, server)] } ?? []))
                let other = elsewhere.map { row in
                    row.deviceID == d
                        ? " (only this device's other envelope \(row.localEnvelopeID), server envelope \(row.id), item \(row.sequence), has that transaction)"
                        : " (only device \(row.deviceID)'s envelope \(row.id) has that transaction)"
                } ?? ""
                let serverApplied = result.map { $0.outcome != "rejected" } ?? false
                switch item.status {
                case "synced":
                    reportLost(device: d, item: item, evidence, "device \(d) holds a receipt (\(item.outcome ?? "?"), server envelope \(item.serverEnvelopeId ?? "?")) for item \(item.sequence), but the server has no envelope for transaction \(item.transactionId)\(other)")
                case "rejected":
                    if serverApplied {
                        reportLost(device: d, item: item, evidence, "the server recorded item \(item.sequence) of device \(d) as \(result?.outcome ?? "") but has no envelope for transaction \(item.transactionId)")
                    }
                default:
                    if let syncEvent {
                        reportLost(device: d, item: item, evidence, "the history has ok sync for item \(item.sequence) of device \(d) at \(syncEvent.time), but the server has no envelope for transaction \(item.transactionId)\(other)")
                    } else if serverApplied {
                        reportLost(device: d, item: item, evidence, "the server recorded item \(item.sequence) of device \(d) as \(result?.outcome ?? "") but has no envelope for transaction \(item.transactionId)")
                    } else {
                        let rejected = result.map { "; the server rejected it (\($0.reason ?? "no reason")) but the device never heard" } ?? ""
                        anomalies.append(CheckAnomaly(
                            kind: .unsynced, device: d, transaction: item.transactionId, sequence: item.sequence,
                            message: "item \(item.sequence) of device \(d) is still in its outbox after \(item.attempts) pushes and not on the server\(rejected): the run ended before it synced",
                            witness: evidence))
                    }
                }
            }
            checkReportedSignings(device: device, deviceHistory, byDeviceTransaction: byDeviceTransaction, server: server)
            checkJournalEvidence(device: device, byDeviceTransaction: byDeviceTransaction, server: server)
            for envelope in byDevice[d] ?? [] where !device.knows(transaction: envelope.transactionID) {
                let key = DeviceTransaction(device: d, transaction: envelope.transactionID)
                guard reportedMissing.insert(key).inserted else { continue }
                // Signed after the copy the store went back to, and synced before: on the server,
                // gone from the device with its store. Nothing was lost; the store's gap covers it.
                if let sign = deviceHistory.signEvent(transaction: envelope.transactionID, sequence: nil),
                    deviceHistory.restore(losing: sign.time) != nil
                {
                    continue
                }
                anomalies.append(CheckAnomaly(
                    kind: .deviceDataLoss, device: d, transaction: envelope.transactionID, sequence: envelope.sequence, serverEnvelope: envelope.id,
                    message: "the server holds item \(envelope.sequence) (transaction \(envelope.transactionID)) of device \(d), but the device's store has no trace of it\(Self.durabilityNote(device))",
                    witness: CheckWitness(rows: [
                        witnessRow(envelope, server),
                        absentRow(store: device.store, table: "outbox", ["transactionId": envelope.transactionID]),
                    ])))
            }
        }
        checkHistoryReceipts(server, serverIDs: serverIDs, alreadyReported: receiptsReported)
        checkServerReceipts(server, serverIDs: serverIDs, alreadyReported: receiptsReported)
    }

    /// What allowed a device store to lose commits, from the durability it was opened with.
    static func durabilityNote(_ device: DeviceSnapshot) -> String {
        switch device.durability {
        case "processCrash":
            return " (the store runs with durability processCrash, synchronous = NORMAL: a power loss or a lost disk write may drop its last commits)"
        case "powerLoss":
            return " (the store runs with durability powerLoss, synchronous = FULL: no crash loses a commit, so the store was restored, copied or edited)"
        default:
            return ""
        }
    }

    /// Journal kinds written only for an item in the outbox (with its sequence).
    static let outboxJournalKinds: Set<String> = ["queued", "syncStarted", "syncFailed", "syncCancelled", "renumbered", "synced", "rejected"]

    /// The device's own journal as evidence (what a run without a history still has): a transaction
    /// it journalled as queued for sync, or synced, that neither its outbox nor the server holds.
    private mutating func checkJournalEvidence(
        device: DeviceSnapshot, byDeviceTransaction: [DeviceTransaction: [ServerSnapshot.Envelope]], server: ServerSnapshot
    ) {
        let d = device.deviceID
        for (transaction, entry) in device.lastJournal.sorted(by: { $0.value.id < $1.value.id }) {
            guard Self.outboxJournalKinds.contains(entry.kind), !device.outboxTransactions.contains(transaction),
                device.dropped[transaction] == nil
            else { continue }
            let key = DeviceTransaction(device: d, transaction: transaction)
            guard (byDeviceTransaction[key] ?? []).isEmpty, reportedMissing.insert(key).inserted else { continue }
            let witness = CheckWitness(rows: [
                witnessRow(entry, device),
                absentRow(store: device.store, table: "outbox", ["transactionId": transaction]),
                absentRow(store: server.store, table: "envelope", ["deviceID": d, "transactionID": transaction]),
            ])
            let item = entry.sequence.map { "item \($0)" } ?? "an item"
            if entry.kind == "synced" {
                anomalies.append(CheckAnomaly(
                    kind: .lost, device: d, transaction: transaction, sequence: entry.sequence, serverEnvelope: entry.detail,
                    message: "device \(d)'s journal records \(item) (transaction \(transaction)) as synced (server envelope \(entry.detail ?? "?")), but neither its outbox nor the server holds it",
                    witness: witness))
            } else {
                anomalies.append(CheckAnomaly(
                    kind: .deviceDataLoss, device: d, transaction: transaction, sequence: entry.sequence,
                    message: "device \(d)'s journal records \(item) (transaction \(transaction)) as \(entry.kind), but its outbox has no such item and the server does not hold it",
                    witness: witness))
            }
        }
    }

    private mutating func reportLost(device: String, item: DeviceSnapshot.OutboxRow, _ witness: CheckWitness, _ message: String) {
        reportedMissing.insert(DeviceTransaction(device: device, transaction: item.transactionId))
        anomalies.append(CheckAnomaly(
            kind: .lost, device: device, transaction: item.transactionId, sequence: item.sequence, serverEnvelope: item.serverEnvelopeId,
            message: message, witness: witness))
    }

    /// For an envelope that is on the server: does any receipt for it name a server id that is not?
    private mutating func reportReceiptNamingMissing(
        device: DeviceSnapshot, item: DeviceSnapshot.OutboxRow, rows: [ServerSnapshot.Envelope], syncEvent: HistoryEvent?,
        result: ServerSnapshot.SyncResult?, serverIDs: Set<String>, server: ServerSnapshot
    ) -> Bool {
        var witness = CheckWitness(rows: rows.prefix(1).map { witnessRow($0, server) })
        var named: [String] = []
        if let id = item.serverEnvelopeId, !serverIDs.contains(id) {
            named.append("the device's receipt names \(id)")
            witness.rows.append(witnessRow(item, device))
        }
        if let syncEvent, let id = syncEvent.serverEnvelope, !serverIDs.contains(id) {
            named.append("the history's ok sync names \(id)")
            witness.events.append(syncEvent)
        }
        if let result, result.outcome != "rejected", let id = result.envelopeID, !serverIDs.contains(id) {
            named.append("the server's sync result names \(id)")
            witness.rows.append(witnessRow(result, server))
        }
        guard !named.isEmpty else { return false }
        anomalies.append(CheckAnomaly(
            kind: .receiptWithoutServerRecord, device: device.deviceID, transaction: item.transactionId, sequence: item.sequence,
            serverEnvelope: rows.first?.id,
            message: "transaction \(item.transactionId) is on the server as \(rows.first?.id ?? "?"), but \(named.joined(separator: " and ")), which does not exist",
            witness: witness))
        return true
    }

    /// History `ok sign` / `ok decline` whose envelope the device's store does not have.
    private mutating func checkReportedSignings(
        device: DeviceSnapshot, _ deviceHistory: CheckedDeviceHistory, byDeviceTransaction: [DeviceTransaction: [ServerSnapshot.Envelope]],
        server: ServerSnapshot
    ) {
        let d = device.deviceID
        let bySequence = device.outboxBySequence
        let outboxTransactions = device.outboxTransactions
        for event in deviceHistory.signed {
            let transaction: String
            if let named = event.transaction {
                if outboxTransactions.contains(named) { continue }
                transaction = named
            } else if let sequence = event.sequence {
                if bySequence[sequence] != nil { continue }
                transaction = "(item \(sequence))"
            } else {
                continue  // names no envelope
            }
            // Signed but not queued (a signer still to come), or dropped by a forced logout before any push.
            if device.envelopes[transaction] != nil { continue }
            if device.dropped[transaction] != nil {
                counts.perDevice[d, default: CheckCounts.Device()].droppedByLogout += 1
                continue
            }
            let key = DeviceTransaction(device: d, transaction: transaction)
            guard reportedMissing.insert(key).inserted else { continue }
            let rows = byDeviceTransaction[key] ?? []
            // Signed after the copy the store was restored from: the fault took it (with the
            // server's copy, when it had synced, still there). Counted, not an anomaly.
            if deviceHistory.restore(losing: event.time) != nil {
                if rows.isEmpty {
                    counts.perDevice[d, default: CheckCounts.Device()].lostWithRestoredStore += 1
                    counts.lostWithRestoredStores += 1
                }
                continue
            }
            let whereNow = rows.isEmpty ? "it is not on the server either" : "the server has it as \(rows[0].id)"
            var witnessRows = [absentRow(store: device.store, table: "outbox", event.transaction.map { ["transactionId": $0] } ?? ["sequence": "\(event.sequence ?? 0)"])]
            if let journal = device.lastJournal[transaction] { witnessRows.append(witnessRow(journal, device)) }
            witnessRows += rows.prefix(1).map { witnessRow($0, server) }
            anomalies.append(CheckAnomaly(
                kind: .deviceDataLoss, device: d, transaction: event.transaction, sequence: event.sequence, serverEnvelope: rows.first?.id,
                message: "the history has ok \(event.op.rawValue) for \(transaction) on device \(d) at \(event.time), but the device's store has no outbox item for it; \(whereNow)\(Self.durabilityNote(device))",
                witness: CheckWitness(events: [event], rows: witnessRows)))
        }
    }

    /// History `ok sync` naming a server envelope that does not exist, not already reported.
    private mutating func checkHistoryReceipts(_ server: ServerSnapshot, serverIDs: Set<String>, alreadyReported: Set<DeviceTransaction>) {
        var reported = alreadyReported
        for (d, deviceHistory) in history.byDevice.sorted(by: { $0.key < $1.key }) {
            for event in deviceHistory.synced {
                guard let id = event.serverEnvelope, !serverIDs.contains(id) else { continue }
                let key = DeviceTransaction(device: d, transaction: event.transaction ?? "(item \(event.sequence ?? 0))")
                guard !reportedMissing.contains(key), reported.insert(key).inserted else { continue }
                anomalies.append(CheckAnomaly(
                    kind: .receiptWithoutServerRecord, device: d, transaction: event.transaction, sequence: event.sequence, serverEnvelope: id,
                    message: "the history has ok sync for \(key.transaction) of device \(d) naming server envelope \(id), which does not exist",
                    witness: CheckWitness(events: [event], rows: [absentRow(store: server.store, table: "envelope", ["id": id])])))
            }
        }
    }

    /// The server's own sync results naming an envelope it does not have, not already reported.
    private mutating func checkServerReceipts(_ server: ServerSnapshot, serverIDs: Set<String>, alreadyReported: Set<DeviceTransaction>) {
        var reported = alreadyReported
        for result in server.syncResults where result.outcome != "rejected" {
            guard let id = result.envelopeID, !serverIDs.contains(id) else { continue }
            let transaction = devices[result.deviceID]?.outboxBySequence[result.sequence]?.transactionId
            let key = DeviceTransaction(device: result.deviceID, transaction: transaction ?? "(item \(result.sequence))")
            guard !reportedMissing.contains(key), reported.insert(key).inserted else { continue }
            anomalies.append(CheckAnomaly(
                kind: .receiptWithoutServerRecord, device: result.deviceID, transaction: transaction, sequence: result.sequence,
                serverEnvelope: id,
                message: "the server recorded item \(result.sequence) of device \(result.deviceID) as \(result.outcome) with envelope \(id), which it does not have",
                witness: CheckWitness(rows: [witnessRow(result, server), absentRow(store: server.store, table: "envelope", ["id": id])])))
        }
    }
}
