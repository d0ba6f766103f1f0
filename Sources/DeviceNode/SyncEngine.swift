import FleetProtocol
import Foundation
import Logging

/// Settings of a ``SyncEngine``.
public struct SyncEngineConfiguration: Sendable {
    /// Outbox items per `sync.push`.
    public var batchSize: Int
    /// Pushes of one batch before a pass gives up (each push is itself retried by the client).
    public var maxAttempts: Int
    /// Wait between failed pushes: a ceiling that doubles per failure, with full jitter. Without
    /// a `Backoff.jitterSeed` each pass seeds it from the device id and the pass's number.
    public var retryBackoff: Backoff

    public init(batchSize: Int = 50, maxAttempts: Int = 5, retryBackoff: Backoff = Backoff(initial: .milliseconds(200), maximum: .seconds(10))) {
        self.batchSize = max(1, batchSize)
        self.maxAttempts = max(1, maxAttempts)
        self.retryBackoff = retryBackoff
    }
}

/// Pushes a device's outbox to the coordinator in sequence order, exactly once.
///
/// A pass pushes the pending items in batches, lowest sequence first, and records the
/// server's answer for each (applied, duplicate, rejected) before the next batch.
/// A push that times out is pushed again as it was: if the server had applied it and only
/// the reply was lost, the items come back as duplicates with their stored results, so
/// nothing is ever created twice (the trap the SDK's users hit). Rejected items are
/// settled and do not block the ones after them.
///
/// ```swift
/// let engine = SyncEngine(node: node, client: client, accessToken: token)
/// let summary = try await engine.syncAll()
/// ```
public actor SyncEngine {
    public let configuration: SyncEngineConfiguration
    private let node: DeviceNode
    private let client: any ClientTransport
    /// The token enrollment presents, asked for at each enrollment: a ``DeviceConnection`` that
    /// failed over to another coordinator gets one from that coordinator.
    private let accessToken: @Sendable () async throws -> String
    private let logger: Logger
    /// What the engine's waits (back-off, a rate limit's retry-after) are timed on.
    private let clock: any FleetClock
    private var enrolled = false
    /// The server instance the session's enrollment was answered by: a restarted coordinator (its
    /// store possibly restored from an older copy) is a new session, reconciled again.
    private var enrolledWith: String?
    /// Items the server lost that this device could not send again (found at the session's start):
    /// its next push meets a gap that only the server's operator can close.
    private var unrepairable: [ClosedRange<UInt64>] = []
    /// Renumberings one pass may do (each follows a `conflict`; more means something else is wrong).
    static let maxRenumberingsPerPass = 3
    /// Set when a pass gave up on a `rate_limited` error: no push is sent before then.
    private var rateLimitedUntil: ContinuousClock.Instant?
    private var running: Task<SyncSummary, any Error>?
    /// Passes that pushed, so each pass draws its own jitter.
    private var passes: UInt64 = 0

    /// - Parameters:
    ///   - node: the device whose outbox is pushed.
    ///   - client: the session with the coordinator (`ClientTransport`: ZeroMQ's
    ///     `FleetClient`, or an in-process transport in tests).
    ///   - accessToken: what enrollment presents.
    ///   - configuration: the engine's settings (``SyncEngineConfiguration``).
    ///   - logger: where the engine logs.
    ///   - clock: what back-off and rate-limit waits are timed on.
    public init(
        node: DeviceNode, client: any ClientTransport, accessToken: String, configuration: SyncEngineConfiguration = SyncEngineConfiguration(),
        logger: Logger = Logger(label: "signfleet.sync"), clock: any FleetClock = ContinuousClock()
    ) {
        self.init(node: node, client: client, token: { accessToken }, configuration: configuration, logger: logger, clock: clock)
    }

    init(
        node: DeviceNode, client: any ClientTransport, token: @escaping @Sendable () async throws -> String,
        configuration: SyncEngineConfiguration, logger: Logger, clock: any FleetClock = ContinuousClock()
    ) {
        self.clock = clock
        self.accessToken = token
        self.node = node
        self.client = client
        self.configuration = configuration
        self.logger = logger
    }

    /// Pushes every pending item.
    ///
    /// A `rate_limited` refusal is honoured: the engine waits its `retryAfterMs` before
    /// pushing again, within the pass or, when the pass gave up on it, at the start of the next.
    /// - Throws: `FleetError` when the server refuses the device for good (not enrolled,
    ///   offline signing disabled) or every attempt of a batch failed; `CancellationError`
    ///   after ``cancel()``. Items not acknowledged stay queued either way.
    public func syncAll() async throws -> SyncSummary {
        try await run(upTo: nil)
    }

    /// Pushes the items up to and including `sequence` (earlier items go first: order is kept).
    public func syncOne(sequence: UInt64) async throws -> SyncSummary {
        try await run(upTo: sequence)
    }

    /// Whether the next pass starts by enrolling and reconciling (a new session, or a server
    /// instance other than the one it reconciled with): a device with nothing pending still runs a
    /// pass then, so a restored coordinator gets its retained items back.
    public var needsReconcile: Bool {
        get async {
            let instance = await client.serverInstance
            return !enrolled || instance != enrolledWith
        }
    }

    /// Stops the pass in flight; its items go back to waiting for the next pass.
    public func cancel() {
        running?.cancel()
    }

    private func run(upTo last: UInt64?) async throws -> SyncSummary {
        if let running { _ = try? await running.value }
        let task = Task { try await self.pass(upTo: last) }
        running = task
        defer { running = nil }
        return try await withTaskCancellationHandler {
            try await task.value
        } onCancel: {
            task.cancel()
        }
    }

    /// One pass; ``DeviceEvent/syncEnded(_:)`` is sent however it ends.
    private func pass(upTo limit: UInt64?) async throws -> SyncSummary {
        var summary = SyncSummary(attempted: 0, succeeded: 0, failed: 0, remaining: 0)
        do {
            try await push(upTo: limit, summary: &summary)
        } catch {
            summary.remaining = (try? await node.pendingOutboxItems(limit: Int.max).count) ?? summary.remaining
            await node.endSync(summary)
            throw error
        }
        do {
            summary.remaining = try await node.pendingOutboxItems(limit: Int.max).count
        } catch {
            // Still ended: a subscriber may wait for this pass's end (the fleet's devices do).
            await node.endSync(summary)
            throw error
        }
        await node.endSync(summary)
        return summary
    }

    private func push(upTo limit: UInt64?, summary: inout SyncSummary) async throws {
        if let until = rateLimitedUntil {
            // The server said when it would take requests again; a pass started earlier waits.
            try await clock.sleep(until: until, tolerance: nil)
            rateLimitedUntil = nil
        }
        try await enrollIfNeeded()
        passes &+= 1
        var backoff = configuration.retryBackoff.jitterSeed == nil
            ? configuration.retryBackoff.jittered(seed: Backoff.jitterSeed(for: node.deviceId, salt: passes))
            : configuration.retryBackoff
        var failures = 0
        var renumberings = 0
        var reenrolled = false
        while true {
            let items = try await node.pendingOutboxItems(limit: configuration.batchSize)
                .filter { item in limit.map { item.sequence <= $0 } ?? true }
            let batch = items.compactMap(\.syncItem)
            guard !batch.isEmpty else { break }
            let sequences = batch.map(\.sequence)
            try await node.beginSync(sequences: sequences)
            summary.attempted += batch.count
            let ack: SyncAck
            do {
                try Task.checkCancellation()
                ack = try await client.request(SyncPush(deviceID: node.deviceId, items: batch))
            } catch let error as FleetError where error.code == .unauthenticated && !reenrolled {
                // The server no longer knows this device (its store lost the enrollment): enroll again.
                try await node.cancelSync(sequences: sequences)
                logger.warning("the server does not know this device; enrolling again", metadata: ["error": "\(error)"])
                reenrolled = true
                enrolled = false
                try await enrollIfNeeded()
                continue
            } catch let error as FleetError where error.retryable {
                try await node.recordSyncFailure(sequences: sequences, error: error.description)
                failures += 1
                let retryAfter = error.retryAfterMs.map { Duration.milliseconds(Int64(clamping: $0)) }
                guard failures < configuration.maxAttempts else {
                    summary.failed += batch.count
                    if let retryAfter { rateLimitedUntil = clock.now + retryAfter }
                    throw error
                }
                let delay = retryAfter ?? backoff.next()
                logger.notice("push failed; retrying", metadata: ["error": "\(error)", "after": "\(delay)"])
                try await clock.sleep(for: delay)
                continue
            } catch {
                if error is CancellationError {
                    try? await node.cancelSync(sequences: sequences)
                } else {
                    try? await node.recordSyncFailure(sequences: sequences, error: "\(error)")
                }
                throw error
            }
            let settled = try await node.recordAcknowledgement(ack)
            for result in ack.results {
                if result.outcome == .rejected || result.outcome == .transactionConflict || !result.outcome.isSettled { summary.failed += 1 } else { summary.succeeded += 1 }
            }
            if ack.status == .refused, let refusal = ack.results.last, refusal.outcome == .conflict,
               renumberings < Self.maxRenumberingsPerPass {
                // Another payload holds this number on the server: this store lost its last commits
                // and signed new items under numbers it had already used. They move after the server's.
                renumberings += 1
                let moved = try await node.renumberPending(from: refusal.sequence, serverLastApplied: try Self.checked(ack.lastApplied))
                logger.warning(
                    "the server holds other items under this device's numbers (its store went back in time); renumbered",
                    metadata: [
                        "from": "\(refusal.sequence)", "serverLastApplied": "\(ack.lastApplied)", "items": "\(moved.moves.count)",
                    ])
                continue
            }
            if ack.status == .refused, let refusal = ack.results.last, !refusal.outcome.isSettled {
                // The server will not take this item as it is (another payload holds its number, or
                // its signature is not this device's enrolled key): pushing it again cannot help.
                let error = FleetError(
                    refusal.outcome == .conflict ? .conflict : .badSignature,
                    "the server refused item \(refusal.sequence) (\(refusal.outcome.rawValue)): \(refusal.reason ?? "no reason given")")
                try await node.recordSyncFailure(sequences: sequences.filter { !settled.contains($0) }, error: error.message)
                throw error
            }
            if ack.status == .gap && settled.isEmpty {
                if unrepairable.isEmpty && !reenrolled {
                    // The server went back in time since this session began: reconcile again (sends
                    // what this device retained), then push again.
                    try await node.cancelSync(sequences: sequences)
                    reenrolled = true
                    enrolled = false
                    try await enrollIfNeeded()
                    continue
                }
                // The server expects an item this device no longer has: nothing can be resent.
                let error = FleetError(
                    .storeRegression,
                    "the server expects item \(ack.expectedSequence ?? 0) but this device's next item is \(sequences[0]): the server's store lost items this device holds receipts for (\(Self.describe(unrepairable))) and this device no longer holds them")
                try await node.recordSyncFailure(sequences: sequences, error: error.message)
                throw error
            }
            failures = 0
            backoff.reset()
        }
    }

    /// Enrolls the device's key once per engine, that is once per session (the server answers a
    /// repeat the same way), and reconciles the outbox with what the server says it applied.
    private func enrollIfNeeded() async throws {
        if enrolled, await client.serverInstance != enrolledWith { enrolled = false }
        guard !enrolled else { return }
        let position = try await node.outboxPosition()
        // How far this device's receipts reach: a server that applied less says so too.
        let reply = try await client.request(EnrollDevice(
            accessToken: try await accessToken(), deviceID: node.deviceId, publicKey: node.publicKey,
            acknowledgedThrough: position.lastSettled > 0 ? position.lastSettled : nil))
        enrolled = true
        enrolledWith = await client.serverInstance
        try await node.dropExpiredRetainedPayloads()
        try await reconcile(serverLastApplied: try Self.checked(reply.lastAppliedSequence), position: position)
    }

    /// Compares the server's last applied item with this store (docs/sync.md, "When a store goes back
    /// in time"): a server behind the device's receipts gets the retained items again; a store behind
    /// the server numbers its next items after the server's.
    private func reconcile(serverLastApplied: UInt64, position: OutboxPosition) async throws {
        unrepairable = []
        if serverLastApplied < position.lastSettled {
            try await resendRetained(after: serverLastApplied, upTo: position.lastSettled)
        } else if let behind = try await node.recordServerAhead(of: serverLastApplied) {
            logger.warning(
                "this device's store is behind the server (it lost its last commits); new items are numbered after the server's",
                metadata: ["serverLastApplied": "\(behind.serverLastApplied)", "deviceLastSequence": "\(behind.deviceLastSequence)"])
        }
    }

    /// The items after `serverLastApplied` up to `lastSettled` that this store retained, sent again in
    /// order with their original signatures; the rest is recorded as unrepairable.
    private func resendRetained(after serverLastApplied: UInt64, upTo lastSettled: UInt64) async throws {
        let retained = try await node.retainedSyncItems(in: (serverLastApplied + 1)...lastSettled)
        // Only a run without holes from the server's next number can apply.
        var run: [SyncItem] = []
        for item in retained where item.sequence == serverLastApplied + 1 + UInt64(run.count) { run.append(item) }
        let firstMissing = serverLastApplied + 1 + UInt64(run.count)
        if firstMissing <= lastSettled { unrepairable = [firstMissing...lastSettled] }
        await node.announce(ServerRegression(
            serverLastApplied: serverLastApplied, deviceLastSettled: lastSettled, resent: run.map(\.sequence), lost: unrepairable))
        logger.error(
            "the server has lost items this device holds receipts for (its store went back in time)",
            metadata: [
                "serverLastApplied": "\(serverLastApplied)", "deviceLastSettled": "\(lastSettled)", "resending": "\(run.count)",
                "lost": "\(Self.describe(unrepairable))",
            ])
        var start = 0
        while start < run.count {
            let batch = Array(run[start..<min(run.count, start + configuration.batchSize)])
            let ack = try await client.request(SyncPush(deviceID: node.deviceId, items: batch))
            guard ack.status == .ok else {
                throw FleetError(
                    .storeRegression, "the server refused retained item \(batch[0].sequence) sent again (\(ack.status.rawValue), last applied \(ack.lastApplied))")
            }
            start += batch.count
        }
    }

    /// A server's `lastApplied` within the sequence range (at most 2^63 - 1, what stores hold):
    /// beyond it the arithmetic on it would overflow, so it is refused as the malformed answer it is.
    static func checked(_ lastApplied: UInt64) throws(FleetError) -> UInt64 {
        guard lastApplied <= UInt64(Int64.max) else {
            throw FleetError(.malformedMessage, "the server says it applied up to \(lastApplied), beyond any sequence number (at most 2^63 - 1)")
        }
        return lastApplied
    }

    static func describe(_ ranges: [ClosedRange<UInt64>]) -> String {
        ranges.isEmpty ? "none" : ranges.map { $0.count == 1 ? "\($0.lowerBound)" : "\($0.lowerBound)…\($0.upperBound)" }.joined(separator: ", ")
    }
}
