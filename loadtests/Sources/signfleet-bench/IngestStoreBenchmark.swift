import Coordinator
import CoordinatorPostgres
import FleetProtocol
import Foundation
import Logging

#if canImport(Glibc)
import Glibc
#endif

/// `signfleet-bench store --postgres URL --postgres-data DIR [--devices D] [--items N] [--batch B]`:
/// verified sync ingest (`SyncIngest.apply`, every signature checked) into the SQLite store and
/// into the PostgreSQL store in the same run, from D devices (default 100) pushing N items in all
/// (default 6,000) in batches of B (default 10), in three set-ups:
/// - `sqlite`: one coordinator, a fresh SQLite file (the reference);
/// - `postgres`: one coordinator, a fresh schema;
/// - `postgres.coordinators2`: two coordinators (two `CoordinatorServices`, each with its own
///   connection pool) on one fresh schema, device i pushing to coordinator i mod 2.
///
/// For each: envelopes per second, and the CPU time per envelope of this process (the
/// coordinators: the pushes are built before the clock starts) and of the PostgreSQL server (the
/// postmaster of `DIR/postmaster.pid` and its children, from `/proc`). From these, the model of
/// docs/performance.md: envelopes per second per coordinator core and per PostgreSQL core. On this
/// 2-core machine the coordinators and PostgreSQL share the cores, so two coordinators cannot go
/// faster than one here; what the second set-up measures is what sharing a store costs per envelope.
func storeBenchmark(_ arguments: [String]) async throws {
    func value(_ name: String) -> String? {
        guard let i = arguments.firstIndex(of: name), i + 1 < arguments.count else { return nil }
        return arguments[i + 1]
    }
    func count(_ name: String, _ fallback: Int, _ range: ClosedRange<Int>) throws -> Int {
        guard let text = value(name) else { return fallback }
        guard let number = Int(text), range.contains(number) else {
            throw BenchError("\(name) takes a whole number from \(range.lowerBound) to \(range.upperBound), not \(text)")
        }
        return number
    }
    guard let url = value("--postgres"), let data = value("--postgres-data") else {
        throw BenchError("store needs --postgres URL --postgres-data DIR (loadtests/run store starts a throwaway cluster)")
    }
    let devices = try count("--devices", 100, 2...10_000)
    let items = try count("--items", 6000, 10...10_000_000)
    let batch = try count("--batch", 10, 1...1_000)
    let bench = "store"
    let root = NSTemporaryDirectory() + "signfleet-bench-store-" + UUID().uuidString
    try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: root) }
    let base = try await IngestBench.realItem(directory: root)
    var logger = Logger(label: "store-bench")
    logger.logLevel = .critical
    let perDevice = max(batch, items / devices)
    let run = UInt32.random(in: 0...UInt32.max)

    /// Pushes every device's items through `coordinators` (device i to coordinator i mod count);
    /// returns the rate and the CPU milliseconds per envelope of this process and of PostgreSQL.
    func measure(_ name: String, rig: IngestRig, coordinators: [CoordinatorServices]) async throws -> (rate: Double, own: Double, server: Double) {
        let pushes = rig.pushes(batch: batch)
        let ownBefore = ProcessCPU.ownSeconds()
        let serverBefore = try ProcessCPU.postgresSeconds(dataDirectory: data)
        let start = ContinuousClock.now
        let applied = try await withThrowingTaskGroup(of: Int.self) { group in
            for (index, devicePushes) in pushes.enumerated() {
                let ingest = coordinators[index % coordinators.count].ingest
                let routing = rig.forgers[index].id
                group.addTask {
                    var applied = 0
                    for push in devicePushes {
                        let ack = try await ingest.apply(push, routingID: routing)
                        applied += ack.results.filter { $0.outcome == .applied }.count
                    }
                    return applied
                }
            }
            return try await group.reduce(0, +)
        }
        let seconds = IngestBench.seconds(start.duration(to: .now))
        let own = ProcessCPU.ownSeconds() - ownBefore
        let server = try ProcessCPU.postgresSeconds(dataDirectory: data) - serverBefore
        guard applied == devices * perDevice else { throw BenchError("store \(name): \(applied) of \(devices * perDevice) items applied") }
        let rate = Double(applied) / seconds
        let ownPerEnvelope = own * 1000 / Double(applied)
        let serverPerEnvelope = server * 1000 / Double(applied)
        Report.emit(bench, "store.\(name).envelopes_per_s", rate, "ops/s")
        Report.emit(bench, "store.\(name).coordinator_cpu_ms_per_envelope", ownPerEnvelope, "ms")
        if name != "sqlite" { Report.emit(bench, "store.\(name).postgres_cpu_ms_per_envelope", serverPerEnvelope, "ms") }
        Report.emit(bench, "store.\(name).envelopes_per_coordinator_core_s", 1000 / ownPerEnvelope, "ops/s")
        if name != "sqlite", serverPerEnvelope > 0 {
            Report.emit(bench, "store.\(name).envelopes_per_postgres_core_s", 1000 / serverPerEnvelope, "ops/s")
        }
        return (rate, ownPerEnvelope, serverPerEnvelope)
    }

    // SQLite, the embedded default: the reference of this run.
    let sqliteRig = try await IngestRig(path: "\(root)/store.sqlite", devices: devices, items: perDevice, base: base)
    let sqlite = try await measure("sqlite", rig: sqliteRig, coordinators: [sqliteRig.services])

    // PostgreSQL, one coordinator.
    let single = try await PostgresCoordinatorStore(url: url, schema: "bench_\(run)_one", logger: logger)
    defer { single.close() }
    let singleServices = CoordinatorServices(postgres: single)
    let singleRig = try await IngestRig(services: singleServices, devices: devices, items: perDevice, base: base)
    let postgres = try await measure("postgres", rig: singleRig, coordinators: [singleServices])
    Report.emit(bench, "store.postgres.vs_sqlite", postgres.rate / sqlite.rate, "ratio")

    // PostgreSQL, two coordinators on one schema: each device enrolls with the one it pushes to.
    let first = try await PostgresCoordinatorStore(url: url, schema: "bench_\(run)_two", logger: logger)
    defer { first.close() }
    let second = try await PostgresCoordinatorStore(url: url, schema: "bench_\(run)_two", logger: logger)
    defer { second.close() }
    let pair = [CoordinatorServices(postgres: first), CoordinatorServices(postgres: second)]
    let pairRig = try await IngestRig(services: pair[0], devices: devices, items: perDevice, base: base)
    let token = try await pair[1].auth.issueToken(email: IngestRig.email, secret: IngestRig.secret).accessToken
    for (index, forger) in pairRig.forgers.enumerated() where index % 2 == 1 {
        _ = try await pair[1].devices.enroll(
            EnrollDevice(accessToken: token, deviceID: forger.id, publicKey: forger.publicKey), credential: .claimedName(forger.id))
    }
    let two = try await measure("postgres.coordinators2", rig: pairRig, coordinators: pair)
    Report.emit(bench, "store.postgres.coordinators2.vs_one", two.rate / postgres.rate, "ratio")
    Report.emit(bench, "store.postgres.coordinators2.cpu_per_envelope_vs_one", (two.own + two.server) / (postgres.own + postgres.server), "ratio")
}

