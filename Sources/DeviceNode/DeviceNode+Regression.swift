import FleetProtocol
import Foundation

/// Reconciling the outbox with what a server says it applied, when one of the two stores went back
/// in time (docs/sync.md, "When a store goes back in time"). The ``SyncEngine`` calls these at every
/// session start and on a `conflict`; an app with its own transport can too.
extension DeviceNode {
    /// The outbox's highest number, highest receipt and first pending item.
    public func outboxPosition() async throws -> OutboxPosition {
        try ensureOpen()
        return try await storeCall { try await self.store.outboxPosition() }
    }

    /// The server applied up to `serverLastApplied`, beyond anything this store holds: new items are
    /// numbered after it, and ``DeviceEvent/storeBehindServer(_:)`` is sent. Nil (and nothing sent)
    /// when the store is not behind.
    @discardableResult
    public func recordServerAhead(of serverLastApplied: UInt64) async throws -> StoreBehindServer? {
        try ensureOpen()
        let behind = try await storeCall { try await self.store.recordServerAhead(of: serverLastApplied) }
        if let behind { publish(.storeBehindServer(behind)) }
        return behind
    }

    /// Gives the pending items from `first` on the numbers after `serverLastApplied`, each payload
    /// signed again for its new number, and sends ``DeviceEvent/outboxRenumbered(_:)``.
    @discardableResult
    public func renumberPending(from first: UInt64, serverLastApplied: UInt64) async throws -> OutboxRenumbering {
        try ensureOpen()
        let renumbering = try await storeCall { try await self.store.renumberPending(from: first, serverLastApplied: serverLastApplied) }
        if !renumbering.moves.isEmpty { publish(.outboxRenumbered(renumbering)) }
        return renumbering
    }

    /// Settled items in `range` whose signed payload this store still holds (``DeviceConfiguration/retainSynced``),
    /// as they were pushed.
    public func retainedSyncItems(in range: ClosedRange<UInt64>) async throws -> [SyncItem] {
        try ensureOpen()
        return try await storeCall { try await self.store.retainedItems(in: range) }.compactMap(\.syncItem)
    }

    /// Drops the payloads of items synced longer ago than ``DeviceConfiguration/retainSynced``.
    public func dropExpiredRetainedPayloads() async throws {
        try ensureOpen()
        guard let window = configuration.retainSynced else { return }
        let seconds = window.seconds
        let cutoff = configuration.clock().addingTimeInterval(-seconds)
        try await storeCall { try await self.store.dropRetainedPayloads(acknowledgedBefore: cutoff) }
    }

    /// Announces a server that lost items this device holds receipts for.
    func announce(_ regression: ServerRegression) {
        publish(.serverBehind(regression))
    }
}
