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

    private let store: CoordinatorStore
    private var waiting: [Job] = []
    private var draining = false
    /// Transactions committed and pushes they carried (for tests and the profile notes).
    private(set) var transactions = 0
    private(set) var pushes = 0

    init(store: CoordinatorStore) {
        self.store = store
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
                // Through the store's fault monitor: a full disk fails the commit, and is reported there.
                results = try await store.write { db in
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
                // A push's own savepoint can hit the full disk (a page-cache spill) while the rest commit.
                for case .failure(let error) in results {
                    if let kind = StoreFaultKind.of(error) { store.faults.recordFailure(kind, error: error) }
                }
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
