import Foundation
import GRDB

/// The `restore_coordinator` fault (docs/scenarios.md): the launcher copies the coordinator's store
/// at the snapshot time (SQLite's online backup, while the coordinator runs), and at the fault's
/// start kills the coordinator and puts the copy in place of its store (`-wal` and `-shm` removed:
/// the copy is the whole database). The devices then find a coordinator that lost what it
/// acknowledged since the copy, and heal it (docs/sync.md, "When a store goes back in time").
extension Launcher {
    /// `snapshots/<fault id>.sqlite` in the run directory.
    func snapshotFile(for id: String) -> String {
        URL(fileURLWithPath: run.path).appendingPathComponent("snapshots").appendingPathComponent("\(id).sqlite").path
    }

    /// The copies the schedule needs, by time: (seconds from the start, the restore's fault id).
    var plannedSnapshots: [(time: Double, id: String)] {
        configuration.plan.faults.compactMap { event in
            guard event.phase == .start, case .restoreCoordinator(let snapshot) = event.fault else { return nil }
            return (snapshot, event.id)
        }.sorted { $0.time < $1.time }
    }

    /// Copies the live store for the restore `id`, recorded in the launcher's history.
    func takeSnapshot(for id: String) {
        let details = ["fault": "restore coordinator", "id": id, "file": "snapshots/\(id).sqlite"]
        record(.invoke, .snapshot, details: details)
        do {
            let path = snapshotFile(for: id)
            try FileManager.default.createDirectory(
                atPath: URL(fileURLWithPath: path).deletingLastPathComponent().path, withIntermediateDirectories: true)
            var readOnly = Configuration()
            readOnly.readonly = true
            readOnly.busyMode = .timeout(10)
            let source = try DatabasePool(path: run.coordinatorStore, configuration: readOnly)
            let copy = try DatabaseQueue(path: path)
            try source.backup(to: copy)
            try copy.close()
            try source.close()
            record(.ok, .snapshot, details: details)
            message("copied the coordinator's store for \(id) (snapshots/\(id).sqlite)")
        } catch {
            record(.fail, .snapshot, error: "\(error)", details: details)
            message("warning: copying the coordinator's store for \(id): \(error)")
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
