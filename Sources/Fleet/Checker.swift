import Coordinator
import CoordinatorPostgres
import Foundation

/// Compares a finished run's histories and device stores with the coordinator's store and
/// reports what went wrong, each anomaly with a minimal witness (docs/checker.md).
///
/// Read-only: every store is opened read-only; nothing in the run directory changes except
/// `check.json`, which callers write with ``CheckReport/write(to:)``.
public enum Checker {
    /// Where the inputs are; ``Checker/check(run:)`` fills it from a run directory.
    public struct Inputs: Sendable {
        /// The coordinator's store: a SQLite file, or a `postgres://` URL (with `?schema=`).
        public var coordinatorStore: String
        public var deviceStores: [String]
        /// `history/` with one `<process>.jsonl` per process (preferred), …
        public var historyDirectory: String?
        /// … or the merged `history.jsonl` when the directory is absent.
        public var historyFile: String?
        /// Paths in witnesses are shown relative to this directory.
        public var root: String?
        /// `hostile/` of a run with hostile groups: their attempts (``HostileAttempt``).
        public var hostileDirectory: String?
        /// `backend/` of a run with backend groups: their REST ceremonies (``BackendEvent``).
        public var backendDirectory: String?

        public init(
            coordinatorStore: String, deviceStores: [String], historyDirectory: String? = nil, historyFile: String? = nil,
            root: String? = nil, hostileDirectory: String? = nil, backendDirectory: String? = nil
        ) {
            self.hostileDirectory = hostileDirectory
            self.backendDirectory = backendDirectory
            self.coordinatorStore = coordinatorStore
            self.deviceStores = deviceStores
            self.historyDirectory = historyDirectory
            self.historyFile = historyFile
            self.root = root
        }
    }

    /// Checks a finished run directory.
    /// The coordinator's store is `coordinator.sqlite`, or the PostgreSQL URL `coordinator.json`
    /// names (``RunDirectory/coordinatorStoreLocation``).
    /// - Throws: ``CheckerError/notARunDirectory(path:reason:)`` when `run` is not one (neither
    ///   `coordinator.sqlite` nor a PostgreSQL store in `coordinator.json`). Unreadable stores or
    ///   history are reported as ``CheckAnomaly/Kind/unreadableInput`` anomalies (verdict unknown), not thrown.
    public static func check(run: RunDirectory) async throws -> CheckReport {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: run.path, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw CheckerError.notARunDirectory(path: run.path, reason: "no such directory")
        }
        let store = run.coordinatorStoreLocation
        guard store != run.coordinatorStore || FileManager.default.fileExists(atPath: run.coordinatorStore) else {
            throw CheckerError.notARunDirectory(path: run.path, reason: "it has no coordinator.sqlite")
        }
        let names = (try? FileManager.default.contentsOfDirectory(atPath: run.devicesDirectory)) ?? []
        let stores = names.filter { $0.hasSuffix(".sqlite") }.sorted().map {
            URL(fileURLWithPath: run.devicesDirectory).appendingPathComponent($0).path
        }
        let manager = FileManager.default
        let inputs = Inputs(
            coordinatorStore: store, deviceStores: stores,
            historyDirectory: manager.fileExists(atPath: run.historyDirectory) ? run.historyDirectory : nil,
            historyFile: manager.fileExists(atPath: run.historyFile) ? run.historyFile : nil, root: run.path,
            hostileDirectory: manager.fileExists(atPath: run.hostileDirectory) ? run.hostileDirectory : nil,
            backendDirectory: manager.fileExists(atPath: run.backendDirectory) ? run.backendDirectory : nil)
        var report = await check(inputs)
        report.run = run.path
        return report
    }

    /// Checks explicit inputs (tests, or stores outside a run directory).
    public static func check(_ inputs: Inputs) async -> CheckReport {
        var analysis = CheckerAnalysis(root: inputs.root)
        await analysis.load(inputs)
        analysis.run()
        return analysis.report()
    }
}

