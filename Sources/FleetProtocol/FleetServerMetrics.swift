import Metrics

/// The metrics a ``FleetServer`` reports through swift-metrics.
///
/// The server never bootstraps a metrics backend: it uses the factory it is given
/// (by default the process-wide `MetricsSystem.factory`, which the executable
/// bootstraps). Tests pass their own factory to read the values back.
///
/// | name | kind | dimensions |
/// |---|---|---|
/// | `signfleet_requests_total` | counter | `type` (request type, `other` for unknown types), `outcome` (reply type or error code) |
/// | `signfleet_connected_devices` | gauge | — (devices alive in the liveness table) |
/// | `signfleet_replies_dropped_total` | counter | `reason`: `peer_not_reading` (its queue was full), `peer_gone` (disconnected) |
/// | `signfleet_requests_dropped_total` | counter | `reason`: `peer_over_budget` (the connection sent more than its message budget) |
/// | `signfleet_requests_shed_total` | counter | `reason`: `capacity`, `peer_queue`, `queue_age`, `strangers` (answered `busy` without being worked on) |
/// | `signfleet_memory_returns_total` | counter | — (times freed memory was given back to the system after peers left) |
/// | `signfleet_peer_connections` | gauge | — (TCP connections open on the server's socket, handshaken or not) |
public struct FleetServerMetrics: Sendable {
    /// Label of the request counter.
    public static let requestsLabel = "signfleet_requests_total"
    /// Label of the connected-devices gauge.
    public static let connectedDevicesLabel = "signfleet_connected_devices"

    let factory: any MetricsFactory
    let connectedDevices: Gauge
    /// Label of the open-connections gauge.
    public static let peerConnectionsLabel = "signfleet_peer_connections"
    let peerConnections: Gauge

    /// Creates the server's metrics on `factory`.
    public init(factory: any MetricsFactory) {
        self.factory = factory
        connectedDevices = Gauge(label: Self.connectedDevicesLabel, factory: factory)
        connectedDevices.record(0)
        peerConnections = Gauge(label: Self.peerConnectionsLabel, factory: factory)
        peerConnections.record(0)
    }

    /// Label of the dropped-replies counter.
    public static let droppedRepliesLabel = "signfleet_replies_dropped_total"

    /// Label of the dropped-requests counter.
    public static let droppedRequestsLabel = "signfleet_requests_dropped_total"

    /// Label of the shed-requests counter.
    public static let shedRequestsLabel = "signfleet_requests_shed_total"

    /// Counts a request answered `busy` without being worked on.
    func countShedRequest(reason: String) {
        Counter(label: Self.shedRequestsLabel, dimensions: [("reason", reason)], factory: factory).increment()
    }

    /// Label of the memory-returns counter.
    public static let memoryReturnsLabel = "signfleet_memory_returns_total"

    /// Counts one return of freed memory to the system.
    func countMemoryReturn() {
        Counter(label: Self.memoryReturnsLabel, factory: factory).increment()
    }

    /// Counts a message dropped unread (its connection was over its budget).
    func countDroppedRequest(reason: String) {
        Counter(label: Self.droppedRequestsLabel, dimensions: [("reason", reason)], factory: factory).increment()
    }

    /// Counts a reply that never left: its peer's queue was full, or the peer was gone.
    func countDroppedReply(reason: String) {
        Counter(label: Self.droppedRepliesLabel, dimensions: [("reason", reason)], factory: factory).increment()
    }

    /// Counts one answered request. Types outside the protocol's catalog are counted as
    /// `other`, so a misbehaving peer cannot create unbounded label values.
    func countRequest(type: MessageType?, outcome: String) {
        let typeLabel: String
        if let type, FleetMessageCatalog.requestTypes.contains(type) {
            typeLabel = type.description
        } else {
            typeLabel = "other"
        }
        Counter(label: Self.requestsLabel, dimensions: [("type", typeLabel), ("outcome", outcome)], factory: factory).increment()
    }
}
