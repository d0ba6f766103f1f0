import FleetProtocol
import GRDB

/// Group commit for ``SyncIngest``: pushes that arrive while a write transaction runs wait,
/// and the next transaction applies all of them, each inside its own savepoint, in arrival
/// order. One commit (and, with `synchronous = FULL`, one fsync) then serves many pushes.
///
/// Every push is still all-or-nothing (its savepoint), sees the effects of the pushes before
/// it (so two pushes of one device keep their order), and is answered only after the
/// transaction holding it committed; if the commit fails, every push in it gets the error and
/// nothing of any of them was applied.
actor IngestCommitQueue {
    typealias Work = @Sendable (Database) throws -> SyncAck

    private struct Job {
        let work: Work
        let continuation: CheckedContinuation<SyncAck, any Error>
    }

    private let database: DatabasePool
    private var waiting: [Job] = []
    private var draining = false
    /// Transactions committed and pushes they carried (for tests and the profile notes).
    private(set) var transactions = 0
    private(set) var pushes = 0

    init(database: DatabasePool) {
        self.database = database
    }

    /// Runs `work` in the next write transaction; returns its ack once that transaction committed.
    func commit(_ work: @escaping Work) async throws -> SyncAck {
        try await withCheckedThrowingContinuation { continuation in
            waiting.append(Job(work: work, continuation: continuation))
            if !draining {
                draining = true
                Task { await self.drain() }
            }
        }
    }

    private func drain() async {
        while !waiting.isEmpty {
            let group = waiting
            waiting = []
            let works = group.map(\.work)
            let results: [Result<SyncAck, any Error>]
            do {
                results = try await database.write { db in
                    works.map { work in
                        Result {
                            var ack: SyncAck?
                            try db.inSavepoint {
                                ack = try work(db)
                                return .commit
                            }
                            guard let ack else { throw FleetError(.internal, "a push produced no ack", retryable: true) }
                            return ack
                        }
                    }
                }
                transactions += 1
                pushes += group.count
            } catch {
                // The transaction did not commit: none of these pushes was applied.
                results = group.map { _ in .failure(error) }
            }
            for (job, result) in zip(group, results) {
                job.continuation.resume(with: result)
            }
        }
        draining = false
    }
}
