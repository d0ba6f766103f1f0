import CoordinatorPostgres
import Foundation
import Subprocess
import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// The run's PostgreSQL (docs/scenarios.md, "`coordinator`"): with `store: postgres` a throwaway
/// cluster in `postgres/` of the run directory, made, started, restarted (`restart_postgres`)
/// and stopped with scripts/postgres-cluster.sh (the one place that knows how: initdb, a free
/// loopback port, an unprivileged owner when run as root); with `store: postgres://…` an external
/// server, on which the run makes a schema of its own. Every coordinator of the run opens the URL
/// ``storeLocation`` gives; the checker reads the same URL while the cluster still runs.
extension Launcher {
    /// The schema the coordinators use on the run's own cluster.
    static let runSchema = "fleet"

    /// Starts the run's cluster (store: postgres) or picks the run's schema (an external server);
    /// sets ``Mutable/storeLocation``. Nothing for SQLite.
    func preparePostgres() async throws {
        switch configuration.scenario.coordinator.store {
        case .sqlite:
            return
        case .postgresURL(let url):
            // A fresh schema per run: the run directory's name (unique under runs/) and random bits.
            let stamp = URL(fileURLWithPath: run.path).lastPathComponent.lowercased().map { $0.isLetter || $0.isNumber ? $0 : "_" }
            let schema = "run_\(String(stamp).prefix(40))_\(Self.randomSecret().prefix(8))"
            let location = url + (url.contains("?") ? "&" : "?") + "schema=\(schema)"
            mutable.withLock { $0.storeLocation = location }
            message("coordinator store: PostgreSQL \(PostgresCoordinatorStore.redacted(url: url)) schema \(schema)")
        case .postgres:
            let (status, output) = try await postgresCluster("start")
            guard status == 0, let url = output.split(separator: "\n").last(where: { $0.hasPrefix("postgres://") }) else {
                throw LauncherError.postgres("could not start the run's PostgreSQL (exit \(status)): \(output.suffix(2000)) (see \(run.logFile(process: "postgres")))")
            }
            mutable.withLock { $0.storeLocation = "\(url)?schema=\(Self.runSchema)" }
            watchPostmaster()
            message("PostgreSQL listening on \(url) (data in postgres/data)")
        }
    }

    /// Stops the run's cluster and keeps its data (`postgres/data`), after the checker ran.
    func stopPostgres() async {
        guard configuration.scenario.coordinator.store == .postgres else { return }
        do {
            let (status, output) = try await postgresCluster("halt")
            if status == 0 {
                unwatchPostmaster()
            } else {
                message("warning: stopping PostgreSQL (exit \(status)): \(output.suffix(500))")
            }
        } catch {
            message("warning: stopping PostgreSQL: \(error)")
        }
    }

    /// `restart_postgres`: at the start, SIGKILL the postmaster's process group (`kill`: a crash)
    /// or a fast shutdown (`fast`); at the stop, start it again on the same data and port.
    func restartPostgres(crash: Bool, isStart: Bool) async -> [String] {
        do {
            if isStart {
                if crash {
                    guard let pid = postmasterPID() else { return ["no running postmaster (postgres/data/postmaster.pid)"] }
                    // pg_ctl makes the postmaster a process-group leader: the group is every server process.
                    guard Glibc.kill(-pid, SIGKILL) == 0 else { return ["kill -9 of PostgreSQL's group \(pid) failed: errno \(errno)"] }
                    unwatchPostmaster()
                    return []
                }
                let (status, output) = try await postgresCluster("halt")
                guard status == 0 else { return ["stopping PostgreSQL failed (exit \(status)): \(output.suffix(500))"] }
                unwatchPostmaster()
                return []
            }
            let (status, output) = try await postgresCluster("resume")
            guard status == 0 else { return ["PostgreSQL did not start again (exit \(status)): \(output.suffix(1000))"] }
            watchPostmaster()
            return []
        } catch {
            return ["\(error)"]
        }
    }