/// One check in progress: the inputs as read, and what has been found so far.
struct CheckerAnalysis {
    let root: String?
    var server: ServerSnapshot?
    var devices: [String: DeviceSnapshot] = [:]
    var history = HistoryIndex(events: [], truncatedFiles: [])
    var anomalies: [CheckAnomaly] = []
    var counts = CheckCounts()
    var resolvedInfo: [ResolvedInfo] = []
    var notes: [String] = []
    /// (device, transaction) pairs already reported as lost / data loss, so one fault is reported once.
    var reportedMissing: Set<DeviceTransaction> = []
    /// Backend groups' REST ceremonies, by time (``BackendEvent``); where they were read from.
    var backendEvents: [BackendEvent] = []
    var backendLog: String?

    struct DeviceTransaction: Hashable {
        var device: String
        var transaction: String
    }

    init(root: String?) {
        self.root = root
    }

    /// `path` relative to the run directory, for witnesses.
    func display(_ path: String) -> String {
        if PostgresCoordinatorStore.isURL(path) { return PostgresCoordinatorStore.redacted(url: path) }
        guard let root else { return URL(fileURLWithPath: path).lastPathComponent }
        let base = URL(fileURLWithPath: root).standardizedFileURL.path
        let full = URL(fileURLWithPath: path).standardizedFileURL.path
        return full.hasPrefix(base + "/") ? String(full.dropFirst(base.count + 1)) : full
    }

    mutating func load(_ inputs: Checker.Inputs) async {
        do {
            server = try await ServerSnapshot.read(location: inputs.coordinatorStore, store: display(inputs.coordinatorStore))
        } catch {
            // A run's own PostgreSQL is stopped once the run is over (docs/scenarios.md, `store`).
            let ownCluster = inputs.root.map { FileManager.default.fileExists(atPath: $0 + "/postgres/data") } ?? false
            let hint = PostgresCoordinatorStore.isURL(inputs.coordinatorStore) && ownCluster
                ? " (a run's own PostgreSQL is stopped after the run: start it with scripts/postgres-cluster.sh resume <run>/postgres)" : ""
            anomalies.append(CheckAnomaly(
                kind: .unreadableInput, message: "cannot read the coordinator store \(display(inputs.coordinatorStore)): \(error)\(hint)"))
        }
        for path in inputs.deviceStores {
            do {
                let snapshot = try DeviceSnapshot.read(path: path, store: display(path))
                if let other = devices[snapshot.deviceID] {
                    anomalies.append(CheckAnomaly(
                        kind: .unreadableInput, device: snapshot.deviceID,
                        message: "two stores belong to device \(snapshot.deviceID): \(other.store) and \(snapshot.store); only the first is checked"))
                    continue
                }
                devices[snapshot.deviceID] = snapshot
            } catch {
                anomalies.append(CheckAnomaly(kind: .unreadableInput, message: "cannot read the device store \(display(path)): \(error)"))
            }
        }
        loadHistory(inputs)
        restrictToTheDevicesAccounts()
        loadHostileAttempts(inputs)
        loadBackendEvents(inputs)
    }

    /// Checks the accounts the device stores belong to (the account each logged in to, or else the
    /// one that enrolled its key): other accounts may use the same device ids (a rival account's
    /// squatters) and are none of this run's.
    private mutating func restrictToTheDevicesAccounts() {
        guard let full = server else { return }
        var accounts = Set<String>()
        for device in devices.values {
            if let account = device.accountID {
                accounts.insert(account)
            } else {
                accounts.formUnion(full.accounts(ofDevice: device.deviceID, publicKey: device.publicKey))
            }
        }
        guard !accounts.isEmpty else {
            let all = Set(full.allDevices.keys.map(\.account))
            if all.count > 1 {
                notes.append(
                    "no device store names its account, so every account was checked (\(all.sorted().joined(separator: ", "))); "
                        + "where two accounts use one device id, only the first account's is checked")
            }
            server = full.restricted(to: nil)
            return
        }
        let restricted = full.restricted(to: accounts)
        let others = Set(full.allDevices.keys.map(\.account)).subtracting(accounts)
        if !others.isEmpty {
            let otherDevices = full.allDevices.keys.filter { others.contains($0.account) }.count
            let otherEnvelopes = full.envelopes.filter { others.contains($0.accountID) }.count
            notes.append(
                "checked account \(accounts.sorted().joined(separator: ", ")) (the device stores' accounts); not checked: "
                    + "\(others.sorted().joined(separator: ", ")) with \(otherDevices) devices and \(otherEnvelopes) envelopes")
        }
        server = restricted
    }

