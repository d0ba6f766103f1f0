import FleetProtocol
import FleetTesting
import Foundation
import GRDB
import Synchronization
import Testing

@testable import Coordinator

/// Group commit of the SQLite store's writes (`StoreWriteBatcher`): what waits for the writer
/// shares one transaction, and each write is still its own.
@Suite struct StoreWriteBatcherTests {
    /// A write that holds the writer until the test lets it go, so that the writes sent meanwhile
    /// wait together: an event the test waits for, not a sleep.
    final class Gate: Sendable {
        private let entered = DispatchSemaphore(value: 0)
        private let released = DispatchSemaphore(value: 0)
        func hold() {
            entered.signal()
            released.wait()
        }
        func waitUntilHeld() async { await withCheckedContinuation { c in DispatchQueue.global().async { self.entered.wait(); c.resume() } } }
        func release() { released.signal() }
    }

    @Test func writesThatWaitShareATransactionAndAFailingOneUndoesOnlyItself() async throws {
        let temporary = try TemporaryStore()
        defer { temporary.remove() }
        let store = temporary.store
        try await store.database.write { db in try db.execute(sql: "CREATE TABLE probe (name TEXT PRIMARY KEY)") }
        let before = store.writes.counts

        let gate = Gate()
        let holding = Task { try await store.write { _ in gate.hold() } }
        await gate.waitUntilHeld()
        // Three writes while the writer is held: one inserts, one inserts and then fails, one inserts.
        let first = Task { try await store.write { db in try db.execute(sql: "INSERT INTO probe VALUES ('first')") } }
        let failing = Task {
            try await store.write { db in
                try db.execute(sql: "INSERT INTO probe VALUES ('undone')")
                throw FleetError(.invalidRequest, "refused after its insert")
            }
        }
        let third = Task { try await store.write { db in try db.execute(sql: "INSERT INTO probe VALUES ('third')") } }
        try await withDeadline(.seconds(120), "three writes waiting") {
            while store.writes.waitingCount < 3 { await Task.yield() }
        }
        gate.release()
        try await holding.value
        try await first.value
        try await third.value
        await #expect(throws: FleetError.self) { try await failing.value }

        let names = try await store.database.read { db in try String.fetchAll(db, sql: "SELECT name FROM probe ORDER BY name") }
        #expect(names == ["first", "third"], "the failing write's insert is undone, its neighbours' are not")
        let after = store.writes.counts
        #expect(after.writes - before.writes == 4)
        #expect(after.transactions - before.transactions == 2, "the held write, then the three that waited, in one transaction")
    }

    @Test func aWriteSeesTheWritesAnsweredBeforeItAndIsAnsweredAfterItsCommit() async throws {
        let temporary = try TemporaryStore()
        defer { temporary.remove() }
        let store = temporary.store
        try await store.database.write { db in try db.execute(sql: "CREATE TABLE counter (n INTEGER)"); try db.execute(sql: "INSERT INTO counter VALUES (0)") }
        // Many concurrent increments, each reading what the ones before it wrote.
        let values = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<200 {
                group.addTask {
                    try await store.write { db -> Int in
                        try db.execute(sql: "UPDATE counter SET n = n + 1")
                        return try Int.fetchOne(db, sql: "SELECT n FROM counter") ?? -1
                    }
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(values.sorted() == Array(1...200), "every write saw each earlier one: no lost update")
        // Answered after the commit: a read right after any write sees it.
        #expect(try await store.database.read { db in try Int.fetchOne(db, sql: "SELECT n FROM counter") } == 200)
    }
}