/// CPU time read from the kernel: this process's (`getrusage`), and a PostgreSQL cluster's (its
/// postmaster and every child, from `/proc/PID/stat`).
enum ProcessCPU {
    static func ownSeconds() -> Double {
        var usage = rusage()
        getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
        func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
        return seconds(usage.ru_utime) + seconds(usage.ru_stime)
    }

    /// User and system seconds of the postmaster in `dataDirectory/postmaster.pid` and its children.
    static func postgresSeconds(dataDirectory: String) throws -> Double {
        guard let text = try? String(contentsOfFile: "\(dataDirectory)/postmaster.pid", encoding: .utf8),
            let line = text.split(separator: "\n").first, let postmaster = Int32(line.trimmingCharacters(in: .whitespaces))
        else { throw BenchError("no postmaster.pid in \(dataDirectory)") }
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        var total = 0.0
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
            guard let pid = Int32(entry), let fields = statFields(pid) else { continue }
            // After "pid (comm) ": ppid is field 4, utime 14, stime 15 (1-based), here 1, 11, 12.
            guard pid == postmaster || Int32(fields[1]) == postmaster, fields.count > 12,
                let user = Double(fields[11]), let system = Double(fields[12])
            else { continue }
            total += (user + system) / ticks
        }
        return total
    }

    /// The fields of `/proc/PID/stat` after the command name.
    private static func statFields(_ pid: Int32) -> [Substring]? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8), let close = stat.lastIndex(of: ")") else { return nil }
        return stat[stat.index(after: close)...].split(separator: " ")
    }
}