    /// Every hostile attempt that got through is a `hostile-breach`.
    private mutating func loadHostileAttempts(_ inputs: Checker.Inputs) {
        guard let directory = inputs.hostileDirectory else { return }
        do {
            let (attempts, truncated) = try HostileLog.read(directory: directory)
            for file in truncated {
                notes.append("hostile/\(file) ends in a partial line (its writer was killed mid-write); that attempt is skipped")
            }
            let tally = HostileTally(attempts)
            notes.append("hostile groups made \(tally.attempts) attempts, \(tally.breaches) got through")
            for attempt in attempts where attempt.breach {
                anomalies.append(CheckAnomaly(
                    kind: .hostileBreach, device: attempt.target,
                    message: "attacker \(attempt.device) (\(attempt.behaviour.rawValue)) tried \(attempt.action) against \(attempt.target ?? "the coordinator") and got \(attempt.result)"
                        + (attempt.detail.map { ": \($0)" } ?? ""),
                    witness: CheckWitness(rows: [WitnessRow(
                        store: display(directory) + "/node-*.jsonl", table: "hostile attempt",
                        fields: ["device": attempt.device, "action": attempt.action, "result": attempt.result, "time": "\(attempt.time)"])])))
            }
        } catch {
            anomalies.append(CheckAnomaly(kind: .unreadableInput, message: "cannot read the hostile groups' log: \(error)"))
        }
    }

    private mutating func loadHistory(_ inputs: Checker.Inputs) {
        do {
            if let directory = inputs.historyDirectory {
                let merged = try HistoryReader.readMerged(directory: directory)
                history = HistoryIndex(events: merged.events, truncatedFiles: merged.truncatedFiles)
            } else if let file = inputs.historyFile {
                let contents = try HistoryReader.read(path: file)
                history = HistoryIndex(events: contents.events, truncatedFiles: contents.truncatedTail ? [display(file)] : [])
            } else {
                notes.append("no history: the stores were checked against each other only")
            }
        } catch {
            anomalies.append(CheckAnomaly(kind: .unreadableInput, message: "cannot read the history: \(error)"))
        }
        for file in history.truncatedFiles {
            notes.append("history \(file) ends in a partial line (its writer was killed mid-write); that event is skipped")
        }
    }

    mutating func run() {
        countInputs()
        guard let server else { return }
        checkMissingStores(server)
        checkPresence(server)
        checkDuplicates(server)
        checkOrder(server)
        checkSignatures(server)
        checkResultDigests(server)
        checkRouting(server)
        checkBackends(server)
        resolveInfo(server)
        noteUncompleted()
        noteRestoredStores()
    }

    /// `restore_node`: which devices' stores went back to an earlier copy, and what went with them.
    private mutating func noteRestoredStores() {
        let restored = history.byDevice.filter { !$0.value.restores.isEmpty }
        guard !restored.isEmpty else { return }
        let lost = counts.lostWithRestoredStores
        notes.append(
            "\(restored.count) device stores were restored from earlier copies (restore_node); \(lost) envelope\(lost == 1 ? "" : "s") signed after a copy and never synced went with it (counts.lostWithRestoredStores: the fault's doing, not an anomaly)")
    }

    func report() -> CheckReport {
        let order = Dictionary(uniqueKeysWithValues: CheckAnomaly.Kind.allCases.enumerated().map { ($1, $0) })
        // Stable, readable order: by kind, then device, then sequence.
        let sorted = anomalies.enumerated().sorted { lhs, rhs in
            let (a, b) = (lhs.element, rhs.element)
            if a.kind != b.kind { return order[a.kind, default: 0] < order[b.kind, default: 0] }
            if a.device != b.device { return (a.device ?? "") < (b.device ?? "") }
            if a.sequence != b.sequence { return (a.sequence ?? 0) < (b.sequence ?? 0) }
            return lhs.offset < rhs.offset
        }.map(\.element)
        return CheckReport(anomalies: sorted, counts: counts, resolvedInfo: resolvedInfo, notes: notes)
    }

