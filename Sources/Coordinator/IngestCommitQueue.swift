import FleetProtocol

/// Group commit for ``SyncIngest``: pushes that arrive while a write transaction runs wait,
/// and the next transaction applies all of them, each inside its own savepoint, in arrival
/// order. One commit (and, with `synchronous = FULL`, one fsync) then serves many pushes.
///
/// Every push is still all-or-nothing (its savepoint), sees the effects of the pushes before
/// it (so two pushes of one device keep their order), and is answered only after the
/// transaction holding it committed; if the commit fails, every push in it gets the error and
/// nothing of any of them was applied.
actor IngestCommitQueue {
    private struct Job {
        let push: IngestPush
        let continuation: CheckedContinuation<SyncAck, any Error>
    }

    private let store: any CoordinatorStorage
    private var waiting: [Job] = []
    private var draining = false
    /// Transactions committed and pushes they carried (for tests and the profile notes).
    private(set) var transactions = 0
    private(set) var pushes = 0

    init(store: any CoordinatorStorage) {
        self.store = store
    }

    /// Walks `push` in the next write transaction; returns its ack once that transaction committed.
    func commit(_ push: IngestPush) async throws -> SyncAck {
        try await withCheckedThrowingContinuation { continuation in
            waiting.append(Job(push: push, continuation: continuation))
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
            let results: [Result<SyncAck, any Error>]
            do {
                // The store reports a full disk that fails the commit to its fault monitor.
                results = try await store.ingest(group.map(\.push))
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
