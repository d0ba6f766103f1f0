import FleetProtocol
import Foundation
import Logging

/// Settings of a ``SyncEngine``.
public struct SyncEngineConfiguration: Sendable {
    /// Outbox items per `sync.push`.
    public var batchSize: Int
    /// Pushes of one batch before a pass gives up (each push is itself retried by the client).
    public var maxAttempts: Int
    /// Wait between failed pushes; doubles per failure.
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
    private let client: FleetClient
    private let accessToken: String
    private let logger: Logger
    private var enrolled = false
    /// Set when a pass gave up on a `rate_limited` error: no push is sent before then.
    private var rateLimitedUntil: ContinuousClock.Instant?
    private var running: Task<SyncSummary, any Error>?

    public init(
        node: DeviceNode, client: FleetClient, accessToken: String, configuration: SyncEngineConfiguration = SyncEngineConfiguration(),
        logger: Logger = Logger(label: "signfleet.sync")
    ) {
        self.node = node
        self.client = client
        self.accessToken = accessToken
        self.configuration = configuration
        self.logger = logger
    }

    /// Pushes every pending item.
    ///
    /// A `rate_limited` refusal is honoured: the engine waits its `retryAfterMs` before
    /// pushing again, within the pass or, when the pass gave up on it, at the start of the next.
    /// - Throws: ``FleetError`` when the server refuses the device for good (not enrolled,
    ///   offline signing disabled) or every attempt of a batch failed; `CancellationError`
    ///   after ``cancel()``. Items not acknowledged stay queued either way.
    public func syncAll() async throws -> SyncSummary {
        try await run(upTo: nil)
    }

    /// Pushes the items up to and including `sequence` (earlier items go first: order is kept).
    public func syncOne(sequence: UInt64) async throws -> SyncSummary {
        try await run(upTo: sequence)
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
        summary.remaining = try await node.pendingOutboxItems(limit: Int.max).count
        await node.endSync(summary)
        return summary
    }

    private func push(upTo limit: UInt64?, summary: inout SyncSummary) async throws {
        if let until = rateLimitedUntil {
            // The server said when it would take requests again; a pass started earlier waits.
            try await Task.sleep(until: until, clock: .continuous)
            rateLimitedUntil = nil
        }
        try await enrollIfNeeded()
        var backoff = configuration.retryBackoff
        var failures = 0
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
            } catch let error as FleetError where error.retryable {
                try await node.recordSyncFailure(sequences: sequences, error: error.description)
                failures += 1
                let retryAfter = error.retryAfterMs.map { Duration.milliseconds(Int64(clamping: $0)) }
                guard failures < configuration.maxAttempts else {
                    summary.failed += batch.count
                    if let retryAfter { rateLimitedUntil = .now + retryAfter }
                    throw error
                }
                let delay = retryAfter ?? backoff.next()
                logger.notice("push failed; retrying", metadata: ["error": "\(error)", "after": "\(delay)"])
                try await Task.sleep(for: delay)
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
                if result.outcome == .rejected || !result.outcome.isSettled { summary.failed += 1 } else { summary.succeeded += 1 }
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
                // The server expects an item this device no longer has: nothing can be resent.
                let error = FleetError(
                    .invalidRequest,
                    "the server expects item \(ack.expectedSequence ?? 0) but this device's next item is \(sequences[0]); its items before that were acknowledged earlier")
                try await node.recordSyncFailure(sequences: sequences, error: error.message)
                throw error
            }
            failures = 0
            backoff.reset()
        }
    }

    /// Enrolls the device's key once per engine (the server answers a repeat the same way).
    private func enrollIfNeeded() async throws {
        guard !enrolled else { return }
        _ = try await client.request(EnrollDevice(accessToken: accessToken, deviceID: node.deviceId, publicKey: node.publicKey))
        enrolled = true
    }
}