    private mutating func countInputs() {
        counts.devices = Set(devices.keys).union(server?.envelopes.map(\.deviceID) ?? []).count
        counts.historyEvents = history.events.count
        counts.serverEnvelopes = server?.envelopes.count ?? 0
        counts.serverRecipients = server?.recipients.values.reduce(0) { $0 + $1.count } ?? 0
        for (id, device) in devices {
            var perDevice = CheckCounts.Device()
            perDevice.signed = device.outbox.count
            perDevice.acknowledged = device.outbox.filter { $0.status == "synced" }.count
            perDevice.pending = device.outbox.filter { $0.status == "pending" }.count
            perDevice.rejected = device.outbox.filter { $0.status == "rejected" }.count
            counts.perDevice[id] = perDevice
        }
        for envelope in server?.envelopes ?? [] { counts.perDevice[envelope.deviceID, default: CheckCounts.Device()].onServer += 1 }
        for (id, deviceHistory) in history.byDevice {
            counts.perDevice[id, default: CheckCounts.Device()].historySigned = deviceHistory.signed.count
            counts.perDevice[id, default: CheckCounts.Device()].historySynced = deviceHistory.synced.count
        }
        counts.signed = counts.perDevice.values.reduce(0) { $0 + $1.signed }
        counts.acknowledged = counts.perDevice.values.reduce(0) { $0 + $1.acknowledged }
        counts.pending = counts.perDevice.values.reduce(0) { $0 + $1.pending }
        counts.rejected = counts.perDevice.values.reduce(0) { $0 + $1.rejected }
    }

    /// A device the server or the history knows but whose store is not among the inputs cannot be
    /// checked. The coordinator's own REST sender has no store by design: its envelopes (created
    /// over the REST API) are judged by the server-side rules alone — duplicates, order, the
    /// signature rule with its enrolled key, routing — and a note counts them.
    private mutating func checkMissingStores(_ server: ServerSnapshot) {
        var seen = Set(server.envelopes.map(\.deviceID))
        for (device, deviceHistory) in history.byDevice where !deviceHistory.signed.isEmpty { seen.insert(device) }
        let rest = server.envelopes.filter { $0.deviceID == RESTRoutes.senderDeviceID }.count
        if rest > 0, devices[RESTRoutes.senderDeviceID] == nil {
            seen.remove(RESTRoutes.senderDeviceID)
            notes.append(
                "\(rest) envelope\(rest == 1 ? "" : "s") created over the REST API (device \(RESTRoutes.senderDeviceID), the coordinator's REST sender) "
                    + "checked by the server-side rules only: duplicates, order, signatures, routing (no device store to compare)")
        }
        for device in seen.sorted() where devices[device] == nil {
            let onServer = server.envelopes.filter { $0.deviceID == device }.count
            let signed = history.byDevice[device]?.signed.count ?? 0
            anomalies.append(CheckAnomaly(
                kind: .unreadableInput, device: device,
                message: "no store for device \(device) among the device stores (\(onServer) envelopes on the server, \(signed) ok sign in the history); its envelopes cannot be checked",
                witness: CheckWitness(
                    events: Array(history.byDevice[device]?.signed.prefix(1) ?? []),
                    rows: server.envelopes.first { $0.deviceID == device }.map { [witnessRow($0, server)] } ?? [])))
        }
    }

    private mutating func noteUncompleted() {
        let open = history.uncompletedInvocations()
        guard !open.isEmpty else { return }
        let parts = open.sorted { $0.key.rawValue < $1.key.rawValue }.map { "\($0.value) \($0.key.rawValue)" }
        notes.append("invocations without a completion (their process stopped first): \(parts.joined(separator: ", "))")
    }
}
