import Coordinator
import Foundation

/// The backend rule (docs/checker.md, "`backend-mismatch`"): what backend groups were told by the
/// REST API holds in the server's records. Each envelope a backend's `POST …/envelopes` answered
/// 201 for exists, as the coordinator's REST sender's; one whose signer signed in the page
/// (`event=signing_complete`) is `completed`; one whose signer declined is `declined`; one the
/// backend voided (`PUT …/envelopes/{id}` answered 200) is `voided`. The
/// envelopes themselves are judged by the server-side rules with the rest (``checkMissingStores``).
extension CheckerAnalysis {
    mutating func loadBackendEvents(_ inputs: Checker.Inputs) {
        guard let directory = inputs.backendDirectory else { return }
        do {
            let (events, truncated) = try BackendLog.read(directory: directory)
            backendEvents = events
            backendLog = display(directory) + "/node-*.jsonl"
            for file in truncated {
                notes.append("backend/\(file) ends in a partial line (its writer was killed mid-write); that event is skipped")
            }
        } catch {
            anomalies.append(CheckAnomaly(kind: .unreadableInput, message: "cannot read the backend groups' log: \(error)"))
        }
    }

    mutating func checkBackends(_ server: ServerSnapshot) {
        guard let log = backendLog else { return }
        let byID = Dictionary(server.envelopes.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        var tally: [BackendEvent.Step: (ok: Int, failed: Int)] = [:]
        for event in backendEvents {
            tally[event.step, default: (0, 0)].ok += event.ok ? 1 : 0
            tally[event.step, default: (0, 0)].failed += event.ok ? 0 : 1
            guard event.ok, let id = event.envelope else { continue }
            let expected: String?
            switch event.step {
            case .create: expected = nil
            case .sign: expected = "completed"
            case .decline: expected = "declined"
            case .void: expected = "voided"
            case .combined, .login: continue
            }
            func mismatch(_ message: String, rows: [WitnessRow]) {
                anomalies.append(CheckAnomaly(
                    kind: .backendMismatch, device: RESTRoutes.senderDeviceID, serverEnvelope: id, message: message,
                    witness: CheckWitness(rows: [WitnessRow(
                        store: log, table: "backend event",
                        fields: ["backend": event.backend, "step": event.step.rawValue, "envelope": id, "result": event.result, "time": "\(event.time)"])]
                        + rows)))
            }
            guard let envelope = byID[id], envelope.deviceID == RESTRoutes.senderDeviceID else {
                mismatch(
                    "backend \(event.backend) was answered \(event.step.rawValue) ok for envelope \(id), but the server has no envelope \(id) of its REST sender",
                    rows: [WitnessRow(store: server.store, table: "envelope", fields: ["id": id, "row": "none"])])
                continue
            }
            if let expected, envelope.status != expected {
                mismatch(
"backend \(event.backend) \(Self.told(event.step)) envelope \(id), but the server holds it \(envelope.status), not \(expected)",
                    rows: [witnessRow(envelope, server)])
            }
        }
        let created = Set(backendEvents.filter { $0.step == .create && $0.ok }.compactMap(\.envelope))
        let unlogged = server.envelopes.filter { $0.deviceID == RESTRoutes.senderDeviceID && !created.contains($0.id) }.count
        let parts = BackendEvent.Step.allCases.compactMap { step in tally[step].map { "\(step.rawValue) \($0.ok) ok, \($0.failed) failed" } }
        notes.append(
            "backend groups: \(parts.joined(separator: "; "))"
                + (unlogged > 0 ? "; \(unlogged) REST envelope\(unlogged == 1 ? "" : "s") no backend logged as created (an answer lost in flight, or another client)" : ""))
    }

    /// What a backend was told, in words.
    static func told(_ step: BackendEvent.Step) -> String {
        switch step {
        case .sign: "was told its signer signed"
        case .decline: "was told its signer declined"
        case .void: "was answered 200 voiding"
        case .create, .combined, .login: "was answered \(step.rawValue) ok for"
        }
    }
}
