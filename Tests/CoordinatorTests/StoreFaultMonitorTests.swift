import FleetProtocol
import Foundation
import GRDB
import Logging
import Prometheus
import Testing

@testable import Coordinator

@Suite struct StoreFaultMonitorTests {
    let clock = TestClock()
    let logs = CapturedLogs()
    let registry = PrometheusCollectorRegistry()

    func monitor() -> StoreFaultMonitor {
        StoreFaultMonitor(
            path: "/var/lib/signfleet/c.sqlite", logger: logs.logger(), metricsFactory: PrometheusMetricsFactory(registry: registry),
            now: { [clock] in clock.now() })
    }

    func failures(_ reason: String) -> Double {
        var buffer: [UInt8] = []
        registry.emit(into: &buffer)
        return PrometheusText(String(decoding: buffer, as: UTF8.self)).value(StoreFaultMonitor.failuresLabel, ["reason": reason])
    }

    static let full = DatabaseError(resultCode: .SQLITE_FULL)
    /// SQLITE_IOERR_WRITE, an extended code of SQLITE_IOERR.
    static let ioWrite = DatabaseError(resultCode: ResultCode(rawValue: 10 | (3 << 8)))

    /// What `GET /health` runs during an episode: a probe of the store's disk that ends the episode
    /// once the disk takes writes again, at most once a second on the monitor's clock, and never
    /// outside an episode.
    @Test func probesDuringAnEpisodeEndItAndAreRateLimited() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("probe-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let monitor = StoreFaultMonitor(
            path: directory.appendingPathComponent("c.sqlite").path, probesDisk: true, logger: logs.logger(),
            metricsFactory: PrometheusMetricsFactory(registry: registry), now: { [clock] in clock.now() })
        monitor.probeDuringEpisode()
        #expect(logs.matching("the store writes again").isEmpty, "no episode, nothing to end")
        monitor.recordFailure(.diskFull, error: Self.full)
        monitor.probeDuringEpisode()
        #expect(monitor.episode == nil, "the disk takes the probe: the episode ends")
        monitor.recordFailure(.diskFull, error: Self.full)
        clock.advance(0.5)
        monitor.probeDuringEpisode()
        #expect(monitor.episode != nil, "half a second after the last probe: not probed again")
        clock.advance(0.6)
        monitor.probeDuringEpisode()
        #expect(monitor.episode == nil)
        #expect(failures("disk_full") == 2, "probes count no failed write")
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        #expect(leftovers.isEmpty, "the probe file is removed: \(leftovers)")
    }

    @Test func diskFaultsAreClassifiedAndEverythingElseIsNot() {
        #expect(StoreFaultKind.of(Self.full) == .diskFull)
        #expect(StoreFaultKind.of(Self.ioWrite) == .ioError)
        #expect(StoreFaultKind.of(DatabaseError(resultCode: .SQLITE_CANTOPEN)) == .ioError)
        #expect(StoreFaultKind.of(DatabaseError(resultCode: .SQLITE_CONSTRAINT)) == nil)
        #expect(StoreFaultKind.of(DatabaseError(resultCode: .SQLITE_BUSY)) == nil)
        #expect(StoreFaultKind.of(FleetError(.internal, "not a database error")) == nil)
        let refusal = StoreFaultKind.diskFull.refusal
        #expect(refusal.code == .unavailable && refusal.retryable && refusal.message.contains("storage is failing"))
    }

    @Test func anEpisodeLogsOnceCountsEveryFailureAndEndsOnTheNextSuccessWithItsDuration() throws {
        let monitor = monitor()
        monitor.recordSuccess()  // no episode: nothing to say
        #expect(logs.all.isEmpty && monitor.episode == nil && monitor.healthReasons.isEmpty)

        for _ in 0..<5 {
            monitor.recordFailure(.diskFull, error: Self.full)
            clock.advance(3)
        }
        monitor.recordFailure(.ioError, error: Self.ioWrite)  // same episode, counted by its own reason
        let episode = try #require(monitor.episode)
        #expect(episode.kind == .diskFull && episode.failedWrites == 6 && episode.since == Date(timeIntervalSince1970: 1_800_000_000))
        #expect(episode.lastError.contains("SQLITE_IOERR") && episode.lastError.contains("778"), "\(episode.lastError)")
        #expect(monitor.healthReasons == ["store_disk_full"])
        // `/status` (the HTTP API's encoder) shows the start as ISO 8601, and reads it back.
        let json = String(decoding: try CoordinatorHTTPServer.encoder().encode(episode), as: UTF8.self)
        #expect(json.contains("\"since\":\"2027-01-15T08:00:00Z\""), "\(json)")
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        #expect(try decoder.decode(StoreFaultEpisode.self, from: Data(json.utf8)) == episode)
        #expect(failures("disk_full") == 5 && failures("io_error") == 1)
        let started = logs.all
        #expect(started.count == 1, "\(started)")
        #expect(started.first?.level == .error)
        #expect(
            started.first?.message
                == "the store's disk is full (SQLITE_FULL) writing /var/lib/signfleet/c.sqlite: free space; sync pushes are refused as retryable until a write succeeds")

        clock.advance(1.5)
        monitor.recordSuccess()
        monitor.recordSuccess()  // already over: one recovery line only
        #expect(monitor.episode == nil && monitor.healthReasons.isEmpty)
        #expect(logs.all.count == 2, "\(logs.all)")
        #expect(
            logs.all.last?.message
                == "the store writes again (/var/lib/signfleet/c.sqlite): the disk-full episode lasted 16.5 s and 6 writes failed")

        // The next fault is a new episode, with its own line.
        monitor.recordFailure(.ioError, error: Self.ioWrite)
        #expect(monitor.episode?.kind == .ioError && monitor.episode?.failedWrites == 1)
        #expect(monitor.healthReasons == ["store_io_error"])
        #expect(logs.matching("the store's disk failed a write").count == 1, "\(logs.all)")
        #expect(logs.all.count == 3)
    }

    @Test func aWriteThatChangesNothingDoesNotEndAnEpisode() async throws {
        let temporary = try TemporaryStore()
        defer { temporary.remove() }
        let store = try CoordinatorStore(
            path: temporary.directory.appendingPathComponent("faults.sqlite").path, logger: logs.logger(),
            metricsFactory: PrometheusMetricsFactory(registry: registry))
        store.faults.recordFailure(.diskFull, error: Self.full)
        // A transaction that only reads commits without touching the disk: no proof it has space.
        _ = try await store.write { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM account") }
        #expect(store.faults.episode != nil)
        _ = try await AccountDirectory(store: store).createAccount(id: "acme", name: "Acme", offlineSigning: true)
        #expect(store.faults.episode == nil)
        #expect(logs.matching("the store writes again").count == 1 && failures("disk_full") == 1, "\(logs.all)")
        // A write failing for another reason (a duplicate id) is not a disk fault.
        await #expect(throws: (any Error).self) {
            _ = try await store.write { db in try db.execute(sql: "INSERT INTO account (id) VALUES ('acme')") }
        }
        #expect(store.faults.episode == nil)
    }
}
