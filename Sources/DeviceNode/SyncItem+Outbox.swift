import FleetProtocol

extension OutboxItem {
    /// The item as a `sync.push` item, or `nil` once synced (its payload is dropped).
    public var syncItem: SyncItem? {
        guard let payload else { return nil }
        return SyncItem(sequence: sequence, transactionID: envelope.transactionId, payload: payload, signature: signature)
    }
}
