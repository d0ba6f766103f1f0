import FleetProtocol

/// The end-of-run integrity audit of one device: a pure function of what both sides hold
/// (docs/load-testing.md, "Integrity audit").
public enum SyncAudit {
    public static func classify(_ input: DeviceAuditInput) -> DeviceAuditResult {
        var found: [AuditAnomaly] = []
        let device = input.deviceID
        func report(_ kind: AuditAnomaly.Kind, _ sequence: UInt64?, device deviceHolds: String, coordinator: String) {
            found.append(AuditAnomaly(kind: kind, device: device, sequence: sequence, deviceHolds: deviceHolds, coordinatorHolds: coordinator))
        }

        // The device's side: one item per sequence, increasing, gapless from 1, one per transaction.
        var items: [UInt64: AuditOutboxItem] = [:]
        var previous: UInt64 = 0
        var transactions: [String: UInt64] = [:]
        for item in input.outbox {
            if let first = items[item.sequence] {
                report(.duplicated, item.sequence, device: "two outbox items: \(describe(first)) and \(describe(item))", coordinator: "-")
                continue
            }
            if item.sequence <= previous {
                report(.reordered, item.sequence, device: "outbox lists #\(item.sequence) after #\(previous)", coordinator: "-")
            }
            previous = max(previous, item.sequence)
            items[item.sequence] = item
            if let other = transactions[item.transactionID] {
                report(.duplicated, item.sequence, device: "transaction \(item.transactionID) committed as #\(other) and #\(item.sequence)", coordinator: "-")
            } else {
                transactions[item.transactionID] = item.sequence
            }
        }
        for gap in gaps(in: items.keys, through: items.keys.max() ?? 0) {
            report(.reordered, gap.lowerBound, device: "outbox has no item \(range(gap)) below its last #\(items.keys.max() ?? 0)", coordinator: "-")
        }

        // The coordinator's side: one result per sequence, increasing, gapless up to its last applied,
        // one applied envelope per transaction.
        var results: [UInt64: SyncStoredResult] = [:]
        var listed: UInt64 = 0
        var appliedTransactions: [String: UInt64] = [:]
        var appliedEnvelopes: [String: UInt64] = [:]
        for result in input.coordinator {
            if let first = results[result.sequence] {
                report(.duplicated, result.sequence, device: items[result.sequence].map(describe) ?? "no item",
                       coordinator: "answered twice: \(describe(first)) and \(describe(result))")
                continue
            }
            if result.sequence <= listed {
                report(.reordered, result.sequence, device: items[result.sequence].map(describe) ?? "no item",
                       coordinator: "lists #\(result.sequence) after #\(listed)")
            }
            listed = max(listed, result.sequence)
            results[result.sequence] = result
            if result.sequence > input.coordinatorLastApplied {
                report(.reordered, result.sequence, device: items[result.sequence].map(describe) ?? "no item",
                       coordinator: "\(describe(result)) above its last applied #\(input.coordinatorLastApplied)")
            }
            if result.outcome == .duplicate {
                report(.duplicated, result.sequence, device: items[result.sequence].map(describe) ?? "no item",
                       coordinator: "\(describe(result)): its transaction had already made an envelope")
            }
            guard result.outcome == .applied else { continue }
            if let transaction = result.transactionID {
                if let other = appliedTransactions[transaction] {
                    report(.duplicated, result.sequence, device: items[result.sequence].map(describe) ?? "no item",
                           coordinator: "transaction \(transaction) applied as #\(other) and #\(result.sequence)")
                } else {
                    appliedTransactions[transaction] = result.sequence
                }
            }
            if let envelope = result.envelopeID {
                if let other = appliedEnvelopes[envelope] {
                    report(.duplicated, result.sequence, device: items[result.sequence].map(describe) ?? "no item",
                           coordinator: "envelope \(envelope) applied for #\(other) and #\(result.sequence)")
                } else {
                    appliedEnvelopes[envelope] = result.sequence
                }
            }
        }

        // Each device item against the coordinator's result for its sequence.
        let seenAcknowledged = Set(input.acknowledgedInRun)
        var acknowledged = 0, rejected = 0
        var lostReported: Set<UInt64> = []
        for sequence in items.keys.sorted() {
            guard let item = items[sequence] else { continue }
            let result = results[sequence]
            let mine = describe(item)
            if item.acknowledged {
                acknowledged += 1
                guard let result else {
                    report(.lost, sequence, device: mine, coordinator: "no result (last applied #\(input.coordinatorLastApplied))")
                    lostReported.insert(sequence)
                    continue
                }
                switch result.outcome {
                case .rejected, .conflict, .transactionConflict, .badSignature:
                    report(.mismatched, sequence, device: mine, coordinator: describe(result))
                case .duplicate:
                    break  // reported above as duplicated
                case .applied:
                    compareApplied(item, result, sequence: sequence, appliedTransactions: appliedTransactions, report: report)
                }
            } else if item.status == .rejected || item.outcome == .rejected || item.outcome == .transactionConflict {
                rejected += 1
                if let result {
                    let expected: SyncItemResult.Outcome = item.outcome == .transactionConflict ? .transactionConflict : .rejected
                    if result.outcome != expected { report(.mismatched, sequence, device: mine, coordinator: describe(result)) }
                } else {
                    report(.lost, sequence, device: mine, coordinator: "no result (last applied #\(input.coordinatorLastApplied))")
                    lostReported.insert(sequence)
                }
            } else if seenAcknowledged.contains(sequence) {
                // The ceremony saw its ack, yet the device's store no longer says so.
                report(.lost, sequence, device: "\(mine), though its ceremony saw it acknowledged",
                       coordinator: result.map(describe) ?? "no result")
                lostReported.insert(sequence)
            } else if let result, result.outcome == .applied, let transaction = result.transactionID, transaction != item.transactionID {
                report(.mismatched, sequence, device: mine, coordinator: describe(result))
            } else {
                report(.unsynced, sequence, device: mine,
                       coordinator: result.map { "\(describe($0)); the device never recorded the ack" } ?? "no result")
            }
        }
        for sequence in seenAcknowledged.subtracting(items.keys).sorted() {
            report(.lost, sequence, device: "no outbox item, though its ceremony saw it acknowledged",
                   coordinator: results[sequence].map(describe) ?? "no result")
            lostReported.insert(sequence)
        }
        for sequence in Set(results.keys).subtracting(items.keys).subtracting(lostReported).sorted() {
            guard let result = results[sequence] else { continue }
            report(.lost, sequence, device: "no outbox item #\(sequence)", coordinator: describe(result))
        }
        for gap in gaps(in: results.keys, through: input.coordinatorLastApplied) {
            // Missing results of items the device holds as acknowledged are already `lost`.
            let alreadyLost = UInt64(lostReported.filter { gap.contains($0) }.count)
            guard gap.upperBound - gap.lowerBound >= alreadyLost else { continue }
            report(.reordered, gap.lowerBound, device: items[gap.lowerBound].map(describe) ?? "no item",
                   coordinator: "no result for \(range(gap)) below its last applied #\(input.coordinatorLastApplied)")
        }
        return DeviceAuditResult(
            deviceID: device, itemsChecked: items.count, acknowledged: acknowledged, rejected: rejected, anomalies: found)
    }

