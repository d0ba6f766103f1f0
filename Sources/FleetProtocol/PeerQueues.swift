/// A message as the server's receive loop took it off the socket.
struct ReceivedRequest: Sendable {
    var request: InboundMessage
    var receivedAt: ContinuousClock.Instant
    var credential: PeerCredential
    /// Counted in the strangers' share of the capacity (``FleetServerConfiguration/maxStrangerRequests``).
    var stranger = false
}

/// The bookkeeping behind ``FleetServer``'s concurrency: one FIFO per peer, so a peer's
/// requests are handled one at a time in arrival order while different peers proceed in
/// parallel, and a count of requests taken but not finished, bounded by `capacity`.
///
/// A peer is *active* from the moment its first request is enqueued until ``next(for:)``
/// finds its queue empty; exactly one handler task drains an active peer.
struct PeerQueues<Element> {
    let capacity: Int
    private var queues: [[UInt8]: [Element]] = [:]
    /// Requests enqueued and not yet reported ``finished()``.
    private(set) var outstanding = 0

    init(capacity: Int) {
        self.capacity = max(1, capacity)
    }

    /// Whether another request may be taken off the socket.
    var hasCapacity: Bool { outstanding < capacity }

    /// Peers with requests in progress or queued.
    var activePeers: Int { queues.count }

    /// Whether `peer` has a request in progress or waiting.
    func isActive(_ peer: [UInt8]) -> Bool { queues[peer] != nil }

    /// Requests of `peer` waiting behind the one in progress.
    func queued(for peer: [UInt8]) -> Int { queues[peer]?.count ?? 0 }

    /// Queues `element` for `peer`. Returns true when the peer was idle, so the caller must
    /// start a handler for it; false when a handler is already draining it.
    mutating func enqueue(_ element: Element, for peer: [UInt8]) -> Bool {
        outstanding += 1
        if queues[peer] != nil {
            queues[peer]!.append(element)
            return false
        }
        queues[peer] = [element]
        return true
    }

    /// The peer's next request, or nil when it has none left (the peer becomes idle, and the
    /// handler draining it must stop).
    mutating func next(for peer: [UInt8]) -> Element? {
        guard queues[peer]?.isEmpty == false else {
            queues[peer] = nil
            return nil
        }
        return queues[peer]?.removeFirst()
    }

    /// One request taken by ``next(for:)`` has been answered.
    mutating func finished() {
        outstanding = max(0, outstanding - 1)
    }
}
