import Foundation
import GRDB
import GRDBSQLite
import Logging
import Synchronization
import Testing

@testable import DeviceNode

/// Compact stores (thousands of simulated devices in one process) share a pool of a few threads:
/// before, every GRDB connection's serial queue with work got a thread of its own from
/// libdispatch's overcommit pool (some 240 threads for 250 devices syncing at once).
@Suite struct CompactStoreThreadsTests {
    /// The threads that ran the stores' work (other tests running beside this one start threads
    /// too, so the process's thread count says little).
    final class Workers: Sendable {
        private let seen = Mutex(Set<UInt>())
        func record() {
            let me = UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(bitPattern: UInt(pthread_self()))))
            seen.withLock { _ = $0.insert(me) }
        }
        var count: Int { seen.withLock { $0.count } }
    }

    @Test func manyCompactStoresWritingAtOnceUseAFewThreads() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("compact-threads-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let stores = try (1...96).map { index in
            try DeviceStore.open(
                path: "\(directory)/device-\(index).sqlite", deviceId: "device-\(index)", durability: .processCrash, footprint: .compact,
                clock: { Date() }, logger: Logger(label: "test"))
        }
        let workers = Workers()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for store in stores {
                group.addTask {
                    try await store.pool.write { db in
                        // Slow work: each write holds its thread a while (busy, as a CPU-bound
                        // commit would), so all 96 overlap unless a few threads take them in turn.
                        let until = ContinuousClock.now + .milliseconds(5)
                        while ContinuousClock.now < until {}
                        try db.execute(sql: "CREATE TABLE IF NOT EXISTS probe (x)")
                        workers.record()
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(workers.count < 24, "96 stores writing at once ran on \(workers.count) threads")
    }

    /// A compact store reads without a transaction (its one connection runs every block in turn,
    /// so none is needed); a standard store's pool reads in a snapshot transaction, as before.
    @Test func aCompactStoreReadsWithoutATransactionAStandardOneInASnapshot() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("compact-read-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        for footprint in [DeviceConfiguration.StoreFootprint.compact, .standard] {
            let store = try DeviceStore.open(
                path: "\(directory)/\(footprint).sqlite", deviceId: "device-1", durability: .processCrash, footprint: footprint,
                clock: { Date() }, logger: Logger(label: "test"))
            let inTransaction = try await store.read { db in db.isInsideTransaction }
            #expect(inTransaction == (footprint == .standard), "\(footprint)")
            // What the store reads is what it wrote.
            #expect(try await store.account() == nil)
            #expect(try await store.outbox(status: nil).isEmpty)
            try store.close()
        }
    }

    /// `releaseMemory` frees the prepared statements a store keeps (SQLite's own count), and the
    /// store reads on as before.
    @Test func releasingMemoryFreesTheStatementsAndTheStoreGoesOn() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("compact-release-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try DeviceStore.open(
            path: "\(directory)/d.sqlite", deviceId: "device-1", durability: .processCrash, footprint: .compact,
            clock: { Date() }, logger: Logger(label: "test"))
        @Sendable func statementBytes() async throws -> Int32 {
            try await store.pool.writeWithoutTransaction { db in
                var current: Int32 = 0, highwater: Int32 = 0
                sqlite3_db_status(db.sqliteConnection, SQLITE_DBSTATUS_STMT_USED, &current, &highwater, 0)
                return current
            }
        }
        _ = try await store.outbox(status: .pending)
        _ = try await store.account()
        let held = try await statementBytes()
        #expect(held > 4_000, "two cached statements hold \(held) bytes")
        try await store.releaseMemory()
        #expect(try await statementBytes() == 0)
        #expect(try await store.outbox(status: .pending).isEmpty)
        try store.close()
    }
}
