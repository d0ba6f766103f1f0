import Synchronization

/// Round-trip times shared by the clients of one process that talk to the same coordinator, as
/// TCP shares them between connections to one host (RFC 9040, "TCP Control Block
/// Interdependence": temporal and ensemble sharing of `srtt` and `rttvar`).
///
/// A client that starts from the configured floor waits 1 s for its first reply even when every
/// other device of its process has just seen replies take 5 s (a coordinator past capacity, or a
/// node process starved of CPU): it times out, asks again, and adds to the load that made the
/// replies late. A client given a memory starts from the estimate the others built, and every reply
/// it times (Karn's rule, as for its own estimate) refines the shared one. Back-off is not shared:
/// one client's timeouts say nothing certain about another's request.
///
/// ```swift
/// let memory = RoundTripMemory()
/// var configuration = FleetClientConfiguration(endpoint: endpoint, deviceID: id)
/// configuration.roundTrips = memory  // the same instance for every device of the process
/// ```
public final class RoundTripMemory: Sendable {
    private let estimate = Mutex(RetransmissionTimeout(floor: .milliseconds(1), ceiling: .seconds(3_600)))

    public init() {}

    /// Adds a reply's round trip to the shared estimate.
    public func record(roundTrip: Duration) {
        estimate.withLock { $0.record(roundTrip: roundTrip) }
    }

    /// `timeout` starting from the shared estimate (unchanged while nothing was recorded).
    public func seeded(_ timeout: RetransmissionTimeout) -> RetransmissionTimeout {
        var seeded = timeout
        seeded.adopt(estimateOf: estimate.withLock { $0 })
        return seeded
    }

    /// The shared `srtt + 4 × rttvar`, nil before the first sample.
    public var observedDelay: Duration? { estimate.withLock { $0.observedDelay } }
}
