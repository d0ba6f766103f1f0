import Foundation
import GRDB

/// The `restore_coordinator` and `restore_node` faults (docs/scenarios.md): the launcher copies the
/// coordinator's store, or each device store of the target node processes, at the snapshot time
/// (SQLite's online backup, while the process runs), and at the fault's start kills the process and
/// puts the copies in place (`-wal` and `-shm` removed: a copy is the whole database). The devices
/// then find a coordinator that lost what it acknowledged since the copy and heal it, or go on from
/// a store that lost what they did since (docs/sync.md, "When a store goes back in time").
extension Launcher {
    /// `snapshots/<fault id>.sqlite` in the run directory.
    func snapshotFile(for id: String) -> String {
        URL(fileURLWithPath: run.path).appendingPathComponent("snapshots").appendingPathComponent("\(id).sqlite").path
    }

    /// `snapshots/<fault id>/<device>.sqlite`: a device's copy for a `restore_node`.
    func deviceSnapshotFile(for id: String, device: String) -> String {
        URL(fileURLWithPath: run.path).appendingPathComponent("snapshots").appendingPathComponent(id)
            .appendingPathComponent("\(device).sqlite").path
    }

    /// The copies the schedule needs, by time: (seconds from the start, the restore's start event).
    var plannedSnapshots: [(time: Double, event: FaultEvent)] {
        configuration.plan.faults.compactMap { event in
            guard event.phase == .start else { return nil }
            switch event.fault {
            case .restoreCoordinator(let snapshot), .restoreNode(let snapshot): return (snapshot, event)
            default: return nil
            }
        }.sorted { $0.time < $1.time }
    }

    /// Takes the copies a restore needs.
    func takeSnapshot(for event: FaultEvent) {
        if case .restoreNode = event.fault {
            takeDeviceSnapshots(for: event.id, processes: event.targets)
        } else {
            takeSnapshot(for: event.id)
        }
    }

    /// Copies the live store for the restore `id`, recorded in the launcher's history.
    func takeSnapshot(for id: String) {
        let details = ["fault": "restore coordinator", "id": id, "file": "snapshots/\(id).sqlite"]
        record(.invoke, .snapshot, details: details)
        do {
            let path = snapshotFile(for: id)
            try FileManager.default.createDirectory(
                atPath: URL(fileURLWithPath: path).deletingLastPathComponent().path, withIntermediateDirectories: true)
            try Self.backUp(run.coordinatorStore, to: path)
            record(.ok, .snapshot, details: details)
            message("copied the coordinator's store for \(id) (snapshots/\(id).sqlite)")
        } catch {
            record(.fail, .snapshot, error: "\(error)", details: details)
            message("warning: copying the coordinator's store for \(id): \(error)")
        }
    }

    /// Copies the store of every device of `processes` that has one yet, each recorded in the
    /// launcher's history (`invoke snapshot` before the copy starts: what a device signed before it
    /// is in the copy; the checker relies on it).
    func takeDeviceSnapshots(for id: String, processes: [String]) {
        let devices = configuration.plan.nodes.filter { processes.contains($0.process) }.flatMap { $0.devices.map(\.id) }
        var copied = 0
        for device in devices where FileManager.default.fileExists(atPath: run.deviceStore(device: device)) {
            let file = "snapshots/\(id)/\(device).sqlite"
            let details = ["fault": "restore node", "id": id, "file": file]
            recordDevice(.invoke, .snapshot, device: device, details: details)
            do {
                let path = deviceSnapshotFile(for: id, device: device)
                try FileManager.default.createDirectory(
                    atPath: URL(fileURLWithPath: path).deletingLastPathComponent().path, withIntermediateDirectories: true)
                try Self.backUp(run.deviceStore(device: device), to: path)
                recordDevice(.ok, .snapshot, device: device, details: details)
                copied += 1
            } catch {
                recordDevice(.fail, .snapshot, device: device, error: "\(error)", details: details)
            }
        }
        message("copied \(copied) of \(devices.count) device stores of \(processes.joined(separator: ", ")) for \(id) (snapshots/\(id)/)")
    }

    /// SQLite's online backup of the database at `source` (read-only, while its owner writes) into `target`.
    static func backUp(_ source: String, to target: String) throws {
        var readOnly = Configuration()
        readOnly.readonly = true
        readOnly.busyMode = .timeout(10)
        let from = try DatabasePool(path: source, configuration: readOnly)
        let copy = try DatabaseQueue(path: target)
        try from.backup(to: copy)
        try copy.close()
        try from.close()
    }

    /// Puts the copies for `id` in place of the (stopped) node `process`'s device stores, each
    /// recorded as `ok restore` with the device and the time its copy was taken (`details.snapshot`,
    /// seconds since 1970); devices without a copy (no store yet at the snapshot) keep theirs.
    /// Returns what failed.
    func restoreDeviceStores(of process: String, from id: String) -> [String] {
        guard let node = configuration.plan.nodes.first(where: { $0.process == process }) else { return ["\(process) is not a node process"] }
        let copiedAt = deviceSnapshotTimes(for: id)
        var failures: [String] = []
        for device in node.devices.map(\.id) {
            let copy = deviceSnapshotFile(for: id, device: device)
            guard let taken = copiedAt[device], FileManager.default.fileExists(atPath: copy) else { continue }
            let store = run.deviceStore(device: device)
            do {
                for suffix in ["", "-wal", "-shm"] where FileManager.default.fileExists(atPath: store + suffix) {
                    try FileManager.default.removeItem(atPath: store + suffix)
                }
                try FileManager.default.copyItem(atPath: copy, toPath: store)
                recordDevice(.ok, .restore, device: device, details: ["fault": "restore node", "id": id, "snapshot": String(taken)])
            } catch {
                failures.append("restoring \(device)'s store from \(copy): \(error)")
            }
        }
        return failures
    }

    /// When each device's copy for `id` was begun (its `invoke snapshot` event), from the launcher's history.
    private func deviceSnapshotTimes(for id: String) -> [String: Double] {
        mutable.withLock { $0.deviceSnapshots[id] ?? [:] }
    }

    /// Records a launcher event about one device (and, for a snapshot's start, remembers its time).
    func recordDevice(
        _ type: HistoryEvent.Kind, _ op: HistoryEvent.Operation, device: String, error: String? = nil, details: [String: String]
    ) {
        let event = HistoryEvent(
            time: configuration.wall.secondsSince1970, process: "launcher", type: type, op: op, device: device, error: error, details: details)
        if type == .invoke, op == .snapshot, let id = details["id"] {
            mutable.withLock { $0.deviceSnapshots[id, default: [:]][device] = event.time }
        }
        do {
            try history.append(event)
        } catch {
            message("warning: cannot write the launcher's history: \(error)")
        }
    }

    /// Replaces the (stopped) coordinator's store with the copy for `id`; returns what failed.
    func restoreStore(from id: String) -> [String] {
        let copy = snapshotFile(for: id)
        guard FileManager.default.fileExists(atPath: copy) else { return ["no copy of the store was taken for \(id)"] }
        do {
            for suffix in ["", "-wal", "-shm"] where FileManager.default.fileExists(atPath: run.coordinatorStore + suffix) {
                try FileManager.default.removeItem(atPath: run.coordinatorStore + suffix)
            }
            try FileManager.default.copyItem(atPath: copy, toPath: run.coordinatorStore)
            return []
        } catch {
            return ["restoring the store from \(copy): \(error)"]
        }
    }
}
