import GRDB
import Synchronization

/// Group commit for every write of the SQLite store (``CoordinatorStore``): writes that arrive
/// while the single writer is busy share its next transaction, each inside a savepoint of its
/// own, in arrival order, and each is answered only after that transaction committed.
///
/// SQLite has one writer; a crowd of devices logging in (an access token each) and enrolling (a
/// device row each) used to make one transaction apiece, each with its commit and WAL frames, queued
/// behind each other and behind the sync pushes (loadtests/NOTES.md: 20,000 devices, the
/// coordinator at 256 requests in progress with 0.6 of a core busy). Batched, one commit serves
/// all that waited. What a caller sees does not change: its write is all-or-nothing (its
/// savepoint), sees every write answered before it, and an error it throws undoes its own changes
/// only. If SQLite itself ends the transaction (a full disk, an I/O error: it rolls the whole
/// transaction back), the batch stops there and every write in it gets that error: none of them
/// was applied. `SyncIngest`'s pushes come through here as one write per group of pushes
/// (`IngestCommitQueue`), so they share transactions with these too.
final class StoreWriteBatcher: Sendable {
    private final class Job: Sendable {
        /// Runs the write in the batch's transaction; throws only to end the batch.
        let apply: @Sendable (Database) throws -> Void
        /// After the transaction: nil when it committed, else why it did not.
        let finish: @Sendable ((any Error)?) -> Void

        init(apply: @escaping @Sendable (Database) throws -> Void, finish: @escaping @Sendable ((any Error)?) -> Void) {
            self.apply = apply
            self.finish = finish
        }
    }

    /// One write's outcome, from inside the transaction to its caller.
    private final class Outcome<T: Sendable>: Sendable {
        let result = Mutex<Result<T, any Error>?>(nil)
    }

    private struct State {
        var waiting: [Job] = []
        var draining = false
        var transactions = 0
        var writes = 0
    }

    private let database: DatabasePool
    private let faults: StoreFaultMonitor
    private let state = Mutex(State())

    init(database: DatabasePool, faults: StoreFaultMonitor) {
        self.database = database
        self.faults = faults
    }

    /// Transactions committed (or tried) and the writes they carried.
    var counts: (transactions: Int, writes: Int) { state.withLock { ($0.transactions, $0.writes) } }

    /// Writes waiting for the next transaction (for tests).
    var waitingCount: Int { state.withLock { $0.waiting.count } }

    /// Runs `updates` in the next write transaction and returns its value once that transaction committed.
    func write<T: Sendable>(_ updates: @escaping @Sendable (Database) throws -> T) async throws -> T {
        let outcome = Outcome<T>()
        return try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            let job = Job(
                apply: { db in
                    do {
                        var value: T?
                        try db.inSavepoint {
                            value = try updates(db)
                            return .commit
                        }
                        outcome.result.withLock { $0 = value.map { .success($0) } }
                    } catch {
                        // SQLite ended the transaction itself: nothing of this batch will commit.
                        if !db.isInsideTransaction { throw error }
                        outcome.result.withLock { $0 = .failure(error) }
                    }
                },
                finish: { failure in
                    if let failure {
                        continuation.resume(throwing: failure)
                    } else {
                        continuation.resume(with: outcome.result.withLock { $0 } ?? .failure(CancellationError()))
                    }
                })
            let leads = state.withLock { state -> Bool in
                state.waiting.append(job)
                guard !state.draining else { return false }
                state.draining = true
                return true
            }
            if leads { Task { await self.drain() } }
        }
    }

    private func drain() async {
        while true {
            let batch = state.withLock { state -> [Job] in
                let batch = state.waiting
                state.waiting = []
                if batch.isEmpty { state.draining = false } else { state.transactions += 1; state.writes += batch.count }
                return batch
            }
            guard !batch.isEmpty else { return }
            do {
                // A write that changed nothing proves nothing about the disk (StoreFaultMonitor).
                _ = try await faults.observe(changed: { $0 }) {
                    try await database.write { db -> Bool in
                        let before = db.totalChangesCount
                        for job in batch { try job.apply(db) }
                        return db.totalChangesCount != before
                    }
                }
                for job in batch { job.finish(nil) }
            } catch {
                for job in batch { job.finish(error) }
            }
        }
    }
}
