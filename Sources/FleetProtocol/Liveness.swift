/// Paranoid-Pirate liveness of one peer, as a pure state machine: the peer is
/// alive while it has been heard from within `interval * liveness`.
public struct PeerLiveness: Sendable, Hashable {
    public enum State: String, Sendable, Hashable {
        /// Not yet heard from.
        case unknown
        case alive
        /// Silent for longer than the timeout.
        case lost
    }

    public var interval: Duration
    public var liveness: Int
    public private(set) var state: State = .unknown
    public private(set) var lastHeard: ContinuousClock.Instant?

    public init(interval: Duration, liveness: Int) {
        self.interval = interval
        self.liveness = max(1, liveness)
    }

    /// How long the peer may stay silent before it is lost.
    public var timeout: Duration { interval * liveness }

    /// Records a message from the peer; returns the new state when it changed.
    public mutating func heard(at now: ContinuousClock.Instant) -> State? {
        lastHeard = now
        return transition(to: .alive)
    }

    /// Does not count `absence` against the peer: its silence so far is shortened by it (the
    /// listener itself was not running then, so it cannot tell the peer's silence from its own).
    /// Never past `now`: a peer heard since the listener woke keeps that time.
    public mutating func excuse(_ absence: Duration, now: ContinuousClock.Instant) {
        guard absence > .zero, let heard = lastHeard else { return }
        lastHeard = min(heard.advanced(by: absence), max(heard, now))
    }

    /// Checks for silence (longer than ``timeout``, and than `minimum` when that is longer);
    /// returns `.lost` when the peer has just been lost.
    public mutating func check(at now: ContinuousClock.Instant, atLeast minimum: Duration = .zero) -> State? {
        guard state == .alive, let lastHeard, lastHeard.duration(to: now) > max(timeout, minimum) else { return nil }
        return transition(to: .lost)
    }

    private mutating func transition(to next: State) -> State? {
        guard next != state else { return nil }
        state = next
        return next
    }
}

/// Liveness of many peers (the server's view of its devices).
public struct LivenessTable<Peer: Hashable & Sendable>: Sendable {
    public var interval: Duration
    public var liveness: Int
    private var peers: [Peer: PeerLiveness] = [:]

    public init(interval: Duration, liveness: Int) {
        self.interval = interval
        self.liveness = liveness
    }

    public var alivePeers: [Peer] { peers.filter { $0.value.state == .alive }.map(\.key) }

    /// How many peers are alive, in constant time: a peer enters the table alive (``heard(_:at:)``)
    /// and leaves it when lost (``sweep(at:)``).
    public var aliveCount: Int { peers.count }

    public func state(of peer: Peer) -> PeerLiveness.State { peers[peer]?.state ?? .unknown }

    /// Records a message from `peer`; returns `.alive` when it just became alive.
    public mutating func heard(_ peer: Peer, at now: ContinuousClock.Instant) -> PeerLiveness.State? {
        var entry = peers[peer] ?? PeerLiveness(interval: interval, liveness: liveness)
        // The table's interval may have grown since (the server announces longer intervals to a
        // larger fleet): every peer is judged by the longest one announced.
        entry.interval = interval
        entry.liveness = liveness
        let changed = entry.heard(at: now)
        peers[peer] = entry
        return changed
    }

    /// ``PeerLiveness/excuse(_:)`` for every peer: the server was stopped or starved of CPU for
    /// `absence`, and the messages its devices sent then are still unread in its socket.
    public mutating func excuse(_ absence: Duration, now: ContinuousClock.Instant) {
        guard absence > .zero else { return }
        for peer in Array(peers.keys) { peers[peer]?.excuse(absence, now: now) }
    }

    /// Returns the peers lost since the last sweep. Lost peers are forgotten,
    /// so a table serving a churning fleet does not grow without bound.
    public mutating func sweep(at now: ContinuousClock.Instant) -> [Peer] {
        var lost: [Peer] = []
        for peer in Array(peers.keys) where peers[peer]?.check(at: now) == .lost {
            lost.append(peer)
            peers[peer] = nil
        }
        return lost
    }
}