    /// The postmaster's pid from `postgres/data/postmaster.pid` (its first line), when that
    /// process is alive and is PostgreSQL: a stale file left by a server that died on its own
    /// must not make the launcher signal whatever process (or group) now has that number.
    func postmasterPID() -> Int32? {
        let path = URL(fileURLWithPath: run.postgresDirectory).appendingPathComponent("data/postmaster.pid").path
        guard let text = try? String(contentsOfFile: path, encoding: .utf8),
            let first = text.split(separator: "\n").first, let pid = Int32(first.trimmingCharacters(in: .whitespaces)), pid > 1
        else { return nil }
        let command = (try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
        guard command == "postgres" else { return nil }
        return pid
    }

    /// Lets the last-resort teardown (a second SIGINT, exit) kill the cluster's process group too.
    private func watchPostmaster() {
        guard let pid = postmasterPID() else { return }
        LiveProcessGroups.shared.insert(pid)
        mutable.withLock { $0.postmaster = pid }
    }

    /// The cluster stopped: its (former) group is not ours to kill any more.
    private func unwatchPostmaster() {
        if let pid = mutable.withLock({ $0.postmaster }) { LiveProcessGroups.shared.remove(pid) }
        mutable.withLock { $0.postmaster = nil }
    }

    /// Runs `scripts/postgres-cluster.sh <command> <run>/postgres`, its output appended to
    /// `logs/postgres.log` (a file, not a pipe: the server it starts must not hold our pipe open).
    /// - Returns: its exit status and what it printed this time.
    func postgresCluster(_ command: String) async throws -> (Int32, String) {
        let script = try Self.postgresScript()
        let logPath = run.logFile(process: "postgres")
        if !FileManager.default.fileExists(atPath: logPath) { _ = FileManager.default.createFile(atPath: logPath, contents: nil) }
        let before = (try? FileManager.default.attributesOfItem(atPath: logPath)[.size] as? NSNumber)?.uint64Value ?? 0
        let output = try FileDescriptor.open(FilePath(logPath), .writeOnly, options: [.append], permissions: [.ownerReadWrite])
        let error = try FileDescriptor.open(FilePath(logPath), .writeOnly, options: [.append], permissions: [.ownerReadWrite])
        let result = try await Subprocess.run(
            .path(FilePath("/bin/bash")), arguments: Arguments([script, command, run.postgresDirectory]),
            input: .none, output: .fileDescriptor(output, closeAfterSpawningProcess: true),
            error: .fileDescriptor(error, closeAfterSpawningProcess: true))
        let status: Int32
        switch result.terminationStatus {
        case .exited(let code): status = code
        case .signaled(let signal): status = 128 + signal
        }
        var printed = ""
        if let handle = FileHandle(forReadingAtPath: logPath) {
            try? handle.seek(toOffset: before)
            printed = String(decoding: (try? handle.readToEnd()) ?? Data(), as: UTF8.self)
            try? handle.close()
        }
        return (status, printed)
    }

    /// scripts/postgres-cluster.sh: `SIGNFLEET_POSTGRES_SCRIPT`, else found above the `signfleet`
    /// binary (a build in a checkout), else under the current directory.
    static func postgresScript() throws -> String {
        let manager = FileManager.default
        if let path = ProcessInfo.processInfo.environment["SIGNFLEET_POSTGRES_SCRIPT"], !path.isEmpty {
            guard manager.fileExists(atPath: path) else { throw LauncherError.postgres("SIGNFLEET_POSTGRES_SCRIPT names \(path), which does not exist") }
            return path
        }
        let executable = (try? manager.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        var directory = URL(fileURLWithPath: executable).deletingLastPathComponent()
        for _ in 0..<8 {
            let candidate = directory.appendingPathComponent("scripts/postgres-cluster.sh").path
            if manager.fileExists(atPath: candidate) { return candidate }
            directory.deleteLastPathComponent()
        }
        throw LauncherError.postgres(
            "store: postgres needs scripts/postgres-cluster.sh (a SignFleet checkout); set SIGNFLEET_POSTGRES_SCRIPT to it, or give an existing server with store: postgres://user@host:port/database")
    }
}