    /// An acknowledged item against an `applied` result: same envelope, same transaction, same sequence.
    private static func compareApplied(
        _ item: AuditOutboxItem, _ result: SyncStoredResult, sequence: UInt64, appliedTransactions: [String: UInt64],
        report: (AuditAnomaly.Kind, UInt64?, _ device: String, _ coordinator: String) -> Void
    ) {
        let mine = describe(item)
        guard let transaction = result.transactionID else {
            report(.lost, sequence, mine, "\(describe(result)), but no such envelope")
            return
        }
        if transaction != item.transactionID {
            if item.outcome == .duplicate, appliedTransactions[item.transactionID] == nil {
                // Told "duplicate" for an item whose transaction the coordinator never applied.
                report(.duplicated, sequence, "\(mine), but its transaction was never applied", describe(result))
            } else if let other = appliedTransactions[item.transactionID], other != sequence {
                report(.reordered, sequence, mine, "transaction \(item.transactionID) at #\(other); #\(sequence) is \(transaction)")
            } else {
                report(.mismatched, sequence, mine, describe(result))
            }
        } else if let made = result.envelopeSequence, made != sequence {
            report(.reordered, sequence, mine, "\(describe(result)), made by item #\(made)")
        } else if result.envelopeID != item.serverEnvelopeID {
            report(.mismatched, sequence, mine, describe(result))
        }
    }

    /// The missing ranges of `1...last` among `present`.
    static func gaps(in present: some Collection<UInt64>, through last: UInt64) -> [ClosedRange<UInt64>] {
        var ranges: [ClosedRange<UInt64>] = []
        var expected: UInt64 = 1
        for sequence in present.sorted() where sequence >= expected && sequence <= last {
            if sequence > expected { ranges.append(expected...(sequence - 1)) }
            if sequence == UInt64.max { return ranges }
            expected = sequence + 1
        }
        if last >= expected { ranges.append(expected...last) }
        return ranges
    }

    static func range(_ range: ClosedRange<UInt64>) -> String {
        range.lowerBound == range.upperBound ? "#\(range.lowerBound)" : "#\(range.lowerBound)…#\(range.upperBound)"
    }

    static func describe(_ item: AuditOutboxItem) -> String {
        var text = "#\(item.sequence) \(item.transactionID) \(item.status.rawValue)"
        if let outcome = item.outcome { text += " \(outcome.rawValue)" }
        if let envelope = item.serverEnvelopeID { text += " \(envelope)" }
        return text
    }

    static func describe(_ result: SyncStoredResult) -> String {
        var text = "#\(result.sequence) \(result.outcome.rawValue)"
        if let envelope = result.envelopeID { text += " \(envelope)" }
        if let transaction = result.transactionID { text += " \(transaction)" }
        return text
    }
}
